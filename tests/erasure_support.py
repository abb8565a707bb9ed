"""What the erasure and access-request tests (test_erasure, test_erasure_lake,
test_export_person) share: the person's environment and config, `convo` as a user's process
runs it, people injected into a sandbox, and the setup of their template data folders.

The tests' own commands run in `convo` processes (a user's process: what is checked is what
such a process leaves). The templates' setup commands (extract, ingest, transform, publish),
which only make the data folder the tests then copy, run in the test's process through
:func:`lake_support.convo_here` (the same command code, the same environment and working
folder): a process start costs seconds of imports each, and nothing of the setup is checked
beyond its exit status.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ACME_KEY, GLOBEX_KEY, RunningSandbox
from lake_support import convo_here

__all__ = ["SECRET", "config_text", "convo", "env_of", "inject", "ok", "setup_command"]

#: acme's webhook secret (ACME_HOOKS of :func:`env_of`).
SECRET = "whsec_erasure_test_0123456789"


def env_of(folder: Path) -> dict[str, str]:
    """The environment of a `convo` run in ``folder`` (its convo.toml, its own audit log)."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(folder),
        "ACME_KEY": ACME_KEY,
        "GLOBEX_KEY": GLOBEX_KEY,
        "ACME_HOOKS": SECRET,
        "GLOBEX_HOOKS": "whsec_erasure_globex_98765",
        "CONVO_CONFIG": str(folder / "convo.toml"),
        "CONVO_AUDIT_FILE": str(folder / "data" / "audit" / "audit.jsonl"),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }


def convo(
    folder: Path, *args: str, timeout: float = 240, **env: str
) -> subprocess.CompletedProcess[str]:
    """`convo ARGS` as a user's process runs it, in ``folder`` (extra ``env`` on top)."""
    return subprocess.run(
        [sys.executable, "-m", "convo_analytics.cli", *args],
        cwd=folder, env={**env_of(folder), **env}, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def setup_command(folder: Path, *args: str) -> str:
    """A template's setup command (`convo ARGS` in ``folder``), run in this process; its
    stdout (it must succeed)."""
    return ok(convo_here(folder, env_of(folder), *args))


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def inject(
    running: RunningSandbox, user: str, texts: tuple[str, ...], key: str = ACME_KEY
) -> list[str]:
    """Two conversations of ``user`` in the sandbox, each with ``texts``: their ids."""
    ids = []
    with running.client(key) as client:
        for _ in range(2):
            created = client.post(
                "/v1/conversations", json={"externalUserId": user, "channel": "web", "metadata": {}}
            )
            assert created.status_code == 201, created.text
            conv = created.json()["id"]
            for text in texts:
                r = client.post(
                    f"/v1/conversations/{conv}/messages",
                    json={"text": text, "channel": "web", "locale": "en-US"},
                )
                assert r.status_code == 201, r.text
            ids.append(conv)
    return ids


def config_text(url: str, scrub: dict[str, str] | None = None, lake: bool = False) -> str:
    """The convo.toml of acme and globex at ``url`` (keys and webhook secrets from
    :func:`env_of`), the warehouse, published snapshots and privacy key under data/; with
    ``scrub``, each workspace's privacy_scrub; with ``lake``, a lake under data/lake."""
    workspaces = "".join(
        f'[[workspaces]]\nname = "{name}"\nbase_url = "{url}"\nrate_limit = "none"\n'
        f'auth = {{ type = "api_key", key_env = "{name.upper()}_KEY" }}\n'
        f'webhook_secrets_env = "{name.upper()}_HOOKS"\n'
        + (f'privacy_scrub = "{scrub[name]}"\n' if scrub else "")
        for name in ("acme", "globex")
    )
    text = (
        workspaces + '[warehouse]\npath = "data/warehouse.duckdb"\n'
        '[publish]\ndir = "data/published"\n'
        '[privacy]\ngenerated_key_file = "data/app-state/privacy.key"\n'
    )
    if lake:
        text += (
            '[lake]\ncatalog_uri = "sqlite:///data/lake/catalog.db"\n'
            'warehouse = "data/lake/warehouse"\n'
        )
    return text
