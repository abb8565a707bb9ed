"""The service's answers scrubbed of personal data before anything is written (issue 30,
decision D-PRIVACY-SCRUB-AT-LOAD).

Every list page, conversation detail and summary answer goes through here between the
HTTP client and the batch that is committed: each record's JSON tree is scrubbed
(``Scrubber.scrub_payload``: every string value, keys untouched), and what was found
comes back per record id, for ``privacy_findings``. The raw tables, the typed columns
and the transcripts are all loaded from the scrubbed bodies, so the original never
reaches the warehouse; a raw version's ``payload_hash`` is the md5 of the scrubbed
record, the same for the same record under the same key and settings, so a re-fetched
version is still recognised as one held.

A body in which nothing was found is passed on as it came (not re-serialised), and
mode ``off`` passes every body on untouched: today's behaviour exactly. The scrubber is
made once per run of a workspace, on its first record (the workspace id, the key's
input, may be learned from it).
"""

from __future__ import annotations

from typing import Any

import orjson

from convo_analytics.extract._shapes import value_at
from convo_analytics.privacy import PrivacyConfig, Scrubber
from convo_analytics.warehouse import FindingRow

__all__ = ["LoadScrubber", "replaced_at"]


class LoadScrubber:
    """One workspace's scrubbing of one extraction run."""

    def __init__(self, config: PrivacyConfig | None) -> None:
        self.config = config
        self.active = config is not None and config.mode != "off"
        self._scrubber: Scrubber | None = None
        self._workspace: str | None = None

    def _for(self, workspace: str) -> Scrubber:
        if self._scrubber is None or self._workspace != workspace:
            assert self.config is not None
            self._scrubber = Scrubber.from_config(self.config, workspace)
            self._workspace = workspace
        return self._scrubber

    def record(
        self, workspace: str, record: Any, id_path: str | None
    ) -> tuple[Any, list[FindingRow]]:
        """One record scrubbed, and its findings under the id it is stored with."""
        scrubbed = self._for(workspace).scrub_payload(record, identifiers_hashed=True)
        if not scrubbed.findings:
            return record, []
        rid = value_at(scrubbed.value, id_path) if id_path else None
        key = None if rid is None else str(rid)
        return scrubbed.value, [(key, f.kind, f.hash) for f in scrubbed.findings]

    def page(
        self, workspace: str, body: bytes, data: Any, envelope: str | None, id_path: str | None
    ) -> tuple[bytes, list[FindingRow]]:
        """A list page's body with each record (the list at ``envelope``; None: the body is
        the list) and the rest of the page scrubbed."""
        if not self.active:
            return body, []
        records = data if envelope is None else value_at(data, envelope)
        if not isinstance(records, list):
            return self.whole(workspace, body, data)
        found: list[FindingRow] = []
        scrubbed = []
        for item in records:
            value, rows = self.record(workspace, item, id_path)
            scrubbed.append(value)
            found.extend(rows)
        if envelope is None:
            return (_dumps(scrubbed) if found else body), found
        rest = self._for(workspace).scrub_payload(
            replaced_at(data, envelope, []), identifiers_hashed=True
        )
        found.extend((None, f.kind, f.hash) for f in rest.findings)
        if not found:
            return body, found
        return _dumps(replaced_at(rest.value, envelope, scrubbed)), found

    def detail(
        self, workspace: str, body: bytes, data: Any, record_id: str, id_path: str | None
    ) -> tuple[bytes, list[FindingRow]]:
        """A detail (one record with its transcript) scrubbed; its findings are its
        conversation's (the id it is stored under)."""
        if not self.active:
            return body, []
        value, found = self.record(workspace, data, id_path)
        if not found:
            return body, found
        found = [(rid if rid is not None else record_id, k, h) for rid, k, h in found]
        return _dumps(value), found

    def whole(self, workspace: str, body: bytes, data: Any) -> tuple[bytes, list[FindingRow]]:
        """A body scrubbed as one tree (a summary answer); findings under no record."""
        if not self.active:
            return body, []
        scrubbed = self._for(workspace).scrub_payload(data, identifiers_hashed=True)
        if not scrubbed.findings:
            return body, []
        return _dumps(scrubbed.value), [(None, f.kind, f.hash) for f in scrubbed.findings]


def _dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:  # an integer past 64 bits: the standard library writes any
        import json

        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def replaced_at(data: Any, envelope: str, value: Any) -> Any:
    """A copy of ``data`` with ``value`` at the key path ``envelope`` (dicts on the way
    copied, the rest shared): the whole key first, as ``value_at`` reads it."""
    if not isinstance(data, dict):
        return data
    if envelope in data:
        return {**data, envelope: value}
    head, _, rest = envelope.partition(".")
    while rest:
        if head in data and isinstance(data[head], dict):
            return {**data, head: replaced_at(data[head], rest, value)}
        step, _, rest = rest.partition(".")
        head = f"{head}.{step}"
    return data
