"""``convo webhooks quarantine``: list, replay and purge what the ingest set aside.

Registered in the ``webhooks`` group by ``cli/__init__.py``. See
``webhooks/_quarantine.py`` for the life cycle of a quarantine row.
"""

from __future__ import annotations

import sys
from datetime import date
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.table import Table

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._webhooks_cmd import DbFlag, JsonFlag, SecretFlag, print_alarm
from convo_analytics.errors import UserError

__all__ = ["quarantine_app"]

quarantine_app = typer.Typer(
    name="quarantine",
    help="List, replay and purge the webhook lines the ingest quarantined.",
    no_args_is_help=True,
)


def _err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


@quarantine_app.command("list")
def list_command(
    ctx: typer.Context,
    db: DbFlag = None,
    as_json: JsonFlag = False,
    include_resolved: Annotated[
        bool, typer.Option("--all", help="Count resolved rows too (loaded or duplicate).")
    ] = False,
) -> None:
    """Quarantined lines by reason, file and day (open ones: not loaded since)."""
    settings = settings_from_context(ctx, {"warehouse.path": db})
    from convo_analytics.warehouse import open_warehouse
    from convo_analytics.webhooks import quarantine_counts

    con = open_warehouse(settings.require_path("warehouse.path"), read_only=True)
    try:
        rows = quarantine_counts(con, include_resolved=include_resolved)
    finally:
        con.close()
    if as_json:
        sys.stdout.write(
            orjson.dumps({"rows": rows, "open": sum(r["open"] for r in rows)}).decode()
        )
        sys.stdout.write("\n")
        return
    if not rows:
        _err().print("nothing quarantined" + ("" if include_resolved else " is open"))
        return
    table = Table("day", "reason", "open", *(["loaded", "duplicate"] * include_resolved))
    table.add_column("file", overflow="fold")
    for row in rows:
        extra = [str(row["loaded"]), str(row["duplicate"])] if include_resolved else []
        table.add_row(row["day"], row["reason"], str(row["open"]), *extra, row["file"])
    Console(highlight=False).print(table)


@quarantine_app.command("replay")
def replay_command(
    ctx: typer.Context,
    secret: SecretFlag = None,
    db: DbFlag = None,
    as_json: JsonFlag = False,
    reason: Annotated[
        list[str] | None,
        typer.Option(
            "--reason", metavar="REASON", help="Only rows quarantined for this reason (repeatable)."
        ),
    ] = None,
    file: Annotated[
        str | None,
        typer.Option("--file", metavar="PATH", help="Only rows of this archive file (its path)."),
    ] = None,
    workspace: Annotated[
        list[str] | None,
        typer.Option(
            "--workspace",
            "-w",
            metavar="NAME",
            help="Only rows received for this [[workspaces]] workspace (repeatable).",
        ),
    ] = None,
) -> None:
    """Verify and load the open quarantined lines again (e.g. after adding a rotated secret).

    Each line is verified with the secrets of the endpoint it came to: a
    workspace's archive folder with that workspace's secrets from [[workspaces]],
    any other file with CONVO_WEBHOOK_SECRET (or --secret). Each line ends loaded,
    duplicate or still quarantined, exactly once; a row whose line loads is closed
    (resolved_at, resolution) and no longer counts as open.
    Exit status 75 when another writer holds the warehouse.
    """
    settings = settings_from_context(ctx, {"warehouse.path": db})
    from pathlib import Path

    from convo_analytics.config import load_workspaces, select_workspaces
    from convo_analytics.pipeline import warehouse_writer
    from convo_analytics.webhooks import (
        archive_workspace,
        check_replay,
        ingest_options,
        replay,
        replay_keys,
    )

    configured = [w for w in load_workspaces(settings) if not w.implicit]
    only = [w.name for w in select_workspaces(configured, workspace)] if workspace else None
    keys_for = replay_keys(settings, secret)

    source = str(Path(file).resolve()) if file else None
    db_path = settings.require_path("warehouse.path")

    def workspace_of(path: str) -> str | None:
        return archive_workspace(settings, path)

    reasons = reason or ()
    # a user error (no warehouse, rows whose endpoint has no secrets) before the lock
    check_replay(db_path, keys_for, reasons=reasons, source=source,
                 workspace_of=workspace_of, only=only)  # fmt: skip
    with warehouse_writer(settings, "convo webhooks quarantine replay"):
        result = replay(
            db_path, keys_for, ingest_options(settings), reasons=reasons, source=source,
            workspace_of=workspace_of, only=only,
        )  # fmt: skip
    if as_json:
        sys.stdout.write(orjson.dumps(result.to_json()).decode() + "\n")
    else:
        still = sum(result.quarantined.values())
        _err().print(
            f"replayed {result.read} quarantined line(s) of {result.files} file(s): "
            f"{result.loaded} loaded, {result.duplicates} duplicates, {still} still quarantined"
        )
        for why, n in sorted(result.quarantined.items()):
            _err().print(f"  still quarantined {why}: {n}")
    print_alarm(result)


@quarantine_app.command("purge")
def purge_command(
    ctx: typer.Context,
    before: Annotated[
        str,
        typer.Option(
            "--before",
            metavar="DAY",
            help="Remove rows quarantined before this day (YYYY-MM-DD, UTC).",
        ),
    ],
    db: DbFlag = None,
    as_json: JsonFlag = False,
) -> None:
    """Remove quarantine rows quarantined before a day, open or resolved, on record.

    Exit status 75 when another writer holds the warehouse.
    """
    try:
        day = date.fromisoformat(before)
    except ValueError:
        raise UserError(f"--before {before!r} is not a date; give YYYY-MM-DD") from None
    settings = settings_from_context(ctx, {"warehouse.path": db})
    from convo_analytics.pipeline import warehouse_writer
    from convo_analytics.warehouse import open_warehouse
    from convo_analytics.webhooks import purge

    with warehouse_writer(settings, "convo webhooks quarantine purge"):
        con = open_warehouse(settings.require_path("warehouse.path"))
        try:
            done = purge(con, day)
        finally:
            con.close()
    if as_json:
        sys.stdout.write(orjson.dumps(done).decode() + "\n")
        return
    _err().print(
        f"purged {done['removed']} quarantine row(s) quarantined before {day} "
        f"({done['open']} of them open, never loaded); recorded in quarantine_purges"
    )
