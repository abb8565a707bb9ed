"""The README's commands run as written: each ``convo`` line, in a new clean shell.

Every fenced shell block of README.md is read; each ``convo`` command in it is
run with ``--help`` added, the way the README writes it (its VAR=value
prefixes, after the block's own ``source .venv/bin/activate``), in ``env -i``
with a bare PATH, from the repository's folder: what a new user gets after
``make install`` on a fresh machine. A line that relied on the author's
shell (``uv`` on PATH, an exported variable, a previous block) fails here.

The "Several workspaces" blocks are also run for real, against the sandbox their
first block starts, and the example config they read is checked to load.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pytest

from process_support import OutputWatcher, free_port
from shell_support import BARE_PATH, CommandLine, command_lines, run_help

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


def _block(marker: str) -> str:
    (found,) = [block for block in BLOCKS if marker in block]
    return found


def test_the_workspaces_example_config_loads() -> None:
    """`examples/workspaces.toml` (the README's several-workspaces config) is a valid config
    naming no secret: `convo --config examples/workspaces.toml config show` reads it in a
    clean environment."""
    shown = subprocess.run(
        ["env", "-i", f"PATH={BARE_PATH}", "LANG=C.UTF-8", str(ROOT / ".venv/bin/convo"),
         "--config", "examples/workspaces.toml", "config", "show"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "data/workspaces/warehouse.duckdb" in shown.stdout


def test_the_workspaces_blocks_run_as_written_against_their_sandbox(tmp_path: Path) -> None:
    """The "Several workspaces" blocks, each in a new clean shell, in a folder holding
    examples/workspaces.toml as the README's (on a free port instead of 8797, with 30
    conversations per workspace instead of 300): the first serves the sandbox, the second
    logs brand-b in (a "browser" that opens the URL it is given: the sandbox approves at
    once), extracts both workspaces, transforms and exports their summaries."""
    serve_block = _block("--for-config examples/workspaces.toml")
    client_block = _block("auth login --workspace brand-b")
    example = (ROOT / "examples" / "workspaces.toml").read_text(encoding="utf-8")
    assert example.count(":8797") == 2 and "conversations = 300" in example
    port = free_port()
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "workspaces.toml").write_text(
        example.replace(":8797", f":{port}").replace("conversations = 300", "conversations = 30")
    )
    browser = tmp_path / "browser"
    browser.write_text(f"#!{sys.executable}\nimport sys, httpx\n"
                       "httpx.get(sys.argv[1], follow_redirects=True, timeout=30)\n")  # fmt: skip
    browser.chmod(0o755)
    activate = f"source {ROOT / '.venv/bin/activate'}"
    env = ["env", "-i", f"PATH={BARE_PATH}", f"HOME={tmp_path}", "LANG=C.UTF-8"]
    sandbox = subprocess.Popen(
        [*env, "bash", "--noprofile", "--norc", "-c",
         serve_block.replace("source .venv/bin/activate", activate)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    watch = OutputWatcher(sandbox.stdout, "the sandbox block")
    try:
        watch.wait_for(rf"listening on http://127\.0\.0\.1:{port} ")
        watch.wait_for(r"curl .*/v1/analytics/summary")
        assert "brand-a: API key written to data/workspaces/brand-a.key" in watch.text
        client = subprocess.run(
            [*env, f"BROWSER={browser}", "bash", "--noprofile", "--norc", "-e", "-c",
             client_block.replace("source .venv/bin/activate", activate)],
            cwd=tmp_path, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
    finally:
        os.killpg(sandbox.pid, signal.SIGINT)
        sandbox.wait(timeout=30)
    assert client.returncode == 0, client.stdout + client.stderr
    assert "logged in to 'brand-b'" in client.stderr
    assert "brand-a: base_url" in client.stdout and "ready True" in client.stdout
    assert '"workspaceId": "ws_brand-a"' in client.stdout and '"workspaceId": "*"' in client.stdout
    loaded = duckdb.connect(str(tmp_path / "data/workspaces/warehouse.duckdb"), read_only=True)
    try:
        rows = loaded.sql("SELECT workspace_id, count(*) FROM conversations GROUP BY 1 ORDER BY 1")
        assert rows.fetchall() == [("ws_brand-a", 30), ("ws_brand-b", 30)]
    finally:
        loaded.close()
