"""The CLI is the top layer: nothing imports it, and it builds no package's configuration
(issue 26, D-CONFIG-BUILDERS).

`convo extract` and the nightly run's extract step, `convo transform` and its
transform step, get their configuration from one function of the package
(``extract_configs``, ``transform_config``): the tests below run both callers
on one convo.toml and compare what each would hand to the package.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from convo_analytics.config import load_settings
from convo_analytics.pipeline import RunContext, Step, load_steps

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "convo_analytics"
CLI = SRC / "cli"
NIGHTLY = ROOT / "pipelines" / "nightly.py"
#: Configuration objects, each built only inside its own package (src/convo_analytics/X/).
BUILT_IN_THEIR_PACKAGE = {
    "ExtractConfig": "extract",
    "TransformConfig": "transform",
    "ExportOptions": "export",
    "IngestOptions": "webhooks",
    "ReceiverSettings": "webhooks",
    "LakeConfig": "lake",
}


def _python_files() -> Iterator[Path]:
    """Every module of the project outside the CLI: src/ packages, pipelines/, dashboards/."""
    for top in (SRC, ROOT / "pipelines", ROOT / "dashboards"):
        for path in sorted(top.rglob("*.py")):
            if CLI not in path.parents:
                yield path


def _imported(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, module)`` of every import in ``path`` (see :func:`_imports`)."""
    package = ""
    if SRC in path.parents:
        package = ".".join(path.relative_to(SRC.parent).parts[:-1])
    return _imports(path.read_text(encoding="utf-8"), package)


def _imports(text: str, package: str) -> Iterator[tuple[int, str]]:
    """``(line, module)`` of every import in a module of ``package``, relative ones made
    absolute, and of every ``importlib.import_module("...")`` of a constant."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                up = parts[: len(parts) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            yield node.lineno, base
            yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def test_nothing_outside_the_cli_imports_the_cli() -> None:
    """The CLI parses flags and calls the packages; a package, a pipeline or the dashboard
    that imported it would depend on the layer above it."""
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in _python_files()
        for line, module in _imported(path)
        if module == "convo_analytics.cli" or module.startswith("convo_analytics.cli.")
    ]
    assert found == [], "\n".join(found)


def test_the_check_sees_relative_and_dynamic_imports() -> None:
    """The walk above would catch each way of importing the CLI (its own check)."""
    text = (
        "from ..cli import main\nfrom convo_analytics import cli\n"
        "import importlib\nimportlib.import_module('convo_analytics.cli._app')\n"
    )
    seen = {module for _, module in _imports(text, "convo_analytics.extract")}
    assert {"convo_analytics.cli", "convo_analytics.cli.main", "convo_analytics.cli._app"} <= seen


def test_configuration_objects_are_built_only_in_their_packages() -> None:
    """The CLI and pipelines/ call the package's builder (``extract_configs``,
    ``transform_config``, ``export_options``, ...) instead of making the object."""
    found = []
    for path in [*sorted(CLI.rglob("*.py")), *_python_files()]:
        owner = path.relative_to(SRC).parts[0] if SRC in path.parents else None
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in BUILT_IN_THEIR_PACKAGE and owner != BUILT_IN_THEIR_PACKAGE[name]:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} builds {name}")
    assert found == [], "\n".join(found)


# -- the CLI and the nightly run hand the package the same configuration ---------------

CONFIG = """\
[service]
rate_limit = "none"

[extract]
page_size = 25
strict = true

[transform]
timezones = ["UTC", "Europe/Berlin", "UTC"]
low_confidence_threshold = 0.4
tolerance = 0.05

[[workspaces]]
name = "acme"
base_url = "https://acme.example.com"
auth = { type = "api_key", key_env = "ACME_KEY" }

[[workspaces]]
name = "globex"
base_url = "https://globex.example.com/"
auth = { type = "api_key", key_env = "GLOBEX_KEY" }
"""


class _Captured(Exception):
    """Stops a command or step the moment it hands its configuration to the package."""


@pytest.fixture
def configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A convo.toml of two workspaces (their keys in the environment) and its warehouse."""
    from convo_analytics.warehouse import open_warehouse

    config = tmp_path / "convo.toml"
    config.write_text(CONFIG)
    for name in list(os.environ):
        if name.startswith("CONVO_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ACME_KEY", "sk_test_acme_0123456789")
    monkeypatch.setenv("GLOBEX_KEY", "sk_test_globex_0123456789")
    monkeypatch.setenv("CONVO_DB", str(tmp_path / "w.duckdb"))
    open_warehouse(tmp_path / "w.duckdb").close()
    monkeypatch.chdir(tmp_path)
    return config


def _capture(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, index: int) -> list[Any]:
    """Replace ``module.name`` by a stand-in that records its ``index``-th argument and
    stops the caller (nothing is extracted or transformed)."""
    seen: list[Any] = []

    def record(*args: Any, **_: Any) -> None:
        seen.append(args[index])
        raise _Captured

    monkeypatch.setattr(module, name, record)
    return seen


def _comparable(config: Any) -> tuple[Any, dict[str, Any]]:
    """An ExtractConfig as a value: each load of the endpoints' description is an instance
    of a class made for it, so that part is compared by its contents."""
    return dataclasses.replace(config, source=None), config.source.model_dump()


def _nightly_step(name: str) -> Step:
    return next(s for s in load_steps(NIGHTLY) if s.name == name)


def _run_step(step: Step, config: Path) -> None:
    settings = load_settings(config, {})
    db = settings.require_path("warehouse.path")
    with pytest.raises(_Captured):
        step.run(RunContext(settings=settings, run_id="r-layers", db_path=db))


def test_convo_extract_and_the_nightly_extract_build_equal_configs(
    configured: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import convo_analytics.extract as extract
    from convo_analytics.cli import main

    seen = _capture(monkeypatch, extract, "run_extract_many", 0)
    with pytest.raises(_Captured):
        main(["--config", str(configured), "extract"])
    _run_step(_nightly_step("extract"), configured)
    cli, nightly = seen
    assert [c.workspace for c in cli] == ["acme", "globex"]
    assert [_comparable(c) for c in cli] == [_comparable(c) for c in nightly]
    assert all(c.strict and c.page_size == 25 for c in nightly), "the settings reached both"


def test_convo_transform_and_the_nightly_transform_build_equal_configs(
    configured: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import convo_analytics.transform as transform
    from convo_analytics.cli import main

    seen = _capture(monkeypatch, transform, "run_transform", 1)
    with pytest.raises(_Captured):
        main(["--config", str(configured), "transform"])
    _run_step(_nightly_step("transform"), configured)
    cli, nightly = seen
    assert cli == nightly
    assert nightly.timezones == ("UTC", "Europe/Berlin"), "checked and deduplicated in both"
    assert (nightly.low_confidence_threshold, nightly.tolerance) == (0.4, 0.05)
