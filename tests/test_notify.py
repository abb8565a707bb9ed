"""Notifications (issue 28, first slice): the channels and their delivery, against real
servers on 127.0.0.1: a webhook receiver that verifies the interface's signature and counts
idempotency keys, and an SMTP server (aiosmtpd), plain to loopback and over STARTTLS/SMTPS.

Retry waits are set to a hundredth of a second; nothing here measures time.
"""

from __future__ import annotations

import email
import email.policy
import logging
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from convo_analytics._serving import ServerThread
from convo_analytics.config import load_settings
from convo_analytics.errors import UserError
from convo_analytics.notify import (
    Notification,
    NotifyConfig,
    deliver_pending,
    mrkdwn,
    notify_config,
    read_deliveries,
    send,
)
from convo_analytics.webhooks import verify
from notify_support import (
    SIGNING,
    Mailbox,
    Receiver,
    certificate_authority,
    password_checker,
    smtp_server,
)
from process_support import OutputWatcher, free_port

FAST = {"CONVO_NOTIFY_BACKOFF_SECONDS": "0.01", "CONVO_NOTIFY_MAX_ATTEMPTS": "3",
        "CONVO_NOTIFY_TIMEOUT_SECONDS": "5"}  # fmt: skip
HOSTILE = (
    "<!channel> <!here|here> @here @channel @everyone <@U024BE7LH> <https://evil.example|click> "
    "<script>alert(1)</script> & &amp; \"quoted\" 'single'"
)


def _config(tmp_path: Path, **env: str) -> NotifyConfig:
    environ = {"CONVO_NOTIFY_DELIVERY_LOG": str(tmp_path / "deliveries.jsonl"), **FAST, **env}
    return notify_config(load_settings(None, {}, environ, cwd=tmp_path))


def _notification(subject_id: str = "run-1", text: str = "extract failed: 401") -> Notification:
    return Notification.create(
        source="test", subject_id=subject_id, kind="run.failed",
        subject=f"convo run {subject_id} failed", text=text,
        fields={"runId": subject_id, "failedStep": "extract"},
    )  # fmt: skip


def _log_lines(tmp_path: Path) -> list[dict[str, Any]]:
    return [
        orjson.loads(line) for line in (tmp_path / "deliveries.jsonl").read_bytes().splitlines()
    ]


def _attempts(tmp_path: Path) -> list[tuple[int, str, int | None]]:
    return [(r["attempt"], r["status"], r["code"]) for r in _log_lines(tmp_path)
            if r["type"] == "attempt"]  # fmt: skip


# -- the signed webhook ------------------------------------------------------------------


def test_the_webhook_is_signed_as_the_interface_signs_its_events(tmp_path: Path) -> None:
    receiver = Receiver()
    with ServerThread(receiver) as server:
        config = _config(tmp_path, CONVO_NOTIFY_WEBHOOK_URL=f"{server.url}/hooks/convo",
                         CONVO_NOTIFY_SIGNING_SECRET=SIGNING)  # fmt: skip
        n = _notification()
        summary = send(config, n)
    assert summary.delivered == 1 and summary.pending == 0
    (request,) = receiver.requests
    body, headers = request["body"], request["headers"]
    assert request["verified"]  # HMAC-SHA256 of the raw body, keyed with the signing secret
    assert re.fullmatch(r"sha256=[0-9a-f]{64}", headers["x-convo-signature"])
    assert verify(SIGNING, body, headers["x-convo-signature"])  # the ingest's own check
    assert not verify("another secret", body, headers["x-convo-signature"])
    assert headers["idempotency-key"] == n.key and re.fullmatch(r"ntf_[0-9a-f]{32}", n.key)
    assert headers["x-convo-timestamp"] == n.created_at
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", n.created_at)
    assert headers["x-convo-event"] == "run.failed" and headers["x-convo-attempt"] == "1"
    assert headers["content-type"] == "application/json"
    assert re.fullmatch(r"dlv_[0-9a-f]{16}", headers["x-convo-delivery"])
    doc = orjson.loads(body)
    assert doc == {"event": "run.failed", "timestamp": n.created_at, "idempotencyKey": n.key,
                   "source": "test", "subject": "convo run run-1 failed",
                   "text": "extract failed: 401",
                   "data": {"runId": "run-1", "failedStep": "extract"}}  # fmt: skip
    # the key is the fact's: the same source, subject and kind give it again
    assert _notification().key == n.key
    assert _notification("run-2").key != n.key
    assert Notification.create(source="test", subject_id="run-1", kind="run.warning",
                               subject="s", text="t").key != n.key  # fmt: skip


def test_a_500_then_a_200_is_retried_with_the_same_bytes_and_delivered_once(
    tmp_path: Path,
) -> None:
    receiver = Receiver(answers=[500])
    with ServerThread(receiver) as server:
        config = _config(tmp_path, CONVO_NOTIFY_WEBHOOK_URL=f"{server.url}/h",
                         CONVO_NOTIFY_SIGNING_SECRET=SIGNING)  # fmt: skip
        n = _notification()
        summary = send(config, n)
        assert summary.delivered == 1
        again = send(config, n)  # the same fact once more: never sent again
        later = deliver_pending(config)
    assert again.delivered == later.delivered == 0
    assert [r["status"] for r in receiver.requests] == [500, 200]
    first, second = receiver.requests
    assert first["body"] == second["body"]
    assert first["headers"]["x-convo-signature"] == second["headers"]["x-convo-signature"]
    assert [r["headers"]["x-convo-attempt"] for r in receiver.requests] == ["1", "2"]
    assert receiver.keys == {n.key: 1}
    assert _attempts(tmp_path) == [(1, "retrying", 500), (2, "delivered", 200)]


@pytest.mark.parametrize(
    ("answer", "requests", "status"),
    [(400, 1, "failed"), (404, 1, "failed"), (408, 2, "delivered"), (429, 2, "delivered"),
     (503, 2, "delivered"), (302, 2, "delivered")],
)  # fmt: skip
def test_a_4xx_is_permanent_but_408_429_and_others_are_retried(
    tmp_path: Path, answer: int, requests: int, status: str
) -> None:
    receiver = Receiver(answers=[answer])
    with ServerThread(receiver) as server:
        config = _config(tmp_path, CONVO_NOTIFY_WEBHOOK_URL=f"{server.url}/h",
                         CONVO_NOTIFY_SIGNING_SECRET=SIGNING)  # fmt: skip
        send(config, _notification())
        deliver_pending(config)  # a permanent failure is not tried again next time either
    assert len(receiver.requests) == requests
    (delivery,) = read_deliveries(tmp_path / "deliveries.jsonl")
    assert delivery.status == status and delivery.attempts == requests
    if status == "failed":
        assert delivery.error == f"the receiver answered {answer}" and delivery.code == answer


def test_a_dead_port_stays_pending_until_the_next_call_delivers_it_once(tmp_path: Path) -> None:
    port = free_port()
    config = _config(tmp_path, CONVO_NOTIFY_WEBHOOK_URL=f"http://127.0.0.1:{port}/h",
                     CONVO_NOTIFY_SIGNING_SECRET=SIGNING)  # fmt: skip
    n = _notification()
    first = send(config, n)
    assert (first.delivered, first.pending) == (0, 1)
    (undelivered,) = first.undelivered
    assert undelivered["status"] == "pending" and undelivered["attempts"] == 3
    assert undelivered["error"].startswith("could not connect")
    receiver = Receiver()
    with ServerThread(receiver, port=port):
        second = deliver_pending(config)
        third = deliver_pending(config)
    assert (second.delivered, second.pending, third.delivered) == (1, 0, 0)
    (request,) = receiver.requests
    assert request["headers"]["idempotency-key"] == n.key
    assert request["headers"]["x-convo-attempt"] == "4"  # counted across calls
    assert receiver.keys == {n.key: 1}


_SEND = """
from convo_analytics.config import load_settings
from convo_analytics.notify import Notification, notify_config, send

config = notify_config(load_settings(None, {}))
n = Notification.create(source="test", subject_id="run-7", kind="run.failed",
                        subject="convo run run-7 failed", text="transform failed")
summary = send(config, n)
print(n.key, summary.delivered, summary.pending, flush=True)
"""


def test_a_kill_between_recording_and_delivering_delivers_on_the_rerun_once(
    tmp_path: Path,
) -> None:
    receiver = Receiver()
    with ServerThread(receiver) as server:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **FAST,
               "CONVO_NOTIFY_DELIVERY_LOG": str(tmp_path / "deliveries.jsonl"),
               "CONVO_NOTIFY_WEBHOOK_URL": f"{server.url}/h",
               "CONVO_NOTIFY_SIGNING_SECRET": SIGNING}  # fmt: skip
        argv = [sys.executable, "-c", _SEND]
        held = subprocess.Popen(argv, env={**env, "CONVO_NOTIFY_HOLD": "recorded"},
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)  # fmt: skip
        try:
            OutputWatcher(held.stderr, "the held send").wait_for("notify holding")
        finally:
            held.send_signal(signal.SIGKILL)
            held.wait(timeout=30)
        assert held.returncode == -signal.SIGKILL
        assert receiver.requests == []  # recorded, not delivered
        (recorded,) = _log_lines(tmp_path)
        assert recorded["type"] == "notification" and recorded["channels"] == ["webhook"]
        runs = [subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True,
                               timeout=60, check=True) for _ in range(2)]  # fmt: skip
    key = recorded["key"]
    assert [r.stdout.split() for r in runs] == [[key, "1", "0"], [key, "0", "0"]]
    (request,) = receiver.requests
    assert request["headers"]["idempotency-key"] == key and request["verified"]
    assert receiver.keys == {key: 1}


# -- Slack ---------------------------------------------------------------------------------


def test_the_slack_body_escapes_hostile_user_text(tmp_path: Path) -> None:
    receiver = Receiver(secret=None)
    with ServerThread(receiver) as server:
        config = _config(tmp_path, CONVO_NOTIFY_SLACK_WEBHOOK_URL=f"{server.url}/services/T/B/X")
        n = Notification.create(source="test", subject_id="r", kind="run.failed",
                                subject=f"run failed {HOSTILE}", text=f"error: {HOSTILE}",
                                fields={"error": HOSTILE, "warnings": [HOSTILE]})  # fmt: skip
        assert send(config, n).delivered == 1
    (request,) = receiver.requests
    doc = orjson.loads(request["body"])
    assert set(doc) == {"text", "blocks"} and doc["text"].startswith("run failed ")
    texts = [doc["text"], *_block_texts(doc["blocks"])]
    assert len(texts) >= 4
    for text in texts:
        assert "<" not in text and ">" not in text  # no link, mention or tag survives
        assert not re.search(r"@(channel|here|everyone)", text, re.IGNORECASE)
        assert re.search(r"&(?!amp;|lt;|gt;)", text) is None  # every & an entity
    body = request["body"].decode()
    assert "&lt;!channel&gt;" in body and "&lt;script&gt;" in body and "&amp;amp;" in body
    assert request["headers"]["idempotency-key"] == n.key


def _block_texts(blocks: list[dict[str, Any]]) -> list[str]:
    out = []
    for block in blocks:
        if "text" in block:
            out.append(block["text"]["text"])
        out += [f["text"] for f in block.get("fields", [])]
        out += [e["text"] for e in block.get("elements", [])]
    return out


def test_mrkdwn_cuts_long_text_outside_an_entity() -> None:
    for filler in range(5):
        text = "x" * filler + "&" * 2000
        cut = mrkdwn(text, 101)
        assert len(cut) <= 101 and cut.endswith("…")
        assert re.fullmatch(r"x*(&amp;)*…", cut), cut


# -- email -----------------------------------------------------------------------------


def _smtp_env(port: int, **extra: str) -> dict[str, str]:
    return {"CONVO_NOTIFY_SMTP_HOST": "127.0.0.1", "CONVO_NOTIFY_SMTP_PORT": str(port),
            "CONVO_NOTIFY_EMAIL_FROM": "Convo alerts <alerts@example.com>",
            "CONVO_NOTIFY_EMAIL_TO": "oncall@example.com, team@example.com",
            **extra}  # fmt: skip


def test_email_escapes_user_text_and_cannot_be_given_headers(tmp_path: Path) -> None:
    mailbox = Mailbox()
    with smtp_server(mailbox, authenticator=password_checker("alerts", "pw-0123456789"),
                     auth_require_tls=False) as port:  # fmt: skip
        config = _config(tmp_path, **_smtp_env(port, CONVO_NOTIFY_SMTP_TLS="none",
                         CONVO_NOTIFY_SMTP_USER="alerts",
                         CONVO_NOTIFY_SMTP_PASSWORD="pw-0123456789"))  # fmt: skip
        n = Notification.create(
            source="test", subject_id="r", kind="run.failed",
            subject="Run failed\r\nBcc: victim@evil.example\r\n\r\n<b>injected</b>",
            text=f"error: {HOSTILE}\r\n.\r\nRCPT TO:<victim@evil.example>",
            fields={"error": "<script>x</script>"},
        )  # fmt: skip
        assert send(config, n).delivered == 1
    (got,) = mailbox.messages
    assert got["rcpt_tos"] == ["oncall@example.com", "team@example.com"]
    assert got["mail_from"] == "alerts@example.com" and got["login"] == "alerts"
    msg = email.message_from_bytes(got["content"], policy=email.policy.default)
    assert msg["Bcc"] is None and "victim" not in (msg["To"] or "")
    assert msg["Subject"] == "Run failed Bcc: victim@evil.example <b>injected</b>"
    assert msg["Message-ID"] == f"<{n.key}@convo-analytics.notify>"
    assert msg["X-Convo-Idempotency-Key"] == n.key
    plain = msg.get_body(("plain",))
    html = msg.get_body(("html",))
    assert plain is not None and html is not None
    plain_text, html_text = plain.get_content(), html.get_content()
    assert "<script>alert(1)</script>" in plain_text  # plain text is never interpreted
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html_text
    assert "&lt;script&gt;x&lt;/script&gt;" in html_text
    assert "<script" not in html_text and "<b>" not in html_text and "<!channel>" not in html_text


def test_email_over_starttls_and_smtps_and_never_a_downgrade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, context = certificate_authority(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # the client trusts the throwaway CA
    mailbox = Mailbox()
    checker = password_checker("alerts", "pw-starttls-42")
    with smtp_server(mailbox, tls_context=context, require_starttls=True,
                     authenticator=checker) as port:  # fmt: skip
        config = _config(tmp_path / "a", **_smtp_env(port, CONVO_NOTIFY_SMTP_USER="alerts",
                         CONVO_NOTIFY_SMTP_PASSWORD="pw-starttls-42"))  # fmt: skip
        assert send(config, _notification("tls-1")).delivered == 1
    # SMTPS: aiosmtpd offers AUTH only after its own STARTTLS unless told the line is TLS
    with smtp_server(mailbox, ssl_context=context, authenticator=checker,
                     auth_require_tls=False) as port:  # fmt: skip
        config = _config(tmp_path / "b", **_smtp_env(port, CONVO_NOTIFY_SMTP_TLS="ssl",
                         CONVO_NOTIFY_SMTP_USER="alerts",
                         CONVO_NOTIFY_SMTP_PASSWORD="pw-starttls-42"))  # fmt: skip
        assert send(config, _notification("tls-2")).delivered == 1
    assert [m["tls"] for m in mailbox.messages] == [True, True]
    with smtp_server(mailbox) as port:  # no STARTTLS offered: nothing sent in the clear
        config = _config(tmp_path / "c", **_smtp_env(port))
        summary = send(config, _notification("tls-3"))
    assert (summary.delivered, summary.pending) == (0, 1)
    assert "STARTTLS" in summary.undelivered[0]["error"]
    assert len(mailbox.messages) == 2


def test_a_refused_recipient_is_permanent(tmp_path: Path) -> None:
    with smtp_server(Mailbox(refuse="550 5.1.1 no such user")) as port:
        config = _config(tmp_path, **_smtp_env(port, CONVO_NOTIFY_SMTP_TLS="none"))
        summary = send(config, _notification())
    assert (summary.failed, summary.pending) == (1, 0)
    assert summary.undelivered[0]["error"] == "the SMTP server refused every recipient (550)"


# -- the command -----------------------------------------------------------------------


def test_the_command_gets_the_body_and_key_and_a_failure_is_retried_next_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVO_NOTIFY_SMTP_PASSWORD", "pw-never-in-a-command")
    marker, out = tmp_path / "failed-once", tmp_path / "out"
    command = (f"test -f {marker} || {{ touch {marker}; exit 3; }}; cat > {out}.json; "
               f"env > {out}.env")  # fmt: skip
    config = _config(tmp_path, CONVO_RUN_ALERT_COMMAND=command, CONVO_NOTIFY_MAX_ATTEMPTS="1")
    n = _notification()
    first = send(config, n)
    assert (first.delivered, first.pending) == (0, 1)
    assert first.undelivered[0]["error"] == "the command exited 3"
    assert deliver_pending(config).delivered == 1
    body = orjson.loads((tmp_path / "out.json").read_bytes())
    assert body["idempotencyKey"] == n.key and body["runId"] == "run-1"
    env = (tmp_path / "out.env").read_text()
    assert f"CONVO_NOTIFY_KEY={n.key}" in env and "CONVO_NOTIFY_ATTEMPT=2" in env
    assert "pw-never-in-a-command" not in env


# -- secrets and TLS rules -------------------------------------------------------------


def test_secrets_never_reach_the_delivery_log_errors_or_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dead = free_port()
    secrets = {"path": "tok_WEBHOOK_PATH_SECRET_91", "slack": "SLACK_PATH_SECRET_77",
               "signing": "whsec_SIGNING_SECRET_5521",
               "password": "pw-SMTP-SECRET-3310"}  # fmt: skip
    (tmp_path / "signing").write_text(secrets["signing"] + "\n")
    caplog.set_level(logging.INFO)
    with smtp_server(Mailbox(), authenticator=password_checker("alerts", "right-password"),
                     auth_require_tls=False) as port:  # fmt: skip
        config = _config(
            tmp_path,
            CONVO_NOTIFY_WEBHOOK_URL=f"http://127.0.0.1:{dead}/hook/{secrets['path']}",
            CONVO_NOTIFY_SIGNING_SECRET_FILE=str(tmp_path / "signing"),
            CONVO_NOTIFY_SLACK_WEBHOOK_URL=f"http://127.0.0.1:{dead}/services/{secrets['slack']}",
            CONVO_RUN_ALERT_WEBHOOK_URL=f"http://localhost:{dead}/alert/{secrets['path']}",
            **_smtp_env(port, CONVO_NOTIFY_SMTP_TLS="none", CONVO_NOTIFY_SMTP_USER="alerts",
                        CONVO_NOTIFY_SMTP_PASSWORD=secrets["password"]),
        )  # fmt: skip
        summary = send(config, _notification())
    assert summary.delivered == 0 and summary.pending == 3 and summary.failed == 1
    errors = {u["channel"]: u["error"] for u in summary.undelivered}
    assert errors["email"].startswith("the SMTP server answered 535: authentication failed")
    assert errors["webhook"].startswith("could not connect")
    shown = [(tmp_path / "deliveries.jsonl").read_text(), orjson.dumps(summary.as_json()).decode(),
             caplog.text, repr(config)]  # fmt: skip
    for text in shown:
        for secret in secrets.values():
            assert secret not in text


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"CONVO_NOTIFY_WEBHOOK_URL": "http://hooks.example.com/t/SECRETPATH",
          "CONVO_NOTIFY_SIGNING_SECRET": SIGNING}, "plain http"),
        ({"CONVO_NOTIFY_SLACK_WEBHOOK_URL": "http://hooks.slack.example/services/SECRETPATH"},
         "plain http"),
        ({"CONVO_RUN_ALERT_WEBHOOK_URL": "http://alerts.example.com/SECRETPATH"}, "plain http"),
        ({"CONVO_RUN_ALERT_WEBHOOK_URL": "alerts.example.com/SECRETPATH"}, "no scheme"),
        ({"CONVO_NOTIFY_WEBHOOK_URL": "https://user:SECRETPATH@hooks.example.com/",
          "CONVO_NOTIFY_SIGNING_SECRET": SIGNING}, "user info"),
        ({"CONVO_NOTIFY_WEBHOOK_URL": "https://hooks.example.com/SECRETPATH"},
         "notify.signing_secret is not"),
        ({"CONVO_NOTIFY_SMTP_HOST": "mail.example.com", "CONVO_NOTIFY_SMTP_TLS": "none",
          "CONVO_NOTIFY_EMAIL_FROM": "a@example.com", "CONVO_NOTIFY_EMAIL_TO": "b@example.com"},
         'notify.smtp_tls = "none" would send mail'),
        ({"CONVO_NOTIFY_SMTP_HOST": "mail.example.com", "CONVO_NOTIFY_EMAIL_TO": "b@example.com"},
         "notify.email_from is not set"),
        ({"CONVO_NOTIFY_SMTP_HOST": "mail.example.com", "CONVO_NOTIFY_EMAIL_FROM": "a@example.com",
          "CONVO_NOTIFY_EMAIL_TO": "b@example.com", "CONVO_NOTIFY_SMTP_USER": "u"},
         "notify.smtp_password is not"),
        ({"CONVO_NOTIFY_EMAIL_TO": "b@example.com"}, "notify.smtp_host is not"),
    ],
)  # fmt: skip
def test_unsafe_or_incomplete_channel_settings_are_refused(
    tmp_path: Path, env: dict[str, str], says: str
) -> None:
    with pytest.raises(UserError) as refused:
        _config(tmp_path, **env)
    assert says in str(refused.value)
    assert "SECRETPATH" not in str(refused.value)


@pytest.mark.parametrize(
    "url", ["https://hooks.example.com/x", "http://127.0.0.1:9/x", "http://localhost:9/x",
            "http://[::1]:9/x"],
)  # fmt: skip
def test_https_or_loopback_urls_are_accepted(tmp_path: Path, url: str) -> None:
    config = _config(tmp_path, CONVO_NOTIFY_WEBHOOK_URL=url, CONVO_NOTIFY_SIGNING_SECRET=SIGNING,
                     CONVO_NOTIFY_SLACK_WEBHOOK_URL=url)  # fmt: skip
    assert [c.name for c in config.channels] == ["webhook", "slack"]
    assert not (tmp_path / "deliveries.jsonl").exists()  # nothing written until a send
    assert os.listdir(tmp_path) == []
