"""Scheduled reports (issue 29): ``[[reports]]`` made by ``convo run`` after publishing.

Two sandbox workspaces read over HTTP by a real ``convo run`` whose sandbox's
history ends now, so the previous ISO week has conversations. Three reports: the
"weekly review" starter (weekly, on today's weekday, to its own readers), a
probe notebook that lists the workspace ids it can see (weekly, by email only),
and a notebook whose second cell errors (daily). The run exits 0 with every data
step ok; each workspace's reports reach a local SMTP server (aiosmtpd) and a
local webhook receiver (signature verified) with the HTML attached, byte for
byte the file written; each report holds only its workspace's rows; the failing
report is recorded and alerted (``report.failed``) to the run's alert
recipients. A second run in the same week sends nothing; a run killed after
recording a report's delivery and before recording the report delivers it on
the re-run, once. Then the table problems and the schedule, in process.
"""

from __future__ import annotations

import base64
import email
import email.policy
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest

from conftest import ACME_KEY, GLOBEX_KEY, make_settings
from convo_analytics._serving import ServerThread
from convo_analytics.compare import newcombe, wilson
from convo_analytics.config import ConfigError, load_settings
from convo_analytics.notify import Attachment, DeliveryError, Notification, email_message
from convo_analytics.reports import due_period
from convo_analytics.sandbox import Sandbox, create_app
from notify_support import SIGNING, Mailbox, Receiver, smtp_server
from process_support import OutputWatcher

RUN_TIMEOUT = 240
NOW = datetime.now(UTC)
#: Today's weekday: a weekly report on it is due at once (for the previous ISO week).
TODAY = NOW.strftime("%A").lower()
STEPS = ["extract", "webhook_ingest", "transform", "monitors", "exports", "retention", "publish",
         "reports"]  # fmt: skip
PROBE = """-- Workspace probe
-- Which workspaces' rows a report can see.

-- %% Workspaces seen
SELECT workspace_id, count(*) AS conversations FROM mart_conversations
WHERE started_at::DATE BETWEEN $from AND $to GROUP BY ALL ORDER BY 1;
"""
BROKEN = """-- Broken
-- Its second cell divides text by a number.

-- %% Fine
SELECT count(*) AS conversations FROM mart_conversations;

-- %% Broken
SELECT 'text' / 2 AS nonsense;
"""
REPORTS = f"""
[[reports]]
name = "weekly"
notebook = "weekly_review"
schedule = "weekly"
weekday = "{TODAY}"
recipients = ["readers@example.com"]

[[reports]]
name = "probe"
notebook = "probe"
schedule = "weekly"
weekday = "{TODAY}"
channels = ["email"]

[[reports]]
name = "broken"
notebook = "broken"
schedule = "daily"
workspaces = ["globex"]
channels = ["email"]
"""


def _config(folder: Path, url: str, reports: str) -> Path:
    (folder / "notebooks").mkdir(parents=True, exist_ok=True)
    (folder / "notebooks" / "probe.sql").write_text(PROBE)
    (folder / "notebooks" / "broken.sql").write_text(BROKEN)
    (folder / "secrets").mkdir(exist_ok=True)
    (folder / "secrets" / "signing").write_text(SIGNING + "\n")
    (folder / "convo.toml").write_text(f"""
[service]
rate_limit = "none"

[warehouse]
path = "w.duckdb"

[publish]
dir = "published"

[export]
dir = "exports"

[transform]
timezones = ["UTC"]

[dashboard]
notebooks_dir = "notebooks"

[notify]
delivery_log = "app-state/deliveries.jsonl"
signing_secret_file = "secrets/signing"
backoff_seconds = 0.01
max_attempts = 2

[reporting]
out_dir = "reports"
log = "app-state/reports.jsonl"

[[workspaces]]
name = "acme"
base_url = "{url}"
auth = {{ type = "api_key", key_env = "ACME_KEY" }}

[[workspaces]]
name = "globex"
base_url = "{url}"
auth = {{ type = "api_key", key_env = "GLOBEX_KEY" }}
{reports}""")
    return folder / "convo.toml"


def _env(port: int, hook: str | None = None, **extra: str) -> dict[str, str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
           "ACME_KEY": ACME_KEY, "GLOBEX_KEY": GLOBEX_KEY,
           "CONVO_NOTIFY_SMTP_HOST": "127.0.0.1", "CONVO_NOTIFY_SMTP_PORT": str(port),
           "CONVO_NOTIFY_SMTP_TLS": "none", "CONVO_NOTIFY_EMAIL_FROM": "convo@example.com",
           "CONVO_NOTIFY_EMAIL_TO": "ops@example.com", **extra}  # fmt: skip
    if hook is not None:
        env["CONVO_NOTIFY_WEBHOOK_URL"] = hook
    return env


def _argv(config: Path) -> list[str]:
    return [sys.executable, "-m", "convo_analytics.cli", "run", "--config", str(config), "--json"]


def _run(config: Path, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(_argv(config), env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, cwd=config.parent)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = orjson.loads(done.stdout)
    return result


def _step(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in result["steps"] if s["name"] == name)


def _message(raw: bytes) -> email.message.EmailMessage:
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(msg, email.message.EmailMessage)
    return msg


def _attached(msg: email.message.EmailMessage) -> dict[str, bytes]:
    out = {}
    for part in msg.iter_attachments():
        name = part.get_filename()
        assert name is not None
        payload = part.get_payload(decode=True)
        assert isinstance(payload, bytes)
        out[name] = payload
    return out


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class Scene:
    folder: Path
    config: Path
    env: dict[str, str]
    first: dict[str, Any]
    second: dict[str, Any]
    mailbox: Mailbox
    mails_after_first: int
    receiver: Receiver
    hooks_after_first: int
    url: str


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    """Two workspaces' history ending now, run twice by `convo run` with three reports."""
    until = int(NOW.timestamp() * 1000)
    two = [("acme", ACME_KEY), ("globex", GLOBEX_KEY)]
    sandbox = Sandbox(make_settings(conversations=160, days=15, until_ms=until, workspaces=two))
    folder = tmp_path_factory.mktemp("reports")
    mailbox, receiver = Mailbox(), Receiver()
    with ServerThread(create_app(sandbox)) as api, smtp_server(mailbox) as port, \
            ServerThread(receiver) as hook:  # fmt: skip
        config = _config(folder, api.url, REPORTS)
        env = _env(port, f"{hook.url}/hooks/convo")
        first = _run(config, env)
        mails, hooks = len(mailbox.messages), len(receiver.requests)
        second = _run(config, env)
        yield Scene(folder, config, env, first, second, mailbox, mails, receiver, hooks, api.url)


def _period() -> str:
    period = due_period("weekly", TODAY, NOW.date())
    assert period is not None
    return period.label


def test_a_weekly_report_reaches_smtp_with_the_html_attached(scene: Scene) -> None:
    first = scene.first
    assert first["status"] == "ok" and [s["name"] for s in first["steps"]] == STEPS
    assert all(s["status"] == "ok" for s in first["steps"]), first["steps"]
    counts = _step(first, "reports")["counts"]
    assert (counts["due"], counts["made"], counts["failed"]) == (5, 4, 1), counts
    weekly = [_message(m["content"]) for m in scene.mailbox.messages[: scene.mails_after_first]
              if m["rcpt_tos"] == ["readers@example.com"]]  # fmt: skip
    assert len(weekly) == 2
    for workspace in ("acme", "globex"):
        (msg,) = [m for m in weekly if f": {workspace}, {_period()}" in str(m["Subject"])]
        folder = scene.folder / "reports" / "weekly" / workspace / _period()
        attached = _attached(msg)
        assert attached["weekly_review.html"] == (folder / "weekly_review.html").read_bytes()
        csvs = sorted(p.name for p in folder.glob("*.csv"))
        assert sorted(n for n in attached if n.endswith(".csv")) == csvs and csvs
        for name in csvs:
            assert attached[name] == (folder / name).read_bytes()
        assert b"Weekly review" in attached["weekly_review.html"]


def test_each_report_sent_is_one_record_of_the_audit_trail(scene: Scene) -> None:
    """Before a report goes out, the audit trail holds who sent what: one report.sent record
    per report made (its delivery key, files and rows), none for the failed one."""
    log = scene.folder / "data" / "audit" / "audit.jsonl"
    records = [orjson.loads(line) for line in log.read_bytes().splitlines() if line.strip()]
    sent = [r for r in records if r["action"] == "report.sent"]
    made = _step(scene.first, "reports")["counts"]["made"]
    assert len(sent) == made == 4
    with duckdb.connect(str(scene.folder / "w.duckdb"), read_only=True) as con:
        names = {row[0] for row in con.execute("SELECT name FROM workspaces").fetchall()}
    assert {r["workspace"] for r in sent} == names
    assert all(r["detail"]["key"].startswith("ntf_") and r["rows"] > 0 for r in sent)
    assert all(r["detail"]["files"][0].endswith(".html") for r in sent)


def test_the_webhook_carries_the_html_in_its_signed_body(scene: Scene) -> None:
    ready = [r for r in scene.receiver.requests[: scene.hooks_after_first]
             if r["headers"]["x-convo-event"] == "report.ready"]  # fmt: skip
    assert len(ready) == 2 and all(r["verified"] for r in ready)  # probe: email only
    for request in ready:
        body = orjson.loads(request["body"])
        workspace = body["data"]["workspace"]
        folder = scene.folder / "reports" / "weekly" / workspace / _period()
        html = next(a for a in body["data"]["attachments"] if a["filename"] == "weekly_review.html")
        assert base64.b64decode(html["base64"]) == (folder / "weekly_review.html").read_bytes()


def test_each_workspaces_report_holds_only_its_rows(scene: Scene) -> None:
    with duckdb.connect(str(scene.folder / "w.duckdb"), read_only=True) as con:
        ids = dict(con.execute("SELECT name, workspace_id FROM workspaces").fetchall())
    period = due_period("weekly", TODAY, NOW.date())
    assert period is not None
    with duckdb.connect(str(scene.folder / "w.duckdb"), read_only=True) as con:
        expected = dict(con.execute(
            "SELECT workspace_id, count(*) FROM mart_conversations WHERE started_at::DATE "
            "BETWEEN ? AND ? GROUP BY ALL", [period.first, period.last]).fetchall())  # fmt: skip
    assert len(ids) == 2 and all(expected.get(i) for i in ids.values()), (ids, expected)
    for name, workspace_id in ids.items():
        csv = scene.folder / "reports" / "probe" / name / period.label / "01_workspaces_seen.csv"
        lines = csv.read_text().splitlines()
        assert lines == ["workspace_id,conversations", f"{workspace_id},{expected[workspace_id]}"]


def test_a_failing_report_is_recorded_and_alerted_and_the_data_steps_are_ok(scene: Scene) -> None:
    counts = _step(scene.first, "reports")["counts"]
    (failure,) = counts["failures"]
    assert failure.startswith("broken for globex") and "cell 2 (Broken)" in failure
    runs = _lines(scene.folder / "app-state" / "reports.jsonl")
    failed = [r for r in runs if r["status"] == "failed"]
    assert {(r["report"], r["workspace"]) for r in failed} == {("broken", "globex")}
    assert "cell 2 (Broken)" in failed[0]["failures"][0]
    to_ops = [str(_message(m["content"])["Subject"]) for m in scene.mailbox.messages
              if m["rcpt_tos"] == ["ops@example.com"]]  # fmt: skip
    yesterday = date.fromordinal(NOW.date().toordinal() - 1)
    assert sorted(to_ops) == [  # the probe has no recipients of its own: notify.email_to's
        f"Workspace probe: acme, {_period()}",
        f"Workspace probe: globex, {_period()}",
        f"report broken failed for globex, {yesterday}",
    ]
    assert scene.first["status"] == "ok" and scene.first["warnings"] == []


def test_a_second_run_in_the_same_week_sends_nothing(scene: Scene) -> None:
    second = scene.second
    assert second["status"] == "ok"
    counts = _step(second, "reports")["counts"]
    assert counts["already_made"] == 4 and counts["made"] == 0, counts
    assert counts["failed"] == 1  # the broken daily report is tried again, alerted once
    assert len(scene.mailbox.messages) == scene.mails_after_first
    assert len(scene.receiver.requests) == scene.hooks_after_first


def test_reports_list_says_what_is_made_and_what_the_next_run_makes(scene: Scene) -> None:
    done = subprocess.run([sys.executable, "-m", "convo_analytics.cli", "--config",
                           str(scene.config), "reports", "list", "--json"], env=scene.env,
                          capture_output=True, text=True, timeout=60, cwd=scene.folder)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {(r["report"], r["workspace"]): r for r in orjson.loads(done.stdout)["reports"]}
    assert set(rows) == {("weekly", "acme"), ("weekly", "globex"), ("probe", "acme"),
                         ("probe", "globex"), ("broken", "globex")}  # fmt: skip
    assert rows[("weekly", "acme")]["state"] == f"made ({_period()})"
    assert rows[("weekly", "acme")]["last"]["status"] == "ok"
    broken = rows[("broken", "globex")]
    assert broken["state"].startswith("due now (") and broken["last"]["status"] == "failed"


def test_the_weekly_review_computes_the_compare_intervals(scene: Scene) -> None:
    """The starter's Wilson and Newcombe intervals in SQL equal compare/_intervals.py's."""
    from convo_analytics.notebooks._headless import run_notebook

    settings = load_settings(scene.config, {}, scene.env, cwd=scene.folder)
    days = [date.fromordinal(NOW.date().toordinal() - n).isoformat() for n in (7, 1)]
    run = run_notebook(settings, "weekly_review", workspace="acme",
                       params={"from": [days[0]], "to": [days[1]]})  # fmt: skip
    assert run.ok, run.failures
    cells = {c.name: c.frame for c in run.cells if c.frame is not None}
    rates = cells["rates"].to_dicts()
    for row in rates:
        expected = wilson(row["k"], row["n"])
        assert row["low"] == pytest.approx(expected.low, abs=1e-12)
        assert row["high"] == pytest.approx(expected.high, abs=1e-12)
    assert all(r["n"] >= 10 for r in rates if r["kpi"] != "CSAT (positive of rated)"), rates
    by = {(r["kpi"], r["side"]): r for r in rates}
    for row in cells["kpis_against_the_week_before"].to_dicts():
        one, two = by[(row["kpi"], 1)], by[(row["kpi"], 2)]
        d = newcombe(one["k"], one["n"], two["k"], two["n"])
        assert d.low is not None and d.high is not None
        assert abs(row["change_low_points"] - 100 * d.low) <= 0.05 + 1e-9
        assert abs(row["change_high_points"] - 100 * d.high) <= 0.05 + 1e-9
    assert {c.name for c in run.cells if c.cell.kind == "markdown"} == {""}
    assert cells["top_topics"].height > 0


def test_a_run_killed_after_recording_the_delivery_sends_the_report_once(
    scene: Scene, tmp_path: Path
) -> None:
    """Killed right after the report's notification is recorded (before any channel is
    tried and before the report log says done): the re-run makes the report again and
    the delivery log sends it once."""
    one = '[[reports]]\nname = "weekly"\nnotebook = "weekly_review"\nschedule = "weekly"\n' \
          f'weekday = "{TODAY}"\nworkspaces = ["acme"]\nchannels = ["email"]\n'  # fmt: skip
    mailbox = Mailbox()
    with smtp_server(mailbox) as port:
        config = _config(tmp_path, scene.url, one)
        env = _env(port)
        proc = subprocess.Popen(_argv(config), env={**env, "CONVO_NOTIFY_HOLD": "recorded"},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=tmp_path)  # fmt: skip
        try:
            OutputWatcher(proc.stderr).wait_for("notify holding", timeout=RUN_TIMEOUT)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        assert mailbox.messages == []
        assert not (tmp_path / "app-state" / "reports.jsonl").exists()
        again = _run(config, env)
        counts = _step(again, "reports")["counts"]
        assert counts["made"] == 1, counts
        assert len(mailbox.messages) == 1
        (line,) = _lines(tmp_path / "app-state" / "reports.jsonl")
        assert (
            line["status"] == "ok"
            and line["key"] == _message(mailbox.messages[0]["content"])["X-Convo-Idempotency-Key"]
        )


# -- in process: the schedule, the tables, the attachments ----------------------------------


W47 = date(2026, 11, 16)


@pytest.mark.parametrize(
    ("schedule", "weekday", "today", "label", "first", "last"),
    [  # 2026-11-23 is a Monday; 2026 has 53 ISO weeks
        ("daily", "monday", date(2026, 11, 26), "2026-11-25", *[W47 + timedelta(9)] * 2),
        ("weekly", "monday", date(2026, 11, 23), "2026-W47", W47, date(2026, 11, 22)),
        ("weekly", "monday", date(2026, 11, 29), "2026-W47", W47, date(2026, 11, 22)),
        ("weekly", "thursday", date(2026, 11, 26), "2026-W47", W47, date(2026, 11, 22)),
        ("weekly", "monday", date(2027, 1, 4), "2026-W53", date(2026, 12, 28), date(2027, 1, 3)),
    ],
)  # fmt: skip
def test_a_period_is_yesterday_or_the_previous_iso_week(
    schedule: str, weekday: str, today: date, label: str, first: date, last: date
) -> None:
    period = due_period(schedule, weekday, today)
    assert period is not None
    assert (period.label, period.first, period.last) == (label, first, last)


def test_a_weekly_report_is_not_due_before_its_weekday() -> None:
    assert due_period("weekly", "friday", date(2026, 11, 26)) is None  # a Thursday
    assert due_period("weekly", "friday", date(2026, 11, 27)) is not None


A = 'name = "a"\nnotebook = "x"\n'
W = A + 'schedule = "weekly"\n'


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('name = "a b"\nnotebook = "x"\nschedule = "daily"', "#1 name: 'a b' is not a report name"),
        ('name = "a"\nnotebook = "X!"\nschedule = "daily"', "#1 notebook: 'X!' is not a notebook"),
        (A, "#1 schedule: Field required"),
        (A + 'schedule = "hourly"', "#1 schedule: Input should be 'daily' or"),
        (A + 'schedule = "daily"\nweekday = "monday"', "#1 table: weekday belongs to"),
        (W + 'weekday = "mon"', "#1 weekday: Input should be"),
        (W + 'recipients = ["nobody"]', "#1 recipients: 'nobody' is not an email address"),
        (W + 'channels = ["fax"]', "#1 channels.0: Input should be"),
        (W + 'channels = ["email", "email"]', "#1 channels: a name is listed twice"),
        (W + 'params = { workspace = "acme" }', "#1 params: workspace: a report's workspaces are"),
        (W + "params = { flag = true }", "#1 params: flag: a value is a string, a"),
        (W + "send = true", "#1 send: Extra inputs"),
    ],
)  # fmt: skip
def test_a_bad_reports_table_is_one_line_naming_it(tmp_path: Path, table: str, says: str) -> None:
    (tmp_path / "convo.toml").write_text(f"[reporting]\nenabled = true\n\n[[reports]]\n{table}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path / "convo.toml", {}, {}, cwd=tmp_path)
    (line,) = str(caught.value).splitlines()
    assert line.startswith(f"{tmp_path / 'convo.toml'}:4: [[reports]] ") and says in line, line


def test_a_reports_name_used_twice_and_a_reports_table_are_refused(tmp_path: Path) -> None:
    table = '[[reports]]\nname = "a"\nnotebook = "x"\nschedule = "daily"\n'
    (tmp_path / "convo.toml").write_text(table + table)
    with pytest.raises(ConfigError, match=r"\[\[reports\]\] name 'a' is used twice"):
        load_settings(tmp_path / "convo.toml", {}, {}, cwd=tmp_path)
    (tmp_path / "convo.toml").write_text('[reports]\nname = "a"\n')
    with pytest.raises(ConfigError, match=r"write \[\[reports\]\] for each report"):
        load_settings(tmp_path / "convo.toml", {}, {}, cwd=tmp_path)


def test_params_become_the_texts_a_notebook_run_takes(tmp_path: Path) -> None:
    (tmp_path / "convo.toml").write_text(
        '[[reports]]\nname = "a"\nnotebook = "x"\nschedule = "weekly"\n'
        'params = { since = 2026-01-02, n = 3, kinds = ["web", "sms"], word = "hi" }\n'
    )
    (spec,) = load_settings(tmp_path / "convo.toml", {}, {}, cwd=tmp_path).reports
    assert spec.params == {"since": ("2026-01-02",), "n": ("3",), "kinds": ("web", "sms"),
                           "word": ("hi",)}  # fmt: skip
    assert (spec.weekday, spec.workspaces, spec.channels) == ("monday", (), None)


def test_a_notification_names_its_attachments_and_the_email_carries_them(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    page.write_bytes(b"<!doctype html><p>report</p>")
    n = Notification.create(source="report", subject_id="x", kind="report.ready", subject="s",
                            text="t", attachments=[Attachment(str(page), "r.html", "text/html")],
                            recipients=["readers@example.com"])  # fmt: skip
    back = Notification.from_json(orjson.loads(orjson.dumps(n.as_json())))
    assert back == n and b"<p>report</p>" not in orjson.dumps(n.as_json())  # names, not bytes
    msg = _message(bytes(email_message(back, "a@example.com", back.recipients)))
    assert msg["To"] == "readers@example.com"
    assert _attached(msg) == {"r.html": page.read_bytes()}
    page.unlink()
    with pytest.raises(DeliveryError) as gone:
        email_message(back, "a@example.com", back.recipients)
    assert (
        gone.value.permanent
        and "r.html" in str(gone.value)
        and str(tmp_path) not in str(gone.value)
    )
