"""`convo erase` and the Iceberg lake (issue 30, D-ERASURE), as a user runs it: a sandbox
over HTTP on 127.0.0.1, the CLI in subprocesses, a lake with a SQLite catalog in a local
folder.

The person (their own conversations in acme, with text nobody else typed) is extracted,
ingested, transformed and published to the lake three times over: an older snapshot
holds them, a publish with ``lake.keep_snapshots_hours = 0`` left files of an expired
snapshot behind (expiry removes metadata only), and a killed commit's leftovers (a data
file, a manifest) sit beside them; readers made a local copy of the lake. After
`convo erase` no file of the lake holds their ids or their text (Parquet read as bytes
and by DuckDB, Avro with its blocks decompressed, metadata JSON), nor the copies; the lake
equals the erased warehouse for every workspace as readers see it, with no notice;
globex (the same externalUserId there is another person) keeps its rows. A kill -9 in
the middle of the lake step and a re-run reach the same end.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import pytest

from conftest import ACME_KEY, GLOBEX_KEY, RunningSandbox, make_settings
from convo_analytics._serving import ServerThread
from convo_analytics.lake import LakeConfig, lake_state, publish_lake
from convo_analytics.lake._read import _read
from convo_analytics.publish import lake_snapshot
from convo_analytics.sandbox import Sandbox, create_app, write_history_archive
from erasure_support import SECRET, config_text, ok, setup_command
from erasure_support import convo as run
from erasure_support import env_of as _env
from erasure_support import inject as _inject
from lake_support import assert_lake_equals, lake_rows
from test_erasure import GLOBEX_TEXTS, OTHER, PERSON, TEXTS
from test_privacy_load import files_holding


def avro_text(raw: bytes) -> bytes:
    """An Avro container file's header and blocks, decompressed (manifests are gzip'd:
    their entries' statistics are not in the bytes as stored)."""
    import zstandard

    def long(at: int) -> tuple[int, int]:
        shift = value = 0
        while True:
            byte = raw[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return (value >> 1) ^ -(value & 1), at

    assert raw[:4] == b"Obj\x01", "not an Avro file"
    at, meta = 4, {}
    while True:
        count, at = long(at)
        if count == 0:
            break
        if count < 0:
            count = -count
            _, at = long(at)
        for _ in range(count):
            size, at = long(at)
            key = raw[at : at + size].decode()
            at += size
            size, at = long(at)
            meta[key] = raw[at : at + size]
            at += size
    at += 16  # the sync marker
    codec = meta.get("avro.codec", b"null").decode()
    out = [raw[:at]]
    while at < len(raw):
        _, at = long(at)
        size, at = long(at)
        block = raw[at : at + size]
        at += size + 16
        if codec == "deflate":
            block = zlib.decompress(block, -15)
        elif codec == "zstandard":
            block = zstandard.ZstdDecompressor().decompressobj().decompress(block)
        else:
            assert codec == "null", codec
        out.append(block)
    return b"".join(out)


def lake_holding(folder: Path, values: set[str]) -> dict[str, list[str]]:
    """Which files of the lake's folder hold which of ``values``: every file as bytes,
    Parquet also as its rows' text (DuckDB's read_parquet), Avro with its blocks
    decompressed, and no file of a kind it does not know."""
    held: dict[str, list[str]] = {}
    con = duckdb.connect()
    try:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            raw = path.read_bytes()
            texts = [raw]
            if path.suffix == ".parquet":
                rows = con.execute(
                    "SELECT string_agg(CAST(t AS VARCHAR), '\n') FROM read_parquet(?) t",
                    [str(path)],
                ).fetchone()
                texts.append(((rows or [None])[0] or "").encode())
            elif path.suffix == ".avro":
                texts.append(avro_text(raw))
            else:
                known = (".metadata.json", ".db", "version-hint.text")
                assert path.name.endswith(known) or "/convo-inflight/" in str(path), path
            whole = b"\n".join(texts)
            hits = sorted(v for v in values if v.encode() in whole)
            if hits:
                held[str(path.relative_to(folder))] = hits
    finally:
        con.close()
    return held


def naming_in_workspace(folder: Path, workspace_id: str, value: str) -> list[str]:
    """The lake's files that hold ``value`` in a workspace's rows: its data files (bytes,
    rows) and the statistics of its files' entries in every manifest (the same id in
    another workspace is another person's)."""
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import ManifestContent, ManifestFile

    segment = f"/workspace_id={workspace_id}/"
    found = [f for f in lake_holding(folder, {value}) if segment in f"/{f}"]
    io = PyArrowFileIO()
    for path in sorted(folder.rglob("*-m*.avro")):
        manifest = ManifestFile.from_args(
            manifest_path=str(path), manifest_length=0, partition_spec_id=0,
            content=ManifestContent.DATA, sequence_number=0, min_sequence_number=0,
            added_snapshot_id=0,
        )  # fmt: skip
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
            data = entry.data_file
            bounds = [*(data.lower_bounds or {}).values(), *(data.upper_bounds or {}).values()]
            if segment in data.file_path and any(value.encode() in b for b in bounds):
                found.append(str(path.relative_to(folder)))
                break
    return found


@dataclass
class Lake:
    folder: Path
    conversations: list[str]
    #: The person's ids (conversations, messages) and what they typed.
    values: set[str]

    @property
    def db(self) -> Path:
        return self.folder / "data" / "warehouse.duckdb"

    @property
    def files(self) -> Path:
        return self.folder / "data" / "lake"

    @property
    def config(self) -> LakeConfig:
        return LakeConfig(f"sqlite:///{self.files / 'catalog.db'}",
                          f"file://{self.files / 'warehouse'}")  # fmt: skip

    def ids(self) -> dict[str, str]:
        con = duckdb.connect(str(self.db), read_only=True)
        try:
            return dict(con.execute("SELECT name, workspace_id FROM workspaces").fetchall())
        finally:
            con.close()


def _leftovers(lake: Lake) -> None:
    """What a commit killed before it landed leaves: a data file of the person's partition
    and a manifest listing their files (its column statistics may name them too: with a
    month's conversations in one file, only when theirs are the bounds), under names no
    snapshot references."""
    table = lake.files / "warehouse" / "convo" / "messages"
    acme = lake.ids()["acme"]
    con = duckdb.connect()
    try:
        for parquet in sorted((table / "data" / f"workspace_id={acme}").rglob("*.parquet")):
            hit = con.execute("SELECT count(*) FROM read_parquet(?) WHERE contains(text, ?)",
                              [str(parquet), TEXTS[0]]).fetchone()  # fmt: skip
            if hit and hit[0]:
                shutil.copyfile(parquet, parquet.with_name("00000-9-killed-commit.parquet"))
                theirs = parquet.name.encode()
                break
        else:
            raise AssertionError("no data file of the person's messages")
    finally:
        con.close()
    marks = [theirs, *(c[:15].encode() for c in lake.conversations)]
    manifests = [p for p in sorted((table / "metadata").glob("*-m*.avro"))
                 if any(m in avro_text(p.read_bytes()) for m in marks)]  # fmt: skip
    assert manifests, "no manifest lists the person's file or holds their statistics"
    shutil.copyfile(manifests[0], table / "metadata" / "0badc0de-killed-commit-m0.avro")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    """A data folder whose lake holds the person in its current snapshot, an older one,
    an expired one's files and a killed commit's (put back before each test)."""
    sandbox = Sandbox(make_settings(conversations=16, days=3))
    with ServerThread(create_app(sandbox)) as server:
        running = RunningSandbox(sandbox, server)
        folder = tmp_path_factory.mktemp("erase-lake")
        ids = _inject(running, PERSON, TEXTS)
        _inject(running, OTHER, ("an ordinary question about opening hours",))
        _inject(running, PERSON, GLOBEX_TEXTS, GLOBEX_KEY)  # another person, same id
        archive = folder / "archive" / "history.jsonl.gz"
        acme = [w for w in sandbox.workspaces.values() if w.name == "acme"]
        write_history_archive(archive, acme, SECRET, seed=3)
        (folder / "convo.toml").write_text(config_text(running.url, lake=True))
        setup_command(folder, "extract")
        setup_command(folder, "webhooks", "ingest", "-w", "acme", str(archive))
        setup_command(folder, "transform")
        setup_command(folder, "publish")
        setup_command(folder, "publish", "--lake")
        # the person writes again: the next publish replaces their partitions, so the first
        # publish's snapshot is an older one holding them
        with running.client(ACME_KEY) as client:
            said = client.post(
                f"/v1/conversations/{ids[0]}/messages",
                json={"text": TEXTS[1], "channel": "web", "locale": "en-US"},
            )
            assert said.status_code == 201, said.text
        setup_command(folder, "extract")
        setup_command(folder, "transform")
        setup_command(folder, "publish", "--lake")
        made = Lake(folder, ids, set())
        con = duckdb.connect(str(made.db), read_only=True)
        try:
            # globex published alone with no snapshots kept (as `convo publish --lake --full
            # -w globex` with lake.keep_snapshots_hours = 0): the first publish's snapshot
            # is expired, metadata only, so its files of the person stay, referenced by none
            publish_lake(con, replace(made.config, keep_snapshots_hours=0), ["globex"], full=True)
            messages = {r[0] for r in con.execute(
                "SELECT id FROM messages WHERE conversation_id IN (SELECT unnest(?))", [ids]
            ).fetchall()}  # fmt: skip
        finally:
            con.close()
        # readers on the lake made a copy of it
        assert lake_snapshot(made.config, folder / "data" / "published") is not None
        # manifests keep each column's bounds cut to 16 characters (the upper one with its
        # last character raised): a value's first 15 characters mark it there
        marks = {*TEXTS, *ids, *messages}
        lake = Lake(folder, ids, marks | {v[:15] for v in marks})
        _leftovers(lake)
        shutil.copytree(folder, folder.with_name(f"{folder.name}-pristine"))
        yield lake


@pytest.fixture
def lake(template: Lake) -> Lake:
    """The template's folder as the fixture left it: put back in its place, since the
    lake's catalog and metadata name its files by absolute paths."""
    shutil.rmtree(template.folder)
    shutil.copytree(template.folder.with_name(f"{template.folder.name}-pristine"),
                    template.folder)  # fmt: skip
    return template


def _readers_see_the_warehouse(lake: Lake) -> None:
    """The lake, as readers read it, equals the erased warehouse for every workspace, with
    no notice (no pin lost)."""
    ids = lake.ids()
    assert_lake_equals(lake.config, lake.db, sorted(ids.values()))
    con, unfinished = _read(lake.config, None, None, None)
    con.close()
    assert unfinished == []


def test_the_person_leaves_every_file_of_the_lake_and_readers_read_on(lake: Lake) -> None:
    held = lake_holding(lake.files, lake.values)
    assert any("killed-commit" in f for f in held), held
    assert sum(1 for f in held if f.endswith(".parquet")) > 2, "older files hold them too"
    globex, acme = lake.ids()["globex"], lake.ids()["acme"]
    assert naming_in_workspace(lake.files, acme, PERSON)
    globex_before = lake_rows(lake.config, [globex])
    state = lake_state(lake.config)
    dry = json.loads(ok(run(lake.folder, "erase", "-w", "acme", "--external-user-id", PERSON,
                            "--dry-run", "--json")))  # fmt: skip
    assert dry["stores"]["lake"]["tables"]["conversations"] == {"rows": 2}
    assert dry["stores"]["lake"]["copies"]["files"]
    assert lake_state(lake.config) == state, "a dry run changed the lake"

    cert = json.loads(ok(run(lake.folder, "erase", "-w", "acme", "--external-user-id", PERSON,
                             "--json")))  # fmt: skip
    store = cert["stores"]["lake"]
    print("lake step:", store["seconds"], "s")  # the figure for the report
    assert store["tables"]["conversations"]["rows"] == 2
    assert store["tables"]["messages"]["rows"] >= 2 * len(TEXTS) + 1
    assert store["tables"]["mart_conversations"]["rows"] == 2
    assert store["tables"]["messages"]["snapshotsExpired"] >= 1
    assert store["tables"]["messages"]["filesRemoved"] >= 3
    assert store["publishId"] and store["pinsLost"] == []
    assert store["pinsMoved"] >= 1  # globex's, on snapshots holding acme's old files
    assert store["copies"]["removed"] and store["copies"]["made"]
    assert PERSON not in json.dumps(cert)
    # no file of the lake, nor any other under the data folder, holds them
    assert lake_holding(lake.files, lake.values) == {}
    assert naming_in_workspace(lake.files, acme, PERSON) == []
    assert files_holding(lake.folder / "data", lake.values) == {}
    _readers_see_the_warehouse(lake)
    done = run(lake.folder, "export", "summary", "--from", "2026-01-01", "--to", "2026-12-31",
               "--workspace", "acme", CONVO_READ_SOURCE="lake")  # fmt: skip
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    # globex, where the same id is another person, is as it was
    after = lake_rows(lake.config, [globex])
    assert after == globex_before
    assert any(GLOBEX_TEXTS[0] in str(r) for r in after["messages"])


def _lake_commits(lake: Lake) -> set[str]:
    """The record's metadata files (a new one for each of its commits)."""
    folder = lake.files / "warehouse" / "convo_meta" / "lake_partitions" / "metadata"
    return {p.name for p in folder.glob("*.metadata.json")}


def _erase_killed_in_the_lake_step(lake: Lake, rng: random.Random) -> str:
    """Start the erasure; once its publish to the lake began, SIGKILL it after a random
    moment of the lake step; what it had reached."""
    before = _lake_commits(lake)
    proc = subprocess.Popen(
        [sys.executable, "-m", "convo_analytics.cli", "erase", "-w", "acme",
         "--external-user-id", PERSON],
        cwd=lake.folder, env=_env(lake.folder), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while proc.poll() is None and _lake_commits(lake) == before and time.monotonic() < deadline:
        time.sleep(0.02)
    delay = rng.uniform(0.0, 10.0)
    end = time.monotonic() + delay
    while proc.poll() is None and time.monotonic() < end:
        time.sleep(0.02)
    reached = f"killed {delay:.2f} s into the lake step" if proc.poll() is None else "finished"
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    return reached


def test_a_kill_in_the_lake_step_and_a_rerun_leave_nothing_of_them(lake: Lake) -> None:
    rng = random.Random(int(os.environ.get("ERASE_KILL_SEED", "0")) or None)
    reached = _erase_killed_in_the_lake_step(lake, rng)
    cert = json.loads(ok(run(lake.folder, "erase", "-w", "acme", "--external-user-id", PERSON,
                             "--json")))  # fmt: skip
    assert cert["status"] == "complete", reached
    # the first attempt logged what the lake held before it changed anything, and its
    # completion (by this run, or by it when the kill came after) counts it
    con = duckdb.connect(str(lake.db), read_only=True)
    try:
        logged = con.execute("SELECT certificate FROM erasure_log WHERE status = 'complete'")
        done = [json.loads(c) for (c,) in logged.fetchall()]
    finally:
        con.close()
    lake_tables = [c["stores"]["lake"]["tables"] for c in done]
    assert any(t.get("conversations", {}).get("rows") == 2 for t in lake_tables), reached
    assert lake_holding(lake.files, lake.values) == {}, reached
    assert naming_in_workspace(lake.files, lake.ids()["acme"], PERSON) == [], reached
    assert files_holding(lake.folder / "data", lake.values) == {}, reached
    _readers_see_the_warehouse(lake)
