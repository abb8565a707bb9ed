"""`convo run`: the nightly steps in order, under a lock, recorded, alerting on failure.

The steps themselves are data (``pipelines/nightly.py`` lists them); this
module runs them. Each step is idempotent (the loads recognise what they have
already stored), and readers only ever see what the publish step copies, so
a run that fails or is killed at any point leaves the published data as it
was, and the next run completes the work.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from convo_analytics._run_ids import new_run_id
from convo_analytics.config import Settings
from convo_analytics.errors import UserError
from convo_analytics.pipeline._alert import check_alert_settings, send_alert
from convo_analytics.pipeline._lock import WriterLock
from convo_analytics.warehouse import open_warehouse, transaction

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RunContext:
    """What a step gets: the settings, the run's id, and what earlier steps left."""

    settings: Settings
    run_id: str
    db_path: Path
    notes: dict[str, Any] = field(default_factory=dict)
    #: What steps said that the run's status must show (:meth:`warn`), in order.
    warnings: list[dict[str, Any]] = field(default_factory=list)

    def warn(self, kind: str, message: str, **details: Any) -> None:
        """Say something the step did not fail on but nobody should miss (reconciliation
        found differences): the step and the run end as ``warning`` (exit 0, so schedulers
        do not retry), the alert goes out, and the message (with ``details``, JSON values)
        is in the summary line, ``--json`` and ``pipeline_runs`` (the step logs it itself)."""
        self.warnings.append({"kind": kind, "message": message, **details})


#: A step returns its counts (shown in the summary line and stored in pipeline_runs).
StepFunction = Callable[[RunContext], dict[str, Any]]


#: A step's check of its settings: raises UserError (exit 2) for what no run could fix.
StepCheck = Callable[[Settings], None]


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    run: StepFunction
    #: Why the step exists, for `convo run --list` and the docs.
    doc: str = ""
    #: Run by :func:`check_steps` before the run takes the lock or records anything.
    check: StepCheck | None = None


class StepFailed(Exception):
    """A step could not do its work; the message says why (never a secret)."""


#: A run's statuses: ``warning`` is a run that did every step but has something to say
#: (reconciliation found differences); ``interrupted`` is set by the next run.
STATUSES = ("running", "ok", "warning", "failed", "interrupted")


@dataclass(slots=True)
class RunResult:
    run_id: str
    status: str = "running"
    steps: list[dict[str, Any]] = field(default_factory=list)
    failed_step: str | None = None
    error: str | None = None
    seconds: float = 0.0
    recovered_from: str | None = None
    #: Each step's warnings (RunContext.warn): step, kind, message and details.
    warnings: list[dict[str, Any]] = field(default_factory=list)
    #: The alert's deliveries and those earlier runs left pending (notify.DeliverySummary).
    deliveries: dict[str, Any] | None = None
    #: The audit trail's head when the run ended (``SEQ:HASH``; D-AUDIT-TRAIL), also in
    #: ``pipeline_runs.audit_head`` and beside the log; None when auditing is off.
    audit_head: str | None = None

    def summary_line(self) -> str:
        parts = []
        for step in self.steps:
            counts = ", ".join(f"{k} {v}" for k, v in step["counts"].items() if _short(v))
            parts.append(f"{step['name']} {step['status']}" + (f" ({counts})" if counts else ""))
        head = f"run {self.run_id} {self.status} in {self.seconds:.1f} s"
        tail = "".join(f"; warning in {w['step']}: {w['message']}" for w in self.warnings)
        tail += f"; error in {self.failed_step}: {self.error}" if self.error else ""
        if pending := (self.deliveries or {}).get("pending"):
            tail += f"; {pending} alert deliveries pending (the next run retries them)"
        return f"{head}: {'; '.join(parts)}{tail}"

    def warned(self, kind: str) -> bool:
        """Whether a step warned of ``kind`` (e.g. ``reconciliation``)."""
        return any(w["kind"] == kind for w in self.warnings)

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "failed_step": self.failed_step,
            "error": self.error,
            "warnings": self.warnings,
            "seconds": round(self.seconds, 3),
            "steps": self.steps,
            "recovered_from": self.recovered_from,
            "deliveries": self.deliveries,
            "audit_head": self.audit_head,
        }


def _short(value: Any) -> bool:
    return isinstance(value, int | float | str) and not isinstance(value, bool)


def load_steps(path: Path) -> list[Step]:
    """The ``STEPS`` list of a steps file (``pipelines/nightly.py``)."""
    if not path.exists():
        raise UserError(f"the pipeline's steps {path} are missing; run from a checkout of the repo")
    spec = importlib.util.spec_from_file_location("convo_nightly", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    steps: list[Step] = module.STEPS
    return steps


def check_steps(steps: Sequence[Step], settings: Settings) -> None:
    """Every step's configuration check, before anything is locked or recorded: a setting
    no run could work with (no API key, a URL without a scheme, a bad time zone) is a
    usage error (exit 2), not a failed run in ``pipeline_runs`` and an alert."""
    for step in steps:
        if step.check is not None:
            step.check(settings)
    check_alert_settings(settings)


def run_pipeline(steps: Sequence[Step], settings: Settings, lock: WriterLock) -> RunResult:
    """Run ``steps`` in order while ``lock`` (the warehouse writers' lock, taken by the
    caller for this run) is held; stop at the first failure.

    The steps open the warehouse themselves and never take the lock: they run in
    this process, under the lock their run holds.
    """
    result = RunResult(run_id=lock.run_id or new_run_id())
    db_path = settings.require_path("warehouse.path")
    if lock.previous and lock.previous.get("runId"):
        result.recovered_from = str(lock.previous["runId"])
        log.warning("the previous run %s ended without releasing its lock (killed?); "
                    "this run redoes what it left", result.recovered_from)  # fmt: skip
    started = datetime.now(UTC)
    clock = time.perf_counter()
    try:
        _record_start(db_path, result, started)
    except Exception as exc:  # e.g. the warehouse is held by another process
        result.failed_step, result.error = "start", _describe(exc)
        log.error("the run could not start: %s", result.error)
    ctx = RunContext(settings=settings, run_id=result.run_id, db_path=db_path)
    for step in steps if result.failed_step is None else ():
        log.info("step %s started", step.name)
        _hold_for_tests(step.name)
        step_clock = time.perf_counter()
        entry: dict[str, Any] = {"name": step.name, "status": "running", "counts": {}}
        result.steps.append(entry)
        warned = len(ctx.warnings)
        try:
            entry["counts"] = step.run(ctx)
            entry["status"] = "ok"
        except Exception as exc:  # a step's failure ends the run, recorded, not raised
            entry["status"] = "failed"
            entry["error"] = _describe(exc)
            result.failed_step = step.name
            result.error = entry["error"]
            log.error("step %s failed: %s", step.name, entry["error"])
        said = [{"step": step.name, **w} for w in ctx.warnings[warned:]]
        if said:
            entry["warnings"] = [w["message"] for w in said]
            result.warnings += said
            entry["status"] = "warning" if entry["status"] == "ok" else entry["status"]
        entry["seconds"] = round(time.perf_counter() - step_clock, 3)
        log.info("step %s %s in %.1f s", step.name, entry["status"], entry["seconds"])
        if result.failed_step:
            break
    for step in steps[len(result.steps) :]:
        result.steps.append({"name": step.name, "status": "skipped", "counts": {},
                             "seconds": 0.0})  # fmt: skip
    _record_audit_head(settings, result)
    result.status = "failed" if result.failed_step else "warning" if result.warnings else "ok"
    result.seconds = time.perf_counter() - clock
    if result.failed_step != "start":
        try:
            _record_end(db_path, result, ctx.notes.get("snapshot_id"))
        except Exception as exc:
            log.error("the run's record could not be written: %s", _describe(exc))
            result.status, result.failed_step = "failed", result.failed_step or "record"
            result.error = result.error or _describe(exc)
    # the alert (on failure or warning) and what earlier runs left pending; never raises
    result.deliveries = send_alert(settings, result.as_json())
    return result


#: A testing knob: the run stops at the start of the step this variable names (after
#: logging "step ... holding") for up to HOLD_SECONDS, so that a test can kill it inside
#: that step, or start a second run while it holds the lock, at a known moment.
HOLD_ENV = "CONVO_RUN_HOLD_STEP"
HOLD_SECONDS = 120.0


def _hold_for_tests(step: str) -> None:
    if os.environ.get(HOLD_ENV) == step:  # a warning: shown whatever the log level
        log.warning("step %s holding (%s is set)", step, HOLD_ENV)
        time.sleep(HOLD_SECONDS)


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:2000]


def _record_audit_head(settings: Settings, result: RunResult) -> None:
    """The audit trail's head now, recorded beside the log and kept for the run's record
    (``pipeline_runs.audit_head``, ``--json``), so that a log cut short later
    is found. A head that cannot be recorded is a warning of the run (the alert goes out)."""
    from convo_analytics.audit import AuditError, auditor

    if (audit := auditor(settings)) is None:
        return
    try:
        result.audit_head = str(audit.log.record_head(f"run {result.run_id}"))
    except AuditError as exc:
        log.warning("the audit trail's head was not recorded: %s", exc)
        result.warnings.append({"step": "record", "kind": "audit", "message": str(exc)})


def _record_start(db_path: Path, result: RunResult, started: datetime) -> None:
    con = open_warehouse(db_path)
    try:
        with transaction(con):
            con.execute("UPDATE pipeline_runs SET status = 'interrupted' WHERE status = 'running'")
            con.execute(
                "INSERT INTO pipeline_runs (run_id, started_at, status, steps, host, pid) "
                "VALUES (?, ?, 'running', '[]', ?, ?)",
                [result.run_id, started, socket.gethostname(), os.getpid()],
            )
    finally:
        con.close()


def _record_end(db_path: Path, result: RunResult, snapshot_id: object) -> None:
    con = open_warehouse(db_path)
    try:
        con.execute(
            "UPDATE pipeline_runs SET finished_at = now(), status = ?, failed_step = ?, "
            "steps = ?, duration_seconds = ?, error = ?, snapshot_id = ?, audit_head = ? "
            "WHERE run_id = ?",
            [result.status, result.failed_step, orjson.dumps(result.steps).decode(),
             result.seconds, result.error, snapshot_id, result.audit_head, result.run_id],
        )  # fmt: skip
    finally:
        con.close()
