"""``convo sandbox``: serve the local Conversational Assistant Service, or write its archive."""

from __future__ import annotations

import secrets
import shlex
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from convo_analytics.cli._app import settings_from_context
from convo_analytics.cli._errors import listening_socket
from convo_analytics.cli._options import PLAIN_HELP, default_of, setting_option
from convo_analytics.cli._sandbox_workspaces import ServedWorkspaces, shown_path
from convo_analytics.config import Settings
from convo_analytics.errors import UserError

__all__ = ["sandbox_app"]

sandbox_app = typer.Typer(
    rich_markup_mode=PLAIN_HELP,
    name="sandbox",
    help="The local Conversational Assistant Service that demos, tests and benchmarks use.",
    no_args_is_help=True,
)

Host = Annotated[
    str | None, setting_option("--host", "sandbox.host", "HOST", "Interface to listen on.")
]
Port = Annotated[
    int | None,
    setting_option("--port", "sandbox.port", "PORT", "TCP port (0 picks a free one)."),
]
Seed = Annotated[
    int | None, setting_option("--seed", "sandbox.seed", "N", "Seed of the generated history.")
]
Conversations = Annotated[
    int | None,
    setting_option("--conversations", "sandbox.conversations", "N", "Conversations per workspace."),
]
Days = Annotated[
    int | None, setting_option("--days", "sandbox.days", "N", "Days of history, ending now.")
]
Until = Annotated[
    str | None,
    typer.Option(
        "--until",
        metavar="TIME",
        help="End of the history (ISO 8601); default now. Fix it for "
        "byte-identical histories across runs.",
    ),
]
Workspace = Annotated[
    list[str] | None,
    typer.Option(
        "--workspace",
        metavar="NAME:KEY",
        help="NAME:KEY, repeatable (a name given twice gets two keys). With none, workspace "
        "'demo' gets a generated key, printed at start. Sandbox keys are test credentials.",
    ),
]
Incidents = Annotated[
    list[str] | None,
    typer.Option(
        "--incident",
        metavar="DAY,CHANNEL,INTENT[,SHARE[,WORKSPACE]]",
        help="Inject a fault into the history: on DAY (UTC), that share (default 1) of the "
        "conversations of CHANNEL and INTENT are escalated (in WORKSPACE, default every one). "
        "What a monitor must find; repeatable.",
    ),
]
Archive = Annotated[
    Path | None,
    typer.Option(
        "--webhook-archive",
        metavar="FILE",
        help="Write the history's deliveries here (.gz: gzip).",
    ),
]


def _sandbox_settings(
    settings: Settings, extra: dict[str, Any], served: ServedWorkspaces | None = None
) -> Any:
    from convo_analytics.sandbox import FaultSettings, SandboxSettings
    from convo_analytics.sandbox._model import parse_iso_ms
    from convo_analytics.sandbox._oauth import OAuthSettings

    workspaces = list(served.keys) if served is not None else []
    entries = [] if served is not None else extra["workspace"] or [
        s.reveal() for s in settings.get_secret_list("sandbox.workspaces")
    ]  # fmt: skip
    for entry in entries:
        name, sep, key = entry.partition(":")
        if not sep or not name or not key:
            raise UserError(
                f"--workspace {name or entry!r}: expected NAME:KEY, e.g. --workspace acme:sk_test_1"
            )
        workspaces.append((name, key))
    from convo_analytics.sandbox import Incident

    incidents = []
    for text in extra.get("incident") or []:
        try:
            incidents.append(Incident.parse(text))
        except ValueError as exc:
            raise UserError(f"--incident {text!r}: {exc}") from None
    until_ms = None
    if extra["until"]:
        try:
            until_ms = parse_iso_ms(extra["until"])
        except ValueError:
            raise UserError(
                f"--until {extra['until']!r} is not an ISO 8601 timestamp; "
                "use e.g. 2026-11-18T00:00:00Z"
            ) from None
    result = SandboxSettings(
        host=served.host if served is not None else settings.get_str("sandbox.host"),
        port=served.port if served is not None else settings.get_int("sandbox.port"),
        seed=settings.get_int("sandbox.seed"),
        conversations=settings.get_int("sandbox.conversations"),
        days=settings.get_int("sandbox.days"),
        until_ms=until_ms,
        rate_limit=settings.get_str("sandbox.rate_limit"),
        retry_after_format=settings.get_str("sandbox.retry_after_format"),
        workspaces=workspaces,
        webhook_retry_schedule=settings.get_str("sandbox.webhook_retry_schedule"),
        webhook_signing=settings.get_str("sandbox.webhook_signing"),
        event_fields=settings.get_str("sandbox.event_fields"),
        faults=FaultSettings(
            error_rate=settings.get_float("sandbox.fault_5xx_rate"),
            slow_rate=settings.get_float("sandbox.fault_slow_rate"),
            slow_seconds=settings.get_float("sandbox.fault_slow_seconds"),
            drop_rate=settings.get_float("sandbox.fault_drop_rate"),
        ),
        live_inactivity_seconds=settings.get_float("sandbox.inactivity_seconds") or None,
        lead_threshold=settings.get_float("sandbox.lead_threshold"),
        blocked_terms=tuple(t.casefold() for t in settings.get_list("sandbox.blocked_terms")),
        crawl_scope=settings.get_str("sandbox.crawl_scope"),
        oauth=OAuthSettings(
            auto_approve=settings.get_bool("sandbox.oauth_auto_approve"),
            access_token_seconds=settings.get_int("sandbox.oauth_token_seconds"),
        ),
        client_secrets=dict(served.client_secrets) if served is not None else {},
        incidents=tuple(incidents),
    )
    try:
        result.validate()
    except ValueError as exc:
        raise UserError(f"sandbox settings: {exc}") from None
    return result


def _webhook_secrets(settings: Settings) -> list[str]:
    secret = settings.get_secret("webhooks.secret")
    return [part.reveal() for part in secret.parts()] if secret is not None else []


def _archive_secret(settings: Settings) -> tuple[str, bool]:
    """The secret the history archive is signed with, and whether it was generated."""
    configured = _webhook_secrets(settings)
    if configured:
        return configured[0], False
    return f"whsec_{secrets.token_urlsafe(24)}", True


@sandbox_app.command("serve")
def serve(
    ctx: typer.Context,
    host: Host = None,
    port: Port = None,
    seed: Seed = None,
    conversations: Conversations = None,
    days: Days = None,
    until: Until = None,
    incident: Incidents = None,
    rate_limit: Annotated[
        str | None,
        typer.Option(
            "--rate-limit",
            metavar="RATE",
            help="600/min (per key, 2x bursts), 100/min (per "
            "workspace), none, or RATE[,burst=N][,scope=key|workspace]. "
            + default_of("sandbox.rate_limit"),
        ),
    ] = None,
    workspace: Workspace = None,
    webhook_archive: Archive = None,
    key_file: Annotated[
        Path | None,
        typer.Option(
            "--key-file",
            metavar="FILE",
            help="Write keys and admin token here (0600); {port} becomes the port; '' for "
            "none. " + default_of("sandbox.key_file"),
        ),
    ] = None,
    retry_schedule: Annotated[
        str | None,
        typer.Option(
            "--webhook-retry-schedule",
            metavar="SCHEDULE",
            help="2,8,32 (seconds) or exponential:24h. "
            + default_of("sandbox.webhook_retry_schedule"),
        ),
    ] = None,
    fault_5xx_rate: Annotated[
        float | None,
        typer.Option(
            "--fault-5xx-rate",
            metavar="SHARE",
            help=f"Share of /v1 answers that are 5xx. {default_of('sandbox.fault_5xx_rate')}",
        ),
    ] = None,
    fault_slow_rate: Annotated[
        float | None,
        typer.Option(
            "--fault-slow-rate",
            metavar="SHARE",
            help=f"Share of /v1 answers delayed. {default_of('sandbox.fault_slow_rate')}",
        ),
    ] = None,
    fault_slow_seconds: Annotated[
        float | None,
        typer.Option(
            "--fault-slow-seconds",
            metavar="S",
            help=f"The delay of slow answers. {default_of('sandbox.fault_slow_seconds')}",
        ),
    ] = None,
    fault_drop_rate: Annotated[
        float | None,
        typer.Option(
            "--fault-drop-rate",
            metavar="SHARE",
            help="Share of /v1 connections dropped mid-answer. "
            + default_of("sandbox.fault_drop_rate"),
        ),
    ] = None,
    oauth_auto_approve: Annotated[
        bool | None,
        typer.Option(
            "--oauth-auto-approve/--oauth-consent",
            help="Approve OAuth logins at once (tests, the demo), or show the consent page.",
        ),
    ] = None,
    for_config: Annotated[
        Path | None,
        typer.Option(
            "--for-config",
            metavar="FILE",
            help="Serve this convo.toml's [[workspaces]] on the port of their base_url, "
            "with its [sandbox] settings, writing each API key or client secret where the "
            "file reads it (e.g. examples/workspaces.toml).",
        ),
    ] = None,
) -> None:
    """Generate a workspace history and serve the whole read side over HTTP.

    With --for-config FILE: the workspaces of FILE, each with the key its config
    reads, so that `convo --config FILE extract` reads this sandbox.
    """
    overrides: dict[str, object] = {
        "sandbox.host": host,
        "sandbox.port": port,
        "sandbox.seed": seed,
        "sandbox.conversations": conversations,
        "sandbox.days": days,
        "sandbox.rate_limit": rate_limit,
        "sandbox.webhook_archive": webhook_archive,
        # --key-file '' writes none (a Path of "" is the current folder)
        "sandbox.key_file": "" if key_file is not None and str(key_file) == "." else key_file,
        "sandbox.webhook_retry_schedule": retry_schedule,
        "sandbox.fault_5xx_rate": fault_5xx_rate,
        "sandbox.fault_slow_rate": fault_slow_rate,
        "sandbox.fault_slow_seconds": fault_slow_seconds,
        "sandbox.fault_drop_rate": fault_drop_rate,
        "sandbox.oauth_auto_approve": oauth_auto_approve,
    }
    served = None
    if for_config is None:
        settings = settings_from_context(ctx, overrides)
    else:
        settings, served = _for_config(ctx, for_config, overrides, workspace)
    config = _sandbox_settings(
        settings, {"workspace": workspace, "until": until, "incident": incident}, served
    )
    from convo_analytics.sandbox import Sandbox, create_app, write_history_archive

    out = Console(highlight=False, soft_wrap=True)
    sock = listening_socket(config.host, config.port)
    if served is not None:  # where the config reads them, once the sandbox can listen
        served.write()
    started = time.perf_counter()
    sandbox = Sandbox(config)
    built = time.perf_counter() - started
    actual_port = sock.getsockname()[1]
    url = f"http://{config.host}:{actual_port}"
    keys_path = settings.get_path("sandbox.key_file")
    if keys_path is not None:  # one file per port: a second sandbox keeps its own keys
        keys_path = Path(str(keys_path).replace("{port}", str(actual_port)))
        sandbox.write_key_file(keys_path)
    total = sum(len(ws.conversations) for ws in sandbox.workspaces.values())
    out.print(
        f"sandbox: {total} conversations in {len(sandbox.workspaces)} workspace(s), "
        f"generated in {built:.1f} s (seed {config.seed}, {config.days} days)"
    )
    archive_path = settings.get_path("sandbox.webhook_archive")
    if archive_path is not None:
        secret, generated = _archive_secret(settings)
        counts = write_history_archive(
            archive_path, sandbox.workspaces.values(), secret, seed=config.seed
        )
        note = " (signed with a generated secret: set CONVO_WEBHOOK_SECRET to choose it)"
        out.print(
            f"webhook archive: {counts['lines']} deliveries of {counts['events']} events "
            f"-> {archive_path}{note if generated else ''}"
        )
        if generated and keys_path is not None:
            _add_to_key_file(keys_path, {"archiveWebhookSecret": secret})
    out.print(f"listening on {url}  (OpenAPI: {url}/openapi.json, docs: {url}/docs)")
    out.print(f"rate limit: {config.rate_limit}")
    if sandbox.generated_key is not None:
        out.print(f"workspace 'demo' API key: {sandbox.generated_key}")
    if keys_path is not None:
        out.print(f"keys and the admin token: {shown_path(keys_path)}")
    if served is not None:
        for line in [*served.lines, "then, in another shell:"]:
            out.print(line, markup=False)
        for command in served.commands:
            out.print(f"  {command}", markup=False)
    for line in _try_lines(url, sandbox.generated_key, served, keys_path):
        out.print(line, markup=False)
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(
            create_app(sandbox), log_level="warning", access_log=False, timeout_graceful_shutdown=3
        )
    )
    from convo_analytics._serving import run_foreground

    run_foreground(server, sock)


def _for_config(
    ctx: typer.Context, path: Path, overrides: Mapping[str, object], workspace: list[str] | None
) -> tuple[Settings, ServedWorkspaces]:
    """``--for-config FILE``: the settings of FILE and the workspaces to serve for it."""
    from convo_analytics.cli._app import CliState
    from convo_analytics.cli._sandbox_workspaces import workspaces_to_serve
    from convo_analytics.config import load_settings, load_workspaces

    state = ctx.find_object(CliState)
    if state is not None and state.config_path is not None and state.config_path != path:
        raise UserError(
            f"--for-config {path} and convo --config {state.config_path}: name the config "
            "once (--for-config is the config this sandbox reads)"
        )
    if workspace:
        raise UserError(
            "--workspace and --for-config exclude each other: the config's [[workspaces]] "
            "are the ones served"
        )
    settings = load_settings(path, overrides)
    served = workspaces_to_serve(
        settings, load_workspaces(settings, resolve_secrets=False), str(path)
    )
    for name, given in (("sandbox.port", served.port), ("sandbox.host", served.host)):
        resolved = settings.resolved(name)
        if resolved.source.value != "default" and resolved.value not in (given, 0):
            flag = "--" + name.split(".")[1]
            raise UserError(
                f"{flag} {resolved.value} ({resolved.origin}): the workspaces of {path} are at "
                f"{served.host}:{served.port} (their base_url); drop {flag} or change base_url"
            )
    return settings, served


def _try_lines(
    url: str, generated: str | None, served: ServedWorkspaces | None, keys_path: Path | None
) -> list[str]:
    """Two `curl` lines to try, each copy-pasteable into bash or zsh as printed: a generated
    key written out (sandbox keys are test credentials), else a shell expression that
    reads the key (``$(cat FILE)`` in double quotes), never a variable in single quotes."""
    today = datetime.now(UTC).date().isoformat()
    paths = ("/v1/conversations?limit=2", f"/v1/analytics/summary?from={today[:8]}01&to={today}")
    lines = ["try it:"]
    if generated is not None:
        header = shlex.quote(f"Authorization: Bearer {generated}")
    else:
        expression = served.key_expression if served is not None else None
        if expression is None and keys_path is not None:
            read = 'import json,sys; print(json.load(open(sys.argv[1]))["workspaces"][0]["apiKey"])'
            lines.append(f"  KEY=$(python3 -c {shlex.quote(read)} {shown_path(keys_path)})")
            expression = "$KEY"
        if expression is None:  # no key file: the keys given on the command line
            lines[0] = "try it (with CONVO_API_KEY set to one of the --workspace keys):"
            expression = "$CONVO_API_KEY"
        header = f'"Authorization: Bearer {expression}"'
    lines += [f"  curl -H {header} {shlex.quote(url + path)}" for path in paths]
    return lines


def _add_to_key_file(path: Path, values: dict[str, str]) -> None:
    import orjson

    data = orjson.loads(path.read_bytes())
    data.update(values)
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))


@sandbox_app.command("archive")
def archive(
    ctx: typer.Context,
    out_path: Annotated[
        Path, typer.Option("--out", metavar="FILE", help="Archive file (.gz: gzip).")
    ],
    seed: Seed = None,
    conversations: Conversations = None,
    days: Days = None,
    until: Until = None,
    workspace: Workspace = None,
    incident: Incidents = None,
) -> None:
    """Write a generated history as a signed webhook archive, without serving.

    Signed with CONVO_WEBHOOK_SECRET (the first, when several are set).
    """
    settings = settings_from_context(
        ctx, {"sandbox.seed": seed, "sandbox.conversations": conversations, "sandbox.days": days}
    )
    config = _sandbox_settings(
        settings, {"workspace": workspace, "until": until, "incident": incident}
    )
    configured = _webhook_secrets(settings)
    if not configured:
        raise UserError(
            "no webhook secret to sign the archive with; set CONVO_WEBHOOK_SECRET "
            "or webhooks.secret_file"
        )
    from convo_analytics.sandbox import Sandbox, write_history_archive

    sandbox = Sandbox(config)
    counts = write_history_archive(
        out_path, sandbox.workspaces.values(), configured[0], seed=config.seed
    )
    Console(highlight=False, soft_wrap=True).print(
        f"{counts['lines']} deliveries ({counts['events']} events, {counts['retries']} retries) "
        f"-> {out_path}"
    )
