"""`convo run` as a scheduler runs it: real processes, a real sandbox, real files.

Kills land inside each step (SIGKILL as soon as the step says it started,
plus a little), and a re-run must leave the warehouse as a clean run does.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest

from conftest import ACME_KEY, make_settings
from convo_analytics._serving import ServerThread
from convo_analytics.pipeline import LOCKED_EXIT
from convo_analytics.publish import current_snapshot
from convo_analytics.sandbox import Sandbox, create_app
from convo_analytics.sandbox._history_archive import write_history_archive

SECRET = "whsec_pipeline_tests_0123456789"
STEPS = ["extract", "webhook_ingest", "transform", "monitors", "exports", "retention", "publish",
         "reports"]  # fmt: skip
RUN_TIMEOUT = 300


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A sandbox with a fixed history, and that history's webhook archive."""
    sandbox = Sandbox(make_settings(conversations=150, days=7))
    archive = tmp_path_factory.mktemp("history") / "history.jsonl.gz"
    workspace = sandbox.workspace_for(ACME_KEY)
    assert workspace is not None
    write_history_archive(archive, [workspace], SECRET)
    with ServerThread(create_app(sandbox)) as server:
        yield server.url, archive


def _setup(folder: Path, url: str, archive: Path, **extra: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hooks").mkdir(exist_ok=True)
    lines = [
        "[service]", f'base_url = "{url}"', 'rate_limit = "none"',
        "[warehouse]", 'path = "w.duckdb"',
        "[webhooks]", 'archive_dir = "hooks"',
        "[publish]", 'dir = "published"',
        "[export]", 'dir = "exports"',
        "[run]", 'lock_file = "run.lock"', f'ingest_paths = ["{archive}"]',
        *(f"{k} = {v}" for k, v in extra.items()),  # values are TOML literals
    ]  # fmt: skip
    (folder / "convo.toml").write_text("\n".join(lines) + "\n")
    return folder / "convo.toml"


def _env(key: str = ACME_KEY) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "CONVO_API_KEY": key, "CONVO_WEBHOOK_SECRET": SECRET,
            "HOME": os.environ.get("HOME", "/root")}  # fmt: skip


def _argv(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "convo_analytics.cli", "run", "--config", str(config), *extra]


def _run(config: Path, key: str = ACME_KEY) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _argv(config, "--json"), env=_env(key), capture_output=True, text=True,
        timeout=RUN_TIMEOUT, cwd=config.parent,
    )  # fmt: skip


def _start(config: Path, hold: str) -> subprocess.Popen[str]:
    """A run that stops inside step ``hold`` until it is killed (the runner's test knob)."""
    env = {**_env(), "CONVO_RUN_HOLD_STEP": hold}
    return subprocess.Popen(
        _argv(config), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=config.parent,
    )  # fmt: skip


def _wait_for(proc: subprocess.Popen[str], text: str, timeout: float = 120) -> None:
    """Read the run's log until ``text`` shows (bounded in time)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"the run ended before {text!r}")
        if text in line:
            return
    raise AssertionError(f"no {text!r} within {timeout} s")


def _content(db: Path) -> dict[str, Any]:
    """What a run leaves, without its run ids and clocks."""
    queries = {
        "conversations": "SELECT id, updated_at, status, message_count FROM conversations",
        "messages": "SELECT id, conversation_id, position, text FROM messages",
        "leads": "SELECT id, score, qualified_at FROM leads",
        "raw_details": "SELECT id, payload_hash FROM raw_conversation_details",
        "events": "SELECT event_id, event_type, occurred_at FROM events",
        "quarantine": "SELECT source_line, reason FROM quarantine",
        "escalations": "SELECT escalation_key, escalated_at FROM escalations",
        "mart_conversations": "SELECT * FROM mart_conversations",
        "mart_daily": "SELECT * FROM mart_daily_conversations",
        "mart_incidents": "SELECT incident_id, excerpt_redacted FROM mart_guardrail_incidents",
    }
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = {}
        for name, sql in queries.items():
            rows = sorted(repr(r) for r in con.execute(sql).fetchall())
            out[name] = (len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest())
        return out
    finally:
        con.close()


@pytest.fixture(scope="module")
def clean(service: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    url, archive = service
    config = _setup(tmp_path_factory.mktemp("clean"), url, archive)
    done = _run(config)
    assert done.returncode == 0, done.stderr[-3000:]
    return {
        "config": config,
        "result": orjson.loads(done.stdout),
        "content": _content(config.parent / "w.duckdb"),
    }


def test_a_run_does_every_step_and_records_it(clean: dict[str, Any]) -> None:
    config, result = clean["config"], clean["result"]
    assert [s["name"] for s in result["steps"]] == STEPS
    assert all(s["status"] == "ok" for s in result["steps"])
    assert clean["content"]["conversations"][0] == 150
    assert clean["content"]["events"][0] > 0
    folder = config.parent
    snap = current_snapshot(folder / "published")
    assert snap is not None
    assert list((folder / "exports").glob("summary_*.json"))
    assert list((folder / "exports").glob("guardrail-incidents_*.manifest.json"))
    con = duckdb.connect(str(folder / "w.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "SELECT status, failed_step, json_array_length(steps), snapshot_id, duration_seconds "
            "FROM pipeline_runs"
        ).fetchall()
    finally:
        con.close()
    assert rows == [("ok", None, len(STEPS), snap.snapshot_id,
                     pytest.approx(result["seconds"], abs=0.01))]  # fmt: skip


def test_the_summary_line_is_one_line(service: tuple[str, Path], tmp_path: Path) -> None:
    url, archive = service
    config = _setup(tmp_path, url, archive)
    done = subprocess.run(_argv(config), env=_env(), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0
    (line,) = done.stdout.splitlines()
    assert line.startswith("run ") and " ok in " in line and "transform ok" in line
    assert "reconciliation match" in line and "mismatches 0" in line
    assert " INFO " not in done.stderr, done.stderr  # the step logs only when asked


def test_the_step_logs_come_with_verbose_or_in_the_log_file(
    service: tuple[str, Path], tmp_path: Path
) -> None:
    url, archive = service
    config = _setup(tmp_path, url, archive, log_file='"logs/run.log"')
    quiet = subprocess.run(_argv(config), env=_env(), capture_output=True, text=True,
                           timeout=RUN_TIMEOUT, cwd=tmp_path)  # fmt: skip
    assert quiet.returncode == 0 and " INFO " not in quiet.stderr
    kept = (tmp_path / "logs" / "run.log").read_text()
    assert "step extract started" in kept and "step publish ok" in kept
    loud = subprocess.run(_argv(config, "--verbose"), env=_env(), capture_output=True,
                          text=True, timeout=RUN_TIMEOUT, cwd=tmp_path)  # fmt: skip
    assert loud.returncode == 0 and len(loud.stdout.splitlines()) == 1
    assert "step extract started" in loud.stderr and "step publish ok" in loud.stderr
    assert (tmp_path / "logs" / "run.log").read_text().count("step extract started") == 2
    for text in (quiet.stderr, loud.stderr, kept):
        assert ACME_KEY not in text and SECRET not in text


def test_the_step_list_wraps_whole_sentences(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`convo run --list` at any width: each step's whole first paragraph, between words.
    (In this process: the width is the terminal's, read from COLUMNS when the list is
    printed; `convo run --help` and the runs below are real processes.)"""
    from convo_analytics.cli import main
    from convo_analytics.pipeline import load_steps

    nightly = Path(__file__).resolve().parent.parent / "pipelines" / "nightly.py"
    for width in ("44", "80", "200"):
        monkeypatch.setenv("COLUMNS", width)
        assert main(["run", "--list"]) == 0
        out, err = capsys.readouterr()
        assert err == ""
        lines = out.splitlines()
        assert all(len(line) <= max(int(width), 40) for line in lines)
        said: dict[str, list[str]] = {}
        for line in lines:
            if line.startswith("  "):
                said[list(said)[-1]].append(line.strip())
            else:
                said[line] = []
        for step in load_steps(nightly):
            first = " ".join(step.doc.strip().split("\n\n")[0].split())
            assert " ".join(said[step.name]) == first, (width, step.name)


def test_a_second_run_while_one_runs_exits_with_the_lock_code(
    service: tuple[str, Path], tmp_path: Path
) -> None:
    url, archive = service
    config = _setup(tmp_path, url, archive)
    first = _start(config, hold="transform")
    try:
        _wait_for(first, "step transform holding")
        second = _run(config)
    finally:
        first.kill()
        first.wait(timeout=30)
    assert second.returncode == LOCKED_EXIT
    assert "holds" in second.stderr and "Traceback" not in second.stderr
    assert _run(config).returncode == 0  # and once it is gone, the next run goes


@pytest.mark.parametrize("step", STEPS)
def test_a_run_killed_inside_a_step_then_rerun_matches_a_clean_run(
    service: tuple[str, Path], tmp_path: Path, clean: dict[str, Any], step: str
) -> None:
    url, archive = service
    config = _setup(tmp_path, url, archive)
    doomed = _start(config, hold=step)
    try:
        _wait_for(doomed, f"step {step} holding")
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=30)
    published_before = current_snapshot(tmp_path / "published")
    again = _run(config)
    assert again.returncode == 0, again.stderr[-3000:]
    result = orjson.loads(again.stdout)
    assert result["recovered_from"], "the next run saw the killed run's lock file"
    assert _content(tmp_path / "w.duckdb") == clean["content"]
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    try:
        statuses = [r[0] for r in con.execute(
            "SELECT status FROM pipeline_runs ORDER BY started_at").fetchall()]  # fmt: skip
    finally:
        con.close()
    assert statuses == ["interrupted", "ok"]
    latest = current_snapshot(tmp_path / "published")
    assert latest is not None and latest != published_before


def test_a_failed_run_alerts_and_leaves_the_published_data(
    tmp_path: Path, clean: dict[str, Any]
) -> None:
    alert_file = tmp_path / "alert.txt"
    command = (
        f'echo "$CONVO_RUN_STATUS $CONVO_RUN_FAILED_STEP $CONVO_RUN_ERROR" > {alert_file}; '
        f"env > {tmp_path / 'alert-env.txt'}"
    )
    # after a good run (published data to keep)
    config = _clean_copy(clean, tmp_path, alert_command=orjson.dumps(command).decode())
    before = current_snapshot(tmp_path / "published")
    assert before is not None
    wrong_key = "sk_test_not_a_real_key_0000"
    done = _run(config, key=wrong_key)
    assert done.returncode == 1
    result = orjson.loads(done.stdout)
    assert result["failed_step"] == "extract"
    assert [s["status"] for s in result["steps"]] == ["failed"] + ["skipped"] * (len(STEPS) - 1)
    assert current_snapshot(tmp_path / "published") == before
    alert = alert_file.read_text()
    assert alert.startswith("failed extract") and ("401" in alert or "invalid" in alert)
    alert_env = (tmp_path / "alert-env.txt").read_text()
    assert "CONVO_RUN_ID=" in alert_env and "CONVO_API_KEY" not in alert_env
    for text in (alert, alert_env, done.stdout, done.stderr):
        assert wrong_key not in text and SECRET not in text


def test_a_run_that_cannot_open_the_warehouse_fails_and_alerts(
    service: tuple[str, Path], tmp_path: Path
) -> None:
    url, archive = service
    alert_file = tmp_path / "alert.txt"
    command = f'echo "$CONVO_RUN_FAILED_STEP $CONVO_RUN_ERROR" > {alert_file}'
    config = _setup(tmp_path, url, archive, alert_command=orjson.dumps(command).decode())
    holder = (
        "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
        "print('ready', flush=True); time.sleep(60)"
    )
    other = subprocess.Popen([sys.executable, "-c", holder, str(tmp_path / "w.duckdb")],
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "ready"
        done = _run(config)
    finally:
        other.kill()
        other.wait(timeout=10)
    assert done.returncode == 1, done.stderr[-2000:]
    result = orjson.loads(done.stdout)
    assert result["failed_step"] == "start" and "in use by another process" in result["error"]
    assert all(s["status"] == "skipped" for s in result["steps"])
    assert alert_file.read_text().startswith("start ")


def test_ingested_archives_past_retention_go_and_the_others_stay(
    service: tuple[str, Path], tmp_path: Path
) -> None:
    url, archive = service
    config = _setup(tmp_path, url, archive, archive_retention_days="1")
    hooks = tmp_path / "hooks"
    old_ingested = hooks / "2026-01-01.jsonl"
    lines = gzip.decompress(archive.read_bytes())[:20_000].rsplit(b"\n", 1)[0]
    old_ingested.write_bytes(lines + b"\n")
    all_quarantined = hooks / "2026-01-03.jsonl"  # signed with a secret we do not have
    all_quarantined.write_bytes(b'{"event": "x", "signature": "sha256=00"}\n')
    assert _run(config).returncode == 0
    unread = hooks / "2026-01-02.jsonl.partial"
    unread.write_bytes(b"{}\n")
    week_ago = time.time() - 7 * 86_400
    for path in (old_ingested, unread, all_quarantined):
        os.utime(path, (week_ago, week_ago))
    done = _run(config)
    assert done.returncode == 0
    result = orjson.loads(done.stdout)
    steps = {s["name"]: s for s in result["steps"]}
    counts = steps["retention"]["counts"]
    assert counts["archive_files"] == 1
    assert not old_ingested.exists() and unread.exists() and all_quarantined.exists()
    # the run's JSON names its manifest, which lists the file (run.archive_retention_days,
    # the older name of retention.archive_days, still read)
    manifest = orjson.loads(Path(counts["manifest"]).read_bytes())
    assert (
        Path(counts["manifest"]).resolve()
        == (tmp_path / "data" / "retention" / f"{result['run_id']}.json").resolve()
    )
    assert manifest["settings"]["archive_days_from"] == "run.archive_retention_days"
    assert [f["name"] for f in manifest["flat_endpoint_archive"]["files"]] == [old_ingested.name]


def _clean_copy(clean: dict[str, Any], folder: Path, **extra: str) -> Path:
    """A copy of the clean run's folder (its warehouse, snapshot, exports, audit log and
    hooks): a folder after one run, without running one; its config rewritten with
    ``extra`` when given. Returns the copy's config."""
    shutil.copytree(clean["config"].parent, folder, dirs_exist_ok=True)
    config = folder / "convo.toml"
    if extra:
        text = clean["config"].read_text()
        config.write_text(text + "".join(f"{k} = {v}\n" for k, v in extra.items()))
    return config


def _cli(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "convo_analytics.cli", "--config", str(config), *args]


def _convo(config: Path, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """``convo --config CONFIG ARGS...`` run to its end, as a scheduler or a person would."""
    return subprocess.run(_cli(config, *args), env={**_env(), **env}, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT, cwd=config.parent)  # fmt: skip


def _files(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` but the lock, with a hash of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "run.lock"
    }


def test_every_writer_stops_with_75_while_a_run_holds_the_lock_and_changes_nothing(
    service: tuple[str, Path], tmp_path: Path, clean: dict[str, Any]
) -> None:
    archive = service[1]
    config = _clean_copy(clean, tmp_path)  # a warehouse and a snapshot the writers could change
    purge = ["webhooks", "quarantine", "purge", "--before", "2100-01-01"]
    writers = {
        "convo extract": ["extract"],
        "convo webhooks ingest": ["webhooks", "ingest", str(archive)],
        "convo webhooks quarantine replay": ["webhooks", "quarantine", "replay"],
        "convo webhooks quarantine purge": purge,
        "convo transform": ["transform"],
        "convo publish": ["publish"],
        "convo run": ["run"],
    }
    holder = _start(config, hold="transform")
    try:
        _wait_for(holder, "step transform holding")
        before = _files(tmp_path)
        done = {name: _convo(config, args) for name, args in writers.items()}
        after = _files(tmp_path)  # before the reader, whose export the audit trail records
        reader = _convo(config, ["export", "summary", "--from", "2026-11-01", "--to", "2026-11-17"])
        listing = _convo(config, ["webhooks", "quarantine", "list", "--json"])
    finally:
        holder.kill()
        holder.wait(timeout=30)
    for name, result in done.items():
        assert result.returncode == LOCKED_EXIT, (name, result.stderr[-2000:])
        line = result.stderr.strip().splitlines()[-1]
        assert line.startswith(f"{name}: convo run (run "), line
        assert f"pid {holder.pid} " in line and "since " in line and "Traceback" not in line
    assert after == before, "a writer that found the lock taken changed a file"
    assert reader.returncode == 0, reader.stderr[-2000:]  # readers never take the lock
    assert orjson.loads(reader.stdout)["totals"]["conversations"] > 0
    assert listing.returncode == 0 and orjson.loads(listing.stdout)["open"] >= 0


def test_a_writer_waits_for_the_lock_when_asked(service: tuple[str, Path], tmp_path: Path) -> None:
    url, archive = service
    config = _setup(tmp_path, url, archive)
    holder = _start(config, hold="transform")
    try:
        _wait_for(holder, "step transform holding")
        brief = _convo(config, ["transform"], CONVO_RUN_LOCK_WAIT_SECONDS="0.3")
        patient = subprocess.Popen(
            _cli(config, "transform", "--json"),
            env={**_env(), "CONVO_RUN_LOCK_WAIT_SECONDS": "120"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        )  # fmt: skip
        _wait_for(patient, "waiting up to 120 s for convo run")
    finally:
        holder.kill()  # the kernel drops the run's lock with it; the waiting writer goes on
        holder.wait(timeout=30)
    try:
        out, err = patient.communicate(timeout=RUN_TIMEOUT)
    finally:
        patient.kill()
    assert brief.returncode == LOCKED_EXIT and "after waiting 0.3 s" in brief.stderr
    assert patient.returncode == 0, err[-2000:]
    assert orjson.loads(out)["conversations"] == 150


# -- reconciliation you cannot miss -------------------------------------------------------------


def test_a_run_whose_figures_differ_from_the_services_is_a_warning_shown_on_the_pipeline_page(
    service: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service's own summary counts 5 more conversations on its busiest day than the
    warehouse holds: the run does every step and ends as ``warning`` (exit 0), exits 1
    with --fail-on-mismatch, says so in its summary line, --json and pipeline_runs, and
    the Pipeline page shows the day and both figures."""
    from streamlit.testing.v1 import AppTest

    from convo_analytics.sandbox import _routes_read

    real = _routes_read.summarize
    skewed_days: list[str] = []

    def skewed(*args: Any, **kwargs: Any) -> dict[str, Any]:
        body = real(*args, **kwargs)
        busiest = max(body["daily"], key=lambda d: d["conversations"])
        busiest["conversations"] += 5
        skewed_days.append(busiest["date"])
        return body

    monkeypatch.setattr(_routes_read, "summarize", skewed)
    url, archive = service
    alert_file = tmp_path / "alert.txt"
    command = f'echo "$CONVO_RUN_STATUS|$CONVO_RUN_WARNINGS" > {alert_file}'
    config = _setup(tmp_path, url, archive, alert_command=orjson.dumps(command).decode())
    done = _run(config)
    assert done.returncode == 0, done.stderr[-3000:]  # a warning: schedulers do not retry
    result = orjson.loads(done.stdout)
    assert result["status"] == "warning" and result["failed_step"] is None
    steps = {s["name"]: s for s in result["steps"]}
    assert steps["transform"]["status"] == "warning"
    assert all(s["status"] == "ok" for n, s in steps.items() if n != "transform")
    (warning,) = result["warnings"]
    day = skewed_days[-1]
    found = warning["reconciliation"]
    assert warning["step"] == "transform" and warning["kind"] == "reconciliation"
    assert found["outcome"] == "differences" and found["days_compared"] > 1
    conversations = [m for m in found["mismatches"] if m["metric"] == "conversations"]
    assert [(m["date"], m["service"] - m["warehouse"]) for m in conversations] == [(day, 5)]
    assert steps["transform"]["counts"]["mismatches"] >= 1
    assert alert_file.read_text().startswith("warning|transform: reconciliation: ")
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    try:
        ((status, steps_json),) = con.execute(
            "SELECT status, steps FROM pipeline_runs"
        ).fetchall()  # fmt: skip
    finally:
        con.close()
    assert status == "warning" and "1 difference from the service's own summary" in steps_json

    line = subprocess.run(_argv(config), env=_env(), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, cwd=tmp_path)  # fmt: skip
    assert line.returncode == 0 and len(line.stdout.splitlines()) == 1
    assert " warning in " in line.stdout and "transform warning" in line.stdout
    assert "warning in transform: reconciliation: " in line.stdout and day in line.stdout
    strict = subprocess.run(_argv(config, "--fail-on-mismatch", "--json"), env=_env(),
                            capture_output=True, text=True, timeout=RUN_TIMEOUT,
                            cwd=tmp_path)  # fmt: skip
    assert strict.returncode == 1, strict.stderr[-2000:]
    assert orjson.loads(strict.stdout)["status"] == "warning"

    monkeypatch.setenv("CONVO_PUBLISHED_DIR", str(tmp_path / "published"))
    app = str(Path(__file__).resolve().parent.parent / "dashboards" / "streamlit_app.py")
    at = AppTest.from_file(app, default_timeout=60)
    at.run()
    at.switch_page("app_pages/pipeline.py").run()
    assert not at.exception, at.exception
    warnings = [w.value for w in at.warning]
    assert any("last nightly run" in w and "ended with a warning" in w for w in warnings)
    assert any("difference" in w and "from the service's own summary" in w for w in warnings)
    table = next(d.value for d in at.dataframe if "metric" in d.value.columns)
    shown = table[table["metric"] == "conversations"]  # a pandas frame
    assert [str(d) for d in shown["date"]] == [day]
    (figures,) = shown[["warehouse", "service", "difference"]].values.tolist()
    assert int(figures[1].replace(",", "")) - int(figures[0].replace(",", "")) == 5
    assert figures[2] == "-5"
    runs = next(d.value for d in at.dataframe if "warning" in d.value.columns)
    assert "warning" in set(runs["status"])


def test_an_undelivered_alert_never_fails_the_run_and_the_next_run_delivers_it(
    service: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The alert of a failed run meets a receiver answering 500: the run's result is its
    steps' (failed, then ok for the next run, whose data steps all succeed), `--json` and
    the Pipeline page show the delivery pending, and once the receiver answers, the next
    run delivers it: signed, with the key it had, seen once."""
    from streamlit.testing.v1 import AppTest

    from notify_support import SIGNING, Receiver

    url, archive = service
    receiver = Receiver(answers=[500] * 4)  # two attempts in each of the first two runs
    with ServerThread(receiver) as hook:
        (tmp_path / "secrets").mkdir(parents=True)
        (tmp_path / "secrets" / "hook-url").write_text(f"{hook.url}/hooks/convo\n")
        (tmp_path / "secrets" / "signing").write_text(SIGNING + "\n")
        config = _setup(tmp_path, url, archive)
        with config.open("a") as toml:
            toml.write('[notify]\nwebhook_url_file = "secrets/hook-url"\n'
                       'signing_secret_file = "secrets/signing"\nmax_attempts = 2\n'
                       "backoff_seconds = 0.01\n")  # fmt: skip
        failed = _run(config, key="sk_test_not_a_real_key_0000")
        assert failed.returncode == 1, failed.stderr[-2000:]
        first = orjson.loads(failed.stdout)
        assert first["status"] == "failed" and first["deliveries"]["pending"] == 1
        (pending,) = first["deliveries"]["undelivered"]
        assert pending["channel"] == "webhook" and pending["kind"] == "run.failed"
        assert pending["error"] == "the receiver answered 500" and pending["attempts"] == 2
        ok = _run(config)
        assert ok.returncode == 0, ok.stderr[-2000:]
        second = orjson.loads(ok.stdout)
        assert second["status"] == "ok" and all(s["status"] == "ok" for s in second["steps"])
        assert second["deliveries"]["pending"] == 1 and second["deliveries"]["delivered"] == 0

        monkeypatch.setenv("CONVO_PUBLISHED_DIR", str(tmp_path / "published"))
        monkeypatch.setenv("CONVO_CONFIG", str(config))  # as `convo dashboard` passes them
        monkeypatch.setenv(
            "CONVO_NOTIFY_DELIVERY_LOG", str(tmp_path / "data/app-state/deliveries.jsonl")
        )
        app = str(Path(__file__).resolve().parent.parent / "dashboards" / "streamlit_app.py")
        at = AppTest.from_file(app, default_timeout=60)
        at.run()
        at.switch_page("app_pages/pipeline.py").run()
        assert not at.exception, at.exception
        assert any("1 alert deliveries were not delivered: 1 pending" in w.value
                   for w in at.warning)  # fmt: skip
        shown = next(d.value for d in at.dataframe if "attempts" in d.value.columns)
        assert shown[["channel", "status", "attempts"]].values.tolist() == [
            ["webhook", "pending", 4]
        ]
        assert list(shown["error"]) == ["the receiver answered 500"]

        line = subprocess.run(_argv(config), env=_env(), capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, cwd=tmp_path)  # fmt: skip
    assert line.returncode == 0, line.stderr[-2000:]
    assert "alert deliveries pending" not in line.stdout
    statuses = [r["status"] for r in receiver.requests]
    assert statuses == [500, 500, 500, 500, 200]
    assert all(r["verified"] for r in receiver.requests)
    assert len({r["body"] for r in receiver.requests}) == 1  # the very same bytes each time
    assert [r["headers"]["x-convo-attempt"] for r in receiver.requests] == ["1", "2", "3", "4",
                                                                           "5"]  # fmt: skip
    assert receiver.keys == {pending["key"]: 1}
    body = orjson.loads(receiver.requests[-1]["body"])
    assert body["event"] == "run.failed" and body["data"]["runId"] == first["run_id"]
    assert body["data"]["failedStep"] == "extract"
    at.run()
    assert not at.exception, at.exception
    assert any("Every alert of the last 30 days was delivered (1)" in s.value for s in at.success)
