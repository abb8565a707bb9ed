"""``convo webhooks``: receive the service's deliveries, and ingest archives of them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._options import PLAIN_HELP, DbOption
from convo_analytics.cli._webhooks_serve import serve
from convo_analytics.config import Settings

if TYPE_CHECKING:
    from convo_analytics.webhooks import IngestResult

__all__ = ["webhooks_app"]

webhooks_app = typer.Typer(
    rich_markup_mode=PLAIN_HELP,
    name="webhooks",
    help="Receive the service's signed webhook deliveries and ingest their archives.",
    no_args_is_help=True,
)
webhooks_app.command("serve")(serve)


def secret_origin(settings: Settings, given: list[str] | None) -> str:
    """Where the secrets come from, for the signature alarm (never the secrets)."""
    if given:
        return "--secret"
    return settings.resolved("webhooks.secret").origin.replace("$", "")


def print_alarm(result: IngestResult) -> None:
    """The signature alarm's one line on stderr, then exit 1 (the run counts as failed)."""
    if result.alarm is not None:
        sys.stderr.write(f"error: {result.alarm}\n")
        raise typer.Exit(1)


SecretFlag = Annotated[
    list[str] | None,
    typer.Option(
        "--secret",
        metavar="SECRET",
        help="A webhook secret (repeatable, for rotation). Prefer "
        "CONVO_WEBHOOK_SECRET: a flag shows in process listings.",
    ),
]
DbFlag = DbOption
JsonFlag = Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")]


@webhooks_app.command("ingest")
def ingest_command(
    ctx: typer.Context,
    paths: Annotated[
        list[Path],
        # described in the docstring: typer prints an argument's type (<list[Path]>) beside it
        typer.Argument(metavar="PATH", hidden=True, help="Archive files or folders of them."),
    ],
    secret: SecretFlag = None,
    db: DbOption = None,
    as_json: JsonFlag = False,
    full: Annotated[
        bool,
        typer.Option("--full", help="Read every file from its start, not only what is new."),
    ] = False,
    workspace: Annotated[
        str | None,
        typer.Option(
            "--workspace",
            "-w",
            metavar="NAME",
            help="Verify with this [[workspaces]] workspace's secrets.",
        ),
    ] = None,
) -> None:
    """Verify, deduplicate and load webhook archives; quarantine what cannot be loaded.

    PATH: archive files (.jsonl, .jsonl.gz), or folders holding them.

    Every input line ends in exactly one of: loaded, duplicates (retries and
    replays), quarantined (with file, line and reason, in the quarantine table),
    suppressed (it names a person `convo erase` removed).
    Only what is new since the last run is read (files remembered in ingest_files).
    Exit status 75 when another writer holds the warehouse.
    """
    settings = settings_from_context(ctx, {"warehouse.path": db})
    from convo_analytics.webhooks import (
        archive_files,
        check_bindings,
        ingest,
        ingest_batches,
        ingest_options,
    )

    files = archive_files(paths)
    batches = ingest_batches(settings, files, secret, workspace)
    db_path = settings.require_path("warehouse.path")
    check_bindings(db_path, batches)
    options = ingest_options(settings, full=full)
    from convo_analytics.pipeline import warehouse_writer

    with warehouse_writer(settings, "convo webhooks ingest"):
        results = [
            ingest(batch.files, batch.keys.secrets, db_path, options,
                   secret_hint=batch.keys.hint, endpoint=batch.keys.endpoint,
                   privacy=batch.keys.privacy)
            for batch in batches
        ]  # fmt: skip
    if len(results) > 1:
        _report_many([batch.keys.name for batch in batches], results, as_json)
        return
    (result,) = results
    if as_json:
        sys.stdout.write(orjson.dumps(result.to_json()).decode() + "\n")
        print_alarm(result)
        return
    out = Console(stderr=True, highlight=False, soft_wrap=True)
    for changed in result.changed:
        out.print(f"{changed['path']} changed since it was read ({changed['why']}): read again")
    quarantined = sum(result.quarantined.values())
    out.print(
        f"ingested {result.files} file(s) ({result.skipped} unchanged, skipped), "
        f"{result.read} lines ({result.bytes_read:,} bytes): {result.loaded} loaded, "
        f"{result.duplicates} duplicates, {quarantined} quarantined"
        + (f", {result.suppressed} suppressed (erased people)" if result.suppressed else "")
        + f" in {result.seconds:.1f} s -> {db_path}"
    )
    for reason, n in sorted(result.quarantined.items()):
        out.print(f"  quarantined {reason}: {n} (see 'convo webhooks quarantine list')")
    if result.held_back:
        out.print(f"  {result.held_back} unterminated last line(s) left for a later run")
    print_alarm(result)


def _report_many(names: list[str | None], results: list[Any], as_json: bool) -> None:
    """Several workspaces' ingests: each one's counts; exit 1 when one's signatures failed."""
    labels = [name or "(webhooks.secret)" for name in names]
    if as_json:
        body = {label: r.to_json() for label, r in zip(labels, results, strict=True)}
        sys.stdout.write(orjson.dumps({"workspaces": body}).decode() + "\n")
    out = Console(stderr=True, highlight=False, soft_wrap=True)
    for label, result in zip(labels, results, strict=True):
        out.print(
            f"{label}: {result.files} file(s), {result.read} lines: {result.loaded} loaded, "
            f"{result.duplicates} duplicates, {sum(result.quarantined.values())} quarantined"
            + (f", {result.suppressed} suppressed" if result.suppressed else "")
        )
    for result in results:
        print_alarm(result)
