"""`convo sandbox serve --for-config FILE`: a sandbox serving a config's workspaces (issue 25).

A config of three workspaces on a free loopback port: alpha reads its API key from a
file, beta from a variable, gamma with the client credentials of its confidential
client (secret in a file). The sandbox, a real process, puts each secret where the
config reads it (never overwriting a file that has one), prints lines that run as
printed in bash, and `convo --config FILE extract` then reads every workspace
(decision D-SANDBOX-FOR-CONFIG).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

from extract_support import warehouse_rows
from process_support import OutputWatcher, free_port

ROOT = Path(__file__).resolve().parent.parent
BETA_KEY = "sk_test_beta_from_env_01"
PER_WORKSPACE = "SELECT workspace_id, count(*) FROM conversations GROUP BY 1 ORDER BY 1"

CONFIG = """
[service]
rate_limit = "none"

[warehouse]
path = "data/w.duckdb"

[sandbox]
conversations = 20
rate_limit = "none"
key_file = "data/sandbox-keys.json"

[[workspaces]]
name = "alpha"
base_url = "http://127.0.0.1:{port}"
auth = {{ type = "api_key", key_file = "secrets/alpha.key" }}

[[workspaces]]
name = "beta"
base_url = "http://127.0.0.1:{port}"
auth = {{ type = "api_key", key_env = "BETA_KEY" }}

[[workspaces]]
name = "gamma"
base_url = "http://127.0.0.1:{port}"
auth = {{ type = "oauth", client_id = "svc-gamma", client_secret_file = "secrets/gamma.secret", grant = "client_credentials" }}
"""  # noqa: E501


def _env(**extra: str) -> dict[str, str]:
    """A new shell's environment after `source .venv/bin/activate`: no CONVO_* of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    return {**env, **extra}


@contextmanager
def sandbox_for(folder: Path, config: str = "cfg/convo.toml") -> Iterator[OutputWatcher]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "convo_analytics.cli", "sandbox", "serve", "--for-config", config],
        cwd=folder, env=_env(BETA_KEY=BETA_KEY), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    watch = OutputWatcher(proc.stdout, "convo sandbox serve --for-config")
    try:
        watch.wait_for(r"curl .*/v1/analytics/summary")  # the last start-up line
        yield watch
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


def _bash(line: str, folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", line], cwd=folder, env=_env(**env),
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_the_sandbox_serves_a_configs_workspaces_where_it_reads_them(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "convo.toml").write_text(CONFIG.format(port=port))
    secrets = tmp_path / "cfg" / "secrets"
    with sandbox_for(tmp_path) as watch:
        text = watch.text
        assert f"listening on http://127.0.0.1:{port} " in text
        assert "alpha: API key written to cfg/secrets/alpha.key" in text
        assert "beta: API key from $BETA_KEY" in text
        assert (
            "gamma: OAuth client svc-gamma, client secret written to cfg/secrets/gamma.secret "
            "(client credentials: no login)" in text
        )
        assert BETA_KEY not in text, "a key from the environment is never printed"
        for name in ("alpha.key", "gamma.secret"):
            assert oct((secrets / name).stat().st_mode & 0o777) == "0o600", name
        alpha_key = (secrets / "alpha.key").read_text().strip()
        assert alpha_key not in text, "a key written to a file is not printed"
        commands = re.findall(r"^  (\S.*)$", text, re.M)
        assert commands[0] == "convo --config cfg/convo.toml extract"
        curl = commands[1]
        assert curl.startswith('curl -H "Authorization: Bearer $(cat cfg/secrets/alpha.key)" ')
        tried = _bash(curl, tmp_path)
        assert tried.returncode == 0 and orjson.loads(tried.stdout)["data"], tried.stderr
        assert all(r["workspaceId"] == "ws_alpha" for r in orjson.loads(tried.stdout)["data"])
        extract = _bash(commands[0] + " --json", tmp_path, BETA_KEY=BETA_KEY)
        assert extract.returncode == 0, extract.stderr
        assert orjson.loads(extract.stdout)["status"] == "ok"
    loaded = warehouse_rows(tmp_path / "cfg" / "data" / "w.duckdb", PER_WORKSPACE)
    assert loaded == [("ws_alpha", 20), ("ws_beta", 20), ("ws_gamma", 20)]

    with sandbox_for(tmp_path) as watch:  # a restart keeps the keys the files hold
        assert "alpha: API key in cfg/secrets/alpha.key (kept from before)" in watch.text
        assert (secrets / "alpha.key").read_text().strip() == alpha_key
        again = _bash("convo --config cfg/convo.toml extract --json", tmp_path, BETA_KEY=BETA_KEY)
        assert again.returncode == 0, again.stderr
        assert orjson.loads(again.stdout)["status"] == "ok"
