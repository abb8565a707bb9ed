"""Deliveries scrubbed of personal data before they are archived, and the local seal that
lets ingest and replay trust a scrubbed line (issue 30, decision D-PRIVACY-SCRUB-AT-LOAD).

The receiver verifies a delivery's signature as it arrives, then scrubs the event
(``Scrubber.scrub_payload``, under the key of the workspace it is stored under) and
archives the scrubbed body. The service's signature no longer fits that body, so the
line says what was verified (``verified``, ``verification``, ``secretIndex``,
``signatureSource`` as before, and in ``scrub``: when, the scheme, the id of the secret
that verified it, the mode and the findings' kinds and keyed hashes) and carries
``localMac``: HMAC-SHA256 of the whole line (every member but ``localMac``, keys sorted at
every level) under a key derived from the privacy key (``local_mac_key``). Ingest and
replay accept a sealed line on its seal instead of the service's signature, and
quarantine one whose seal fails (``bad_local_mac``): an edited body, header, time or
verification record is caught, so what is loaded is exactly what was verified.

Lines of older archives (unscrubbed, service-signed) are verified as before, then
scrubbed at ingest before anything reaches the warehouse. Mode ``off`` archives and
ingests as before. A refused delivery is quarantined scrubbed too (``scrub.verified``
false, no seal): it stays readable for an investigation but cannot be replayed (its
signature no longer fits); the sender's retry brings it once the cause is fixed.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

import orjson

from convo_analytics.privacy import Finding, PrivacyConfig, Scrubber, local_mac_key

__all__ = ["MAC_FIELD", "MAC_PREFIX", "SCRUB_FIELD", "DeliveryScrubber", "key_id"]

SCRUB_FIELD = "scrub"
MAC_FIELD = "localMac"
MAC_PREFIX = "hmac-sha256="
#: The scheme the service signs with (``_signature``), recorded with the verification.
SCHEME = "hmac-sha256"
_KEY_ID_LABEL = b"convo-analytics/webhooks/key-id\x00"


def key_id(secret: bytes) -> str:
    """A short, stable name of a webhook secret (not the secret: a one-way digest of it), so
    an archived line says which secret verified it without holding it."""
    return hashlib.sha256(_KEY_ID_LABEL + secret).hexdigest()[:12]


class DeliveryScrubber:
    """One endpoint's scrubbing and sealing: a scrubber per workspace id (made once), the
    local seal's key (made when first needed)."""

    def __init__(self, config: PrivacyConfig | None) -> None:
        self.config = config
        self.active = config is not None and config.mode != "off"
        self._scrubbers: dict[str, Scrubber] = {}
        self._key: bytes | None = None

    def scrubber(self, workspace: str | None) -> Scrubber:
        ws = workspace or "default"
        found = self._scrubbers.get(ws)
        if found is None:
            assert self.config is not None
            found = self._scrubbers[ws] = Scrubber.from_config(self.config, ws)
        return found

    def event(
        self, workspace: str | None, event: Mapping[str, Any]
    ) -> tuple[dict[str, Any], tuple[Finding, ...]]:
        """The event without its ``signature`` (it no longer fits), scrubbed."""
        bare = {k: v for k, v in event.items() if k != "signature"}
        scrubbed = self.scrubber(workspace).scrub_payload(bare, identifiers_hashed=True)
        return scrubbed.value, scrubbed.findings

    def text(self, workspace: str | None, body: bytes) -> tuple[bytes, tuple[Finding, ...]]:
        """A body that is not a JSON event (a refused delivery), scrubbed as text."""
        scrubbed = self.scrubber(workspace).scrub(body.decode("utf-8", "replace"))
        return scrubbed.text.encode("utf-8"), scrubbed.findings

    @property
    def can_seal(self) -> bool:
        return self.config is not None

    def _mac_key(self) -> bytes:
        if self._key is None:
            assert self.config is not None
            self._key = local_mac_key(self.config)
        return self._key

    def _mac(self, record: Mapping[str, Any]) -> str:
        unsealed = {k: v for k, v in record.items() if k != MAC_FIELD}
        text = orjson.dumps(unsealed, option=orjson.OPT_SORT_KEYS)
        return MAC_PREFIX + hmac.new(self._mac_key(), text, hashlib.sha256).hexdigest()

    def seal(self, record: dict[str, Any]) -> bytes:
        """The archive line of ``record`` with its local seal."""
        record[MAC_FIELD] = self._mac(record)
        return orjson.dumps(record) + b"\n"

    def sealed(self, record: Mapping[str, Any]) -> bool:
        """Whether ``record`` (a parsed line) carries a seal this installation made."""
        given = record.get(MAC_FIELD)
        if not isinstance(given, str) or self.config is None:
            return False
        return hmac.compare_digest(given.encode(), self._mac(record).encode())


def scrub_record(findings: tuple[Finding, ...], mode: str, **verified: Any) -> dict[str, Any]:
    """The line's ``scrub`` member: the mode, what was verified, the findings."""
    return {"mode": mode, **verified, "findings": [[f.kind, f.hash] for f in findings]}
