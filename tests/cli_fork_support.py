"""Many ``convo`` processes without paying Python's and the CLI's start-up in each.

A test that walks a hundred and fifty command lines through their refusals
spent most of its time importing the same modules in every process (~0.5 s of
CPU for the CLI, ~1 s more for `run`, `monitors`, `serve` or `sandbox`). A
:class:`ForkedCli` starts one Python process (the "parent") that imports the
CLI (and the modules it is given) once; each command line is then a
child forked from it: a process of its own, with its own folder, environment,
standard streams (files; standard input is ``/dev/null``) and exit status, run as
``python -m convo_analytics.cli`` runs it (``runpy``, an uncaught exception
printed and exit status 1, the ``atexit`` handlers run). What a fresh process
would do differently is what happens before the fork: the imports, made once in
an environment without any ``CONVO_*`` variable, whose output
:attr:`ForkedCli.started_with` keeps (a test can require it empty), and which no
module of convo reads the environment in. The parent forks with one thread (no
native one either: the tests pin OpenBLAS to one, which starts none).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

__all__ = ["CliOutcome", "ForkedCli"]

#: The parent: imports, says "ready", then forks one child per request line (JSON) and
#: answers with the child's pid, then its exit status (a signal: minus its number).
_PARENT = r"""
import importlib, json, os, sys, threading
answer = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # what the imports print goes where their errors go
for name in sys.argv[1:]:
    importlib.import_module(name)
sys.stdout.flush()
sys.stderr.flush()
assert threading.active_count() == 1, threading.enumerate()
assert len(os.listdir("/proc/self/task")) == 1, "a native thread started while importing"
answer.write("ready\n")
answer.flush()


def child(request):
    import atexit, runpy, traceback

    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    # a new reader on it: the parent's may hold what it read ahead of its last request
    sys.stdin = sys.__stdin__ = open(0, encoding=sys.stdin.encoding, closefd=False)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["convo", *request["args"]]
    code = 0
    try:
        runpy.run_module("convo_analytics.cli", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return code


for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = child(request)
        finally:
            os._exit(code & 0xFF)
    answer.write(json.dumps({"pid": pid}) + "\n")
    answer.flush()
    _, status = os.waitpid(pid, 0)
    answer.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n")
    answer.flush()
"""


@dataclass(frozen=True)
class CliOutcome:
    """What one command line did: its exit status and its two streams."""

    code: int
    stdout: str
    stderr: str


class ForkedCli:
    """A parent process with ``convo`` imported; :meth:`run` forks one command from it.

    One command at a time per parent (use one parent per thread). ``preload`` names
    the modules imported before any fork (``convo_analytics.cli`` always);
    ``environ`` is the parent's environment (``CONVO_*`` variables are dropped).
    """

    def __init__(
        self, folder: Path, environ: Mapping[str, str], preload: Sequence[str] = ()
    ) -> None:
        self._folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._count = 0
        self._pending = b""
        env = {k: v for k, v in environ.items() if not k.startswith("CONVO_")}
        modules = ["convo_analytics.cli", *preload]
        self._started = folder / "parent.stderr"
        with self._started.open("wb") as err:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _PARENT, *modules], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=err, env=env, cwd=folder, bufsize=0,
            )  # fmt: skip
        try:
            self._expect("ready", 300)
        except BaseException:
            self.close()
            raise

    @property
    def started_with(self) -> str:
        """What the parent printed while it imported (stdout and stderr)."""
        return self._started.read_text()

    def _line(self, deadline: float) -> str:
        """The parent's next answer line, read unbuffered (select sees what is unread)."""
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"the forking parent ended: {self.started_with[-3000:]}")
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode().strip()

    def _expect(self, text: str, seconds: float) -> None:
        try:
            line = self._line(time.monotonic() + seconds)
        except TimeoutError:
            raise AssertionError(f"the forking parent was not {text} in {seconds} s") from None
        assert line == text, (line, self.started_with[-3000:])

    def run(
        self, args: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float = 120
    ) -> CliOutcome:
        """``convo ARGS`` in ``cwd`` with exactly the environment ``env``."""
        assert self._proc.stdin is not None
        self._count += 1
        out = self._folder / f"{self._count}.stdout"
        err = self._folder / f"{self._count}.stderr"
        request = {"args": list(args), "cwd": str(cwd), "env": dict(env),
                   "stdout": str(out), "stderr": str(err)}  # fmt: skip
        self._proc.stdin.write(json.dumps(request).encode() + b"\n")
        deadline = time.monotonic() + timeout
        pid = json.loads(self._line(deadline))["pid"]
        try:
            status = json.loads(self._line(deadline))["status"]
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            self._line(time.monotonic() + 30)
            raise AssertionError(f"convo {' '.join(args)} ran over {timeout} s") from None
        return CliOutcome(status, out.read_text(), err.read_text())

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=30)
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def __enter__(self) -> ForkedCli:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
