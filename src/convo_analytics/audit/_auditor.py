"""Recording an audited action: who did it, the settings' log, people as keyed hashes.

Every audited action calls :meth:`Auditor.record` (or :func:`record_event` with the
settings) once, after the action has its answer and before the answer is handed out:
when the record cannot be written the action fails instead of going unrecorded.

Who: the OS user of a command (from the password database, not ``$USER``), a
`convo serve` token's name (``serve.token``, or ``workspace:NAME#N``, the Nth token
of a workspace; never its value), or the dashboard's session id; behind a proxy,
the value of ``audit.forwarded_user_header`` when one is set and the request carries
it (the token or session is then kept in ``detail.via``). Anyone who can reach the
server directly can send that header too, so set it only when the proxy is the one
way in and overwrites the header.

People (``subjects``) are recorded as HMAC-SHA256 of their identifier under a key kept
beside the log (``<log>.key``, made on first use, mode 0600), never as the identifier:
a reviewer holding the key can tell whether a given person was touched; the log alone
does not say who they are.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pwd
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from convo_analytics.audit._chain import Head, cut
from convo_analytics.audit._log import AuditError, AuditLog
from convo_analytics.config import Settings

__all__ = ["Auditor", "auditor", "os_user", "record_event"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def os_user() -> str:
    """The name of the process's user in the password database (its uid when it has
    none, as in some containers)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"


@dataclass(frozen=True, slots=True)
class Auditor:
    """Records audited actions in ``log``; ``forwarded_user_header``: the proxy's header
    naming the user (empty: none is trusted)."""

    log: AuditLog
    forwarded_user_header: str = ""

    def who(
        self,
        *,
        token: str | None = None,
        session: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[str, str | None]:
        """``(who, via)``: the token's name, the session or the OS user; or the forwarded
        user, with those in ``via``."""
        base = f"token:{token}" if token else f"session:{session}" if session else f"os:{os_user()}"
        if self.forwarded_user_header and headers is not None:
            value = _header(headers, self.forwarded_user_header)
            if value:
                return f"proxy:{value}", base
        return base, None

    def record(
        self,
        action: str,
        *,
        what: str = "",
        rows: int | None = None,
        workspace: str | None = None,
        subjects: Sequence[str] = (),
        detail: Mapping[str, Any] | None = None,
        token: str | None = None,
        session: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Append the record of one action and return it (an AuditError when it cannot be
        written: the caller must not hand the action's result out).

        ``subjects``: identifiers of the people the action was about (an external user
        id, an email); recorded as keyed hashes only.
        """
        return self.log.append(
            self._fields(action, what, rows, workspace, subjects, detail, token, session, headers)
        )

    def _fields(
        self,
        action: str,
        what: str,
        rows: int | None,
        workspace: str | None,
        subjects: Sequence[str],
        detail: Mapping[str, Any] | None,
        token: str | None,
        session: str | None,
        headers: Mapping[str, str] | None,
    ) -> dict[str, Any]:
        who, via = self.who(token=token, session=session, headers=headers)
        extra = dict(detail or {})
        if via:
            extra["via"] = via
        return {
            "who": who,
            "action": action,
            "what": what,
            "rows": rows,
            "workspace": workspace,
            "subjects": [self.subject(s) for s in subjects],
            "detail": extra,
        }

    def subject(self, identifier: str) -> str:
        """The keyed hash (HMAC-SHA256, hex) a person's identifier is recorded as: the same
        for the same identifier (trimmed; an email in lower case)."""
        text = identifier.strip()
        if "@" in text:
            text = text.lower()
        return hmac.new(self._key(), text.encode("utf-8"), hashlib.sha256).hexdigest()

    def _key(self) -> bytes:
        """The subjects' key, ``<log>.key`` (made once, 0600; a concurrent maker's wins)."""
        path = self.log.path.with_name(self.log.path.name + ".key")
        try:
            return bytes.fromhex(path.read_text().strip())
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            raise AuditError(
                f"the audit log's subject key {path} cannot be read ({exc}); restore it, or "
                "remove it to start a new key (earlier records' subjects then match no one)"
            ) from None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, secrets.token_hex(32).encode() + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)  # made only if no other process made it first
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
            return bytes.fromhex(path.read_text().strip())
        except OSError as exc:
            raise AuditError(
                f"the audit log's subject key {path} cannot be made ({exc.strerror}); fix "
                "the folder's permissions"
            ) from None

    def seal_manifest(
        self,
        action: str,
        manifest_file: Path,
        *,
        files: Sequence[Path],
        what: str = "",
        rows: int | None = None,
        workspace: str | None = None,
        detail: Mapping[str, Any] | None = None,
        session: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Join an export's manifest to the chain, and return the manifest as written
        (``session`` and ``headers``: who, for an export made in the dashboard).

        Under the log's lock the manifest gets ``audit``: the seq its record takes and the
        hash of the record before (``prev``), so it names its place in the chain; then the
        record is appended holding the manifest's SHA-256 (``detail.manifest``) and each
        data file's (``detail.files``). A hash cannot hold a hash of itself, so the manifest
        names the record's place and the record the manifest's hash: a manifest changed
        later no longer matches its record, and a record removed breaks the chain.

        When the record cannot be written the export's ``files`` and manifest are
        removed (nothing is handed out unrecorded) and the AuditError raised.
        """
        manifest = orjson.loads(manifest_file.read_bytes())

        def joining(head: Head) -> dict[str, Any]:
            manifest["audit"] = {"seq": head.seq + 1, "prev": head.hash,
                                 "log": self.log.path.name}  # fmt: skip
            data = orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n"
            try:
                _replace(manifest_file, data)
            except OSError as exc:
                raise AuditError(
                    f"the manifest {manifest_file} cannot be written ({exc.strerror})"
                ) from None
            return {
                **dict(detail or {}),
                "manifest": {"path": manifest_file.name,
                             "sha256": hashlib.sha256(data).hexdigest()},
                "files": [{"path": f.name, "sha256": file_sha256(f)} for f in files],
            }  # fmt: skip

        fields = self._fields(action, what, rows, workspace, (), None, None, session, headers)
        try:
            self.log.append(fields, joining=joining)
        except AuditError:
            for path in (*files, manifest_file):
                path.unlink(missing_ok=True)
            raise
        return dict(manifest)

    def record_files(
        self,
        action: str,
        files: Sequence[Path],
        *,
        what: str = "",
        rows: int | None = None,
        workspace: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Record an export written to ``files`` (their SHA-256 in ``detail.files``); when
        the record cannot be written the files are removed and the AuditError raised."""
        extra = {**dict(detail or {}),
                 "files": [{"path": f.name, "sha256": file_sha256(f)} for f in files]}  # fmt: skip
        try:
            return self.record(action, what=what, rows=rows, workspace=workspace, detail=extra)
        except AuditError:
            for path in files:
                path.unlink(missing_ok=True)
            raise


def auditor(settings: Settings) -> Auditor | None:
    """The auditor the settings ask for (``audit.enabled``, ``audit.file``,
    ``audit.forwarded_user_header``); None when auditing is off. An AuditError (exit 2)
    when the log could not be written, checked without making anything, so that a
    command finds out before it reads anything."""
    if not settings.get_bool("audit.enabled"):
        return None
    log = AuditLog(settings.require_path("audit.file"))
    log.check()
    return Auditor(log, settings.get_str("audit.forwarded_user_header").strip())


def record_event(
    settings: Settings,
    action: str,
    *,
    what: str = "",
    rows: int | None = None,
    workspace: str | None = None,
    subjects: Sequence[str] = (),
    detail: Mapping[str, Any] | None = None,
    token: str | None = None,
    session: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """Record one audited action as the settings ask (none when ``audit.enabled`` is off).

    The dashboard calls it once per Explore query (``explore.query``: ``what`` the
    query's text, ``rows`` its row count, ``session`` the session id, ``headers`` the
    request's headers) and per download (``dashboard.download``), before showing or
    handing out the result; an AuditError means: do not.
    """
    found = auditor(settings)
    if found is None:
        return None
    return found.record(action, what=what, rows=rows, workspace=workspace, subjects=subjects,
                        detail=detail, token=token, session=session,
                        headers=headers)  # fmt: skip


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _header(headers: Mapping[str, str], name: str) -> str:
    """The header's value (any case of its name), control characters dropped, cut."""
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return cut(_CONTROL.sub("", str(value)).strip(), 200)
    return ""


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole: a temporary file, synced, then renamed."""
    tmp = path.with_name(path.name + ".partial")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
