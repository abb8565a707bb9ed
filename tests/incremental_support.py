"""A small world of conversations loaded through the real loaders, and mart comparisons.

The world changes the way the service does (new conversations, transcripts that grow,
conversations reclassified, rated, escalated, mislabelled, leads scored and qualified and
re-assigned, webhook events that arrive late or for conversations not loaded yet,
re-fetches that change nothing) and is loaded the way `convo extract` and `convo webhooks
ingest` load it: each workspace's list pages and details through ``warehouse._load``
stamped with that workspace (``stage_records(..., workspace=...)``), one transaction per
workspace and batch, each batch with a run id of its own, and signed events through the
real ingest of an archive file.

It has two workspaces that number their records each on its own (a service that numbers
records per workspace, decision D-WORKSPACE-ID): ``ws_b``'s conversations, messages,
escalations, guardrail events and leads have the ids of ``ws_a``'s and are other records.
A record's own ``workspaceId`` is sometimes wrong ("mislabel"): the extraction's
workspace is what counts. Webhook events name their conversation's workspace, and some
name the other workspace for the same conversation id: they belong to that one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson
import polars as pl

from convo_analytics.transform._frames import read_frame
from convo_analytics.warehouse import WHOLE_BODY, RecordPaths, transaction
from convo_analytics.warehouse import _load as load
from convo_analytics.warehouse._marts import REBUILT_MARTS
from convo_analytics.warehouse._topic_tables import KNOWLEDGE_GAPS
from convo_analytics.webhooks import append_signature, ingest, sign

SECRET = b"whsec_incremental_tests_0123456789"
BASE = datetime(2026, 3, 1, tzinfo=UTC)
#: Zones whose days start 10 h before and 5.5 h after UTC's, so that days cut differently.
ZONES = ("UTC", "Pacific/Honolulu", "Asia/Kolkata")
#: Where new conversations go (ws_a more often), each numbered in its own workspace.
WORKSPACES = ("ws_a", "ws_a", "ws_b")
CHANNELS = ("web", "web", "sms", "whatsapp")
INTENTS = ("pricing", "support", None)
SOURCES = ("homepage", "help-center", None)
TIERS = ("fast", "standard", None)
FLAGS = ("pii.email", "pii.phone", "prompt_injection")
DESTINATIONS = ("helpdesk", "crm", None)
#: A reply the default fallback patterns recognise (a knowledge gap whatever its confidence).
FALLBACK = "Sorry, I couldn't find that. Could you rephrase?"


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass
class Conversation:
    id: str
    workspace: str
    channel: str
    intent: str | None
    source: str | None
    created: datetime
    updated: datetime
    status: str = "open"
    ended: datetime | None = None
    rating: int | None = None
    rated: datetime | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    escalations: list[dict[str, Any]] = field(default_factory=list)
    guardrails: list[dict[str, Any]] = field(default_factory=list)
    #: The workspace the record itself names (not trusted: the extraction's one counts).
    claimed: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.workspace, self.id)

    def listed(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "workspaceId": self.claimed or self.workspace,
            "externalUserId": f"u_{self.id}",
            "channel": self.channel,
            "locale": "en-US",
            "intent": self.intent,
            "metadata": {"source": self.source} if self.source else {},
            "status": self.status,
            "createdAt": iso(self.created),
            "updatedAt": iso(self.updated),
            "endedAt": iso(self.ended) if self.ended else None,
            "messageCount": len(self.messages),
            "escalated": bool(self.escalations),
            "escalationCount": len(self.escalations),
            "guardrailTriggerCount": len(self.guardrails),
            "leadId": None,
            "feedbackRating": self.rating,
        }

    def detail(self) -> dict[str, Any]:
        feedback = (
            {"id": f"f_{self.id}", "createdAt": iso(self.rated), "rating": self.rating}
            if self.rated
            else None
        )
        return {
            **self.listed(),
            "messages": self.messages,
            "escalations": self.escalations,
            "guardrailEvents": self.guardrails,
            "feedback": feedback,
        }


class World:
    """The service's state, changed by operations drawn with a seed each."""

    def __init__(self) -> None:
        #: (workspace, id) -> the conversation; the same id may be in both workspaces.
        self.conversations: dict[tuple[str, str], Conversation] = {}
        #: (workspace, lead id) -> the lead.
        self.leads: dict[tuple[str, str], dict[str, Any]] = {}
        self.runs = 0
        self.events = 0
        #: (workspace, kind) -> the escalation or guardrail event ids its events used, so
        #: that the other's events reuse some: a subject is its workspace and its id.
        self.event_subjects: dict[tuple[str, str], list[str]] = {}

    def run_id(self) -> str:
        self.runs += 1
        return f"run{self.runs:04d}"

    # -- the service changing -----------------------------------------------------------------

    def _exchange(self, c: Conversation, rng: random.Random, at: datetime) -> None:
        n = len(c.messages)
        c.messages.append(
            {"id": f"{c.id}_m{n}", "role": "user", "text": "hi", "createdAt": iso(at),
             "channel": c.channel, "policyFlags": []}
        )  # fmt: skip
        if rng.random() < 0.85:
            reply = at + timedelta(milliseconds=rng.randrange(300, 9000))
            # some replies are fallbacks, some used a knowledge source (knowledge gaps);
            # chosen by position, not drawn, so that every other draw stays as it was
            c.messages.append(
                {"id": f"{c.id}_m{n + 1}", "role": "assistant",
                 "text": FALLBACK if n % 3 == 2 else "hello",
                 "createdAt": iso(reply), "channel": c.channel,
                 "latencyMs": rng.choice((None, rng.randrange(100, 4000))),
                 "modelTier": rng.choice(TIERS),
                 "confidence": rng.choice((None, round(rng.random(), 4))), "policyFlags": [],
                 "knowledgeSource": "kb://faq" if n % 4 == 0 else None}
            )  # fmt: skip
        if rng.random() < 0.1:
            c.messages.append(
                {"id": f"{c.id}_m{len(c.messages)}", "role": "agent", "text": "a human",
                 "createdAt": iso(at + timedelta(seconds=20)), "channel": c.channel,
                 "policyFlags": []}
            )  # fmt: skip
        c.updated = max(c.updated, at) + timedelta(seconds=30)

    def in_workspace(self, workspace: str) -> list[Conversation]:
        return [c for key, c in sorted(self.conversations.items()) if key[0] == workspace]

    def new_conversations(self, rng: random.Random) -> list[Conversation]:
        made = []
        for _ in range(rng.randrange(1, 6)):
            workspace = rng.choice(WORKSPACES)
            cid = f"c{len(self.in_workspace(workspace)):03d}"  # numbered per workspace
            start = BASE + timedelta(
                days=rng.randrange(0, 8), hours=rng.choice((0, 1, 9, 13, 22, 23)),
                minutes=rng.randrange(60),
            )  # fmt: skip
            c = Conversation(
                cid, workspace, rng.choice(CHANNELS), rng.choice(INTENTS),
                rng.choice(SOURCES), start, start,
            )  # fmt: skip
            for k in range(rng.randrange(0, 4)):
                self._exchange(c, rng, start + timedelta(minutes=3 * k))
            if rng.random() < 0.5:
                c.status, c.ended = rng.choice(("resolved", "abandoned")), c.updated
            self.conversations[c.key] = c
            made.append(c)
        return made

    def change(self, rng: random.Random) -> list[Conversation]:
        """Changes to old conversations: each one some of what happens to them later."""
        if not self.conversations:
            return self.new_conversations(rng)
        changed = rng.sample(sorted(self.conversations), min(len(self.conversations), 3))
        out = []
        for key in changed:
            c = self.conversations[key]
            cid = c.id
            what = rng.choice(
                ("grow", "late_grow", "reclassify", "rate", "escalate", "flag", "retouch",
                 "mislabel", "close")
            )  # fmt: skip
            later = c.updated + timedelta(minutes=rng.randrange(1, 90))
            if what == "grow":
                self._exchange(c, rng, later)
            elif what == "late_grow":  # a reply weeks later: days far from the start
                self._exchange(c, rng, later + timedelta(days=rng.randrange(9, 30)))
            elif what == "reclassify":
                c.channel, c.intent = rng.choice(CHANNELS), rng.choice(INTENTS)
                c.source = rng.choice(SOURCES)
            elif what == "rate":
                c.rating, c.rated = rng.randrange(1, 6), later
            elif what == "escalate":
                c.escalations.append(
                    {"id": f"{cid}_e{len(c.escalations)}", "createdAt": iso(later),
                     "reasonCode": rng.choice(("user_requested", "sales_opportunity")),
                     "destination": rng.choice(DESTINATIONS), "origin": "automatic"}
                )  # fmt: skip
            elif what == "flag":
                c.guardrails.append(
                    {"id": f"{cid}_g{len(c.guardrails)}", "messageId": f"{cid}_m0",
                     "triggeredAt": iso(later), "flag": rng.choice(FLAGS), "rule": "r",
                     "action": rng.choice(("logged", "escalated")), "excerpt": "a@b.example"}
                )  # fmt: skip
            elif what == "mislabel":  # the record names another workspace: it stays in its own
                c.claimed = rng.choice(("ws_a", "ws_b", None))
            elif what == "close":
                c.status, c.ended = rng.choice(("resolved", "abandoned")), later
            c.updated = max(c.updated, later)
            out.append(c)
        return out

    def lead_changes(self, rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
        """Leads scored, qualified or re-assigned, each with the workspace it is extracted
        from, its conversation's (lead ids are numbered per workspace too: ``l_c001`` may be
        in both)."""
        if not self.conversations:
            return []
        out = []
        for _ in range(rng.randrange(1, 3)):
            c = self.conversations[rng.choice(sorted(self.conversations))]
            ws = c.workspace
            theirs = sorted(lead for w, lead in self.leads if w == ws)
            lead_id = rng.choice((f"l_{c.id}", *theirs[:3]))
            previous = self.leads.get((ws, lead_id))
            created = previous["createdAt"] if previous else iso(c.created + timedelta(minutes=2))
            updated = c.created + timedelta(minutes=rng.randrange(3, 600), days=len(self.leads) % 3)
            if previous and iso(updated) < previous["updatedAt"]:
                updated = datetime.fromisoformat(previous["updatedAt"]) + timedelta(minutes=1)
            score = float(rng.randrange(0, 101))
            lead = {
                "id": lead_id, "conversationId": c.id,
                "workspaceId": rng.choice((ws, ws, "ws_a")),  # not trusted either
                "createdAt": created, "updatedAt": iso(updated),
                "status": "qualified" if score >= 70 else "scored", "score": score,
                "intent": rng.choice(("pricing", "purchase", "support")),
                "qualifiedAt": iso(updated) if score >= 70 else None,
                "email": rng.choice((None, "x@y.example")), "phone": None,
                "contactFields": [], "metadata": {},
            }  # fmt: skip
            self.leads[(ws, lead_id)] = lead
            out.append((ws, lead))
        return out

    def _subject(
        self, rng: random.Random, workspace: str, kind: str, known: list[str], fresh: str
    ) -> str:
        """An event's escalation or guardrail event id: sometimes one a detail of its
        workspace lists (the other workspace's details list the same ids), sometimes one the
        other workspace's events used, else a fresh one."""
        other = "ws_b" if workspace == "ws_a" else "ws_a"
        theirs = self.event_subjects.get((other, kind), [])
        draw = rng.random()
        if known and draw < 0.4:
            chosen = rng.choice(known)
        elif theirs and draw < 0.7:
            chosen = rng.choice(theirs)
        else:
            chosen = fresh
        self.event_subjects.setdefault((workspace, kind), []).append(chosen)
        return chosen

    def late_events(self, rng: random.Random) -> list[dict[str, Any]]:
        """Webhook events: some for facts a detail lists too, some late by weeks, some for a
        conversation not loaded yet, some whose id another conversation's detail lists, some
        naming the other workspace for a conversation id (that workspace's conversation of
        the id, or one it has not loaded)."""
        out = []
        keys = [*sorted(self.conversations), ("ws_a", "ghost1"), ("ws_b", "ghost2")]
        for _ in range(rng.randrange(1, 5)):
            self.events += 1
            workspace, cid = rng.choice(keys)
            c = self.conversations.get((workspace, cid))
            if rng.random() < 0.2:  # the same id in the other workspace
                workspace = "ws_b" if workspace == "ws_a" else "ws_a"
            mine = self.in_workspace(workspace)
            at = (c.updated if c else BASE) + timedelta(
                days=rng.choice((-20, 0, 0, 1, 21)), minutes=rng.randrange(1, 300)
            )
            if rng.random() < 0.5:
                known = [e["id"] for x in mine for e in x.escalations]
                eid = self._subject(rng, workspace, "escalation", known, f"we{self.events}")
                out.append(
                    {"event": "escalation.created", "timestamp": iso(at), "workspaceId": workspace,
                     "conversationId": cid,
                     "data": {"escalationId": eid, "reasonCode": "user_requested",
                              "destination": rng.choice(DESTINATIONS), "origin": "manual"}}
                )  # fmt: skip
            else:
                known = [g["id"] for x in mine for g in x.guardrails]
                gid = self._subject(rng, workspace, "guardrail", known, f"wg{self.events}")
                out.append(
                    {"event": "guardrail.triggered", "timestamp": iso(at),
                     "workspaceId": workspace, "conversationId": cid,
                     "data": {"guardrailEventId": gid, "messageId": "m", "flag": rng.choice(FLAGS),
                              "rule": "r", "action": "logged", "excerpt": "call 555 0100 1234"}}
                )  # fmt: skip
        return out


# -- loading it as the extractor and the ingest do -----------------------------------------------


def by_workspace(items: list[Any], workspace_of: Any) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for item in items:
        grouped.setdefault(workspace_of(item), []).append(item)
    return dict(sorted(grouped.items()))


def load_conversations(
    con: duckdb.DuckDBPyConnection, conversations: list[Conversation], run_id: str
) -> None:
    """One batch of the conversations stream: per workspace, as its own extraction loads it
    (the list page and the details stamped with the workspace), one transaction each."""
    for workspace, batch in by_workspace(conversations, lambda c: c.workspace).items():
        _load_workspace_conversations(con, workspace, batch, run_id)


def _load_workspace_conversations(
    con: duckdb.DuckDBPyConnection, workspace: str, conversations: list[Conversation], run_id: str
) -> None:
    now = datetime.now(UTC)
    page = {"data": [c.listed() for c in conversations]}
    try:
        with transaction(con):
            load.stage_records(
                con,
                "listed",
                [orjson.dumps(page)],
                RecordPaths("data", "id", "updatedAt"),
                workspace=workspace,
            )
            load.insert_raw(con, "raw_conversations", "listed", run_id, now)
            bodies = [orjson.dumps(c.detail()) for c in conversations]
            load.stage_details(
                con,
                "detailed",
                bodies,
                RecordPaths(WHOLE_BODY, "id", "updatedAt"),
                workspace=workspace,
            )
            load.insert_raw(con, "raw_conversation_details", "detailed", run_id, now)
            load.merge_conversations(con, "listed", "detailed", run_id, now, workspace=workspace)
    finally:
        load.unstage(con, "listed", "detailed")


def load_new(con: duckdb.DuckDBPyConnection, world: World, seed: int) -> None:
    """New conversations, loaded by a run of their own."""
    load_conversations(con, world.new_conversations(random.Random(seed)), world.run_id())


def load_changes(con: duckdb.DuckDBPyConnection, world: World, seed: int) -> None:
    """Changes to old conversations, loaded by a run of their own."""
    load_conversations(con, world.change(random.Random(seed)), world.run_id())


def load_leads(
    con: duckdb.DuckDBPyConnection, leads: list[tuple[str, dict[str, Any]]], run_id: str
) -> None:
    """Leads as each workspace's extraction loads them: (workspace, lead) pairs, the lead's
    own ``workspaceId`` not trusted."""
    now = datetime.now(UTC)
    for workspace, pairs in by_workspace(leads, lambda pair: pair[0]).items():
        batch = [lead for _, lead in pairs]
        try:
            with transaction(con):
                load.stage_records(
                    con,
                    "listed",
                    [orjson.dumps({"data": batch})],
                    RecordPaths("data", "id", "updatedAt"),
                    workspace=workspace,
                )
                load.insert_raw(con, "raw_leads", "listed", run_id, now)
                load.merge_leads(con, "listed", run_id, now, workspace=workspace)
        finally:
            load.unstage(con, "listed")


def ingest_events(db: Path, events: list[dict[str, Any]], name: str) -> None:
    """Sign the events and ingest them from an archive file (the warehouse must be closed)."""
    archive = db.parent / f"{name}.jsonl"
    lines = []
    for envelope in events:
        unsigned = orjson.dumps(envelope)
        lines.append(append_signature(unsigned, sign(SECRET, unsigned)))
    archive.write_bytes(b"\n".join(lines) + b"\n")
    result = ingest([archive], [SECRET], db)
    assert not result.quarantined, result.to_json()


# -- comparing marts -------------------------------------------------------------------------------


def marts(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    """Every rebuilt mart's rows (the knowledge gaps too), in one order (all columns sorted)."""
    return {
        t.name: read_frame(con, f"SELECT * FROM {t.name} ORDER BY ALL")
        for t in (*REBUILT_MARTS, KNOWLEDGE_GAPS)
    }


def assert_same_marts(ours: dict[str, pl.DataFrame], theirs: dict[str, pl.DataFrame]) -> None:
    """The same rows with the same values and types, bit for bit (floats compared exactly)."""
    for name, expected in theirs.items():
        got = ours[name]
        if got.equals(expected) and got.schema == expected.schema:
            continue
        on = expected.columns
        extra = got.join(expected, on=on, how="anti", nulls_equal=True)
        missing = expected.join(got, on=on, how="anti", nulls_equal=True)
        differ = [c for c in on if c in got.columns and extra.height == missing.height
                  and not extra[c].equals(missing[c])]  # fmt: skip
        with pl.Config(tbl_cols=-1, tbl_width_chars=400, fmt_str_lengths=60):
            raise AssertionError(
                f"{name}: {got.height} rows vs {expected.height}; schema equal: "
                f"{got.schema == expected.schema}; columns that differ: {differ}\n"
                f"only in the incremental marts:\n{extra}\n"
                f"only in the full rebuild:\n{missing}"
            )
