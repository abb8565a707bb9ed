"""Real receivers for notifications: a webhook receiver (an ASGI app for ServerThread) that
verifies the interface's signature and counts idempotency keys, an SMTP server (aiosmtpd)
that keeps what it is sent, and a throwaway certificate authority for TLS to 127.0.0.1."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import ssl
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from process_support import free_port

SIGNING = "whsec_notify_tests_5f1c2b9e"


class Receiver:
    """Answers each POST with the next status of ``answers`` (then 200); keeps every request
    (headers lower-cased, the raw body, whether ``X-Convo-Signature`` verified) and counts
    the idempotency keys it acknowledged with a 2xx: what a receiver that dedupes sees."""

    def __init__(self, secret: str | None = SIGNING, answers: Iterable[int] = ()) -> None:
        self.secret = secret
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []
        self.keys: Counter[str] = Counter()

    def signature(self, body: bytes) -> str:
        assert self.secret is not None
        return "sha256=" + hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        status = self.answers.pop(0) if self.answers else 200
        verified = self.secret is None or hmac.compare_digest(
            headers.get("x-convo-signature", ""), self.signature(body)
        )
        self.requests.append({"path": scope["path"], "headers": headers, "body": body,
                              "status": status, "verified": verified})  # fmt: skip
        if 200 <= status < 300 and verified:
            self.keys[headers.get("idempotency-key", "")] += 1
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain")]})  # fmt: skip
        await send({"type": "http.response.body", "body": b"ok" if status < 300 else b"no"})


@dataclass
class Mailbox:
    """An aiosmtpd handler: every message accepted, with its envelope and whether it came
    over TLS; ``refuse``: the RCPT answer instead of accepting (e.g. ``550 no such user``)."""

    refuse: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)

    async def handle_RCPT(  # aiosmtpd's hook names
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        if self.refuse:
            return self.refuse
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append({"mail_from": envelope.mail_from, "rcpt_tos": list(envelope.rcpt_tos),
                              "content": envelope.content,
                              "tls": server.transport.get_extra_info("ssl_object") is not None,
                              "login": session.auth_data})  # fmt: skip
        return "250 OK"


def password_checker(user: str, password: str) -> Any:
    def check(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        ok = isinstance(data, LoginPassword) and (data.login, data.password) == (
            user.encode(),
            password.encode(),
        )
        return AuthResult(success=ok, handled=False, auth_data=user if ok else None)

    return check


@contextmanager
def smtp_server(mailbox: Mailbox, **options: Any) -> Iterator[int]:
    """An SMTP server on a free 127.0.0.1 port (its port), with aiosmtpd's ``options``."""
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port(), **options)
    controller.start()
    try:
        yield int(controller.port)
    finally:
        controller.stop()


def certificate_authority(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A throwaway CA (its PEM, for SSL_CERT_FILE) and a server context whose certificate it
    signed for 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "convo notify test CA")])
    usage = {k: False for k in ("content_commitment", "key_encipherment", "data_encipherment",
                                "key_agreement", "encipher_only", "decipher_only")}  # fmt: skip
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, **usage),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = folder / "ca.pem"
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (folder / "server.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (folder / "server.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(folder / "server.pem", folder / "server.key")
    return ca_pem, context
