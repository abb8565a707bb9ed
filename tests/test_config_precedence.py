"""The precedence of the settings model, drawn at random: for any mix of values written in
convo.toml, set in the environment (a setting's documented alias or its generic
``CONVO_<SECTION>_<KEY>``) and given as flags, each setting resolves to the highest source
that gives it (flag > environment > file > default) and reports that source and where it
was written. A secret and its ``*_file`` follow the same order: the file's content wins
when its setting comes from a higher source than the secret itself (issue 26)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from convo_analytics.config import ConfigError, Source, generic_env_var, load_settings


@dataclass(frozen=True)
class Case:
    """One setting of the property: how each source writes a value and what it reads as."""

    name: str
    alias: str | None
    default: object
    values: st.SearchStrategy[object]

    def toml(self, value: object) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):
            return f'"{value}"'
        return repr(value)


CASES = (
    Case("sandbox.port", None, 8787, st.integers(0, 65535)),
    Case(
        "service.timeout_seconds", "CONVO_TIMEOUT_SECONDS", 30.0, st.sampled_from([0.5, 7.0, 99.25])
    ),
    Case(
        "service.rate_limit",
        "CONVO_RATE_LIMIT",
        "600/min",
        st.sampled_from(["100/min", "5/s", "none"]),
    ),
    Case("extract.strict", None, False, st.booleans()),
    Case(
        "warehouse.path",
        "CONVO_DB",
        "data/warehouse.duckdb",
        st.sampled_from(["w1.duckdb", "/abs/w2.duckdb"]),
    ),
)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "off"
    return str(value)


@st.composite
def _draws(draw: st.DrawFn) -> list[tuple[Case, object, object, object, str]]:
    out = []
    for case in CASES:
        file, env, flag = (draw(st.one_of(st.none(), case.values)) for _ in range(3))
        var = draw(st.sampled_from([v for v in (case.alias, generic_env_var(case.name)) if v]))
        out.append((case, file, env, flag, var))
    return out


def _expected_path(value: object, folder: Path) -> Path:
    path = Path(str(value))
    return path if path.is_absolute() else folder / path


@settings(max_examples=60, deadline=None)
@given(draws=_draws())
def test_each_setting_comes_from_its_highest_source(
    draws: list[tuple[Case, object, object, object, str]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        lines: dict[str, list[str]] = {}
        for case, file, _, _, _ in draws:
            if file is not None:
                section, key = case.name.split(".")
                lines.setdefault(section, []).append(f"{key} = {case.toml(file)}")
        text = "".join(f"[{s}]\n" + "\n".join(keys) + "\n" for s, keys in lines.items())
        (folder / "convo.toml").write_text(text)
        environ = {var: _text(env) for case, _, env, _, var in draws if env is not None}
        flags = {case.name: flag for case, _, _, flag, _ in draws}
        resolved = load_settings(folder / "convo.toml", flags, environ)
        for case, file, env, flag, var in draws:
            got = resolved.resolved(case.name)
            if flag is not None:
                want, source, origin = flag, Source.FLAG, "command-line flag"
            elif env is not None:
                want, source, origin = env, Source.ENV, f"${var}"
            elif file is not None:
                want, source, origin = file, Source.FILE, str(folder / "convo.toml")
            else:
                want, source, origin = case.default, Source.DEFAULT, "default"
            if case.name == "warehouse.path":
                want = _expected_path(want, folder) if source is Source.FILE else Path(str(want))
            assert got.value == want, (case.name, file, env, flag)
            assert got.source is source, (case.name, file, env, flag)
            assert got.origin.startswith(origin), (case.name, got.origin, origin)
            if source is Source.FILE:  # the file's line that writes it
                line = got.origin.rsplit(":", 1)[1]
                written = text.splitlines()[int(line) - 1]
                assert written.startswith(case.name.split(".")[1] + " = ")


_SOURCES = st.sampled_from(["none", "file", "env", "flag"])


@settings(max_examples=60, deadline=None)
@given(key_from=st.sampled_from(["none", "env", "flag"]), file_from=_SOURCES)
def test_a_secret_and_its_file_follow_the_same_order(key_from: str, file_from: str) -> None:
    """``service.api_key`` (environment or flag, never the file) against
    ``service.api_key_file`` (any source): the higher source wins; both from one source
    is refused, naming both; the secret is never echoed."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "key.txt").write_text("sk_from_file_123\n")
        key_file = str(folder / "key.txt")
        text = f'[service]\napi_key_file = "{key_file}"\n' if file_from == "file" else ""
        (folder / "convo.toml").write_text(text)
        environ: dict[str, str] = {}
        flags: dict[str, object] = {}
        if key_from == "env":
            environ["CONVO_API_KEY"] = "sk_direct_456789"
        if key_from == "flag":
            flags["service.api_key"] = "sk_direct_456789"
        if file_from == "env":
            environ["CONVO_API_KEY_FILE"] = key_file
        if file_from == "flag":
            flags["service.api_key_file"] = key_file
        rank = {"none": 0, "file": 1, "env": 2, "flag": 3}
        if key_from != "none" and key_from == file_from:
            try:
                load_settings(folder / "convo.toml", flags, environ)
            except ConfigError as exc:
                assert "service.api_key" in str(exc) and "api_key_file" in str(exc)
                assert "sk_" not in str(exc)
                return
            raise AssertionError("a secret and its file from one source must be refused")
        got = load_settings(folder / "convo.toml", flags, environ).resolved("service.api_key")
        if rank[file_from] > rank[key_from]:
            assert got.value is not None and got.value.reveal() == "sk_from_file_123"
            assert got.origin.startswith(f"file {key_file} via ")
        elif key_from != "none":
            assert got.value is not None and got.value.reveal() == "sk_direct_456789"
        else:
            assert got.value is None and got.source is Source.DEFAULT
        assert "sk_" not in repr(got.value)
