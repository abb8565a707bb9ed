"""The benchmarks start: every bench module imports and registers, and the Explore limits
benchmark's measuring child runs at its quick size (``make bench`` gives the figures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent / "bench"


def test_every_bench_module_registers_its_benchmarks() -> None:
    done = subprocess.run([sys.executable, str(BENCH / "run.py"), "--list"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    names = subprocess.run(
        [sys.executable, "-c", "import importlib, json, sys; sys.path.insert(0, sys.argv[1]); "
         "run = importlib.import_module('run'); print(json.dumps([n for m in run.MODULES "
         "for n, _ in importlib.import_module(m).BENCHES]))", str(BENCH)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert names.returncode == 0, names.stderr
    assert done.stdout.split() == json.loads(names.stdout)
    assert "query-limits" in done.stdout.split()


def test_the_explore_limits_benchmark_starts(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_explore_limits.py"), "measure", str(tmp_path),
         "quick"],
        capture_output=True, text=True, timeout=600, cwd=BENCH.parents[1],
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    out = json.loads(line)["explore_limits"]
    assert len(out["alone"]) == 3 and len(out["together"]) == 2
    for label, got in out["alone"].items():
        assert got["stopped"] in ("time", "memory") and got["next_ok"], (label, got)
    assert out["app"]["peak_rss_mib"] > 0 and out["trivial"] > 0
