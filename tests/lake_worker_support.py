"""Workers the lake's tests start together (multiprocessing's "spawn": each child imports
the module of the function it runs, so they live here, importing little more than the lake
package, rather than in a test module that imports the whole pipeline)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import duckdb

from convo_analytics.lake import LakeConfig, publish_lake


def at_once(target: Any, args: list[tuple[Any, ...]], timeout: float) -> list[Any]:
    """Run ``target(*a, barrier, out)`` for each ``a`` in its own process, released together
    by a barrier; what each put on ``out``."""
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(len(args)), context.Queue()
    workers = [context.Process(target=target, args=(*a, barrier, out)) for a in args]
    for p in workers:
        p.start()
    try:
        return [out.get(timeout=timeout) for _ in workers]
    finally:
        for p in workers:
            p.join(timeout=60)
            assert p.exitcode == 0


def publisher(db: str, uri: str, files: str, barrier: Any, out: Any) -> None:
    """Publish every workspace of the warehouse ``db`` once the others are ready too."""
    config = LakeConfig(uri, files)
    config.open_catalog()  # connected before the start line, so both commit at once
    barrier.wait(timeout=120)
    con = duckdb.connect(str(Path(db)), read_only=True)
    try:
        out.put(publish_lake(con, config).to_json())
    finally:
        con.close()


def opener(uri: str, files: str, barrier: Any, out: Any) -> None:
    """Open the catalog (setting it up if new) at the same moment as the others."""
    barrier.wait(timeout=120)
    catalog = LakeConfig(uri, files).open_catalog()
    out.put([".".join(ns) for ns in catalog.list_namespaces()])
