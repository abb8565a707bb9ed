"""Running the command lines that the README and `make demo` print, as a user would.

A user copies a line into a new shell: no variables of ours, no uv on PATH,
only what the line (and the block it came from) sets up. These helpers pick
the ``convo`` command lines out of a block of shell text and run each with
``--help`` added, in ``env -i`` with a bare PATH, after the block's own
``source .../activate`` line, so that a line that only works in the author's
shell fails here.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BARE_PATH", "CommandLine", "command_lines", "run_help"]

BARE_PATH = "/usr/local/bin:/usr/bin:/bin"
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SETUP = re.compile(r"^(source|\.)\s+\S*activate\b")


@dataclass(frozen=True)
class CommandLine:
    """One ``convo`` command as written, and the set-up lines written before it."""

    text: str
    setup: tuple[str, ...]

    @property
    def words(self) -> list[str]:
        """The command's words after any VAR=value prefix (``convo``, subcommands, flags)."""
        tokens = shlex.split(self.text)
        while tokens and _ASSIGNMENT.match(tokens[0]):
            tokens.pop(0)
        return tokens


def _strip_comment(line: str) -> str:
    """The line without a trailing ``# comment`` (one outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote == ch else ch
        elif ch == "#" and quote is None and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def command_lines(block: str) -> list[CommandLine]:
    """Every ``convo`` command in a block of shell lines (``a && b`` gives two), each with
    the activation lines that come before it in the block."""
    setup: list[str] = []
    found: list[CommandLine] = []
    for raw in block.splitlines():
        line = _strip_comment(raw.strip())
        if not line:
            continue
        if _SETUP.match(line):
            setup.append(line)
            continue
        for part in re.split(r"\s*&&\s*", line):
            candidate = CommandLine(part.strip(), tuple(setup))
            try:
                words = candidate.words
            except ValueError:
                continue
            if words and words[0] == "convo":
                found.append(candidate)
    return found


def run_help(command: CommandLine, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """The command with ``--help`` added, in a clean environment (``env -i``, bare PATH)."""
    script = " && ".join([*command.setup, f"{command.text} --help"])
    return subprocess.run(
        ["env", "-i", f"PATH={BARE_PATH}", f"HOME={home}", "LANG=C.UTF-8", "COLUMNS=80",
         "bash", "--noprofile", "--norc", "-c", script],
        cwd=cwd, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
