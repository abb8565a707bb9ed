"""Latent intents: fine-grained needs under the coarse intent, gaps in the knowledge base,
and a ground truth only the admin token sees (decision D-SANDBOX-INTENTS)."""

from __future__ import annotations

import gzip
import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from conftest import ACME_KEY, GLOBEX_KEY, RunningSandbox, make_settings, page_all
from convo_analytics._serving import ServerThread
from convo_analytics.sandbox import Sandbox, create_app, write_history_archive
from convo_analytics.sandbox._corpus import INJECTIONS, RUDE
from convo_analytics.webhooks import parse_archive_line

ADMIN = {"Authorization": "Bearer adm_test_token"}
#: Fields whose value is what a person typed or was told: free text, not a classification.
FREE_TEXT = frozenset({"text", "comment", "excerpt"})
#: First messages any intent's user may send instead of a question.
OTHER_OPENINGS = frozenset(INJECTIONS + RUDE)


def _latent(url: str, workspace: str = "ws_acme", **headers: str) -> httpx.Response:
    path = f"{url}/_sandbox/workspaces/{workspace}/latent-intents"
    return httpx.get(path, headers=headers or ADMIN, timeout=30)


def _truth(url: str, workspace: str = "ws_acme") -> dict[str, Any]:
    r = _latent(url, workspace)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _details(running: RunningSandbox, key: str = ACME_KEY) -> list[dict[str, Any]]:
    with running.client(key) as c:
        listed = page_all(c, "/v1/conversations", {"limit": 200})
        out = []
        for row in listed:
            r = c.get(f"/v1/conversations/{row['id']}")
            r.raise_for_status()
            out.append(r.json())
    return out


@pytest.fixture(scope="module")
def big() -> Iterator[tuple[RunningSandbox, list[dict[str, Any]], dict[str, Any]]]:
    """A 2,000-conversation workspace: its details as a client reads them, and the truth."""
    settings = make_settings(conversations=2000, days=30, workspaces=[("acme", ACME_KEY)])
    sandbox = Sandbox(settings)
    with ServerThread(create_app(sandbox)) as server:
        running = RunningSandbox(sandbox, server)
        yield running, _details(running), _truth(running.url)


def _gist(text: str) -> str:
    """A text without the noise: case, punctuation, a greeting before it, a doubled letter."""
    words = re.findall(r"\w+", text.casefold())
    while words[1:] and words[0] in ("hi", "hello", "hey"):
        words = words[1:]
    return " ".join(re.sub(r"(\w)\1+", r"\1", w) for w in words)


def _first_user_text(conv: dict[str, Any]) -> str | None:
    return next((m["text"] for m in conv["messages"] if m["role"] == "user"), None)


def test_the_catalogue_has_fine_intents_with_varied_phrasings_in_several_languages() -> None:
    from convo_analytics.sandbox._generate import INTENTS
    from convo_analytics.sandbox._intents import LATENT_INTENTS, phrasings

    assert 28 <= len(LATENT_INTENTS) <= 36
    coarse = dict(INTENTS)
    shares: Counter[str] = Counter()
    for latent in LATENT_INTENTS:
        shares[latent.intent] += latent.weight
        english = phrasings(latent, "en") or ()
        assert 8 <= len(set(english)) == len(english) <= 12, latent.name
        assert bool(latent.answers) == latent.has_source, latent.name
    # the coarse mix stays what it was: each coarse intent keeps its share
    assert {k: v / 2 for k, v in shares.items()} == coarse
    assert sum(not latent.has_source for latent in LATENT_INTENTS) == 5
    for lang in ("de", "fr", "es"):
        covered = [li for li in LATENT_INTENTS if 2 <= len(phrasings(li, lang) or ()) <= 5]
        assert len(covered) >= 0.8 * len(LATENT_INTENTS), lang
    for lang in ("pt", "ja", "ar", "nl"):
        assert sum(phrasings(li, lang) is not None for li in LATENT_INTENTS) >= 4, lang


def test_the_admin_route_names_a_latent_intent_for_every_listed_conversation(
    shared_sandbox: RunningSandbox,
) -> None:
    truth = _truth(shared_sandbox.url)
    catalogue = {i["name"]: i for i in truth["intents"]}
    assert 25 <= len(catalogue) <= 40
    coarse = {"product_question", "support", "pricing", "billing", "demo_request", "purchase"}
    coarse |= {"cancellation", "complaint", "partnership", "other"}
    assert {i["intent"] for i in catalogue.values()} == coarse
    gaps = [i for i in catalogue.values() if not i["has_source"]]
    assert 4 <= len(gaps) <= 6 and all(i["source"] is None for i in gaps)
    assert all(i["source"] for i in catalogue.values() if i["has_source"])
    for key, workspace in ((ACME_KEY, "ws_acme"), (GLOBEX_KEY, "globex")):
        with shared_sandbox.client(key) as c:
            listed = page_all(c, "/v1/conversations", {"limit": 100})
        mapping = _truth(shared_sandbox.url, workspace)["conversations"]
        assert len(listed) == 300 and {row["id"] for row in listed} == set(mapping)
        assert set(mapping.values()) <= set(catalogue)
        # the latent intent belongs to the coarse intent the service classified
        for row in listed:
            assert catalogue[mapping[row["id"]]]["intent"] == row["intent"]
    assert _latent(shared_sandbox.url, Authorization="").status_code == 401
    assert _latent(shared_sandbox.url, Authorization=f"Bearer {ACME_KEY}").status_code == 401
    assert _latent(shared_sandbox.url, "ws_nowhere").status_code == 404


def _leaks(value: Any, names: set[str], where: str = "") -> list[str]:
    """Where a JSON value carries a latent intent: a key saying so, or a name as a value."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if "latent" in key.lower() or key in names:
                found.append(f"{where}.{key}")
            if key not in FREE_TEXT:
                found += _leaks(item, names, f"{where}.{key}")
    elif isinstance(value, list):
        for n, item in enumerate(value):
            found += _leaks(item, names, f"{where}[{n}]")
    elif isinstance(value, str) and (value in names or "latent" in value.lower()):
        found.append(f"{where} = {value!r}")
    return found


class _Receiver:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bodies: dict[str, bytes] = {}
        self.app = Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> Response:
        body = await request.body()
        with self.lock:
            self.bodies[request.headers["idempotency-key"]] = body
        return Response(status_code=204)

    def wait_for(self, count: int, timeout: float = 30.0) -> list[bytes]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.bodies) >= count:
                    return list(self.bodies.values())
            time.sleep(0.05)
        raise AssertionError(f"{len(self.bodies)} of {count} deliveries arrived in time")


def test_nothing_a_client_receives_carries_the_latent_intent(
    start_sandbox: Any, tmp_path: Path
) -> None:
    running: RunningSandbox = start_sandbox(conversations=120)
    receiver = _Receiver()
    with ServerThread(receiver.app) as hook:
        with running.client() as c:
            r = c.post("/v1/webhooks", json={"url": hook.url + "/hook", "secret": "whsec_x" * 4})
            assert r.status_code == 201, r.text
        body = {"workspace": "acme", "newConversations": 40, "progress": 15, "seed": 3}
        result = running.admin("/_sandbox/simulate", body)
        deliveries = receiver.wait_for(result["events"])
    truth = _truth(running.url)
    names = {i["name"] for i in truth["intents"]}
    assert set(result["created"]) <= set(truth["conversations"])
    assert set(truth["conversations"].values()) <= names
    payloads: list[tuple[str, Any]] = [
        (f"delivery {n}", orjson.loads(b)) for n, b in enumerate(deliveries)
    ]
    with running.client() as c:
        payloads.append(("conversations", page_all(c, "/v1/conversations", {"limit": 100})))
        leads = page_all(c, "/v1/leads", {"limit": 100, "status": "any"})
        assert leads
        payloads.append(("leads", leads))
        summary = c.get("/v1/analytics/summary", params={"from": "2026-10-01", "to": "2026-11-30"})
        payloads.append(("summary", summary.json()))
    details = _details(running)
    payloads += [(f"detail {d['id']}", d) for d in details]
    archive = tmp_path / "history.jsonl.gz"
    write_history_archive(archive, running.sandbox.workspaces.values(), "whsec_archive_0123")
    for n, line in enumerate(gzip.decompress(archive.read_bytes()).splitlines()):
        raw, headers, record = parse_archive_line(line)
        payloads.append((f"archive line {n}", [orjson.loads(raw), headers, record]))
    assert len(payloads) > 1000
    for where, payload in payloads:
        assert not _leaks(payload, names), (where, _leaks(payload, names))


def test_gaps_cite_no_source_and_end_worse_while_covered_intents_cite_their_own(
    big: tuple[RunningSandbox, list[dict[str, Any]], dict[str, Any]],
) -> None:
    _, details, truth = big
    catalogue = {i["name"]: i for i in truth["intents"]}
    by_coarse: dict[str, set[str]] = defaultdict(set)
    for i in catalogue.values():
        if i["source"]:
            by_coarse[i["intent"]].add(i["source"])
    own = neighbour = 0
    outcome: dict[bool, Counter[str]] = {True: Counter(), False: Counter()}
    for conv in details:
        latent = catalogue[truth["conversations"][conv["id"]]]
        cited = [m["knowledgeSource"] for m in conv["messages"] if m["role"] == "assistant"]
        if latent["has_source"]:
            assert set(cited) - {None} <= by_coarse[latent["intent"]], (conv["id"], cited)
            own += cited.count(latent["source"])
            neighbour += sum(1 for s in cited if s and s != latent["source"])
        else:
            assert cited == [None] * len(cited), (conv["id"], latent["name"], cited)
        if not cited:
            continue
        tally = outcome[latent["has_source"]]
        tally["engaged"] += 1
        reasons = {e["reasonCode"] for e in conv["escalations"]}
        rating = conv["feedback"]["rating"] if conv["feedback"] else None
        tally["low_confidence"] += "low_confidence" in reasons
        tally["abandoned"] += conv["status"] == "abandoned"
        tally["rated"] += rating is not None
        tally["rated_low"] += rating is not None and rating <= 2
    assert own > 1000 and 0 < neighbour < own / 5
    gap, covered = outcome[False], outcome[True]
    assert gap["engaged"] >= 100

    def share(t: Counter[str], key: str, of: str = "engaged") -> float:
        return t[key] / t[of]

    assert share(gap, "low_confidence") > 4 * share(covered, "low_confidence")
    assert share(gap, "abandoned") > 1.8 * share(covered, "abandoned")
    assert share(gap, "rated_low", "rated") > 1.8 * share(covered, "rated_low", "rated")


def test_first_messages_of_an_intent_are_varied_and_in_several_languages(
    big: tuple[RunningSandbox, list[dict[str, Any]], dict[str, Any]],
) -> None:
    _, details, truth = big
    texts: dict[str, set[str]] = defaultdict(set)
    gists: dict[str, set[str]] = defaultdict(set)  # English phrasings, noise taken off
    for conv in details:
        text = _first_user_text(conv)
        if text is None or text in OTHER_OPENINGS or text.startswith("my card is"):
            continue
        name = truth["conversations"][conv["id"]]
        texts[name].add(text)
        if (conv["locale"] or "en").startswith("en"):
            gists[name].add(_gist(text))
    counts = Counter(truth["conversations"].values())
    frequent = [name for name, count in counts.items() if count >= 60]
    assert len(frequent) >= 12
    for name in frequent:
        assert len(gists[name]) >= 5, (name, gists[name])
    # a text stands for one intent, but intents of one coarse intent share words
    owners: dict[str, set[str]] = defaultdict(set)
    for name, found in texts.items():
        for text in found:
            owners[text.lower().strip(" ?.!")].add(name)
    assert sum(len(o) > 1 for o in owners.values()) < len(owners) / 50
    scripts = {
        "de": ("ä", "ö", "ü", "ß", "ich ", "wir "),
        "fr": ("é", "è", "ç", "vous", "est-ce"),
        "es": ("¿", "ñ", "¡"),
        "ja": tuple(chr(c) for c in range(0x3040, 0x30FF)),
        "ar": tuple(chr(c) for c in range(0x0621, 0x064A)),
    }
    firsts = [t.lower() for set_ in texts.values() for t in set_]
    for lang, marks in scripts.items():
        assert any(any(m in t for m in marks) for t in firsts), lang
    # most conversations in German write in German; some write in English anyway
    german = [c for c in details if (c["locale"] or "").startswith("de")]
    opening = [t.lower() for t in map(_first_user_text, german) if t is not None]
    in_german = sum(any(m in t for m in scripts["de"]) for t in opening)
    assert len(opening) > 100 and len(opening) / 3 < in_german < len(opening)


def test_the_same_settings_give_the_same_latent_intents_and_another_seed_does_not(
    start_sandbox: Any,
) -> None:
    one, two = start_sandbox(), start_sandbox()
    other = start_sandbox(seed=8)
    assert orjson.dumps(_truth(one.url)) == orjson.dumps(_truth(two.url))
    assert orjson.dumps(_details(one)) == orjson.dumps(_details(two))
    first = _truth(one.url)["conversations"]
    assert list(first.values()) != list(_truth(other.url)["conversations"].values())
