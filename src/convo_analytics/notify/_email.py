"""Email over SMTP with the standard library's smtplib.

The connection is encrypted: STARTTLS (``notify.smtp_tls = "starttls"``, the
default, port 587; refused when the server does not offer it, never a silent
downgrade) or SMTPS (``"ssl"``, port 465), the server's certificate checked
against the system's trust store and its name; ``"none"`` only to a loopback
host (a local relay), which the settings check enforces.

The message has a plain-text part, which is the notification's text as it is
(plain text is never interpreted), and an HTML alternative in which every
piece of user text is HTML-escaped. The subject is one line: carriage returns,
line feeds and every other control character become spaces, so no header can
be injected through it. ``Message-ID`` is made of the idempotency key (a mail
system that dedupes by it drops a repeat) and ``X-Convo-Idempotency-Key``
carries the key itself. A notification's attachments (a scheduled report's
HTML and CSVs) are read when the message is built and attached with their
names and types; its own ``recipients``, when it names any, replace
``notify.email_to``.

An SMTP 5xx answer is permanent; a 4xx, a dropped connection or a TLS failure
is retried. Errors carry the server's code and never the password.
"""

from __future__ import annotations

import html
import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import formatdate
from typing import Any

from convo_analytics.config import Secret
from convo_analytics.notify._channel import DeliveryError, attachment_bytes
from convo_analytics.notify._message import Notification, one_line

__all__ = ["TLS_MODES", "EmailChannel", "default_port", "email_message"]

TLS_MODES = ("starttls", "ssl", "none")
_PORTS = {"starttls": 587, "ssl": 465, "none": 25}
KEY_HEADER = "X-Convo-Idempotency-Key"


def default_port(tls: str) -> int:
    return _PORTS[tls]


def _value(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "; ".join(str(v) for v in value)
    return "" if value is None else str(value)


def email_message(n: Notification, sender: str, recipients: tuple[str, ...]) -> EmailMessage:
    """The message: the subject as one line, a plain-text part, an escaped HTML part, and
    the notification's attachments (DeliveryError, permanent, when one cannot be read)."""
    msg = EmailMessage(policy=SMTP_POLICY)
    msg["Subject"] = one_line(n.subject, 200) or n.kind
    msg["From"] = sender
    msg["To"] = ", ".join(recipients)
    msg["Date"] = formatdate(usegmt=True)
    msg["Message-ID"] = f"<{n.key}@convo-analytics.notify>"
    msg[KEY_HEADER] = n.key
    fields = [(str(k), _value(v)) for k, v in n.fields.items() if v not in (None, "", [], {})]
    plain = [n.subject, "", n.text, ""]
    plain += [f"{k}: {v}" for k, v in fields]
    plain += ["", f"-- {n.source} {n.kind}, idempotency key {n.key}"]
    msg.set_content("\n".join(plain) + "\n", charset="utf-8")
    e = html.escape
    rows = "".join(f"<tr><th align=left>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in fields)
    page = (
        f"<!doctype html><html><body><h3>{e(one_line(n.subject, 200))}</h3>"
        f'<pre style="white-space:pre-wrap">{e(n.text)}</pre>'
        + (f"<table>{rows}</table>" if rows else "")
        + f"<p><small>{e(n.source)} {e(n.kind)}, idempotency key {e(n.key)}</small></p>"
        "</body></html>"
    )
    msg.add_alternative(page, subtype="html", charset="utf-8")
    for attachment in n.attachments:  # the body becomes the first part of multipart/mixed
        main, _, sub = attachment.content_type.partition("/")
        msg.add_attachment(attachment_bytes(attachment), maintype=main or "application",
                           subtype=sub or "octet-stream",
                           filename=one_line(attachment.filename, 200))  # fmt: skip
    return msg


def _smtp_error(exc: smtplib.SMTPException, password: Secret | None) -> DeliveryError:
    """The failure as a DeliveryError: 5xx permanent, anything else retried; the server's
    words kept (short) unless they answer an AUTH, with the password masked anyway."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = [code for code, _ in exc.recipients.values()]
        permanent = bool(codes) and all(500 <= c < 600 for c in codes)
        said = ", ".join(str(c) for c in sorted(set(codes)))
        return DeliveryError(
            f"the SMTP server refused every recipient ({said})",
            permanent=permanent,
            code=max(codes, default=None),
        )
    if isinstance(exc, smtplib.SMTPNotSupportedError):
        return DeliveryError(f"the SMTP server does not support what is needed ({exc})"[:300])
    if isinstance(exc, smtplib.SMTPResponseException):
        code = int(exc.smtp_code)
        said = exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) \
            else str(exc.smtp_error)  # fmt: skip
        if isinstance(exc, smtplib.SMTPAuthenticationError):
            said = "authentication failed; check notify.smtp_user and notify.smtp_password"
        if password is not None and password.reveal():
            said = said.replace(password.reveal(), "***")
        return DeliveryError(
            f"the SMTP server answered {code}: {one_line(said, 200)}",
            permanent=500 <= code < 600,
            code=code,
        )
    return DeliveryError(f"the SMTP exchange failed ({type(exc).__name__})")


@dataclass(frozen=True, slots=True)
class EmailChannel:
    host: str
    port: int
    tls: str
    sender: str
    recipients: tuple[str, ...]
    user: str = ""
    password: Secret | None = None
    name: str = "email"

    def send(self, notification: Notification, attempt: int, timeout: float) -> int | None:
        recipients = notification.recipients or self.recipients
        msg = email_message(notification, self.sender, recipients)
        context = ssl.create_default_context()
        try:
            client: smtplib.SMTP
            if self.tls == "ssl":
                client = smtplib.SMTP_SSL(self.host, self.port, timeout=timeout, context=context)
            else:
                client = smtplib.SMTP(self.host, self.port, timeout=timeout)
            with client:
                if self.tls == "starttls":
                    client.starttls(context=context)  # raises when not offered: no downgrade
                if self.user and self.password is not None:
                    client.login(self.user, self.password.reveal())
                client.send_message(msg, self.sender, list(recipients))
        except smtplib.SMTPException as exc:
            raise _smtp_error(exc, self.password) from None
        except ssl.SSLError as exc:
            raise DeliveryError(f"the TLS handshake failed ({type(exc).__name__})") from None
        except TimeoutError:
            raise DeliveryError(f"no answer within {timeout:g} s (timeout)") from None
        except OSError as exc:
            raise DeliveryError(
                f"could not connect to the SMTP server ({exc.strerror or type(exc).__name__})"
            ) from None
        return 250
