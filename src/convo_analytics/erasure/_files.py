"""The exports and reports an erasure rewrites: files copied out of the warehouse.

``export.dir`` (guardrail logs, knowledge-gap reports, access requests written there)
and ``reporting.out_dir`` (each report's HTML and CSVs) hold rows of the warehouse in
files. Every file under them is read in its own shape (CSV, JSON lines, JSON, Parquet,
HTML, other text) and written again without the person (``_needles``: their rows out,
their mentions ``[erased]``), whole and atomically (a temporary file, synced, renamed).
A file that still names them after that (a report's chart label, a file of another
shape) is removed; so is a file whose name names them.

An export's manifest (``*.manifest.json``) says each of its files' rows, bytes and
SHA-256, and is sealed into the audit chain: after its file changed the manifest is
updated (with an ``erasures`` entry saying how many rows went) and sealed again, as an
``export.erasure`` record; a report's rewritten files are recorded by their SHA-256 in
a ``report.erasure`` record. Before anything of a folder changes, the manifests it will
touch are listed in the folder's ``.convo-erasure-pending.json``: a kill between a file
and its manifest leaves that list, and the next erasure (any person) seals them first.
"""

from __future__ import annotations

import csv
import gzip
import html
import io
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from convo_analytics.audit import file_sha256
from convo_analytics.erasure._needles import DROP, ERASED, Needles

__all__ = ["PENDING", "FileChange", "erase_files", "file_entries"]

#: A folder's list of manifests to seal again (a kill between a file and its manifest).
PENDING = ".convo-erasure-pending.json"
_MANIFEST = ".manifest.json"
_PARTIAL = ".erasing"
#: Files larger than this are not read whole as text (a large binary: checked by bytes).
_TEXT_LIMIT = 512 << 20
#: Shapes of rows: a row of another workspace may still hold the same identifier (another
#: person), so what is left after the rewrite is not searched again.
_ROWED = (".csv", ".jsonl", ".ndjson", ".json")
_ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
_CELL = re.compile(r"<t[dh][^>]*>(.*?)</t[dh]>", re.S)

#: seal(manifest, its data files, rows removed): join a changed manifest to the chain.
Seal = Callable[[Path, list[Path], int], None]


@dataclass(frozen=True)
class FileChange:
    """One file an erasure changed: ``rewritten`` (``rows`` of theirs left it, the
    others' mentions of them scrubbed) or ``removed``."""

    path: str
    action: str
    rows: int
    sha256: str | None = None


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + _PARTIAL)
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _files(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink() and path.name != PENDING:
            yield path


# --- each shape: (new bytes or None to remove the file, rows removed) ----------------


def _csv(data: bytes, needles: Needles) -> tuple[bytes | None, int]:
    text = data.decode("utf-8")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows:
        return data, 0
    header, body = rows[0], rows[1:]
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([needles.scrub(h) for h in header])
    removed = 0
    for row in body:
        named = dict(zip(header, row, strict=False))
        if needles.elsewhere(named):
            writer.writerow(row)
        elif needles.owns(named) or any(v in needles.strings for v in row):
            removed += 1
        else:
            writer.writerow([needles.scrub(v) for v in row])
    return out.getvalue().encode("utf-8"), removed


def _jsonl(data: bytes, needles: Needles) -> tuple[bytes | None, int]:
    lines, removed = [], 0
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            tree = orjson.loads(line)
        except orjson.JSONDecodeError:
            scrubbed = needles.scrub(line.decode("utf-8", "replace"))
            lines.append(scrubbed.encode("utf-8"))
            continue
        kept = needles.prune(tree)
        if kept is DROP:
            removed += 1
            continue
        lines.append(orjson.dumps(kept))
    return b"".join(line + b"\n" for line in lines), removed


def _json(data: bytes, needles: Needles) -> tuple[bytes | None, int]:
    tree = orjson.loads(data)
    kept = needles.prune(tree)
    # a document that is theirs, or has an object of theirs right under its top (an
    # access request's answer, its ``person``), is about them: it goes whole
    about = isinstance(tree, dict) and any(
        isinstance(v, dict) and needles.prune(v) is DROP for v in tree.values()
    )
    if kept is DROP or about:
        return None, 1
    removed = _count(tree) - _count(kept)
    return orjson.dumps(kept, option=orjson.OPT_INDENT_2) + b"\n", max(removed, 0)


def _count(tree: Any) -> int:
    """Objects in a JSON tree (what :func:`_json` counts as rows)."""
    if isinstance(tree, dict):
        return 1 + sum(_count(v) for v in tree.values())
    if isinstance(tree, list):
        return sum(_count(v) for v in tree)
    return 0


def _parquet(path: Path, needles: Needles) -> tuple[bytes | None, int]:
    frame = pl.read_parquet(path)
    rows = list(frame.iter_rows(named=True))
    keep = [not needles.owns(row) for row in rows]
    ours = [not needles.elsewhere(row) for row, k in zip(rows, keep, strict=True) if k]
    kept = frame.filter(pl.Series(keep, dtype=pl.Boolean))
    texts = [c for c, t in kept.schema.items() if t == pl.String]
    mine = pl.Series("_ours", ours, dtype=pl.Boolean)
    kept = kept.with_columns(
        pl.when(mine).then(pl.col(c).map_elements(needles.scrub, return_dtype=pl.String))
        .otherwise(pl.col(c)).alias(c)
        for c in texts
    )  # fmt: skip
    out = io.BytesIO()
    kept.write_parquet(out)
    return out.getvalue(), frame.height - kept.height


def _html(data: bytes, needles: Needles) -> tuple[bytes | None, int]:
    """A report: the table rows that are theirs go, then every remaining mention (as the
    page escapes it) is ``[erased]``; a page that still names them goes whole."""
    page = data.decode("utf-8")
    removed = 0
    header: list[str] = []

    def row(match: re.Match[str]) -> str:
        nonlocal removed, header
        cells = [html.unescape(c) for c in _CELL.findall(match.group(1))]
        if "<th" in match.group(1) and "<td" not in match.group(1):
            header = cells
            return match.group(0)
        named = dict(zip(header, cells, strict=False)) if len(header) == len(cells) else {}
        if needles.elsewhere(named):
            return match.group(0)
        if needles.owns(named) or any(c in needles.strings for c in cells):
            removed += 1
            return ""
        return match.group(0)

    page = _ROW.sub(row, page)
    for needle in sorted((*needles.strings, *needles.texts), key=len, reverse=True):
        escaped = html.escape(needle, quote=True)
        if len(needle) >= 8 or needle in needles.strings:
            page = page.replace(escaped, ERASED)
    if needles.text(html.unescape(page)):
        return None, removed
    return page.encode("utf-8"), removed


def _text(data: bytes, needles: Needles) -> tuple[bytes | None, int]:
    text = data.decode("utf-8")
    scrubbed = "\n".join(needles.scrub(line) for line in text.split("\n"))
    return (None if needles.text(scrubbed) else scrubbed.encode("utf-8")), 0


def _rewritten(path: Path, needles: Needles) -> tuple[bytes | None, int] | None:
    """The file's new bytes (None: remove it) and rows removed; None when it does not
    name the person."""
    if needles.text(path.name):
        return None, 0
    if path.suffix == ".parquet":
        try:
            frame = pl.read_parquet(path)
        except (OSError, pl.exceptions.PolarsError):
            return _bytes_only(path, needles)
        rows = frame.iter_rows(named=True)
        named = (
            needles.owns(r) or (not needles.elsewhere(r) and any(map(needles.holds, r.values())))
            for r in rows
        )
        return _parquet(path, needles) if any(named) else None
    if path.stat().st_size > _TEXT_LIMIT:
        return _bytes_only(path, needles)
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":  # gzip: whatever is inside, a file naming them goes whole
        try:
            inner = gzip.decompress(data).decode("utf-8", "replace")
        except (OSError, EOFError):
            return None
        return (None, 0) if needles.text(inner) or _names_hashed(inner, needles) else None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return (None, 0) if needles.text(data.decode("utf-8", "replace")) else None
    if not needles.text(text) and not _names_hashed(text, needles):
        return _shape(path, data, needles) if _short_owned(text, needles) else None
    return _shape(path, data, needles)


def _bytes_only(path: Path, needles: Needles) -> tuple[bytes | None, int] | None:
    wanted = [n.encode("utf-8") for n in needles.strings | needles.texts if len(n) >= 8]
    with path.open("rb") as f:
        tail = b""
        for block in iter(lambda: f.read(1 << 20), b""):
            chunk = tail + block
            if any(w in chunk for w in wanted):
                return None, 0
            tail = chunk[-256:]
    return None


def _names_hashed(text: str, needles: Needles) -> bool:
    """Whether rows of a CSV or JSON file name someone on the suppression list."""
    if needles.hasher is None or not any(needles.lists.values()):
        return False
    try:
        if text.lstrip()[:1] in ("{", "["):
            lines = text.splitlines() if "\n{" in text else [text]
            return any(needles.hashed(orjson.loads(line)) for line in lines if line.strip())
        reader = csv.DictReader(io.StringIO(text, newline=""))
        return any(needles.owns(row) for row in reader)
    except (orjson.JSONDecodeError, csv.Error, ValueError):
        return False


def _short_owned(text: str, needles: Needles) -> bool:
    """A short id of theirs (under ``_SHORT`` characters) is found only as a whole
    value: whether the file holds one at all, before it is parsed."""
    return any(len(s) < 8 and s in text for s in needles.strings)


def _shape(path: Path, data: bytes, needles: Needles) -> tuple[bytes | None, int] | None:
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            new, rows = _csv(data, needles)
        elif suffix in (".jsonl", ".ndjson"):
            new, rows = _jsonl(data, needles)
        elif suffix == ".json":
            new, rows = _json(data, needles)
        elif suffix in (".html", ".htm"):
            new, rows = _html(data, needles)
        else:
            new, rows = _text(data, needles)
    except (orjson.JSONDecodeError, csv.Error, UnicodeDecodeError, ValueError):
        new, rows = _text(data, needles)
    if new == data:
        return None
    if new is not None and suffix not in _ROWED and needles.text(new.decode("utf-8", "replace")):
        return None, rows  # what it still says of them cannot be cut out of it: it goes
    return new, rows


# --- the folders --------------------------------------------------------------------


def _manifests(folder: Path) -> dict[Path, list[Path]]:
    """Each manifest of the folder and the data files it names."""
    out: dict[Path, list[Path]] = {}
    for manifest in folder.rglob(f"*{_MANIFEST}"):
        try:
            named = orjson.loads(manifest.read_bytes()).get("files", [])
        except (OSError, orjson.JSONDecodeError, AttributeError):
            continue
        out[manifest] = [manifest.parent / str(f.get("path")) for f in named if f.get("path")]
    return out


def file_entries(manifest: dict[str, Any], folder: Path, removed: dict[str, int]) -> None:
    """Bring a manifest's ``files`` (rows, bytes, SHA-256) and ``rowCount`` up to date
    with its files as they are now."""
    total = 0
    for entry in manifest.get("files", []):
        path = folder / str(entry.get("path"))
        if not path.exists():
            entry.update(bytes=0, sha256=None, removedByErasure=True, rows=0)
            continue
        gone = removed.get(path.name, 0)
        if isinstance(entry.get("rows"), int):
            entry["rows"] = max(entry["rows"] - gone, 0)
            total += entry["rows"]
        entry.update(bytes=path.stat().st_size, sha256=file_sha256(path))
    if isinstance(manifest.get("rowCount"), int) and manifest.get("files"):
        manifest["rowCount"] = total


def erase_files(
    folders: Sequence[Path],
    needles: Needles,
    *,
    erasure_id: str,
    at: str,
    seal: Seal | None,
    record: Callable[[list[Path]], None] | None,
    dry_run: bool = False,
    skip: Callable[[Path], bool] | None = None,
) -> list[FileChange]:
    """Every file under ``folders`` (but those ``skip`` says) without the person (see the
    module); what changed (``dry_run``: what would)."""
    changes: list[FileChange] = []
    for folder in dict.fromkeys(f.resolve() for f in folders):
        if folder.is_dir():
            changes += _erase_folder(
                folder, needles, erasure_id, at, seal, record, dry_run, skip or _nothing
            )
    return changes


def _nothing(path: Path) -> bool:
    return False


def _erase_folder(
    folder: Path,
    needles: Needles,
    erasure_id: str,
    at: str,
    seal: Seal | None,
    record: Callable[[list[Path]], None] | None,
    dry_run: bool,
    skip: Callable[[Path], bool],
) -> list[FileChange]:
    pending = folder / PENDING
    if not dry_run:
        _seal_pending(folder, pending, seal)
    manifests = _manifests(folder)
    planned: dict[Path, tuple[bytes | None, int]] = {}
    for path in _files(folder):
        if path.name.endswith(_PARTIAL):
            if not dry_run:
                path.unlink(missing_ok=True)  # a kill's half-written copy
            continue
        if path.name.endswith(_MANIFEST) or skip(path):
            continue
        new = _rewritten(path, needles)
        if new is not None:
            planned[path] = new
    changes = [
        FileChange(str(path), "removed" if new is None else "rewritten", rows)
        for path, (new, rows) in planned.items()
    ]
    if dry_run or not planned:
        return changes
    touched = {m: files for m, files in manifests.items() if set(files) & set(planned)}
    removed = {p.name: r for p, (_, r) in planned.items()}
    plan = {"erasureId": erasure_id, "manifests": sorted(map(str, touched)), "removed": removed}
    _replace(pending, orjson.dumps(plan))
    done: list[FileChange] = []
    for path, (data, rows) in planned.items():
        if data is None:
            path.unlink(missing_ok=True)
            done.append(FileChange(str(path), "removed", rows))
        else:
            _replace(path, data)
            done.append(FileChange(str(path), "rewritten", rows, file_sha256(path)))
    for manifest, files in touched.items():
        _seal_one(manifest, files, removed, erasure_id, at, seal)
    loose = [p for p in planned if p.exists() and not any(p in f for f in touched.values())]
    if loose and record is not None:
        record(loose)
    pending.unlink(missing_ok=True)
    return done


def _seal_one(
    manifest: Path,
    files: list[Path],
    removed: dict[str, int],
    erasure_id: str,
    at: str,
    seal: Seal | None,
) -> None:
    if not manifest.exists():
        return
    doc = orjson.loads(manifest.read_bytes())
    if not any(f.exists() for f in files):  # nothing left that it describes
        manifest.unlink()
        return
    doc.pop("audit", None)
    file_entries(doc, manifest.parent, removed)
    rows = sum(removed.get(f.name, 0) for f in files)
    doc.setdefault("erasures", []).append({"erasureId": erasure_id, "at": at,
                                           "rowsRemoved": rows})  # fmt: skip
    _replace(manifest, orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    if seal is not None:
        seal(manifest, [f for f in files if f.exists()], rows)


def _seal_pending(folder: Path, pending: Path, seal: Seal | None) -> None:
    """Seal the manifests a killed erasure listed before it changed their files."""
    if not pending.exists():
        return
    try:
        doc = orjson.loads(pending.read_bytes())
    except orjson.JSONDecodeError:
        pending.unlink()
        return
    removed = {str(k): int(v) for k, v in doc.get("removed", {}).items()}
    for name in doc.get("manifests", []):
        manifest = Path(name)
        if not manifest.exists() or manifest.resolve().parent != manifest.parent.resolve():
            continue
        files = _manifests(manifest.parent).get(manifest, [])
        current = orjson.loads(manifest.read_bytes())
        stale = any(
            (manifest.parent / str(e.get("path"))).exists()
            and e.get("sha256") != file_sha256(manifest.parent / str(e.get("path")))
            for e in current.get("files", [])
        )
        unsealed = seal is not None and "audit" not in current
        if stale or unsealed or not any(f.exists() for f in files):
            _seal_one(manifest, files, removed, str(doc.get("erasureId")), "", seal)
    pending.unlink()
