"""The read side does not trust `CURRENT`: malformed pointers, damaged snapshots, links out.

Every dashboard page (AppTest) and `convo serve` (over real HTTP) are asked to
read a publish folder spoilt in each way found by the review. Each must answer
with one clear message (a page) or a JSON 503 (the server), never an
exception, and fall back to the previous good snapshot when only the newest is
damaged. A sentinel outside the publish folder (a valid copy of the snapshot,
so that following a link or a path to it would "work") is watched with
inotify, which sees opens by DuckDB's C++ code too, and Python's audit hook
records every file Python opens: neither may show the sentinel or
/etc/passwd.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import httpx
import orjson
import pytest
from streamlit.testing.v1 import AppTest

from convo_analytics._serving import ServerThread
from convo_analytics.publish import current_snapshot, publish_snapshot
from convo_analytics.serve import create_serve_app
from convo_analytics.warehouse import open_warehouse
from transform_support import populated_sandbox

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "dashboards" / "streamlit_app.py")
PAGES = ["overview", "conversations", "leads", "quality", "guardrails", "pipeline"]
TOKEN = "reader_test_token_0123456789"
SUMMARY = {"from": "2026-11-08", "to": "2026-11-17", "tz": "UTC"}
UNREADABLE = "The published snapshot is unreadable: run `convo publish`."
FALLBACK = "The newest published snapshot is damaged"

# -- what may not be opened ---------------------------------------------------------------

_opened: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and args and isinstance(args[0], str | bytes | os.PathLike):
        path = os.fsdecode(args[0])
        if "passwd" in path or "outside" in path:
            _opened.append(path)


sys.addaudithook(_audit)


class Inotify:
    """Kernel-level watch on files: any open or read of them shows up as an event."""

    IN_ACCESS, IN_OPEN = 0x1, 0x20

    def __init__(self, paths: list[Path]) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        for path in paths:
            wd = self._libc.inotify_add_watch(
                self.fd, os.fsencode(path), self.IN_ACCESS | self.IN_OPEN
            )
            assert wd >= 0, os.strerror(ctypes.get_errno())

    def events(self) -> bytes:
        try:
            return os.read(self.fd, 65536)
        except OSError as exc:
            assert exc.errno == errno.EAGAIN
            return b""

    def close(self) -> None:
        os.close(self.fd)


@contextmanager
def nothing_outside_opened(sentinels: list[Path]) -> Iterator[None]:
    watch = Inotify(sentinels)
    _opened.clear()
    try:
        yield
    finally:
        events = watch.events()
        watch.close()
    assert not events, "a file outside the publish folder was opened"
    assert not _opened, _opened


def test_both_watches_see_an_open(tmp_path: Path) -> None:
    """The watches can fail: DuckDB reading a sentinel shows in inotify, Python in the hook."""
    sentinel = tmp_path / "outside" / "sentinel.txt"
    sentinel.parent.mkdir()
    sentinel.write_text("x")
    watch = Inotify([sentinel])
    con = duckdb.connect()
    con.execute("SELECT * FROM read_text(?)", [str(sentinel)]).fetchall()
    con.close()
    assert watch.events()
    watch.close()
    _opened.clear()
    sentinel.read_text()
    assert _opened == [str(sentinel)]


# -- published folders and the ways to spoil them -------------------------------------------


def _emptied(copy: duckdb.DuckDBPyConnection) -> None:
    """The newest snapshot of the two-snapshot folder shows no conversations at all."""
    copy.execute("DELETE FROM mart_conversations")
    copy.execute("DELETE FROM mart_daily_conversations")


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``one``: a single snapshot; ``two``: a good one, then a newer one without conversations."""
    base = tmp_path_factory.mktemp("reader")
    with populated_sandbox(base, 120, ("UTC",)) as (_running, db):
        con = open_warehouse(db)
        try:
            publish_snapshot(con, db, base / "one")
            publish_snapshot(con, db, base / "two")
            publish_snapshot(con, db, base / "two", prepare=_emptied)
        finally:
            con.close()
    return {"one": base / "one", "two": base / "two"}


class Spoilt:
    """A copy of a publish folder, and a valid copy of its newest snapshot outside it."""

    def __init__(self, source: Path, tmp_path: Path) -> None:
        self.folder = tmp_path / "data" / "published"
        shutil.copytree(source, self.folder, symlinks=True)
        self.pointer = self.folder / "CURRENT"
        self.current: dict[str, Any] = orjson.loads(self.pointer.read_bytes())
        self.newest = self.folder / self.current["file"]
        outside = tmp_path / "outside"
        outside.mkdir()
        self.sentinel = outside / self.newest.name
        shutil.copyfile(self.newest, self.sentinel)
        self.sentinel_pointer = outside / "CURRENT"
        shutil.copyfile(self.pointer, self.sentinel_pointer)

    def point(self, value: Any) -> None:
        self.pointer.write_bytes(value if isinstance(value, bytes) else orjson.dumps(value))


def _without_id(s: Spoilt) -> None:
    s.point({k: v for k, v in s.current.items() if k != "snapshotId"})


def _traversal_to_sentinel(s: Spoilt) -> None:
    s.point({**s.current, "file": f"../../../outside/{s.sentinel.name}"})


def _pointer_is_a_link_out(s: Spoilt) -> None:
    s.pointer.unlink()
    s.pointer.symlink_to(s.sentinel_pointer)


POINTERS: dict[str, Callable[[Spoilt], None]] = {
    "list": lambda s: s.point([]),
    "string": lambda s: s.point("hello"),
    "no-snapshot-id": _without_id,
    "etc-passwd": lambda s: s.point({"file": "../../../../../etc/passwd"}),
    "etc-passwd-with-fields": lambda s: s.point({**s.current, "file": "../../../../../etc/passwd"}),
    "traversal-to-sentinel": _traversal_to_sentinel,
    "empty-pointer": lambda s: s.point(b""),
    "garbage-pointer": lambda s: s.point(b"\x00\xffnot json at all"),
    "pointer-is-a-link-out": _pointer_is_a_link_out,
}


def _flip_a_byte(s: Spoilt) -> None:
    data = bytearray(s.newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    s.newest.write_bytes(bytes(data))


def _snapshot_is_a_link_out(s: Spoilt) -> None:
    s.newest.unlink()
    s.newest.symlink_to(s.sentinel)


SNAPSHOTS: dict[str, Callable[[Spoilt], None]] = {
    "garbage-snapshot": lambda s: s.newest.write_bytes(b"garbage " * 4096),
    "empty-snapshot": lambda s: s.newest.write_bytes(b""),
    "truncated-snapshot": lambda s: os.truncate(s.newest, s.newest.stat().st_size // 2),
    "one-byte-changed": _flip_a_byte,
    "snapshot-is-a-link-out": _snapshot_is_a_link_out,
    "snapshot-missing": lambda s: s.newest.unlink(),
}


# -- the readers -------------------------------------------------------------------------


def _pages(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, AppTest]]:
    """Each page of the app rendered over ``folder`` (one AppTest, switching pages)."""
    monkeypatch.setenv("CONVO_PUBLISHED_DIR", str(folder))
    at = AppTest.from_file(APP, default_timeout=60)
    for page in PAGES:
        if page == "overview":
            at.run()
        else:
            at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        yield page, at


def _summary(folder: Path) -> httpx.Response:
    app = create_serve_app(folder.parent / "no-warehouse.duckdb", TOKEN, folder)
    with ServerThread(app) as server:
        return httpx.get(server.url + "/v1/analytics/summary", params=SUMMARY,
                         headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)  # fmt: skip


def _assert_unreadable(spoilt: Spoilt, monkeypatch: pytest.MonkeyPatch) -> None:
    with nothing_outside_opened([spoilt.sentinel, spoilt.sentinel_pointer]):
        for page, at in _pages(spoilt.folder, monkeypatch):
            assert [e.value for e in at.error] == [UNREADABLE], page
            assert not at.metric and not at.dataframe, page
        r = _summary(spoilt.folder)
    assert r.status_code == 503, r.text
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert error["message"].startswith("the published snapshot is unreadable: run `convo publish`")
    assert error["requestId"] and "root:" not in r.text and "Traceback" not in r.text


#: A malformed pointer is unusable even with a good previous snapshot ("two"); a damaged
#: snapshot is when it is the only one ("one").
UNUSABLE = [
    *(pytest.param("two", spoil, id=name) for name, spoil in POINTERS.items()),
    *(pytest.param("one", spoil, id=f"sole-{name}") for name, spoil in SNAPSHOTS.items()),
]


@pytest.mark.parametrize(("source", "spoil"), UNUSABLE)
def test_an_unusable_pointer_or_snapshot_is_one_message_everywhere(
    folders: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    spoil: Callable[[Spoilt], None],
) -> None:
    spoilt = Spoilt(folders[source], tmp_path)
    spoil(spoilt)
    _assert_unreadable(spoilt, monkeypatch)


@pytest.mark.parametrize("spoil", SNAPSHOTS.values(), ids=SNAPSHOTS.keys())
def test_a_damaged_newest_snapshot_falls_back_to_the_previous_and_says_so(
    folders: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spoil: Callable[[Spoilt], None],
) -> None:
    spoilt = Spoilt(folders["two"], tmp_path)
    previous = spoilt.current["previous"][0]
    spoil(spoilt)
    with nothing_outside_opened([spoilt.sentinel, spoilt.sentinel_pointer]):
        for page, at in _pages(spoilt.folder, monkeypatch):
            assert not at.error, page
            assert any(w.value.startswith(FALLBACK) for w in at.warning), page
            assert any(spoilt.newest.name in t.value for t in at.text), page  # the reason
            assert not at.info or page == "conversations", page  # the content, not "empty"
        assert any(previous["snapshotId"] in c.value for c in at.caption)  # the pipeline page
        r = _summary(spoilt.folder)
    assert r.status_code == 200, r.text
    assert r.json()["totals"]["conversations"] > 0  # only the previous snapshot has any


def test_the_newest_snapshot_is_read_when_it_is_sound(
    folders: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: the untouched two-snapshot folder shows its (emptied) newest snapshot."""
    spoilt = Spoilt(folders["two"], tmp_path)
    snap = current_snapshot(spoilt.folder)
    assert snap is not None and snap.path == spoilt.newest and snap.passed_over is None
    for page, at in _pages(spoilt.folder, monkeypatch):
        assert not at.error and not at.warning, page
    assert _summary(spoilt.folder).json()["totals"]["conversations"] == 0


def test_when_every_snapshot_is_damaged_the_pointer_is_unreadable(
    folders: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spoilt = Spoilt(folders["two"], tmp_path)
    _flip_a_byte(spoilt)
    (spoilt.folder / spoilt.current["previous"][0]["file"]).write_bytes(b"")
    _assert_unreadable(spoilt, monkeypatch)
