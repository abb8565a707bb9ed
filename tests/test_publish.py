"""Publishing cleans up after itself: a failed publish leaves nothing, a full disk heals.

The full-disk test runs `convo publish` as a real process against a small
filesystem: a tmpfs mounted in a private mount namespace (``unshare``) where
this machine allows it, seen from here through ``/proc/<pid>/root``; where it
does not (a container without the right), a plain folder whose size the
publish code's free-space check is told through CONVO_PUBLISH_SPACE_LIMIT
(docs/decisions.md, D-PUBLISH-SPACE). Either way the test runs the same steps.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import orjson
import pytest

from convo_analytics.publish import (
    SPACE_LIMIT_ENV,
    PublishFailed,
    current_snapshot,
    publish_snapshot,
    space_needed,
)
from convo_analytics.publish import _snapshot as publish_module
from convo_analytics.warehouse import open_warehouse

MIB = 1 << 20


def _warehouse(path: Path, rows: int = 60_000) -> Path:
    """A real warehouse with some megabytes of hard-to-compress data in it."""
    con = open_warehouse(path)
    try:
        con.execute(f"CREATE TABLE filler AS SELECT range AS n, md5(range::VARCHAR) AS h "
                    f"FROM range({rows})")  # fmt: skip
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return path


def _publish(db: Path, folder: Path, **kwargs: object) -> None:
    con = open_warehouse(db)
    try:
        publish_snapshot(con, db, folder, **kwargs)  # type: ignore[arg-type]
    finally:
        con.close()


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".partial" in p.name)


def test_a_failed_publish_leaves_nothing_behind_and_the_old_snapshot_in_place(
    tmp_path: Path,
) -> None:
    db = _warehouse(tmp_path / "w.duckdb", rows=1000)
    folder = tmp_path / "published"
    _publish(db, folder)
    pointer = (folder / "CURRENT").read_bytes()
    files = sorted(p.name for p in folder.iterdir())

    def broken(copy: duckdb.DuckDBPyConnection) -> None:
        copy.execute("CREATE TABLE half_done (x INTEGER)")
        raise RuntimeError("prepare failed half-way")

    with pytest.raises(RuntimeError, match="half-way"):
        _publish(db, folder, prepare=broken)
    assert sorted(p.name for p in folder.iterdir()) == files  # its partial went at once
    assert (folder / "CURRENT").read_bytes() == pointer
    snap = current_snapshot(folder)
    assert snap is not None and snap.passed_over is None
    _publish(db, folder)  # and the next one simply works
    assert current_snapshot(folder) != snap and not _leftovers(folder)


def test_a_killed_publishs_partial_files_go_when_the_next_one_starts(tmp_path: Path) -> None:
    db = _warehouse(tmp_path / "w.duckdb", rows=1000)
    folder = tmp_path / "published"
    _publish(db, folder)
    stale = ["warehouse-20260101T000000000000Z.duckdb.partial",
             "warehouse-20260101T000000000000Z.duckdb.partial.wal", "CURRENT.partial"]  # fmt: skip
    for name in stale:
        (folder / name).write_bytes(b"left by a killed run")
    (folder / "notes.partial").write_bytes(b"not ours")
    _publish(db, folder)
    assert _leftovers(folder) == ["notes.partial"]


def test_the_pointer_records_the_kept_snapshots_with_their_size_and_checksum(
    tmp_path: Path,
) -> None:
    db = _warehouse(tmp_path / "w.duckdb", rows=1000)
    folder = tmp_path / "published"
    for _ in range(4):
        _publish(db, folder, keep=3)
    pointer = orjson.loads((folder / "CURRENT").read_bytes())
    entries = [pointer, *pointer["previous"]]
    on_disk = sorted((p.name for p in folder.glob("warehouse-*.duckdb")), reverse=True)
    assert [e["file"] for e in entries] == on_disk and len(on_disk) == 3
    for entry in entries:
        data = (folder / entry["file"]).read_bytes()
        assert entry["size"] == len(data)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()


@contextmanager
def small_filesystem(tmp_path: Path, size: int) -> Iterator[tuple[Path, dict[str, str], bool]]:
    """A folder of ``size`` bytes, the environment publishing there needs, and whether it
    is a real filesystem (a tmpfs) or the documented simulation."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    unshare = shutil.which("unshare")
    if unshare is not None:
        script = 'mount -t tmpfs -o size="$1" tmpfs "$2" && echo mounted && exec sleep 600'
        holder = subprocess.Popen(
            [unshare, "--mount", "--map-root-user", "sh", "-c", script, "sh", str(size),
             str(mount_point)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert holder.stdout is not None
        mounted = holder.stdout.readline().strip() == "mounted"  # or EOF: it could not
        try:
            if mounted:
                yield Path(f"/proc/{holder.pid}/root") / mount_point.relative_to("/"), {}, True
                return
        finally:
            holder.kill()
            holder.wait(timeout=30)
    yield mount_point, {SPACE_LIMIT_ENV: str(size)}, False


def _convo_publish(config: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "convo_analytics.cli", "--config", str(config), "publish",
         "--keep", "1"],
        env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True, timeout=300,
        cwd=config.parent,
    )  # fmt: skip


def _fill(path: Path, size: int) -> None:
    with path.open("wb") as f:
        for _ in range(size // MIB):
            f.write(b"\xa5" * MIB)
        f.write(b"\xa5" * (size % MIB))


def test_a_full_disk_fails_one_publish_cleanly_and_heals_without_manual_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _warehouse(tmp_path / "w.duckdb")
    size = db.stat().st_size
    needed = space_needed(size)
    total = size + needed + MIB  # room for one snapshot and the next, little more
    with small_filesystem(tmp_path, total) as (small, env, real):
        folder = small / "published"
        config = tmp_path / "convo.toml"
        config.write_text(f'[warehouse]\npath = "{db}"\n[publish]\ndir = "{folder}"\n'
                          f'[run]\nlock_file = "{tmp_path / "run.lock"}"\n')  # fmt: skip
        first = _convo_publish(config, env)
        assert first.returncode == 0, first.stderr
        good = current_snapshot(folder)
        assert good is not None
        pointer = (folder / "CURRENT").read_bytes()

        ballast = folder / "ballast.bin"  # someone else's data fills the disk
        _fill(ballast, total - size - needed // 2)
        full = _convo_publish(config, env)
        assert full.returncode == 1, full.stderr
        (line,) = full.stderr.strip().splitlines()
        assert line.startswith("error: not enough space in") and "publish again" in line
        assert not _leftovers(folder) and (folder / "CURRENT").read_bytes() == pointer
        assert current_snapshot(folder) == good

        ballast.unlink()  # the space is freed, but a killed publish left its partial copy
        _fill(folder / "warehouse-20260101T000000000000Z.duckdb.partial", 3 * MIB)
        healed = _convo_publish(config, env)
        assert healed.returncode == 0, healed.stderr
        assert not _leftovers(folder)
        latest = current_snapshot(folder)
        assert latest is not None and latest.snapshot_id != good.snapshot_id
        readable = tmp_path / "check.duckdb"  # DuckDB resolves /proc/<pid>/root: read a copy
        shutil.copyfile(latest.path, readable)
        con = duckdb.connect(str(readable), read_only=True)
        try:
            assert con.execute("SELECT count(*) FROM filler").fetchall() == [(60_000,)]
        finally:
            con.close()

        if real:  # the disk fills up after the check, while the copy is written: a real ENOSPC
            _fill(ballast, total - size - size // 2)  # half a copy's room is left
            with monkeypatch.context() as patch:
                patch.setattr(publish_module, "free_space", lambda folder: total)
                with pytest.raises(PublishFailed, match="no space left on device"):
                    _publish(db, folder, keep=1)
            assert not _leftovers(folder) and current_snapshot(folder) == latest
            ballast.unlink()
            _publish(db, folder, keep=1)
            assert not _leftovers(folder)
