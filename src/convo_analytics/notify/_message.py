"""A notification: one fact worth telling someone, in a form every channel can render.

It carries a ``kind`` (``run.failed``, later ``monitor.alerting``), a one-line
``subject``, a plain ``text``, structured ``fields`` (JSON values) and an
idempotency ``key`` that is the same for the same fact however often it is
built: a hash of (source, subject id, kind). The key is what makes delivery
at-least-once without duplicates: the delivery log never sends a key twice to
one channel, and receivers can drop a repeat they see (D-NOTIFY-CHANNELS).

User text (an error message, later a topic's name) is kept as it is here and
escaped by each channel for its medium, never before.

A notification may carry files (a scheduled report's HTML and CSVs):
:class:`Attachment` names a file by its path, and each channel that carries
files (email, the signed webhook) reads it when it sends, so the delivery log
holds the names, never the bytes. It may also name its own email
``recipients`` (a report's readers), which the email channel uses instead of
``notify.email_to``; every retry, by whichever run, goes to the same people.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = ["Attachment", "Notification", "notification_key", "one_line"]

#: Control characters (CR and LF among them) and the Unicode line and paragraph separators.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def notification_key(source: str, subject_id: str, kind: str) -> str:
    """The stable idempotency key of the fact ``kind`` about ``subject_id`` from ``source``:
    ``ntf_`` and 32 hex digits of SHA-256 over the three parts (unit-separated)."""
    digest = hashlib.sha256("\x1f".join((source, subject_id, kind)).encode("utf-8"))
    return "ntf_" + digest.hexdigest()[:32]


def one_line(text: str, limit: int = 200) -> str:
    """``text`` as one printable line (control characters, CR and LF become a space, runs of
    white space one), cut to ``limit`` characters: what a header or a title may hold."""
    line = " ".join(_CONTROL.sub(" ", text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file a notification carries: read from ``path`` at send time, sent as ``filename``
    with ``content_type`` (``text/html``, ``text/csv``)."""

    path: str
    filename: str
    content_type: str

    def as_json(self) -> dict[str, str]:
        return {"path": self.path, "filename": self.filename, "contentType": self.content_type}

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> Attachment:
        return cls(str(row["path"]), str(row["filename"]), str(row["contentType"]))


@dataclass(frozen=True, slots=True)
class Notification:
    """What to tell; :meth:`create` builds one with its key from the fact it is about."""

    kind: str
    subject: str
    text: str
    key: str
    source: str = ""
    #: Structured data (JSON values): a webhook's body carries them, Slack and email list them.
    fields: Mapping[str, Any] = field(default_factory=dict)
    #: Structured data only machines read (the webhook's ``data`` and the command's body
    #: carry it beside ``fields``; Slack and email, which people read, leave it out): e.g. a
    #: monitor alert's whole explanation, which its text already says in words.
    details: Mapping[str, Any] = field(default_factory=dict)
    #: Environment variables a command channel sets besides ``CONVO_NOTIFY_*`` (the run's
    #: alert: ``CONVO_RUN_ID`` and its siblings, as before notify/ existed).
    env: Mapping[str, str] = field(default_factory=dict)
    #: When the fact was recorded (ISO 8601 UTC): the webhook's X-Convo-Timestamp.
    created_at: str = ""
    #: Files the email and the signed webhook carry (read when sent; Slack gets the text).
    attachments: tuple[Attachment, ...] = ()
    #: Who the email goes to instead of ``notify.email_to`` (empty: the channel's own).
    recipients: tuple[str, ...] = ()

    @classmethod
    def create(
        cls,
        *,
        source: str,
        subject_id: str,
        kind: str,
        subject: str,
        text: str,
        fields: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        attachments: Sequence[Attachment] = (),
        recipients: Sequence[str] = (),
    ) -> Notification:
        return cls(
            kind=kind,
            subject=subject,
            text=text,
            key=notification_key(source, subject_id, kind),
            source=source,
            fields=dict(fields or {}),
            env=dict(env or {}),
            created_at=_now(),
            attachments=tuple(attachments),
            recipients=tuple(recipients),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "source": self.source,
            "subject": self.subject,
            "text": self.text,
            "fields": dict(self.fields),
            "details": dict(self.details),
            "env": dict(self.env),
            "created_at": self.created_at,
            "attachments": [a.as_json() for a in self.attachments],
            "recipients": list(self.recipients),
        }

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> Notification:
        """The notification as the delivery log holds it (``KeyError``/``TypeError`` if not)."""
        fields, env = row.get("fields") or {}, row.get("env") or {}
        details = row.get("details") or {}
        if not all(isinstance(x, dict) for x in (fields, env, details)):
            raise TypeError("fields, details and env are objects")
        attachments, recipients = row.get("attachments") or [], row.get("recipients") or []
        if not all(isinstance(x, list) for x in (attachments, recipients)):
            raise TypeError("attachments and recipients are lists")
        return cls(
            kind=str(row["kind"]),
            subject=str(row["subject"]),
            text=str(row["text"]),
            key=str(row["key"]),
            source=str(row.get("source") or ""),
            fields=fields,
            details=details,
            env={str(k): str(v) for k, v in env.items()},
            created_at=str(row.get("created_at") or ""),
            attachments=tuple(Attachment.from_json(a) for a in attachments),
            recipients=tuple(str(r) for r in recipients),
        )
