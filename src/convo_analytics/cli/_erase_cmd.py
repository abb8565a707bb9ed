"""``convo erase``: one person removed from every store the project writes (issue 30,
decision D-ERASURE); the package does it, this parses the flags and shows the certificate."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._options import DbOption
from convo_analytics.errors import UserError

__all__ = ["erase"]


#: The flags naming a person, shared by `convo erase` and `convo export person`.
PersonWorkspaceOption = Annotated[
    str,
    typer.Option("--workspace", "-w", metavar="NAME", help="The person's workspace (name or id)."),
]
ExternalUserIdOption = Annotated[
    str | None,
    typer.Option("--external-user-id", metavar="ID", help="The person's externalUserId."),
]
EmailOption = Annotated[
    str | None, typer.Option("--email", metavar="ADDRESS", help="The person's email address.")
]


def person_flags(external_user_id: str | None, email: str | None) -> tuple[str, str]:
    """(kind, value) from the two flags, exactly one of which names the person."""
    if (external_user_id is None) == (email is None):
        raise UserError(
            "name the person with exactly one of --external-user-id ID or --email ADDRESS"
        )
    if external_user_id is not None:
        return "external_user_id", external_user_id
    assert email is not None
    return "email", email


def erase(
    ctx: typer.Context,
    workspace: PersonWorkspaceOption,
    external_user_id: ExternalUserIdOption = None,
    email: EmailOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only say what would go; change nothing.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the erasure certificate as JSON on stdout.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Erase one person of one workspace: their conversations, messages, leads and
    events leave the warehouse, the marts, the published snapshots and, when the
    lake.* settings name one, the Iceberg lake (its old snapshots and files too); they
    join the suppression list extract and ingest honour; a certificate (naming them only
    by a salted hash) goes to erasure_log and, with --json, to stdout.

    Exit status 0 when erased (or, with --dry-run, listed); 2 for a usage error (no
    warehouse, an unknown workspace, not exactly one identifier, a lake that cannot be
    reached); 75 when another writer holds the warehouse. Safe to run again after a
    kill: it completes the erasure it started.
    """
    kind, value = person_flags(external_user_id, email)
    settings = settings_from_context(ctx, {"warehouse.path": db})
    from convo_analytics.erasure import erase_person

    result = erase_person(settings, workspace, kind, value, dry_run=dry_run)
    cert = result.certificate
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(cert, option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.flush()
        return
    out = Console(highlight=False, soft_wrap=True, markup=False)
    found = cert["found"]
    head = "would erase" if result.dry_run else "erased"
    out.print(
        f"{head} in {cert['workspace']}: {found['conversations']} conversations, "
        f"{found['leads']} leads, {found['events']} events (person {cert['subject'][:12]}...)"
    )
    for store, what in cert.get("stores", {}).items():
        out.print(f"  {store}: {_describe(what)}")
    if not result.dry_run:
        where = Path(cert["stores"]["warehouse"]["path"]).name
        out.print(f"certificate {cert['erasureId']} in erasure_log ({where})")


def _describe(what: object) -> str:
    if isinstance(what, dict) and "path" in what and "action" in what:  # a file rewritten
        return f"{Path(str(what['path'])).name} ({what['action']}, {what.get('rows', 0)} rows)"
    if isinstance(what, dict):
        return ", ".join(f"{k} {_describe(v)}" for k, v in what.items()) or "nothing"
    if isinstance(what, list):
        return ", ".join(_describe(x) for x in what) or "none"
    return str(what)
