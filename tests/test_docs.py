"""The docs stay true: every warehouse table and column is described in docs/warehouse.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from convo_analytics.warehouse import ALL_TABLES, Table

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _section(text: str, heading: str) -> str:
    m = re.search(rf"^### {re.escape(heading)}\n(.*?)(?=^#{{2,3}} |\Z)", text, re.M | re.S)
    return m.group(1) if m else ""


@pytest.mark.parametrize("table", ALL_TABLES, ids=lambda t: t.name)
def test_every_table_and_column_is_documented(table: Table) -> None:
    section = _section((DOCS / "warehouse.md").read_text(encoding="utf-8"), table.name)
    assert section, f"docs/warehouse.md needs a '### {table.name}' section"
    for column in table.columns:
        assert f"| `{column.name}` |" in section, f"{table.name}.{column.name} is not described"


def test_the_architecture_map_names_every_stage_folder() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    src = Path(__file__).resolve().parent.parent / "src" / "convo_analytics"
    for folder in sorted(
        p.name for p in src.iterdir() if p.is_dir() and not p.name.startswith("_")
    ):
        assert f"src/convo_analytics/{folder}/" in text, f"architecture.md misses {folder}/"


def test_every_definition_version_is_documented() -> None:
    """docs/warehouse.md lists each definition with the version that last changed it."""
    from convo_analytics.transform import DEFINITIONS

    section = re.search(
        r"^## Definition versions\n(.*?)(?=^## )",
        (DOCS / "warehouse.md").read_text(encoding="utf-8"),
        re.M | re.S,
    )
    assert section, "docs/warehouse.md needs a '## Definition versions' section"
    rows = dict(re.findall(r"^\| (.+?) \| (\d+) \|$", section.group(1), re.M))
    assert rows == {name: str(version) for name, version in DEFINITIONS.items()}
