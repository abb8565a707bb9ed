"""``convo extract --check --write-config FILE``: the check's findings as convo.toml tables.

The file is the same source description a run reads (``[extract.streams.*]``
and ``[extract.fields]``), with what the check noticed as comments and what
it could not decide as ``TODO`` comments. An existing file is appended to
when the result is still valid TOML without repeating a table; otherwise the
user is told to choose another file.
"""

from __future__ import annotations

import json
import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from convo_analytics.errors import UserError
from convo_analytics.extract._check import CheckReport

__all__ = ["config_toml", "write_config"]

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _key(name: str) -> str:
    return name if _BARE.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def toml_value(value: Any) -> str:
    """A TOML value for the few types a source description holds."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # JSON's escapes are TOML's


def config_toml(report: CheckReport, *, service: bool = True) -> str:
    """The findings as TOML; ``service=False`` leaves out the ``[service]`` base URL."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        f"# Written by `convo extract --check` against {report.base_url} on {now}.",
        "# Lines marked TODO need a decision; docs/configuration.md describes every key.",
        "",
    ]
    if service:
        out += ["[service]", f"base_url = {toml_value(report.base_url)}", ""]
    fields: list[str] = []
    for name, check in report.streams.items():
        if check.status == "failed":
            out += [f"# [extract.streams.{name}]: the check failed: {check.error}", ""]
            continue
        out.append(f"[extract.streams.{name}]")
        out += [f"# {note}" for note in check.notes]
        out += [f"{_key(k)} = {toml_value(v)}" for k, v in check.spec.items()]
        out += [f"# TODO: {todo}" for todo in check.todo if not todo.startswith('"')]
        out.append("")
        for key, found in check.fields.items():
            if found.origin in ("configured", "detected") and found.path is not None:
                share = f"{found.share:.0%} of {found.sampled} sampled records"
                fields.append(
                    f"{toml_value(key)} = {toml_value(found.path)}  # {found.origin}, {share}"
                )
            elif found.origin == "missing" and found.candidates:
                fields.append(
                    f'# {toml_value(key)} = ""  # TODO: found in no sampled record; keys that '
                    f"could fill it: {', '.join(found.candidates)}"
                )
            elif found.origin == "missing" and not key.startswith("service_summaries."):
                # (a summary metric left out stays NULL, and is not compared: nothing to say)
                fields.append(f'{toml_value(key)} = ""  # found in no sampled record')
    if fields:
        out += ["[extract.fields]", *fields, ""]
    return "\n".join(out)


def write_config(report: CheckReport, path: Path) -> str:
    """Write (or append) the findings to ``path``; returns what was done, for the user."""
    existing = ""
    if path.exists():
        try:
            existing = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(
                f"--write-config {path}: cannot read it ({exc}); choose another file"
            ) from None
    for service in (True, False):
        text = config_toml(report, service=service)
        combined = (existing.rstrip() + "\n\n" if existing.strip() else "") + text
        try:
            tomllib.loads(combined)
        except tomllib.TOMLDecodeError:
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(combined, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"--write-config {path}: cannot write it ({exc.strerror})") from None
        return f"{'appended to' if existing.strip() else 'wrote'} {path}"
    raise UserError(
        f"--write-config {path}: the file already has [extract.streams] or [extract.fields] "
        "tables; write to a new file and merge the two"
    )
