"""``convo sandbox serve`` and ``convo sandbox archive`` as a user runs them."""

from __future__ import annotations

import gzip
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from convo_analytics.webhooks import parse_archive_line, strip_signature, verify
from process_support import OutputWatcher

CLI = [sys.executable, "-m", "convo_analytics.cli"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    env.update(extra)
    return env


def test_serve_starts_prints_how_to_try_it_and_answers(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    proc = subprocess.Popen(
        [
            *CLI,
            "sandbox",
            "serve",
            "--port",
            "0",
            "--conversations",
            "300",
            "--days",
            "5",
            "--key-file",
            str(keys),
            "--rate-limit",
            "100/min",
        ],
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    watch = OutputWatcher(proc.stdout, "convo sandbox serve")
    try:
        url = watch.wait_for(r"listening on (http://127\.0\.0\.1:\d+)").group(1)
        watch.wait_for(r"curl .*/v1/analytics/summary")  # the last start-up line
        text = watch.text
        key = re.search(r"API key: (sk_sandbox_\w+)", text)
        assert key, "with no --workspace the generated demo key is printed"
        assert f"curl -H 'Authorization: Bearer {key.group(1)}' '{url}/v1/conversations" in text
        assert "300 conversations" in text
        data = orjson.loads(keys.read_bytes())
        assert data["workspaces"][0]["apiKey"] == key.group(1)
        assert oct(keys.stat().st_mode & 0o777) == "0o600"
        r = httpx.get(
            f"{url}/v1/conversations",
            params={"limit": 2},
            headers={"Authorization": f"Bearer {key.group(1)}"},
        )
        assert r.status_code == 200 and len(r.json()["data"]) == 2
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


def _dollar_in_single_quotes(line: str) -> bool:
    """Whether a shell line has a ``$`` inside single quotes (where it does not expand)."""
    quote = None
    for ch in line:
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote == ch else ch
        elif ch == "$" and quote == "'":
            return True
    return False


@pytest.mark.parametrize(
    ("flags", "env"),
    [
        (("--key-file", "keys.json"), {}),  # the key read from the key file
        (("--key-file", ""), {"CONVO_API_KEY": "sk_test_given_0001"}),  # no key file
    ],
    ids=["key file", "no key file"],
)
def test_the_lines_to_try_run_as_printed_with_keys_given(
    tmp_path: Path, flags: tuple[str, ...], env: dict[str, str]
) -> None:
    """With --workspace NAME:KEY the keys are not printed; each line under "try it" runs
    in bash as printed (a variable in double quotes, never in single ones, where it
    would not expand), in a new shell with only what the line says to set."""
    proc = subprocess.Popen(
        [*CLI, "sandbox", "serve", "--port", "0", "--conversations", "5", "--days", "2",
         "--workspace", "acme:sk_test_given_0001", *flags],
        cwd=tmp_path, env=_env(tmp_path), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    watch = OutputWatcher(proc.stdout, "convo sandbox serve")
    try:
        watch.wait_for(r"curl .*/v1/analytics/summary")
        text = watch.text
        assert "sk_test_given_0001" not in text, "a key given is not printed"
        commands = re.findall(r"^  (\S.*)$", text, re.M)
        assert len(commands) == 3 - bool(env), text
        assert not any(map(_dollar_in_single_quotes, commands)), commands
        *setup, conversations, summary = commands
        for curl in (conversations, summary):
            done = subprocess.run(
                ["bash", "-c", "\n".join([*setup, curl])], cwd=tmp_path, capture_output=True,
                text=True, env={"PATH": os.environ["PATH"], **env}, timeout=60,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert '"workspaceId":"ws_acme"' in done.stdout, done.stdout[:300]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


def test_a_second_sandbox_writes_its_own_key_file(tmp_path: Path) -> None:
    """Two sandboxes with the default key file (the README's `--port 9787` next to another):
    each writes the file of its port, so neither overwrites the other's keys."""
    procs, watches = [], []
    try:
        for _ in range(2):
            proc = subprocess.Popen(
                [*CLI, "sandbox", "serve", "--port", "0", "--conversations", "20", "--days", "2"],
                cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip
            procs.append(proc)
            watches.append(OutputWatcher(proc.stdout, "convo sandbox serve"))
        files, keys = [], []
        for watch in watches:
            port = watch.wait_for(r"listening on http://127\.0\.0\.1:(\d+)").group(1)
            path = watch.wait_for(r"keys and the admin token: (\S+)").group(1)
            assert path == f"data/sandbox/keys-{port}.json", watch.text
            key = re.search(r"API key: (sk_sandbox_\w+)", watch.text)
            assert key, watch.text
            files.append(tmp_path / path)
            keys.append(key.group(1))
        assert files[0] != files[1]
        for path, key in zip(files, keys, strict=True):
            assert orjson.loads(path.read_bytes())["workspaces"][0]["apiKey"] == key
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            proc.wait(timeout=20)


def test_serve_refuses_a_busy_port_with_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = subprocess.run(
            [*CLI, "sandbox", "serve", "--port", str(port), "--conversations", "1"],
            cwd=tmp_path,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert r.returncode == 2
    lines = [x for x in (r.stdout + r.stderr).splitlines() if x.strip()]
    assert len(lines) == 1 and "choose another --port" in lines[0]
    assert "Traceback" not in r.stderr


def test_archive_writes_signed_deliveries_and_never_prints_the_secret(tmp_path: Path) -> None:
    secret = "whsec_cli_archive_secret_value"
    out = tmp_path / "history.jsonl.gz"
    r = subprocess.run(
        [
            *CLI,
            "sandbox",
            "archive",
            "--out",
            str(out),
            "--conversations",
            "50",
            "--days",
            "3",
            "--until",
            "2026-11-18T00:00:00Z",
            "--workspace",
            "acme:sk_test_123456",
        ],
        cwd=tmp_path,
        env=_env(tmp_path, CONVO_WEBHOOK_SECRET=secret),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert secret not in r.stdout + r.stderr
    lines = gzip.decompress(out.read_bytes()).splitlines()
    assert len(lines) > 50
    for line in lines:
        body, headers, _ = parse_archive_line(line)
        signed = strip_signature(body)
        assert signed is not None and verify(secret, signed, headers["x-convo-signature"])
    missing = subprocess.run(
        [*CLI, "sandbox", "archive", "--out", str(out)],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "CONVO_WEBHOOK_SECRET" in missing.stderr
