"""Scrubbing: personal data replaced in text and in JSON-like payloads, one workspace's.

``privacy.scrub`` (or the workspace's ``privacy_scrub``) says how:

* ``mask``: each finding becomes its kind, ``[email]``, ``[phone]``, ``[card]``,
  ``[iban]``, ``[ip]``, ``[NAME]`` of an extra pattern. The text says what was there,
  nothing of which value;
* ``hash``: each finding becomes its kind and its keyed hash, ``[email:1a2b3c4d5e6f]``
  (the first 12 hex digits of an HMAC-SHA256 under the workspace's key, of the value in
  its normal form): equal values stay equal, so one customer's messages still join,
  and nobody without the key can tell which value it was;
* ``off``: the text as it came.

In both ``mask`` and ``hash`` the result carries its findings, kind and keyed hash,
never the value: kept beside a masked text, they let a later ``convo erase --email``
find the person (it hashes the address it is given with the same key) although the
text no longer holds the address.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from convo_analytics.config import Settings
from convo_analytics.privacy._config import Mode, PrivacyConfig, privacy_config
from convo_analytics.privacy._detect import HASH_DIGITS, Detector
from convo_analytics.privacy._key import project_key, workspace_key

__all__ = [
    "Finding",
    "Scrubbed",
    "ScrubbedPayload",
    "Scrubber",
    "is_identifier_key",
    "local_mac_key",
]

_MAC_LABEL = b"convo-analytics/privacy/local-mac\x00"


def local_mac_key(config: PrivacyConfig) -> bytes:
    """The key that seals what this installation scrubbed itself (the webhook archive's
    scrubbed lines, D-PRIVACY-SCRUB-AT-LOAD): derived from the project key, so it is kept
    (and lost) with it, and never the key a hash is made with. Made whatever the mode:
    a line scrubbed earlier is checked after scrubbing was turned off."""
    project = project_key(config.key, config.generated_key_file)
    return hmac.new(project, _MAC_LABEL, hashlib.sha256).digest()


#: Keys whose values identify a record (``id``, ``conversationId``, ``external_user_id``).
_IDENTIFIER = re.compile(r"(?:[a-z0-9](?:Id|ID)|[_-](?:id|Id|ID))$")


def is_identifier_key(key: object) -> bool:
    """Whether a JSON key names an identifier: ``id``, or a name ending in ``Id``/``_id``/``ID``
    (``externalUserId``, ``conversation_id``); not words ending in ``id`` (``paid``)."""
    return isinstance(key, str) and (key in ("id", "ID", "Id") or bool(_IDENTIFIER.search(key)))


@dataclass(frozen=True, slots=True)
class Finding:
    """Personal data that was found: its kind and keyed hash (never its value)."""

    kind: str
    hash: str


@dataclass(frozen=True, slots=True)
class Scrubbed:
    """A scrubbed text and what was found in it, in the order found."""

    text: str
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True, slots=True)
class ScrubbedPayload:
    """A scrubbed JSON-like value (dicts, lists, strings, numbers, ...) and its findings,
    in the order of a depth-first walk."""

    value: Any
    findings: tuple[Finding, ...] = ()


class Scrubber:
    """Scrubs one workspace's text: :meth:`of` makes one from the settings."""

    def __init__(self, mode: Mode, detector: Detector, key: bytes | None) -> None:
        if mode != "off" and key is None:
            raise ValueError("a scrubber that masks or hashes needs its workspace's key")
        self.mode = mode
        self.detector = detector
        self._key = key

    @classmethod
    def of(cls, settings: Settings, workspace_id: str) -> Scrubber:
        """The scrubber of ``workspace_id`` (the warehouse's workspace id; see
        :func:`privacy_config`). A ``UserError`` names a bad setting or key file."""
        return cls.from_config(privacy_config(settings, workspace_id), workspace_id)

    @classmethod
    def from_config(cls, config: PrivacyConfig, workspace_id: str) -> Scrubber:
        detector = Detector(config.default_region, config.extra_patterns)
        if config.mode == "off":
            return cls("off", detector, None)  # no key is made for nothing to hash
        project = project_key(config.key, config.generated_key_file)
        return cls(config.mode, detector, workspace_key(project, workspace_id))

    def __repr__(self) -> str:
        return f"Scrubber(mode={self.mode!r}, region={self.detector.region!r})"

    def keyed_hash(self, kind: str, value: str) -> str:
        """The hash a finding of ``kind`` with ``value`` gets (e.g. an address an
        erasure is asked for); ``ValueError`` when ``value`` is not of ``kind``."""
        return self._digest(kind, self.detector.normalise(kind, value))

    def _digest(self, kind: str, normal: str) -> str:
        if self._key is None:
            raise ValueError("scrubbing is off: there is no key to hash with")
        message = kind.encode("utf-8") + b"\x00" + normal.encode("utf-8")
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()[:HASH_DIGITS]

    def scrub(self, text: str) -> Scrubbed:
        """``text`` with its personal data replaced as the mode says."""
        if self.mode == "off":
            return Scrubbed(text)
        findings: list[Finding] = []
        return Scrubbed(self._text(text, findings), tuple(findings))

    def _text(self, text: str, findings: list[Finding], hashed: bool = False) -> str:
        """``text`` scrubbed until nothing more is found. A finding's removal can leave a
        neighbour whole on its own (``+44 20 7946 0958ann@example.com``: the address took
        ``0958``, and ``+44 20 7946`` is a number alone), so a text that changed is read
        again; each pass replaces text by placeholders no pass finds again, so this ends
        (one more pass, in practice), and scrubbing its own output finds nothing."""
        while spans := self.detector.find(text):
            parts: list[str] = []
            last = 0
            for span in spans:
                digest = self._digest(span.kind, span.value)
                findings.append(Finding(span.kind, digest))
                parts.append(text[last : span.start])
                keyed = hashed or self.mode == "hash"
                parts.append(f"[{span.kind}:{digest}]" if keyed else f"[{span.kind}]")
                last = span.end
            parts.append(text[last:])
            text = "".join(parts)
        return text

    def scrub_payload(self, value: Any, *, identifiers_hashed: bool = False) -> ScrubbedPayload:
        """A copy of a JSON-like ``value`` with every string in it scrubbed (dict keys,
        numbers, booleans and None untouched; tuples become lists). Walked without
        recursion, so any depth a JSON parser gives is fine.

        ``identifiers_hashed``: in ``mask`` mode too, a finding in the value of an
        identifier key (:func:`is_identifier_key`: an ``externalUserId`` that is an
        address) gets its keyed-hash placeholder, so that distinct records stay distinct
        (masked, every such id would read ``[email]``, one key for all)."""
        if self.mode == "off":
            return ScrubbedPayload(value)
        findings: list[Finding] = []
        root: list[Any] = [None]
        stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
        while stack:
            into, at, item = stack.pop()
            if isinstance(item, str):
                hashed = identifiers_hashed and is_identifier_key(at)
                into[at] = self._text(item, findings, hashed)
            elif isinstance(item, Mapping):
                copy = dict.fromkeys(item)
                into[at] = copy
                stack.extend((copy, k, v) for k, v in reversed(list(item.items())))
            elif isinstance(item, list | tuple):
                seq: list[Any] = [None] * len(item)
                into[at] = seq
                stack.extend((seq, i, v) for i, v in reversed(list(enumerate(item))))
            else:
                into[at] = item
        return ScrubbedPayload(root[0], tuple(findings))
