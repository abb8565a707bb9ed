"""The writers' lock is the warehouse's, wherever a command starts (issue 24, D-WRITER-LOCK).

Real ``convo`` processes in several working folders. The holder is a real
``convo run`` paused inside its extract step by the runner's test knob
(``CONVO_RUN_HOLD_STEP``): it holds its locks from its start until it is
killed, so every check below happens while the lock is known to be held, with
no timing involved. The run never reaches the service (it pauses before the
step's first request), so no server is needed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import ACME_KEY
from convo_analytics.pipeline import LOCKED_EXIT, lock_beside
from convo_analytics.warehouse import open_warehouse
from process_support import OutputWatcher

TIMEOUT = 120


def _env(**extra: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
            "CONVO_API_KEY": ACME_KEY, **extra}  # fmt: skip


def _convo(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``convo ARGS...`` started in ``cwd``, run to its end."""
    return subprocess.run([sys.executable, "-m", "convo_analytics.cli", *args], cwd=cwd,
                          env=_env(**env), capture_output=True, text=True,
                          timeout=TIMEOUT)  # fmt: skip


@contextmanager
def _held_run(cwd: Path, db: str, **env: str) -> Iterator[subprocess.Popen[str]]:
    """A ``convo run`` of warehouse ``db`` started in ``cwd``, paused in its extract step
    (holding its locks) for the block, then killed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "convo_analytics.cli", "run"], cwd=cwd,
        env=_env(CONVO_DB=db, CONVO_RUN_HOLD_STEP="extract", **env),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        OutputWatcher(proc.stderr, "the held run").wait_for("step extract holding", TIMEOUT)
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _stopped_by(done: subprocess.CompletedProcess[str], command: str, holder: int) -> str:
    """The one line a writer stopped by ``holder``'s lock printed (asserting it was)."""
    assert done.returncode == LOCKED_EXIT, (command, done.returncode, done.stderr[-2000:])
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"{command}: convo run (run "), line
    assert f"pid {holder} " in line and "Traceback" not in done.stderr
    return line


def test_writers_of_one_warehouse_started_from_different_folders_take_one_lock(
    tmp_path: Path,
) -> None:
    store, first, second, third = (tmp_path / n for n in ("store", "a", "b", "c"))
    for folder in (store, first, second, third):
        folder.mkdir()
    warehouse = store / "w.duckdb"
    (second / "link.duckdb").symlink_to(warehouse)  # another name for the same file
    lock = store / "w.duckdb.lock"
    with _held_run(first, "../store/w.duckdb") as holder:  # a relative path
        assert warehouse.exists()
        via_link = _convo(second, "transform", "--db", "link.duckdb")
        absolute = _convo(third, "extract", "--db", str(warehouse))
        purge = _convo(third, "webhooks", "quarantine", "purge", "--before", "2000-01-01",
                       "--db", str(warehouse))  # fmt: skip
    line = _stopped_by(via_link, "convo transform", holder.pid)
    assert f"holds the warehouse writers' lock {os.path.realpath(lock)};" in line
    _stopped_by(absolute, "convo extract", holder.pid)
    _stopped_by(purge, "convo webhooks quarantine purge", holder.pid)
    assert lock.exists()
    for folder in (first, second, third):
        assert not (folder / "data" / "convo-run.lock").exists(), "a lock of the working folder"
    assert _convo(second, "transform", "--db", "link.duckdb").returncode == 0  # the run is gone


def test_two_warehouses_written_from_one_folder_do_not_wait_for_each_other(
    tmp_path: Path,
) -> None:
    open_warehouse(tmp_path / "b.duckdb").close()
    with _held_run(tmp_path, "a.duckdb") as holder:
        transform = _convo(tmp_path, "transform", "--db", "b.duckdb", "--json")
        elsewhere = _convo(tmp_path, "publish", "--db", "b.duckdb", "--dir", "other")
        same_folder = _convo(tmp_path, "publish", "--db", "b.duckdb")
    assert transform.returncode == 0, transform.stderr[-2000:]
    assert elsewhere.returncode == 0, elsewhere.stderr[-2000:]
    assert (tmp_path / "b.duckdb.lock").exists() and (tmp_path / "a.duckdb.lock").exists()
    # Both publish into data/published by default: one publisher of a folder at a time.
    line = _stopped_by(same_folder, "convo publish", holder.pid)
    published_lock = os.path.realpath(tmp_path / "data" / "published" / "publish.lock")
    assert f"holds the published folder's lock {published_lock};" in line
    assert not (tmp_path / "data" / "published" / "CURRENT").exists()

    # A lock file named by run.lock_file is shared by every warehouse, as before.
    with _held_run(tmp_path, "a.duckdb", CONVO_RUN_LOCK_FILE="shared.lock") as holder:
        shared = _convo(tmp_path, "transform", "--db", "b.duckdb",
                        CONVO_RUN_LOCK_FILE="shared.lock")  # fmt: skip
        own = _convo(tmp_path, "transform", "--db", "b.duckdb")
    line = _stopped_by(shared, "convo transform", holder.pid)
    assert "holds the warehouse writers' lock shared.lock;" in line  # as it was named
    assert own.returncode == 0, own.stderr[-2000:]


def test_the_lock_is_derived_from_the_warehouse_real_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real"
    (real / "inner").mkdir(parents=True)
    (tmp_path / "folder-link").symlink_to(real)
    (tmp_path / "file-link.duckdb").symlink_to(real / "inner" / "w.duckdb")  # not there yet
    expected = Path(os.path.realpath(real / "inner" / "w.duckdb.lock"))
    monkeypatch.chdir(real)
    names = [
        Path("inner/w.duckdb"),
        Path("./inner/../inner/w.duckdb"),
        real / "inner" / "w.duckdb",
        tmp_path / "folder-link" / "inner" / "w.duckdb",
        tmp_path / "file-link.duckdb",
    ]
    assert {lock_beside(name) for name in names} == {expected}
    assert lock_beside(Path("new/folder/w.duckdb")) == Path(os.path.realpath(real)) / "new" / (
        "folder/w.duckdb.lock"
    )
