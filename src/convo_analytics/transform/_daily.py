"""Writing the daily marts a partition at a time.

Two ways, one result. A partition is **recomputed** from every fact that
falls in it (a window of the fact marts and the messages, through
:func:`build_cube`): a full rebuild does this for all of them, a month at a
time, and an incremental run for the days whose messages changed. Or it is
**moved** by the difference between what the changed conversations add to
it now and what they added before (their previous facts are still in the
fact marts when the difference is taken): every daily mart holds integer
counts and histogram counts only, so adding the difference gives exactly the
recomputed rows, and a row whose counts all fall to zero goes, as it would
never have been made. Percentiles per day are then recomputed from the
partition's histograms, the same way in both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, time, timedelta

import duckdb
import polars as pl

from convo_analytics.transform._cube import CELL, Cube, build_cube
from convo_analytics.transform._facts import Facts
from convo_analytics.transform._frames import read_frame
from convo_analytics.transform._mart_set import LIVE, STAGING, MartSet
from convo_analytics.transform._metrics import LATENCY_QUANTILES, MEDIANS, weighted_quantiles
from convo_analytics.transform._partitions import PARTITION, month_groups
from convo_analytics.transform._slices import DIMENSIONS, with_slice_keys
from convo_analytics.warehouse import Table
from convo_analytics.warehouse._marts import DAILY_MARTS, MART_DAILY_PERCENTILES
from convo_analytics.warehouse._tables import snake_case

#: Keys of each cube frame besides its cell (day, workspace, slice).
FRAME_KEYS: dict[str, tuple[str, ...]] = {
    "conversations": (),
    "messages": ("model_tier",),
    "latency": ("model_tier", "latency_ms"),
    "guardrails": ("flag",),
    "escalations": ("destination",),
    "durations": ("measure", "value"),
}
#: The counts whose sum is zero exactly when nothing is left in a row.
PRESENCE: dict[str, tuple[str, ...]] = {
    "conversations": ("conversations",),
    "messages": ("user_messages", "assistant_responses"),
    "latency": ("responses",),
    "guardrails": ("triggers",),
    "escalations": ("escalations",),
    "durations": ("conversations",),
}
#: Marts made from the same facts, rewritten together.
FAMILIES: dict[str, tuple[str, ...]] = {
    "conversations": ("conversations", "durations"),  # by start day
    "messages": ("messages", "latency"),  # by the message's day
    "escalations": ("escalations",),
    "guardrails": ("guardrails",),
}
_CONSTANT = "low_confidence_threshold"
#: A full rebuild commits the staging marts after about this many rows: DuckDB holds a
#: transaction's new rows in memory (some 50 bytes each) until it commits.
COMMIT_ROWS = 4_000_000


def mart_frame(cube: Cube, name: str) -> pl.DataFrame:
    """A cube frame as the mart's rows (with its zone, and the threshold on messages)."""
    table: pl.DataFrame = getattr(cube, name)
    frame = table.with_columns(timezone=pl.lit(cube.timezone))
    if name == "messages":
        frame = frame.with_columns(pl.lit(cube.low_confidence_threshold).alias(_CONSTANT))
    return frame


def _keys(name: str) -> list[str]:
    return [*CELL, "timezone", *FRAME_KEYS[name]]


def _values(table: Table, name: str) -> list[str]:
    keys = _keys(name)
    return [c.name for c in table.columns if c.name not in keys and c.name != _CONSTANT]


def insert_rows(con: duckdb.DuckDBPyConnection, table: Table, frame: pl.DataFrame) -> int:
    """Append a frame's rows (its columns named as the table's) to ``table``."""
    if frame.is_empty():
        return 0
    name = f"_rows_{table.name}"
    con.register(name, frame.to_arrow())
    try:
        cols = ", ".join(c.name for c in table.columns if c.name in frame.columns)
        con.execute(f"INSERT INTO {table.name} ({cols}) SELECT {cols} FROM {name}")
    finally:
        con.unregister(name)
    return frame.height


def _partition_match(alias: str, other: str) -> str:
    return " AND ".join(f"{alias}.{k} IS NOT DISTINCT FROM {other}.{k}" for k in PARTITION)


def delete_partitions(
    con: duckdb.DuckDBPyConnection, tables: Iterable[Table], partitions: pl.DataFrame
) -> None:
    """Remove the rows of those partitions from each table."""
    if partitions.is_empty():
        return
    con.register("_parts", partitions.select(PARTITION).unique().to_arrow())
    try:
        for table in tables:
            con.execute(
                f"DELETE FROM {table.name} t USING _parts p WHERE {_partition_match('t', 'p')}"
            )
    finally:
        con.unregister("_parts")


# -- moving partitions by differences ------------------------------------------------------


def difference(new: Cube, old: Cube, name: str) -> pl.DataFrame:
    """What ``new`` adds to each row of the mart minus what ``old`` added (zero rows dropped)."""
    keys = _keys(name)
    table = DAILY_MARTS[name]
    values = _values(table, name)
    signed = [
        mart_frame(cube, name).select(*keys, *(pl.col(v).cast(pl.Int64) * sign for v in values))
        for cube, sign in ((new, 1), (old, -1))
    ]
    summed = (
        pl.concat(signed, how="vertical_relaxed")
        .group_by(keys)
        .agg(pl.col(v).sum() for v in values)
        .filter(pl.any_horizontal(pl.col(v) != 0 for v in values))
    )
    if name == "messages":
        summed = summed.with_columns(pl.lit(new.low_confidence_threshold).alias(_CONSTANT))
    return summed


def merge_difference(con: duckdb.DuckDBPyConnection, name: str, delta: pl.DataFrame) -> None:
    """Add ``delta`` to the mart: matching rows summed (and removed when nothing is left),
    new ones inserted. Keys may be NULL (a workspace, a user message's tier)."""
    if delta.is_empty():
        return
    table = DAILY_MARTS[name]
    keys = _keys(name)
    on = " AND ".join(f"m.{k} IS NOT DISTINCT FROM d.{k}" for k in keys)
    left = " + ".join(f"m.{c} + d.{c}" for c in PRESENCE[name])
    sets = ", ".join(f"{v} = m.{v} + d.{v}" for v in _values(table, name))
    cols = [c.name for c in table.columns]
    con.register("_delta", delta.to_arrow())
    try:
        con.execute(
            f"""MERGE INTO {table.name} AS m USING _delta AS d ON {on}
                WHEN MATCHED AND {left} = 0 THEN DELETE
                WHEN MATCHED THEN UPDATE SET {sets}
                WHEN NOT MATCHED THEN INSERT ({", ".join(cols)})
                    VALUES ({", ".join(f"d.{c}" for c in cols)})"""
        )
    finally:
        con.unregister("_delta")


# -- recomputing partitions from a window of facts --------------------------------------------

#: The footprints a family's facts join for their conversation's workspace and slice;
#: ``{feet}`` narrows them, so that the join's hash table holds only those it can meet.
_FEET = "(SELECT conversation_id, workspace_id, slice_key FROM {footprints} WHERE {feet}) f"
#: Where each family's facts come from, with the UTC time they are dated by and the
#: conversation they belong to; ``{where}`` picks the rows.
DATED_SOURCES: dict[str, tuple[str, str, str]] = {
    "conversations": (
        f"""SELECT f.workspace_id, f.slice_key, c.started_at, c.engaged, c.status, c.escalated,
                  c.contained, c.qualified_at, c.feedback_rating, c.positive_feedback,
                  c.first_response_ms, c.resolution_seconds
           FROM {{conversations}} c JOIN {_FEET} USING (workspace_id, conversation_id)
           WHERE {{where}}""",
        "c.started_at",
        "c.conversation_id",
    ),
    "messages": (
        f"""SELECT f.workspace_id, f.slice_key, m.role = 'user' AS is_user,
                  m.role = 'assistant' AS is_assistant, m.created_at, m.latency_ms,
                  m.model_tier, m.confidence
           FROM messages m JOIN {_FEET}
             ON f.workspace_id = m.workspace_id AND f.conversation_id = m.conversation_id
           WHERE m.role IN ('user', 'assistant') AND {{where}}""",
        "m.created_at",
        "m.conversation_id",
    ),
    "escalations": (
        f"""SELECT f.workspace_id, f.slice_key, e.escalated_at, e.destination
           FROM {{escalations}} e JOIN {_FEET} USING (workspace_id, conversation_id)
           WHERE {{where}}""",
        "e.escalated_at",
        "e.conversation_id",
    ),
    "guardrails": (
        f"""SELECT g.workspace_id, g.triggered_at, g.flag, {", ".join(DIMENSIONS)}
            FROM {{incidents}} g WHERE {{where}}""",
        "g.triggered_at",
        "g.conversation_id",
    ),
}


def dated_facts(
    con: duckdb.DuckDBPyConnection,
    where: Mapping[str, str],
    feet: Mapping[str, str] | None = None,
    marts: MartSet = LIVE,
) -> Facts:
    """The facts of the marts that ``where`` picks per family (a family left out: none);
    ``feet`` narrows the footprints each family joins (all of them by default)."""
    names = {
        "conversations": marts.conversations.name,
        "footprints": marts.footprints.name,
        "escalations": marts.escalations.name,
        "incidents": marts.incidents.name,
    }
    frames = {
        family: read_frame(
            con,
            sql.format(
                where=where.get(family, "FALSE"), feet=(feet or {}).get(family, "TRUE"), **names
            ),
        )
        for family, (sql, _, _) in DATED_SOURCES.items()
    }
    return Facts(
        conversations=frames["conversations"],
        messages=frames["messages"],
        escalations=frames["escalations"],
        incidents=with_slice_keys(frames["guardrails"]),
        slices=pl.DataFrame(),
    )


def _window_facts(
    con: duckdb.DuckDBPyConnection,
    lo: datetime,
    hi: datetime,
    families: set[str],
    marts: MartSet,
) -> Facts:
    """The facts dated in ``lo``..``hi`` (UTC) that the families need; messages join only
    the footprints of conversations whose messages overlap the window."""
    low, high = f"'{lo.isoformat()}'::TIMESTAMPTZ", f"'{hi.isoformat()}'::TIMESTAMPTZ"
    where = {
        family: f"{at} >= {low} AND {at} < {high}"
        for family, (_, at, _) in DATED_SOURCES.items()
        if family in families
    }
    span = f"first_message_at < {high} AND last_message_at >= {low}"
    return dated_facts(con, where, {"messages": span}, marts)


def _utc_window(days: pl.Series) -> tuple[datetime, datetime]:
    """UTC bounds holding those days in every zone (UTC-12 to UTC+14)."""
    first, last = days.min(), days.max()
    assert isinstance(first, date) and isinstance(last, date)
    lo = datetime.combine(first - timedelta(days=1), time(), UTC)
    return lo, datetime.combine(last + timedelta(days=2), time(), UTC)


def recompute_partitions(
    con: duckdb.DuckDBPyConnection,
    wanted: Mapping[str, pl.DataFrame],
    zones: tuple[str, ...],
    threshold: float,
    *,
    staged: bool = False,
) -> None:
    """Recompute the wanted partitions of each family from the facts, a month at a time.

    ``wanted`` maps a family to its partitions. ``staged`` is a full rebuild's: it reads
    and fills the staging marts, which hold nothing of those partitions yet (so nothing
    is deleted), recomputes every family, so each partition's percentile row is made
    here too from the histograms in memory, and commits every few million rows.
    """
    marts = STAGING if staged else LIVE
    pending = 0
    tagged = [
        parts.select(PARTITION).unique().with_columns(family=pl.lit(family))
        for family, parts in wanted.items()
        if not parts.is_empty()
    ]
    if not tagged:
        return
    for group in month_groups(pl.concat(tagged, how="vertical_relaxed")):
        families = sorted(set(group["family"].unique().to_list()))
        lo, hi = _utc_window(group["date"])
        facts = _window_facts(con, lo, hi, set(families), marts)
        if not staged:
            for family in families:
                parts = group.filter(pl.col("family") == family)
                delete_partitions(con, [marts.daily[n] for n in FAMILIES[family]], parts)
        for tz in zones:
            in_zone = group.filter(pl.col("timezone") == tz)
            if in_zone.is_empty():
                continue
            cube = build_cube(facts, tz, threshold)
            rows: dict[str, pl.DataFrame] = {}
            for family in families:
                parts = in_zone.filter(pl.col("family") == family).select(PARTITION)
                for name in FAMILIES[family]:
                    rows[name] = mart_frame(cube, name).join(
                        parts, on=list(PARTITION), how="semi", nulls_equal=True
                    )
                    pending += insert_rows(con, marts.daily[name], rows[name])
            if staged:
                pending += insert_rows(con, marts.percentiles, _percentiles_in_memory(rows))
        if staged and pending >= COMMIT_ROWS:
            con.execute("COMMIT")
            con.execute("BEGIN TRANSACTION")
            pending = 0


# -- per-day percentiles ---------------------------------------------------------------------

_PERCENTILE_COLUMNS = {name: snake_case(name) for name in (*LATENCY_QUANTILES, *MEDIANS)}


def _histogram(con: duckdb.DuckDBPyConnection, name: str, where: str = "") -> pl.DataFrame:
    """A histogram mart's counts per partition and value (slices and tiers summed), for the
    partitions registered as ``_need``."""
    value, weight = _HISTOGRAMS[name]
    keys = "t.measure, " if name == "durations" else ""
    return read_frame(
        con,
        f"SELECT t.workspace_id, t.timezone, t.date, {keys}t.{value} AS value, "
        f"sum(t.{weight})::BIGINT AS n FROM {DAILY_MARTS[name].name} t "
        f"SEMI JOIN _need p ON {_partition_match('t', 'p')} {where} GROUP BY ALL",
    )


#: The histogram marts: the value and the count of each row.
_HISTOGRAMS = {"latency": ("latency_ms", "responses"), "durations": ("value", "conversations")}


def _histogram_of(rows: pl.DataFrame, name: str) -> pl.DataFrame:
    """The same histogram from a histogram mart's rows in memory."""
    value, weight = _HISTOGRAMS[name]
    keys = [*PARTITION, *(("measure",) if name == "durations" else ())]
    return rows.group_by(*keys, pl.col(value).alias("value")).agg(
        pl.col(weight).sum().cast(pl.Int64).alias("n")
    )


def _quantiles(hist: pl.DataFrame, quantiles: dict[str, float]) -> pl.DataFrame:
    """The quantiles of each partition's histogram (the summary's interpolation)."""
    out = []
    for (ws, tz), part in hist.group_by("workspace_id", "timezone"):
        found = weighted_quantiles(part.lazy(), "value", "n", quantiles).collect()
        out.append(found.with_columns(workspace_id=pl.lit(ws, pl.String), timezone=pl.lit(tz)))
    schema = {**dict.fromkeys(PARTITION, pl.String), "date": pl.Date}
    schema.update(dict.fromkeys(quantiles, pl.Float64))
    if not out:
        return pl.DataFrame(schema=schema)
    return pl.concat(out, how="vertical_relaxed").select(*PARTITION, *quantiles)


def _percentile_columns(partitions: pl.DataFrame, hist: pl.DataFrame, which: str) -> pl.DataFrame:
    """``partitions`` with the latency percentiles or the duration medians of ``hist`` (a
    histogram of ``which``), None where a partition has no values."""
    if which == "latency":
        parts = [_quantiles(hist, LATENCY_QUANTILES)]
    else:
        parts = [
            _quantiles(hist.filter(pl.col("measure") == measure), {name: 0.5})
            for name, measure in MEDIANS.items()
        ]
    out = partitions.select(PARTITION)
    for part in parts:
        out = out.join(part, on=list(PARTITION), how="left", nulls_equal=True)
    return out.rename(_PERCENTILE_COLUMNS, strict=False)


def _percentiles_in_memory(rows: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """The percentile rows of freshly recomputed partitions (every family in ``rows``)."""
    present = pl.concat(
        [rows[n].select(PARTITION) for n in ("conversations", "messages")],
        how="vertical_relaxed",
    ).unique()
    out = _percentile_columns(present, _histogram_of(rows["latency"], "latency"), "latency")
    durations = _percentile_columns(
        present, _histogram_of(rows["durations"], "durations"), "durations"
    )
    return out.join(durations, on=list(PARTITION), how="left", nulls_equal=True)


def _computed(con: duckdb.DuckDBPyConnection, need: pl.DataFrame, which: str) -> pl.DataFrame:
    """Latency percentiles or duration medians of the ``need`` partitions, from the marts."""
    con.register("_need", need.select(PARTITION).to_arrow())
    try:
        hist = _histogram(con, which)
    finally:
        con.unregister("_need")
    return _percentile_columns(need, hist, which)


def refresh_percentiles(
    con: duckdb.DuckDBPyConnection,
    latency: pl.DataFrame,
    durations: pl.DataFrame,
    presence: pl.DataFrame,
) -> int:
    """Rewrite the percentile rows of the partitions whose latency histogram, duration
    histograms or rows (``presence``: conversations or messages) changed.

    A partition has a row while it has conversations or messages; a row keeps the columns
    whose histogram did not change, so a day whose only change is a late rating does not
    read its latency histogram again.
    """
    touched = pl.concat(
        [f.select(PARTITION) for f in (latency, durations, presence)], how="vertical_relaxed"
    ).unique()
    if touched.is_empty():
        return 0
    table = MART_DAILY_PERCENTILES
    con.register("_touched", touched.to_arrow())
    try:
        previous = read_frame(
            con,
            f"SELECT t.* FROM {table.name} t SEMI JOIN _touched p ON " + _partition_match("t", "p"),
        )
        present = read_frame(
            con,
            " UNION ".join(
                f"SELECT DISTINCT t.workspace_id, t.timezone, t.date FROM {DAILY_MARTS[n].name} t "
                f"SEMI JOIN _touched p ON {_partition_match('t', 'p')}"
                for n in ("conversations", "messages")
            ),
        )
    finally:
        con.unregister("_touched")
    on = list(PARTITION)
    arrived = present.join(previous, on=on, how="anti", nulls_equal=True)
    rows = present.join(previous, on=on, how="left", nulls_equal=True)
    for which, changed, names in (
        ("latency", latency, LATENCY_QUANTILES),
        ("durations", durations, MEDIANS),
    ):
        need = (
            pl.concat([changed.select(on), arrived], how="vertical_relaxed")
            .unique()
            .join(present, on=on, how="semi", nulls_equal=True)
        )
        if need.is_empty():
            continue
        fresh = (
            _computed(con, need, which)
            .rename({_PERCENTILE_COLUMNS[name]: f"_new_{name}" for name in names})
            .with_columns(_fresh=pl.lit(True))
        )
        rows = (
            rows.join(fresh, on=on, how="left", nulls_equal=True)
            .with_columns(
                pl.when(pl.col("_fresh").fill_null(False))
                .then(pl.col(f"_new_{name}"))
                .otherwise(pl.col(_PERCENTILE_COLUMNS[name]))
                .alias(_PERCENTILE_COLUMNS[name])
                for name in names
            )
            .drop("_fresh", *(f"_new_{name}" for name in names))
        )
    delete_partitions(con, [table], touched)
    return insert_rows(con, table, rows)
