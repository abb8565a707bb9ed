"""Extra patterns: the personal data only an installation knows the shape of.

``privacy.extra_patterns`` lists ``NAME=REGEX`` entries (a customer number, a national
id, a loyalty card): each is compiled once, when the scrubber is made, and its
matches are masked as ``[NAME]`` (hashed: ``[NAME:…]``) like the built-in kinds.

Python's ``re`` has no time limit, and a pattern with nested unbounded repetition
(``(a+)+``, ``(\\w+\\s?)*``) can take exponential time on a text made to defeat it: such
patterns are refused when the scrubber is made, as are patterns that match empty text
(they would find something everywhere). That check is as good as a static look at the
pattern gets; what is left, polynomial backtracking of a pattern like ``\\d+\\d+x``, is
bounded by the length cap: each search sees at most :data:`WINDOW` characters of a
text (windows overlap by :data:`OVERLAP`, so a match up to that long is never cut).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from convo_analytics.errors import UserError
from convo_analytics.privacy._spans import BUILTIN_KINDS, Span

__all__ = ["NAME", "OVERLAP", "WINDOW", "ExtraPattern", "parse_extra_patterns"]

#: What an extra pattern's name may be: it becomes the placeholder ``[NAME]``.
NAME = r"[a-z][a-z0-9_]{0,31}"
#: Characters one search of an extra pattern sees at most, and the windows' overlap.
WINDOW, OVERLAP = 4096, 256
_SETTING = "privacy.extra_patterns"
_sre: Any = importlib.import_module("re._parser")
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


@dataclass(frozen=True)
class ExtraPattern:
    """One ``NAME=REGEX`` entry, compiled."""

    name: str
    regex: re.Pattern[str]

    def find(self, text: str) -> list[Span]:
        """Every match in ``text``, searched :data:`WINDOW` characters at a time."""
        found: dict[tuple[int, int], Span] = {}
        start = 0
        while True:
            end = min(len(text), start + WINDOW)
            for m in self.regex.finditer(text, start, end):
                if m.end() > m.start():
                    found[m.span()] = Span(m.start(), m.end(), self.name, m.group())
            if end >= len(text):
                break
            start = end - OVERLAP
        return list(found.values())


def _unbounded(node: Any) -> bool:
    """Whether a parsed (sub)pattern holds a repetition without an upper bound."""
    return any(
        (str(op) in _REPEATS and av[1] == _sre.MAXREPEAT) or _unbounded_in(av) for op, av in node
    )


def _unbounded_in(av: Any) -> bool:
    return any(
        _unbounded(item) if isinstance(item, _sre.SubPattern) else _unbounded_in(item)
        for item in (av if isinstance(av, list | tuple) else ())
    )


def _nested(node: Any) -> bool:
    """Whether a repetition that can repeat more than once holds an unbounded one."""
    for op, av in node:
        if str(op) in _REPEATS and av[1] != 1 and _unbounded(av[2]):
            return True
        if _nested_in(av):
            return True
    return False


def _nested_in(av: Any) -> bool:
    return any(
        _nested(item) if isinstance(item, _sre.SubPattern) else _nested_in(item)
        for item in (av if isinstance(av, list | tuple) else ())
    )


def _problem(regex: str) -> str | None:
    """Why ``regex`` is refused, or None."""
    try:
        compiled = re.compile(regex)
        parsed = _sre.parse(regex)
    except re.error as exc:
        return f"is not a valid regular expression ({exc.msg} at position {exc.pos})"
    except RecursionError:
        return "is nested too deeply"
    if _nested(parsed):
        return (
            "nests unbounded repetition (like (a+)+), which can take exponential time; "
            "bound the inner or outer repetition, e.g. (a{1,20})+"
        )
    if compiled.search("") is not None:
        return "matches empty text; make it match at least one character"
    return None


def parse_extra_patterns(entries: Iterable[str]) -> tuple[ExtraPattern, ...]:
    """The entries of ``privacy.extra_patterns`` compiled; a :class:`UserError` names the
    first bad one and the fix (its regex is the user's own text: shown)."""
    patterns: list[ExtraPattern] = []
    for entry in entries:
        name, sep, regex = entry.partition("=")
        name = name.strip()
        if not sep or not re.fullmatch(NAME, name) or not regex:
            raise UserError(
                f"{_SETTING}: {entry!r} is not NAME=REGEX with NAME of lowercase letters, "
                "digits and _ (e.g. customer_no=CN-[0-9]{6}); fix the entry"
            )
        if name in BUILTIN_KINDS or any(p.name == name for p in patterns):
            raise UserError(
                f"{_SETTING}: the name {name!r} is taken (a built-in kind or an earlier "
                "entry); give the pattern another name"
            )
        if (problem := _problem(regex)) is not None:
            raise UserError(f"{_SETTING}: the pattern of {name!r} {problem}")
        patterns.append(ExtraPattern(name, re.compile(regex)))
    return tuple(patterns)
