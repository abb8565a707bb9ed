"""The stores copied out of the warehouse, in one step of an erasure: exports, reports,
and the alert deliveries (D-ERASURE).

Each is rewritten without the person (``_files``, ``_mentions``); what changed goes into
the certificate under ``exports``, ``reports`` and ``alert deliveries``. A file's path
that names the person is certified as ``[a file named after the person]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from convo_analytics.audit import Auditor
from convo_analytics.config import Settings
from convo_analytics.erasure._files import FileChange, erase_files
from convo_analytics.erasure._mentions import erase_deliveries
from convo_analytics.erasure._needles import DROP, Needles

__all__ = ["copied_out", "merge_copied"]

_NAMED = "[a file named after the person]"


def _entry(change: FileChange, needles: Needles) -> dict[str, Any]:
    path = _NAMED if needles.text(Path(change.path).name) else change.path
    return {"path": path, "action": change.action, "rows": change.rows,
            "sha256": change.sha256}  # fmt: skip


def _other_workspace(root: Path, own: str, names: set[str]) -> Any:
    """A report of another workspace (``REPORT/WORKSPACE/PERIOD/``): left as it is."""

    def skip(path: Path) -> bool:
        parts = path.relative_to(root).parts
        return len(parts) > 2 and parts[1] in names and parts[1] != own

    return skip


def copied_out(
    settings: Settings,
    ws_name: str,
    needles: Needles,
    audit: Auditor | None,
    erasure_id: str,
    *,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Exports, reports and alert deliveries without the person; the certificate's
    entries for them."""
    from datetime import UTC, datetime

    at = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    stores: dict[str, Any] = {}
    others = {w.name for w in settings.workspaces}

    def seal(manifest: Path, files: list[Path], rows: int) -> None:
        if audit is not None:
            audit.seal_manifest("export.erasure", manifest, files=files, rows=rows,
                                what=f"convo erase {erasure_id}: rows of a person removed",
                                workspace=ws_name, detail={"erasureId": erasure_id})  # fmt: skip

    def record(files: list[Path]) -> None:
        if audit is not None:
            audit.record_files("report.erasure", files, workspace=ws_name,
                               what=f"convo erase {erasure_id}: rows of a person removed",
                               detail={"erasureId": erasure_id})  # fmt: skip

    for store, key in (("exports", "export.dir"), ("reports", "reporting.out_dir")):
        root = settings.get_path(key)
        if root is None:
            continue
        skip = _other_workspace(root.resolve(), ws_name, others) if store == "reports" else None
        changes = erase_files([root], needles, erasure_id=erasure_id, at=at, seal=seal,
                              record=record, dry_run=dry_run, skip=skip)  # fmt: skip
        files = [_entry(c, needles) for c in changes]
        stores[store] = {"files": files, "rows": sum(f["rows"] for f in files)}
    log = settings.get_path("notify.delivery_log")
    if dry_run:
        stores["alert deliveries"] = {"lines": _would_change(log, needles)}
    else:
        stores["alert deliveries"] = {"lines": erase_deliveries(log, needles)}
    return stores


def _would_change(log: Path | None, needles: Needles) -> int:
    import orjson

    if log is None or not log.exists() or needles.empty():
        return 0
    count = 0
    for line in log.read_bytes().splitlines():
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        told = row.get("notification") if isinstance(row, dict) else None
        if isinstance(told, dict):
            kept = needles.prune(told)
            count += kept is DROP or kept != told
    return count


def merge_copied(before: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, Any]:
    """What an earlier attempt of the same erasure changed, with what this one did."""
    out: dict[str, Any] = {}
    for store, entry in now.items():
        earlier = before.get(store, {})
        if "files" in entry:
            files = {f["path"]: f for f in earlier.get("files", [])}
            for f in entry["files"]:
                old = files.get(f["path"], {})
                files[f["path"]] = {**f, "rows": int(old.get("rows", 0)) + int(f["rows"])}
            listed = sorted(files.values(), key=lambda f: f["path"])
            out[store] = {"files": listed, "rows": sum(f["rows"] for f in listed)}
        else:
            out[store] = {"lines": int(earlier.get("lines", 0)) + int(entry.get("lines", 0))}
    return out
