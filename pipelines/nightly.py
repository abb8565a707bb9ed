"""The nightly run's steps, in order: what `convo run` does (see docs/cli.md, "convo run").

Each step is a function of the run's context returning its counts; the
runner (convo_analytics.pipeline) holds the lock, records every run in
``pipeline_runs``, stops at the first failure and alerts. Every step is safe
to repeat: a re-run after a failure or a kill completes the work without
duplicates, and readers see only what ``publish`` copies.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from convo_analytics.config import Settings
from convo_analytics.errors import UserError
from convo_analytics.pipeline import RunContext, Step, StepFailed


def extract(ctx: RunContext) -> dict[str, Any]:
    """Page the service's API (conversations with details, leads, summary) into the warehouse."""
    from convo_analytics.extract import LogProgress, extract_configs, run_extract_many

    configs = extract_configs(ctx.settings)
    result = asyncio.run(run_extract_many(configs, LogProgress()))
    per_workspace = {name: r.to_json()["streams"] for name, r in result.workspaces.items()}
    streams = {f"{ws}/{name}": s for ws, all_ in per_workspace.items() for name, s in all_.items()}
    if not result.ok:
        failed = {
            name: f"{s['status']}: {s['error']}"
            for name, s in streams.items()
            if s["status"] not in ("ok", "unavailable")
        }
        raise StepFailed(f"streams failed or partial: {failed}")
    return {
        "records": sum(s["records"] for s in streams.values()),
        "new": sum(s["new"] for s in streams.values()),
        "changed": sum(s["changed"] for s in streams.values()),
        "details": sum(s["details"] for s in streams.values()),
        "requests": sum(s["requests"] for s in streams.values()),
        "warnings": sum(len(s["warnings"]) for s in streams.values()),
        "unavailable": [name for name, s in streams.items() if s["status"] == "unavailable"],
        "workspaces": len(per_workspace),
    }


def check_extract(settings: Settings) -> None:
    """Each workspace's URL and credentials and the endpoints' description (no request)."""
    from convo_analytics.extract import extract_configs

    extract_configs(settings)


def webhook_ingest(ctx: RunContext) -> dict[str, Any]:
    """Verify, deduplicate and load what is new in the received webhook archives (and any
    configured others); fails when most lines fail the signature check (a wrong secret)."""
    from convo_analytics.config import load_workspaces
    from convo_analytics.webhooks import (
        WORKSPACE_UNKNOWN,
        archive_files,
        archive_workspace,
        ingest,
        ingest_batches,
        ingest_options,
        replay,
        replay_keys,
    )

    settings = ctx.settings
    secret = settings.get_secret("webhooks.secret")
    configured = [w for w in load_workspaces(settings) if not w.implicit]
    hooked = [w for w in configured if w.webhook_secrets]
    if secret is None and not hooked:
        return {"skipped": "no webhook secret configured"}
    archive_dir = settings.require_path("webhooks.archive_dir")
    roots = [archive_dir] if archive_dir.exists() else []
    roots += [Path(p) for p in settings.get_list("run.ingest_paths")]
    files = archive_files(roots) if roots else []
    if secret is None:  # only the configured workspaces' own archives can be verified
        # (a configured one without secrets says so)
        files = [f for f in files if archive_workspace(settings, f) is not None]
    if not files:
        return {"files": 0}
    results = []
    for batch in ingest_batches(settings, files, None, None):
        keys = batch.keys
        result = ingest(
            batch.files, keys.secrets, ctx.db_path, ingest_options(settings),
            secret_hint=keys.hint, endpoint=keys.endpoint, privacy=keys.privacy,
        )  # fmt: skip
        if result.alarm is not None:
            raise StepFailed(result.alarm)
        results.append(result)
    if (waiting := _waiting_for_a_workspace(ctx.db_path)) and hooked:
        # events that named no workspace before their workspace's id was known: load them
        # now that an extraction (or a configured id) may have bound it
        results.append(replay(ctx.db_path, replay_keys(settings, None),
                              ingest_options(settings), reasons=(WORKSPACE_UNKNOWN,),
                              only=waiting))  # fmt: skip
    result = _summed(results)
    return {
        "files": result.files,
        "skipped": result.skipped,
        "read": result.read,
        "bytes": result.bytes_read,
        "loaded": result.loaded,
        "duplicates": result.duplicates,
        "quarantined": sum(result.quarantined.values()),
        "quarantine_open": _open_quarantine(ctx.db_path),
    }


def _waiting_for_a_workspace(db_path: Path) -> list[str | None]:
    """The workspaces with open lines quarantined as ``workspace_unknown``."""
    from convo_analytics.warehouse import open_warehouse
    from convo_analytics.webhooks import WORKSPACE_UNKNOWN

    con = open_warehouse(db_path, read_only=True)
    try:
        found = con.execute(
            "SELECT DISTINCT workspace FROM quarantine WHERE resolved_at IS NULL AND reason = ?",
            [WORKSPACE_UNKNOWN],
        ).fetchall()
    finally:
        con.close()
    return [name for (name,) in found if name is not None]


def _open_quarantine(db_path: Path) -> int:
    """Quarantined lines still open (not loaded by a replay or a later read since)."""
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(db_path, read_only=True)
    try:
        [(count,)] = con.execute(
            "SELECT count(*) FROM quarantine WHERE resolved_at IS NULL"
        ).fetchall()
    finally:
        con.close()
    return int(count)


def _summed(results: list[Any]) -> Any:
    """Several workspaces' ingest results as one (their counts added)."""
    from collections import Counter
    from types import SimpleNamespace

    total = SimpleNamespace(files=0, skipped=0, read=0, bytes_read=0, loaded=0, duplicates=0)
    quarantined: Counter[str] = Counter()
    for r in results:
        for key in vars(total):
            setattr(total, key, getattr(total, key) + getattr(r, key))
        quarantined.update(r.quarantined)
    total.quarantined = quarantined
    return total


def check_ingest(settings: Settings) -> None:
    """Archives named in run.ingest_paths exist (a secret is optional: without one, skipped)."""
    for path in settings.get_list("run.ingest_paths"):
        if not Path(path).exists():
            raise UserError(
                f"run.ingest_paths names {path}, which does not exist; fix the setting "
                "(CONVO_RUN_INGEST_PATHS) or remove it"
            )


def transform(ctx: RunContext) -> dict[str, Any]:
    """Bring the marts up to date (the partitions the night's loads touch) in one
    transaction, and reconcile with the service's summary: differences make the run a
    warning; no summary to compare with is said, not counted as a match."""
    from convo_analytics.transform import SETTING_ZONES, run_transform, transform_config
    from convo_analytics.warehouse import open_warehouse

    config = transform_config(ctx.settings, named=SETTING_ZONES)
    con = open_warehouse(ctx.db_path)
    try:
        result = run_transform(con, config)
    finally:
        con.close()
    reconciliation = result.reconciliation
    if reconciliation.outcome == "differences":
        ctx.warn("reconciliation", reconciliation.describe(),
                 reconciliation=reconciliation.as_json(with_mismatches=True))  # fmt: skip
    return {
        "mode": result.mode,
        "changed_conversations": result.changed_conversations,
        "partitions": result.partitions["count"],
        "conversations": result.conversations,
        "incidents": result.incidents,
        "reconciled_days": reconciliation.compared,
        # None when nothing was compared: not "0 mismatches"
        "mismatches": len(reconciliation.mismatches) if reconciliation.compared else None,
        "reconciliation": reconciliation.outcome,
    }


def monitors(ctx: RunContext) -> dict[str, Any]:
    """Judge every monitor's new windows against its baseline or threshold, store them in
    monitor_evaluations, and send each episode's alert and resolve notice through the
    notification channels (a failed delivery is retried next run, never fails the step)."""
    from convo_analytics.monitors import run_monitors

    return run_monitors(ctx.settings, ctx.db_path, ctx.run_id)


def check_monitors(settings: Settings) -> None:
    """Every monitor's table, metric, time zone and filters, and the dashboard's store."""
    from convo_analytics.monitors import load_monitors

    if settings.get_bool("monitoring.enabled"):
        load_monitors(settings)


def check_transform(settings: Settings) -> None:
    """The time zones days are cut in."""
    from convo_analytics.transform import SETTING_ZONES, transform_config

    transform_config(settings, named=SETTING_ZONES)


def publish(ctx: RunContext) -> dict[str, Any]:
    """Copy the warehouse into a new snapshot for readers and point CURRENT at it."""
    from convo_analytics.publish import publish_snapshot
    from convo_analytics.warehouse import open_warehouse

    folder = ctx.settings.require_path("publish.dir")
    con = open_warehouse(ctx.db_path)
    try:
        status = "warning" if ctx.warnings else "ok"
        snap = publish_snapshot(
            con, ctx.db_path, folder, ctx.settings.get_int("publish.keep"),
            _run_done(ctx.run_id, status),
        )  # fmt: skip
    finally:
        con.close()
    ctx.notes["snapshot_id"] = snap.snapshot_id
    return {"snapshot": snap.snapshot_id}


def _run_done(run_id: str, status: str) -> Any:
    """In the snapshot only, this run is done (``ok``, or ``warning`` when a step warned):
    publishing is all that is left of it (the warehouse keeps it running until the runner
    records its end, so a kill mid-copy is still found as interrupted)."""

    def mark(copy: Any) -> None:
        copy.execute(
            "UPDATE pipeline_runs SET status = ?, finished_at = now() WHERE run_id = ?",
            [status, run_id],
        )

    return mark


def reports(ctx: RunContext) -> dict[str, Any]:
    """Make each due [[reports]] report (a notebook over the snapshot just published, one per
    workspace), write its HTML and CSVs to reporting.out_dir and send it through the
    notification channels, once per period; a failed report is recorded and alerted
    (report.failed), never fails the step nor the run."""
    from convo_analytics.reports import run_reports

    return run_reports(ctx.settings, ctx.run_id)


def check_reports(settings: Settings) -> None:
    """Each report's workspaces, channels, recipients and time zone are configured."""
    from convo_analytics.reports import check_reports as check

    check(settings)


def exports(ctx: RunContext) -> dict[str, Any]:
    """The summary (service-compatible; one per workspace when there are several) and the
    redacted guardrail log of the last days, with its workspace column; each recorded in
    the audit trail, the log's manifest joined to its chain."""
    import orjson

    from convo_analytics.audit import auditor
    from convo_analytics.export import (
        export_guardrails,
        export_options,
        file_label,
        recent_days,
        warehouse_workspaces,
        workspace_summary,
    )
    from convo_analytics.transform import SETTING_ZONES
    from convo_analytics.warehouse import open_warehouse

    first, last = recent_days(ctx.settings)
    options = export_options(ctx.settings, named=SETTING_ZONES)
    tz, folder, configured = options.zone, options.folder, options.configured
    folder.mkdir(parents=True, exist_ok=True)
    summaries: dict[str, tuple[Path, dict[str, Any]]] = {}
    con = open_warehouse(ctx.db_path, read_only=True)
    try:
        known = warehouse_workspaces(con, configured)
        if len(known) <= 1:  # one workspace: its summary, named as before workspaces
            only = known[0] if known else None
            summaries[only.name if only else "unknown"] = (
                folder / f"summary_{first}_{last}.json",
                workspace_summary(con, first, last, tz,
                                  workspace_id=only.workspace_id if only else "unknown", ids=None),
            )  # fmt: skip
        else:
            for ws in known:
                summaries[ws.name] = (
                    folder / f"summary_{file_label([ws])}_{first}_{last}.json",
                    workspace_summary(con, first, last, tz, workspace_id=ws.workspace_id,
                                      ids=[ws.workspace_id]),
                )  # fmt: skip
        guardrails = export_guardrails(
            con,
            first,
            last,
            folder,
            tz=tz,
            fmt=options.fmt,
            configured=configured,
        )
    finally:
        con.close()
    for path, body in summaries.values():
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2))
        partial.replace(path)
    if (audit := auditor(ctx.settings)) is not None:  # each export recorded, the manifest joined
        what = f"convo run {ctx.run_id} (exports step)"
        for path, body in summaries.values():
            audit.record_files("export.summary", [path], what=what, rows=len(body["daily"]),
                               workspace=body["workspaceId"])  # fmt: skip
        audit.seal_manifest("export.guardrails", guardrails.manifest_file,
                            files=[guardrails.data_file], what=what,
                            rows=guardrails.rows)  # fmt: skip
    return {
        "summary_days": (last - first).days + 1,
        "summaries": len(summaries),
        "conversations_per_workspace": {
            name: body["totals"]["conversations"] for name, (_, body) in summaries.items()
        },
        "incidents_exported": guardrails.rows,
        "incidents_per_workspace": {
            str(w["name"] or w["workspaceId"]): w["rows"] for w in guardrails.manifest["workspaces"]
        },
    }


def check_exports(settings: Settings) -> None:
    """The audit log the exports are recorded in can be written (else exit 2 at once)."""
    from convo_analytics.audit import auditor

    auditor(settings)


def retention(ctx: RunContext) -> dict[str, Any]:
    """Per workspace, remove raw payloads, transcript text (the metrics stay) and received
    archive files past their days (archives once ingested), and list what went in the
    run's retention manifest, recorded in the audit trail."""
    from convo_analytics.pipeline import run_retention

    return run_retention(ctx.settings, ctx.db_path, ctx.run_id).counts()


def check_retention(settings: Settings) -> None:
    """The retention settings, and the audit log the manifest is recorded in."""
    from convo_analytics.pipeline import check_retention as check

    check(settings)


#: Publish comes last of the data steps, so that a snapshot only ever shows a run that did
#: everything else; the reports read what it published (they never fail the run).
STEPS = [
    Step("extract", extract, extract.__doc__ or "", check_extract),
    Step("webhook_ingest", webhook_ingest, webhook_ingest.__doc__ or "", check_ingest),
    Step("transform", transform, transform.__doc__ or "", check_transform),
    Step("monitors", monitors, monitors.__doc__ or "", check_monitors),
    Step("exports", exports, exports.__doc__ or "", check_exports),
    Step("retention", retention, retention.__doc__ or "", check_retention),
    Step("publish", publish, publish.__doc__ or ""),
    Step("reports", reports, reports.__doc__ or "", check_reports),
]
