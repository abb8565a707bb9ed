"""Where OAuth tokens live between runs: one file (mode 0600), locked while refreshing.

With refresh-token rotation, a refresh token is good once: two processes
refreshing with the same one would have the second revoke the whole grant
(reuse detection). Every refresh therefore happens under an exclusive lock
on the store, after reading it again: a process that finds a token newer
than the one it holds uses that instead of refreshing. The OS keyring is not
used: the nightly run has no session to unlock one (decision D-OAUTH).

The file is input like any other: edited by hand, truncated by a full disk,
or ``auth.token_store`` pointed at a folder. Whatever is wrong with it is a
:class:`TokenStoreError` (a user error: one line naming the file and the
fix), never a traceback and never a silent "not logged in".
"""

from __future__ import annotations

import fcntl
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from convo_analytics.errors import UserError

if TYPE_CHECKING:
    from convo_analytics.config import Settings

__all__ = ["TokenStore", "TokenStoreError"]

#: An entry's fields and what each must be (None: may be absent or null).
_TEXT_FIELDS = {"access_token": True, "token_endpoint": True, "refresh_token": False,
                "revocation_endpoint": False, "scope": False, "token_type": False}  # fmt: skip
_NUMBER_FIELDS = ("expires_at", "expires_in")


class TokenStoreError(UserError):
    """The token store cannot be used as it is: its message names the file and the fix."""


class TokenStore:
    """Tokens per workspace name, in a JSON file readable by its owner only."""

    def __init__(self, path: Path, origin: str = "") -> None:
        self.path = path
        #: The setting and where it was set (``auth.token_store, $CONVO_TOKEN_STORE``).
        self.origin = origin or "auth.token_store"

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenStore:
        """The store ``auth.token_store`` names; its messages say where that was set."""
        where = settings.resolved("auth.token_store").origin
        origin = "auth.token_store" + ("" if where == "default" else f", {where}")
        return cls(settings.require_path("auth.token_store"), origin)

    # -- the file as input -------------------------------------------------------------

    def _beside(self, suffix: str) -> Path:
        """The lock or temporary file next to the store (checked first: ``/`` has none)."""
        if not self.path.name or self.path.name in (".", ".."):
            raise TokenStoreError(
                f"{self.origin} is {str(self.path)!r}, a folder, not a file; point it at a "
                "file such as data/oauth-tokens.json"
            )
        return self.path.with_name(self.path.name + suffix)

    def _fail(self, what: str, fix: str) -> TokenStoreError:
        return TokenStoreError(f"the token store {self.path} ({self.origin}) {what}; {fix}")

    def _os_error(self, exc: OSError, doing: str) -> TokenStoreError:
        if isinstance(exc, IsADirectoryError) or self.path.is_dir():
            return self._fail("is a folder", "point auth.token_store at a file")
        if isinstance(exc, NotADirectoryError | FileNotFoundError | FileExistsError):
            return self._fail(
                f"cannot be {doing}: a part of its path is not a folder",
                "point auth.token_store at a file in a folder",
            )
        return self._fail(
            f"cannot be {doing} ({exc.strerror or type(exc).__name__})",
            "check its permissions or point auth.token_store elsewhere",
        )

    def check(self) -> None:
        """Raise :class:`TokenStoreError` unless the store can be read and then written:
        before a login (whose tokens must not be lost) or a run (whose refresh must be
        kept). Creates nothing."""
        self._read()
        folder = self.path.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir():
            raise self._os_error(NotADirectoryError(), "written")
        if not os.access(folder, os.W_OK | os.X_OK) or (
            self.path.exists() and not os.access(self.path, os.W_OK)
        ):
            raise self._fail("cannot be written (permission denied)",
                             "make it writable or point auth.token_store elsewhere")  # fmt: skip

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's exclusive lock (other processes wait; a dead holder's lock ends)."""
        lock = self._beside(".lock")
        if self.path.is_dir():
            raise self._fail("is a folder", "point auth.token_store at a file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise self._os_error(exc, "locked") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _read(self) -> dict[str, Any]:
        self._beside("")
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            if self.path.parent.exists() and not self.path.parent.is_dir():
                raise self._os_error(NotADirectoryError(), "read") from None
            return {}
        except OSError as exc:
            raise self._os_error(exc, "read") from None
        redo = "delete it and run `convo auth login` again for each OAuth workspace"
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise self._fail("is not valid JSON", redo) from None
        if not isinstance(data, dict):
            raise self._fail("is not a JSON object of workspaces", redo)
        return data

    def _entry(self, workspace: str, found: object) -> dict[str, Any]:
        """One workspace's stored token, checked field by field."""
        problem = token_problem(found)
        if problem is not None:
            raise self._fail(
                f"holds a malformed entry for workspace {workspace!r} ({problem})",
                f"run `convo auth login --workspace {workspace}` again (or delete the file)",
            )
        assert isinstance(found, dict)
        return found

    # -- reading and writing --------------------------------------------------------------

    def get(self, workspace: str) -> dict[str, Any] | None:
        """The workspace's stored token (access, refresh, expiry, scope), or None."""
        found = self._read().get(workspace)
        return None if found is None else self._entry(workspace, found)

    def workspaces(self) -> list[str]:
        """The workspaces holding a grant (names only; no token leaves the store). A
        malformed file is refused; an entry is checked when its workspace reads it."""
        return sorted(name for name, token in self._read().items() if isinstance(token, dict))

    def put(self, workspace: str, token: dict[str, Any] | None) -> None:
        """Store (or, with None, forget) the workspace's token; call under ``locked``.

        Another workspace's malformed entry is kept as it is (its own login fixes it).
        """
        data = self._read()
        if token is None:
            data.pop(workspace, None)
        else:
            data[workspace] = token
        tmp = self._beside(".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(orjson.dumps(data, option=orjson.OPT_INDENT_2))
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o600)
            tmp.replace(self.path)
        except OSError as exc:
            raise self._os_error(exc, "written") from None


def token_problem(entry: object) -> str | None:
    """What is wrong with a stored token (None: nothing), naming the field, never a value."""
    if not isinstance(entry, dict):
        return "not a JSON object"
    for name, required in _TEXT_FIELDS.items():
        value = entry.get(name)
        if value is None:
            if required:
                return f"no {name}"
        elif not isinstance(value, str) or (required and not value):
            return f"{name} is not a text"
    for name in _NUMBER_FIELDS:
        value = entry.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{name} is not a number"
        if not math.isfinite(value):
            return f"{name} is not a finite number"
    return None
