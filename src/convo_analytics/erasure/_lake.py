"""The Iceberg lake's part of ``convo erase`` (D-ERASURE): when the settings name a lake
that exists, the person leaves it (:func:`convo_analytics.lake.erase_from_lake`: the
workspace re-published from the erased warehouse, the snapshots holding its old files
expired at once, the files removed), and the readers' local copies of the lake
(``lake-<state>.duckdb`` in ``publish.dir``, D-LAKE-READERS), which hold it as it was,
are replaced by one made from the erased lake.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from convo_analytics.erasure._person import Found

if TYPE_CHECKING:
    from convo_analytics.config import Settings
    from convo_analytics.lake import LakeConfig, LakePerson

__all__ = ["dry_lake", "erase_lake", "lake_of", "lake_rows", "lake_store"]


def lake_of(settings: Settings) -> LakeConfig | None:
    """The lake to erase from: the one the ``lake.*`` settings name, if it exists (an
    SQLite catalog whose file is there, or any other catalog, which must be reachable:
    LakeUnavailable otherwise, before anything is changed)."""
    from convo_analytics.lake import LakeConfig, lake_present

    config = LakeConfig.from_settings(settings)
    if not lake_present(config):
        return None
    config.open_catalog()  # unreachable: said now, not after the warehouse lost the person
    return config


def _person(found: Found, texts: list[str]) -> LakePerson:
    from convo_analytics.lake import LakePerson

    return LakePerson(
        conversations=frozenset(found.conversations),
        leads=frozenset(found.leads),
        events=frozenset(found.events),
        forms=frozenset(found.forms),
        texts=frozenset(texts),
    )


def lake_rows(
    config: LakeConfig, workspace_id: str, found: Found, texts: list[str]
) -> dict[str, int]:
    """The person's rows in each lake table now (counted before the warehouse loses them:
    a re-run after a kill no longer knows their ids)."""
    from convo_analytics.lake import person_rows

    return person_rows(config, workspace_id, _person(found, texts))


def lake_store(config: LakeConfig, rows: dict[str, int], before: dict[str, Any]) -> dict[str, Any]:
    """The certificate's ``lake`` store as it starts: where, and the person's rows per table
    (the most any attempt counted: ``before`` is the store an earlier one logged)."""
    earlier = {t: int(v.get("rows", 0)) for t, v in before.get("tables", {}).items()}
    most = {t: max(earlier.get(t, 0), rows.get(t, 0)) for t in sorted({*earlier, *rows})}
    return {
        "catalog": config.display_uri,
        "namespace": config.namespace,
        "tables": {t: {"rows": n} for t, n in most.items() if n},
    }


def dry_lake(
    config: LakeConfig, workspace_id: str, found: Found, texts: list[str], folder: Path | None
) -> dict[str, Any]:
    """What an erasure would remove from the lake: the person's rows per table now (and
    every older snapshot and file holding the workspace's replaced rows), and the readers'
    copies."""
    store = lake_store(config, lake_rows(config, workspace_id, found, texts), {})
    store["copies"] = {"files": [p.name for p in _copies(folder)], "action": "all replaced by one"}
    return store


def erase_lake(
    con: duckdb.DuckDBPyConnection,
    config: LakeConfig,
    workspace_id: str,
    found: Found,
    texts: list[str],
    held: dict[str, int],
    store: dict[str, Any],
    folder: Path | None,
) -> dict[str, Any]:
    """Erase the person from the lake (``held``: their rows per table, counted before the
    warehouse lost them); the certificate's ``lake`` store, completed from ``store``."""
    from convo_analytics.lake import erase_from_lake

    done = erase_from_lake(con, config, workspace_id, _person(found, texts),
                           held=held).to_json()  # fmt: skip
    tables: dict[str, dict[str, int]] = {t: dict(v) for t, v in store.get("tables", {}).items()}
    for name, what in done.pop("tables").items():
        rows = tables.get(name, {}).get("rows", 0)
        tables[name] = {**what, "rows": max(rows, what["rows"])}
    store = {**store, "tables": dict(sorted(tables.items())), **done}
    store["copies"] = _replace_copies(config, folder)
    return store


def _copies(folder: Path | None) -> list[Path]:
    """The readers' copies of the lake in ``publish.dir`` (and their notices, half-made
    ones included)."""
    from convo_analytics.publish import LAKE_PREFIX

    if folder is None or not folder.is_dir():
        return []
    return sorted(p for p in folder.glob(f"{LAKE_PREFIX}*") if p.is_file())


def _replace_copies(config: LakeConfig, folder: Path | None) -> dict[str, Any]:
    """Where readers keep copies of the lake, one made now from the erased lake, and every
    other removed (they hold the person)."""
    from convo_analytics.lake import lake_state, materialise_lake
    from convo_analytics.publish import LAKE_PREFIX

    old = _copies(folder)
    if folder is None or not old:
        return {"removed": []}
    path = folder / f"{LAKE_PREFIX}{lake_state(config)}.duckdb"
    if not path.exists():  # (one of this state was made from the erased lake)
        materialise_lake(config, path)
    keep = {path, path.with_name(f"{path.name}.json")}
    gone = [p for p in old if p not in keep]
    for p in gone:
        p.unlink(missing_ok=True)
    return {"made": path.name, "removed": [p.name for p in gone]}
