"""``convo transform``, and the helpers the readers' commands share (days, zones, the
warehouse opened read-only)."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Annotated

import orjson
import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._options import DbOption, default_of
from convo_analytics.config import Settings

if TYPE_CHECKING:  # duckdb is imported by the code that opens a warehouse, not by --help
    import duckdb

__all__ = [
    "FromOption",
    "ToOption",
    "TzOption",
    "open_existing",
    "transform",
    "warn",
]

FromOption = Annotated[
    str, typer.Option("--from", metavar="DAY", help="First day, inclusive (YYYY-MM-DD).")
]
ToOption = Annotated[
    str, typer.Option("--to", metavar="DAY", help="Last day, inclusive (YYYY-MM-DD).")
]
TzOption = Annotated[
    str | None,
    typer.Option(
        "--tz",
        metavar="ZONE",
        help="IANA time zone days are cut in. [default: the first of transform.timezones]",
    ),
]


def open_existing(settings: Settings, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """The warehouse a command reads (or rebuilds marts in): it must exist already, since an
    empty one made here would only hide a wrong --db."""
    from convo_analytics.warehouse import open_warehouse

    db = settings.require_path("warehouse.path")
    return open_warehouse(db, read_only=read_only, must_exist=True)


def warn(message: str | None) -> None:
    """``warning: ...`` on stderr (the export still succeeds)."""
    if message:
        sys.stderr.write(f"warning: {message}\n")
        sys.stderr.flush()


def transform(
    ctx: typer.Context,
    db: DbOption = None,
    tz: Annotated[
        list[str] | None,
        typer.Option(
            "--tz",
            metavar="ZONE",
            help=f"Cut days in this IANA zone (repeatable). {default_of('transform.timezones')}",
        ),
    ] = None,
    low_confidence_threshold: Annotated[
        float | None,
        typer.Option(
            "--low-confidence-threshold",
            min=0.0,
            max=1.0,
            metavar="X",
            help="Confidence below this is low. "
            + default_of("transform.low_confidence_threshold"),
        ),
    ] = None,
    reconcile: Annotated[
        bool,
        typer.Option("--reconcile/--no-reconcile", help="Compare with the service's own summary."),
    ] = True,
    tolerance: Annotated[
        float | None,
        typer.Option(
            "--tolerance",
            min=0.0,
            metavar="X",
            help=f"Relative difference tolerated. {default_of('transform.tolerance')}",
        ),
    ] = None,
    fail_on_mismatch: Annotated[
        bool,
        typer.Option(
            "--fail-on-mismatch",
            help="Exit 1 when reconciliation finds differences from the service's own summary "
            "(without it they are a warning and the exit status is 0).",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the run as one JSON object.")
    ] = False,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Rebuild every partition (a month at a time, in bounded memory) instead of "
            "the ones changed since the last transform.",
        ),
    ] = False,
) -> None:
    """Bring the marts (facts, daily metrics, incidents) up to date, in one transaction.

    Only the partitions (workspace, zone, day) that what was loaded since the
    last transform touches are rewritten, unless --full asks for all of them
    (or the zones, the threshold or the definitions changed).

    Exit status 0 when done (1 with --fail-on-mismatch and differences from
    the service's summary), 75 when another writer holds the warehouse, 2 for
    usage errors.
    """
    settings = settings_from_context(
        ctx,
        {
            "warehouse.path": db,
            "transform.timezones": tz or None,
            "transform.low_confidence_threshold": low_confidence_threshold,
            "transform.tolerance": tolerance,
        },
    )
    from convo_analytics.transform import run_transform, transform_config

    config = transform_config(settings, reconcile=reconcile, full=full)
    from convo_analytics.warehouse import require_existing

    require_existing(settings.require_path("warehouse.path"))  # before waiting for the lock
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from convo_analytics.pipeline import warehouse_writer

    with warehouse_writer(settings, "convo transform"):
        con = open_existing(settings, read_only=False)
        try:
            result = run_transform(con, config)
        finally:
            con.close()
    if as_json:
        sys.stdout.write(orjson.dumps(result.as_json()).decode() + "\n")
    else:
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        how = (
            f"full ({result.full_reason})"
            if result.mode == "full"
            else f"incremental, {result.changed_conversations} conversations changed"
        )
        err.print(
            f"transform {result.transform_run_id}: {how}; "
            f"{result.partitions['count']} partitions rewritten; {result.conversations} "
            f"conversations, {result.incidents} incidents, "
            f"{sum(result.mart_rows.values())} mart rows in {result.duration_seconds:.1f} s; "
            + result.reconciliation.describe()
        )
        for ws, found in sorted(result.topics.discovered.items()):
            err.print(f"topics of {ws}: {found['topics']} discovered", markup=False)
    if fail_on_mismatch and result.mismatches:
        raise typer.Exit(1)
