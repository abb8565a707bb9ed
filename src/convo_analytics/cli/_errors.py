"""Turning user errors into one line on stderr, and finding the command they belong to."""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence
from typing import Annotated, TextIO

import typer
from typer._click.core import Command, Context
from typer._click.exceptions import UsageError
from typer.core import TyperGroup

__all__ = [
    "USER_ERROR_EXIT",
    "command_path",
    "error_line",
    "listening_socket",
    "report_error",
    "report_locked",
    "require_loopback",
]

USER_ERROR_EXIT = 2


def error_line(message: str, command: str) -> str:
    """``error: <message> (see '<command> --help')``, always a single line."""
    flat = " ".join(message.split()).rstrip(".") or "failed"
    return f"error: {flat} (see '{command} --help')"


def report_error(message: str, command: str, stream: TextIO | None = None) -> None:
    """Write :func:`error_line` to stderr (plain text: no rich box, no wrapping)."""
    out = sys.stderr if stream is None else stream
    out.write(error_line(message, command) + "\n")
    out.flush()


def report_locked(command: str, message: str, stream: TextIO | None = None) -> None:
    """``<command>: <message>``: a writer that found the warehouse held (exit 75, see
    :class:`~convo_analytics.errors.WarehouseLocked`) says who holds it, on one line."""
    out = sys.stderr if stream is None else stream
    out.write(f"{command}: {message}\n")
    out.flush()


def command_path(root: Command, args: Sequence[str], prog_name: str, exc: object = None) -> str:
    """The full name of the command that ``args`` invoke, e.g. ``convo config show``.

    Usage errors carry their context; for other errors the arguments are parsed
    again leniently (as shell completion does) to find the deepest command.
    """
    ctx = exc.ctx if isinstance(exc, UsageError) else None
    if isinstance(ctx, Context):
        return ctx.command_path
    try:
        return _resolve(root, args, prog_name).command_path
    except Exception:
        return prog_name


def _resolve(root: Command, args: Sequence[str], prog_name: str) -> Context:
    ctx = root.make_context(prog_name, list(args), resilient_parsing=True)
    while isinstance(ctx.command, TyperGroup):
        rest = [*ctx._protected_args, *ctx.args]
        if not rest:
            break
        name, sub, sub_args = ctx.command.resolve_command(ctx, rest)
        if name is None or sub is None:
            break
        ctx = sub.make_context(name, sub_args, parent=ctx, resilient_parsing=True)
    return ctx


#: The flag every plain-HTTP server takes to listen beyond loopback (see require_loopback).
BehindTlsProxy = Annotated[
    bool,
    typer.Option(
        "--behind-tls-proxy",
        help="Allow a non-loopback --host: a TLS-terminating proxy is in front.",
    ),
]


def require_loopback(host: str, behind_tls_proxy: bool, what: str) -> None:
    """Plain-HTTP servers listen on loopback unless a TLS-terminating proxy is in front."""
    from convo_analytics._net import is_loopback_host
    from convo_analytics.errors import UserError

    if not is_loopback_host(host) and not behind_tls_proxy:
        raise UserError(
            f"--host {host} is not a loopback address; {what} speaks plain HTTP, so put a "
            "TLS-terminating proxy in front and add --behind-tls-proxy"
        )


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` for a server command, or the one-line user error
    every server gives when the port is taken (exit 2)."""
    from convo_analytics._serving import bind
    from convo_analytics.errors import UserError

    try:
        return bind(host, port)
    except OSError as exc:
        raise UserError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); "
            "choose another --port or stop what uses it"
        ) from None
