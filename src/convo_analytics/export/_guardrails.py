"""The guardrail incident log for compliance reviewers: a data file and its manifest.

The manifest lets a reviewer prove later what they were given: the row
count and SHA-256 of each file, the query and its parameters, when it was
made and by which versions. Files are written under a temporary name and
renamed, so a file with a manifest is always complete.
"""

from __future__ import annotations

import hashlib
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

import duckdb
import orjson
import polars as pl

from convo_analytics import __version__
from convo_analytics.config import WorkspaceConfig
from convo_analytics.export._summary import check_range
from convo_analytics.export._workspaces import (
    WarehouseWorkspace,
    file_label,
    warehouse_workspaces,
)
from convo_analytics.transform import INCIDENT_COLUMNS, INCIDENT_QUERY, incidents, latest_transform

Format = Literal["jsonl", "csv", "parquet"]
FORMATS: tuple[str, ...] = ("jsonl", "csv", "parquet")


@dataclass(frozen=True, slots=True)
class GuardrailExport:
    data_file: Path
    manifest_file: Path
    rows: int
    manifest: dict[str, Any]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write(frame: pl.DataFrame, path: Path, fmt: str) -> None:
    tmp = path.with_name(path.name + ".partial")
    if fmt == "parquet":
        frame.write_parquet(tmp)
    else:
        text = frame.with_columns(
            pl.col(c).dt.to_string("%Y-%m-%dT%H:%M:%S%.3fZ")
            for c, t in frame.schema.items()
            if isinstance(t, pl.Datetime)
        )
        if fmt == "csv":
            text.write_csv(tmp)
        else:
            text.write_ndjson(tmp)
    with tmp.open("rb") as f:
        os.fsync(f.fileno())
    tmp.replace(path)


def _versions() -> dict[str, str]:
    return {
        "convo_analytics": __version__,
        "duckdb": duckdb.__version__,
        "polars": pl.__version__,
        "python": platform.python_version(),
    }


def _per_workspace(
    frame: pl.DataFrame, listed: Sequence[WarehouseWorkspace]
) -> list[dict[str, Any]]:
    """Rows per workspace: each listed one (zero included), then any other id in the rows
    (a conversation the service named no workspace of: ``null``)."""
    counts = dict(frame.group_by("workspace_id").len().iter_rows()) if frame.height else {}
    out = [
        {"name": w.name, "workspaceId": w.workspace_id, "rows": int(counts.pop(w.workspace_id, 0))}
        for w in listed
    ]
    out += [{"name": None, "workspaceId": k, "rows": int(n)} for k, n in counts.items()]
    return out


def export_guardrails(
    con: duckdb.DuckDBPyConnection,
    first: date,
    last: date,
    out_dir: Path,
    *,
    tz: str = "UTC",
    fmt: Format = "jsonl",
    redact: bool = True,
    workspaces: Sequence[WarehouseWorkspace] | None = None,
    configured: Sequence[WorkspaceConfig] = (),
) -> GuardrailExport:
    """Write the incidents of ``first``..``last`` and a manifest next to them.

    Every row names its workspace (``workspace_id`` and ``workspace_name``);
    ``workspaces`` narrows the log to those (their names join the file's name),
    ``None`` keeps every incident.
    """
    check_range(first, last, tz)
    known = warehouse_workspaces(con, configured)
    ids = None if workspaces is None else [w.workspace_id for w in workspaces]
    frame = incidents(con, first, last, tz, redact=redact, workspaces=ids, with_workspace=True)
    names = {w.workspace_id: w.name for w in (*known, *(workspaces or ()))}
    name = (
        pl.col("workspace_id")
        .cast(pl.String)
        .replace_strict(names, default=None, return_dtype=pl.String)
    )
    frame = frame.with_columns(workspace_name=name).select(
        "workspace_id", "workspace_name", *INCIDENT_COLUMNS
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    narrowed = "" if workspaces is None else "_" + file_label(workspaces)
    stem = f"guardrail-incidents{narrowed}_{first}_{last}" + ("" if redact else "_unredacted")
    data_file = out_dir / f"{stem}.{fmt}"
    _write(frame, data_file, fmt)
    run = latest_transform(con)
    manifest: dict[str, Any] = {
        "kind": "guardrail-incidents",
        "files": [
            {
                "path": data_file.name,
                "format": fmt,
                "rows": frame.height,
                "bytes": data_file.stat().st_size,
                "sha256": _sha256(data_file),
            }
        ],
        "rowCount": frame.height,
        "workspaces": _per_workspace(frame, workspaces if workspaces is not None else known),
        "columns": frame.columns,
        "query": INCIDENT_QUERY,
        "parameters": {
            "from": first.isoformat(),
            "to": last.isoformat(),
            "timezone": tz,
            "redacted": redact,
            "format": fmt,
            "workspaces": None if workspaces is None else [w.name for w in workspaces],
        },
        "redaction": (
            "emails, card numbers and phone numbers in excerpts replaced by [EMAIL], [CARD], "
            "[PHONE]"
            if redact
            else "none: excerpts as the service sent them (exported with --no-redact)"
        ),
        "transformRunId": run.transform_run_id if run else None,
        "generatedAt": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "versions": _versions(),
    }
    manifest_file = data_file.with_name(data_file.name + ".manifest.json")
    tmp = manifest_file.with_name(manifest_file.name + ".partial")
    tmp.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
    tmp.replace(manifest_file)
    return GuardrailExport(data_file, manifest_file, frame.height, manifest)
