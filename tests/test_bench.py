"""Every benchmark runs: each one set up and run once at its smallest sizes.

``make bench`` is run by hand, so a benchmark that no longer ran (the two
extraction benchmarks of issue 25 set up the runner without what ``run()``
had come to set) went unseen until someone measured. Here each benchmark runs
as ``make bench`` runs it (``tests/bench/run.py``, a child process), once,
with ``--smoke`` (its smallest sizes: the figures measure nothing), its
files in a temporary folder (``BENCH_DATA_DIR``). The readers' benchmarks
(``SHARED_DATA``) share one folder, as they share data/bench/ in ``make bench``:
the synthetic warehouse they read is built and transformed once, by the first of
them to run in this process, and the others find it kept (as a second ``make
bench`` does; the transform itself is the transform benchmark's). The dlt comparison needs
the bench dependency group: ``make test`` runs with it (``make test-bench``
runs this file alone; decision D-BENCH-SMOKE).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tests" / "bench"

pytestmark = pytest.mark.bench


def _literal(path: Path, name: str) -> list[object]:
    """The list assigned to ``name`` at the top of ``path`` (read, not imported: cheap
    enough for collection, and it imports no benchmark's heavy dependencies)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            assert isinstance(node.value, ast.List), f"{path.name}: {name} is not a list"
            return list(node.value.elts)
    raise AssertionError(f"{path.name} has no {name}")


def bench_names() -> list[str]:
    """Every benchmark's name, in run.py's order: its MODULES, each one's BENCHES."""
    names = []
    for module in _literal(BENCH / "run.py", "MODULES"):
        assert isinstance(module, ast.Constant)
        for entry in _literal(BENCH / f"{module.value}.py", "BENCHES"):
            assert isinstance(entry, ast.Tuple) and isinstance(entry.elts[0], ast.Constant)
            names.append(str(entry.elts[0].value))
    return names


#: Benchmarks that read transform_data.synthetic_warehouse at the same size, and keep it.
SHARED_DATA = ("dashboard", "explore", "topic-page")


@pytest.fixture(scope="module")
def shared_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data folder for SHARED_DATA in this (xdist worker) process: its tests run one
    after another, so they never use the kept warehouse at once."""
    return tmp_path_factory.mktemp("bench-shared")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    env["BENCH_DATA_DIR"] = str(tmp_path)
    return env


def test_every_benchmark_is_run_here(tmp_path: Path) -> None:
    """`run.py --list` (every module imported, each one's BENCHES) names exactly the
    benchmarks the modules' BENCHES literals declare, in order: what ``--only`` reads without
    importing, and what the smoke runs below are parametrized by."""
    listed = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--list"], cwd=ROOT, env=_env(tmp_path),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert listed.stdout.split() == bench_names()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", bench_names())
def test_the_benchmark_runs_at_its_smallest_sizes(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    folder = request.getfixturevalue("shared_data") if name in SHARED_DATA else tmp_path
    (folder / "results.json").unlink(missing_ok=True)  # a shared folder's, from the last run
    done = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--smoke", "--only", name], cwd=ROOT,
        env=_env(folder), capture_output=True, text=True, timeout=850,
    )  # fmt: skip
    output = (done.stdout + done.stderr)[-6000:]
    assert (folder / "results.json").exists(), output
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))["results"]
    assert [r["name"] for r in results] == [name], "--only matched other benchmarks: rename"
    (result,) = results
    assert result["error"] is None and done.returncode == 0, output
    assert result["figures"], output
    skipped = [f["value"] for f in result["figures"] if str(f["value"]).startswith("skipped")]
    assert not skipped, f"{skipped}: install the bench group (make test-bench does)"
    if name in MORE:
        MORE[name](result["figures"])


def _query_limits(figures: list[dict[str, Any]]) -> None:
    """Explore's limits at the smoke size (a 1 s time limit): each of the three queries alone
    was stopped, by time or by memory, and the next query answered right after; both
    hostile queries ran at once; the app's peak and a warm round trip were measured."""
    metrics = [f["metric"] for f in figures]
    alone = [i for i, m in enumerate(metrics) if ", 1 s limit: stopped by " in m]
    assert len(alone) == 3, metrics
    for i in alone:  # each is followed by its process's peak, then the next query's trip
        assert metrics[i].endswith(("stopped by time after", "stopped by memory after")), metrics
        assert metrics[i + 2] == "... the next query's round trip" and figures[i + 2]["ok"]
    together = [
        m for m in metrics if m.startswith("both at once: ") and m.endswith(") process peak")
    ]
    assert len(together) == 2, metrics  # each hostile query's process: "<label> (<stopped>)"
    shown = {f["metric"]: f["value"] for f in figures}
    assert shown["both at once: app process peak"] > 0
    assert shown["anchor: SELECT 1 through a warm query process"] > 0


#: What a benchmark's smoke run must show beyond having figures (its name: a check of them).
MORE = {"query-limits": _query_limits}
