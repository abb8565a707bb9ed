"""The salted hash that names a person to an erasure and to the suppression list.

An erasure must remember whom it erased (so the next extraction or a re-ingested
archive does not bring them back), and its certificate must say whom it was for,
without either holding the identifier (issue 30, D-ERASURE). Both hold
:func:`subject_hash`: an HMAC-SHA256, under the workspace's own key (``_key``), of the
kind of identifier and its normal form. Nobody without the key can test a guess
against it; the same person in two workspaces gets two unrelated hashes.

The kinds: ``external_user_id`` (the service's ``externalUserId``, exact), ``email``
(lower-cased, trimmed), and the records an erasure removed, ``conversation`` and
``lead`` (their ids, exact), so that a lead or an event naming an erased conversation
is recognised too.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any, Literal

from convo_analytics.privacy._config import PrivacyConfig
from convo_analytics.privacy._email import normalise_email
from convo_analytics.privacy._key import project_key, workspace_key

__all__ = ["SUBJECT_KINDS", "SubjectHasher", "SubjectKind", "names_suppressed"]

SubjectKind = Literal["external_user_id", "email", "conversation", "lead"]
SUBJECT_KINDS: tuple[SubjectKind, ...] = ("external_user_id", "email", "conversation", "lead")
_LABEL = b"convo-analytics/erasure/subject\x00"


class SubjectHasher:
    """Hashes identifiers of one workspace for erasure and suppression (whatever the
    scrubbing mode: the key is made when first needed, as for the archive's seals)."""

    def __init__(self, config: PrivacyConfig, workspace_id: str) -> None:
        self._key = workspace_key(project_key(config.key, config.generated_key_file), workspace_id)

    def __repr__(self) -> str:
        return "SubjectHasher()"

    def hash(self, kind: SubjectKind, value: str) -> str:
        """The subject hash of ``value`` as an identifier of ``kind`` (64 hex digits)."""
        normal = normalise_email(value) if kind == "email" else value
        message = _LABEL + kind.encode("ascii") + b"\x00" + normal.encode("utf-8")
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()


#: Keys whose values name a person or one of their records, and what they name.
_KEYS: dict[str, SubjectKind] = {
    "externalUserId": "external_user_id",
    "external_user_id": "external_user_id",
    "email": "email",
    "conversationId": "conversation",
    "conversation_id": "conversation",
    "leadId": "lead",
    "lead_id": "lead",
}
#: A record is walked this deep at most (the service's records are shallow).
_DEPTH = 6


def names_suppressed(
    record: Any, hasher: SubjectHasher, lists: Mapping[str, frozenset[str]], own: SubjectKind | None
) -> bool:
    """Whether ``record`` (a JSON tree) names someone on the lists: its own ``id`` as
    ``own``, or a value under one of the known keys at any depth up to ``_DEPTH``."""
    stack: list[tuple[Any, int]] = [(record, 0)]
    if own is not None and isinstance(record, dict):
        rid = record.get("id")
        if isinstance(rid, str | int) and hasher.hash(own, str(rid)) in lists.get(own, ()):
            return True
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                kind = _KEYS.get(key)
                if (
                    kind is not None
                    and isinstance(value, str | int)
                    and hasher.hash(kind, str(value)) in lists.get(kind, ())
                ):
                    return True
                if depth < _DEPTH and isinstance(value, dict | list):
                    stack.append((value, depth + 1))
        elif isinstance(item, list) and depth < _DEPTH:
            stack.extend((v, depth + 1) for v in item)
    return False
