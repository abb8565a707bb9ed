"""A published snapshot of three workspaces, made through the real pipeline: each extracted
from the sandbox with its own key (under its configured name), their webhook history
ingested, the transform run, the warehouse published; for the dashboard's tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import ACME_KEY, GLOBEX_KEY, make_settings
from convo_analytics._serving import ServerThread
from convo_analytics.publish import publish_snapshot
from convo_analytics.sandbox import Sandbox, create_app
from convo_analytics.sandbox._history_archive import write_history_archive
from convo_analytics.transform import TransformConfig, run_transform
from convo_analytics.warehouse import open_warehouse
from convo_analytics.webhooks import ingest
from extract_support import extract

INITECH_KEY = "sk_test_initech_55555555"
#: (configured name, API key) of each workspace.
WORKSPACES = (("acme", ACME_KEY), ("globex", GLOBEX_KEY), ("initech", INITECH_KEY))
SECRET = "whsec_dashboard_workspaces_0123456789"


@contextmanager
def three_workspaces(folder: Path, conversations: int = 120) -> Iterator[tuple[Path, Path]]:
    """(the published folder, the warehouse) of three workspaces read into one warehouse."""
    sandbox = Sandbox(make_settings(conversations=conversations, days=10,
                                    workspaces=list(WORKSPACES)))  # fmt: skip
    db = folder / "w.duckdb"
    with ServerThread(create_app(sandbox)) as server:
        for name, key in WORKSPACES:
            result = extract(server.url, key, db, workspace=name, implicit_workspace=False)
            assert result.ok, result.to_json()
    archive = folder / "history.jsonl.gz"
    write_history_archive(archive, list(sandbox.workspaces.values()), SECRET)
    assert ingest([archive], [SECRET.encode()], db).loaded > 0
    con = open_warehouse(db)
    try:
        run_transform(con, TransformConfig(timezones=("UTC",)))
        publish_snapshot(con, db, folder / "published")
    finally:
        con.close()
    yield folder / "published", db
