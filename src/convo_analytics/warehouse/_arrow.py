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


def rechunked(table: pa.Table, *, items: bool = False) -> pa.Table:
    """``table`` in record batches small enough for every core to work (no copy).

    ``items``: the table is a list's items taken out (``flattened``), whose
    nested structs are rebuilt so that DuckDB can scan them (``unsliced``).
    """
    rows = max(1, min(_ARROW_CHUNK_ROWS, -(-table.num_rows // _ARROW_MIN_CHUNKS)))
    batches = table.to_batches(max_chunksize=rows)
    if items and any(_nests(f.type) for f in table.schema):
        batches = [
            pa.RecordBatch.from_arrays([unsliced(c) for c in b.columns], schema=b.schema)
            for b in batches
        ]
    return pa.Table.from_batches(batches, table.schema)


def _nests(kind: pa.DataType) -> bool:
    """Whether a struct or list type holds a struct somewhere below its top."""
    if pa.types.is_struct(kind):
        return any(pa.types.is_struct(f.type) or _nests(f.type) for f in kind)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.types.is_struct(kind.value_type) or _nests(kind.value_type)
    return False


def unsliced(array: pa.Array) -> pa.Array:
    """``array`` with no struct below a slice offset, which DuckDB's Arrow scan refuses.

    The items of a list taken out (``flattened``) are a slice of the list's
    values, cut again into record batches; when an item is a struct holding a
    struct (a service's fields under ``attributes``), DuckDB's scan refuses
    such a slice ("a struct or union below an offset"). Structs are rebuilt
    over their children as sliced (no copy of the values); a list of structs
    under an offset is copied.
    """
    kind = array.type
    if not _nests(kind):
        return array
    if pa.types.is_struct(kind):
        mask = array.is_null() if array.null_count else None
        children = [unsliced(child) for child in array.flatten()]
        return pa.StructArray.from_arrays(children, fields=list(kind), mask=mask)
    return pa.concat_arrays([array]) if array.offset else array


def member_type(kind: pa.DataType, member: str) -> pa.DataType | None:
    """The type at the key path ``member`` (dotted) of a struct type, None when absent."""
    for part in member.split("."):
        if not pa.types.is_struct(kind) or kind.get_field_index(part) < 0:
            return None
        kind = kind.field(part).type
    return kind


def _member(chunk: pa.StructArray, member: str) -> pa.Array:
    """The values at the key path ``member`` of each struct (null where a parent is)."""
    kind: pa.DataType = chunk.type
    indices = []
    for part in member.split("."):
        indices.append(kind.get_field_index(part))
        kind = kind.field(part).type
    return pc.struct_field(chunk, indices)


def flattened(parsed: pa.ChunkedArray, member: str) -> pa.Table:
    """The items of the list at the key path ``member`` of each parsed record, one a row (no
    copy of them).

    ``drow`` is the record's row number (its ``rn``), ``position`` the item's
    place in its list (null items keep their place), ``_s`` the item.
    """
    drows, positions, items, first = [], [], [], 0
    for chunk in parsed.chunks:
        lists = _member(chunk, member)
        parents = pc.list_parent_indices(lists).to_numpy()
        drows.append(parents + first)
        # parents ascend: an item's place is its distance from its list's first item
        positions.append(np.arange(len(parents)) - np.searchsorted(parents, parents))
        items.append(pc.list_flatten(lists))
        first += len(chunk)
    list_type = member_type(parsed.type, member)
    assert list_type is not None
    item_type = list_type.value_type
    return pa.table(
        {
            "drow": pa.array(np.concatenate(drows) if drows else [], pa.int64()),
            "position": pa.array(np.concatenate(positions) if positions else [], pa.int32()),
            "_s": pa.chunked_array(items, item_type),
        }
    )


def _struct_without(
    array: pa.StructArray, kind: pa.StructType, members: Sequence[str]
) -> pa.StructArray:
    top = {m for m in members if "." not in m}
    nested: dict[str, list[str]] = {}
    for m in members:
        if "." in m:
            head, rest = m.split(".", 1)
            nested.setdefault(head, []).append(rest)
    fields, children = [], []
    for f in kind:
        if f.name in top:
            continue
        child = array.field(f.name)
        if f.name in nested and pa.types.is_struct(f.type):
            child = _struct_without(child, f.type, nested[f.name])
        fields.append(pa.field(f.name, child.type, f.nullable))
        children.append(child)
    mask = array.is_null() if array.null_count else None
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def without(parsed: pa.ChunkedArray, members: Sequence[str]) -> pa.ChunkedArray:
    """The parsed records without ``members`` (key paths; no copy of the rest)."""
    chunks = [_struct_without(c, parsed.type, members) for c in parsed.chunks]
    if not chunks:
        kept = _struct_without(pa.array([], parsed.type), parsed.type, members)
        return pa.chunked_array([], kept.type)
    return pa.chunked_array(chunks, chunks[0].type)


def as_json(table: pa.Table, column: str) -> pa.Table:
    """``column`` marked as Arrow's JSON type: DuckDB reads it back as JSON, not re-validated.

    DuckDB hands JSON to Arrow as plain text, and inserting text into a JSON
    column validates it again; these payloads were validated while staging.
    """
    i = table.schema.get_field_index(column)
    chunks = [pa.ExtensionArray.from_storage(pa.json_(), c) for c in table.column(i).chunks]
    return table.set_column(i, pa.field(column, pa.json_()), pa.chunked_array(chunks, pa.json_()))
