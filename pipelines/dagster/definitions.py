"""Workspaces as partitions on Dagster (issue 19; docs/scale-out.md says how to run it).

Every workspace is a partition of the dynamic partitions definition
``workspaces``, filled from the config's ``[[workspaces]]`` checked against the
token store's OAuth grants (the sensor ``workspace_partitions``, and the
first op of ``nightly_workspaces``). A workspace's partition runs the same
steps as ``convo run`` (``pipelines/nightly.py``) with the settings narrowed to
that workspace, writing its own shard ``shards/NAME.duckdb``: workers never
share a DuckDB writer. Retries (RetryPolicy), concurrency (the multiprocess
executor's ``max_concurrent``, the run queue's limits, the ``convo_lake`` pool)
and backfills are Dagster's; this module only says what a step is.

Two ways to run the same steps:

- ``workspace_partition``: the partitioned assets ``extract``, ``webhook_ingest``,
  ``transform``, ``monitors``, ``lake_publish`` and ``reports``, one run per workspace (a
  backfill launches many; the run queue caps them, one per workspace at a time);
- ``nightly_workspaces``: every runnable workspace in one run, fanned out
  (dynamic outputs) into ``workspace_night`` then ``workspace_publish`` per
  batch of ``orchestrator.batch_size`` workspaces (1: per workspace), so the
  multiprocess executor works on up to ``max_concurrent`` batches at once, then
  ``workspace_rollup``. A batch is one process start and one lake publish; a
  workspace that fails in it fails alone (D-SCALE-BATCH). It records
  materialisations of the same asset partitions, so both show in one place.

Every lake publish (the ``lake_publish`` asset, ``workspace_publish``) is in the
``convo_lake`` pool; a step waits ``orchestrator.step_lock_wait_seconds`` for a
held shard lock; the steps hand each other their outputs through
``orchestrator.step_storage`` (the ``io_manager`` resource). A failed run is
re-executed from its failure by ``pipelines/dagster/reexecute.py``.

Load with ``dagster dev -f pipelines/dagster/definitions.py`` (or
``-m pipelines.dagster.definitions`` from the repository's root); the
convo settings come from ``CONVO_CONFIG`` (or ``convo.toml`` in the working
folder), as for every ``convo`` command.
"""

import os
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from convo_analytics.config import Settings, load_settings
from convo_analytics.pipeline import (
    Step,
    load_steps,
    publish_shards,
    run_shard_step,
    shard_path,
    shard_workspaces,
)

_ROOT = Path(__file__).resolve().parents[2]
STEPS: dict[str, Step] = {s.name: s for s in load_steps(_ROOT / "pipelines" / "nightly.py")}

#: What a workspace's night is, in order: the partitioned assets' steps.
NIGHT = ("extract", "webhook_ingest", "transform", "monitors", "lake_publish", "reports")
WORKSPACES = dg.DynamicPartitionsDefinition(name="workspaces")
#: A failed step is tried twice more, 2 s then 4 s later (a rate limit's burst, a restart
#: of the service, a lost connection); a workspace that still fails fails alone.
RETRY = dg.RetryPolicy(max_retries=2, delay=2, backoff=dg.Backoff.EXPONENTIAL)
#: The pool of every lake publish (the ``lake_publish`` asset, the nightly job's
#: ``workspace_publish``; each commits once per lake table) in flight across all runs, to
#: spare the catalog: ``dagster instance concurrency set convo_lake N``.
LAKE_POOL = "convo_lake"
GROUP = "convo_workspaces"
#: The multiprocess executor's settings for the fan-out: three workspaces at once, each
#: step in a process forked from a server that has imported the heavy modules once.
EXECUTION: dict[str, Any] = {
    "max_concurrent": 3,
    "start_method": {
        "forkserver": {
            "preload_modules": [
                "dagster",
                "convo_analytics.extract",
                "convo_analytics.transform",
                "convo_analytics.webhooks",
            ]
        }
    },
}


#: Where steps run, chosen by the operator (docs/scale-out.md), never by a code change:
#: ``multiprocess`` (default: processes of this machine), ``k8s`` (a Kubernetes job per
#: step, dagster-k8s) or ``celery`` (Celery workers, dagster-celery).
EXECUTOR_ENV = "CONVO_DAGSTER_EXECUTOR"


def job_executor(in_process_too: bool = False) -> dg.ExecutorDefinition:
    """The executor ``CONVO_DAGSTER_EXECUTOR`` names (its run config: docs/scale-out.md);
    ``in_process_too``: multiprocess unless the run config says ``in_process`` (a run of
    one workspace by hand, without a process per step)."""
    kind = os.environ.get(EXECUTOR_ENV, "multiprocess")
    if kind == "k8s":
        from dagster_k8s import k8s_job_executor  # type: ignore[import-not-found]

        return k8s_job_executor  # type: ignore[no-any-return]
    if kind == "celery":
        from dagster_celery import celery_executor  # type: ignore[import-not-found]

        return celery_executor  # type: ignore[no-any-return]
    if kind != "multiprocess":
        raise dg.DagsterInvariantViolationError(
            f"{EXECUTOR_ENV}={kind!r}: use multiprocess, k8s or celery"
        )
    return dg.multi_or_in_process_executor if in_process_too else dg.multiprocess_executor


class ConvoSettings(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Where the convo settings come from: ``config_path`` (a convo.toml), else as every
    ``convo`` command finds them (``CONVO_CONFIG``, then ``convo.toml`` in the working
    folder). Read afresh in each step's process, so a fixed key file counts on a retry."""

    config_path: str | None = None

    def settings(self) -> Settings:
        """The settings, with a step's own wait for a held shard lock: a step that meets
        another writer (a ``convo`` command on the shard, a step of an earlier run not yet
        dead) waits ``orchestrator.step_lock_wait_seconds`` for it, where a command on the
        command line waits ``run.lock_wait_seconds`` (0) and its user tries again."""
        settings = load_settings(Path(self.config_path) if self.config_path else None, {})
        wait = settings.get_float("orchestrator.step_lock_wait_seconds")
        return settings.with_values({"run.lock_wait_seconds": wait},
                                    "orchestrator.step_lock_wait_seconds")  # fmt: skip


@dg.io_manager(required_resource_keys={"convo"})
def step_storage(context: dg.InitResourceContext) -> Any:
    """Where a run keeps what its steps hand each other (the nightly job's workspace names,
    from ``runnable_workspaces``' dynamic outputs): ``orchestrator.step_storage``, a folder
    every step's process can read (Dagster's ``FilesystemIOManager`` there) or
    ``s3://BUCKET/PREFIX`` (dagster-aws's ``S3PickleIOManager``); empty, Dagster's default
    (``DAGSTER_HOME/storage``), which a step on another host (a pod, a Celery worker) cannot
    read. A setting, so that moving the steps to other hosts needs no code change."""
    settings: Settings = context.resources.convo.settings()
    where = settings.get_str("orchestrator.step_storage")
    if where.startswith("s3://"):
        from dagster_aws.s3 import (  # type: ignore[import-not-found]
            S3PickleIOManager,
            S3Resource,
        )

        bucket, _, prefix = where.removeprefix("s3://").partition("/")
        return S3PickleIOManager(s3_resource=S3Resource(), s3_bucket=bucket,
                                 s3_prefix=prefix.strip("/") or "dagster")  # fmt: skip
    return dg.FilesystemIOManager(base_dir=where or None).create_io_manager(context)


def _run_step(step_name: str, settings: Settings, workspace: str, run_id: str) -> dict[str, str]:
    counts = run_shard_step(STEPS[step_name], settings, workspace, run_id)
    return {key: str(value) for key, value in counts.items()}


def lake_publish_counts(settings: Settings, workspace: str) -> dict[str, Any]:
    """Publish the workspace's shard (its typed tables and marts) into the shared lake:
    the (workspace, day) partitions whose rows changed replaced table by table, each
    commit retried when another worker's landed first (convo_analytics.lake)."""
    from convo_analytics.lake import LakeConfig, publish_lake
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(shard_path(settings, workspace), read_only=True)
    try:
        result = publish_lake(con, LakeConfig.from_settings(settings), [workspace])
    finally:
        con.close()
    return {"rows": result.rows, "tables_committed": sum(1 for t in result.tables if t.attempts),
            "partitions": sum(t.partitions for t in result.tables),
            "seconds": round(result.seconds, 3),
            "commit_attempts": sum(t.attempts for t in result.tables)}  # fmt: skip


def reports_counts(settings: Settings, workspace: str, run_id: str) -> dict[str, Any]:
    """Make the workspace's due [[reports]] reports over what readers read (the lake, with
    read.source = "lake"), write and send them, as `convo run`'s reports step does; a
    failed report is recorded and alerted, never fails the asset."""
    from convo_analytics.reports import run_reports

    return run_reports(settings, run_id, workspaces=[workspace])


#: The counts the rollup adds up, per time zone and day (mart_daily_conversations' columns).
ROLLUP_COUNTS = ("conversations", "engaged_conversations", "resolved", "abandoned", "open",
                 "escalated_conversations", "contained_conversations", "leads_qualified",
                 "feedback_count", "positive_feedback", "rating_sum")  # fmt: skip


def build_rollup(settings: Settings) -> dict[str, Any]:
    """Write ``shards/_rollup.duckdb``: ``workspace_rollup``, the daily conversation counts of
    every workspace in the lake added up per time zone and day (with how many workspaces
    had any), from the lake's ``mart_daily_conversations``; replaced whole, so a reader
    sees one night's totals or the previous ones."""
    import os

    from convo_analytics.lake import LakeConfig, read_lake

    target = shard_path(settings, "rollup").with_name("_rollup.duckdb")  # '_': not a name
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    lake = read_lake(LakeConfig.from_settings(settings), tables=["mart_daily_conversations"])
    try:
        sums = ", ".join(f"sum({c})::BIGINT AS {c}" for c in ROLLUP_COUNTS)
        lake.execute(f"ATTACH '{partial}' AS out")
        lake.execute(
            "CREATE TABLE out.workspace_rollup AS SELECT timezone, date, "
            f"count(DISTINCT workspace_id)::BIGINT AS workspaces, {sums} "
            "FROM mart_daily_conversations GROUP BY timezone, date ORDER BY timezone, date"
        )
        [(workspaces, days, total)] = lake.execute(
            "SELECT count(DISTINCT workspace_id), count(DISTINCT date), "
            "coalesce(sum(conversations), 0) FROM mart_daily_conversations "
            "WHERE timezone = (SELECT min(timezone) FROM mart_daily_conversations)"
        ).fetchall()
        lake.execute("DETACH out")
    finally:
        lake.close()
    if not workspaces:
        partial.unlink(missing_ok=True)
        raise dg.Failure("the lake holds no marts to roll up: publish the workspaces first")
    os.replace(partial, target)
    return {"workspaces": int(workspaces), "days": int(days), "conversations": int(total),
            "path": str(target)}  # fmt: skip


# -- the partitioned assets: one run per workspace ------------------------------------


def _shard_asset(step_name: str, upstream: str | None) -> dg.AssetsDefinition:
    step = STEPS[step_name]

    @dg.asset(
        name=step_name,
        partitions_def=WORKSPACES,
        deps=[upstream] if upstream else [],
        description=step.doc,
        group_name=GROUP,
        retry_policy=RETRY,
    )
    def _materialise(
        context: dg.AssetExecutionContext, convo: ConvoSettings
    ) -> dg.MaterializeResult:
        counts = _run_step(step_name, convo.settings(), context.partition_key, context.run.run_id)
        return dg.MaterializeResult(metadata=counts)

    return _materialise


@dg.asset(
    name="lake_publish",
    partitions_def=WORKSPACES,
    deps=["monitors"],
    description=lake_publish_counts.__doc__,
    group_name=GROUP,
    retry_policy=RETRY,
    pool=LAKE_POOL,
)
def lake_publish(context: dg.AssetExecutionContext, convo: ConvoSettings) -> dg.MaterializeResult:
    counts = lake_publish_counts(convo.settings(), context.partition_key)
    return dg.MaterializeResult(metadata={k: str(v) for k, v in counts.items()})


@dg.asset(
    name="reports",
    partitions_def=WORKSPACES,
    deps=["lake_publish"],
    description=reports_counts.__doc__,
    group_name=GROUP,
)
def reports(context: dg.AssetExecutionContext, convo: ConvoSettings) -> dg.MaterializeResult:
    counts = reports_counts(convo.settings(), context.partition_key, context.run.run_id)
    return dg.MaterializeResult(metadata={k: str(v) for k, v in counts.items()})


@dg.asset(
    name="workspace_rollup",
    deps=["lake_publish"],
    description="Totals across every workspace, from each workspace's published marts.",
    group_name=GROUP,
)
def workspace_rollup(convo: ConvoSettings) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata=build_rollup(convo.settings()))


ASSETS = [
    _shard_asset("extract", None),
    _shard_asset("webhook_ingest", "extract"),
    _shard_asset("transform", "webhook_ingest"),
    _shard_asset("monitors", "transform"),
    lake_publish,
    reports,
    workspace_rollup,
]
workspace_partition = dg.define_asset_job(
    "workspace_partition",
    selection=dg.AssetSelection.assets(*NIGHT),
    description="One workspace's night: its partition of each asset, in its own shard.",
)


@dg.sensor(minimum_interval_seconds=300, default_status=dg.DefaultSensorStatus.RUNNING)
def workspace_partitions(
    context: dg.SensorEvaluationContext, convo: ConvoSettings
) -> dg.SensorResult:
    """Keep the ``workspaces`` partitions equal to the runnable workspaces: the config's
    ``[[workspaces]]``, OAuth ones once ``convo auth login`` has stored their grant."""
    found = shard_workspaces(convo.settings())
    have = set(context.instance.get_dynamic_partitions(WORKSPACES.name))
    add = [n for n in found.runnable if n not in have]
    drop = sorted(have - set(found.runnable))
    requests = []
    if add:
        requests.append(WORKSPACES.build_add_request(add))
    if drop:
        requests.append(WORKSPACES.build_delete_request(drop))
    return dg.SensorResult(dynamic_partitions_requests=requests)


# -- the fan-out: every workspace in one run, max_concurrent at a time -----------------


def _mapping_key(name: str, used: set[str]) -> str:
    key = re.sub(r"[^A-Za-z0-9_]", "_", name)
    while key in used:  # 'a-b' and 'a_b' both map to a_b: keep them apart
        key += "_"
    used.add(key)
    return key


def batches(names: Sequence[str], size: int) -> list[tuple[str, list[str]]]:
    """The workspaces cut into batches of ``size`` (``orchestrator.batch_size``), in order,
    each with its mapping key: a batch of one is the workspace's name (as a step per
    workspace always was: ``workspace_night[north]``), a longer one its first workspace's
    and how many it holds (``workspace_night[north__3]``: north and the next two)."""
    used: set[str] = set()
    cut = [list(names[i : i + size]) for i in range(0, len(names), size)]
    return [(_mapping_key(b[0] if len(b) == 1 else f"{b[0]}__{len(b)}", used), b) for b in cut]


@dg.op(out=dg.DynamicOut(list))
def runnable_workspaces(context: dg.OpExecutionContext, convo: ConvoSettings) -> Any:
    """Every runnable workspace (registered as a partition), in batches of
    ``orchestrator.batch_size``, one output each."""
    settings = convo.settings()
    found = shard_workspaces(settings)
    if found.awaiting_login:
        context.log.warning(f"not run, no OAuth grant yet (convo auth login --workspace NAME): "
                            f"{', '.join(found.awaiting_login)}")  # fmt: skip
    if found.unconfigured_grants:
        context.log.warning(f"grants without a [[workspaces]] entry, not run: "
                            f"{', '.join(found.unconfigured_grants)}")  # fmt: skip
    have = set(context.instance.get_dynamic_partitions(WORKSPACES.name))
    if new := [n for n in found.runnable if n not in have]:
        context.instance.add_dynamic_partitions(WORKSPACES.name, new)
    size = settings.get_int("orchestrator.batch_size")
    for key, batch in batches(found.runnable, size):
        yield dg.DynamicOutput(batch, mapping_key=key)


#: The parts of a workspace's night in ``workspace_night`` (one step: one process start);
#: the rest, the lake publish and the reports that read it, are ``workspace_publish``.
SHARD_NIGHT = NIGHT[: NIGHT.index("lake_publish")]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


def _night(
    context: dg.OpExecutionContext, settings: Settings, workspace: str
) -> list[dg.AssetMaterialization] | Exception:
    """One workspace's extract, webhook ingest, transform and monitors on its shard: their
    materialisations, for the caller to log (all four succeeded), or what it raised
    (logged; nothing of it is materialised)."""
    done = []
    try:
        for step_name in SHARD_NIGHT:
            counts = _run_step(step_name, settings, workspace, context.run_id)
            done.append(dg.AssetMaterialization(asset_key=step_name, partition=workspace,
                                                metadata=counts))  # fmt: skip
    except Exception as exc:
        context.log.error(f"workspace {workspace}: its night failed at {SHARD_NIGHT[len(done)]}"
                          f": {_one_line(exc)}")  # fmt: skip
        return exc
    return done


def _retry_delays() -> list[float]:
    """The waits before each try again of a failed workspace in its step: RETRY's (2 s,
    then 4 s)."""
    delay = float(RETRY.delay or 0)
    return [delay * 2**n for n in range(RETRY.max_retries)]


@dg.op(retry_policy=RETRY)
def workspace_night(
    context: dg.OpExecutionContext,
    convo: ConvoSettings,
    workspaces: list,  # type: ignore[type-arg]
) -> dict:  # type: ignore[type-arg]
    """The batch's workspaces' extract, webhook ingest, transform and monitors, each on its
    shard, one after another in one step (one process start for the batch; every part is
    safe to repeat: a retry redoes them cheaply, the loads skip what they already hold).
    A workspace whose night fails is logged and tried again alone, after the others, on
    RETRY's schedule; one that still fails is handed to ``workspace_publish`` as failed
    (its materialisations never logged), so the rest of the batch is published. When no
    workspace of the batch got through, the step fails (a batch of one: with what it
    raised), for RETRY to try them all again."""
    settings = convo.settings()
    names = [str(n) for n in workspaces]

    def nights(which: list[str]) -> dict[str, Exception]:
        failed = {}
        for name in which:
            outcome = _night(context, settings, name)
            if isinstance(outcome, Exception):
                failed[name] = outcome
            else:
                for event in outcome:
                    context.log_event(event)
        return failed

    failed = nights(names)
    if len(failed) == len(names):
        if len(names) == 1:
            raise failed[names[0]]
        each = "; ".join(f"{n}: {_one_line(e)}" for n, e in failed.items())
        raise dg.Failure(description=f"every workspace of the batch failed its night: {each}")
    for wait in _retry_delays():
        if not failed:
            break
        time.sleep(wait)
        failed = nights(list(failed))
    return {"workspaces": names, "done": [n for n in names if n not in failed],
            "failed": {n: _one_line(e) for n, e in failed.items()}}  # fmt: skip


@dg.op(retry_policy=RETRY, pool=LAKE_POOL, out=dg.Out(list))
def workspace_publish(
    context: dg.OpExecutionContext,
    convo: ConvoSettings,
    night: dict,  # type: ignore[type-arg]
) -> Iterator[Any]:
    """The shards of the batch's workspaces whose night succeeded published into the lake in
    one publish (one commit per changed table for the batch:
    ``convo_analytics.pipeline.publish_shards``), then their due reports (which read the
    lake): a step of its own in the ``convo_lake`` pool, so the pool's limit caps the
    nightly job's publishes as it caps the ``lake_publish`` asset's (a report sent is not
    sent again on a retry).

    The step then fails naming only the workspaces that did not get through: a night that
    failed (not retried again here: ``workspace_night`` did), or a publish that failed
    (a shard unreadable: the others published without it; retried by RETRY). Re-executed
    from that failure, it first redoes the failed nights, alone; the others' publish is
    then a no-op (nothing of theirs changed) and their reports are not sent again.
    (A generator: the materialisations of the workspaces published are yielded before the
    step fails, where ``context.log_event``'s would be lost with it.)"""
    settings = convo.settings()
    done = [str(n) for n in night["done"]]
    failed_nights = {str(n): str(e) for n, e in night["failed"].items()}
    if failed_nights and context.run.parent_run_id is not None:  # a re-execution
        for name in list(failed_nights):
            outcome = _night(context, settings, name)
            if isinstance(outcome, Exception):
                failed_nights[name] = _one_line(outcome)
                continue
            yield from outcome
            done.append(name)
            del failed_nights[name]
    published = publish_shards(settings, done) if done else None
    if published is not None:
        counts = {k: str(v) for k, v in published.counts.items()}
        counts["batch"] = ", ".join(published.published)
        for workspace in published.published:
            yield dg.AssetMaterialization(asset_key="lake_publish", partition=workspace,
                                          metadata=counts)  # fmt: skip
        for workspace in published.published:
            sent = reports_counts(settings, workspace, context.run_id)
            metadata = {k: str(v) for k, v in sent.items()}
            yield dg.AssetMaterialization(asset_key="reports", partition=workspace,
                                          metadata=metadata)  # fmt: skip
        if len(night["workspaces"]) == 1 and published.failed:
            raise next(iter(published.failed.values()))  # a batch of one: as it always was
    if failed_nights:
        raise dg.Failure(
            description="workspaces whose night failed (the rest of the batch is published; "
            "re-execute the run from its failure to redo them alone): "
            + "; ".join(f"{n}: {e}" for n, e in failed_nights.items()),
            allow_retries=False,  # workspace_night tried them again already
        )
    if published is not None and published.failed:
        raise dg.Failure(description="workspaces not published (the rest of the batch is): "
                         + "; ".join(f"{n}: {_one_line(e)}"
                                     for n, e in published.failed.items()))  # fmt: skip
    yield dg.Output(done)


@dg.op
def rollup(
    context: dg.OpExecutionContext,
    convo: ConvoSettings,
    workspaces: list,  # type: ignore[type-arg]
) -> None:
    """The cross-workspace totals, once every workspace's shard is published."""
    metadata = build_rollup(convo.settings())
    context.log_event(dg.AssetMaterialization(asset_key="workspace_rollup", metadata=metadata))


@dg.job(
    executor_def=job_executor(),
    config=None
    if os.environ.get(EXECUTOR_ENV, "multiprocess") != "multiprocess"
    else {"execution": {"config": EXECUTION}},
    description="Every runnable workspace's night, up to max_concurrent at once, then the "
    "cross-workspace rollup.",
)
def nightly_workspaces() -> None:
    done = runnable_workspaces().map(lambda ws: workspace_publish(workspace_night(ws)))
    rollup(done.collect())


defs = dg.Definitions(
    assets=ASSETS,
    jobs=[workspace_partition, nightly_workspaces],
    sensors=[workspace_partitions],
    schedules=[dg.ScheduleDefinition(job=nightly_workspaces, cron_schedule="15 2 * * *")],
    resources={"convo": ConvoSettings(), "io_manager": step_storage},
    executor=job_executor(in_process_too=True),
)


def job_named(name: str) -> dg.JobDefinition:
    """Job ``name`` of ``defs``, its resources bound: what ``dg.build_reconstructable_job``
    calls in each step's process to load the job again (pipelines/dagster/reexecute.py)."""
    return defs.resolve_job_def(name)
