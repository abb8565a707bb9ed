"""One transaction on a DuckDB connection: committed when the block ends, rolled back when
it raises (anything, a KeyboardInterrupt too).

Its own module because both the opening of the warehouse (``_connection``) and the
upgrades it runs (``_upgrade``) need it; kept in either, the two would import each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

__all__ = ["transaction"]


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
