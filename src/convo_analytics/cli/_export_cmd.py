"""``convo export summary|guardrails|knowledge-gaps``: the marts handed out, per workspace
or rolled up; ``convo export person``: everything held about one person (an access
request, D-ERASURE).

A workspace is named as users know it (its ``[[workspaces]]`` name) or by the
service's id of it; the warehouse's ``workspaces`` table and the config say
which is which (decision D-EXPORT-WORKSPACE). Exports read names and ids
only, so they run without the service's credentials.

With ``read.source = "lake"`` they read the lake instead of the warehouse:
the same local copy of the lake the dashboard and `convo serve` read
(``publish.lake_snapshot``, decision D-LAKE-READERS), so the warehouse file is
not needed. It holds each workspace as its last complete publish left it; a
publish in progress or stopped part-way is a warning line (D-LAKE-VISIBLE).
The lake's ``workspaces`` table names the workspaces as the warehouses that
published them did; for a lake published before it held that table, names
come from the config (:func:`source_workspaces`), and an export that would
have to name a workspace neither can is refused rather than written with ids
for names.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from hashlib import sha256
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import orjson
import typer
from rich.console import Console

from convo_analytics.audit import auditor
from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._audit_cmd import command_line
from convo_analytics.cli._erase_cmd import (
    EmailOption,
    ExternalUserIdOption,
    PersonWorkspaceOption,
    person_flags,
)
from convo_analytics.cli._options import PLAIN_HELP, DbOption, default_of
from convo_analytics.cli._transform_cmd import (
    FromOption,
    ToOption,
    TzOption,
    open_existing,
    warn,
)
from convo_analytics.config import Settings, WorkspaceConfig
from convo_analytics.errors import UserError

if TYPE_CHECKING:  # duckdb is imported by the code that opens a warehouse, not by --help
    import duckdb

__all__ = ["export_app"]

export_app = typer.Typer(
    rich_markup_mode=PLAIN_HELP,
    name="export",
    help="Write the summary (service-compatible), the guardrail incident log, the "
    "knowledge-gap report, or everything held about one person.",
    no_args_is_help=True,
)


def _lake_unreadable(reason: str) -> UserError:
    """One line: why the lake cannot be read, and the fix (the catalog's own message names
    the settings to check when it could not be reached)."""
    fix = 'or read the warehouse with read.source = "snapshot"'
    if "lake.catalog_uri" not in reason:
        fix = "check lake.catalog_uri (CONVO_LAKE_CATALOG_URI) and lake.warehouse, " + fix
    return UserError(f'read.source is "lake", but {reason}; {fix}')


class _NoFallbackNotice(logging.Filter):
    """Drops the reader's "reading the previous copy" warning: the exports refuse that copy,
    so the notice would be a second, wrong line beside their one error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False


def open_source(settings: Settings, db: Path | None) -> duckdb.DuckDBPyConnection:
    """What the exports read, read-only: the warehouse, or with ``read.source = "lake"`` the
    current local copy of the lake (made when the lake changed, as the dashboard's is;
    an unfinished publish it leaves out is said on stderr).

    The lake must be readable now: an older copy kept because the lake could not be
    reached (the dashboard shows one, with a warning) would hand out old figures as
    current ones, so it is a UserError naming the lake and the reason instead.
    """
    if settings.get_str("read.source") != "lake":
        return open_existing(settings, read_only=True)
    from convo_analytics.lake import LakeConfig
    from convo_analytics.publish import SnapshotUnreadable, lake_snapshot

    if db is not None:
        raise UserError(
            '--db names a warehouse, but read.source is "lake": the export reads the lake; '
            'drop --db, or set read.source = "snapshot" (CONVO_READ_SOURCE) to read the file'
        )
    lake = LakeConfig.from_settings(settings)
    notices = logging.getLogger(lake_snapshot.__module__)
    quiet = _NoFallbackNotice()
    notices.addFilter(quiet)
    try:
        snap = lake_snapshot(lake, settings.require_path("publish.dir"))
    except SnapshotUnreadable as exc:
        raise _lake_unreadable(exc.reason) from None
    finally:
        notices.removeFilter(quiet)
    if snap is None:
        raise UserError(
            f'read.source is "lake", but the lake at {lake.display_uri} holds no tables yet: '
            "run 'convo publish --lake' first"
        )
    if snap.passed_over:
        raise _lake_unreadable(snap.passed_over)
    warn(snap.unfinished)  # figures of the last complete publishes, and which are not
    return snap.connect()


@dataclass(frozen=True, slots=True)
class SourceWorkspaces:
    """The configured workspaces as the source read knows them: on the lake, each with the
    id it is held under where that can be told (see :func:`source_workspaces`)."""

    configured: list[WorkspaceConfig]
    #: Configured names whose id the lake cannot tell.
    unnamed: list[str] = field(default_factory=list)
    #: Ids the lake holds that no configured workspace is known to be.
    unmapped: list[str] = field(default_factory=list)

    def refuse_unnamed(self, wanted: Sequence[str] | None, *, names_rows: bool) -> None:
        """A UserError when the export needs a name the lake cannot give: a configured
        workspace ``wanted`` names, or (``names_rows``: its rows carry names) a workspace
        held under an id no name is known for (``wanted`` ``None``: every workspace)."""
        if not self.unnamed:
            return
        asked = [w for w in wanted or () if w in self.unnamed]
        if names_rows and (wanted is None or any(w in self.unmapped for w in wanted)):
            asked = self.unnamed
        if asked:
            raise UserError(
                'read.source is "lake", and the lake records workspaces by id only (it '
                f"holds {', '.join(self.unmapped)}): set workspace_id in the [[workspaces]] "
                f"table of {', '.join(map(repr, asked))} (the service's id of it), or read the "
                'warehouse with read.source = "snapshot"'
            )


def source_workspaces(
    con: duckdb.DuckDBPyConnection, settings: Settings, configured: list[WorkspaceConfig]
) -> SourceWorkspaces:
    """The configured workspaces, with the ids the lake holds them under when reading it.

    A warehouse records each name's id (its ``workspaces`` table), and so does
    the lake since it publishes that table; for ids the lake does not name (a
    lake published by an earlier release), a workspace is the ``workspace_id``
    its ``[[workspaces]]`` table sets, or, for a configuration of one workspace
    and a lake of one, that one (as the extractor names it, D-WORKSPACE-ID).
    """
    from convo_analytics.export import warehouse_workspaces

    if settings.get_str("read.source") != "lake":
        return SourceWorkspaces(configured)
    named = {w.workspace_id for w in configured if w.workspace_id}
    in_lake = warehouse_workspaces(con)
    lake_names = {w.name: w.workspace_id for w in in_lake if w.name != w.workspace_id}
    named |= set(lake_names.values())  # the lake's `workspaces` names them
    held = [w.workspace_id for w in in_lake if w.workspace_id not in named]
    unknown = [w.name for w in configured if not w.workspace_id and w.name not in lake_names]
    if not held or not unknown:
        return SourceWorkspaces(configured)
    if len(configured) == 1 and len(held) == 1:
        return SourceWorkspaces([replace(configured[0], workspace_id=held[0])])
    return SourceWorkspaces(configured, unknown, held)


@export_app.command("summary")
def export_summary_cmd(
    ctx: typer.Context,
    from_: FromOption,
    to: ToOption,
    tz: TzOption = None,
    db: DbOption = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", metavar="FILE", help="Write to FILE instead of stdout."),
    ] = None,
    low_confidence_threshold: Annotated[
        float | None,
        typer.Option(
            "--low-confidence-threshold",
            min=0.0,
            max=1.0,
            metavar="X",
            help="Confidence below this is low. [default: the marts' own]",
        ),
    ] = None,
    workspace: Annotated[
        str | None,
        typer.Option(
            "--workspace",
            "-w",
            metavar="NAME",
            help="The workspace to report: its [[workspaces]] name or its id. "
            "[default: the only one]",
        ),
    ] = None,
    all_workspaces: Annotated[
        bool,
        typer.Option(
            "--all-workspaces",
            help='Every workspace rolled up into one summary (workspaceId "*").',
        ),
    ] = False,
) -> None:
    """Write the summary for a date range in exactly the shape of GET /v1/analytics/summary.

    A warehouse of several workspaces needs --workspace NAME (one of them) or
    --all-workspaces (all together).
    """
    from convo_analytics.export import (
        choose_summary,
        empty_range_warning,
        export_options,
        parse_day,
        workspace_summary,
    )

    settings = settings_from_context(ctx, {"warehouse.path": db})
    first, last = parse_day("--from", from_), parse_day("--to", to)
    options = export_options(settings, tz=tz, to_folder=False)
    zone, configured = options.zone, options.configured
    audit = auditor(settings)  # a log it could not write stops it now
    con = open_source(settings, db)
    try:
        source = source_workspaces(con, settings, configured)
        source.refuse_unnamed([workspace] if workspace else [], names_rows=False)
        configured = source.configured
        scope = choose_summary(con, workspace, all_workspaces, configured)
        body = workspace_summary(
            con,
            first,
            last,
            zone,
            workspace_id=scope.label,
            ids=scope.ids,
            low_confidence_threshold=low_confidence_threshold,
        )
        warn(empty_range_warning(con, first, last, zone, scope.ids))
    finally:
        con.close()
    data = orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n"
    what, days = command_line(ctx), len(body["daily"])
    if out is None:
        if audit is not None:  # recorded before it is handed out
            digest = {"sha256": sha256(data).hexdigest()}
            audit.record("export.summary", what=what, rows=days, workspace=scope.label,
                         detail=digest)  # fmt: skip
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".partial")
        tmp.write_bytes(data)
        tmp.replace(out)
        if audit is not None:  # the file is removed when its record cannot be written
            audit.record_files("export.summary", [out], what=what, rows=days,
                               workspace=scope.label)  # fmt: skip
        Console(stderr=True, highlight=False).print(f"summary {first}..{last} -> {out}")


@export_app.command("guardrails")
def export_guardrails_cmd(
    ctx: typer.Context,
    from_: FromOption,
    to: ToOption,
    fmt: Annotated[
        str,
        typer.Option(
            "--format", metavar="FORMAT", help="jsonl, csv or parquet.", case_sensitive=False
        ),
    ] = "jsonl",
    tz: TzOption = None,
    db: DbOption = None,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out-dir", metavar="DIR", help=f"Folder to write to. {default_of('export.dir')}"
        ),
    ] = None,
    redact: Annotated[
        bool,
        typer.Option(
            "--redact/--no-redact",
            help="Replace emails, card and phone numbers in excerpts (on by default; "
            "--no-redact exports personal data as received).",
        ),
    ] = True,
    workspaces: Annotated[
        list[str] | None,
        typer.Option(
            "--workspace",
            "-w",
            metavar="NAME",
            help="Only this workspace's incidents: a [[workspaces]] name or an id "
            "(repeatable). [default: every workspace]",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
) -> None:
    """Write the guardrail incident log of a date range for compliance review, with a manifest.

    Every row names its workspace (workspace_id, workspace_name); the manifest
    counts the rows of each.
    """
    from convo_analytics.export import (
        FORMATS,
        empty_range_warning,
        export_guardrails,
        export_options,
        find_workspace,
        parse_day,
        warehouse_workspaces,
    )

    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: choose jsonl, csv or parquet")
    settings = settings_from_context(ctx, {"warehouse.path": db, "export.dir": out_dir})
    first, last = parse_day("--from", from_), parse_day("--to", to)
    options = export_options(settings, tz=tz, fmt=fmt)
    zone, configured = options.zone, options.configured
    audit = auditor(settings)  # a log it could not write stops it now
    con = open_source(settings, db)
    try:
        source = source_workspaces(con, settings, configured)
        source.refuse_unnamed(workspaces, names_rows=True)
        configured = source.configured
        chosen = None
        if workspaces:
            known = warehouse_workspaces(con, configured)
            chosen = list(dict.fromkeys(find_workspace(known, w, configured) for w in workspaces))
        result = export_guardrails(
            con,
            first,
            last,
            options.folder,
            tz=zone,
            fmt=options.fmt,
            redact=redact,
            workspaces=chosen,
            configured=configured,
        )
        if not result.rows:
            ids = None if chosen is None else [w.workspace_id for w in chosen]
            warn(
                empty_range_warning(con, first, last, zone, ids)
                or f"no guardrail incident from {first} to {last} ({zone}): the log is empty"
            )
    finally:
        con.close()
    manifest = result.manifest
    if audit is not None:  # the manifest joins the chain
        manifest = audit.seal_manifest(
            "export.guardrails",
            result.manifest_file,
            files=[result.data_file],
            what=command_line(ctx),
            rows=result.rows,
            workspace=None if chosen is None else ",".join(w.name for w in chosen),
        )
    if as_json:
        sys.stdout.write(orjson.dumps(manifest).decode() + "\n")
    else:
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"{result.rows} incidents -> {result.data_file} (manifest: {result.manifest_file})"
            + ("" if redact else "  [NOT REDACTED]")
        )


@export_app.command("knowledge-gaps")
def export_knowledge_gaps_cmd(
    ctx: typer.Context,
    from_: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="DAY",
            help="First day, inclusive (YYYY-MM-DD). [default: 29 days before --to]",
        ),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            metavar="DAY",
            help="Last day, inclusive (YYYY-MM-DD). [default: the newest conversation's]",
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option("--format", metavar="FORMAT", help="csv or json.", case_sensitive=False),
    ] = "csv",
    tz: TzOption = None,
    db: DbOption = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="FILE",
            help="Write to FILE (with FILE.manifest.json beside it) instead of stdout.",
        ),
    ] = None,
    redact: Annotated[
        bool,
        typer.Option(
            "--redact/--no-redact",
            help="Replace emails, card and phone numbers in questions and answers (on by "
            "default; --no-redact exports them as received).",
        ),
    ] = True,
    workspaces: Annotated[
        list[str] | None,
        typer.Option(
            "--workspace",
            "-w",
            metavar="NAME",
            help="Only this workspace's topics: a [[workspaces]] name or an id (repeatable). "
            "[default: every workspace]",
        ),
    ] = None,
) -> None:
    """Write where the assistant fails, per topic, ranked by impact: the questions users
    asked, what it answered, the knowledge sources its answers used and the verdict
    (missing content, or content that does not answer).

    CSV: one row per topic of a workspace (its questions, answers and sources joined
    with new lines in one cell each); JSON: the whole report with the conversations
    behind each topic.
    """
    from convo_analytics.export import (
        GAP_FORMATS,
        default_gap_range,
        empty_range_warning,
        export_knowledge_gaps,
        export_options,
        find_workspace,
        parse_day,
        warehouse_workspaces,
        writable,
    )

    fmt = fmt.lower()
    if fmt not in GAP_FORMATS:
        raise UserError(f"--format {fmt!r}: choose csv or json")
    first = parse_day("--from", from_) if from_ is not None else None
    last = parse_day("--to", to) if to is not None else None
    settings = settings_from_context(ctx, {"warehouse.path": db})
    options = export_options(settings, tz=tz, to_folder=False)
    zone, configured = options.zone, options.configured
    if out is not None:
        writable(out)
    audit = auditor(settings)  # a log it could not write stops it now
    con = open_source(settings, db)
    try:
        source = source_workspaces(con, settings, configured)
        source.refuse_unnamed(workspaces, names_rows=True)
        configured = source.configured
        known = warehouse_workspaces(con, configured)
        chosen = None
        if workspaces:
            chosen = list(dict.fromkeys(find_workspace(known, w, configured) for w in workspaces))
        ids = None if chosen is None else [w.workspace_id for w in chosen]
        first, last = default_gap_range(con, zone, first, last, ids)
        result = export_knowledge_gaps(
            con,
            first,
            last,
            tz=zone,
            fmt=fmt,  # type: ignore[arg-type]
            redact=redact,
            workspaces=chosen,
            out=out,
            known=known,
        )
        if not result.topics:
            warn(
                empty_range_warning(con, first, last, zone, ids)
                or f"no failing answer from {first} to {last} ({zone}): the report is empty"
            )
    finally:
        con.close()
    what = command_line(ctx)
    named = None if chosen is None else ",".join(w.name for w in chosen)
    if out is None:
        if audit is not None:  # recorded before it is handed out
            digest = {"sha256": sha256(result.data).hexdigest()}
            audit.record("export.gaps", what=what, rows=result.topics, workspace=named,
                         detail=digest)  # fmt: skip
        sys.stdout.buffer.write(result.data)
        sys.stdout.flush()
    else:
        if audit is not None and result.manifest_file is not None:  # the manifest joins
            audit.seal_manifest("export.gaps", result.manifest_file, files=[out], what=what,
                                rows=result.topics, workspace=named)  # fmt: skip
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"knowledge gaps {first}..{last}: {result.topics} topics -> {out} "
            f"(manifest: {result.manifest_file})" + ("" if redact else "  [NOT REDACTED]")
        )


@export_app.command("person")
def export_person_cmd(
    ctx: typer.Context,
    workspace: PersonWorkspaceOption,
    external_user_id: ExternalUserIdOption = None,
    email: EmailOption = None,
    db: DbOption = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", metavar="FILE", help="Write to FILE (mode 0600) instead of stdout."),
    ] = None,
) -> None:
    """Write everything the warehouse holds about one person of one workspace as JSON
    (an access request): their conversations, messages, leads, webhook events, the
    other rows of their conversations, the marts' rows about them, and whether they
    were erased and are on the suppression list.

    Exit status 0, also when nothing is held (an empty result, and a line on stderr
    saying so); 2 for a usage error (no warehouse, an unknown workspace, not exactly
    one identifier) or while another process writes the warehouse.
    """
    from convo_analytics.audit import AuditError
    from convo_analytics.erasure import export_person
    from convo_analytics.export import writable

    kind, value = person_flags(external_user_id, email)
    settings = settings_from_context(ctx, {"warehouse.path": db})
    if out is not None:
        writable(out)
    audit = auditor(settings)  # a log it could not write stops it now
    result = export_person(settings, workspace, kind, value)
    data = orjson.dumps(result.document, option=orjson.OPT_INDENT_2) + b"\n"
    # the identifier is recorded as the audit log's keyed hash only: never in `what`
    # (nor the file's name, which may be made of it)
    what = shlex.join([*ctx.command_path.split(), "--workspace", workspace])
    what += f" --{kind.replace('_', '-')} ***" + (" --out FILE" if out is not None else "")
    named = result.document["workspace"]["name"]
    digest = {"sha256": sha256(data).hexdigest(), "to": "stdout" if out is None else "file"}

    def record() -> None:
        if audit is not None:  # recorded before it is handed out
            audit.record("export.person", what=what, rows=result.records, workspace=named,
                         subjects=(value,), detail=digest)  # fmt: skip

    if out is None:
        record()
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".partial")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # a .partial left by a killed export keeps its own mode
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            record()
        except AuditError:
            tmp.unlink(missing_ok=True)
            raise
        tmp.replace(out)
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"{result.records} records about one person of {named} -> {out}"
        )
    if result.nothing_held():
        sys.stderr.write(result.notice() + "\n")
        sys.stderr.flush()
