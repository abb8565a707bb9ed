"""The test PostgreSQL server itself: it starts from Debian's packages, answers SQL over
loopback TCP through the driver the lake's catalog and Dagster use, and keeps databases apart."""

from __future__ import annotations

import uuid
from typing import Any


def test_the_test_server_answers_sql_and_keeps_databases_apart(postgres: Any) -> None:
    import sqlalchemy

    name = postgres.create_database(f"t_{uuid.uuid4().hex[:8]}")
    engine = sqlalchemy.create_engine(postgres.url(database=name))
    try:
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text("CREATE TABLE t (x int)"))
            conn.execute(sqlalchemy.text("INSERT INTO t VALUES (1), (2)"))
        with engine.connect() as conn:
            assert conn.execute(sqlalchemy.text("SELECT sum(x) FROM t")).scalar() == 3
            host = conn.execute(sqlalchemy.text("SELECT inet_server_addr()")).scalar()
            assert str(host) == "127.0.0.1"
    finally:
        engine.dispose()
    other = sqlalchemy.create_engine(postgres.url())
    try:
        with other.connect() as conn:
            tables = conn.execute(
                sqlalchemy.text("SELECT count(*) FROM pg_tables WHERE tablename = 't'")
            ).scalar()
            assert tables == 0, "the other database does not see it"
    finally:
        other.dispose()
