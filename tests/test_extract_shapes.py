"""Response shapes: finding records and fields, schemas and their drift, timestamps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import RunningSandbox
from convo_analytics.extract._shapes import (
    ENVELOPE_KEYS,
    Drift,
    FieldMap,
    ShapeError,
    bool_at,
    compare_schemas,
    detect_fields,
    find_records,
    has_path,
    int_at,
    json_type,
    parse_timestamp,
    schema_of,
    value_at,
)

# --- paths ----------------------------------------------------------------------------------


def test_value_at_reads_dotted_paths_and_keys_with_dots() -> None:
    body = {"meta": {"next": {"cursor": "c"}, "n": None}, "@odata.nextLink": "u", "a.b": {"c": 1}}
    assert value_at(body, "meta.next.cursor") == "c"
    assert value_at(body, "@odata.nextLink") == "u"
    assert value_at(body, "a.b.c") == 1
    assert value_at(body, "meta.missing") is None
    assert value_at(body, "meta.missing", 0) == 0
    assert value_at([1, 2], "0") is None
    assert has_path(body, "meta.n") and not has_path(body, "meta.m")


def test_int_at_and_bool_at_take_the_first_of_their_kind() -> None:
    body = {"total": "12", "count": True, "meta": {"total": 7}, "more": "yes", "has_more": False}
    assert int_at(body, ["total", "count", "meta.total"]) == ("meta.total", 7)
    assert int_at(body, ["total"]) is None
    assert bool_at(body, ["more", "has_more"]) is False
    assert bool_at(body, ["more"]) is None


# --- records --------------------------------------------------------------------------------


def test_find_records_in_the_common_shapes() -> None:
    rows = [{"id": 1}, {"id": 2}]
    assert find_records(rows) == (rows, None)
    assert find_records({"data": rows, "hasMore": False}) == (rows, "data")
    assert find_records({"results": rows, "count": 2}) == (rows, "results")
    assert find_records({"value": rows}) == (rows, "value")
    assert find_records({"data": [], "items": rows}) == ([], "data")  # preference order
    assert find_records({"widgets": rows, "tags": ["a"], "n": 2}) == (rows, "widgets")
    assert find_records({"widgets": [], "next": None}) == ([], "widgets")
    with pytest.raises(ShapeError):
        find_records({"tags": ["a", "b"], "n": 2})  # a list of strings holds no records
    assert find_records({"payload": {"list": rows}}, "payload.list") == (rows, "payload.list")
    assert find_records({"data": {"x": 1}, "other": rows}, "other") == (rows, "other")
    assert ENVELOPE_KEYS[0] == "data"


@pytest.mark.parametrize(
    ("body", "envelope", "message"),
    [
        ({"a": [{"id": 1}], "b": [{"id": 2}]}, None, r"keys: 'a', 'b'.*the stream's records"),
        ({"total": 3}, None, "set the stream.s records"),
        ({"data": [{"id": 1}]}, "items", "nothing at 'items'"),
        ({"data": {"id": 1}}, "data", "a JSON object at 'data'"),
        ({"data": [1, 2]}, "data", "non-objects"),
        ([1, 2], None, "non-objects"),
        ("hello", None, "a JSON string"),
    ],
)
def test_find_records_errors_say_what_to_set(body: Any, envelope: str | None, message: str) -> None:
    with pytest.raises(ShapeError, match=message):
        find_records(body, envelope)


# --- fields ---------------------------------------------------------------------------------


def test_detect_fields_picks_common_names() -> None:
    camel = [{"id": "c1", "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-02"}]
    assert detect_fields(camel, "data") == FieldMap("data", "id", "createdAt", "updatedAt")
    snake = [{"uuid": "u", "created_at": 1_700_000_000, "modified_at": 1_700_000_000_000}]
    assert detect_fields(snake, None) == FieldMap(None, "uuid", "created_at", "modified_at")
    bare = [{"key": 5, "name": "x"}]
    assert detect_fields(bare, None) == FieldMap(None, "key", None, None)
    kinds = [{"key": "lead", "leadId": 1}, {"key": "lead", "leadId": 2}]
    assert detect_fields(kinds, None).id == "leadId"  # ids are distinct


def test_detect_fields_wants_usable_values_in_most_records() -> None:
    records: list[dict[str, Any]] = [
        {"id": None, "_id": "a", "updated": True, "updated_at": "2026-01-01T00:00:00+02:00"},
        {"id": None, "_id": "b", "updated": False, "updated_at": "2026-01-01"},
        {"id": "x", "_id": "c", "updated": True},
    ]
    fields = detect_fields(records, "items")
    assert (fields.id, fields.updated) == ("_id", "updated_at")


def test_detect_fields_overrides_and_errors() -> None:
    records = [{"ref": "a", "when": "2026-01-01", "id": "z"}]
    fields = detect_fields(records, "data", {"id": "ref", "created": "when"})
    assert fields == FieldMap("data", "ref", "when", None)
    with pytest.raises(ShapeError, match=r"the stream's updated is 'changed'.*fields seen"):
        detect_fields(records, "data", {"updated": "changed"})
    with pytest.raises(ShapeError) as info:
        detect_fields([{"name": "a"}, {"name": "b"}], "data")
    assert "id, _id, uuid" in str(info.value) and "the stream's id" in str(info.value)
    assert detect_fields([], "data") == FieldMap("data", "id", None, None)
    assert detect_fields([], None, {"id": "ref"}).id == "ref"
    with pytest.raises(ValueError, match="unknown field roles"):
        detect_fields(records, "data", {"id_field": "ref"})


def test_detect_fields_on_the_sandbox_records(shared_sandbox: RunningSandbox) -> None:
    with shared_sandbox.client() as client:
        for path in ("/v1/conversations", "/v1/leads"):
            body = client.get(
                path, params={"limit": 20, "status": "any"} if "leads" in path else {"limit": 20}
            ).json()
            records, envelope = find_records(body)
            assert envelope == "data" and records
            assert detect_fields(records, envelope) == FieldMap(
                "data", "id", "createdAt", "updatedAt"
            )


# --- schemas and drift ----------------------------------------------------------------------


def test_json_type() -> None:
    cases = {
        "string": "a",
        "integer": 3,
        "number": 3.0,
        "boolean": False,
        "null": None,
        "object": {},
        "array": [],
    }
    for name, value in cases.items():
        assert json_type(value) == name
    with pytest.raises(TypeError):
        json_type(object())


def test_schema_of() -> None:
    records: list[dict[str, Any]] = [
        {"a": 1, "b": None, "c": "x", "d": 1, "e": [1]},
        {"a": None, "b": None, "c": 2, "d": 2.5},
        {"a": 3, "c": "y", "f": {"k": 1}},
    ]
    assert schema_of(records) == {
        "a": "integer",
        "b": "null",
        "c": "mixed:integer|string",
        "d": "number",
        "e": "array",
        "f": "object",
    }
    assert schema_of([]) == {}


def test_compare_schemas_and_describe() -> None:
    before = {"id": "string", "n": "integer", "gone": "boolean", "x": "null", "s": "string"}
    after = {"id": "string", "n": "number", "new": "array", "x": "string", "s": "integer"}
    drift = compare_schemas(before, after)
    assert drift == Drift({"new": "array"}, {"gone": "boolean"}, {"s": ("string", "integer")})
    assert not drift.is_empty()
    assert drift.describe() == [
        "new field 'new' (array)",
        "missing field 'gone' (was boolean)",
        "field 's' changed type: string -> integer",
    ]
    assert compare_schemas({"a": "number"}, {"a": "integer"}).is_empty()
    assert compare_schemas({"a": "string"}, {"a": "null"}).is_empty()
    mixed = compare_schemas({"a": "string"}, {"a": "mixed:integer|string"})
    assert mixed.retyped == {"a": ("string", "mixed:integer|string")}
    assert compare_schemas({"a": "mixed:integer|string"}, {"a": "mixed:number|string"}).is_empty()
    assert Drift({}, {}, {}).describe() == []


TYPES = st.sampled_from(["string", "integer", "number", "boolean", "null", "object", "array"])
SCHEMAS = st.dictionaries(st.text(min_size=1, max_size=8), TYPES, max_size=12)


@given(SCHEMAS)
def test_a_schema_compared_with_itself_has_no_drift(schema: dict[str, str]) -> None:
    assert compare_schemas(schema, schema).is_empty()
    assert compare_schemas(schema, dict(schema)).describe() == []


@given(SCHEMAS, SCHEMAS)
def test_drift_is_symmetric(a: dict[str, str], b: dict[str, str]) -> None:
    forth, back = compare_schemas(a, b), compare_schemas(b, a)
    assert forth.new == back.missing and forth.missing == back.new
    assert forth.retyped == {k: (y, x) for k, (x, y) in back.retyped.items()}
    assert set(forth.new) | set(forth.missing) == set(a) ^ set(b)


@given(st.lists(st.dictionaries(st.sampled_from("abcd"), st.none() | st.integers() | st.text())))
def test_schema_of_records_with_themselves(records: list[dict[str, Any]]) -> None:
    schema = schema_of(records)
    assert set(schema) == {k for r in records for k in r}
    assert compare_schemas(schema, schema_of(records + records)).is_empty()


# --- timestamps -----------------------------------------------------------------------------

T = datetime(2026, 3, 4, 5, 6, 7, 123000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-03-04T05:06:07.123Z", T),
        ("2026-03-04T05:06:07.123z", T),
        ("2026-03-04t05:06:07.123+00:00", T),
        ("2026-03-04T10:36:07.123+05:30", T),
        ("2026-03-04T00:06:07.123-05:00", T),
        ("2026-03-04 05:06:07.123", T),
        ("2026-03-04T05:06:07.123456789Z", T.replace(microsecond=123456)),
        ("  2026-03-04T05:06:07.123Z ", T),
        ("2026-03-04", datetime(2026, 3, 4, tzinfo=UTC)),
        ("20260304", datetime(2026, 3, 4, tzinfo=UTC)),
        (T.timestamp(), T),
        (int(T.timestamp() * 1000), T),
        (str(int(T.timestamp())), T.replace(microsecond=0)),
        (0, datetime(1970, 1, 1, tzinfo=UTC)),
        (datetime(2026, 3, 4, 5, 6, 7, 123000), T),
        (T.astimezone(timezone(timedelta(hours=-3))), T),
    ],
)
def test_parse_timestamp(value: Any, expected: datetime) -> None:
    got = parse_timestamp(value)
    assert got == expected and got is not None and got.tzinfo is UTC


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        "",
        "yesterday",
        "2026-13-01",
        [],
        {},
        float("nan"),
        float("-inf"),
        10**30,
        10**400,
        "9" * 400,
        "1e5",
    ],
)
def test_parse_timestamp_gives_none_for_what_is_not_a_time(value: Any) -> None:
    assert parse_timestamp(value) is None


OFFSETS = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
#: From 1974: epoch milliseconds before March 1973 are below 1e11 and read as seconds.
INSTANTS = st.datetimes(min_value=datetime(1974, 1, 1), max_value=datetime(2200, 1, 1))


@given(INSTANTS, OFFSETS)
def test_parse_timestamp_roundtrips_aware_datetimes(naive: datetime, tz: timezone) -> None:
    aware = naive.replace(tzinfo=tz)
    for text in (aware.isoformat(), aware.astimezone(UTC).isoformat().replace("+00:00", "Z")):
        parsed = parse_timestamp(text)
        assert parsed == aware and parsed is not None and parsed.utcoffset() == timedelta(0)
    millis = int(aware.timestamp() * 1000)
    assert parse_timestamp(millis) == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(
        milliseconds=millis
    )
