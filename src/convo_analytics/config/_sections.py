"""THE settings, one section model a ``[section]`` of convo.toml, one field a setting.

To add a setting, add a field with :func:`setting` (its type, default, description and
environment alias) to its section, then document it in ``convo.example.toml`` and
``docs/configuration.md`` (the tests fail until you do). Its TOML key, its
``CONVO_<SECTION>_<KEY>`` variable, its checks, masking and ``convo config show`` follow.
A secret is ``SecretText`` (or ``SecretList``) without a default; its file, when it may be
read from one, is the ``PathOrNone`` setting beside it named ``<secret>_file``.
"""

from __future__ import annotations

from convo_analytics.config._model import (
    Bool,
    Float,
    Int,
    List,
    PathOrNone,
    SecretList,
    SecretText,
    Section,
    Str,
    setting,
)

__all__ = [
    "AuditSettings",
    "AuthSettings",
    "DashboardSettings",
    "ExportSettings",
    "ExtractSettings",
    "LakeSettings",
    "MonitoringSettings",
    "NotifySettings",
    "OrchestratorSettings",
    "PrivacySettings",
    "PublishSettings",
    "ReadSettings",
    "ReportingSettings",
    "RetentionSettings",
    "RunSettings",
    "SandboxSettings",
    "ServeSettings",
    "ServiceSettings",
    "TopicsSettings",
    "TransformSettings",
    "WarehouseSettings",
    "WebhooksSettings",
]

_RATE = r"[1-9][0-9]*/(s|sec|second|min|minute|h|hour)"
#: Either statement of the interface, none, or a custom bucket (see RateLimitPolicy.parse).
_RATE_SPEC = r"none|off|" + _RATE + r"(,(burst=[0-9.]+|scope=(key|workspace)))*"
_RATE_HELP = "600/min, 100/min, none, or RATE[,burst=N][,scope=key|workspace]"
_KEY = "service.api_key"


class ServiceSettings(Section):
    """The hosted Conversational Assistant Service we read from."""

    base_url: Str = setting(
        "http://127.0.0.1:8787",
        "Base URL of the Conversational Assistant Service API "
        "(https://; plain http only to loopback).",
        env="CONVO_BASE_URL",
        pattern=r"https?://\S+",
        pattern_help="an http:// or https:// URL",
        url=True,
        url_secret_to=_KEY,
    )
    api_key: SecretText = setting(
        None, "API key sent to the service. Secret: environment or file only.", env="CONVO_API_KEY"
    )
    api_key_file: PathOrNone = setting(
        None,
        "File whose content (trailing whitespace stripped) is the service API key.",
        env="CONVO_API_KEY_FILE",
    )
    rate_limit: Str = setting(
        "600/min",
        "The service's rate limit, which the client paces itself under: 600/min "
        "(statement 1), 100/min (statement 2), none, or RATE[,burst=N].",
        env="CONVO_RATE_LIMIT",
        pattern=_RATE_SPEC,
        pattern_help=_RATE_HELP,
    )
    timeout_seconds: Float = setting(
        30.0,
        "Timeout in seconds for one HTTP request to the service.",
        env="CONVO_TIMEOUT_SECONDS",
        ge=0.1,
    )
    connect_timeout_seconds: Float = setting(
        10.0, "Timeout in seconds for connecting to the service.", ge=0.1
    )
    reach_budget_seconds: Float = setting(
        5.0,
        "How long a run keeps retrying refused connections, DNS and TLS failures before "
        "the service has answered at all; then it fails with one line. Once the service has "
        "answered, retries follow extract.max_attempts.",
        ge=0.0,
    )


class WebhooksSettings(Section):
    """Deliveries the service pushes to us."""

    secret: SecretText = setting(
        None,
        "Secret(s) used to verify webhook signatures. Several comma-separated secrets "
        "are accepted during rotation. Secret: environment or file only.",
        env="CONVO_WEBHOOK_SECRET",
    )
    secret_file: PathOrNone = setting(
        None,
        "File holding the webhook secret(s), comma- or newline-separated.",
        env="CONVO_WEBHOOK_SECRET_FILE",
    )
    archive_dir: PathOrNone = setting(
        "data/webhooks",
        "Directory where received webhook deliveries are archived.",
        env="CONVO_WEBHOOK_ARCHIVE_DIR",
    )
    max_line_bytes: Int = setting(
        8 << 20,
        "Archive lines longer than this many bytes are quarantined as too_large "
        "without being loaded (8 MiB; the receiver caps bodies at 1 MiB).",
        ge=1024,
    )
    max_future_seconds: Int = setting(
        86_400,
        "An event dated more than this many seconds after it was received (or, "
        "without a time of receipt, after now) is quarantined as future_timestamp.",
        ge=0,
    )
    bad_signature_share: Float = setting(
        0.5,
        "When every line of an ingest, or more than this share of them, fails the "
        "signature check, the secret is most likely wrong: the run says so and exits 1.",
        ge=0.0,
        le=1.0,
    )
    settle_seconds: Int = setting(
        600,
        "A plain archive file changed within this many seconds may still be being "
        "written: its last line without a newline is left for a later run.",
        ge=0,
    )
    header_timeout_seconds: Float = setting(
        5.0,
        "The receiver drops a connection whose request headers have not all arrived "
        "within this many seconds (of connecting, or of its previous answer).",
        ge=0.1,
    )
    body_timeout_seconds: Float = setting(
        10.0,
        "The receiver answers 408 and closes when a body takes longer than this to arrive.",
        ge=0.1,
    )
    max_connections: Int = setting(
        1000,
        "Connections the receiver holds open at most (kept below the process's "
        "file-descriptor limit); beyond it new ones are answered 503 and closed.",
        ge=1,
    )


class WarehouseSettings(Section):
    """The local analytics database."""

    path: PathOrNone = setting(
        "data/warehouse.duckdb", "DuckDB database file of the analytics warehouse.", env="CONVO_DB"
    )


class ExtractSettings(Section):
    """Reading the service's API into the warehouse (its endpoints' tables:
    convo_analytics.extract._source)."""

    streams: List = setting(
        ("conversations", "leads", "summary"),
        "Streams to extract, in order: conversations, "
        "leads, summary. (Written as tables, [extract.streams.NAME] describes a stream's "
        "endpoint instead; see docs/configuration.md, 'The service's endpoints'.)",
        pattern=r"conversations|leads|summary",
        pattern_help="conversations, leads or summary",
    )
    page_size: Int = setting(200, "Records asked for per list page.", ge=1, le=10000)
    pagination: Str = setting(
        "auto",
        "Paging style of every list stream: auto (detected from the first answer), "
        "cursor, next_url, link_header, page_number, offset or single, optionally with options "
        "(STYLE:option=value,...; e.g. offset:offset_param=_start,end_param=_end). A stream's "
        "own paginator table wins.",
        pattern=r"(auto|cursor|next_url|link_header|page_number|offset|single)"
        r"(:[a-z_]+=[^,=\s]*(,[a-z_]+=[^,=\s]*)*)?",
        pattern_help="a style, optionally STYLE:option=value,... (e.g. page_number:page_param=p)",
    )
    envelope: Str = setting(
        "", "Key of the record list in list answers; empty: detected (data, items, results, ...)."
    )
    id_field: Str = setting("", "Record id field; empty: detected (id, conversationId, ...).")
    created_field: Str = setting(
        "", "Record created-at field; empty: detected (createdAt, created_at, ...)."
    )
    updated_field: Str = setting(
        "", "Record updated-at field; empty: detected (updatedAt, updated_at, ...)."
    )
    updated_since_param: Str = setting(
        "updatedSince", "Query parameter for 'updated at or after' on list endpoints."
    )
    updated_before_param: Str = setting(
        "updatedBefore", "Query parameter for 'updated before' on list endpoints."
    )
    lookback_seconds: Float = setting(
        300.0,
        "How far before the bookmark an incremental run starts again, for late writes.",
        ge=0.0,
    )
    detail_concurrency: Int = setting(
        16,
        "Conversation details fetched at once (the rate limiter still paces them).",
        ge=1,
        le=256,
    )
    max_attempts: Int = setting(
        8,
        "Attempts per request before the run fails (retries with backoff in between).",
        ge=1,
        le=100,
    )
    allowed_origins: List = setting(
        (),
        "Origins besides the base URL's (scheme://host[:port]) that next-page links and "
        "detail URLs may point at; the API key is sent to them too. Any other origin fails "
        "its stream with nothing sent.",
        pattern=r"https?://[^/\s?#@]+/?",
        pattern_help="scheme://host[:port] origins",
        url=True,
        url_secret_to=_KEY,
    )
    strict: Bool = setting(
        False,
        "Fail a stream (exit 1) on any warning: a default parameter dropped, a page "
        "size ignored, an incremental parameter ignored, details without transcripts, typed "
        "columns left NULL, a configured total found nowhere, a summary that typed no "
        "day.",
    )
    summary_days: Int = setting(
        30, "Days of the service's own summary fetched, ending today.", ge=1, le=732
    )
    summary_timezone: Str = setting("UTC", "IANA time zone the service's summary cuts days in.")
    batch_records: Int = setting(20000, "Commit a batch once it holds this many records ...", ge=1)
    batch_seconds: Float = setting(
        5.0, "... or once it is this many seconds old (each commit advances the bookmark).", ge=0.0
    )


class AuthSettings(Section):
    """OAuth 2.0 grants of [[workspaces]]."""

    token_store: PathOrNone = setting(
        "data/oauth-tokens.json",
        "File (mode 0600) where `convo auth login` keeps each OAuth "
        "workspace's tokens; runs refresh them in place under a lock.",
        env="CONVO_TOKEN_STORE",
    )


class PrivacySettings(Section):
    """Personal data in what is stored (issue 30; convo_analytics.privacy, D-PRIVACY-SCRUB):
    how it is scrubbed, and the key of its keyed hashes."""

    scrub: Str = setting(
        "mask",
        "How personal data (emails, phone numbers, card numbers, IBANs, IP addresses, "
        "extra_patterns) is scrubbed: mask ([email]), hash ([email:<keyed hash>]: equal "
        "values stay joinable) or off. A workspace's privacy_scrub in [[workspaces]] wins.",
        pattern=r"off|mask|hash",
        pattern_help="off, mask or hash",
    )
    default_region: Str = setting(
        "US",
        "Region (ISO 3166-1 alpha-2) national phone numbers, written without a country "
        "code, are read in; empty: only numbers written with one are found.",
        pattern=r"[A-Za-z]{2}|",
        pattern_help="a two-letter region code such as US, GB, DE, or empty",
    )
    extra_patterns: List = setting(
        (),
        "More personal data to scrub, as NAME=REGEX entries (masked as [NAME]); a pattern "
        "with nested unbounded repetition or one matching empty text is refused. Write them "
        "in convo.toml: a variable is split at commas.",
        pattern=r"[a-z][a-z0-9_]{0,31}=.+",
        pattern_help="NAME=REGEX entries, NAME of lowercase letters, digits and _",
    )
    key: SecretText = setting(
        None,
        "Key of the keyed hashes (HMAC-SHA256; each workspace's derived from it), at least "
        "16 characters. Unset: a key generated once into generated_key_file. Secret: "
        "environment or file only.",
    )
    key_file: PathOrNone = setting(
        None, "File whose content (trailing whitespace stripped) is privacy.key."
    )
    generated_key_file: PathOrNone = setting(
        "data/app-state/privacy.key",
        "Where the key is generated (mode 0600) and kept when privacy.key is unset; back it "
        "up with the data: without it, new hashes no longer match stored ones.",
    )


class SandboxSettings(Section):
    """The local fake of the service, for development and tests."""

    host: Str = setting("127.0.0.1", "Interface the sandbox server listens on.")
    port: Int = setting(8787, "TCP port the sandbox server listens on.", ge=0, le=65535)
    seed: Int = setting(42, "Random seed for the generated data; same seed, same data.", ge=0)
    conversations: Int = setting(2000, "Number of conversations the sandbox generates.", ge=0)
    days: Int = setting(30, "Number of days of history the generated conversations span.", ge=1)
    rate_limit: Str = setting(
        "600/min",
        "Rate limit the sandbox enforces: 600/min (per key, bursts to 2x for 10 s), "
        "100/min (per workspace), none, or RATE[,burst=N][,scope=key|workspace].",
        pattern=_RATE_SPEC,
        pattern_help=_RATE_HELP,
    )
    retry_after_format: Str = setting(
        "seconds",
        "How 429 answers give Retry-After: seconds or http-date.",
        pattern=r"seconds|http-date",
        pattern_help="seconds or http-date",
    )
    event_fields: Str = setting(
        "both",
        "Which event set's field names webhook data carries: a, b or both.",
        pattern=r"a|b|both",
        pattern_help="a, b or both",
    )
    webhook_signing: Str = setting(
        "stripped",
        "Which bytes the signature header signs: stripped (the body without its "
        "signature member, as the signature field does) or raw (the whole raw body).",
        pattern=r"stripped|raw",
        pattern_help="stripped or raw",
    )
    workspaces: SecretList = setting(
        (),
        "Workspaces the sandbox serves, as NAME:KEY entries (KEY is the API key for that "
        "workspace). Secret: environment only, comma-separated.",
        pattern=r"[A-Za-z0-9_.-]+:\S+",
        pattern_help="NAME:KEY entries",
    )
    key_file: PathOrNone = setting(
        "data/sandbox/keys-{port}.json",
        "JSON file where the sandbox keeps its workspace API "
        "keys; {port} becomes the port it listens on, so that two sandboxes never overwrite "
        "each other's keys.",
    )
    webhook_archive: PathOrNone = setting(
        None, "Where the sandbox records the webhooks it sends; empty means no record."
    )
    webhook_retry_schedule: Str = setting(
        "2,8,32",
        "Waits in seconds before each webhook delivery retry (statement 2 of the "
        "interface), or exponential[:HOURSh] for backoff up to 24 h (statement 1).",
        pattern=r"exponential(:[0-9]+(\.[0-9]+)?h)?|"
        r"(\s*[0-9]+(\.[0-9]+)?\s*(,\s*[0-9]+(\.[0-9]+)?\s*)*)?",
        pattern_help="comma-separated seconds like 2,8,32 (empty: no retries), or exponential:24h",
    )
    fault_5xx_rate: Float = setting(
        0.0, "Fraction of sandbox API requests answered with a 5xx error.", ge=0.0, le=1.0
    )
    fault_slow_rate: Float = setting(
        0.0, "Fraction of sandbox API requests delayed by fault_slow_seconds.", ge=0.0, le=1.0
    )
    fault_slow_seconds: Float = setting(
        2.0, "Delay in seconds applied to slowed-down sandbox requests.", ge=0.0
    )
    fault_drop_rate: Float = setting(
        0.0, "Fraction of sandbox API requests whose connection is dropped.", ge=0.0, le=1.0
    )
    inactivity_seconds: Float = setting(
        0.0,
        "Quiet time after which a live conversation completes; 0 uses its channel's "
        "window (web 30 min, messenger 1 h, whatsapp and sms 1 day, email 3 days).",
        ge=0.0,
    )
    lead_threshold: Float = setting(
        70.0,
        "Lead score (0-100) at which a conversation's lead qualifies (lead.qualified).",
        ge=0.0,
        le=100.0,
    )
    blocked_terms: List = setting(
        ("idiot", "stupid bot", "scam", "lawsuit"),
        "Words and phrases the guardrail flags as blocked_term (case-insensitive).",
    )
    oauth_auto_approve: Bool = setting(
        False,
        "Approve every OAuth authorization request at once, granting the workspace the "
        "client names (workspace=NAME) or the first (tests, the demo); else a consent page "
        "asks a workspace admin.",
    )
    oauth_token_seconds: Int = setting(
        3600, "Lifetime of the OAuth access tokens the sandbox issues, in seconds.", ge=1
    )
    crawl_scope: Str = setting(
        "any",
        "Hosts a url-crawl knowledge source may fetch: any, or loopback (tests).",
        pattern=r"any|loopback",
        pattern_help="any or loopback",
    )


class TransformSettings(Section):
    """Marts, metrics and reconciliation."""

    timezones: List = setting(
        ("UTC",),
        "IANA time zones the daily marts cut days in (the first is the default for "
        "exports and the dashboard); other zones are computed on request, more slowly. "
        "Changing them rebuilds every partition at the next transform.",
    )
    low_confidence_threshold: Float = setting(
        0.5,
        "Assistant responses with confidence below this count as low-confidence "
        "(changing it rebuilds every partition at the next transform).",
        ge=0.0,
        le=1.0,
    )
    tolerance: Float = setting(
        0.01,
        "Reconciliation: relative difference from the service's own summary tolerated "
        "before a day's metric is listed as a mismatch.",
        ge=0.0,
    )
    fallback_patterns: List = setting(
        (
            r"\bI (do not|don.?t) have (any |enough )?(information|info|details)\b",
            r"\bI (could not|couldn.?t|cannot|can.?t|was unable to|am unable to) find\b",
            r"\b(could|can) you (please )?(rephrase|reword)\b",
            r"\bI( a|.?)m not (completely |entirely |quite |totally )?sure\b",
            r"\bI (do not|don.?t) know\b",
        ),
        "Knowledge gaps: assistant answers matching one of these (case-insensitive "
        "regular expressions, RE2 syntax) are fallbacks; changing them recomputes every "
        "knowledge gap at the next transform.",
    )


class TopicsSettings(Section):
    """Topics: what conversations are about (issue 27)."""

    enabled: Bool = setting(
        True,
        "Place every conversation in a topic of its workspace at each transform "
        "(discovered offline from first user messages).",
    )
    min_conversations: Int = setting(
        500,
        "A workspace's topics are discovered once it has this many conversations with a "
        "user message (before that, their topic is 'unknown').",
        ge=2,
    )
    messages: Str = setting(
        "first",
        "What places a conversation in a topic: its first user message, or all its user "
        "messages (joined; the first 2,000 characters). After changing it, run "
        "`convo topics rediscover`.",
        pattern=r"first|all",
        pattern_help="first or all",
    )
    curations_file: PathOrNone = setting(
        "data/app-state/topic_curations.jsonl",
        "The app's own store of topic renames, merges, splits and pins (the dashboard and "
        "`convo topics rename|merge|split|pin` append to it; every transform applies it).",
    )


class ExportSettings(Section):
    """Exports."""

    dir: PathOrNone = setting(
        "data/exports", "Folder the guardrail exports (and their manifests) are written to."
    )


class ServeSettings(Section):
    """`convo serve`, the read API."""

    host: Str = setting(
        "127.0.0.1",
        "Address `convo serve` listens on (plain HTTP: keep it on loopback behind TLS).",
    )
    port: Int = setting(8790, "Port `convo serve` listens on.", ge=1, le=65535)
    token: SecretText = setting(
        None,
        "Bearer token clients of `convo serve` must send; it reads every workspace (a "
        "workspace's own: serve_tokens_env). Secret: environment or file only.",
        env="CONVO_SERVE_TOKEN",
    )
    token_file: PathOrNone = setting(
        None, "File whose content is the `convo serve` token.", env="CONVO_SERVE_TOKEN_FILE"
    )


class PublishSettings(Section):
    """Published snapshots."""

    dir: PathOrNone = setting(
        "data/published", "Folder of the published warehouse snapshots the dashboard reads."
    )
    keep: Int = setting(3, "Published snapshots kept (older ones are removed).", ge=1)


class DashboardSettings(Section):
    """The dashboard and its Explore page."""

    host: Str = setting(
        "127.0.0.1",
        "Address the dashboard listens on (plain HTTP: keep it on loopback behind TLS).",
    )
    port: Int = setting(8501, "Port the dashboard listens on.", ge=1, le=65535)
    notebooks_dir: PathOrNone = setting(
        "data/notebooks",
        "Folder of the Explore page's saved notebooks (plain .sql files; "
        "the starter notebooks ship in dashboards/notebooks/).",
    )
    query_timeout_seconds: Float = setting(
        10.0,
        "An Explore query running longer than this is stopped (its process killed).",
        ge=0.1,
        le=600.0,
    )
    query_row_limit: Int = setting(
        10000,
        "Rows an Explore query returns at most (the cell says when there were more).",
        ge=1,
        le=1000000,
    )
    query_memory_mb: Int = setting(
        1024,
        "Memory (MiB) an Explore query's process may hold, its own ~140 MiB included; "
        "past it the query is stopped.",
        ge=256,
        le=1048576,
    )
    query_threads: Int = setting(1, "DuckDB threads an Explore query runs on.", ge=1, le=256)
    query_workers: Int = setting(
        2,
        "Explore query processes kept running (queries at once); the app may use up to "
        "this many times query_memory_mb.",
        ge=1,
        le=64,
    )
    query_temp_mb: Int = setting(
        1024,
        "Temporary disk (MiB) an Explore query may spill to; past it the query is stopped.",
        ge=0,
        le=1048576,
    )


class LakeSettings(Section):
    """The shared Apache Iceberg lake (convo publish --lake; convo_analytics.lake.LakeConfig)."""

    catalog_uri: Str = setting(
        "sqlite:///data/lake/catalog.db",
        "The lake's Iceberg catalog, an SQLAlchemy URL: "
        "sqlite:///PATH for one machine, postgresql+psycopg2://USER@HOST:PORT/DB when many "
        "workers publish. No password in it: use lake.catalog_password.",
        pattern=r"[a-z][a-z0-9+]*://\S*",
        pattern_help="a database URL such as sqlite:///data/lake/catalog.db",
        url=True,
        url_secret_to="lake.catalog_password",
        url_secret_fix="PostgreSQL's driver also reads PGPASSWORD or a PGPASSFILE",
    )
    catalog_password: SecretText = setting(
        None, "Password of the catalog's database user. Secret: environment or file only."
    )
    catalog_password_file: PathOrNone = setting(
        None, "File whose content is the catalog database's password."
    )
    warehouse: Str = setting(
        "data/lake/warehouse",
        "Where the lake's data and metadata files go: a local folder, "
        "or s3://BUCKET/PATH (credentials and endpoint from the usual AWS_* or "
        "PYICEBERG_CATALOG__CONVO__S3__* environment variables).",
        url=True,
        url_secret_fix="object store credentials come from the AWS_* or "
        "PYICEBERG_CATALOG__CONVO__S3__* environment variables",
    )
    namespace: Str = setting(
        "convo",
        "The Iceberg namespace the lake's tables are in.",
        pattern=r"[A-Za-z_][A-Za-z0-9_]*",
        pattern_help="letters, digits and underscores",
    )
    keep_snapshots_hours: Int = setting(
        168,
        "A publish's commit to a lake table expires the table's snapshots older than "
        "this many hours (time travel reaches back this far; the files stay for orphan-file "
        "maintenance), but not those its readers are pinned to. convo erase is the "
        "exception: it expires at once every snapshot holding the erased workspace's old "
        "rows, and removes their files.",
        ge=0,
    )
    orphan_min_age_minutes: Int = setting(
        60,
        "A publish removes the data files under its workspaces' partitions that no "
        "retained snapshot references once they are this many minutes old (a commit "
        "killed on this host: at once); younger ones may be another worker's commit in "
        "flight.",
        ge=0,
    )


class ReadSettings(Section):
    """What the readers read."""

    source: Str = setting(
        "snapshot",
        "What the dashboard, `convo serve` and the exports read: snapshot (the "
        "published copy; the exports, the warehouse) or lake (the lake as its complete "
        "publishes left it, copied locally).",
        pattern=r"snapshot|lake",
        pattern_help="snapshot or lake",
    )


class RunSettings(Section):
    """The nightly pipeline."""

    lock_file: PathOrNone = setting(
        None,
        "The warehouse writers' lock: every command that writes the warehouse (extract, "
        "webhooks ingest, transform, publish, run) holds it, so writers never overlap. Empty: "
        "<warehouse>.lock beside the warehouse (one lock per warehouse file); set, this file "
        "instead.",
    )
    lock_wait_seconds: Float = setting(
        0.0,
        "Seconds a writing command waits for another writer to release the lock before "
        "it exits 75 (0: exit at once).",
        ge=0.0,
        le=86400.0,
    )
    log_file: PathOrNone = setting(
        None,
        "File `convo run` appends every step's log to (its folder is made). Empty: "
        "none; the run prints its summary line, warnings and errors, and the step logs with "
        "--verbose.",
    )
    ingest_paths: List = setting(
        (),
        "Webhook archives (files or folders) the run ingests besides "
        "webhooks.archive_dir, e.g. a service's export of its delivery log.",
    )
    export_days: Int = setting(
        30,
        "Days, ending yesterday, that the run's summary and guardrail exports cover.",
        ge=1,
        le=732,
    )
    guardrail_format: Str = setting(
        "jsonl",
        "Format of the run's guardrail export: jsonl, csv or parquet.",
        pattern=r"jsonl|csv|parquet",
        pattern_help="jsonl, csv or parquet",
    )
    archive_retention_days: Int = setting(
        90,
        "Deprecated: the older name of retention.archive_days, read when that is not set.",
        ge=0,
    )
    alert_webhook_url: SecretText = setting(
        None,
        "URL that gets a JSON POST when a run fails or ends with a warning (https://; plain "
        "http only to loopback; signed with notify.signing_secret when that is set). Secret "
        "(chat webhook URLs carry their credential): environment only.",
    )
    alert_command: Str = setting(
        "",
        "Shell command run when a run fails or ends with a warning, with CONVO_RUN_ID, "
        "CONVO_RUN_STATUS, CONVO_RUN_FAILED_STEP, CONVO_RUN_ERROR, CONVO_RUN_WARNINGS and "
        "CONVO_NOTIFY_KEY set and the alert's JSON on stdin; a non-zero exit is retried "
        "(empty: none).",
    )


class OrchestratorSettings(Section):
    """The Dagster steps of docs/scale-out.md (pipelines/dagster/definitions.py): what a
    step does that a command on the command line does not."""

    batch_size: Int = setting(
        1,
        "Workspaces per step of the nightly Dagster job and per lake commit: each step of "
        "nightly_workspaces runs this many workspaces' nights one after another (one step "
        "process start for all of them), and their shards are published into the lake in "
        "one publish (one commit per changed table for the whole batch). A workspace that "
        "fails is retried alone and fails alone: the rest of its batch is published. 1: "
        "one workspace per step and per commit.",
        ge=1,
        le=1000,
    )
    step_lock_wait_seconds: Float = setting(
        300.0,
        "Seconds a Dagster step waits for another writer (a `convo` command, a step of an "
        "earlier run) to release its workspace shard's lock before it fails with "
        "WarehouseLocked, for its RetryPolicy to try again. Steps only: the command "
        "line's wait is run.lock_wait_seconds.",
        ge=0.0,
        le=86400.0,
    )
    step_storage: Str = setting(
        "",
        "Where a Dagster run keeps what its steps hand each other (the nightly job's "
        "workspace names): a folder every step's process can read (shared storage when "
        "steps run on other hosts: Kubernetes pods, Celery workers), or s3://BUCKET/PREFIX "
        "(dagster-aws's S3 IO manager; credentials and endpoint from the usual AWS_* "
        "variables). Empty: Dagster's default, DAGSTER_HOME/storage, for steps on the "
        "launching host only.",
        url=True,
        url_secret_fix="object store credentials come from the AWS_* environment variables",
    )


class RetentionSettings(Section):
    """How long the run's retention step keeps raw payloads, transcripts and received
    archives (issue 30; D-RETENTION). Each is overridable per workspace in
    ``[[workspaces]]`` (``retention_raw_payload_days``, ``retention_transcript_days``,
    ``retention_archive_days``)."""

    raw_payload_days: Int = setting(
        0,
        "Raw payloads (every fetched version of a record, whole: raw_conversations, "
        "raw_conversation_details, raw_leads, raw_service_summaries) fetched more than this "
        "many days ago are deleted (0 keeps them).",
        ge=0,
    )
    transcript_days: Int = setting(
        0,
        "The text of the messages of conversations whose last activity (update, end, or "
        "webhook event) is more than this many days old is removed, with its copies (topic "
        "texts and examples, knowledge-gap questions and answers, the raw details, message "
        "events' extra data); the messages and every metric stay (0 keeps them).",
        ge=0,
    )
    archive_days: Int = setting(
        90,
        "Received webhook archive files older than this, once ingested, are removed (0 "
        "keeps them all). Unset, run.archive_retention_days (its older name) is read.",
        ge=0,
    )
    manifest_dir: PathOrNone = setting(
        "data/retention",
        "Folder of the retention manifests: RUN_ID.json per run, listing per workspace and "
        "store what the run removed.",
    )


class NotifySettings(Section):
    """Notification channels (the run's failure and warning alert; monitors later): a signed
    webhook, a Slack-compatible webhook and email, besides run.alert_webhook_url and
    run.alert_command; retries and the delivery log (D-NOTIFY-CHANNELS)."""

    webhook_url: SecretText = setting(
        None,
        "URL that gets each notification as a signed JSON POST (https://; plain http only to "
        "loopback). Secret (such URLs often carry a token): environment or file only.",
    )
    webhook_url_file: PathOrNone = setting(
        None, "File whose content (trailing whitespace stripped) is notify.webhook_url."
    )
    signing_secret: SecretText = setting(
        None,
        "Key of the HMAC-SHA256 signature in the X-Convo-Signature header (required with "
        "notify.webhook_url; also signs run.alert_webhook_url's POST when set). Secret: "
        "environment or file only.",
    )
    signing_secret_file: PathOrNone = setting(
        None, "File whose content (trailing whitespace stripped) is notify.signing_secret."
    )
    slack_webhook_url: SecretText = setting(
        None,
        "Slack-compatible incoming-webhook URL (https://; plain http only to loopback) that "
        "gets each notification as {text, blocks}. Secret (the URL is the credential): "
        "environment or file only.",
    )
    slack_webhook_url_file: PathOrNone = setting(
        None, "File whose content (trailing whitespace stripped) is notify.slack_webhook_url."
    )
    smtp_host: Str = setting("", "SMTP server that sends notifications by email (empty: no email).")
    smtp_port: Int = setting(
        0, "SMTP port (0: 587 with starttls, 465 with ssl, 25 with none).", ge=0, le=65535
    )
    smtp_tls: Str = setting(
        "starttls",
        "How the SMTP connection is encrypted: starttls, ssl (SMTPS) or none (only to a "
        "loopback host).",
        pattern=r"starttls|ssl|none",
        pattern_help="starttls, ssl or none",
    )
    smtp_user: Str = setting("", "SMTP login name (empty: no login).")
    smtp_password: SecretText = setting(
        None, "SMTP password (with notify.smtp_user). Secret: environment or file only."
    )
    smtp_password_file: PathOrNone = setting(
        None, "File whose content (trailing whitespace stripped) is notify.smtp_password."
    )
    email_from: Str = setting("", "The From address of notification emails.")
    email_to: List = setting((), "Addresses notification emails go to.")
    max_attempts: Int = setting(
        4, "Attempts per delivery and run (the next run tries again).", ge=1, le=20
    )
    backoff_seconds: Float = setting(
        2.0,
        "Wait after a delivery's first failed attempt; each next wait is four times longer, "
        "each drawn between half and all of it (jitter).",
        ge=0.0,
        le=3600.0,
    )
    max_seconds: Float = setting(
        60.0,
        "Time a delivery's attempts and waits may take in one run; then it waits for the next run.",
        ge=0.1,
        le=3600.0,
    )
    timeout_seconds: Float = setting(
        10.0, "Time one attempt may take (an HTTP answer, an SMTP exchange).", ge=0.1, le=600.0
    )
    give_up_days: Float = setting(
        7.0,
        "A delivery still undelivered this many days after it was recorded is abandoned.",
        ge=0.01,
        le=365.0,
    )
    delivery_log: PathOrNone = setting(
        "data/app-state/deliveries.jsonl",
        "The delivery log: each notification, and every attempt to deliver it (JSON lines, "
        "append-only, with lock files beside it; never a secret).",
    )


class MonitoringSettings(Section):
    """Monitors (issue 28): where the dashboard keeps the ones it makes, how far back a new
    monitor judges, which alerts still go out, and where their links point. The monitors
    themselves are ``[[monitors]]`` tables (docs/configuration.md, "Monitors")."""

    enabled: Bool = setting(
        True, "Evaluate the monitors after every transform of `convo run` (the monitors step)."
    )
    store_file: PathOrNone = setting(
        "data/app-state/monitors.jsonl",
        "The app's own store of monitors made or edited in the dashboard (JSON lines, "
        "append-only, with a lock file beside it); the run reads it with [[monitors]].",
    )
    lookback_days: Int = setting(
        90,
        "A monitor's windows are judged back to this many days before today (a new or "
        "changed monitor's history, a run after days without one).",
        ge=1,
        le=3660,
    )
    notify_within_days: Int = setting(
        7,
        "An alert or resolve notice is sent only for a window that ended at most this many "
        "days ago (older ones, e.g. of a new monitor's history, are stored, not sent).",
        ge=0,
        le=3660,
    )
    dashboard_url: Str = setting(
        "http://127.0.0.1:8501",
        "The dashboard's address, for the links in alerts (the slice and day of a change).",
        pattern=r"https?://\S+",
        pattern_help="an http:// or https:// URL",
    )


class ReportingSettings(Section):
    """Scheduled reports (issue 29): whether ``convo run`` makes them, where their files go,
    where each report run is recorded, and what a delivery may carry. The reports themselves
    are ``[[reports]]`` tables (docs/configuration.md, "Reports"); ``[reports]`` cannot be
    this section's name, since TOML cannot have both a table and an array of tables."""

    enabled: Bool = setting(
        True, "Make the due [[reports]] after publishing in `convo run` (the reports step)."
    )
    out_dir: PathOrNone = setting(
        "data/reports",
        "Where reports are written: OUT_DIR/REPORT/WORKSPACE/PERIOD/ holds a report's HTML "
        "and a CSV per SQL cell.",
    )
    log: PathOrNone = setting(
        "data/app-state/reports.jsonl",
        "The record of every report run (JSON lines, append-only, with a lock file beside "
        "it): ok or failed, its period, files and failures; what makes a report due.",
    )
    attach_csvs: Bool = setting(
        True,
        "Attach each SQL cell's CSV beside the HTML (email, and the signed webhook's body) "
        "while the attachments stay within reporting.max_attachment_mb.",
    )
    max_attachment_mb: Float = setting(
        10.0,
        "The most a delivery's attachments may weigh together: the CSVs are left out first, "
        "then the HTML (the message then names the folder that holds them).",
        ge=0.0,
        le=100.0,
    )


class AuditSettings(Section):
    """The audit trail (issue 30; D-AUDIT-TRAIL): who read or exported what, in an
    append-only log whose records each carry the hash of the one before."""

    enabled: Bool = setting(
        True,
        "Record every export, `convo serve` request (and the dashboard's Explore queries and "
        "downloads) in the audit log; an action whose record cannot be written fails.",
    )
    file: PathOrNone = setting(
        "data/audit/audit.jsonl",
        "The audit log (JSON lines, append-only, hash-chained; beside it: .lock, .heads, the "
        "chain heads recorded by runs and `convo audit head`, and .key, the key people's "
        "identifiers are hashed with).",
    )
    forwarded_user_header: Str = setting(
        "",
        "Behind a proxy that authenticates users: the request header naming the user (e.g. "
        "X-Forwarded-User), recorded as who. Empty: no header is trusted. Set it only when "
        "the proxy is the one way in and sets the header itself.",
        pattern=r"[A-Za-z0-9_-]*",
        pattern_help="an HTTP header name such as X-Forwarded-User, or empty",
    )
