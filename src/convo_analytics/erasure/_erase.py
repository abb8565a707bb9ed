"""``convo erase``: one person removed from every store, kept out, and certified.

The order, each step safe to repeat (D-ERASURE):

1. under the warehouse writers' lock (and the published folder's), find the person;
2. the files copied out of the warehouse (``_copied``): exports, reports and the alert
   deliveries without the person (their rows out, their mentions ``[erased]``,
   manifests sealed again into the audit chain), first, while their ids and texts are
   still known; what changed is logged as a ``files`` row, so a re-run after a kill
   still certifies it;
3. in one transaction: an ``erasure_log`` row saying the erasure started (with what
   was found), the person's subject hashes added to ``erasure_suppressions`` (so from
   here on no extraction or ingest brings them back), their rows deleted, the monitors'
   explanations without them, their conversations queued in ``transform_pending``;
4. the incremental transform: the marts lose their facts;
5. the receiver's archive files rewritten without anyone on the suppression list;
6. the warehouse file rewritten (no freed block keeps their bytes);
7. a new snapshot published and every older one removed (``keep = 1`` for this
   publish, whatever ``publish.keep``: the older ones hold the person);
8. when the settings name a lake that exists, the lake (``_lake``): the workspace
   re-published from the erased warehouse, the snapshots and files holding its old rows
   removed, the readers' copies of the lake made again (the person's lake rows were
   counted before step 3, into its ``started`` row: a re-run no longer knows their ids);
9. an ``erasure_log`` row with the certificate, and an audit record.

A kill anywhere leaves a started erasure without its completion; running the same
``convo erase`` again finds it (by the person's subject hash), does what is left (the
steps find nothing left to delete, and redo the rest) and completes it, its
certificate counting what the first attempt removed.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import orjson

from convo_analytics.audit import auditor, file_sha256
from convo_analytics.config import Settings
from convo_analytics.erasure._copied import copied_out, merge_copied
from convo_analytics.erasure._lake import dry_lake, erase_lake, lake_of, lake_rows, lake_store
from convo_analytics.erasure._mentions import erase_explanations
from convo_analytics.erasure._needles import Needles
from convo_analytics.erasure._person import Found, PersonRequest, find_person, subject_hash
from convo_analytics.erasure._warehouse import (
    TableHit,
    count_rows,
    delete_rows,
    rewrite_file,
    typed_texts,
    user_texts,
)
from convo_analytics.errors import UserError
from convo_analytics.privacy import PrivacyConfig, SubjectHasher, privacy_config
from convo_analytics.warehouse import open_warehouse, transaction
from convo_analytics.warehouse._erasure_tables import add_pending, add_suppressions, suppressed
from convo_analytics.webhooks import ArchiveRewrite, erase_archive_lines

__all__ = ["ErasureResult", "erase_person", "resolve_workspace"]


@dataclass
class ErasureResult:
    """What an erasure did (or, dry, would do): its certificate."""

    certificate: dict[str, Any] = field(default_factory=dict)
    dry_run: bool = False


class _NotHere(UserError):
    """The warehouse holds no workspace of that name (a shard may)."""


def resolve_workspace(con: duckdb.DuckDBPyConnection, name: str) -> tuple[str, str]:
    """(id, name) of the warehouse's workspace called ``name`` (or of that id)."""
    rows = con.execute("SELECT workspace_id, name FROM workspaces ORDER BY name").fetchall()
    for wanted in ((r for r in rows if r[1] == name), (r for r in rows if r[0] == name)):
        for row in wanted:
            return str(row[0]), str(row[1])
    known = ", ".join(str(r[1]) for r in rows) or "none"
    raise _NotHere(f"--workspace {name!r}: no such workspace in the warehouse; it holds: {known}")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _started(
    con: duckdb.DuckDBPyConnection, workspace_id: str, subject: str
) -> tuple[str, int, dict[str, Any]] | None:
    """The latest erasure of this person that started and did not complete: its id,
    next step, and certificate so far."""
    rows = con.execute(
        """SELECT erasure_id, max(step), arg_max(status, step), arg_max(certificate, step)
           FROM erasure_log WHERE workspace_id = ? AND subject_hash = ?
           GROUP BY erasure_id ORDER BY max(logged_at) DESC LIMIT 1""",
        [workspace_id, subject],
    ).fetchall()
    if not rows or rows[0][2] == "complete":
        return None
    erasure_id, step, _, certificate = rows[0]
    return str(erasure_id), int(step) + 1, orjson.loads(certificate) if certificate else {}


def _log(
    con: duckdb.DuckDBPyConnection,
    erasure_id: str,
    step: int,
    workspace_id: str,
    subject: str,
    status: str,
    certificate: dict[str, Any],
) -> None:
    con.execute(
        "INSERT INTO erasure_log VALUES (?, ?, ?, ?, ?, now(), ?)",
        [erasure_id, step, workspace_id, subject, status, orjson.dumps(certificate).decode()],
    )


def _merged(before: dict[str, int], now: list[TableHit]) -> dict[str, int]:
    counts = dict(before)
    for hit in now:
        counts[hit.table] = counts.get(hit.table, 0) + hit.rows
    return {k: v for k, v in sorted(counts.items()) if v}


def _suppress(found: Found, request: PersonRequest, privacy: PrivacyConfig) -> dict[str, list[str]]:
    hasher = SubjectHasher(privacy, request.workspace_id)
    return {  # the identifier as given and as scrubbing stored it (a sealed archive line)
        request.kind: sorted({hasher.hash(request.kind, f) for f in {request.value, *found.forms}}),
        "conversation": [hasher.hash("conversation", c) for c in sorted(found.conversations)],
        "lead": [hasher.hash("lead", lead) for lead in sorted(found.leads)],
    }


def erase_person(
    settings: Settings, workspace: str, kind: str, value: str, *, dry_run: bool = False
) -> ErasureResult:
    """Erase one person (see the module) from the warehouse and, when the workspace runs
    as a shard (scale-out, ``shards/NAME.duckdb`` with its own snapshots), from its
    shard too; ``dry_run`` only says what would go."""
    from convo_analytics.pipeline._shards import shard_path, shard_settings

    if kind not in ("external_user_id", "email"):
        raise ValueError(kind)
    if not value.strip():
        raise UserError(f"--{kind.replace('_', '-')}: give the person's identifier (it is empty)")
    audit = auditor(settings)  # a log that cannot be written stops it before anything
    shard = (
        shard_settings(settings, workspace)
        if any(w.name == workspace for w in settings.workspaces)
        and shard_path(settings, workspace).exists()
        else None
    )
    main: ErasureResult | None = None
    try:
        main = _erase_in(settings, workspace, kind, value, dry_run)
    except _NotHere:
        if shard is None:
            raise
    except UserError:
        if shard is None or settings.require_path("warehouse.path").exists():
            raise
    result = main
    if shard is not None:
        sharded = _erase_in(shard, workspace, kind, value, dry_run)
        result = _with_shard(main, sharded) if main is not None else sharded
    assert result is not None
    certificate = result.certificate
    if audit is not None and dry_run:
        audit.record("erasure.dry_run", what=f"convo erase --dry-run ({kind})",
                     rows=sum(certificate["stores"]["warehouse"]["tables"].values()),
                     workspace=certificate["workspace"], subjects=(value,))  # fmt: skip
    elif audit is not None:
        sealed = hashlib.sha256(orjson.dumps(certificate, option=orjson.OPT_SORT_KEYS))
        audit.record("erasure", what=f"convo erase ({kind})",
                     rows=sum(certificate["stores"]["warehouse"]["tables"].values()),
                     workspace=certificate["workspace"], subjects=(value,),
                     detail={"erasureId": certificate.get("erasureId"),
                             "certificateSha256": sealed.hexdigest()})  # fmt: skip
    return result


def _with_shard(main: ErasureResult, shard: ErasureResult) -> ErasureResult:
    """The warehouse's certificate with the shard's stores beside its own."""
    cert = dict(main.certificate)
    other = shard.certificate
    cert["found"] = {k: v + other["found"].get(k, 0) for k, v in cert["found"].items()}
    cert["stores"] = {**cert["stores"],
                      **{f"shard {k}": v for k, v in other.get("stores", {}).items()}}  # fmt: skip
    return ErasureResult(cert, dry_run=main.dry_run)


def _erase_in(
    settings: Settings, workspace: str, kind: str, value: str, dry_run: bool
) -> ErasureResult:
    """The erasure in the warehouse ``settings`` name (a shard's, narrowed)."""
    from convo_analytics.pipeline import warehouse_writer
    from convo_analytics.publish import publish_snapshot
    from convo_analytics.transform import run_transform, transform_config
    from convo_analytics.warehouse import require_existing

    db_path = settings.require_path("warehouse.path")
    require_existing(db_path)
    config = transform_config(settings, reconcile=False) if not dry_run else None
    lake = lake_of(settings)  # a lake that cannot be reached stops it before anything
    folder = settings.get_path("publish.dir")
    with warehouse_writer(settings, "convo erase", publishes=not dry_run):
        con = open_warehouse(db_path, must_exist=True)  # a dry run too: the schema is current
        try:
            ws_id, ws_name = resolve_workspace(con, workspace)
            request = PersonRequest(ws_id, ws_name, kind, value)  # type: ignore[arg-type]
            privacy = privacy_config(settings, ws_id)
            subject = subject_hash(request, privacy)
            found = find_person(con, request, privacy)
            names = {ws_id, ws_name}
            certificate: dict[str, Any] = {
                "workspace": ws_name,
                "workspaceId": ws_id,
                "subject": subject,
                "identifierKind": kind,
                "found": {
                    "conversations": len(found.conversations),
                    "leads": len(found.leads),
                    "events": len(found.events),
                },
            }
            texts = user_texts(con, ws_id, found)
            needles = Needles.of(
                {request.value, *found.strings()}, typed_texts(con, ws_id, found),
                SubjectHasher(privacy, ws_id),
                suppressed(con, ws_id), names,
            )  # fmt: skip
            if dry_run:
                hits = count_rows(con, ws_id, found, names)
                certificate["status"] = "dry-run"
                certificate["stores"] = {
                    "warehouse": {"path": str(db_path.resolve()), "tables": _merged({}, hits)},
                    "published snapshots": _snapshot_files(settings),
                    **copied_out(settings, ws_name, needles, None, "", dry_run=True),
                }
                if lake is not None:
                    certificate["stores"]["lake"] = dry_lake(lake, ws_id, found, texts, folder)
                return ErasureResult(certificate, dry_run=True)
            resumed = _started(con, ws_id, subject)
            erasure_id, step, before = resumed or (uuid.uuid4().hex[:16], 0, {})
            certificate["erasureId"] = erasure_id
            certificate["requestedAt"] = before.get("requestedAt") or _now()
            prior = before.get("stores", {}).get("warehouse", {}).get("tables", {})
            # the files copied out of the warehouse first, while their ids and texts are
            # known; recorded, so that a re-run after a kill still certifies them
            copied = copied_out(settings, ws_name, needles, auditor(settings), erasure_id)
            outside = merge_copied(before.get("stores", {}), copied)
            certificate["stores"] = dict(outside)
            certificate["status"] = "files"
            with transaction(con):
                _log(con, erasure_id, step, ws_id, subject, "files", certificate)
            step += 1
            held = lake_rows(lake, ws_id, found, texts) if lake is not None else {}
            with transaction(con):
                hits = delete_rows(con, ws_id, found, names, texts)
                explained = erase_explanations(con, ws_id, needles)
                tables = _merged(prior, hits)
                certificate["stores"] = {
                    "warehouse": {"path": str(db_path.resolve()), "tables": tables},
                    **outside,
                }
                if explained:
                    certificate["stores"]["warehouse"]["monitor explanations"] = explained
                if lake is not None:
                    earlier = before.get("stores", {}).get("lake", {})
                    certificate["stores"]["lake"] = lake_store(lake, held, earlier)
                certificate["status"] = "started"
                _log(con, erasure_id, step, ws_id, subject, "started", certificate)
                added = add_suppressions(
                    con, ws_id, _suppress(found, request, privacy), erasure_id, datetime.now(UTC)
                )
                add_pending(con, ws_id, found.conversations, f"erasure {erasure_id}")
            assert config is not None
            transformed = run_transform(con, config)
            archives = _erase_archives(settings, con, ws_id, ws_name, privacy)
            earlier = before.get("stores", {}).get("webhook archives", {}).get("files", [])
            certificate["stores"]["webhook archives"] = _archive_entry(earlier, archives)
        finally:
            con.close()
        rewrite_file(db_path)
        con = open_warehouse(db_path, must_exist=True)
        try:
            stores = certificate["stores"]
            stores["warehouse"]["rewritten"] = {
                "sha256": file_sha256(db_path),
                "bytes": db_path.stat().st_size,
            }
            stores["marts"] = {
                "recomputed": "incremental" if transformed.mode != "full" else "full",
                "transformRunId": transformed.transform_run_id,
            }
            stores["suppression list"] = {"added": added + int(before.get("suppressed", 0))}
            certificate["suppressed"] = stores["suppression list"]["added"]
            if folder is not None and folder.is_dir():
                removed = [p.name for p in _snapshot_paths(folder)]
                snap = publish_snapshot(con, db_path, folder, keep=1)
                stores["published snapshots"] = {
                    "published": snap.path.name,
                    "sha256": file_sha256(snap.path),
                    "removed": sorted(set(removed) - {snap.path.name}),
                }
            if lake is not None:  # its readers' copies replaced by one of the erased lake
                stores["lake"] = erase_lake(con, lake, ws_id, found, texts, held,
                                            stores["lake"], folder)  # fmt: skip
            elif folder is not None and folder.is_dir():
                stores["lake copies"] = {"removed": _remove_lake_copies(folder)}
            certificate["completedAt"] = _now()
            certificate["status"] = "complete"
            with transaction(con):
                _log(con, erasure_id, step + 1, ws_id, subject, "complete", certificate)
        finally:
            con.close()
    return ErasureResult(certificate)


def _erase_archives(
    settings: Settings,
    con: duckdb.DuckDBPyConnection,
    ws_id: str,
    ws_name: str,
    privacy: PrivacyConfig,
) -> list[ArchiveRewrite]:
    """The receiver's archive files of the workspace without the lines of anyone on its
    suppression list (this person included: the list, not their ids, which the
    warehouse no longer holds on a re-run)."""
    archive_dir = settings.get_path("webhooks.archive_dir")
    if archive_dir is None:
        return []
    hasher = SubjectHasher(privacy, ws_id)
    return erase_archive_lines(
        archive_dir.resolve(), ws_name, ws_id, hasher, suppressed(con, ws_id),
        flat_is_workspace=not settings.workspaces,
    )  # fmt: skip


def _archive_entry(earlier: list[dict[str, Any]], now: list[ArchiveRewrite]) -> dict[str, Any]:
    files = {f["path"]: f for f in earlier}
    for rewrite in now:
        before = files.get(rewrite.path, {}).get("lines", 0)
        files[rewrite.path] = {"path": rewrite.path, "lines": before + rewrite.lines,
                               "sha256": rewrite.sha256}  # fmt: skip
    listed = sorted(files.values(), key=lambda f: f["path"])
    return {"files": listed, "lines": sum(f["lines"] for f in listed)}


def _remove_lake_copies(folder: Path) -> list[str]:
    """Remove the readers' local copies of the lake (``lake-STATE.duckdb``, a cache a
    reader makes again from the lake when it needs one): the older ones hold the person."""
    from convo_analytics.publish import LAKE_PREFIX

    removed = []
    for path in sorted(folder.glob(f"{LAKE_PREFIX}*.duckdb*")):
        path.unlink(missing_ok=True)
        removed.append(path.name)
    return removed


def _snapshot_paths(folder: Path) -> list[Path]:
    from convo_analytics.publish._pointer import PREFIX, SUFFIX

    return sorted(folder.glob(f"{PREFIX}*{SUFFIX}"))


def _snapshot_files(settings: Settings) -> dict[str, Any]:
    folder = settings.get_path("publish.dir")
    if folder is None or not folder.is_dir():
        return {"files": []}
    return {"files": [p.name for p in _snapshot_paths(folder)], "action": "all replaced by one"}
