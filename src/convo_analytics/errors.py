"""Exceptions shared by the whole package.

A :class:`UserError` is a problem with something the *user* supplied (a flag, an
environment variable, a config file, an input file).  The CLI prints it as one
line on stderr and exits with status 2, without a traceback.  Anything else that
escapes a command is treated as a bug and shows its traceback.

Messages must name the offending input (file, key, variable, flag) and say how
to fix it.  They must never contain secret values.
"""

from __future__ import annotations

__all__ = ["UserError"]


class UserError(Exception):
    """An error caused by user input; its message names the input and the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message
