"""The :class:`Secret` wrapper: a value that never shows itself by accident."""

from __future__ import annotations

import hmac
import re
from typing import NoReturn, final

__all__ = ["MASK", "Secret"]

MASK = "***"

_PART_SEPARATORS = re.compile(r"[,\n]")


@final
class Secret:
    """Wraps a secret string (API key, webhook secret, ...).

    ``str()``, ``repr()`` and ``format()`` all hide the value; call
    :meth:`reveal` at the single place where the real value is needed (an HTTP
    header, an HMAC computation).  Secrets cannot be pickled and compare in
    constant time.
    """

    __slots__ = ("_value",)

    _value: str

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("Secret wraps a str")
        object.__setattr__(self, "_value", value)

    def reveal(self) -> str:
        """Return the secret value.  Never log or print the result."""
        return self._value

    def parts(self) -> tuple[Secret, ...]:
        """Split a comma- or newline-separated secret into its non-empty parts.

        Used for settings that accept several values at once, e.g. webhook
        secrets during rotation (``"new,old"``).
        """
        pieces = (piece.strip() for piece in _PART_SEPARATORS.split(self._value))
        return tuple(Secret(piece) for piece in pieces if piece)

    def __str__(self) -> str:
        return MASK

    def __repr__(self) -> str:
        return f"Secret('{MASK}')"

    def __format__(self, format_spec: str) -> str:
        return format(MASK, format_spec)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("Secret is immutable")

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: object) -> Secret:
        return self

    def __reduce__(self) -> NoReturn:
        raise TypeError("Secret values cannot be pickled")
