"""Shared pieces of the benchmark suite: results, timing, memory, child processes, output.

Benchmarks run their heavy parts in child processes on purpose: a child's peak
RSS (``VmHWM``) is its own, whereas the parent's high-water mark would mix all
benchmarks together, and a server in its own process does not share a GIL with
the client that measures it. Every wait here takes a timeout, so that a stuck
server ends a benchmark with an error instead of hanging ``make bench``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from rich.console import Console

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parents[1]
#: Where benchmarks keep what they build once (archives, synthetic warehouses) and their
#: results; BENCH_DATA_DIR moves it (tests/test_bench.py: a temporary folder).
DATA_DIR = Path(os.environ.get("BENCH_DATA_DIR") or REPO_ROOT / "data" / "bench")
RESULTS_PATH = DATA_DIR / "results.json"
#: Benchmarks talk to this host only; :func:`local_client` refuses anything else.
LOOPBACK = "127.0.0.1"

#: Piped output (make bench | tee) gets 140 columns rather than rich's default of 80,
#: so that the summary table stays one line per figure.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 140)

Scalar = int | float | str | bool | None


# -- results ------------------------------------------------------------------------


@dataclass
class Figure:
    """One measured number, with its unit and, where the project states one, its target."""

    metric: str
    value: Scalar
    unit: str = ""
    target: str = ""
    #: Whether the target was met (None: no target, or not comparable).
    ok: bool | None = None


@dataclass
class Report:
    """What a benchmark hands back: the sizes it ran on, its figures and any remarks."""

    sizes: dict[str, Scalar] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(
        self,
        metric: str,
        value: Scalar,
        unit: str = "",
        target: str = "",
        ok: bool | None = None,
    ) -> Figure:
        fig = Figure(metric, value, unit, target, ok)
        self.figures.append(fig)
        return fig

    def note(self, text: str) -> None:
        self.notes.append(text)


@dataclass
class BenchResult:
    """A finished benchmark as run.py records it (also the shape of results.json)."""

    name: str
    seconds: float
    report: Report
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seconds": round(self.seconds, 3),
            "error": self.error,
            "sizes": self.report.sizes,
            "figures": [asdict(f) for f in self.report.figures],
            "notes": self.report.notes,
        }


@dataclass(frozen=True)
class BenchContext:
    """What every benchmark is given: the sizes to run at.

    Full sizes by default, smaller ones with ``--quick``, and the smallest with
    ``--smoke``: each benchmark set up and run once, end to end, so that
    tests/test_bench.py can show it still runs; smoke figures measure nothing.
    """

    quick: bool
    smoke: bool = False

    def size(self, full: Any, quick: Any, smoke: Any) -> Any:
        """The value for this run's sizes."""
        return smoke if self.smoke else quick if self.quick else full


#: The registry entry each bench module lists in ``BENCHES``: a name, and a callable
#: that fills in the Report it is given (figures measured before a failure survive).
Bench = tuple[str, Callable[[BenchContext, Report], None]]


# -- numbers ------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else math.nan


class Deadline:
    """A time budget for a loop, so that every loop is bounded in time as well as count."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.end

    def check(self, what: str) -> None:
        if self.expired():
            raise TimeoutError(f"{what} did not finish within {self.seconds:g} s")


# -- memory -------------------------------------------------------------------------


def memory_mib() -> dict[str, float]:
    """This process's current (VmRSS) and peak (VmHWM) resident memory, in MiB.

    Read from /proc where there is one; elsewhere ru_maxrss stands in for both
    (it is only the peak, in KiB on Linux and bytes on macOS).
    """
    status = Path("/proc/self/status")
    if status.exists():
        out: dict[str, float] = {}
        for line in status.read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                out[name] = int(rest.split()[0]) / 1024
        if len(out) == 2:
            return {"rss_mib": out["VmRSS"], "peak_rss_mib": out["VmHWM"]}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak_mib = peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024
    return {"rss_mib": peak_mib, "peak_rss_mib": peak_mib}


# -- child processes ----------------------------------------------------------------


def child_env(**extra: str) -> dict[str, str]:
    """The environment for children: ours without CONVO_* settings.

    A developer's CONVO_* variables (or a convo.toml picked up through
    CONVO_CONFIG) would change what is measured; children also run in a
    temporary directory so that ./convo.toml is not read either.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    env.update(extra)
    return env


class Child:
    """A child process whose stdout lines are read with timeouts (by a reader thread)."""

    def __init__(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
        self.argv = list(argv)
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            self.argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[tuple[float, str | None]] = queue.Queue()
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, name="child-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put((time.perf_counter(), line.rstrip("\n")))
        self.lines.put((time.perf_counter(), None))

    def wait_for(self, accept: Callable[[str], bool], timeout: float) -> tuple[float, str]:
        """The first line ``accept`` takes and when it arrived (seconds since launch)."""
        deadline = Deadline(timeout)
        while True:
            try:
                at, line = self.lines.get(timeout=max(0.01, deadline.remaining()))
            except queue.Empty:
                raise TimeoutError(
                    self._explain(f"no expected line within {timeout:g} s")
                ) from None
            if line is None:
                raise RuntimeError(self._explain("the child exited before the expected line"))
            self.output.append(line)
            if accept(line):
                return at - self.started, line
            deadline.check("waiting for the child's output")

    def json_line(self, key: str, timeout: float) -> dict[str, Any]:
        """The next JSON object line of the child that has ``key``."""

        def is_ours(line: str) -> bool:
            return line.startswith("{") and f'"{key}"' in line

        _, line = self.wait_for(is_ours, timeout)
        data: dict[str, Any] = json.loads(line)
        return data

    def _explain(self, problem: str) -> str:
        tail = "\n".join(self.output[-20:])
        return f"{problem}: {' '.join(self.argv[1:4])} ...\n{tail}"

    def stop(self, sig: int = signal.SIGINT, timeout: float = 15.0) -> int:
        """Ask the child to end (signal, or EOF on stdin); kill it if it does not."""
        if self.proc.poll() is None:
            if sig == 0:
                with contextlib.suppress(OSError):
                    assert self.proc.stdin is not None
                    self.proc.stdin.close()
            else:
                self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=5)
        finally:
            self._reader.join(timeout=2)
            while True:
                try:
                    _, line = self.lines.get_nowait()
                except queue.Empty:
                    break
                if line is not None:
                    self.output.append(line)

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)


def python_child(script: Path, args: Sequence[str], cwd: Path) -> Child:
    """Run a bench module's child role: ``python script ROLE ARGS...``."""
    return Child([sys.executable, str(script), *args], cwd=cwd, env=child_env())


def emit(data: Mapping[str, Any]) -> None:
    """Print one JSON line for the parent (children only), flushed at once."""
    print(json.dumps(data), flush=True)


# -- HTTP ---------------------------------------------------------------------------


def check_local(url: str) -> str:
    """The URL, if it points at 127.0.0.1: benchmarks must not send traffic elsewhere."""
    host = urlsplit(url).hostname
    if host != LOOPBACK:
        raise ValueError(f"benchmarks only talk to {LOOPBACK}, not {url!r}")
    return url


def local_client(base_url: str, key: str | None = None, timeout: float = 30.0) -> httpx.Client:
    """A keep-alive client for a local server; trust_env=False so no proxy is ever used."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(
        base_url=check_local(base_url), headers=headers, timeout=timeout, trust_env=False
    )


def local_async_client(
    base_url: str, key: str | None, concurrency: int, timeout: float = 30.0
) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx.AsyncClient(
        base_url=check_local(base_url),
        headers=headers,
        timeout=timeout,
        limits=limits,
        trust_env=False,
    )


# -- output -------------------------------------------------------------------------


def fmt(value: Scalar) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.1f}"
        return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"
    return value


def fmt_sizes(sizes: Mapping[str, Scalar]) -> str:
    return ", ".join(f"{k}={fmt(v)}" for k, v in sizes.items())


def print_result(result: BenchResult) -> None:
    """One benchmark's figures and sizes, printed as soon as it finishes."""
    report = result.report
    status = "[red]FAILED[/red]" if result.error else "done"
    console.print(f"[bold]{result.name}[/bold] {status} in {result.seconds:.1f} s")
    if report.sizes:
        console.print(f"  sizes: {fmt_sizes(report.sizes)}")
    for fig in report.figures:
        target = ""
        if fig.target:
            verdict = {True: "met", False: "[red]MISSED[/red]", None: ""}[fig.ok]
            target = f"   (target {fig.target}{', ' + verdict if verdict else ''})"
        console.print(f"  {fig.metric:<46} {fmt(fig.value):>12} {fig.unit}{target}")
    for text in report.notes:
        console.print(f"  note: {text}")
    if result.error:
        console.print(f"  [red]error:[/red] {result.error}")


def print_summary(results: Sequence[BenchResult], total_seconds: float) -> None:
    """The closing table of every figure; the sizes each bench ran on are under its name."""
    from rich.table import Table

    table = Table(title=f"benchmarks ({total_seconds:.1f} s wall)")
    table.add_column("bench (sizes)", max_width=44)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("unit")
    table.add_column("target")
    for result in results:
        head = [result.name, *(f"[dim]{k}={fmt(v)}[/dim]" for k, v in result.report.sizes.items())]
        rows: list[tuple[str, str, str, str]] = []
        if result.error:
            rows.append(("[red]error[/red]", "", "", result.error[:60]))
        for fig in result.report.figures:
            target = fig.target
            if fig.ok is not None:
                target += " ✓" if fig.ok else " [red]✗[/red]"
            rows.append((fig.metric, fmt(fig.value), fig.unit, target))
        for i in range(max(len(rows), len(head))):
            metric, value, unit, target = rows[i] if i < len(rows) else ("", "", "", "")
            table.add_row(head[i] if i < len(head) else "", metric, value, unit, target)
        table.add_section()
    console.print(table)


def write_results(
    results: Sequence[BenchResult], args: Mapping[str, Any], total_seconds: float
) -> Path:
    """data/bench/results.json: this run's figures, for comparing runs (data/ is not in git)."""
    RESULTS_PATH.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "args": dict(args),
        "total_seconds": round(total_seconds, 3),
        "machine": {
            "python": sys.version.split()[0],
            "platform": sys.platform,
            "cpus": os.cpu_count(),
        },
        "results": [r.to_json() for r in results],
    }
    tmp = RESULTS_PATH.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    tmp.replace(RESULTS_PATH)
    return RESULTS_PATH


@contextlib.contextmanager
def timed() -> Iterator[Callable[[], float]]:
    """``with timed() as elapsed: ...; elapsed()`` gives seconds (frozen once the block ends)."""
    start = time.perf_counter()
    end: list[float] = []
    yield lambda: (end[0] if end else time.perf_counter()) - start
    end.append(time.perf_counter())


def extract_source(tar: Any, folder: Path) -> None:
    """Unpack a ``git archive`` of this repository (the previous release's source) into
    ``folder``: with the "data" filter where Python has it (3.11.4 and later), else after
    checking that no member leaves the folder (Debian's 3.11.2 has no filters)."""
    import tarfile

    if hasattr(tarfile, "data_filter"):
        tar.extractall(folder, filter="data")
        return
    for member in tar.getmembers():
        parts = Path(member.name).parts
        if member.name.startswith("/") or ".." in parts or member.issym() or member.islnk():
            raise RuntimeError(f"the source archive holds {member.name!r}: not unpacked")
    tar.extractall(folder)
