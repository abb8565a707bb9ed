"""A markdown cell as safe HTML: the notebook author's prose, the one markdown we render.

User data (a conversation's text, a topic's name, a query's result) is never
rendered anywhere; a notebook's markdown cells are written by its author and
are. Even so they are rendered so that opening a notebook or a mailed report
runs nothing and fetches nothing (decision D-NOTEBOOK-CELLS):

* CommonMark with tables and strikethrough, raw HTML off: ``<script>``,
  ``<img>``, ``<iframe>`` and every other tag is shown as text;
* an image is replaced by its alt text (a remote image is a request leaving
  the reader's machine, and a tracking pixel in a mailed report);
* a link keeps only an ``http:``, ``https:`` or ``mailto:`` target or one
  inside the page (``#...``); others (``javascript:``, ``data:``, ``file:``)
  become plain text. Links open nothing by themselves and carry
  ``rel="noopener noreferrer nofollow"``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt

__all__ = ["markdown_html"]

_SCHEMES = ("http://", "https://", "mailto:", "#")
#: A markdown cell holds at most this much text; the rest is cut (a cell is prose, not data).
TEXT_CAP = 100_000


def _image(tokens: Sequence[Any], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    alt = "".join(child.content for child in (token.children or []))
    return html.escape(f"[image: {alt}]" if alt else "[image]")


def _link_open(self: Any, tokens: Sequence[Any], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    target = str(token.attrGet("href") or "")
    if not target.lower().startswith(_SCHEMES):
        token.attrs.pop("href", None)
        token.meta["unlinked"] = True
        return ""
    token.attrSet("rel", "noopener noreferrer nofollow")
    return str(self.renderToken(tokens, idx, options, env))


def _link_close(self: Any, tokens: Sequence[Any], idx: int, options: Any, env: Any) -> str:
    opened = next(
        (
            t
            for t in reversed(tokens[:idx])
            if t.type == "link_open" and t.level == tokens[idx].level
        ),
        None,
    )
    if opened is not None and opened.meta.get("unlinked"):
        return ""
    return str(self.renderToken(tokens, idx, options, env))


@lru_cache(maxsize=1)
def _renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.add_render_rule("image", lambda self, t, i, o, e: _image(t, i, o, e))
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("link_close", _link_close)
    return md


def markdown_html(text: str) -> str:
    """The HTML of a markdown cell's ``text`` (see the module docstring for what it keeps)."""
    return str(_renderer().render(text[:TEXT_CAP]))
