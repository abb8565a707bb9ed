"""End-to-end tests of the `convo` CLI basics, run as a real subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup

from convo_analytics.cli import app

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-live-VERY-SECRET-9f8e7d6c"


def run(
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    code: str | None = None,
    columns: int = 200,
) -> subprocess.CompletedProcess[str]:
    """Run `convo ARGS` (or a Python snippet) with no CONVO_* variables except ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    clean.update(env or {})
    clean["COLUMNS"] = str(columns)
    command = (
        [sys.executable, "-c", code] if code else [sys.executable, "-m", "convo_analytics.cli"]
    )
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def output(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def assert_one_line_user_error(result: subprocess.CompletedProcess[str]) -> str:
    """Exit 2, exactly one non-empty line of output, on stderr, no traceback."""
    text = output(result)
    lines = [line for line in text.splitlines() if line.strip()]
    assert result.returncode == 2, text
    assert len(lines) == 1, text
    assert "Traceback" not in text
    assert result.stdout == ""
    assert re.fullmatch(r"error: .+ \(see 'convo( [a-z-]+)* --help'\)", lines[0]), lines[0]
    return lines[0]


def walk(command: object, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], bool]]:
    """Yield (full command path, is_group) for every command in the click tree."""
    is_group = isinstance(command, TyperGroup)
    yield path, is_group
    if is_group:
        assert isinstance(command, TyperGroup)
        for name, sub in command.commands.items():
            if not getattr(sub, "hidden", False):
                yield from walk(sub, (*path, name))


COMMANDS = [path for path, _ in walk(typer.main.get_command(app), ("convo",))]
GROUPS = [path for path, is_group in walk(typer.main.get_command(app), ("convo",)) if is_group]


def test_command_tree_contains_config_commands() -> None:
    names = {" ".join(path) for path in COMMANDS}
    assert {"convo", "convo config", "convo config show", "convo config path"} <= names
    assert ("convo", "config") in GROUPS


def _params(path: tuple[str, ...]) -> list[typer.core.click.Parameter]:
    command = typer.main.get_command(app)
    for name in path[1:]:
        assert isinstance(command, TyperGroup)
        command = command.commands[name]
    return [p for p in command.params if not getattr(p, "hidden", False)]


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_works_everywhere_and_reads_at_80_columns(
    tmp_path: Path, path: tuple[str, ...]
) -> None:
    """Every command's help in an 80-column terminal: no line wider, every option's names
    whole (rich's panels once cut them to '--low-confidence…'), short upper-case metavars
    instead of type names such as <list[Path]>."""
    result = run(*path[1:], "--help", cwd=tmp_path, columns=80)
    assert result.returncode == 0, output(result)
    text = result.stdout
    assert "Usage" in text
    assert path[-1] in text
    wide = [line for line in text.splitlines() if len(line) > 80]
    assert not wide, wide
    assert "…" not in text and not re.search(r"<[a-z][\w\[\], ]*>", text), text
    words = set(re.findall(r"[\w./:\[\]-]+", text))
    for param in _params(path):
        for name in [*param.opts, *getattr(param, "secondary_opts", [])]:
            if name.startswith("-"):
                assert name in words, f"{name} is not shown whole in:\n{text}"
        metavar = param.metavar
        if not getattr(param, "is_flag", False):
            assert metavar and metavar.rstrip(".").replace(":", "").isupper(), (param.name, metavar)
            assert metavar in text


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_command_is_documented(path: tuple[str, ...]) -> None:
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    headings = {line[4:].strip() for line in docs.splitlines() if line.startswith("### ")}
    assert " ".join(path) in headings, f"add a '### {' '.join(path)}' section to docs/cli.md"


def test_version(tmp_path: Path) -> None:
    result = run("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert re.fullmatch(r"convo \d+\.\d+\.\d+\S*\n", result.stdout)


def test_group_without_subcommand_shows_usage(tmp_path: Path) -> None:
    result = run("config", cwd=tmp_path)
    assert result.returncode == 2
    assert "show" in output(result) and "path" in output(result)
    assert "Traceback" not in output(result)


# -- config show / path ---------------------------------------------------------------------


def show_json(
    tmp_path: Path, *args: str, env: Mapping[str, str] | None = None
) -> dict[str, object]:
    result = run(*args, "config", "show", "--json", cwd=tmp_path, env=env)
    assert result.returncode == 0, output(result)
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def setting(data: Mapping[str, object], name: str) -> Mapping[str, object]:
    settings = data["settings"]
    assert isinstance(settings, dict)
    row = settings[name]
    assert isinstance(row, dict)
    return row


def test_precedence_env_over_file_over_default(tmp_path: Path) -> None:
    (tmp_path / "convo.toml").write_text("[sandbox]\nport = 1111\nseed = 7\n")
    data = show_json(tmp_path, env={"CONVO_SANDBOX_PORT": "2222"})
    assert data["config_file"] == str(tmp_path / "convo.toml")
    assert setting(data, "sandbox.port")["value"] == 2222
    assert setting(data, "sandbox.port")["source"] == "env"
    assert setting(data, "sandbox.seed") == {
        "value": 7,
        "source": "file",
        "origin": f"{tmp_path / 'convo.toml'}:3",
        "env": "CONVO_SANDBOX_SEED",
        "secret": False,
    }
    assert setting(data, "sandbox.days")["source"] == "default"


def test_config_flag_beats_env_and_local_file(tmp_path: Path) -> None:
    (tmp_path / "convo.toml").write_text("[sandbox]\nseed = 1\n")
    (tmp_path / "env.toml").write_text("[sandbox]\nseed = 2\n")
    (tmp_path / "flag.toml").write_text("[sandbox]\nseed = 3\n")
    env = {"CONVO_CONFIG": str(tmp_path / "env.toml")}
    assert setting(show_json(tmp_path), "sandbox.seed")["value"] == 1
    assert setting(show_json(tmp_path, env=env), "sandbox.seed")["value"] == 2
    data = show_json(tmp_path, "--config", str(tmp_path / "flag.toml"), env=env)
    assert setting(data, "sandbox.seed")["value"] == 3

    result = run("--config", "flag.toml", "config", "path", cwd=tmp_path, env=env)
    assert result.returncode == 0
    assert result.stdout.strip() == "flag.toml"
    result = run("config", "path", cwd=tmp_path, env=env)
    assert result.stdout.strip() == str(tmp_path / "env.toml")


def test_config_path_none(tmp_path: Path) -> None:
    result = run("config", "path", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == "none\n"


def test_missing_explicit_config_is_user_error(tmp_path: Path) -> None:
    line = assert_one_line_user_error(run("--config", "nope.toml", "config", "show", cwd=tmp_path))
    assert "nope.toml" in line and "--config" in line
    line = assert_one_line_user_error(
        run("config", "path", cwd=tmp_path, env={"CONVO_CONFIG": "gone.toml"})
    )
    assert "gone.toml" in line and "CONVO_CONFIG" in line
    assert line.endswith("(see 'convo config path --help')")


def test_show_masks_secrets_from_env_and_file(tmp_path: Path) -> None:
    key_file = tmp_path / "webhook.secret"
    key_file.write_text(f"{SECRET}-wh\n")
    env = {
        "CONVO_API_KEY": SECRET,
        "CONVO_WEBHOOK_SECRET_FILE": str(key_file),
        "CONVO_SANDBOX_WORKSPACES": f"acme:{SECRET}-ws",
    }
    table = run("config", "show", cwd=tmp_path, env=env)
    as_json = run("config", "show", "--json", cwd=tmp_path, env=env)
    for result in (table, as_json):
        assert result.returncode == 0, output(result)
        assert SECRET not in output(result)
        assert "***" in result.stdout
    data = json.loads(as_json.stdout)
    for name in ("service.api_key", "webhooks.secret", "sandbox.workspaces"):
        assert setting(data, name)["value"] == "***"
        assert setting(data, name)["secret"] is True
    assert setting(data, "webhooks.secret")["source"] == "env"
    assert "service.base_url" in table.stdout and "CONVO_BASE_URL" in table.stdout


def test_show_unset_secret_is_null(tmp_path: Path) -> None:
    data = show_json(tmp_path)
    assert setting(data, "service.api_key")["value"] is None
    assert data["config_file"] is None


# -- user errors: exit 2, one line -------------------------------------------------------


def test_inline_secret_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "convo.toml").write_text(
        f'[service]\nbase_url = "http://x"\napi_key = "{SECRET}"\n'
    )
    result = run("config", "show", cwd=tmp_path)
    line = assert_one_line_user_error(result)
    assert SECRET not in output(result)
    assert f"{tmp_path / 'convo.toml'}:3" in line
    assert "api_key" in line and "CONVO_API_KEY" in line and "service.api_key_file" in line


@pytest.mark.parametrize(
    ("toml", "fragments"),
    [
        ("[sandbox]\nprot = 1\n", ["convo.toml:2", "prot", "did you mean 'port'"]),
        ("[sandbx]\nport = 1\n", ["convo.toml:1", "unknown section [sandbx]"]),
        ('[sandbox]\nport = "abc"\n', ["convo.toml:2", "port", "an integer", "'abc'"]),
        ("[sandbox]\nport = = 1\n", ["convo.toml:2:", "invalid TOML"]),
        ("[sandbox\n", ["convo.toml:1:", "invalid TOML"]),
    ],
    ids=["unknown-key", "unknown-section", "wrong-type", "bad-toml", "bad-header"],
)
def test_bad_config_file_is_one_line_error(tmp_path: Path, toml: str, fragments: list[str]) -> None:
    (tmp_path / "convo.toml").write_text(toml)
    line = assert_one_line_user_error(run("config", "show", cwd=tmp_path))
    for fragment in fragments:
        assert fragment in line
    assert line.endswith("(see 'convo config show --help')")


def test_bad_env_value_is_one_line_error(tmp_path: Path) -> None:
    result = run("config", "show", cwd=tmp_path, env={"CONVO_SERVICE_TIMEOUT_SECONDS": "soon"})
    line = assert_one_line_user_error(result)
    assert "CONVO_SERVICE_TIMEOUT_SECONDS" in line and "a number" in line


def test_missing_secret_file_is_one_line_error(tmp_path: Path) -> None:
    result = run("config", "show", cwd=tmp_path, env={"CONVO_API_KEY_FILE": "no/such/key"})
    line = assert_one_line_user_error(result)
    assert "no/such/key" in line


@pytest.mark.parametrize(
    ("args", "fragment", "command"),
    [
        (["config", "show", "--bogus"], "--bogus", "convo config show"),
        (["--bogus", "config", "show"], "--bogus", "convo"),
        (["nosuchcommand"], "nosuchcommand", "convo"),
        (["config", "nosuch"], "nosuch", "convo config"),
        (["config", "path", "extra-arg"], "extra-arg", "convo config path"),
        (["--config"], "--config", "convo"),
    ],
)
def test_usage_errors_are_one_line(
    tmp_path: Path, args: list[str], fragment: str, command: str
) -> None:
    line = assert_one_line_user_error(run(*args, cwd=tmp_path))
    assert fragment in line
    assert line.endswith(f"(see '{command} --help')")


# -- error mapping for commands added by other modules -----------------------------------

PLUGIN = textwrap.dedent(
    """
    import sys
    import typer
    from convo_analytics.cli import app, main
    from convo_analytics.errors import UserError

    extra = typer.Typer()

    @extra.command("user")
    def user() -> None:
        raise UserError("input file data.csv is empty;\\nregenerate it")

    @extra.command("bug")
    def bug() -> None:
        raise RuntimeError("a real bug")

    @extra.command("interrupt")
    def interrupt() -> None:
        raise KeyboardInterrupt

    @extra.command("exit3")
    def exit3() -> None:
        raise typer.Exit(3)

    app.add_typer(extra, name="extra")
    raise SystemExit(main(sys.argv[1:]))
    """
)


def test_user_error_in_a_command_names_that_command(tmp_path: Path) -> None:
    result = run("--config", "c.toml", "extra", "user", cwd=tmp_path, code=PLUGIN)
    line = assert_one_line_user_error(result)
    assert line == (
        "error: input file data.csv is empty; regenerate it (see 'convo extra user --help')"
    )


def test_bug_shows_traceback(tmp_path: Path) -> None:
    result = run("extra", "bug", cwd=tmp_path, code=PLUGIN)
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "RuntimeError: a real bug" in result.stderr


def test_keyboard_interrupt_exits_130(tmp_path: Path) -> None:
    result = run("extra", "interrupt", cwd=tmp_path, code=PLUGIN)
    assert result.returncode == 130
    assert "Traceback" not in output(result)


def test_typer_exit_code_is_kept(tmp_path: Path) -> None:
    assert run("extra", "exit3", cwd=tmp_path, code=PLUGIN).returncode == 3
