"""``convo webhooks``: receive the service's deliveries, and ingest archives of them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._lock import warehouse_writer
from convo_analytics.cli._options import PLAIN_HELP, DbOption
from convo_analytics.cli._webhooks_serve import serve
from convo_analytics.config import Settings
from convo_analytics.errors import UserError

__all__ = ["webhooks_app"]

webhooks_app = typer.Typer(
    rich_markup_mode=PLAIN_HELP,
    name="webhooks",
    help="Receive the service's signed webhook deliveries and ingest their archives.",
    no_args_is_help=True,
)
webhooks_app.command("serve")(serve)
ARCHIVE_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".json", ".gz")


def webhook_secrets(settings: Settings, given: list[str] | None) -> list[bytes]:
    """The secrets to verify with: the flags, else ``webhooks.secret`` (several = rotation)."""
    if given:
        return [s.encode("utf-8") for s in given if s]
    secret = settings.get_secret("webhooks.secret")
    if secret is None:
        raise UserError(
            "no webhook secret to verify signatures with; set CONVO_WEBHOOK_SECRET (several "
            "comma-separated during a rotation) or CONVO_WEBHOOK_SECRET_FILE, or pass --secret"
        )
    return [part.reveal().encode("utf-8") for part in secret.parts()]


def archive_files(paths: list[Path]) -> list[Path]:
    """Files named, and archive files under folders named (their quarantine/ left out)."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*")
                if p.is_file() and p.name.endswith(ARCHIVE_SUFFIXES)
                and "quarantine" not in p.relative_to(path).parts
            )  # fmt: skip
            out.extend(found)
        elif path.is_file():
            out.append(path)
        else:
            raise UserError(
                f"{path}: no such file or folder; name webhook archive files "
                "(.jsonl or .jsonl.gz) or folders holding them"
            )
    return list(dict.fromkeys(out))


@webhooks_app.command("ingest")
def ingest_command(
    ctx: typer.Context,
    paths: Annotated[
        list[Path],
        # described in the docstring: typer prints an argument's type (<list[Path]>) beside it
        typer.Argument(metavar="PATH", hidden=True, help="Archive files or folders of them."),
    ],
    secret: Annotated[
        list[str] | None,
        typer.Option(
            "--secret",
            metavar="SECRET",
            help="A webhook secret (repeatable, for rotation). Prefer "
            "CONVO_WEBHOOK_SECRET: a flag shows in process listings.",
        ),
    ] = None,
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
) -> None:
    """Verify, deduplicate and load webhook archives; quarantine what cannot be loaded.

    PATH: archive files (.jsonl, .jsonl.gz), or folders holding them.

    Every input line ends in exactly one of: loaded, duplicates (retries and
    replays), quarantined (with file, line and reason, in the quarantine table).
    Exit status 75 when another writer holds the warehouse.
    """
    settings = settings_from_context(ctx, {"warehouse.path": db})
    keys = webhook_secrets(settings, secret)
    files = archive_files(paths)
    db_path = settings.require_path("warehouse.path")
    from convo_analytics.webhooks import ingest

    with warehouse_writer(settings, "convo webhooks ingest"):
        result = ingest(files, keys, db_path)
    if as_json:
        sys.stdout.write(orjson.dumps(result.to_json()).decode() + "\n")
        return
    out = Console(stderr=True, highlight=False, soft_wrap=True)
    quarantined = sum(result.quarantined.values())
    out.print(
        f"ingested {result.files} file(s), {result.read} lines: {result.loaded} loaded, "
        f"{result.duplicates} duplicates, {quarantined} quarantined in {result.seconds:.1f} s "
        f"-> {db_path}"
    )
    for reason, n in sorted(result.quarantined.items()):
        out.print(f"  quarantined {reason}: {n} (see the quarantine table)")
