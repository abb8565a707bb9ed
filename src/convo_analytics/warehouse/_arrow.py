"""Staged records in Arrow: the small record batches DuckDB reads on every core.

A batch's records are staged as Arrow tables registered with DuckDB rather
than as temporary tables (decision D-LOAD-ARROW); these helpers shape them:
split into small record batches, the payload marked as JSON, and the lists
of a parsed record taken out as flat tables, without copying the records.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: At most this many rows per Arrow record batch handed to DuckDB, and at least this many
#: batches when there are enough rows: DuckDB gives each thread whole record batches, so
#: one batch would parse and hash a whole commit on one core (and a temporary table
#: smaller than a row group, 122,880 rows, is scanned by one thread too).
_ARROW_CHUNK_ROWS = 256
_ARROW_MIN_CHUNKS = 8


def chunked(array: pa.Array) -> pa.Table:
    """A one-column (``raw``) table in record batches small enough for every core to work."""
    return rechunked(pa.table({"raw": array}))


def rechunked(table: pa.Table) -> pa.Table:
    """``table`` in record batches small enough for every core to work (no copy)."""
    rows = max(1, min(_ARROW_CHUNK_ROWS, -(-table.num_rows // _ARROW_MIN_CHUNKS)))
    return pa.Table.from_batches(table.to_batches(max_chunksize=rows), table.schema)


def flattened(parsed: pa.ChunkedArray, member: str) -> pa.Table:
    """The items of the list ``member`` of each parsed record, one a row (no copy of them).

    ``drow`` is the record's row number (its ``rn``), ``position`` the item's
    place in its list (null items keep their place), ``_s`` the item.
    """
    drows, positions, items, first = [], [], [], 0
    for chunk in parsed.chunks:
        lists = chunk.field(member)
        parents = pc.list_parent_indices(lists).to_numpy()
        drows.append(parents + first)
        # parents ascend: an item's place is its distance from its list's first item
        positions.append(np.arange(len(parents)) - np.searchsorted(parents, parents))
        items.append(pc.list_flatten(lists))
        first += len(chunk)
    item_type = parsed.type.field(member).type.value_type
    return pa.table(
        {
            "drow": pa.array(np.concatenate(drows) if drows else [], pa.int64()),
            "position": pa.array(np.concatenate(positions) if positions else [], pa.int32()),
            "_s": pa.chunked_array(items, item_type),
        }
    )


def without(parsed: pa.ChunkedArray, members: Sequence[str]) -> pa.ChunkedArray:
    """The parsed records without ``members`` (no copy of the rest)."""
    keep = [f for f in parsed.type if f.name not in members]
    chunks = [
        pa.StructArray.from_arrays(
            [c.field(f.name) for f in keep], fields=keep, mask=c.is_null() if c.null_count else None
        )
        for c in parsed.chunks
    ]
    return pa.chunked_array(chunks, pa.struct(keep))


def as_json(table: pa.Table, column: str) -> pa.Table:
    """``column`` marked as Arrow's JSON type: DuckDB reads it back as JSON, not re-validated.

    DuckDB hands JSON to Arrow as plain text, and inserting text into a JSON
    column validates it again; these payloads were validated while staging.
    """
    i = table.schema.get_field_index(column)
    chunks = [pa.ExtensionArray.from_storage(pa.json_(), c) for c in table.column(i).chunks]
    return table.set_column(i, pa.field(column, pa.json_()), pa.chunked_array(chunks, pa.json_()))
