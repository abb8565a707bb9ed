"""Where notebooks live: starters in the repository, saved ones in the project's folder.

Starter notebooks ship beside the app (``dashboards/notebooks/``); notebooks
saved from Explore go to ``dashboard.notebooks_dir`` (``data/notebooks/``) and
win over a starter of the same name. The app and headless runs
(``convo notebook run``, ``[[reports]]``) find a notebook the same way. A
notebook's name is its file's stem, restricted to lower-case letters, digits,
``-`` and ``_``, so a name from a URL or a command line cannot point outside
those folders.
"""

from __future__ import annotations

import os
from pathlib import Path

from convo_analytics.notebooks._format import (
    Notebook,
    notebook_name,
    parse_notebook,
    render_notebook,
)

__all__ = ["STARTERS_DIR", "list_notebooks", "load_notebook", "save_notebook"]

ROOT = Path(__file__).resolve().parents[3]
#: The starter notebooks, in the repository next to the app.
STARTERS_DIR = ROOT / "dashboards" / "notebooks"


def _folders(saved_dir: Path) -> list[Path]:
    return [saved_dir, STARTERS_DIR]  # saved ones first: they win over a starter


def list_notebooks(saved_dir: Path) -> dict[str, str]:
    """Every notebook by name, with its title (saved ones over starters of the same name)."""
    found: dict[str, str] = {}
    for folder in _folders(saved_dir):
        for path in sorted(folder.glob("*.sql")) if folder.is_dir() else ():
            name = notebook_name(path.stem)
            if name and name not in found:
                found[name] = parse_notebook(
                    path.read_text(encoding="utf-8", errors="replace")
                ).title
    return found


def load_notebook(saved_dir: Path, name: str) -> Notebook | None:
    """The notebook called ``name`` (saved, else starter), or None."""
    if notebook_name(name) is None:
        return None
    for folder in _folders(saved_dir):
        path = folder / f"{name}.sql"
        if path.is_file():
            return parse_notebook(path.read_text(encoding="utf-8", errors="replace"))
    return None


def save_notebook(saved_dir: Path, name: str, notebook: Notebook) -> Path:
    """Write the notebook as ``<saved_dir>/<name>.sql`` (whole, by a rename)."""
    if notebook_name(name) is None:
        raise ValueError(
            f"{name!r} is not a notebook name: use lower-case letters, digits, - and _"
        )
    saved_dir.mkdir(parents=True, exist_ok=True)
    path = saved_dir / f"{name}.sql"
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(render_notebook(notebook), encoding="utf-8")
    os.replace(partial, path)
    return path
