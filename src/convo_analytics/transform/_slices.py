"""Slice keys: one integer per combination of dimension values, the same in every run.

The dimensions are the conversation's channel, locale, source, intent and topic (the id of
its topic in its workspace, as text: curations rename and merge topics through
``mart_topics`` without touching the marts; D-TOPICS-WAREHOUSE).

The daily marts group on an integer ``slice_key`` rather than on five
strings. When every transform rebuilt every mart, the keys could simply be
numbered; partitions rewritten one at a time need a key that does not depend
on what else is in the warehouse, so a key is a 64-bit BLAKE2b hash of the
five values (stable across releases and platforms, unlike polars' or
DuckDB's own hashes). A collision would merge two slices silently, so the
transform checks that ``mart_slices`` never gives one key two rows.
"""

from __future__ import annotations

import hashlib

import polars as pl

#: Dimensions every fact and every daily cube is sliced by.
DIMENSIONS = ("channel", "locale", "source", "intent", "topic")
_SEPARATOR = b"\x1f"


def slice_key(values: tuple[str, ...]) -> int:
    """The key of one combination of dimension values (a signed 64-bit integer)."""
    digest = hashlib.blake2b(
        _SEPARATOR.join(v.encode("utf-8") for v in values), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


def slices_of(frame: pl.DataFrame) -> pl.DataFrame:
    """The distinct dimension values of ``frame`` with their keys (sorted by the values)."""
    unique = frame.select(DIMENSIONS).unique().sort(DIMENSIONS)
    keys = [slice_key(tuple(row)) for row in unique.iter_rows()]
    return unique.with_columns(pl.Series("slice_key", keys, dtype=pl.Int64)).select(
        "slice_key", *DIMENSIONS
    )


def with_slice_keys(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` (whose dimensions are filled) with the ``slice_key`` of its dimension values."""
    return frame.join(slices_of(frame), on=list(DIMENSIONS), how="left", nulls_equal=True)
