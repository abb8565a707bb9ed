"""What the dashboard tells the audit trail: Explore's queries and every download.

A compliance reviewer must be able to say who read what (issue 30, D-AUDIT-TRAIL):
the dashboard appends an ``explore.query`` record (the statement's text, its row
count) before a cell's rows are shown, and a ``dashboard.download`` record (the
file's name, its rows) when a download button is clicked, before its bytes are
handed out. Who: the Streamlit session's id, or behind a proxy the
``audit.forwarded_user_header``'s value (with the session in ``detail.via``).

A cell's result is shown again on every rerun of the page (a widget moved, the
sidebar changed), from the cache: that is one read, so a session's query is
recorded once per snapshot and parameter values (the key the page passes), not
once per rerun. A record that cannot be written is the action refused: the cell
shows the reason instead of its rows; the download fails.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import streamlit as st

from convo_analytics.audit import AuditError, record_event
from convo_analytics.config import ConfigError, Settings, load_settings

__all__ = ["AuditError", "audited_download", "identity", "record_query", "sealed_export"]

_RECORDED = "audit_recorded_queries"
#: How many query keys a session remembers as recorded (then it starts a new set).
_REMEMBERED = 4096


def _settings() -> Settings:
    try:
        return load_settings(None, {})
    except ConfigError:
        return load_settings(None, {}, environ={})


def identity() -> tuple[str | None, dict[str, str]]:
    """This session's id and its request's headers (read on the script's thread)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    session = ctx.session_id if ctx is not None else None
    try:
        headers = {str(k): str(v) for k, v in st.context.headers.items()}
    except Exception:  # no request behind this run (a test's AppTest): no headers
        headers = {}
    return session, headers


def record_query(
    key: str, sql: str, rows: int, workspace: str | None, detail: Mapping[str, Any]
) -> str | None:
    """Record an Explore query once per session and ``key``; the reason (one line) when
    the record cannot be written, and the rows must not be shown."""
    seen: set[str] = st.session_state.setdefault(_RECORDED, set())
    if key in seen:
        return None
    session, headers = identity()
    try:
        record_event(_settings(), "explore.query", what=sql, rows=rows, workspace=workspace,
                     detail=detail, session=session, headers=headers)  # fmt: skip
    except AuditError as exc:
        return f"This query's audit record cannot be written, so its rows are not shown: {exc}"
    if len(seen) >= _REMEMBERED:
        seen.clear()
    seen.add(key)
    return None


def audited_download(
    make: Callable[[], bytes] | bytes, file_name: str, rows: int | None, workspace: str | None
) -> Callable[[], bytes]:
    """The download's data as a callable Streamlit runs when the button is clicked: it
    makes the bytes, records ``dashboard.download``, then hands them out (on Streamlit's
    thread, without the session: who and the settings are taken now)."""
    session, headers = identity()
    settings = _settings()

    def data() -> bytes:
        payload = make() if callable(make) else make
        record_event(settings, "dashboard.download", what=file_name, rows=rows,
                     workspace=workspace, session=session, headers=headers)  # fmt: skip
        return payload

    return data


def sealed_export(
    action: str, manifest_file: Path, files: Sequence[Path], rows: int | None,
    workspace: str | None,
) -> dict[str, Any] | None:  # fmt: skip
    """Join an export made in the dashboard to the audit chain, as `convo export` does
    (``Auditor.seal_manifest``: the manifest names its place in the chain, the record the
    manifest's and each file's SHA-256); the manifest as written, or None when auditing is
    off. An AuditError (the files removed) means: hand nothing out."""
    from convo_analytics.audit import auditor

    found = auditor(_settings())
    if found is None:
        return None
    session, headers = identity()
    return found.seal_manifest(action, manifest_file, files=files, what=manifest_file.name,
                               rows=rows, workspace=workspace, session=session,
                               headers=headers)  # fmt: skip
