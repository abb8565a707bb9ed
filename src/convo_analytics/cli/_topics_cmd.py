"""``convo topics``: what customers ask, as topics discovered from what they say."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from convo_analytics.cli._options import PLAIN_HELP
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
