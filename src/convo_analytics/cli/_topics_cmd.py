"""``convo topics``: what customers ask, as topics discovered from what they say."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._options import PLAIN_HELP, DbOption
from convo_analytics.cli._transform_cmd import open_existing
from convo_analytics.errors import UserError

__all__ = ["topics_app"]

topics_app = typer.Typer(
    rich_markup_mode=PLAIN_HELP,
    name="topics",
    help="Discover what customers ask: topics of what they say, offline.",
    no_args_is_help=True,
)


@topics_app.command("discover")
def discover(
    input_path: Annotated[
        Path,
        typer.Option("--input", metavar="FILE", help="JSONL or CSV file, one record a text."),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            metavar="OUT",
            help='Where each record\'s topic goes, a JSON line each ("-": standard output).',
        ),
    ],
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format", metavar="FORMAT", help="jsonl or csv (default: the file's suffix)."
        ),
    ] = None,
    text_field: Annotated[
        str,
        typer.Option(
            "--text-field", metavar="FIELD", help="Field (or column) with the text; a.b nests."
        ),
    ] = "text",
    id_field: Annotated[
        str | None,
        typer.Option(
            "--id-field",
            metavar="FIELD",
            help="Field with each record's id (default: id if present, else the record's number).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the topics as one JSON object.")
    ] = False,
    seed: Annotated[
        int, typer.Option("--seed", metavar="N", help="Same seed, same topics.", min=0)
    ] = 0,
) -> None:
    """Discover the topics of any text file, with the code the nightly run uses.

    Writes one line per input record, {"id", "topic_id", "topic_label"}, in input order
    (topic 0 is "other": texts that fit no topic). Needs no warehouse and no configuration;
    runs offline (the embedding model ships inside a package).
    """
    from convo_analytics.topics import discover_file

    to_stdout = str(out) == "-"
    if to_stdout and as_json:
        raise UserError("--json and --out - both write to standard output; give --out a file")
    summary = discover_file(
        input_path,
        None if to_stdout else out,
        fmt=fmt,
        text_field=text_field,
        id_field=id_field,
        seed=seed,
    )
    if as_json:
        sys.stdout.write(orjson.dumps(summary).decode() + "\n")
        return
    console = Console(stderr=to_stdout, highlight=False, soft_wrap=True)
    table = Table("topic", "label", "size", "example", title=None)
    for topic in summary["topics"]:
        example = topic["examples"][0] if topic["examples"] else ""
        # user text shown as text: a "[b]" in a message is not markup
        table.add_row(str(topic["id"]), Text(topic["label"]), f"{topic['size']:,}", Text(example))
    console.print(table, markup=False)
    console.print(
        f"{summary['records']:,} records, {len(summary['topics'])} topics -> {summary['out']}",
        markup=False,
    )


WorkspaceOption = Annotated[
    str | None,
    typer.Option(
        "--workspace",
        metavar="NAME",
        help="Workspace id or configured name (default: the only one with topics).",
    ),
]
TopicArgument = Annotated[int, typer.Argument(metavar="TOPIC", hidden=True)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


def _curate(ctx: typer.Context, db: Path | None, curation: Any, as_json: bool) -> None:
    """Keep one curation (checked against the warehouse) and say when it takes effect."""
    from convo_analytics.topics import curate

    settings = settings_from_context(ctx, {"warehouse.path": db})
    con = open_existing(settings, read_only=True)
    try:
        kept = curate(con, settings.topics.curations_file, curation)
    finally:
        con.close()
    if as_json:
        sys.stdout.write(orjson.dumps(kept.as_json()).decode() + "\n")
        return
    Console(stderr=True, highlight=False, soft_wrap=True).print(
        f"{kept.action} of topic {kept.topic_id} in {kept.workspace_id} kept "
        f"(curation {kept.sequence}); `convo topics list` shows it now, the marts at the "
        "next transform",
        markup=False,
    )


@topics_app.command("list")
def list_topics(
    ctx: typer.Context,
    workspace: WorkspaceOption = None,
    db: DbOption = None,
    retired: Annotated[bool, typer.Option("--retired", help="Include retired topics.")] = False,
    as_json: JsonOption = False,
) -> None:
    """List a workspace's topics, largest first, with curations applied."""
    from convo_analytics.topics import resolve_workspace, topic_catalog

    settings = settings_from_context(ctx, {"warehouse.path": db})
    con = open_existing(settings, read_only=True)
    try:
        ws = resolve_workspace(con, workspace)
        rows = [
            r
            for r in topic_catalog(con, ws, settings.topics.curations_file)
            if retired or not r["retired"]
        ]
    finally:
        con.close()
    if as_json:
        sys.stdout.write(orjson.dumps({"workspace_id": ws, "topics": rows}).decode() + "\n")
        return
    table = Table("topic", "label", "conversations", "language", "notes", "example")
    for r in rows:
        notes = []
        if r["effective_topic_id"] != r["topic_id"]:
            notes.append(f"merged into {r['effective_topic_id']}")
        if r["pinned"]:
            notes.append("pinned")
        if r["split_from"] is not None:
            notes.append(f"split from {r['split_from']}")
        if r["retired"]:
            notes.append("retired")
        if r["pending"]:
            notes.append("pending transform")
        example = (r["examples"] or [""])[0]
        table.add_row(
            str(r["topic_id"]),
            Text(r["label"] or ""),
            f"{r['conversations']:,}",
            Text(r["language"] or ""),
            ", ".join(notes),
            Text(example),
        )
    Console(highlight=False, soft_wrap=True).print(table, markup=False)


@topics_app.command("rename")
def rename(
    ctx: typer.Context,
    topic: TopicArgument,
    name: Annotated[str, typer.Argument(metavar="NAME", hidden=True)],
    workspace: WorkspaceOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Rename topic TOPIC (its id, see list) to NAME; kept across rediscoveries."""
    from convo_analytics.topics import Curation

    _curate(ctx, db, Curation(workspace or "", "rename", topic, label=name), as_json)


@topics_app.command("merge")
def merge(
    ctx: typer.Context,
    topic: TopicArgument,
    into: Annotated[
        int, typer.Option("--into", metavar="TOPIC", help="The topic it counts under.", min=0)
    ],
    workspace: WorkspaceOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Merge topic TOPIC (its id, see list) into another: its conversations count there."""
    from convo_analytics.topics import Curation

    _curate(ctx, db, Curation(workspace or "", "merge", topic, target_topic_id=into), as_json)


@topics_app.command("split")
def split(
    ctx: typer.Context,
    topic: TopicArgument,
    matching: Annotated[
        str,
        typer.Option(
            "--matching", metavar="PHRASE", help="Word or phrase (whole words, any case)."
        ),
    ],
    name: Annotated[str, typer.Option("--name", metavar="NAME", help="The new topic's name.")],
    workspace: WorkspaceOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Split off topic TOPIC's conversations whose first message contains a phrase."""
    from convo_analytics.topics import Curation

    _curate(
        ctx, db, Curation(workspace or "", "split", topic, label=name, pattern=matching), as_json
    )


def _one_topic_command(action: str, doc: str) -> None:
    """A curation naming one topic and nothing else (unmerge, pin, unpin)."""

    def command(
        ctx: typer.Context,
        topic: TopicArgument,
        workspace: WorkspaceOption = None,
        db: DbOption = None,
        as_json: JsonOption = False,
    ) -> None:
        from convo_analytics.topics import Curation

        _curate(ctx, db, Curation(workspace or "", action, topic), as_json)  # type: ignore[arg-type]

    command.__doc__ = doc
    topics_app.command(action)(command)


_one_topic_command("unmerge", "Undo the merge of topic TOPIC (its id): it counts on its own again.")
_one_topic_command(
    "pin", "Pin topic TOPIC (its id): rediscovery keeps it and its conversations as they are."
)
_one_topic_command("unpin", "Unpin topic TOPIC (its id).")


@topics_app.command("rediscover")
def rediscover(
    ctx: typer.Context,
    workspace: Annotated[
        list[str] | None,
        typer.Option(
            "--workspace",
            metavar="NAME",
            help="Workspace id or configured name (repeatable; default: every one).",
        ),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cluster again and map the old topics to the new ones by overlap, then bring the
    marts up to date (a transform); ids, names and merges of matched topics survive."""
    from convo_analytics.pipeline import warehouse_writer
    from convo_analytics.topics import resolve_workspace
    from convo_analytics.transform import run_transform, transform_config
    from convo_analytics.warehouse import require_existing

    settings = settings_from_context(ctx, {"warehouse.path": db})
    require_existing(settings.require_path("warehouse.path"))
    wanted: tuple[str, ...] = ("*",)
    if workspace:  # named ones checked before the writers' lock is taken
        con = open_existing(settings, read_only=True)
        try:
            wanted = tuple(resolve_workspace(con, w) for w in workspace)
        finally:
            con.close()
    with warehouse_writer(settings, "convo topics rediscover"):
        con = open_existing(settings, read_only=False)
        try:
            result = run_transform(con, transform_config(settings, rediscover=wanted))
        finally:
            con.close()
    discovered = result.topics.discovered
    if as_json:
        payload = {"transform_run_id": result.transform_run_id, "workspaces": discovered}
        sys.stdout.write(orjson.dumps(payload).decode() + "\n")
        return
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for ws, d in sorted(discovered.items()):
        err.print(
            f"{ws}: {d['topics']} topics ({d['kept']} kept their ids, {d['new']} new, "
            f"{d['retired']} retired); {d['moved']} of {d['conversations']} conversations "
            "moved",
            markup=False,
        )
    if not discovered:
        err.print("no workspace has conversations to discover topics in", markup=False)


@topics_app.command("curations")
def curations(
    ctx: typer.Context,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the kept curations (the app-state store), oldest first."""
    from convo_analytics.topics import read_curations

    settings = settings_from_context(ctx, {})
    path = settings.topics.curations_file
    found = read_curations(path, workspace) if path is not None else []
    if as_json:
        sys.stdout.write(orjson.dumps([c.as_json() for c in found]).decode() + "\n")
        return
    table = Table("#", "workspace", "action", "topic", "into", "name", "matching", "by", "at")
    for c in found:
        table.add_row(
            str(c.sequence), Text(c.workspace_id), c.action, str(c.topic_id),
            "" if c.target_topic_id is None else str(c.target_topic_id), Text(c.label or ""),
            Text(c.pattern or ""), c.created_by, c.created_at,
        )  # fmt: skip
    Console(highlight=False, soft_wrap=True).print(table, markup=False)
