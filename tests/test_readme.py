"""The README's commands run as written: each ``convo`` line, in a new clean shell.

Every fenced shell block of README.md is read; each ``convo`` command in it is
run with ``--help`` added, the way the README writes it (its VAR=value
prefixes, after the block's own ``source .venv/bin/activate``), in ``env -i``
with a bare PATH, from the repository's folder: what a new user gets after
``make install`` on a fresh machine. A line that relied on the author's
shell (``uv`` on PATH, an exported variable, a previous block) fails here.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from shell_support import CommandLine, command_lines, run_help

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```(?:bash|sh|shell)\n(.*?)^```", README, re.M | re.S)
COMMANDS = [command for block in BLOCKS for command in command_lines(block)]


def test_the_readme_has_commands_to_check() -> None:
    assert len(BLOCKS) >= 5 and len(COMMANDS) >= 10, COMMANDS


def test_no_line_needs_uv_on_path() -> None:
    """`make` keeps uv in .tools/ (it is not on a new user's PATH): no block may call it."""
    for block in BLOCKS:
        for line in block.splitlines():
            assert not re.match(r"\s*(\w+=\S+\s+)*uv\s", line), line


def test_every_block_with_convo_activates_first() -> None:
    """Each block runs in a new shell on its own, so each activates the environment."""
    for block in BLOCKS:
        for command in command_lines(block):
            assert command.setup == ("source .venv/bin/activate",), command


@pytest.fixture(scope="module")
def helps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str]]:
    home = tmp_path_factory.mktemp("home")

    def one(command: CommandLine) -> tuple[str, tuple[int, str]]:
        done = run_help(command, ROOT, home)
        return command.text, (done.returncode, done.stdout + done.stderr)

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(one, COMMANDS))


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.text[:60])
def test_a_readme_command_runs_as_written(
    command: CommandLine, helps: dict[str, tuple[int, str]]
) -> None:
    code, text = helps[command.text]
    assert code == 0, f"{command.text} --help:\n{text}"
    usage = re.search(r"Usage: convo([^\n\[{]*)", text)
    assert usage, text
    # the help is that of the command the README meant, not of a group above it
    named = usage.group(1).split()
    assert named == [w for w in command.words[1:] if w in named], (named, command)
