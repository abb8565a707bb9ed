"""``convo publish``: a snapshot of the warehouse for readers, or its workspaces into the lake."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import orjson
import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._errors import report_error
from convo_analytics.cli._options import DbOption, default_of

if TYPE_CHECKING:
    from convo_analytics.config import Settings
    from convo_analytics.lake import TablePublish

__all__ = ["publish"]


def publish(
    ctx: typer.Context,
    db: DbOption = None,
    published_dir: Annotated[
        Path | None,
        typer.Option(
            "--dir", metavar="DIR", help=f"Where snapshots go. {default_of('publish.dir')}"
        ),
    ] = None,
    keep: Annotated[
        int | None,
        typer.Option(
            "--keep", min=1, metavar="N", help=f"Snapshots kept. {default_of('publish.keep')}"
        ),
    ] = None,
    lake: Annotated[
        bool,
        typer.Option(
            "--lake",
            help="Publish to the shared Iceberg lake (the lake.* settings) instead of a "
            "snapshot: each workspace's partitions of the typed tables and marts, replaced.",
        ),
    ] = False,
    workspace: Annotated[
        list[str] | None,
        typer.Option(
            "--workspace",
            "-w",
            metavar="NAME",
            help="With --lake: only this workspace (name or id; repeatable); default: every "
            "workspace the warehouse holds.",
        ),
    ] = None,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="With --lake: replace every partition of the workspaces, not only those "
            "whose rows changed (after repairing the lake by hand, say).",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="With --lake: print what each table's commit did.")
    ] = False,
) -> None:
    """Publish a consistent snapshot of the warehouse for the dashboard and other readers,
    or, with --lake, its workspaces into the shared Iceberg lake.

    Exit status 0 when published; 1 when the copy could not be written (not
    enough space, a write error: nothing is left behind and the published
    snapshot stays) or a lake commit kept losing to other writers; 75 when
    another writer holds the warehouse (or another warehouse's publish the
    published folder); 2 for usage errors (no warehouse, a lake catalog that
    cannot be reached).
    """
    settings = settings_from_context(
        ctx, {"warehouse.path": db, "publish.dir": published_dir, "publish.keep": keep}
    )
    db_path = settings.require_path("warehouse.path")
    from convo_analytics.warehouse import open_warehouse, require_existing

    require_existing(db_path)  # said before the lock is waited for
    if lake:
        _publish_lake(settings, db_path, workspace, full=full, as_json=as_json)
        return
    if workspace or as_json or full:
        from convo_analytics.errors import UserError

        raise UserError(
            "--workspace, --full and --json go with --lake (a snapshot holds everything)"
        )
    from convo_analytics.pipeline import warehouse_writer
    from convo_analytics.publish import PublishFailed, publish_snapshot

    folder = settings.require_path("publish.dir")
    with warehouse_writer(settings, "convo publish", publishes=True):
        con = open_warehouse(db_path, must_exist=True)
        try:
            snap = publish_snapshot(con, db_path, folder, settings.get_int("publish.keep"))
        except PublishFailed as exc:
            report_error(str(exc), "convo publish")
            raise typer.Exit(1) from None
        finally:
            con.close()
    Console(stderr=True, highlight=False, soft_wrap=True).print(
        f"published {snap.path} (snapshot {snap.snapshot_id})"
    )


def _publish_lake(
    settings: Settings,
    db_path: Path,
    workspaces: list[str] | None,
    *,
    full: bool,
    as_json: bool,
) -> None:
    from convo_analytics.lake import LakeCommitFailed, LakeConfig, publish_lake
    from convo_analytics.pipeline import warehouse_writer
    from convo_analytics.warehouse import open_warehouse

    config = LakeConfig.from_settings(settings)  # a bad URL is said before the lock
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    with warehouse_writer(settings, "convo publish --lake"):
        con = open_warehouse(db_path, read_only=True)
        try:
            result = publish_lake(
                con,
                config,
                workspaces or None,
                full=full,
                on_table=None if as_json else lambda t: err.print(_table_line(t)),
            )
        except LakeCommitFailed as exc:
            report_error(str(exc), "convo publish --lake")
            raise typer.Exit(1) from None
        finally:
            con.close()
    if as_json:
        sys.stdout.write(orjson.dumps(result.to_json()).decode() + "\n")
        return
    changed = sum(1 for t in result.tables if t.attempts)
    err.print(
        f"published {result.rows} rows in {changed} of {len(result.tables)} table(s), "
        f"{sum(t.partitions for t in result.tables)} partition(s) replaced, "
        f"of {len(result.workspaces)} workspace(s) "
        f"({', '.join(result.workspaces) or 'none'}) to the lake at {config.display_uri} "
        f"(namespace {config.namespace}) in {result.seconds:.1f} s"
    )


def _table_line(t: TablePublish) -> str:
    if not t.attempts:
        return f"  {t.table}: unchanged"
    retried = f" ({t.attempts} attempts)" if t.attempts > 1 else ""
    return f"  {t.table}: {t.rows} rows in {t.partitions} partition(s), {t.files} files{retried}"
