"""Every command walked through its user errors, as a user runs it (a real process).

Each row is a command line a user could type with a mistake in it: a missing
setting, a path that is not there, a busy port, a URL without a scheme, a bad
value. Each must end with exit status 2 and one line on stderr
(``error: ... (see 'convo ... --help')``), no traceback, no secret, and leave
nothing behind (no warehouse created, no run recorded). The API key and the
webhook secret are set in every row's environment, so a message that echoed
them would fail here.

Each row is a process of its own, forked from one that imported the CLI once
(``cli_fork_support``, decision D-TEST-FORKED-CLI): importing it in each row's
process was most of this module's time. The imports print nothing (checked), and
a few rows of different commands are also run in a fresh ``python -m
convo_analytics.cli`` and must do exactly what their forked run did.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from queue import Queue

import pytest

from cli_fork_support import ForkedCli

SECRET = "sk-live-USER-ERROR-SECRET-5b4a"
HOOK_SECRET = "whsec_USER_ERROR_SECRET_77e1"
NO_DB = "no/such/warehouse.duckdb"
#: A warehouse in a folder nobody (root included) can make a file in: sysfs.
READ_ONLY_DB = "/sys/warehouse.duckdb"


@dataclass(frozen=True)
class Case:
    """A command line with a user error, and what its one line must say."""

    args: tuple[str, ...]
    says: str
    env: dict[str, str] = field(default_factory=dict)
    #: Environment variables removed for this row (e.g. the API key, to test its absence).
    unset: tuple[str, ...] = ()
    #: Prepares the row's folder (a config, a warehouse); what it makes may stay.
    setup: Callable[[Path], None] | None = None
    #: Files the row's folder starts with (a config, a token store; a name ending in "/" is
    #: a folder); the row may leave nothing else behind.
    files: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        given = [f"{k}={v}" for k, v in self.env.items()] + [f"-{k}" for k in self.unset]
        return " ".join([*self.args, *given])[:90]


BUSY = "{busy}"  # replaced by a port a socket of this module listens on
#: Two workspaces with their own webhook secrets (the config a row's setup writes).
TWO_WORKSPACES = {"CONVO_CONFIG": "two.toml", "ACME_HOOKS": "whsec_acme_USER_ERROR_01",
                  "GLOBEX_HOOKS": "whsec_globex_USER_ERROR_2"}  # fmt: skip


def _two_workspaces(folder: Path, acme_id: str | None = None) -> None:
    acme = f'workspace_id = "{acme_id}"\n' if acme_id else ""
    (folder / "two.toml").write_text(
        '[[workspaces]]\nname = "acme"\n' + acme + 'webhook_secrets_env = "ACME_HOOKS"\n'
        '[[workspaces]]\nname = "globex"\nwebhook_secrets_env = "GLOBEX_HOOKS"\n'
    )


def _flat_quarantine(folder: Path) -> None:
    """A warehouse with a flat endpoint's line in the quarantine (a wrong secret)."""
    from convo_analytics.webhooks import ingest
    from webhook_support import delivery, event

    archive = folder / "flat.jsonl"
    archive.write_bytes(delivery(event(1), secret=b"whsec_someone_else_000"))
    ingest([archive], [HOOK_SECRET.encode()], folder / "flat.duckdb")


def _topics_warehouse(folder: Path) -> None:
    """A warehouse whose workspace ws_acme has topics 0 to 2, and one without topics."""
    from convo_analytics.warehouse import open_warehouse

    open_warehouse(folder / "empty.duckdb").close()
    con = open_warehouse(folder / "t.duckdb")
    con.executemany(
        "INSERT INTO mart_topics (workspace_id, topic_id, topic, label, effective_topic_id, "
        "effective_label, conversations, pinned, renamed, retired) "
        "VALUES ('ws_acme', ?, ?, ?, ?, ?, 5, false, false, false)",
        [(i, str(i), f"t{i}", i, f"t{i}") for i in range(3)],
    )
    con.close()


def _empty_warehouse(folder: Path) -> None:
    """A warehouse with its tables and nothing in them (w.duckdb)."""
    from convo_analytics.warehouse import open_warehouse

    open_warehouse(folder / "w.duckdb").close()


def _old_warehouse(folder: Path) -> None:
    """A warehouse from before the webhook lifecycle, the privacy findings and the erasure
    (old.duckdb: its conversations and workspaces only)."""
    import duckdb

    con = duckdb.connect(str(folder / "old.duckdb"))
    con.execute("CREATE TABLE workspaces (name VARCHAR, workspace_id VARCHAR)")
    con.execute("CREATE TABLE conversations (id VARCHAR, workspace_id VARCHAR)")
    con.close()


def _published(folder: Path) -> None:
    """An empty warehouse published where `convo notebook run` looks (data/published)."""
    from convo_analytics.publish import publish_snapshot
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(folder / "w.duckdb")
    try:
        publish_snapshot(con, folder / "w.duckdb", folder / "data" / "published")
    finally:
        con.close()


def _torn_bindings(folder: Path) -> None:
    """The receiver's workspace bindings, torn by hand."""
    _two_workspaces(folder)
    bindings = folder / "data" / "webhooks" / "workspaces" / ".workspace-ids"
    bindings.parent.mkdir(parents=True)
    bindings.write_text('{"acme": ')


def _rebound_workspace(folder: Path) -> None:
    """acme bound to ws_acme in the warehouse, then configured with globex's id."""
    import duckdb

    from convo_analytics.warehouse import open_warehouse

    _two_workspaces(folder, acme_id="ws_globex")
    open_warehouse(folder / "bound.duckdb").close()
    con = duckdb.connect(str(folder / "bound.duckdb"))
    con.execute("INSERT INTO workspaces (name, workspace_id, id_origin) VALUES "
                "('acme', 'ws_acme', 'learned'), ('globex', 'ws_globex', 'learned')")  # fmt: skip
    con.close()
    from webhook_support import delivery, event

    acme = folder / "data" / "webhooks" / "workspaces" / "acme"
    acme.mkdir(parents=True)
    (acme / "d.jsonl").write_bytes(delivery(event(1), secret=b"whsec_acme_USER_ERROR_01"))


#: One OAuth workspace (nothing listens at its base URL: every row refuses before a request).
OAUTH_TOML = """[[workspaces]]
name = "acme"
base_url = "https://api.example.com"
auth = { type = "oauth", client_id = "c" }
"""
#: A workspace on a loopback port, for `convo sandbox serve --for-config` (its key: $LOCAL_KEY).
LOCAL_TOML = """[[workspaces]]
name = "acme"
base_url = "http://127.0.0.1:18999"
auth = { type = "api_key", key_env = "LOCAL_KEY" }
"""
PLAIN_ISSUER_TOML = OAUTH_TOML.replace('"c" }', '"c", issuer = "http://auth.example.com" }')
PLAIN_BASE_TOML = OAUTH_TOML.replace("https://api", "http://api")
_TOKEN = {"access_token": "a", "refresh_token": "r", "expires_at": 1,
          "token_endpoint": "https://api.example.com/oauth/token"}  # fmt: skip
#: Token stores as a hand edit or a full disk leaves them.
TOKENS_SOON = json.dumps({"acme": {**_TOKEN, "expires_at": "soon"}})
TOKENS_FOREIGN = json.dumps({"acme": {**_TOKEN, "token_endpoint": "https://evil.example/t"}})
TOKENS_REVOKE_FOREIGN = json.dumps(
    {"acme": {**_TOKEN, "revocation_endpoint": "https://evil.example/r"}}
)
CASES = [
    Case(("sandbox", "archive", "--out", "a.jsonl", "--incident", "2026-11-13,web"),
         "expected DAY,CHANNEL,INTENT", env={"CONVO_WEBHOOK_SECRET": "whsec_incident_0123"}),
    # convo monitors: a monitor's table, metric and name checked, one line each
    Case(("monitors", "list"), "m.toml:3: [[monitors]] #1 k: Input should be greater than 0",
         env={"CONVO_CONFIG": "m.toml"},
         files={"m.toml": '[monitoring]\nenabled = true\n[[monitors]]\nname = "esc"\n'
                          'metric = "escalationRate"\nk = 0\n'}),
    Case(("monitors", "list", "--json"), "did you mean escalationRate",
         env={"CONVO_CONFIG": "m.toml"},
         files={"m.toml": '[[monitors]]\nname = "esc"\nmetric = "escalationrate"\n'}),
    Case(("monitors", "history", "nope", "--db", "gone.duckdb"), "no monitor named 'nope'",
         env={"CONVO_CONFIG": "m.toml"},
         files={"m.toml": '[[monitors]]\nname = "esc"\nmetric = "escalationRate"\n'}),
    Case(("monitors", "test", "esc", "--db", "gone.duckdb"), "does not exist",
         env={"CONVO_CONFIG": "m.toml"},
         files={"m.toml": '[[monitors]]\nname = "esc"\nmetric = "escalationRate"\n'}),
    Case(("monitors", "test", "tz"), "not an IANA time zone",
         env={"CONVO_CONFIG": "m.toml"},
         files={"m.toml": '[[monitors]]\nname = "tz"\nmetric = "csat"\ntimezone = "Mars/Base"\n'}),
    Case(("monitors", "list", "--db", "x.duckdb"), "which have no model tier",
         env={"CONVO_CONFIG": "m.toml"},
         files={"m.toml": '[[monitors]]\nname = "t"\nmetric = "csat"\n'
                          'filters = { tier = ["fast"] }\n'}),
    Case(("monitors", "evaluate", "--db", "gone.duckdb"), "does not exist"),
    Case(("monitors", "delete", "esc"), "remove its table there",
         env={"CONVO_CONFIG": "m.toml"},
         files={"m.toml": '[[monitors]]\nname = "esc"\nmetric = "escalationRate"\n'}),
    Case(("monitors", "delete", "other"), "no monitor named 'other' in the dashboard's store"),
    # convo topics discover: the input file's problems, one line each, nothing written
    Case(("topics", "discover", "--input", "gone.jsonl", "--out", "t.jsonl"), "does not exist"),
    Case(("topics", "discover", "--input", "a.txt", "--out", "t.jsonl"), "--format jsonl",
         files={"a.txt": "hello\n"}),
    Case(("topics", "discover", "--input", "a.jsonl", "--out", "t.jsonl"), "a.jsonl:2: not a JSON",
         files={"a.jsonl": '{"text": "hi"}\nnot json\n'}),
    Case(("topics", "discover", "--input", "b.jsonl", "--out", "t.jsonl"), "--text-field",
         files={"b.jsonl": '{"body": "hi"}\n'}),
    Case(("topics", "discover", "--input", "c.jsonl", "--out", "t.jsonl"), "already used at",
         files={"c.jsonl": '{"id": 1, "text": "a"}\n{"id": 1, "text": "b"}\n'}),
    Case(("topics", "discover", "--input", "a.csv", "--out", "t.jsonl", "--text-field", "msg"),
         "no field 'msg'", files={"a.csv": "id,text\n1,hello\n"}),
    Case(("topics", "discover", "--input", "a.jsonl", "--out", "-", "--json"), "--out -",
         files={"a.jsonl": '{"text": "hi"}\n'}),
    # convo topics list|rename|merge|...: curations checked against the warehouse's topics
    Case(("topics", "list", "--db", "gone.duckdb"), "does not exist"),
    Case(("topics", "list", "--db", "empty.duckdb"), "no workspace has topics yet",
         setup=_topics_warehouse),
    Case(("topics", "list", "--db", "t.duckdb", "--workspace", "nobody"), "no topics for it",
         setup=_topics_warehouse),
    Case(("topics", "rename", "9", "Refunds", "--db", "t.duckdb"), "not a topic of ws_acme",
         setup=_topics_warehouse),
    Case(("topics", "rename", "1", "  ", "--db", "t.duckdb"), "non-empty name",
         setup=_topics_warehouse),
    Case(("topics", "merge", "1", "--into", "1", "--db", "t.duckdb"), "into itself",
         setup=_topics_warehouse),
    Case(("topics", "merge", "1", "--into", "0", "--db", "t.duckdb"), "'other') is not merged",
         setup=_topics_warehouse),
    Case(("topics", "unmerge", "7", "--db", "t.duckdb"), "not a topic of ws_acme",
         setup=_topics_warehouse),
    Case(("topics", "split", "1", "--matching", " ", "--name", "X", "--db", "t.duckdb"),
         "--matching", setup=_topics_warehouse),
    Case(("topics", "pin", "5", "--db", "t.duckdb"), "not a topic of ws_acme",
         setup=_topics_warehouse),
    Case(("topics", "unpin", "1", "--db", "t.duckdb", "--workspace", "ws_globex"),
         "no topics for it", setup=_topics_warehouse),
    Case(("topics", "rediscover", "--db", "t.duckdb", "--workspace", "nobody"),
         "no topics for it", setup=_topics_warehouse),
    Case(("topics", "curations",), "cannot be read",
         {"CONVO_TOPICS_CURATIONS_FILE": "store/"}, files={"store/": ""}),
    # issue 26: the endpoint tables from the environment, named by their variable
    Case(("config", "show"), "must be JSON where it sets a table",
         {"CONVO_EXTRACT__FIELDS": "not json"}),
    Case(("config", "show"), "$CONVO_EXTRACT__STREAMS__LEADS__PAGE_SIZE: extract.streams",
         {"CONVO_EXTRACT__STREAMS__LEADS__PAGE_SIZE": "0"}),
    Case(("config", "show"), "CONVO_SERVICE_TIMEOUT_SECONDS",
         {"CONVO_SERVICE_TIMEOUT_SECONDS": "soon"}),
    Case(("config", "path"), "gone.toml", {"CONVO_CONFIG": "gone.toml"}),
    Case(("extract",), "CONVO_API_KEY", unset=("CONVO_API_KEY",)),
    Case(("extract", "--base-url", "127.0.0.1:18787"), "has no scheme"),
    Case(("extract", "--base-url", "ftp://example.com"), "http:// or https://"),
    Case(("extract", "--streams", "conversations,bogus"), "bogus"),
    Case(("extract", "--backfill-from", "yesterday"), "YYYY-MM-DD"),
    Case(("extract", "--write-config", "x.toml"), "--check"),
    Case(("extract", "--rate-limit", "fast"), "rate"),
    Case(("extract", "--db", READ_ONLY_DB), "run.lock_file"),  # no lock file beside it
    Case(("transform", "--db", NO_DB), "does not exist"),
    Case(("transform", "--tz", "Mars/Base"), "Mars/Base"),
    Case(("export", "summary", "--from", "2026-01-01", "--to", "2026-01-02", "--db", NO_DB),
         "does not exist"),
    Case(("export", "summary", "--from", "01/02/2026", "--to", "2026-01-02"), "YYYY-MM-DD"),
    Case(("export", "summary", "--from", "2026-01-01"), "--to"),
    Case(("export", "guardrails", "--from", "2026-01-01", "--to", "2026-01-02", "--format",
          "xml"), "jsonl, csv or parquet"),
    Case(("export", "guardrails", "--from", "2026-01-01", "--to", "2026-01-02", "--db", NO_DB),
         "does not exist"),
    # issue 27: the knowledge-gap report's inputs, and the fallback patterns it is made with
    Case(("export", "knowledge-gaps", "--from", "2026-13-01"), "YYYY-MM-DD"),
    Case(("export", "knowledge-gaps", "--format", "xlsx"), "csv or json"),
    Case(("export", "knowledge-gaps", "--db", NO_DB), "does not exist"),
    Case(("export", "knowledge-gaps", "--db", "w.duckdb", "--workspace", "nope"),
         "--workspace 'nope': no such workspace here", setup=_empty_warehouse),
    Case(("export", "knowledge-gaps", "--db", "w.duckdb", "--out", "/sys/gaps.csv"),
         "--out /sys/gaps.csv: cannot write there", setup=_empty_warehouse),
    Case(("export", "knowledge-gaps", "--db", "w.duckdb", "--from", "2026-01-02", "--to",
          "2026-01-01"), "is before --from", setup=_empty_warehouse),
    # issue 30: the audit trail, its log checked before an export or a server starts
    Case(("export", "summary", "--from", "2026-01-01", "--to", "2026-01-02", "--db",
          "w.duckdb"), "the audit log f/audit.jsonl cannot be made: f is not a folder",
         {"CONVO_AUDIT_FILE": "f/audit.jsonl"}, files={"f": ""}, setup=_empty_warehouse),
    Case(("export", "guardrails", "--from", "2026-01-01", "--to", "2026-01-02", "--db",
          "w.duckdb"), "point audit.file (CONVO_AUDIT_FILE) elsewhere",
         {"CONVO_AUDIT_FILE": "f/audit.jsonl"}, files={"f": ""}, setup=_empty_warehouse),
    Case(("export", "knowledge-gaps", "--db", "w.duckdb"), "the audit log a.jsonl is not a file",
         {"CONVO_AUDIT_FILE": "a.jsonl"}, files={"a.jsonl/": ""}, setup=_empty_warehouse),
    Case(("serve",), "f is not a folder", {"CONVO_SERVE_TOKEN": "t0k",
                                            "CONVO_AUDIT_FILE": "f/audit.jsonl"},
         files={"f": ""}),
    Case(("erase", "--workspace", "acme"), "exactly one of --external-user-id ID or --email"),
    Case(("erase", "-w", "acme", "--email", "a@b.example", "--external-user-id", "u-1"),
         "exactly one of --external-user-id ID or --email"),
    Case(("erase", "-w", "acme", "--external-user-id", " "), "--external-user-id: give the"),
    Case(("erase", "-w", "acme", "--email", "a@b.example"), "does not exist yet"),
    Case(("export", "person", "--workspace", "acme"),
         "exactly one of --external-user-id ID or --email"),
    Case(("export", "person", "-w", "acme", "--email", "a@b.example", "--external-user-id",
          "u-1"), "exactly one of --external-user-id ID or --email"),
    Case(("export", "person", "-w", "acme", "--email", " ", "--db", "w.duckdb"),
         "--email: give the person's identifier", setup=_empty_warehouse),
    Case(("export", "person", "-w", "acme", "--email", "a@b.example", "--db", NO_DB),
         "does not exist yet"),
    Case(("export", "person", "-w", "nope", "--external-user-id", "u-1", "--db", "w.duckdb"),
         "--workspace 'nope': no such workspace in the warehouse", setup=_empty_warehouse),
    Case(("export", "person", "-w", "acme", "--external-user-id", "u-1", "--db", "w.duckdb",
          "--out", "/sys/person.json"), "--out /sys/person.json: cannot write there",
         setup=_empty_warehouse),
    Case(("export", "person", "-w", "acme", "--external-user-id", "u-1", "--db", "w.duckdb"),
         "the audit log a.jsonl is not a file", {"CONVO_AUDIT_FILE": "a.jsonl"},
         files={"a.jsonl/": ""}, setup=_empty_warehouse),
    Case(("export", "person", "-w", "acme", "--external-user-id", "u-1", "--db", "old.duckdb"),
         "predates this release (it has no conversation_lifecycle", setup=_old_warehouse),
    Case(("erase", "-w", "acme", "--email", "a@b.example", "--db", "w.duckdb"),
         "cannot be reached", {"CONVO_LAKE_CATALOG_URI": "postgresql+psycopg2://u@127.0.0.1:9/n"},
         setup=_empty_warehouse),
    Case(("audit", "verify", "--head", "12:abc"), "--head: '12:abc' is not SEQ:HASH"),
    Case(("audit", "verify", "--manifest", "gone.json"), "--manifest gone.json: cannot be read"),
    Case(("audit", "verify", "--manifest", "m.json"), "not a manifest sealed into the audit log",
         files={"m.json": "{}"}),
    Case(("audit", "export", "--from", "2026-02-01", "--to", "2026-01-01"), "is before --from"),
    Case(("audit", "export", "--from", "yesterday", "--to", "2026-01-01"), "YYYY-MM-DD"),
    Case(("audit", "export", "--from", "2026-01-01", "--to", "2026-01-02"), "f is not a folder",
         {"CONVO_AUDIT_FILE": "f/audit.jsonl"}, files={"f": ""}),
    Case(("audit", "head"), "f is not a folder", {"CONVO_AUDIT_FILE": "f/audit.jsonl"},
         files={"f": ""}),
    Case(("transform",), "transform.fallback_patterns: '(unclosed' is not a regular expression",
         {"CONVO_TRANSFORM_FALLBACK_PATTERNS": "(unclosed"}),
    Case(("serve",), "CONVO_SERVE_TOKEN"),
    Case(("serve", "--host", "0.0.0.0"), "--behind-tls-proxy", {"CONVO_SERVE_TOKEN": "t0k"}),
    Case(("serve", "--port", BUSY), "cannot listen", {"CONVO_SERVE_TOKEN": "t0k"}),
    Case(("publish", "--db", NO_DB), "does not exist"),
    Case(("dashboard", "--port", BUSY), "cannot listen"),
    Case(("dashboard", "--host", "0.0.0.0"), "--behind-tls-proxy"),
    Case(("dashboard", "--workspace", "NOPE"), "--workspace 'NOPE': nothing is published"),
    # issue 29: convo notebook run refuses before any cell runs and writes nothing
    Case(("notebook", "run", "nope", "--out", "rep"), "notebook 'nope': there is no such notebook"),
    Case(("notebook", "run", "lead_funnel_by_source", "--out", "rep"),
         "nothing is published in data/published yet"),
    Case(("notebook", "run", "lead_funnel_by_source", "--out", "rep", "--param", "from"),
         "--param 'from': write NAME=VALUE"),
    Case(("notebook", "run", "lead_funnel_by_source", "--out", "rep", "-p", "zzz=1"),
         "--param zzz: the notebook has no such parameter", setup=_published),
    Case(("notebook", "run", "lead_funnel_by_source", "--out", "rep", "-p", "from=1 OR 1=1"),
         "'1 OR 1=1' is not a date", setup=_published),
    Case(("notebook", "run", "lead_funnel_by_source", "--out", "rep", "-p", "to=2026-02-30"),
         "'2026-02-30' is not a date", setup=_published),
    Case(("notebook", "run", "lead_funnel_by_source", "--out", "rep", "--workspace", "nope"),
         "--workspace 'nope': no such workspace in the published snapshot", setup=_published),
    Case(("notebook", "run", "lead_funnel_by_source", "--out", "taken.txt"),
         "--out taken.txt is a file", files={"taken.txt": "x"}),
    Case(("notebook", "run", "lead_funnel_by_source", "--out", "/sys/rep"),
         "--out /sys/rep: the report cannot be written there", setup=_published),
    Case(("notebook", "list"), "gone.toml", {"CONVO_CONFIG": "gone.toml"}),
    Case(("run",), "CONVO_API_KEY", unset=("CONVO_API_KEY",)),
    Case(("run",), "no scheme", {"CONVO_RUN_ALERT_WEBHOOK_URL": "hooks.example.com/x"}),
    # issue 28: the notification channels, checked before the run locks anything
    Case(("run",), "notify.webhook_url (CONVO_NOTIFY_WEBHOOK_URL) uses plain http",
         {"CONVO_NOTIFY_WEBHOOK_URL": "http://hooks.example.com/x",
          "CONVO_NOTIFY_SIGNING_SECRET": HOOK_SECRET}),
    Case(("run",), "run.alert_webhook_url (CONVO_RUN_ALERT_WEBHOOK_URL) uses plain http",
         {"CONVO_RUN_ALERT_WEBHOOK_URL": "http://hooks.example.com/x"}),
    Case(("run",), "notify.signing_secret is not (the webhook is signed)",
         {"CONVO_NOTIFY_WEBHOOK_URL": "https://hooks.example.com/x"}),
    Case(("run",), 'notify.smtp_tls = "none" would send mail',
         {"CONVO_NOTIFY_SMTP_HOST": "mail.example.com", "CONVO_NOTIFY_SMTP_TLS": "none",
          "CONVO_NOTIFY_EMAIL_FROM": "a@example.com", "CONVO_NOTIFY_EMAIL_TO": "b@example.com"}),
    Case(("run",), "notify.email_from is not set",
         {"CONVO_NOTIFY_SMTP_HOST": "mail.example.com", "CONVO_NOTIFY_EMAIL_TO": "b@example.com"}),
    Case(("run",), "CONVO_NOTIFY_SMTP_PASSWORD",
         {"CONVO_NOTIFY_SMTP_HOST": "mail.example.com", "CONVO_NOTIFY_SMTP_USER": "alerts",
          "CONVO_NOTIFY_EMAIL_FROM": "a@example.com", "CONVO_NOTIFY_EMAIL_TO": "b@example.com"}),
    Case(("config", "show"), "CONVO_NOTIFY_SMTP_TLS must be starttls, ssl or none",
         {"CONVO_NOTIFY_SMTP_TLS": "tls"}),
    Case(("run",), "CONVO_NOTIFY_SMTP_TLS must be starttls, ssl or none",
         {"CONVO_NOTIFY_SMTP_TLS": "tls"}),
    Case(("run",), "Mars/Base", {"CONVO_TRANSFORM_TIMEZONES": "Mars/Base"}),
    # issue 30: the [privacy] settings, checked when any command loads the settings
    Case(("config", "show"), "CONVO_PRIVACY_SCRUB must be off, mask or hash",
         {"CONVO_PRIVACY_SCRUB": "redact"}),
    Case(("config", "show"), "CONVO_PRIVACY_DEFAULT_REGION must be a two-letter region code",
         {"CONVO_PRIVACY_DEFAULT_REGION": "USA"}),
    Case(("config", "show"), "[privacy] extra_patterns must be a list of strings (NAME=REGEX",
         {"CONVO_CONFIG": "p.toml"},
         files={"p.toml": '[privacy]\nextra_patterns = ["customer number"]\n'}),
    Case(("config", "show"), "privacy_scrub: Input should be 'off', 'mask' or 'hash'",
         {"CONVO_CONFIG": "w.toml"},
         files={"w.toml": '[[workspaces]]\nname = "acme"\nprivacy_scrub = "redact"\n'}),
    # issue 30: retention days (D-RETENTION), global and a workspace's own
    Case(("run",), "CONVO_RETENTION_TRANSCRIPT_DAYS must be an integer >= 0",
         {"CONVO_RETENTION_TRANSCRIPT_DAYS": "-1"}),
    Case(("config", "show"), "retention_archive_days: Input should be greater than or equal to 0",
         {"CONVO_CONFIG": "r.toml"},
         files={"r.toml": '[[workspaces]]\nname = "acme"\nretention_archive_days = -3\n'}),
    # issue 26: the run builds its transform as `convo transform` does (no zone: refused)
    Case(("run",), "transform.timezones: name at least one time zone",
         {"CONVO_CONFIG": "tz.toml"}, files={"tz.toml": "[transform]\ntimezones = []\n"}),
    # issue 29: [[reports]] tables, then their workspaces, channels and time zone, checked
    # before the run locks anything
    Case(("run",), "r1.toml:1: [[reports]] #1 schedule: Field required",
         {"CONVO_CONFIG": "r1.toml"},
         files={"r1.toml": '[[reports]]\nname = "weekly"\nnotebook = "weekly_review"\n'}),
    Case(("config", "show"), "r2.toml:1: reports are an array of tables: write [[reports]]",
         {"CONVO_CONFIG": "r2.toml"}, files={"r2.toml": '[reports]\nname = "weekly"\n'}),
    Case(("run",), "[[reports]] #1 (weekly) workspaces: 'nobody' is not a configured workspace",
         {"CONVO_CONFIG": "r3.toml"},
         files={"r3.toml": '[[reports]]\nname = "weekly"\nnotebook = "weekly_review"\n'
                           'schedule = "weekly"\nworkspaces = ["nobody"]\n'}),
    Case(("run",), "[[reports]] #1 (weekly) channels: slack is not configured",
         {"CONVO_CONFIG": "r4.toml"},
         files={"r4.toml": '[[reports]]\nname = "weekly"\nnotebook = "weekly_review"\n'
                           'schedule = "weekly"\nchannels = ["slack"]\n'}),
    Case(("run",), "[[reports]] #1 (weekly) recipients: email is not configured",
         {"CONVO_CONFIG": "r5.toml"},
         files={"r5.toml": '[[reports]]\nname = "weekly"\nnotebook = "weekly_review"\n'
                           'schedule = "weekly"\nrecipients = ["team@example.com"]\n'}),
    Case(("run",), "[[reports]] #1 (weekly) params.tz: 'Mars/Base' is not an IANA time zone",
         {"CONVO_CONFIG": "r6.toml"},
         files={"r6.toml": '[[reports]]\nname = "weekly"\nnotebook = "weekly_review"\n'
                           'schedule = "weekly"\nparams = { tz = "Mars/Base" }\n'}),
    Case(("reports", "list"), "[[reports]] #1 (weekly) channels: webhook is not configured",
         {"CONVO_CONFIG": "r7.toml"},
         files={"r7.toml": '[[reports]]\nname = "weekly"\nnotebook = "weekly_review"\n'
                           'schedule = "weekly"\nchannels = ["webhook"]\n'}),
    Case(("run",), "has no scheme", {"CONVO_BASE_URL": "api.example.com"}),
    Case(("run", "--config", "convo.toml"), "convo.toml"),
    Case(("run",), "run.lock_file", {"CONVO_DB": READ_ONLY_DB}),
    Case(("run",), "run.log_file /sys/convo/run.log cannot be opened",
         {"CONVO_RUN_LOG_FILE": "/sys/convo/run.log"}),
    Case(("sandbox", "serve", "--port", BUSY), "cannot listen"),
    Case(("sandbox", "serve", "--workspace", "acme"), "NAME:KEY"),
    Case(("sandbox", "serve", "--until", "tomorrow"), "ISO 8601"),
    # --for-config: a config's [[workspaces]] served (nothing written before the refusal)
    Case(("sandbox", "serve", "--for-config", "prod.toml"), "not this sandbox",
         files={"prod.toml": OAUTH_TOML}),
    Case(("sandbox", "serve", "--for-config", "flat.toml"), "no [[workspaces]] to serve",
         files={"flat.toml": '[service]\nrate_limit = "none"\n'}),
    Case(("sandbox", "serve", "--for-config", "local.toml", "--workspace", "a:sk_test_1234"),
         "exclude each other", files={"local.toml": LOCAL_TOML}),
    Case(("sandbox", "serve", "--for-config", "local.toml", "--port", "18998"), "drop --port",
         {"LOCAL_KEY": "sk_test_local_key"}, files={"local.toml": LOCAL_TOML}),
    Case(("sandbox", "serve", "--for-config", "local.toml"), "$LOCAL_KEY, which is not set",
         files={"local.toml": LOCAL_TOML}),
    Case(("sandbox", "serve", "--for-config", "client.toml"), "the sandbox's clients are",
         files={"client.toml": LOCAL_TOML.replace('"api_key", key_env = "LOCAL_KEY"',
                                                  '"oauth", client_id = "c"')}),
    Case(("--config", "other.toml", "sandbox", "serve", "--for-config", "local.toml"),
         "name the config once", files={"local.toml": LOCAL_TOML, "other.toml": ""}),
    Case(("sandbox", "archive", "--out", "a.jsonl"), "CONVO_WEBHOOK_SECRET",
         unset=("CONVO_WEBHOOK_SECRET",)),
    Case(("webhooks", "serve"), "CONVO_WEBHOOK_SECRET", unset=("CONVO_WEBHOOK_SECRET",)),
    Case(("webhooks", "serve", "--port", BUSY), "cannot listen"),
    Case(("webhooks", "serve", "--host", "10.1.2.3"), "--behind-tls-proxy"),
    Case(("webhooks", "ingest", "no/such/archive.jsonl"), "no such file"),
    Case(("webhooks", "ingest", "."), "CONVO_WEBHOOK_SECRET", unset=("CONVO_WEBHOOK_SECRET",)),
    Case(("webhooks", "quarantine", "list", "--db", NO_DB), "does not exist"),
    Case(("webhooks", "quarantine", "purge", "--before", "yesterday"), "YYYY-MM-DD"),
    Case(("webhooks", "quarantine", "replay", "--db", NO_DB), "does not exist",
         unset=("CONVO_WEBHOOK_SECRET",)),
    Case(("webhooks", "quarantine", "replay", "--db", "flat.duckdb"), "CONVO_WEBHOOK_SECRET",
         unset=("CONVO_WEBHOOK_SECRET",), setup=_flat_quarantine),
    Case(("webhooks", "quarantine", "replay", "--workspace", "nope"), "no workspace named 'nope'"),
    Case(("webhooks", "serve", "--port", "0"), ".workspace-ids", TWO_WORKSPACES,
         setup=_torn_bindings),
    Case(("webhooks", "ingest", "data/webhooks", "--db", "bound.duckdb"), "never reassigned",
         TWO_WORKSPACES, setup=_rebound_workspace),
    Case(("auth", "login", "--workspace", "nope"), "no workspace named 'nope'"),
    Case(("auth", "logout"), "--workspace"),
    Case(("auth", "status"), "gone.toml", {"CONVO_CONFIG": "gone.toml"}),
    # issue 24: no secret in a URL setting; OAuth endpoints on the issuer's origin, over TLS;
    # a malformed token store or auth setting
    Case(("config", "show"), "PGPASSWORD",
         {"CONVO_LAKE_CATALOG_URI": f"postgresql://convo@db.example.com/lake?password={SECRET}"}),
    Case(("publish", "--lake"), "lake.catalog_uri",
         {"CONVO_LAKE_CATALOG_URI": f"postgresql://db.example.com/l?dsn=password%3D{SECRET}"}),
    Case(("extract",), "service.base_url ($CONVO_BASE_URL)",
         {"CONVO_BASE_URL": f"https://api.example.com/?api_key={SECRET}"}),
    Case(("auth", "login", "--workspace", "acme", "--no-browser"), "plain http",
         {"CONVO_CONFIG": "issuer.toml"}, files={"issuer.toml": PLAIN_ISSUER_TOML}),
    Case(("auth", "login", "--workspace", "acme", "--no-browser"), "nothing was sent",
         {"CONVO_CONFIG": "base.toml"}, files={"base.toml": PLAIN_BASE_TOML}),
    Case(("auth", "login", "--workspace", "acme", "--no-browser"), "is a folder",
         {"CONVO_TOKEN_STORE": "tokens"}, files={"convo.toml": OAUTH_TOML, "tokens/": ""}),
    Case(("auth", "status"), "a folder, not a file", {"CONVO_TOKEN_STORE": "/"}),
    Case(("auth", "status"), "expires_at is not a number", {"CONVO_TOKEN_STORE": "t.json"},
         files={"convo.toml": OAUTH_TOML, "t.json": TOKENS_SOON}),
    Case(("auth", "status"), "not a JSON object", {"CONVO_TOKEN_STORE": "t1.json"},
         files={"convo.toml": OAUTH_TOML, "t1.json": "[1]"}),
    Case(("auth", "logout", "--workspace", "acme"), "not valid JSON",
         {"CONVO_TOKEN_STORE": "t.json"}, files={"convo.toml": OAUTH_TOML, "t.json": "{"}),
    Case(("auth", "logout", "--workspace", "acme"), "revocation_endpoint",
         {"CONVO_TOKEN_STORE": "t2.json"},
         files={"convo.toml": OAUTH_TOML, "t2.json": TOKENS_REVOKE_FOREIGN}),
    Case(("extract", "--workspace", "acme"), "token_endpoint", {"CONVO_TOKEN_STORE": "t.json"},
         files={"convo.toml": OAUTH_TOML, "t.json": TOKENS_FOREIGN}),
    Case(("extract", "--workspace", "acme"), "no token_endpoint",
         {"CONVO_TOKEN_STORE": "t3.json"},
         files={"convo.toml": OAUTH_TOML, "t3.json": '{"acme": {"access_token": "a"}}'}),
]  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    left: list[str]
    folder: str = ""

    def said(self) -> str:
        """Its stdout and stderr, its folder's path written as <folder>."""
        return (self.stdout + "|" + self.stderr).replace(self.folder, "<folder>")


#: Imported once in the parent the rows are forked from, besides the CLI: what the
#: commands import that starts no thread (polars and pyarrow start theirs when imported, and
#: a process forks safely with one thread; the rows import them, as a fresh process does).
PRELOAD = ("convo_analytics.notebooks", "convo_analytics.reports", "convo_analytics.publish")
#: Rows forked and run at once (one parent each).
PARENTS = 3
#: Rows also run in a fresh process: the heaviest commands' imports, and a bare one.
FRESH = ("run CONVO_CONFIG=r6.toml", "sandbox serve --until tomorrow",
         "monitors list CONVO_CONFIG=m.toml", "config path CONVO_CONFIG=gone.toml",
         "serve CONVO_SERVE_TOKEN=t0k CONVO_AUDIT_FILE=f/audit.jsonl")  # fmt: skip


def _prepared(case: Case, folder: Path) -> tuple[set[str], dict[str, str]]:
    """The row's folder made (files, setup); what it holds, and the row's environment."""
    for name, text in case.files.items():
        if name.endswith("/"):
            (folder / name).mkdir()
        else:
            (folder / name).write_text(text)
    if case.setup is not None:
        case.setup(folder)
    before = {str(p.relative_to(folder)) for p in folder.rglob("*")}
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    env.update({"CONVO_API_KEY": SECRET, "CONVO_WEBHOOK_SECRET": HOOK_SECRET,
                "COLUMNS": "80", **case.env})  # fmt: skip
    for name in case.unset:
        env.pop(name, None)
    return before, env


def _left(folder: Path, before: set[str]) -> list[str]:
    return sorted(
        str(p.relative_to(folder)) for p in folder.rglob("*")
        if str(p.relative_to(folder)) not in before
    )  # fmt: skip


@pytest.fixture(scope="module")
def busy_port() -> Iterator[str]:
    """A port a socket of this module listens on."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield str(busy.getsockname()[1])


@pytest.fixture(scope="module")
def parents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ForkedCli]]:
    """The processes the rows are forked from (started at once)."""
    base = tmp_path_factory.mktemp("forking")
    environ = {**os.environ, "COLUMNS": "80"}
    with ThreadPoolExecutor(max_workers=PARENTS) as pool:
        started = list(pool.map(lambda n: _start_parent(base / f"parent{n}", environ),
                                range(PARENTS)))  # fmt: skip
    try:
        yield started
    finally:
        for parent in started:
            parent.close()


def _start_parent(folder: Path, environ: dict[str, str]) -> ForkedCli:
    return ForkedCli(folder, environ, PRELOAD)


@pytest.fixture(scope="module")
def outcomes(
    tmp_path_factory: pytest.TempPathFactory, parents: list[ForkedCli], busy_port: str
) -> dict[str, Outcome]:
    """Every row run (each in its own empty folder, PARENTS at once), with a port held busy."""
    tmp_path_factory.getbasetemp()  # made once here: the threads below would race to make it
    free: Queue[ForkedCli] = Queue()
    for parent in parents:
        free.put(parent)

    def one(case: Case) -> tuple[str, Outcome]:
        folder = tmp_path_factory.mktemp("user-error")
        before, env = _prepared(case, folder)
        parent = free.get()
        try:
            done = parent.run([a.replace(BUSY, busy_port) for a in case.args], folder, env)
        finally:
            free.put(parent)
        left = _left(folder, before)
        return case.id, Outcome(done.code, done.stdout, done.stderr, left, str(folder))

    with ThreadPoolExecutor(max_workers=PARENTS) as pool:
        return dict(pool.map(one, CASES))


def test_the_parent_of_the_rows_printed_nothing_while_importing(
    parents: list[ForkedCli],
) -> None:
    """What a fresh process would print while importing (a warning) shows here instead."""
    assert [parent.started_with for parent in parents] == [""] * PARENTS


@pytest.mark.parametrize("row", FRESH)
def test_a_fresh_process_does_what_the_forked_row_did(
    row: str, outcomes: dict[str, Outcome], busy_port: str, tmp_path: Path
) -> None:
    (case,) = [c for c in CASES if c.id == row]
    before, env = _prepared(case, tmp_path)
    args = [a.replace(BUSY, busy_port) for a in case.args]
    done = subprocess.run([sys.executable, "-m", "convo_analytics.cli", *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    left = _left(tmp_path, before)
    fresh = Outcome(done.returncode, done.stdout, done.stderr, left, str(tmp_path))
    forked = outcomes[row]
    assert (fresh.code, fresh.left) == (forked.code, forked.left) == (2, [])
    assert fresh.said() == forked.said()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_user_error_is_one_line_and_exit_2(case: Case, outcomes: dict[str, Outcome]) -> None:
    got = outcomes[case.id]
    text = got.stdout + got.stderr
    lines = [line for line in text.splitlines() if line.strip()]
    assert got.code == 2, text
    assert len(lines) == 1 and got.stdout == "", text
    assert "Traceback" not in text
    assert re.fullmatch(r"error: .+ \(see 'convo( [a-z-]+)* --help'\)", lines[0]), lines[0]
    assert case.says in lines[0], lines[0]
    assert SECRET not in text and HOOK_SECRET not in text
    assert got.left == [], f"{case.id} left {got.left} behind"


def test_every_command_has_a_row() -> None:
    """A new command gets its user errors walked here too."""
    from test_cli_basics import COMMANDS, GROUPS

    commands = {" ".join(p[1:]) for p in COMMANDS if p not in GROUPS}
    covered = set()
    for case in CASES:
        words = [a for a in case.args if not a.startswith("-")]
        covered |= {" ".join(words[:n]) for n in (1, 2, 3)}
    assert commands <= covered, sorted(commands - covered)


def test_rows_have_distinct_ids() -> None:
    """Rows are run and looked up by id: two rows of one id would test only one of them."""
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
