"""``convo audit verify|export|head``: the audit trail checked, handed to a reviewer, and
its head recorded (decision D-AUDIT-TRAIL); and :func:`command_line`, what a command
records as ``what``."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import orjson
import typer
from typer._click.core import ParameterSource

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._options import PLAIN_HELP, DbOption, default_of
from convo_analytics.errors import UserError

if TYPE_CHECKING:
    from convo_analytics.audit import AuditLog
    from convo_analytics.config import Settings

__all__ = ["audit_app", "command_line"]

audit_app = typer.Typer(
    rich_markup_mode=PLAIN_HELP,
    name="audit",
    help="Check the audit trail (who read or exported what), hand a range of it to a "
    "reviewer, or record its head.",
    no_args_is_help=True,
)

FileOption = Annotated[
    Path | None,
    typer.Option("--file", metavar="FILE", help=f"The audit log. {default_of('audit.file')}"),
]


def command_line(ctx: typer.Context) -> str:
    """The command as given: its path and the options set on the command line (their
    values as parsed; never a secret, which no option takes)."""
    parts = ctx.command_path.split()
    for param in ctx.command.params:
        name = param.name or ""
        if ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE:
            continue
        value = ctx.params.get(name)
        opts = list(getattr(param, "opts", ()))
        flag = opts[0] if opts else name
        if getattr(param, "param_type_name", "") == "argument":
            parts += [str(v) for v in (value if isinstance(value, list | tuple) else [value])]
        elif isinstance(value, bool):
            off = list(getattr(param, "secondary_opts", ()))
            parts.append(flag if value or not off else off[0])
        elif isinstance(value, list | tuple):
            for item in value:
                parts += [flag, str(item)]
        elif value is not None:
            parts += [flag, str(value)]
    return shlex.join(parts)


def _log(
    ctx: typer.Context, file: Path | None, db: Path | None = None
) -> tuple[Settings, AuditLog]:
    """The settings (with the flags) and the audit log they name."""
    from convo_analytics.audit import AuditLog

    settings = settings_from_context(ctx, {"audit.file": file, "warehouse.path": db})
    return settings, AuditLog(settings.require_path("audit.file"))


@audit_app.command("verify")
def verify_cmd(
    ctx: typer.Context,
    head: Annotated[
        list[str] | None,
        typer.Option(
            "--head",
            metavar="SEQ:HASH",
            help="A head recorded elsewhere (convo audit head, a run's audit_head) that the "
            "log must still reach (repeatable).",
        ),
    ] = None,
    manifest: Annotated[
        list[Path] | None,
        typer.Option(
            "--manifest",
            metavar="FILE",
            help="An export's manifest whose record must hold it unchanged (repeatable).",
        ),
    ] = None,
    file: FileOption = None,
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Check that the audit log is the chain it was: exit 0 when whole, 1 naming the first
    bad record.

    Every record's hash, seq and prev are checked in order (an edited, removed or
    reordered record), then the heads recorded by each run (pipeline_runs of --db)
    and by convo audit head, and those given with --head (a log cut short).
    """
    from convo_analytics.audit import Head, KnownHead, read_manifest, recorded_heads, verify

    given = []
    for text in head or ():
        try:
            given.append(KnownHead(Head.parse(text), f"given with --head {text[:24]}"))
        except ValueError as exc:
            raise UserError(f"--head: {exc}; copy it from 'convo audit head'") from None
    manifests = [read_manifest(path) for path in manifest or ()]
    settings, log = _log(ctx, file, db)
    heads, notes = recorded_heads(log, settings.get_path("warehouse.path"))
    result = verify(log, [*heads, *given], manifests=manifests)
    result.notes += notes
    if as_json:
        sys.stdout.write(orjson.dumps(result.as_json()).decode() + "\n")
    else:
        for note in result.notes:
            sys.stderr.write(f"note: {note}\n")
        sys.stdout.write(result.line() + "\n")
    if not result.ok:
        raise typer.Exit(1)


@audit_app.command("export")
def export_cmd(
    ctx: typer.Context,
    from_: Annotated[
        str, typer.Option("--from", metavar="DAY", help="First day, inclusive (YYYY-MM-DD, UTC).")
    ],
    to: Annotated[
        str, typer.Option("--to", metavar="DAY", help="Last day, inclusive (YYYY-MM-DD, UTC).")
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", metavar="FILE", help="Write to FILE instead of stdout."),
    ] = None,
    file: FileOption = None,
    db: DbOption = None,
) -> None:
    """Give a reviewer the audit records of a range of days, as JSON lines: a header (the
    chain's verification, and the hashes that tie the range to the chain), then the
    records as the log holds them.

    Exit 1 (after writing) when the chain is not whole.
    """
    from convo_analytics.audit import auditor, export_range, recorded_heads
    from convo_analytics.export import parse_day

    first, last = parse_day("--from", from_), parse_day("--to", to)
    if last < first:
        raise UserError(f"--to {last} is before --from {first}; swap them")
    settings, log = _log(ctx, file, db)
    found = auditor(settings)  # reading the trail is recorded too: checked first
    heads, _ = recorded_heads(log, settings.get_path("warehouse.path"))
    if out is None:
        done = export_range(log, first, last, heads, sys.stdout.buffer)
        sys.stdout.flush()
    else:
        tmp = out.with_name(out.name + ".partial")
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("wb") as f:
                done = export_range(log, first, last, heads, f)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise UserError(
                f"--out {out}: cannot be written ({exc.strerror}); choose another"
            ) from None
        tmp.replace(out)
        sys.stderr.write(f"{done.records} audit records {first}..{last} -> {out}\n")
    if found is not None:
        found.record("audit.export", what=command_line(ctx), rows=done.records)
    if not done.verification.ok:
        sys.stderr.write(done.verification.line() + "\n")
        raise typer.Exit(1)


@audit_app.command("head")
def head_cmd(
    ctx: typer.Context,
    file: FileOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the head as JSON.")] = False,
) -> None:
    """Print the audit log's head (SEQ:HASH of its last record) and record it beside the
    log, so that a log cut short later is found; keep a copy elsewhere too (a head kept
    only beside the log can be cut with it)."""
    from convo_analytics.audit import os_user

    _, log = _log(ctx, file)
    log.check()
    head = log.record_head(f"convo audit head (os:{os_user()})")
    if as_json:
        sys.stdout.write(orjson.dumps({"seq": head.seq, "hash": head.hash}).decode() + "\n")
    else:
        sys.stdout.write(f"{head}\n")
