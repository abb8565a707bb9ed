"""Exceptions shared by the whole package.

A :class:`UserError` is a problem with something the *user* supplied (a flag, an
environment variable, a config file, an input file).  The CLI prints it as one
line on stderr and exits with status 2, without a traceback.  Anything else that
escapes a command is treated as a bug and shows its traceback.

Messages must name the offending input (file, key, variable, flag) and say how
to fix it.  They must never contain secret values.

:class:`WarehouseLocked` is the one user error with another exit status: a
writer that found the warehouse held by another one prints ``<command>:
<message>`` and exits 75 (:data:`LOCKED_EXIT`, EX_TEMPFAIL: try again later).
"""

from __future__ import annotations

__all__ = ["LOCKED_EXIT", "UserError", "WarehouseLocked"]

#: Exit status of a writer that found another one holding the lock (EX_TEMPFAIL: try later).
LOCKED_EXIT = 75


class UserError(Exception):
    """An error caused by user input; its message names the input and the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class WarehouseLocked(UserError):
    """Another writer holds a writers' lock (and did not let go within the wait allowed).

    ``command`` is the writer that stopped (``convo extract``, ``convo publish --lake``):
    the CLI prints ``<command>: <message>`` and exits :data:`LOCKED_EXIT`.
    """

    def __init__(self, message: str, command: str = "") -> None:
        super().__init__(message)
        self.command = command
