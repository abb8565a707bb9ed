"""Run identifiers: sortable by start time, unique enough to never collide in one warehouse."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime


def new_run_id() -> str:
    """E.g. 20261121T103047Z-5516ea: the start (UTC) and six random hex digits."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(3)
