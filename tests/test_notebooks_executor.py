"""The notebooks' query executor: queries in query processes stopped at the time and memory
limits (killed and reaped, the pool answering the next query), the statement check over
the views of the rows a reader may see, and the processes' end with the app's.

The snapshot here is a small real DuckDB file of two workspaces; the same checks over the
dashboard (AppTest, a snapshot made by the pipeline) are in test_dashboard_explore.py.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from convo_analytics.notebooks import TABLE_FUNCTIONS, Executor, Limits, QueryResult
from convo_analytics.notebooks._worker import _Worker

#: The reviewer's two queries: single DuckDB calls no interrupt stops.
SORT = "SELECT length(list_sort(list_reverse(range(60000000))))"
REGEXP = "SELECT regexp_replace(repeat('ab', 150000000), 'a', 'xyz', 'g')"
SMALL = Limits(memory_mb=512, threads=1, temp_mb=256, workers=1)
#: A query per allowed table function, and the rows it must give.
TABLE_FUNCTION_CASES = {
    "range": ("SELECT * FROM range(3)", [{"range": 0}, {"range": 1}, {"range": 2}]),
    "generate_series": ("SELECT * FROM generate_series(1, 2) t(n)", [{"n": 1}, {"n": 2}]),
    "unnest": ("SELECT * FROM unnest(['a', 'b']) t(x)", [{"x": "a"}, {"x": "b"}]),
}


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("executor") / "warehouse-1.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE mart_conversations AS SELECT range AS n, 'web' AS channel, "
                "CASE WHEN range < 30 THEN 'ws_a' ELSE 'ws_b' END AS workspace_id "
                "FROM range(50)")  # fmt: skip
    con.execute("CREATE TABLE pipeline_runs AS SELECT 'secret-run-of-everyone' AS note")
    con.close()
    return path


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    with Executor(SMALL) as ex:
        assert ex.wait_ready()
        yield ex


def _gone(pid: int, seconds: float = 10.0, *, reaped: bool = True) -> bool:
    """Whether the process has ended and been reaped (its /proc entry gone); without
    ``reaped``, an ended process not yet reaped by its new parent counts as gone."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if not reaped and state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def _one_line(result: QueryResult) -> str:
    assert result.frame is None and result.error is not None
    assert "\n" not in result.error and "Traceback" not in result.error
    return result.error


@pytest.mark.parametrize("sql", [SORT, REGEXP], ids=["list_sort", "regexp_replace"])
def test_the_reviewers_queries_are_stopped_and_the_next_query_answers(
    executor: Executor, snapshot: Path, sql: str
) -> None:
    assert executor.wait_ready()
    before = executor.pids()
    result = executor.run(snapshot, sql, timeout=2)
    line = _one_line(result)
    assert result.stopped in ("time", "memory"), line
    if result.stopped == "time":
        assert line.startswith("stopped after 2 s")
    else:
        assert line.startswith("needed more than 512 MiB of memory")
    assert all(_gone(pid) for pid in before)  # the process that ran it: killed and reaped
    after = executor.run(snapshot, "SELECT 42 AS answer", timeout=30)
    assert after.error is None and after.frame is not None
    assert after.frame.to_dicts() == [{"answer": 42}]
    assert executor.pids() and not set(executor.pids()) & set(before)


@pytest.mark.parametrize("sql", [SORT, REGEXP], ids=["list_sort", "regexp_replace"])
def test_memory_past_the_limit_stops_a_query_whatever_its_time(
    executor: Executor, snapshot: Path, sql: str
) -> None:
    result = executor.run(snapshot, sql, timeout=120)
    assert result.stopped == "memory", result
    assert _one_line(result).startswith("needed more than 512 MiB of memory")
    assert result.peak_mib is not None and result.peak_mib < 512 + 50


def test_a_long_query_is_killed_at_the_time_limit(executor: Executor, snapshot: Path) -> None:
    assert executor.wait_ready()
    (pid,) = executor.pids()
    result = executor.run(snapshot, "SELECT sum(hash(range)) FROM range(100000000000)", timeout=1)
    assert result.stopped == "time" and result.seconds < 30
    assert _one_line(result).startswith("stopped after 1 s (the time limit of a query)")
    assert _gone(pid)
    assert executor.run(snapshot, "SELECT 1 AS one", timeout=30).frame is not None


def test_the_resident_memory_watchdog_stops_what_the_address_space_cap_would(
    snapshot: Path,
) -> None:
    """Without the address-space cap, the parent's watchdog (/proc/PID/statm) kills the
    query process once its resident memory passes the limit."""
    with Executor(Limits(memory_mb=256, workers=1), cap_address_space=False) as ex:
        result = ex.run(snapshot, REGEXP, timeout=120)
        assert result.stopped == "memory", result
        assert _one_line(result).startswith("needed more than 256 MiB of memory")
        assert ex.run(snapshot, "SELECT 1 AS one", timeout=30).frame is not None


def test_rows_come_back_capped_with_their_types(executor: Executor, snapshot: Path) -> None:
    capped = executor.run(snapshot, "SELECT * FROM mart_conversations", row_limit=10)
    assert capped.frame is not None and capped.frame.height == 10 and capped.truncated
    whole = executor.run(snapshot, "SELECT * FROM mart_conversations ORDER BY n;")
    assert whole.frame is not None and whole.frame.height == 50 and not whole.truncated
    assert whole.frame.schema["n"].is_integer() and whole.stopped is None


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "read_csv() is not available"),
        ("SELECT * FROM read_text('/etc/hostname')", "read_text() is not available"),
        ("COPY mart_conversations TO '{dir}/out.csv'", "COPY statements are refused"),
        ("ATTACH '{dir}/other.duckdb' AS other", "ATTACH statements are refused"),
        ("INSTALL httpfs", "INSTALL statements are refused"),
        ("LOAD httpfs", "LOAD statements are refused"),
        ("SET enable_external_access = true", "SET statements are refused"),
        ("CREATE TABLE x AS SELECT 1", "CREATE statements are refused"),
        ("SELECT 1; SELECT 2", "one statement per cell"),
        ("SELECT * FROM glob('/etc/*')", "glob() is not available"),
        ("SELECT nope FROM mart_conversations", "nope"),
        ("FROM '/etc/passwd'", "there is no table /etc/passwd here"),
    ],
)
def test_what_is_not_a_read_is_refused_in_one_line(
    executor: Executor, snapshot: Path, sql: str, says: str
) -> None:
    folder = snapshot.parent
    result = executor.run(snapshot, sql.format(dir=folder))
    assert says in _one_line(result) and result.stopped is None
    assert sorted(p.name for p in folder.iterdir()) == [snapshot.name]  # nothing written


#: What reaches past the views: the snapshot by name or path, a serialized plan, the
#: catalog, settings, the environment (each with what its refusal says).
HOSTILE = [
    ("SELECT * FROM snapshot.main.mart_conversations", "name a table without a database"),
    ("SELECT * FROM snapshot.mart_conversations", "name a table without a database"),
    ("SELECT * FROM memory.main.mart_conversations m, snapshot.main.pipeline_runs",
     "name a table without a database"),
    ("SELECT * FROM read_blob('{path}')", "read_blob() is not available"),
    ("SELECT * FROM json_execute_serialized_sql(json_serialize_sql("
     "'SELECT * FROM snapshot.main.mart_conversations'))", "is not available"),
    ("SELECT json_deserialize_sql(json_serialize_sql('SELECT 1'))", "is not available"),
    ("SELECT json_serialize_plan('SELECT * FROM snapshot.main.mart_conversations')",
     "json_serialize_plan() is not available"),
    ("SELECT * FROM duckdb_databases()", "duckdb_databases() is not available"),
    ("SELECT * FROM duckdb_databases", "there is no table duckdb_databases"),
    ("SELECT * FROM duckdb_settings()", "duckdb_settings() is not available"),
    ("SELECT * FROM pg_settings", "there is no table pg_settings"),
    ("SELECT current_setting('temp_directory')", "current_setting() is not available"),
    ("SELECT pg_catalog.current_setting('home_directory')", "without a schema"),
    ("SELECT getvariable('x')", "getvariable() is not available"),
    ("SELECT getenv('HOME')", "getenv() is not available"),
    ("SELECT * FROM query('SELECT * FROM snapshot.main.mart_conversations')",
     "query() is not available"),
    ("SELECT * FROM query_table('snapshot.main.mart_conversations')",
     "query_table() is not available"),
    ("SELECT stats(workspace_id) FROM mart_conversations", "stats() is not available"),
    ("SELECT pg_get_viewdef('mart_conversations')", "is not available"),
    ("SELECT * FROM information_schema.tables", "name a table without a database"),
    ("SHOW DATABASES", "SHOW is not available"),
    ("SHOW ALL TABLES", "SHOW is not available"),
    ("SELECT * FROM pragma_database_list()", "is not available"),
    ("WITH pg_settings AS (SELECT 1) SELECT * FROM (SELECT * FROM pg_settings)",
     "may not be called pg_settings"),
    ("SELECT * FROM pipeline_runs", "there is no table pipeline_runs"),
    ("SELECT * FROM request", "there is no table request"),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "says"), HOSTILE, ids=[s for s, _ in HOSTILE])
def test_a_reader_of_one_workspace_reaches_nothing_else(
    executor: Executor, snapshot: Path, sql: str, says: str
) -> None:
    result = executor.run(snapshot, sql.format(path=snapshot), workspaces=["ws_a"], keyed_only=True)
    line = _one_line(result)
    assert says in line, line
    assert "ws_b" not in line and str(snapshot.parent) not in line and os.getcwd() not in line


def test_a_reader_of_one_workspace_reads_its_rows(executor: Executor, snapshot: Path) -> None:
    result = executor.run(
        snapshot,
        "SELECT workspace_id, count(*) AS n FROM mart_conversations GROUP BY ALL",
        workspaces=["ws_a"],
        keyed_only=True,
    )
    assert result.frame is not None and result.frame.to_dicts() == [{"workspace_id": "ws_a",
                                                                      "n": 30}]  # fmt: skip
    described = executor.run(snapshot, "DESCRIBE mart_conversations", workspaces=["ws_a"])
    assert described.frame is not None and "workspace_id" in described.frame["column_name"]
    summary = executor.run(snapshot, "SUMMARIZE mart_conversations", workspaces=["ws_a"])
    assert summary.frame is not None
    row = next(r for r in summary.frame.to_dicts() if r["column_name"] == "workspace_id")
    assert row["max"] == "ws_a"  # the view's rows only
    whole = executor.run(snapshot, "SELECT count(*) AS n FROM pipeline_runs", workspaces=["ws_a"])
    assert whole.frame is not None and whole.frame["n"][0] == 1  # the sidebar's narrowing


def test_every_allowed_table_function_has_its_test() -> None:
    assert set(TABLE_FUNCTION_CASES) == set(TABLE_FUNCTIONS)


@pytest.mark.parametrize("name", sorted(TABLE_FUNCTION_CASES))
def test_an_allowed_table_function_works(executor: Executor, snapshot: Path, name: str) -> None:
    sql, rows = TABLE_FUNCTION_CASES[name]
    result = executor.run(snapshot, sql, workspaces=["ws_a"], keyed_only=True)
    assert result.error is None and result.frame is not None, result.error
    assert result.frame.to_dicts() == rows


def test_an_error_shows_no_path(executor: Executor, snapshot: Path, tmp_path: Path) -> None:
    """A message that would name the snapshot's file names its folder <published> instead."""
    moved = tmp_path / "gone.duckdb"
    ex = Executor(Limits(workers=1), hide={str(tmp_path): "<published>"})
    with ex:
        result = ex.run(moved, "SELECT 1")
    line = _one_line(result)
    assert str(tmp_path) not in line and "<published>" in line, line


def test_a_query_process_has_its_limits_set(tmp_path: Path) -> None:
    """DuckDB's memory, threads and temporary disk are capped, and no extension loads."""
    config = {"parent": os.getppid(), "scratch": str(tmp_path), "memory_mb": 512,
              "threads": 1, "temp_mb": 300}  # fmt: skip
    (tmp_path / "spill").mkdir()
    worker = _Worker(config, io.BytesIO())
    con = worker._connect()
    try:
        got = dict(con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN ('memory_limit', "
            "'threads', 'max_temp_directory_size', 'temp_directory', "
            "'autoload_known_extensions', 'python_enable_replacements')").fetchall())  # fmt: skip
    finally:
        con.close()
    assert got["threads"] == "1" and got["memory_limit"].startswith("366")  # 3/4 of 512 MB
    worker.budget_mb = 512 - 140  # what main() leaves once the process is ready
    con = worker._connect()
    try:
        ((limit,),) = con.execute("SELECT current_setting('memory_limit')").fetchall()
    finally:
        con.close()
    assert limit.startswith("266")  # 3/4 of 372 MB
    assert got["max_temp_directory_size"].startswith("286")  # 300 MB in MiB
    assert got["temp_directory"].startswith(str(tmp_path))
    assert got["autoload_known_extensions"] == "false"
    assert got["python_enable_replacements"] == "false"


def test_close_kills_and_reaps_every_process(snapshot: Path) -> None:
    ex = Executor(Limits(workers=2))
    assert ex.wait_ready()
    pids = ex.pids()
    assert len(pids) == 2
    ex.close()
    assert ex.pids() == [] and all(_gone(pid) for pid in pids)
    assert ex.run(snapshot, "SELECT 1").error == "Explore is stopping; reload the page"


APP = """
import json, sys, time
from convo_analytics.notebooks import Executor, Limits
ex = Executor(Limits(workers=2))
assert ex.wait_ready()
print(json.dumps(ex.pids()), flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_query_processes_end_with_the_app(sig: int) -> None:
    """An app killed (no cleanup of its own runs) leaves no query process behind."""
    app = subprocess.Popen([sys.executable, "-c", APP], stdout=subprocess.PIPE, text=True)
    try:
        assert app.stdout is not None
        pids = json.loads(app.stdout.readline())
        assert len(pids) == 2 and all(Path(f"/proc/{p}").exists() for p in pids)
        app.send_signal(sig)
        app.wait(timeout=30)
        assert all(_gone(pid, reaped=False) for pid in pids), pids
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(timeout=10)


def test_a_new_snapshot_or_workspace_is_read_anew(
    executor: Executor, snapshot: Path, tmp_path: Path
) -> None:
    """A query process keeps its database for the next query of the same snapshot and
    workspaces only."""
    newer = tmp_path / "warehouse-2.duckdb"
    con = duckdb.connect(str(newer))
    con.execute("CREATE TABLE mart_conversations AS SELECT 1 AS n, 'ws_a' AS workspace_id")
    con.close()
    count = "SELECT count(*) AS n FROM mart_conversations"
    for path, workspaces, want in [(snapshot, ["ws_a"], 30), (newer, ["ws_a"], 1),
                                   (snapshot, ["ws_b"], 20), (snapshot, None, 50),
                                   (snapshot, ["ws_a"], 30)]:  # fmt: skip
        result = executor.run(path, count, workspaces=workspaces)
        assert result.frame is not None and result.frame["n"][0] == want, (path, workspaces)


def test_a_query_process_that_cannot_start_is_one_line(
    snapshot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each query tries to start one (once), and says why it could not."""
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    with Executor(Limits(workers=1)) as ex:
        for _ in range(2):
            result = ex.run(snapshot, "SELECT 1", timeout=5)
            assert result.retry and result.error is not None
            assert result.error.startswith("a query process could not start"), result.error
