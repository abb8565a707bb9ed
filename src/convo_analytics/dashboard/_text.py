"""Text from the data (or a URL) shown as text, never as markup (decision D-DASH-TEXT).

End users write the messages, user ids and metadata the dashboard shows, and
anyone can write a link's query string. Streamlit renders Markdown in far more
places than ``st.markdown``: captions, alerts, headings, metric values, widget
and button labels, tab and expander labels, help texts. There a message such as
``![x](http://host/beacon.png)`` becomes an image the browser fetches, and
``[sign in again](http://…)`` a link. Backslash escapes are not enough:
Streamlit's Markdown also turns bare URLs, ``www.`` names and e-mail
addresses into links, ``:name:`` into emoji and ``->`` into arrows after
escapes are undone, and rewrites ``:material/`` before parsing.

So: a long text (a message) is drawn with ``st.text``, which parses nothing,
and a table with ``st.dataframe``; a value set inside one of our own Markdown
sentences goes through :func:`plain`, which leaves a word, a number or a date
as it is and puts anything else in an inline code span, whose content
CommonMark shows character for character. Pure functions, no Streamlit.
"""

from __future__ import annotations

import re

__all__ = ["MAX_SHOWN", "plain", "shorten"]

#: How many characters of a value a sentence quotes (the rest is cut with "…").
MAX_SHOWN = 80
#: Words, numbers, dates, ids and zone names: letters and digits joined by single
#: spaces, dots, hyphens, underscores or slashes. Nothing in Markdown or in Streamlit's
#: extras (links, emphasis, emoji, arrows, directives, maths) can start in such a text,
#: except a "www." link, which is checked apart.
_SAFE = re.compile(r"[^\W_]+(?:[ ._/-][^\W_]+)*")
_BACKTICKS = re.compile(r"`+")
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")


def shorten(value: object, limit: int = MAX_SHOWN) -> str:
    """``value`` as one line of at most ``limit`` characters (cut with "…")."""
    text = _LINE_BREAKS.sub(" ", str(value))
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def plain(value: object, limit: int | None = MAX_SHOWN) -> str:
    """``value`` made safe to put in a Markdown sentence: shown as the characters it is.

    A plain word, number, date or id is returned as it is, so our sentences keep
    reading naturally; anything else becomes an inline code span (fenced by more
    backticks than it holds), on one line and cut to ``limit`` characters
    (None: uncut). None (a missing value) is the empty string.
    """
    if value is None:
        return ""
    text = shorten(value, limit) if limit is not None else _LINE_BREAKS.sub(" ", str(value))
    if not text:
        return ""
    if _SAFE.fullmatch(text) and "www." not in text.casefold():
        return text
    # Streamlit replaces ":material/" in the source before parsing, even in code spans;
    # a zero-width space keeps the characters (as they look) from being an icon.
    text = text.replace(":material/", ":\u200bmaterial/")
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}"
