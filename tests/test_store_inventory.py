"""docs/stores.md names every module that writes data (issue 30, D-ERASURE): a writer added
without its line there (where it writes, personal data, what an erasure does) fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "src" / "convo_analytics"

#: Primitives that write a file, a database or the lake.
WRITES = re.compile(
    r"""
      \.write_(?:bytes|text)\(
    | \bopen\([^)\n]*["'](?:w|a|x)b?\+?["']
    | \.open\(\s*["'](?:w|a|x)b?\+?["']
    | os\.open\([^)\n]*O_(?:WRONLY|RDWR|CREAT)
    | os\.replace\(
    | shutil\.(?:copyfile|copytree|copy2?|move)\(
    | os\.fdopen\([^)\n]*["'](?:w|a)
    | duckdb\.connect\(\s*str\([^)\n]*\)\s*(?:,\s*read_only=(?!True)[^)\n]*)?\)
    | \.overwrite\(
    | create_table_if_not_exists\(
    | gzip\.open\([^)\n]*["'](?:w|a)b
    | GzipFile\([^)]*mode=["']wb
    | logging\.FileHandler\(
    """,
    re.VERBOSE,
)


def writers() -> list[str]:
    """Modules (relative to the package, or ``pipelines/...``) that write."""
    found = []
    for base, prefix in ((PACKAGE, ""), (ROOT / "pipelines", "pipelines/")):
        for path in sorted(base.rglob("*.py")):
            if WRITES.search(path.read_text(encoding="utf-8")):
                found.append(prefix + path.relative_to(base).as_posix())
    return found


def test_the_scan_finds_the_known_writers() -> None:
    """The scan is not blind: the warehouse, the archive writer and the snapshot are found,
    and a module that only reads is not."""
    found = writers()
    for known in ("warehouse/_connection.py", "webhooks/_archive_writer.py",
                  "publish/_snapshot.py", "lake/_commit.py", "audit/_log.py"):  # fmt: skip
        assert known in found
    assert "publish/_reader.py" not in found
    assert WRITES.search("con = duckdb.connect(str(path), read_only=read_only)")
    assert not WRITES.search("con = duckdb.connect(str(path), read_only=True)")


@pytest.mark.parametrize("module", writers())
def test_every_writer_is_in_the_store_inventory(module: str) -> None:
    inventory = (ROOT / "docs" / "stores.md").read_text(encoding="utf-8")
    assert f"`{module}`" in inventory, (
        f"{module} writes data: add it to docs/stores.md (where it writes, whether it can "
        "hold personal data, what `convo erase` does there, how long it is kept)"
    )
