"""Where OAuth tokens live between runs: one file (mode 0600), locked while refreshing.

With refresh-token rotation, a refresh token is good once: two processes
refreshing with the same one would have the second revoke the whole grant
(reuse detection). Every refresh therefore happens under an exclusive lock
on the store, after reading it again: a process that finds a token newer
than the one it holds uses that instead of refreshing. The OS keyring is not
used: the nightly run has no session to unlock one (decision D-OAUTH).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

__all__ = ["TokenStore"]


class TokenStore:
    """Tokens per workspace name, in a JSON file readable by its owner only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_path = path.with_name(path.name + ".lock")

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's exclusive lock (other processes wait; a dead holder's lock ends)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _read(self) -> dict[str, Any]:
        try:
            data = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, orjson.JSONDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, workspace: str) -> dict[str, Any] | None:
        """The workspace's stored token (access, refresh, expiry, scope), or None."""
        found = self._read().get(workspace)
        return found if isinstance(found, dict) else None

    def workspaces(self) -> list[str]:
        """The workspaces holding a grant (names only; no token leaves the store)."""
        return sorted(name for name, token in self._read().items() if isinstance(token, dict))

    def put(self, workspace: str, token: dict[str, Any] | None) -> None:
        """Store (or, with None, forget) the workspace's token; call under ``locked``."""
        data = self._read()
        if token is None:
            data.pop(workspace, None)
        else:
            data[workspace] = token
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(orjson.dumps(data, option=orjson.OPT_INDENT_2))
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o600)
        tmp.replace(self.path)
