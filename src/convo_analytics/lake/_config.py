"""Where the lake is: its catalog (an SQL database) and its data files, from the settings.

The catalog URL is an SQLAlchemy URL: SQLite for one machine, PostgreSQL when
many workers publish at once. Its password never sits in the URL we are given
(decision D-LAKE-CATALOG): it comes from ``lake.catalog_password`` (an
environment variable or a file) and is put into the URL only when the catalog
is opened, so every message and ``repr`` shows the URL without it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from convo_analytics.config import masked_url, url_secret
from convo_analytics.errors import UserError

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog
    from sqlalchemy.engine import URL

    from convo_analytics.config import Settings

__all__ = ["LakeConfig", "LakeUnavailable"]

#: The catalog's name inside its database (pyiceberg's SQL catalog keys rows by it).
CATALOG_NAME = "convo"
#: Opening a new catalog: workers making its tables or namespace at once collide this often.
_OPEN_ATTEMPTS = 5
_URL_FIX = (
    "set lake.catalog_uri (CONVO_LAKE_CATALOG_URI) to sqlite:///PATH or "
    "postgresql+psycopg2://USER@HOST:PORT/DATABASE"
)


class LakeUnavailable(UserError):
    """The lake's catalog cannot be used: a malformed URL, a missing driver, no database."""


@dataclass(frozen=True, slots=True)
class LakeConfig:
    """The lake a worker publishes to and readers read: catalog, data files, namespace.

    ``catalog_uri`` may carry a password (added from ``lake.catalog_password``):
    it is kept out of ``repr``; :attr:`display_uri` is the form to show.
    """

    catalog_uri: str = field(repr=False)
    warehouse: str
    namespace: str = "convo"
    #: Snapshots older than this many hours are expired by the next commit to their table.
    keep_snapshots_hours: int = 168
    #: A data file no snapshot references is removed by a publish once this old (a
    #: killed commit of this host's at once: lake._orphans).
    orphan_min_age_minutes: int = 60

    @property
    def records_namespace(self) -> str:
        """The namespace of the lake's own bookkeeping (``lake_partitions``), apart from the
        data's, so an engine listing the data namespace finds the data tables only
        (D-LAKE-RECORDS)."""
        return f"{self.namespace}_meta"

    @property
    def display_uri(self) -> str:
        """The catalog URL with any password replaced by ***."""
        return redact_url(self.catalog_uri)

    @classmethod
    def from_settings(cls, settings: Settings) -> LakeConfig:
        """The lake the settings name; relative SQLite and folder paths are made absolute."""
        uri = settings.get_str("lake.catalog_uri")
        password = settings.get_secret("lake.catalog_password")
        # The settings refuse such a URL as they are read; this guards Settings made otherwise.
        if (where := url_secret(uri)) is not None:
            raise LakeUnavailable(
                f"lake.catalog_uri ({settings.resolved('lake.catalog_uri').origin}) holds "
                f"{where}: remove it from the URL and set CONVO_LAKE_CATALOG_PASSWORD (or "
                "lake.catalog_password_file) instead; PostgreSQL's driver also reads "
                "PGPASSWORD or a PGPASSFILE"
            )
        parsed = _parse(uri)
        if password is not None:
            parsed = parsed.set(password=password.reveal())
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            parsed = parsed.set(database=str(Path(parsed.database).expanduser().resolve()))
        return cls(
            catalog_uri=parsed.render_as_string(hide_password=False),
            warehouse=_warehouse_location(settings.get_str("lake.warehouse")),
            namespace=settings.get_str("lake.namespace"),
            keep_snapshots_hours=settings.get_int("lake.keep_snapshots_hours"),
            orphan_min_age_minutes=settings.get_int("lake.orphan_min_age_minutes"),
        )

    def open_catalog(self) -> SqlCatalog:
        """The pyiceberg catalog, its tables created when the database is new.

        Raises LakeUnavailable with one line naming the setting and the fix.
        """
        parsed = _parse(self.catalog_uri)
        if parsed.get_backend_name() == "sqlite" and parsed.database:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, _OPEN_ATTEMPTS + 1):
            try:
                catalog = self._open()
                if self.warehouse.startswith("file://"):  # (not for a catalog not reached)
                    Path(self.warehouse.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
                return catalog
            except _SetupRace as race:
                # another worker made the catalog's tables or the namespace at the same moment:
                # they are there now, so opening again finds them
                exc = race.__cause__ or race
                if attempt == _OPEN_ATTEMPTS:
                    raise LakeUnavailable(
                        f"the lake's catalog at {self.display_uri} could not be set up: "
                        f"{self._scrub(exc)}; run it again"
                    ) from None
                time.sleep(0.05 * attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _open(self) -> SqlCatalog:
        """One try at opening the catalog; _SetupRace when another worker was setting up the
        same new catalog at that moment."""
        from pyiceberg.catalog import load_catalog
        from pyiceberg.exceptions import NotInstalledError
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

        try:
            catalog = load_catalog(
                CATALOG_NAME,
                type="sql",
                uri=self.catalog_uri,
                warehouse=self.warehouse,
                init_catalog_tables="true",
                pool_pre_ping="true",
            )
        except (NoSuchModuleError, ArgumentError, ModuleNotFoundError, NotInstalledError) as exc:
            # (pyiceberg says NotInstalledError for a driver SQLAlchemy could not import)
            raise LakeUnavailable(
                f"lake.catalog_uri {self.display_uri}: no database driver for it "
                f"({self._scrub(exc)}); {_URL_FIX}"
            ) from None
        except SQLAlchemyError as exc:
            if _racing(exc):
                raise _SetupRace() from exc
            raise LakeUnavailable(
                f"the lake's catalog at {self.display_uri} cannot be reached: "
                f"{self._scrub(exc)}; check lake.catalog_uri (CONVO_LAKE_CATALOG_URI), "
                "lake.catalog_password and that the database is running"
            ) from None
        try:
            catalog.create_namespace_if_not_exists(self.namespace)
            catalog.create_namespace_if_not_exists(self.records_namespace)
        except SQLAlchemyError as exc:
            if _racing(exc):
                raise _SetupRace() from exc
            raise LakeUnavailable(
                f"the lake's catalog at {self.display_uri} refused the namespace "
                f"{self.namespace!r}: {self._scrub(exc)}"
            ) from None
        return catalog  # type: ignore[return-value]

    def _scrub(self, exc: BaseException) -> str:
        """The first line of an error, with the password and the query's values cut out."""
        text = " ".join(str(exc).split("\n")[0].split())
        parsed = _parse(self.catalog_uri)
        hidden = [str(parsed.password)] if parsed.password else []
        hidden += [v for vs in parsed.query.values() for v in ([vs] if isinstance(vs, str) else vs)]
        for value in sorted(hidden, key=len, reverse=True):
            if len(value) >= 3:
                text = text.replace(value, "***")
        return text[:300]


class _SetupRace(Exception):
    """Another worker set up the same new catalog (its tables, the namespace) at once."""


def _racing(exc: BaseException) -> bool:
    """Whether a database error is that race: a row or table the other worker made first
    (IntegrityError; SQLite's and PostgreSQL's "already exists"), or SQLite busy with it."""
    from sqlalchemy.exc import IntegrityError

    text = str(exc).lower()
    return isinstance(exc, IntegrityError) or "already exists" in text or "locked" in text


def redact_url(uri: str) -> str:
    """A URL fit for messages: the password and every query value are ***; a URL that does
    not parse is hidden."""
    try:
        _parse(uri)
    except LakeUnavailable:
        return "(a malformed URL)"
    return masked_url(uri)


def _parse(uri: str) -> URL:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(uri)
    except (ArgumentError, ValueError):
        raise LakeUnavailable(f"lake.catalog_uri is not a database URL; {_URL_FIX}") from None


_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*://", re.IGNORECASE)


def _warehouse_location(raw: str) -> str:
    """A local folder as an absolute file:// location; s3:// and other URLs as given."""
    if _SCHEME.match(raw) and not raw.startswith("file://"):
        return raw.rstrip("/")
    folder = Path(raw.removeprefix("file://")).expanduser().resolve()
    return f"file://{folder}"
