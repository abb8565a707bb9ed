"""Run the benchmark suite (``make bench``): each benchmark prints its figures and sizes.

Bench modules live next to this file and list ``BENCHES = [(name, callable)]``;
a callable takes a :class:`BenchContext` and fills in the :class:`Report` it is
given (so that the figures measured before a failure are still shown). To add
a module, append its name to ``MODULES``. At the end a table sums up every
figure, and the run is written to data/bench/results.json for comparisons.

    uv run python tests/bench/run.py [--only NAME] [--quick | --smoke] [--list]

``--smoke`` runs each benchmark once at its smallest sizes: what tests/test_bench.py
does, so that a benchmark cannot break unseen. Its figures measure nothing.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# The bench directory is on sys.path (run.py is run as a script), so siblings import.
from _common import (
    Bench,
    BenchContext,
    BenchResult,
    Report,
    console,
    print_result,
    print_summary,
    write_results,
)

#: Bench modules, in the order they run. Later: bench_ingest, ...
MODULES = [
    "bench_sandbox",
    "bench_receiver",
    "bench_extract",
    "bench_ingest",
    "bench_transform",
    "bench_dashboard",
    "bench_explore",
    "bench_explore_limits",
    "bench_dagster",
    "bench_lake",
    "bench_topics",
    "bench_topic_page",
    "bench_monitors",
    "bench_privacy",
]


def declared_names(module: str) -> list[str] | None:
    """The benchmark names ``module`` lists in BENCHES, read from its source (not imported);
    None when they are not written out as literals."""
    path = Path(__file__).resolve().parent / f"{module}.py"
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "BENCHES" for t in node.targets
        ):
            if not isinstance(node.value, ast.List):
                return None
            names = []
            for entry in node.value.elts:
                if not (isinstance(entry, ast.Tuple) and isinstance(entry.elts[0], ast.Constant)):
                    return None
                names.append(str(entry.elts[0].value))
            return names
    return None


def load_benches(only: list[str] | None = None) -> list[Bench]:
    """Every module's benchmarks; with ``only``, just the modules that declare a matching one
    (a smoke run of one benchmark does not import the others' dependencies)."""
    benches: list[Bench] = []
    for name in MODULES:
        declared = declared_names(name) if only else None
        if declared is not None and not any(part in n for n in declared for part in only or []):
            continue
        module = importlib.import_module(name)
        benches.extend(module.BENCHES)
    return benches


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run only benchmarks whose name contains NAME (repeatable)",
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a quick look")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest sizes: does each benchmark still run? (its figures measure nothing)",
    )
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    benches = load_benches(args.only)
    if args.only:
        benches = [b for b in benches if any(part in b[0] for part in args.only)]
    if args.list or not benches:
        for name, _ in benches:
            print(name)
        if not benches:
            print(f"no benchmark matches --only {' '.join(args.only or [])}", file=sys.stderr)
            return 2
        return 0
    ctx = BenchContext(quick=args.quick or args.smoke, smoke=args.smoke)
    mode = ctx.size("full sizes", "quick sizes", "smoke sizes (figures measure nothing)")
    console.print(f"running {len(benches)} benchmark(s), {mode}")
    results: list[BenchResult] = []
    started = time.perf_counter()
    interrupted = False
    for name, bench in benches:
        console.rule(name)
        report = Report()
        bench_started = time.perf_counter()
        error = None
        try:
            bench(ctx, report)
        except KeyboardInterrupt:
            error, interrupted = "interrupted", True
        except Exception as exc:
            traceback.print_exc()
            error = f"{type(exc).__name__}: {exc}"
        result = BenchResult(name, time.perf_counter() - bench_started, report, error)
        results.append(result)
        print_result(result)
        if interrupted:
            break
    total = time.perf_counter() - started
    console.rule()
    print_summary(results, total)
    path = write_results(
        results, {"only": args.only, "quick": args.quick, "smoke": args.smoke}, total
    )
    console.print(f"total wall time {total:.1f} s; results written to {path}")
    if interrupted:
        return 130
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
