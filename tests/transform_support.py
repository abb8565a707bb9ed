"""Helpers for transform tests: a populated warehouse, and comparing summaries."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import ACME_KEY, RunningSandbox, make_settings
from convo_analytics._serving import ServerThread
from convo_analytics.sandbox import Sandbox, create_app
from convo_analytics.sandbox._history_archive import write_history_archive
from convo_analytics.topics import TopicConfig
from convo_analytics.transform import TransformConfig, run_transform
from convo_analytics.warehouse import open_warehouse
from convo_analytics.webhooks import ingest
from extract_support import extract

ARCHIVE_SECRET = "whsec_transform_tests_0123456789"


def populate(
    sandbox: Sandbox,
    url: str,
    key: str,
    db: Path,
    timezones: tuple[str, ...],
    topics_from: int | None = None,
) -> None:
    """Extract the workspace, ingest its webhook history, and run the transform (topics
    discovered from ``topics_from`` first messages on: the setting's default when None)."""
    result = extract(url, key, db)
    assert result.ok, result.to_json()
    workspace = sandbox.workspace_for(key)
    assert workspace is not None
    archive = db.parent / "history.jsonl.gz"
    write_history_archive(archive, [workspace], ARCHIVE_SECRET)
    ingested = ingest([archive], [ARCHIVE_SECRET.encode()], db)
    assert ingested.loaded > 0
    con = open_warehouse(db)
    try:
        topics = (
            TopicConfig() if topics_from is None else TopicConfig(min_conversations=topics_from)
        )
        run_transform(con, TransformConfig(timezones=timezones, topics=topics))
    finally:
        con.close()


@contextmanager
def populated_sandbox(
    folder: Path, conversations: int, timezones: tuple[str, ...], topics_from: int | None = None
) -> Iterator[tuple[RunningSandbox, Path]]:
    """A served sandbox and a warehouse made from it (extract, ingest, transform)."""
    sandbox = Sandbox(make_settings(conversations=conversations, days=10))
    with ServerThread(create_app(sandbox)) as server:
        running = RunningSandbox(sandbox, server)
        db = folder / "w.duckdb"
        populate(sandbox, running.url, ACME_KEY, db, timezones, topics_from)
        yield running, db


def assert_same(ours: Any, theirs: Any, path: str = "") -> None:
    """Equal, with floats equal to 1e-9 relative (sums in another order round differently)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and set(ours) == set(theirs), (path, set(ours) ^ set(theirs))
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{path}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(theirs, float) or isinstance(ours, float):
        assert ours is not None and theirs is not None, (path, ours, theirs)
        assert math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-12), (path, ours, theirs)
    else:
        assert ours == theirs, (path, ours, theirs)
