"""A Slack-compatible incoming webhook: ``{"text": ..., "blocks": [...]}``.

Slack (and the chat tools that accept its incoming-webhook format) reads the
text as *mrkdwn*, where ``<...>`` makes links and mentions (``<!channel>``,
``<@U123>``, ``<https://x|click>``) and ``&`` starts an entity. Every piece
of user text is escaped for it (:func:`mrkdwn`): ``&``, ``<`` and ``>``
become ``&amp;``, ``&lt;`` and ``&gt;`` (Slack's own rule), and ``@channel``,
``@here`` and ``@everyone`` get an invisible word joiner after the ``@`` so
that no setting of the receiving app turns them into a mention. The URL is
the credential (a secret); the body is not signed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from convo_analytics.config import Secret
from convo_analytics.contract import IDEMPOTENCY_HEADER
from convo_analytics.notify._channel import post_json
from convo_analytics.notify._message import Notification, one_line

__all__ = ["SlackChannel", "mrkdwn", "slack_body"]

#: Slack's limits: a section's text, a field's text, the fields of one section.
SECTION_LIMIT = 3000
FIELD_LIMIT = 2000
MAX_FIELDS = 10
_BROADCAST = re.compile(r"@(?=(channel|here|everyone)\b)", re.IGNORECASE)
_WORD_JOINER = "\u2060"


def mrkdwn(text: str, limit: int = SECTION_LIMIT) -> str:
    """``text`` escaped for Slack's mrkdwn, cut to ``limit`` characters (never inside an
    entity: a cut ``&am`` would show as text)."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    escaped = _BROADCAST.sub("@" + _WORD_JOINER, escaped)
    if len(escaped) <= limit:
        return escaped
    head = escaped[: limit - 1]
    amp = head.rfind("&")
    if amp != -1 and ";" not in head[amp:]:
        head = head[:amp]
    return head + "…"


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return "; ".join(_value(v) for v in value) or "–"
    if value is None:
        return "–"
    return orjson.dumps(value).decode() if isinstance(value, dict) else str(value)


def slack_body(n: Notification) -> dict[str, Any]:
    """The incoming-webhook body: the subject (the notification's preview), the text,
    the fields (at most ten) and a context line with the kind and the key."""
    subject = mrkdwn(one_line(n.subject, 150), 200)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{subject}*"}},
    ]
    if n.text.strip():
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn(n.text)}})
    shown = [
        {"type": "mrkdwn", "text": mrkdwn(f"{one_line(str(k), 80)}: {_value(v)}", FIELD_LIMIT)}
        for k, v in list(n.fields.items())[:MAX_FIELDS]
        if v not in (None, "", [], {})
    ]
    if shown:
        blocks.append({"type": "section", "fields": shown})
    context = mrkdwn(one_line(f"{n.source} · {n.kind} · {n.key}", 300), 400)
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]})
    return {"text": subject, "blocks": blocks}


@dataclass(frozen=True, slots=True)
class SlackChannel:
    name: str
    url: Secret

    def send(self, notification: Notification, attempt: int, timeout: float) -> int | None:
        body = orjson.dumps(slack_body(notification))
        return post_json(self.url, body, {IDEMPOTENCY_HEADER: notification.key}, timeout)
