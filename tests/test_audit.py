"""The audit trail (issue 30, D-AUDIT-TRAIL): one record per audited action, a chain that
`convo audit verify` checks, and a range a reviewer gets with `convo audit export`.

Real files, real processes: the exports and `convo serve` run as a user runs them (a
subprocess, the server over HTTP on 127.0.0.1), and so does every command whose exit
status matters.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import orjson
import pytest

from convo_analytics._serving import ServerThread
from convo_analytics.audit import (
    GENESIS,
    AuditLog,
    Auditor,
    os_user,
    record_hash,
)
from convo_analytics.config import load_settings
from convo_analytics.pipeline import RunContext, Step, load_steps, run_pipeline, warehouse_writer
from convo_analytics.serve import create_serve_app
from process_support import OutputWatcher, free_port
from transform_support import populated_sandbox

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "convo_analytics.cli"]
TOKEN = "serve_AUDIT_token_value_5e1f"
RANGE = ("--from", "2026-11-01", "--to", "2026-11-30")


def _env(log: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    return {**env, "CONVO_AUDIT_FILE": str(log), "COLUMNS": "200", **more}


def convo(*args: str, log: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], cwd=cwd, env=_env(log, **env), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def records(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [orjson.loads(line) for line in log.read_bytes().splitlines()]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A small transformed warehouse (a sandbox's workspace, days up to 2026-11-18)."""
    with populated_sandbox(tmp_path_factory.mktemp("audit-wh"), 40, ("UTC",)) as (_, db):
        yield db


def _chain(log: Path, count: int) -> list[dict[str, Any]]:
    auditor = Auditor(AuditLog(log))
    return [auditor.record("export.summary", what=f"export {i}", rows=i) for i in range(count)]


# -- each audited action appends exactly one record -----------------------------------


EXPORTS = {
    "summary to stdout": ("export", "summary", *RANGE),
    "summary to a file": ("export", "summary", *RANGE, "--out", "out/s.json"),
    "guardrails": ("export", "guardrails", *RANGE, "--out-dir", "out", "--json"),
    "knowledge gaps to stdout": ("export", "knowledge-gaps", *RANGE),
    "knowledge gaps to a file": ("export", "knowledge-gaps", *RANGE, "--out", "out/g.csv"),
}
ACTION = {"summary": "export.summary", "guardrails": "export.guardrails",
          "knowledge-gaps": "export.gaps"}  # fmt: skip


@pytest.mark.parametrize("args", EXPORTS.values(), ids=EXPORTS.keys())
def test_each_export_appends_exactly_one_record(
    warehouse: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    log = tmp_path / "audit" / "audit.jsonl"
    _chain(log, 2)  # a log that already holds records
    done = convo(*args, "--db", str(warehouse), log=log, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    *_, record = got = records(log)
    assert len(got) == 3
    assert record["seq"] == 3 and record["prev"] == got[1]["hash"]
    assert record["action"] == ACTION[args[1]]
    assert record["who"] == f"os:{os_user()}"
    assert record["what"].startswith(f"convo export {args[1]} --from 2026-11-01 --to 2026-11-30")
    assert isinstance(record["rows"], int) and record["subjects"] == []
    if "--out" in args:  # the file handed out is the one recorded
        out = tmp_path / args[args.index("--out") + 1]
        (entry,) = record["detail"]["files"]
        assert entry["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    elif args[1] != "guardrails":  # what went to stdout is what was recorded
        digest = hashlib.sha256(done.stdout.encode()).hexdigest()
        assert record["detail"]["sha256"] == digest


@pytest.mark.parametrize("kind", ["guardrails", "knowledge-gaps"])
def test_an_export_manifest_joins_the_chain(warehouse: Path, tmp_path: Path, kind: str) -> None:
    """The manifest names its place in the chain (the record's seq and the hash before it),
    the record holds the manifest's SHA-256 and the data file's; a manifest changed later
    no longer matches (`convo audit verify --manifest` exits 1)."""
    log = tmp_path / "audit.jsonl"
    _chain(log, 1)
    out = ["--out-dir", "out"] if kind == "guardrails" else ["--out", "out/gaps.json"]
    fmt = [] if kind == "guardrails" else ["--format", "json"]
    done = convo("export", kind, *RANGE, *out, *fmt, "--db", str(warehouse), log=log, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (manifest_file,) = (tmp_path / "out").glob("*.manifest.json")
    manifest = orjson.loads(manifest_file.read_bytes())
    first, record = records(log)
    assert manifest["audit"] == {"seq": 2, "prev": first["hash"], "log": "audit.jsonl"}
    assert record["detail"]["manifest"] == {
        "path": manifest_file.name,
        "sha256": hashlib.sha256(manifest_file.read_bytes()).hexdigest(),
    }
    (data,) = record["detail"]["files"]
    data_file = tmp_path / "out" / data["path"]
    assert data["sha256"] == hashlib.sha256(data_file.read_bytes()).hexdigest()
    assert data["sha256"] == manifest["files"][0]["sha256"]
    check = convo("audit", "verify", "--manifest", str(manifest_file), log=log, cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    manifest["rowCount"] += 1  # a reviewer's copy altered
    manifest_file.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
    check = convo("audit", "verify", "--manifest", str(manifest_file), log=log, cwd=tmp_path)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "changed since it was recorded: record 2" in check.stdout


def test_an_export_whose_record_cannot_be_written_is_not_handed_out(
    warehouse: Path, tmp_path: Path
) -> None:
    """A log no record can be chained to (its last line damaged) refuses the export (one
    line, exit 2) after the files were written: they are taken back, stdout gets
    nothing. Nothing leaves unrecorded."""
    log = tmp_path / "audit.jsonl"
    _chain(log, 2)
    log.write_bytes(log.read_bytes() + b"not a record\n")
    args = ("export", "guardrails", *RANGE, "--out-dir", "out", "--db", str(warehouse))
    done = convo(*args, log=log, cwd=tmp_path)
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stdout + done.stderr
    assert "ends with a damaged record" in lines[0] and "convo audit verify" in lines[0]
    assert list((tmp_path / "out").iterdir()) == []
    summary = convo("export", "summary", *RANGE, "--db", str(warehouse), log=log, cwd=tmp_path)
    assert summary.returncode == 2 and summary.stdout == ""
    assert log.read_bytes().count(b"\n") == 3  # nothing appended


def test_with_auditing_off_nothing_is_recorded(warehouse: Path, tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    done = convo("export", "summary", *RANGE, "--db", str(warehouse), log=log, cwd=tmp_path,
                 CONVO_AUDIT_ENABLED="false")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not log.exists()


def test_the_runs_exports_step_records_each_export_once(warehouse: Path, tmp_path: Path) -> None:
    """The nightly exports step: its summary and its guardrail log (manifest joined), one
    record each."""
    log = tmp_path / "audit.jsonl"
    settings = load_settings(None, {"audit.file": log, "export.dir": tmp_path / "exports",
                                    "warehouse.path": warehouse}, {})  # fmt: skip
    (exports,) = [s for s in load_steps(ROOT / "pipelines" / "nightly.py") if s.name == "exports"]
    exports.run(RunContext(settings=settings, run_id="run-audit-1", db_path=warehouse))
    summary, guardrails = records(log)
    assert (summary["action"], guardrails["action"]) == ("export.summary", "export.guardrails")
    assert summary["what"] == guardrails["what"] == "convo run run-audit-1 (exports step)"
    (manifest,) = (tmp_path / "exports").glob("*.manifest.json")
    assert orjson.loads(manifest.read_bytes())["audit"]["seq"] == guardrails["seq"] == 2


# -- convo serve ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def published(warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("audit-published")
    done = subprocess.run(
        [*CLI, "publish", "--db", str(warehouse), "--dir", str(folder / "published")],
        cwd=folder, env=_env(folder / "unused.jsonl"), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return folder / "published"


def test_serve_records_each_request_with_the_tokens_name_never_its_value(
    warehouse: Path, published: Path, tmp_path: Path
) -> None:
    log = tmp_path / "audit" / "audit.jsonl"
    env = _env(log, CONVO_SERVE_TOKEN=TOKEN, CONVO_PUBLISH_DIR=str(published),
               CONVO_AUDIT_FORWARDED_USER_HEADER="X-Forwarded-User")  # fmt: skip
    proc = subprocess.Popen(
        [*CLI, "serve", "--port", str(free_port()), "--db", str(warehouse)], cwd=tmp_path, env=env,
        text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        url = OutputWatcher(proc.stdout, "convo serve").wait_for(r"on (http://\S+) from")[1]
        summary = f"{url}/v1/analytics/summary"
        params = {"from": "2026-11-10", "to": "2026-11-16"}
        auth = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(timeout=30) as client:
            ok = client.get(summary, params=params, headers=auth)
            assert ok.status_code == 200, ok.text
            assert len(records(log)) == 1
            bad = client.get(summary, params={"from": "x", "to": "2026-11-16"}, headers=auth)
            assert bad.status_code == 400
            assert len(records(log)) == 2
            forwarded = {**auth, "X-Forwarded-User": "alice@example.com"}
            proxied = client.get(summary, params=params, headers=forwarded)
            assert proxied.status_code == 200
            refused = client.get(summary, params=params, headers={"Authorization": "Bearer no"})
            assert refused.status_code == 401
            assert client.get(f"{url}/healthz").status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    first, second, third = records(log)  # the 401 and /healthz read nothing: not recorded
    assert first["action"] == "serve.request" and first["who"] == "token:serve.token"
    assert first["what"] == "GET /v1/analytics/summary?from=2026-11-10&to=2026-11-16"
    assert first["rows"] == 7 and first["detail"] == {"status": 200}
    assert first["workspace"] == ok.json()["workspaceId"]
    assert second["detail"] == {"status": 400} and second["rows"] is None
    assert third["who"] == "proxy:alice@example.com"
    assert third["detail"] == {"status": 200, "via": "token:serve.token"}
    for path in log.parent.iterdir():
        assert TOKEN.encode() not in path.read_bytes(), path


def test_a_workspace_token_is_recorded_by_its_workspace_and_number(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    app = create_serve_app(
        tmp_path / "none.duckdb", None, workspace_tokens={"acme": ["tok-a1", "tok-a2"]},
        auditor=Auditor(AuditLog(log)),
    )  # fmt: skip
    with ServerThread(app) as server:
        r = httpx.get(f"{server.url}/v1/analytics/summary?from=2026-11-01&to=2026-11-02",
                      headers={"Authorization": "Bearer tok-a2"}, timeout=30)  # fmt: skip
    assert r.status_code == 503  # no warehouse: still read with that token, so recorded
    (record,) = records(log)
    assert record["who"] == "token:workspace:acme#2" and record["detail"]["status"] == 503
    assert b"tok-a" not in log.read_bytes()


def test_serve_answers_503_when_the_record_cannot_be_written(
    published: Path, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("")
    unwritable = Auditor(AuditLog(tmp_path / "file" / "audit.jsonl"))
    app = create_serve_app(tmp_path / "w.duckdb", TOKEN, published, auditor=unwritable)
    with ServerThread(app) as server:
        r = httpx.get(f"{server.url}/v1/analytics/summary?from=2026-11-10&to=2026-11-16",
                      headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)  # fmt: skip
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "audit_unavailable"
    assert "totals" not in r.text and str(tmp_path) not in r.text


def test_a_notebook_run_appends_exactly_one_record(published: Path, tmp_path: Path) -> None:
    """`convo notebook run`: one record holding the report's files' SHA-256."""
    log = tmp_path / "audit.jsonl"
    done = convo("notebook", "run", "lead_funnel_by_source", "--out", "rep", "--dir",
                 str(published), log=log, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (record,) = records(log)
    assert record["action"] == "notebook.run" and record["who"] == f"os:{os_user()}"
    assert record["what"].startswith("convo notebook run lead_funnel_by_source --out rep --dir")
    assert record["detail"]["notebook"] == "lead_funnel_by_source" and record["rows"] > 0
    written = sorted(p.name for p in (tmp_path / "rep").iterdir())
    assert sorted(f["path"] for f in record["detail"]["files"]) == written
    for entry in record["detail"]["files"]:
        digest = hashlib.sha256((tmp_path / "rep" / entry["path"]).read_bytes()).hexdigest()
        assert entry["sha256"] == digest


# -- convo audit verify ---------------------------------------------------------------


def _rewrite(log: Path, change: str) -> None:
    lines = log.read_bytes().splitlines(keepends=True)
    if change == "edited":
        record = orjson.loads(lines[3])
        record["rows"] = 999
        lines[3] = orjson.dumps(record) + b"\n"
    elif change == "edited, hash recomputed":
        record = orjson.loads(lines[3])
        record["rows"] = 999
        record["hash"] = record_hash(record)
        lines[3] = orjson.dumps(record) + b"\n"
    elif change == "deleted":
        del lines[3]
    elif change == "swapped":
        lines[3], lines[4] = lines[4], lines[3]
    log.write_bytes(b"".join(lines))


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("edited", "line 4 (record 4): edited: its hash does not match its content"),
        ("edited, hash recomputed", "line 5 (record 5): its prev is not record 4's hash"),
        ("deleted", "line 4 (record 5): out of sequence: record 4 missing before it"),
        ("swapped", "line 4 (record 5): out of sequence: record 4 missing before it"),
    ],
)
def test_verify_names_the_first_bad_record(tmp_path: Path, change: str, says: str) -> None:
    log = tmp_path / "audit.jsonl"
    _chain(log, 8)
    _rewrite(log, change)
    done = convo("audit", "verify", log=log, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert says in done.stdout, done.stdout
    as_json = orjson.loads(convo("audit", "verify", "--json", log=log, cwd=tmp_path).stdout)
    first_bad = 5 if "recomputed" in change else 4
    assert as_json["ok"] is False and as_json["problems"][0]["line"] == first_bad


def test_a_truncated_tail_is_caught_against_the_recorded_head(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    _chain(log, 6)
    head = convo("audit", "head", log=log, cwd=tmp_path)
    assert head.returncode == 0 and head.stdout.startswith("6:"), head.stdout + head.stderr
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:4]))  # whole records, the chain intact: cut short
    done = convo("audit", "verify", log=log, cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    assert "truncated: the log ends at record 4" in done.stdout
    assert "record 5 onwards is missing" in done.stdout
    # the heads beside the log removed too: a head kept elsewhere still catches it
    log.with_name("audit.jsonl.heads").unlink()
    assert convo("audit", "verify", log=log, cwd=tmp_path).returncode == 0
    given = convo("audit", "verify", "--head", head.stdout.strip(), log=log, cwd=tmp_path)
    assert given.returncode == 1 and "truncated" in given.stdout
    # a head whose record was rewritten (same seq, another chain) is caught as well
    _chain(tmp_path / "other.jsonl", 6)
    log.write_bytes((tmp_path / "other.jsonl").read_bytes())
    rewritten = convo("audit", "verify", "--head", head.stdout.strip(), log=log, cwd=tmp_path)
    assert rewritten.returncode == 1 and "(record 6): not the record the head" in rewritten.stdout


def test_each_run_records_the_head_and_verify_reads_it_from_the_warehouse(
    tmp_path: Path,
) -> None:
    """`convo run` keeps the head in its pipeline_runs row (and beside the log): a log
    cut short after a run is found from the warehouse alone."""
    log, db = tmp_path / "audit.jsonl", tmp_path / "w.duckdb"
    settings = load_settings(
        None, {"audit.file": log, "warehouse.path": db, "publish.dir": tmp_path / "pub"}, {}
    )

    def audited(ctx: RunContext) -> dict[str, Any]:
        Auditor(AuditLog(log)).record("export.summary", what="a step's export")
        return {}

    with warehouse_writer(settings, "convo run", None, publishes=True) as lock:
        result = run_pipeline([Step("audited", audited)], settings, lock)
    assert result.status == "ok", result.error
    (record,) = records(log)
    assert result.audit_head == f"1:{record['hash']}" == result.as_json()["audit_head"]
    con = duckdb.connect(str(db), read_only=True)
    try:
        kept = con.execute("SELECT audit_head FROM pipeline_runs").fetchall()
    finally:
        con.close()
    assert kept == [(result.audit_head,)]
    log.with_name("audit.jsonl.heads").unlink()
    log.write_bytes(b"")  # the whole log emptied
    done = convo("audit", "verify", "--db", str(db), log=log, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "truncated: the log ends at record 0" in done.stdout and "run" in done.stdout


# -- several writers, torn lines ------------------------------------------------------

WRITER = """
import sys, time
from pathlib import Path
from convo_analytics.audit import Auditor, AuditLog
auditor = Auditor(AuditLog(Path(sys.argv[1])))
print("ready", flush=True)
deadline = time.monotonic() + 60  # all start together, when the test says go
while not Path(sys.argv[4]).exists() and time.monotonic() < deadline:
    time.sleep(0.002)
for i in range(int(sys.argv[3])):
    auditor.record("serve.request", what=f"{sys.argv[2]} {i}")
"""


def test_concurrent_appends_from_several_processes_keep_the_chain_whole(tmp_path: Path) -> None:
    log, go = tmp_path / "audit.jsonl", tmp_path / "go"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(log), f"writer-{n}", "50", str(go)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    for proc in writers:  # each has imported everything and waits
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    go.touch()
    for proc in writers:
        assert proc.wait(timeout=120) == 0
    got = records(log)
    assert [r["seq"] for r in got] == list(range(1, 201))
    assert sorted(r["what"] for r in got) == sorted(
        f"writer-{n} {i}" for n in range(4) for i in range(50)
    )
    done = convo("audit", "verify", log=log, cwd=tmp_path)
    assert done.returncode == 0 and "200 records" in done.stdout, done.stdout + done.stderr


def test_a_torn_last_line_is_reported_then_repaired_by_the_next_append(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    _chain(log, 3)
    whole = log.read_bytes()
    torn = b'{"seq":4,"when":"2026-11-20T10:00:00.000000Z","who":"os:'
    log.write_bytes(whole + torn)  # a write cut short by a kill
    done = convo("audit", "verify", log=log, cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    assert "line 4: torn" in done.stdout
    record = Auditor(AuditLog(log)).record("export.gaps")
    assert record["seq"] == 4 and record["prev"] == records(tmp_path / "audit.jsonl")[2]["hash"]
    assert record["detail"]["repaired"]["torn_line"] == {
        "bytes": len(torn),
        "sha256": hashlib.sha256(torn).hexdigest(),
        "text": torn.decode(),
    }
    assert convo("audit", "verify", log=log, cwd=tmp_path).returncode == 0
    # a whole record that lost only its newline (an editor's save) is kept, not cut
    log.write_bytes(log.read_bytes().rstrip(b"\n"))
    assert convo("audit", "verify", log=log, cwd=tmp_path).returncode == 0
    after = Auditor(AuditLog(log)).record("export.gaps")
    assert after["seq"] == 5 and "repaired" not in after["detail"]
    assert [r["seq"] for r in records(log)] == [1, 2, 3, 4, 5]


# -- people, and the reviewer's export ------------------------------------------------


def test_people_are_recorded_as_keyed_hashes_never_as_given(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    auditor = Auditor(AuditLog(log))
    record = auditor.record("erase", subjects=["Jo.Doe@Example.com", "user-4711"])
    key = bytes.fromhex(log.with_name("audit.jsonl.key").read_text())
    assert record["subjects"] == [
        hmac.new(key, b"jo.doe@example.com", hashlib.sha256).hexdigest(),
        hmac.new(key, b"user-4711", hashlib.sha256).hexdigest(),
    ]
    text = log.read_bytes().lower()
    assert b"jo.doe" not in text and b"user-4711" not in text
    assert oct(log.with_name("audit.jsonl.key").stat().st_mode & 0o777) == "0o600"


def _dated_chain(log: Path, days: list[str]) -> list[dict[str, Any]]:
    """A chain whose records were written on ``days`` (made by hand: ``when`` is set)."""
    made, prev = [], GENESIS
    for seq, day in enumerate(days, 1):
        record: dict[str, Any] = {
            "seq": seq, "when": f"{day}T12:00:00.000000Z", "who": "os:rev", "action": "erase",
            "what": f"w{seq}", "rows": seq, "workspace": None, "subjects": [], "detail": {},
            "prev": prev,
        }  # fmt: skip
        record["hash"] = prev = record_hash(record)
        made.append(record)
    log.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in made))
    return made


def test_audit_export_gives_a_range_and_what_checks_its_continuity(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    made = _dated_chain(log, ["2026-03-01", "2026-03-01", "2026-03-02", "2026-03-02",
                              "2026-03-03"])  # fmt: skip
    done = convo("audit", "export", "--from", "2026-03-02", "--to", "2026-03-02",
                 "--out", "review.jsonl", log=log, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    header, *got = [orjson.loads(x) for x in (tmp_path / "review.jsonl").read_bytes().splitlines()]
    assert got == made[2:4]
    assert header["verification"]["ok"] is True
    assert header["anchor"] == {"seq": 2, "hash": made[1]["hash"]}
    assert header["last"] == {"seq": 4, "hash": made[3]["hash"]}
    assert header["head"] == {"seq": 5, "hash": made[4]["hash"]}
    prev = header["anchor"]["hash"]  # what a reviewer checks, with nothing but the export
    for record in got:
        assert record["prev"] == prev and record_hash(record) == record["hash"]
        prev = record["hash"]
    (*_, audited) = records(log)  # reading the trail is recorded too
    assert audited["action"] == "audit.export" and audited["rows"] == 2
    later = convo("audit", "verify", "--head", f"4:{made[3]['hash']}", log=log, cwd=tmp_path)
    assert later.returncode == 0, later.stdout


def test_audit_export_of_a_broken_chain_says_so_and_exits_1(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    _dated_chain(log, ["2026-03-01", "2026-03-02", "2026-03-03"])
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(lines[0] + lines[2])
    done = convo("audit", "export", "--from", "2026-03-01", "--to", "2026-03-03",
                 log=log, cwd=tmp_path, CONVO_AUDIT_ENABLED="false")  # fmt: skip
    assert done.returncode == 1
    header = orjson.loads(done.stdout.splitlines()[0])
    assert header["verification"]["ok"] is False and header["records"] == 2
    assert "line 2 (record 3): out of sequence" in done.stderr
