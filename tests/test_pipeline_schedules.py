"""The scheduling examples load: the crontab line, the systemd unit and timer, the Dagster defs."""

from __future__ import annotations

import configparser
import importlib.util
import shlex
import shutil
import subprocess
from pathlib import Path

from convo_analytics.cli._run_cmd import NIGHTLY
from convo_analytics.pipeline import load_steps

SCHEDULES = Path(__file__).resolve().parent.parent / "pipelines" / "schedules"
STEP_NAMES = [s.name for s in load_steps(NIGHTLY)]


def test_the_crontab_line_runs_convo_run_nightly() -> None:
    entries = [
        line for line in (SCHEDULES / "crontab").read_text().splitlines()
        if line.strip() and not line.startswith("#") and "=" not in line.split()[0]
    ]  # fmt: skip
    (entry,) = entries
    fields = entry.split(None, 5)
    minute, hour, day, month, weekday, command = fields
    assert (minute, hour, day, month, weekday) == ("15", "2", "*", "*", "*")
    assert 0 <= int(minute) < 60 and 0 <= int(hour) < 24
    words = shlex.split(command)
    assert "run" in words and any(w.endswith("convo") for w in words)


def _unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((SCHEDULES / name).read_text())
    return parser


def test_the_systemd_service_and_timer() -> None:
    service, timer = _unit("convo-nightly.service"), _unit("convo-nightly.timer")
    command = shlex.split(service["Service"]["ExecStart"])
    assert command[0].endswith("/convo") and command[1] == "run"
    assert service["Service"]["Type"] == "oneshot"
    assert "75" in service["Service"]["SuccessExitStatus"].split()
    calendar = timer["Timer"]["OnCalendar"]
    assert timer["Install"]["WantedBy"] == "timers.target"
    analyze = shutil.which("systemd-analyze")
    if analyze:  # where systemd's tools exist, they must accept the calendar too
        done = subprocess.run([analyze, "calendar", calendar], capture_output=True, timeout=30)
        assert done.returncode == 0, done.stderr


def test_the_dagster_definitions_load_with_one_asset_per_step() -> None:
    spec = importlib.util.spec_from_file_location("dagster_defs", SCHEDULES / "dagster_defs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    keys = [a.key.to_user_string() for a in module.ASSETS]
    assert keys == STEP_NAMES
    job = module.defs.resolve_job_def("convo_nightly")
    assert job.name == "convo_nightly"
    (schedule,) = module.defs.schedules
    assert schedule.cron_schedule == "15 2 * * *"
    deps = {a.key.to_user_string(): [d.to_user_string() for d in a.dependency_keys]
            for a in module.ASSETS}  # fmt: skip
    assert deps["transform"] == ["webhook_ingest"] and deps["extract"] == []
