"""``convo webhooks``: receive the service's deliveries, and ingest archives of them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._lock import warehouse_writer
from convo_analytics.cli._options import PLAIN_HELP, DbOption
from convo_analytics.cli._webhooks_serve import serve
from convo_analytics.config import Settings, WorkspaceConfig
from convo_analytics.errors import UserError

if TYPE_CHECKING:
    from convo_analytics.webhooks import IngestOptions, IngestResult

__all__ = ["webhooks_app"]

webhooks_app = typer.Typer(
    rich_markup_mode=PLAIN_HELP,
    name="webhooks",
    help="Receive the service's signed webhook deliveries and ingest their archives.",
    no_args_is_help=True,
)
webhooks_app.command("serve")(serve)
ARCHIVE_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".json", ".gz")


def ingest_options(settings: Settings, *, full: bool = False) -> IngestOptions:
    """The ingest's limits from the ``webhooks.*`` settings."""
    from convo_analytics.webhooks import IngestOptions

    return IngestOptions(
        max_line_bytes=settings.get_int("webhooks.max_line_bytes"),
        max_future_seconds=settings.get_int("webhooks.max_future_seconds"),
        settle_seconds=settings.get_int("webhooks.settle_seconds"),
        alarm_share=settings.get_float("webhooks.bad_signature_share"),
        full=full,
    )


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


def ingest_batches(
    settings: Settings, files: list[Path], given: list[str] | None, workspace: str | None
) -> list[tuple[str | None, list[bytes], list[Path]]]:
    """Which secrets verify which files: a file under a workspace's archive folder
    (``ARCHIVE/workspaces/NAME/``), or any file with ``--workspace NAME``, that workspace's
    secrets (a delivery signed with another's is quarantined); the rest ``webhooks.secret``
    (or ``--secret``)."""
    from convo_analytics.config import load_workspaces, select_workspaces

    configured = {w.name: w for w in load_workspaces(settings) if not w.implicit}
    if workspace is not None:
        (chosen,) = select_workspaces(list(configured.values()), [workspace])
        return [(chosen.name, _workspace_secrets(chosen), files)]
    archive = settings.require_path("webhooks.archive_dir").resolve() / "workspaces"
    by_workspace: dict[str, list[Path]] = {}
    rest: list[Path] = []
    for path in files:
        parts = path.resolve().parts
        inside = parts[: len(archive.parts)] == archive.parts and len(parts) > len(archive.parts)
        name = parts[len(archive.parts)] if inside else None
        if name is not None and name in configured:
            by_workspace.setdefault(name, []).append(path)
        else:
            rest.append(path)
    batches: list[tuple[str | None, list[bytes], list[Path]]] = [
        (name, _workspace_secrets(configured[name]), paths) for name, paths in by_workspace.items()
    ]
    if rest or not batches:
        # no files at all still checks the secret: the error belongs to the setup, not the day
        batches.append((None, webhook_secrets(settings, given), rest))
    return batches


def _workspace_secrets(workspace: WorkspaceConfig) -> list[bytes]:
    if not workspace.webhook_secrets:
        raise UserError(
            f"workspace {workspace.name!r} has no webhook secrets; set its "
            "webhook_secrets_env or webhook_secrets_file"
        )
    return [s.reveal().encode("utf-8") for s in workspace.webhook_secrets]


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
    replays), quarantined (with file, line and reason, in the quarantine table).
    Only what is new since the last run is read (files remembered in ingest_files).
    Exit status 75 when another writer holds the warehouse.
    """
    settings = settings_from_context(ctx, {"warehouse.path": db})
    files = archive_files(paths)
    batches = ingest_batches(settings, files, secret, workspace)
    db_path = settings.require_path("warehouse.path")
    from convo_analytics.webhooks import ingest

    options = ingest_options(settings, full=full)
    with warehouse_writer(settings, "convo webhooks ingest"):
        results = [
            ingest(batch, keys, db_path, options,
                   secret_hint=f"workspace {name}'s webhook secrets" if name
                   else secret_origin(settings, secret))
            for name, keys, batch in batches
        ]  # fmt: skip
    if len(results) > 1:
        _report_many([name for name, _, _ in batches], results, as_json)
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
        f"{result.duplicates} duplicates, {quarantined} quarantined in {result.seconds:.1f} s "
        f"-> {db_path}"
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
        )
    for result in results:
        print_alarm(result)
