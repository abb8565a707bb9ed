"""THE list of settings.  To add a setting, add a ``Setting(...)`` entry here.

Then document it in ``convo.example.toml`` and ``docs/configuration.md`` (the
tests fail until you do).  Everything else -- the TOML section/key, the
``CONVO_<SECTION>_<KEY>`` environment variable, type checking, masking of
secrets, ``convo config show`` -- follows from the entry.  A new section (e.g.
``extract``) exists as soon as one of its settings is listed.

Secrets: use ``Kind.SECRET`` (or ``Kind.LIST`` with ``secret=True``), no default,
and usually a companion ``Kind.PATH`` setting with ``secret_file_for=...``.
"""

from __future__ import annotations

from convo_analytics.config._schema import Kind, Registry, Setting

__all__ = ["REGISTRY", "SETTINGS"]

_RATE = r"[1-9][0-9]*/(s|sec|second|min|minute|h|hour)"
#: Either statement of the interface, none, or a custom bucket (see RateLimitPolicy.parse).
_RATE_SPEC = r"none|off|" + _RATE + r"(,(burst=[0-9.]+|scope=(key|workspace)))*"
_RATE_SPEC_HELP = "600/min, 100/min, none, or RATE[,burst=N][,scope=key|workspace]"

SETTINGS: tuple[Setting, ...] = (
    # -- service: the hosted Conversational Assistant Service we read from ------
    Setting(
        "service.base_url",
        Kind.STR,
        "http://127.0.0.1:8787",
        help=(
            "Base URL of the Conversational Assistant Service API (https://; plain http only "
            "to loopback)."
        ),
        env_aliases=("CONVO_BASE_URL",),
        pattern=r"https?://\S+",
        pattern_help="an http:// or https:// URL",
        url=True,
        url_secret_to="service.api_key",
    ),
    Setting(
        "service.api_key",
        Kind.SECRET,
        help="API key sent to the service. Secret: environment or file only.",
        env_aliases=("CONVO_API_KEY",),
    ),
    Setting(
        "service.api_key_file",
        Kind.PATH,
        help="File whose content (trailing whitespace stripped) is the service API key.",
        env_aliases=("CONVO_API_KEY_FILE",),
        secret_file_for="service.api_key",
    ),
    Setting(
        "service.rate_limit",
        Kind.STR,
        "600/min",
        help=(
            "The service's rate limit, which the client paces itself under: 600/min "
            "(statement 1), 100/min (statement 2), none, or RATE[,burst=N]."
        ),
        env_aliases=("CONVO_RATE_LIMIT",),
        pattern=_RATE_SPEC,
        pattern_help=_RATE_SPEC_HELP,
    ),
    Setting(
        "service.timeout_seconds",
        Kind.FLOAT,
        30.0,
        help="Timeout in seconds for one HTTP request to the service.",
        env_aliases=("CONVO_TIMEOUT_SECONDS",),
        minimum=0.1,
    ),
    # -- webhooks: deliveries the service pushes to us --------------------------
    Setting(
        "webhooks.secret",
        Kind.SECRET,
        help=(
            "Secret(s) used to verify webhook signatures. Several comma-separated "
            "secrets are accepted during rotation. Secret: environment or file only."
        ),
        env_aliases=("CONVO_WEBHOOK_SECRET",),
    ),
    Setting(
        "webhooks.secret_file",
        Kind.PATH,
        help="File holding the webhook secret(s), comma- or newline-separated.",
        env_aliases=("CONVO_WEBHOOK_SECRET_FILE",),
        secret_file_for="webhooks.secret",
    ),
    Setting(
        "webhooks.archive_dir",
        Kind.PATH,
        "data/webhooks",
        help="Directory where received webhook deliveries are archived.",
        env_aliases=("CONVO_WEBHOOK_ARCHIVE_DIR",),
    ),
    Setting(
        "webhooks.max_line_bytes",
        Kind.INT,
        8 << 20,
        help=(
            "Archive lines longer than this many bytes are quarantined as too_large without "
            "being loaded (8 MiB; the receiver caps bodies at 1 MiB)."
        ),
        minimum=1024,
    ),
    Setting(
        "webhooks.max_future_seconds",
        Kind.INT,
        86_400,
        help=(
            "An event dated more than this many seconds after it was received (or, without "
            "a time of receipt, after now) is quarantined as future_timestamp."
        ),
        minimum=0,
    ),
    Setting(
        "webhooks.bad_signature_share",
        Kind.FLOAT,
        0.5,
        help=(
            "When every line of an ingest, or more than this share of them, fails the "
            "signature check, the secret is most likely wrong: the run says so and exits 1."
        ),
        minimum=0.0,
        maximum=1.0,
    ),
    Setting(
        "webhooks.settle_seconds",
        Kind.INT,
        600,
        help=(
            "A plain archive file changed within this many seconds may still be being "
            "written: its last line without a newline is left for a later run."
        ),
        minimum=0,
    ),
    Setting(
        "webhooks.header_timeout_seconds",
        Kind.FLOAT,
        5.0,
        help=(
            "The receiver drops a connection whose request headers have not all arrived "
            "within this many seconds (of connecting, or of its previous answer)."
        ),
        minimum=0.1,
    ),
    Setting(
        "webhooks.body_timeout_seconds",
        Kind.FLOAT,
        10.0,
        help="The receiver answers 408 and closes when a body takes longer than this to arrive.",
        minimum=0.1,
    ),
    Setting(
        "webhooks.max_connections",
        Kind.INT,
        1000,
        help=(
            "Connections the receiver holds open at most (kept below the process's "
            "file-descriptor limit); beyond it new ones are answered 503 and closed."
        ),
        minimum=1,
    ),
    # -- warehouse: the local analytics database ---------------------------------
    Setting(
        "warehouse.path",
        Kind.PATH,
        "data/warehouse.duckdb",
        help="DuckDB database file of the analytics warehouse.",
        env_aliases=("CONVO_DB",),
    ),
    # -- extract: reading the service's API into the warehouse -------------------
    Setting(
        "extract.streams",
        Kind.LIST,
        ("conversations", "leads", "summary"),
        help=(
            "Streams to extract, in order: conversations, leads, summary. (Written as tables, "
            "[extract.streams.NAME] describes a stream's endpoint instead; see "
            "docs/configuration.md, 'The service's endpoints'.)"
        ),
        pattern=r"conversations|leads|summary",
        pattern_help="conversations, leads or summary",
    ),
    Setting(
        "extract.page_size",
        Kind.INT,
        200,
        help="Records asked for per list page.",
        minimum=1,
        maximum=10000,
    ),
    Setting(
        "extract.pagination",
        Kind.STR,
        "auto",
        help=(
            "Paging style of every list stream: auto (detected from the first answer), cursor, "
            "next_url, link_header, page_number, offset or single, optionally with options "
            "(STYLE:option=value,...; e.g. offset:offset_param=_start,end_param=_end). A "
            "stream's own paginator table wins."
        ),
        pattern=r"(auto|cursor|next_url|link_header|page_number|offset|single)"
        r"(:[a-z_]+=[^,=\s]*(,[a-z_]+=[^,=\s]*)*)?",
        pattern_help="a style, optionally STYLE:option=value,... (e.g. page_number:page_param=p)",
    ),
    Setting(
        "extract.envelope",
        Kind.STR,
        "",
        help="Key of the record list in list answers; empty: detected (data, items, results, ...).",
    ),
    Setting(
        "extract.id_field",
        Kind.STR,
        "",
        help="Record id field; empty: detected (id, conversationId, ...).",
    ),
    Setting(
        "extract.created_field",
        Kind.STR,
        "",
        help="Record created-at field; empty: detected (createdAt, created_at, ...).",
    ),
    Setting(
        "extract.updated_field",
        Kind.STR,
        "",
        help="Record updated-at field; empty: detected (updatedAt, updated_at, ...).",
    ),
    Setting(
        "extract.updated_since_param",
        Kind.STR,
        "updatedSince",
        help="Query parameter for 'updated at or after' on list endpoints.",
    ),
    Setting(
        "extract.updated_before_param",
        Kind.STR,
        "updatedBefore",
        help="Query parameter for 'updated before' on list endpoints.",
    ),
    Setting(
        "extract.lookback_seconds",
        Kind.FLOAT,
        300.0,
        help="How far before the bookmark an incremental run starts again, for late writes.",
        minimum=0.0,
    ),
    Setting(
        "extract.detail_concurrency",
        Kind.INT,
        16,
        help="Conversation details fetched at once (the rate limiter still paces them).",
        minimum=1,
        maximum=256,
    ),
    Setting(
        "extract.max_attempts",
        Kind.INT,
        8,
        help="Attempts per request before the run fails (retries with backoff in between).",
        minimum=1,
        maximum=100,
    ),
    Setting(
        "extract.allowed_origins",
        Kind.LIST,
        (),
        help=(
            "Origins besides the base URL's (scheme://host[:port]) that next-page links and "
            "detail URLs may point at; the API key is sent to them too. Any other origin fails "
            "its stream with nothing sent."
        ),
        pattern=r"https?://[^/\s?#@]+/?",
        pattern_help="scheme://host[:port] origins",
        url=True,
        url_secret_to="service.api_key",
    ),
    Setting(
        "extract.strict",
        Kind.BOOL,
        False,
        help=(
            "Fail a stream (exit 1) on any warning: a default parameter dropped, a page size "
            "ignored, an incremental parameter ignored, details without transcripts, typed "
            "columns left NULL, a configured total found nowhere, a summary that typed no day."
        ),
    ),
    Setting(
        "extract.summary_days",
        Kind.INT,
        30,
        help="Days of the service's own summary fetched, ending today.",
        minimum=1,
        maximum=732,
    ),
    Setting(
        "extract.summary_timezone",
        Kind.STR,
        "UTC",
        help="IANA time zone the service's summary cuts days in.",
    ),
    Setting(
        "extract.batch_records",
        Kind.INT,
        20000,
        help="Commit a batch once it holds this many records ...",
        minimum=1,
    ),
    Setting(
        "extract.batch_seconds",
        Kind.FLOAT,
        5.0,
        help="... or once it is this many seconds old (each commit advances the bookmark).",
        minimum=0.0,
    ),
    Setting(
        "service.connect_timeout_seconds",
        Kind.FLOAT,
        10.0,
        help="Timeout in seconds for connecting to the service.",
        minimum=0.1,
    ),
    Setting(
        "service.reach_budget_seconds",
        Kind.FLOAT,
        15.0,
        help=(
            "How long a run keeps retrying refused connections, DNS and TLS failures before "
            "the service has answered at all; then it fails with one line. Once the service "
            "has answered, retries follow extract.max_attempts."
        ),
        minimum=0.0,
    ),
    # -- auth: OAuth 2.0 grants of [[workspaces]] -------------------------------
    Setting(
        "auth.token_store",
        Kind.PATH,
        "data/oauth-tokens.json",
        help=(
            "File (mode 0600) where `convo auth login` keeps each OAuth workspace's tokens; "
            "runs refresh them in place under a lock."
        ),
        env_aliases=("CONVO_TOKEN_STORE",),
    ),
    # -- sandbox: the local fake of the service, for development and tests ------
    Setting(
        "sandbox.host",
        Kind.STR,
        "127.0.0.1",
        help="Interface the sandbox server listens on.",
    ),
    Setting(
        "sandbox.port",
        Kind.INT,
        8787,
        help="TCP port the sandbox server listens on.",
        minimum=0,
        maximum=65535,
    ),
    Setting(
        "sandbox.seed",
        Kind.INT,
        42,
        help="Random seed for the generated data; same seed, same data.",
        minimum=0,
    ),
    Setting(
        "sandbox.conversations",
        Kind.INT,
        2000,
        help="Number of conversations the sandbox generates.",
        minimum=0,
    ),
    Setting(
        "sandbox.days",
        Kind.INT,
        30,
        help="Number of days of history the generated conversations span.",
        minimum=1,
    ),
    Setting(
        "sandbox.rate_limit",
        Kind.STR,
        "600/min",
        help=(
            "Rate limit the sandbox enforces: 600/min (per key, bursts to 2x for 10 s), "
            "100/min (per workspace), none, or RATE[,burst=N][,scope=key|workspace]."
        ),
        pattern=_RATE_SPEC,
        pattern_help=_RATE_SPEC_HELP,
    ),
    Setting(
        "sandbox.retry_after_format",
        Kind.STR,
        "seconds",
        help="How 429 answers give Retry-After: seconds or http-date.",
        pattern=r"seconds|http-date",
        pattern_help="seconds or http-date",
    ),
    Setting(
        "sandbox.event_fields",
        Kind.STR,
        "both",
        help="Which event set's field names webhook data carries: a, b or both.",
        pattern=r"a|b|both",
        pattern_help="a, b or both",
    ),
    Setting(
        "sandbox.webhook_signing",
        Kind.STR,
        "stripped",
        help=(
            "Which bytes the signature header signs: stripped (the body without its "
            "signature member, as the signature field does) or raw (the whole raw body)."
        ),
        pattern=r"stripped|raw",
        pattern_help="stripped or raw",
    ),
    Setting(
        "sandbox.workspaces",
        Kind.LIST,
        (),
        help=(
            "Workspaces the sandbox serves, as NAME:KEY entries (KEY is the API key "
            "for that workspace). Secret: environment only, comma-separated."
        ),
        secret=True,
        pattern=r"[A-Za-z0-9_.-]+:\S+",
        pattern_help="NAME:KEY entries",
    ),
    Setting(
        "sandbox.key_file",
        Kind.PATH,
        "data/sandbox/keys-{port}.json",
        help="JSON file where the sandbox keeps its workspace API keys; {port} becomes the "
        "port it listens on, so that two sandboxes never overwrite each other's keys.",
    ),
    Setting(
        "sandbox.webhook_archive",
        Kind.PATH,
        None,
        help="Where the sandbox records the webhooks it sends; empty means no record.",
    ),
    Setting(
        "sandbox.webhook_retry_schedule",
        Kind.STR,
        "2,8,32",
        help=(
            "Waits in seconds before each webhook delivery retry (statement 2 of the "
            "interface), or exponential[:HOURSh] for backoff up to 24 h (statement 1)."
        ),
        pattern=r"exponential(:[0-9]+(\.[0-9]+)?h)?|"
        r"(\s*[0-9]+(\.[0-9]+)?\s*(,\s*[0-9]+(\.[0-9]+)?\s*)*)?",
        pattern_help="comma-separated seconds like 2,8,32 (empty: no retries), or exponential:24h",
    ),
    Setting(
        "sandbox.fault_5xx_rate",
        Kind.FLOAT,
        0.0,
        help="Fraction of sandbox API requests answered with a 5xx error.",
        minimum=0.0,
        maximum=1.0,
    ),
    Setting(
        "sandbox.fault_slow_rate",
        Kind.FLOAT,
        0.0,
        help="Fraction of sandbox API requests delayed by fault_slow_seconds.",
        minimum=0.0,
        maximum=1.0,
    ),
    Setting(
        "sandbox.fault_slow_seconds",
        Kind.FLOAT,
        2.0,
        help="Delay in seconds applied to slowed-down sandbox requests.",
        minimum=0.0,
    ),
    Setting(
        "sandbox.fault_drop_rate",
        Kind.FLOAT,
        0.0,
        help="Fraction of sandbox API requests whose connection is dropped.",
        minimum=0.0,
        maximum=1.0,
    ),
    Setting(
        "sandbox.inactivity_seconds",
        Kind.FLOAT,
        0.0,
        help=(
            "Quiet time after which a live conversation completes; 0 uses its channel's "
            "window (web 30 min, messenger 1 h, whatsapp and sms 1 day, email 3 days)."
        ),
        minimum=0.0,
    ),
    Setting(
        "sandbox.lead_threshold",
        Kind.FLOAT,
        70.0,
        help="Lead score (0-100) at which a conversation's lead qualifies (lead.qualified).",
        minimum=0.0,
        maximum=100.0,
    ),
    Setting(
        "sandbox.blocked_terms",
        Kind.LIST,
        ("idiot", "stupid bot", "scam", "lawsuit"),
        help="Words and phrases the guardrail flags as blocked_term (case-insensitive).",
    ),
    Setting(
        "sandbox.oauth_auto_approve",
        Kind.BOOL,
        False,
        help=(
            "Approve every OAuth authorization request at once, granting the workspace the "
            "client names (workspace=NAME) or the first (tests, the demo); else a consent page "
            "asks a workspace admin."
        ),
    ),
    Setting(
        "sandbox.oauth_token_seconds",
        Kind.INT,
        3600,
        help="Lifetime of the OAuth access tokens the sandbox issues, in seconds.",
        minimum=1,
    ),
    Setting(
        "sandbox.crawl_scope",
        Kind.STR,
        "any",
        help="Hosts a url-crawl knowledge source may fetch: any, or loopback (tests).",
        pattern=r"any|loopback",
        pattern_help="any or loopback",
    ),
    # -- transform: marts, metrics and reconciliation ----------------------------
    Setting(
        "transform.timezones",
        Kind.LIST,
        ("UTC",),
        help=(
            "IANA time zones the daily marts cut days in (the first is the default for "
            "exports and the dashboard); other zones are computed on request, more slowly. "
            "Changing them rebuilds every partition at the next transform."
        ),
    ),
    Setting(
        "transform.low_confidence_threshold",
        Kind.FLOAT,
        0.5,
        help=(
            "Assistant responses with confidence below this count as low-confidence "
            "(changing it rebuilds every partition at the next transform)."
        ),
        minimum=0.0,
        maximum=1.0,
    ),
    Setting(
        "transform.tolerance",
        Kind.FLOAT,
        0.01,
        help=(
            "Reconciliation: relative difference from the service's own summary "
            "tolerated before a day's metric is listed as a mismatch."
        ),
        minimum=0.0,
    ),
    # -- export and serve -------------------------------------------------------------
    Setting(
        "export.dir",
        Kind.PATH,
        "data/exports",
        help="Folder the guardrail exports (and their manifests) are written to.",
    ),
    Setting(
        "serve.host",
        Kind.STR,
        "127.0.0.1",
        help="Address `convo serve` listens on (plain HTTP: keep it on loopback behind TLS).",
    ),
    Setting(
        "serve.port",
        Kind.INT,
        8790,
        help="Port `convo serve` listens on.",
        minimum=1,
        maximum=65535,
    ),
    Setting(
        "serve.token",
        Kind.SECRET,
        help="Bearer token clients of `convo serve` must send; it reads every workspace "
        "(a workspace's own: serve_tokens_env). Secret: environment or file only.",
        env_aliases=("CONVO_SERVE_TOKEN",),
    ),
    Setting(
        "serve.token_file",
        Kind.PATH,
        help="File whose content is the `convo serve` token.",
        env_aliases=("CONVO_SERVE_TOKEN_FILE",),
        secret_file_for="serve.token",
    ),
    # -- publish and dashboard ---------------------------------------------------------
    Setting(
        "publish.dir",
        Kind.PATH,
        "data/published",
        help="Folder of the published warehouse snapshots the dashboard reads.",
    ),
    Setting(
        "publish.keep",
        Kind.INT,
        3,
        help="Published snapshots kept (older ones are removed).",
        minimum=1,
    ),
    Setting(
        "dashboard.host",
        Kind.STR,
        "127.0.0.1",
        help="Address the dashboard listens on (plain HTTP: keep it on loopback behind TLS).",
    ),
    Setting(
        "dashboard.port",
        Kind.INT,
        8501,
        help="Port the dashboard listens on.",
        minimum=1,
        maximum=65535,
    ),
    Setting(
        "dashboard.notebooks_dir",
        Kind.PATH,
        "data/notebooks",
        help=(
            "Folder of the Explore page's saved notebooks (plain .sql files; the starter "
            "notebooks ship in dashboards/notebooks/)."
        ),
    ),
    Setting(
        "dashboard.query_timeout_seconds",
        Kind.FLOAT,
        10.0,
        help="An Explore query running longer than this is stopped (its process killed).",
        minimum=0.1,
        maximum=600.0,
    ),
    Setting(
        "dashboard.query_row_limit",
        Kind.INT,
        10000,
        help="Rows an Explore query returns at most (the cell says when there were more).",
        minimum=1,
        maximum=1000000,
    ),
    Setting(
        "dashboard.query_memory_mb",
        Kind.INT,
        1024,
        help=(
            "Memory (MiB) an Explore query's process may hold, its own ~140 MiB included; "
            "past it the query is stopped."
        ),
        minimum=256,
        maximum=1048576,
    ),
    Setting(
        "dashboard.query_threads",
        Kind.INT,
        1,
        help="DuckDB threads an Explore query runs on.",
        minimum=1,
        maximum=256,
    ),
    Setting(
        "dashboard.query_workers",
        Kind.INT,
        2,
        help=(
            "Explore query processes kept running (queries at once); the app may use up to "
            "this many times query_memory_mb."
        ),
        minimum=1,
        maximum=64,
    ),
    Setting(
        "dashboard.query_temp_mb",
        Kind.INT,
        1024,
        help="Temporary disk (MiB) an Explore query may spill to; past it the query is stopped.",
        minimum=0,
        maximum=1048576,
    ),
    # -- lake: the shared Apache Iceberg lake (convo publish --lake) -------------------
    Setting(
        "lake.catalog_uri",
        Kind.STR,
        "sqlite:///data/lake/catalog.db",
        help=(
            "The lake's Iceberg catalog, an SQLAlchemy URL: sqlite:///PATH for one machine, "
            "postgresql+psycopg2://USER@HOST:PORT/DB when many workers publish. No password "
            "in it: use lake.catalog_password."
        ),
        pattern=r"[a-z][a-z0-9+]*://\S*",
        pattern_help="a database URL such as sqlite:///data/lake/catalog.db",
        url=True,
        url_secret_to="lake.catalog_password",
        url_secret_fix="PostgreSQL's driver also reads PGPASSWORD or a PGPASSFILE",
    ),
    Setting(
        "lake.catalog_password",
        Kind.SECRET,
        help="Password of the catalog's database user. Secret: environment or file only.",
    ),
    Setting(
        "lake.catalog_password_file",
        Kind.PATH,
        help="File whose content is the catalog database's password.",
        secret_file_for="lake.catalog_password",
    ),
    Setting(
        "lake.warehouse",
        Kind.STR,
        "data/lake/warehouse",
        help=(
            "Where the lake's data and metadata files go: a local folder, or s3://BUCKET/PATH "
            "(credentials and endpoint from the usual AWS_* or PYICEBERG_CATALOG__CONVO__S3__* "
            "environment variables)."
        ),
        url=True,
        url_secret_fix=(
            "object store credentials come from the AWS_* or PYICEBERG_CATALOG__CONVO__S3__* "
            "environment variables"
        ),
    ),
    Setting(
        "lake.namespace",
        Kind.STR,
        "convo",
        help="The Iceberg namespace the lake's tables are in.",
        pattern=r"[A-Za-z_][A-Za-z0-9_]*",
        pattern_help="letters, digits and underscores",
    ),
    Setting(
        "lake.keep_snapshots_hours",
        Kind.INT,
        168,
        help=(
            "A publish's commit to a lake table expires the table's snapshots older than "
            "this many hours (time travel reaches back this far; the files stay for "
            "orphan-file maintenance), but not those its readers are pinned to."
        ),
        minimum=0,
    ),
    Setting(
        "read.source",
        Kind.STR,
        "snapshot",
        help=(
            "What the dashboard, `convo serve` and the exports read: snapshot (the "
            "published copy; the exports, the warehouse) or lake (the lake as its "
            "complete publishes left it, copied locally)."
        ),
        pattern=r"snapshot|lake",
        pattern_help="snapshot or lake",
    ),
    # -- run: the nightly pipeline ---------------------------------------------------
    Setting(
        "run.lock_file",
        Kind.PATH,
        None,
        help=(
            "The warehouse writers' lock: every command that writes the warehouse (extract, "
            "webhooks ingest, transform, publish, run) holds it, so writers never overlap. "
            "Empty: <warehouse>.lock beside the warehouse (one lock per warehouse file); set, "
            "this file instead."
        ),
    ),
    Setting(
        "run.lock_wait_seconds",
        Kind.FLOAT,
        0.0,
        help=(
            "Seconds a writing command waits for another writer to release the lock before "
            "it exits 75 (0: exit at once)."
        ),
        minimum=0.0,
        maximum=86400.0,
    ),
    Setting(
        "run.log_file",
        Kind.PATH,
        None,
        help=(
            "File `convo run` appends every step's log to (its folder is made). Empty: none; "
            "the run prints its summary line, warnings and errors, and the step logs with "
            "--verbose."
        ),
    ),
    Setting(
        "run.ingest_paths",
        Kind.LIST,
        (),
        help=(
            "Webhook archives (files or folders) the run ingests besides webhooks.archive_dir, "
            "e.g. a service's export of its delivery log."
        ),
    ),
    Setting(
        "run.export_days",
        Kind.INT,
        30,
        help="Days, ending yesterday, that the run's summary and guardrail exports cover.",
        minimum=1,
        maximum=732,
    ),
    Setting(
        "run.guardrail_format",
        Kind.STR,
        "jsonl",
        help="Format of the run's guardrail export: jsonl, csv or parquet.",
        pattern=r"jsonl|csv|parquet",
        pattern_help="jsonl, csv or parquet",
    ),
    Setting(
        "run.archive_retention_days",
        Kind.INT,
        90,
        help="Received webhook archive files older than this, once ingested, are removed "
        "(0 keeps them all).",
        minimum=0,
    ),
    Setting(
        "run.alert_webhook_url",
        Kind.SECRET,
        help=(
            "URL that gets a JSON POST when a run fails or ends with a warning. Secret (chat "
            "webhook URLs carry their credential): environment only."
        ),
    ),
    Setting(
        "run.alert_command",
        Kind.STR,
        "",
        help="Shell command run when a run fails or ends with a warning, with CONVO_RUN_ID, "
        "CONVO_RUN_STATUS, CONVO_RUN_FAILED_STEP, CONVO_RUN_ERROR and CONVO_RUN_WARNINGS set "
        "(empty: none).",
    ),
)

REGISTRY = Registry(SETTINGS)
