"""Monitors over the sandbox with an injected incident (issue 28's checks).

A workspace's 60-day history, extracted from the sandbox over HTTP, where on one
weekday every web conversation about support was escalated (a fault of the
sandbox, ``Incident``). An escalation-rate monitor with the defaults (the same
weekday over 4 weeks, k = 3, at least 30 conversations) must fire once, on that
day, explain the change as that channel's and that intent's, reach a local webhook
receiver (signature verified) and a local SMTP server, send one resolve notice on
the next quiet day, and raise no alarm on the 59 quiet days. A second run sends
nothing again; a changed definition is a new episode; a monitor under its minimum
sample does not judge; a run killed between storing and telling delivers on the
re-run, once.
"""

from __future__ import annotations

import email
import email.policy
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from conftest import ACME_KEY, UNTIL_MS, make_settings
from convo_analytics._serving import ServerThread
from convo_analytics.config import Settings, load_settings
from convo_analytics.monitors import run_monitors
from convo_analytics.sandbox import Incident, Sandbox, create_app
from convo_analytics.topics import TopicConfig
from convo_analytics.transform import TransformConfig, run_transform
from convo_analytics.warehouse import open_warehouse
from convo_analytics.webhooks import verify
from extract_support import extract
from notify_support import SIGNING, Mailbox, Receiver, smtp_server
from process_support import OutputWatcher

#: Enough conversations that a weekday holds ~240 (the incident's slice ~25 of them).
CONVERSATIONS = 12_000
NOW = datetime.fromtimestamp(UNTIL_MS / 1000, UTC)
MONITOR = '[[monitors]]\nname = "escalations"\nmetric = "escalationRate"\n'
FAST = {"CONVO_NOTIFY_BACKOFF_SECONDS": "0.01", "CONVO_NOTIFY_MAX_ATTEMPTS": "3",
        "CONVO_NOTIFY_TIMEOUT_SECONDS": "5"}  # fmt: skip


def _incident_day() -> date:
    day = NOW.date() - timedelta(days=4)
    while day.weekday() >= 5:  # a weekday: the same weekday's baseline is a busy one
        day -= timedelta(days=1)
    return day


INCIDENT = _incident_day()


@dataclass
class Scene:
    db: Path
    folder: Path


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    """The warehouse of the incident's history (extracted, transformed; no monitor run)."""
    folder = tmp_path_factory.mktemp("incident")
    day_ms = int(datetime(INCIDENT.year, INCIDENT.month, INCIDENT.day, tzinfo=UTC).timestamp())
    incident = Incident(day_ms=day_ms * 1000, channel="web", intent="support")
    settings = make_settings(
        conversations=CONVERSATIONS, days=60, workspaces=[("acme", ACME_KEY)], incidents=(incident,)
    )
    sandbox = Sandbox(settings)
    db = folder / "base.duckdb"
    with ServerThread(create_app(sandbox)) as server:
        # four details at once: the warehouse is the same, and against a server in this
        # process a wider pool only costs (httpcore checks each connection per request)
        result = extract(server.url, ACME_KEY, db, detail_concurrency=4)
        assert result.ok, result.to_json()
    con = open_warehouse(db)
    try:
        run_transform(con, TransformConfig(timezones=("UTC",), topics=TopicConfig(enabled=False)))
    finally:
        con.close()
    yield Scene(db, folder)


def _settings(folder: Path, env: dict[str, str], monitors: str = MONITOR) -> Settings:
    (folder / "convo.toml").write_text(monitors, encoding="utf-8")
    environ = {
        "CONVO_NOTIFY_DELIVERY_LOG": str(folder / "deliveries.jsonl"),
        "CONVO_MONITORING_STORE_FILE": str(folder / "monitors.jsonl"),
        **FAST,
        **env,
    }
    return load_settings(folder / "convo.toml", {}, environ, cwd=folder)


def _copy(scene: Scene, name: str) -> tuple[Path, Path]:
    folder = scene.folder / name
    folder.mkdir()
    shutil.copyfile(scene.db, folder / "w.duckdb")
    return folder, folder / "w.duckdb"


def _rows(db: Path, monitor: str = "escalations") -> list[dict[str, Any]]:
    con = open_warehouse(db, read_only=True)
    try:
        cur = con.execute("SELECT * FROM monitor_evaluations WHERE monitor = ? "
                          "ORDER BY definition_version, window_start", [monitor])  # fmt: skip
        names = [d[0] for d in cur.description or ()]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()


def _smtp_env(port: int) -> dict[str, str]:
    return {"CONVO_NOTIFY_SMTP_HOST": "127.0.0.1", "CONVO_NOTIFY_SMTP_PORT": str(port),
            "CONVO_NOTIFY_SMTP_TLS": "none", "CONVO_NOTIFY_EMAIL_FROM": "alerts@example.com",
            "CONVO_NOTIFY_EMAIL_TO": "oncall@example.com"}  # fmt: skip


def test_the_incident_fires_once_is_explained_delivered_and_resolved(scene: Scene) -> None:
    folder, db = _copy(scene, "once")
    receiver, mailbox = Receiver(), Mailbox()
    with ServerThread(receiver) as server, smtp_server(mailbox) as port:
        env = {"CONVO_NOTIFY_WEBHOOK_URL": f"{server.url}/hooks/monitors",
               "CONVO_NOTIFY_SIGNING_SECRET": SIGNING, **_smtp_env(port)}  # fmt: skip
        settings = _settings(folder, env)
        counts = run_monitors(settings, db, "run-1", now=NOW)
        again = run_monitors(settings, db, "run-2", now=NOW)
    rows = _rows(db)
    judged = [r for r in rows if r["judged"]]
    alarms = [r for r in rows if r["breach"]]
    quiet = [r for r in judged if r["window_start"] != INCIDENT]
    print(f"\nincident {INCIDENT}: {len(rows)} windows, {len(judged)} judged, "
          f"false alarms on quiet days: {sum(r['breach'] for r in quiet)}")  # fmt: skip
    # fires once, on that day; nothing on the quiet days (the false-alarm count)
    assert [r["window_start"] for r in alarms] == [INCIDENT]
    assert len(quiet) >= 30 and not any(r["breach"] for r in quiet)
    (alert,) = [r for r in rows if r["notification_key"] and r["state"] == "alerting"]
    (resolve,) = [r for r in rows if r["notification_key"] and r["state"] == "resolved"]
    assert alert["window_start"] == INCIDENT and alert["episode_start"] == INCIDENT
    assert resolve["window_start"] == INCIDENT + timedelta(days=1) and resolve["judged"]
    assert alert["value"] > alert["upper_bound"] > alert["baseline"]
    assert counts["alerts"] == 1 and counts["resolved"] == 1 and counts["alerting"] == 0
    assert counts["deliveries"]["recorded"] == 2 and counts["deliveries"]["delivered"] == 4
    # explained: at least 70 % of the change is that channel's and that intent's
    explanation = orjson.loads(alert["explanation"])
    channel = explanation["breakdown"]["channel"]["slices"][0]
    intent = explanation["breakdown"]["intent"]["slices"][0]
    assert channel["value"] == "web" and channel["share"] >= 0.7
    assert intent["value"] == "support" and intent["share"] >= 0.7
    assert explanation["slice"]["channel"] == "web" and explanation["slice"]["intent"] == "support"
    assert len(explanation["examples"]) == 3
    assert all(e["channel"] == "web" and e["intent"] == "support" and e["escalated"]
               for e in explanation["examples"])  # fmt: skip
    link = explanation["links"]["conversations"]
    assert link.startswith("http://127.0.0.1:8501/conversations?")
    assert f"from={INCIDENT}" in link and "channel=web" in link and "intent=support" in link
    # delivered: the webhook, signed as the interface signs its events, and email
    assert [r["verified"] for r in receiver.requests] == [True, True]
    assert receiver.keys == {alert["notification_key"]: 1, resolve["notification_key"]: 1}
    alert_request, resolve_request = receiver.requests
    assert verify(SIGNING, alert_request["body"], alert_request["headers"]["x-convo-signature"])
    body = orjson.loads(alert_request["body"])
    assert body["event"] == "monitor.alerting" and body["data"]["monitor"] == "escalations"
    assert body["data"]["explanation"]["breakdown"]["channel"]["slices"][0]["value"] == "web"
    assert orjson.loads(resolve_request["body"])["event"] == "monitor.resolved"
    subjects = [email.message_from_bytes(m["content"], policy=email.policy.default)["Subject"]
                for m in mailbox.messages]  # fmt: skip
    assert len(subjects) == 2 and "escalationRate rose" in subjects[0]
    first = email.message_from_bytes(mailbox.messages[0]["content"], policy=email.policy.default)
    plain = first.get_body(("plain",))
    assert plain is not None
    text = plain.get_content()  # said in words, not a JSON dump of the explanation
    assert "What changed:" in text and "- channel: web" in text and '"breakdown"' not in text
    assert subjects[1].startswith("[resolved] escalations")
    # the second run judges nothing new and tells nobody again
    assert again["windows"] == 0 and again["deliveries"] == {"recorded": 0}
    assert len(receiver.requests) == 2 and len(mailbox.messages) == 2


def test_a_changed_definition_is_a_new_episode_and_a_small_sample_is_not_judged(
    scene: Scene,
) -> None:
    folder, db = _copy(scene, "changed")
    receiver = Receiver()
    with ServerThread(receiver) as server:
        env = {
            "CONVO_NOTIFY_WEBHOOK_URL": f"{server.url}/h",
            "CONVO_NOTIFY_SIGNING_SECRET": SIGNING,
        }
        run_monitors(_settings(folder, env), db, now=NOW)
        changed = MONITOR + "k = 2.9\n"
        changed += '[[monitors]]\nname = "tiny"\nmetric = "escalationRate"\nmin_sample = 100000\n'
        run_monitors(_settings(folder, env, changed), db, now=NOW)
    rows = _rows(db)
    versions = sorted({r["definition_version"] for r in rows})
    assert len(versions) == 2
    alerts = [r for r in rows if r["notification_key"] and r["state"] == "alerting"]
    assert sorted(r["window_start"] for r in alerts) == [INCIDENT, INCIDENT]
    assert len({r["notification_key"] for r in alerts}) == 2  # a new episode, a new key
    assert sorted(receiver.keys.values()) == [1, 1, 1, 1]  # two alerts and two resolves
    tiny = _rows(db, "tiny")
    assert tiny and not any(r["judged"] or r["breach"] for r in tiny)
    assert all("under min_sample 100000" in r["reason"] for r in tiny if r["sample"] > 0)


def _convo_here(
    args: list[str],
    env: dict[str, str],
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> dict[str, Any]:
    """``convo ARGS`` in this process, with exactly ``env``'s settings and ``folder`` as its
    working folder, as the subprocesses above run it; its --json output."""
    from convo_analytics.cli import main

    with monkeypatch.context() as patch:
        for name in [k for k in os.environ if k.startswith("CONVO_")]:
            patch.delenv(name)
        for name, value in env.items():
            patch.setenv(name, value)
        patch.chdir(folder)
        capsys.readouterr()
        assert main(args) == 0
        out: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    return out


def test_a_kill_between_storing_and_telling_delivers_on_the_rerun_once(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, db = _copy(scene, "killed")
    receiver = Receiver()
    with ServerThread(receiver) as server:
        (folder / "convo.toml").write_text(MONITOR, encoding="utf-8")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder), **FAST,
               "CONVO_CONFIG": str(folder / "convo.toml"),
               "CONVO_NOTIFY_DELIVERY_LOG": str(folder / "deliveries.jsonl"),
               "CONVO_NOTIFY_WEBHOOK_URL": f"{server.url}/h",
               "CONVO_NOTIFY_SIGNING_SECRET": SIGNING,
               # the command judges as of today: the history ended on NOW
               "CONVO_MONITORING_NOTIFY_WITHIN_DAYS": "60"}  # fmt: skip
        argv = [sys.executable, "-m", "convo_analytics.cli", "monitors", "evaluate",
                "--db", str(db), "--json"]  # fmt: skip
        held = subprocess.Popen(argv, env={**env, "CONVO_MONITORS_HOLD": "evaluated"},
                                cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)  # fmt: skip
        try:
            OutputWatcher(held.stderr, "the held evaluation").wait_for("monitors holding", 120)
        finally:
            held.send_signal(signal.SIGKILL)
            held.wait(timeout=30)
        assert held.returncode == -signal.SIGKILL
        stored = [r for r in _rows(db) if r["notification_key"]]
        assert len(stored) == 2 and all(r["notified_at"] is None for r in stored)
        assert receiver.requests == []
        runs = [subprocess.run(argv, env=env, cwd=folder, capture_output=True, text=True,
                               timeout=300, check=True) for _ in range(2)]  # fmt: skip
    first, second = (orjson.loads(r.stdout) for r in runs)
    assert first["windows"] == 0 and first["deliveries"]["recorded"] == 2
    assert second["deliveries"] == {"recorded": 0}
    assert receiver.keys == {r["notification_key"]: 1 for r in stored}
    assert all(r["notified_at"] is not None for r in _rows(db) if r["notification_key"])
    # the commands that read them: list (the state), history (newest first, explained); in
    # this process (what they print is what they read; the processes above were killed)
    listed = _convo_here(["monitors", "list", "--db", str(db), "--json"], env, folder,
                         monkeypatch, capsys)  # fmt: skip
    (monitor,) = listed["monitors"]
    assert monitor["name"] == "escalations" and monitor["origin"] == "config"
    assert [s["state"] for s in monitor["series"]] == ["ok"]
    history = _convo_here(["monitors", "history", "escalations", "--db", str(db), "--limit",
                           "400", "--json"], env, folder, monkeypatch, capsys)  # fmt: skip
    starts = [r["window_start"] for r in history["rows"]]
    assert starts == sorted(starts, reverse=True) and str(INCIDENT) in starts
    (opened,) = [r for r in history["rows"] if r["window_start"] == str(INCIDENT)]
    assert opened["state"] == "alerting" and opened["explanation"]["slice"]["channel"] == "web"
