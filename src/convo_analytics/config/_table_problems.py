"""Arrays of tables (``[[workspaces]]``, ``[[monitors]]``) checked by their own models:
one line per problem, naming the table by its number, and names used twice."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = ["table_problems"]

_Model = TypeVar("_Model", bound=BaseModel)


def table_problems(
    raw: list[Any], model: type[_Model], origin: str, what: str
) -> tuple[list[_Model], list[str]]:
    """The tables of ``raw`` validated by ``model`` (each with a ``name``), and one line per
    problem: ``<origin> #N <field>: <message>``, a name that is not a ``what`` name
    said as such, and each name used twice."""
    specs: list[_Model] = []
    problems: list[str] = []
    for i, table in enumerate(raw):
        try:
            specs.append(model.model_validate(table))
        except ValidationError as exc:
            for error in exc.errors():
                loc = ".".join(str(p) for p in error["loc"]) or "table"
                msg = error["msg"].removeprefix("Value error, ")
                if error["type"] == "string_pattern_mismatch" and error["loc"] == ("name",):
                    msg = (
                        f"{error['input']!r} is not a {what} name: letters, digits, '.', "
                        "'_' and '-', starting with a letter or digit, at most 63"
                    )
                problems.append(f"{origin} #{i + 1} {loc}: {msg}")
    names = [getattr(s, "name", "") for s in specs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    problems += [f"{origin} name {n!r} is used twice" for n in repeated]
    return specs, problems
