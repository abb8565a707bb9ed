"""Who an erasure or an access request is about, and where the warehouse holds them.

A person is named by the workspace and one identifier: the service's
``externalUserId``, or an email address. What the warehouse holds of them is found
from that (D-ERASURE):

* by ``externalUserId``: the conversations whose ``external_user_id`` is it, as it
  arrived or as scrubbing stored it (an id that is an address is kept as its
  keyed-hash placeholder, ``[email:1a2b...]``), from the conversations, the webhook
  lifecycle and the marts;
* by email: the leads (and lead qualifications) with that address, as it arrived or
  as its placeholder, or with that address found in them by the scrubber
  (``privacy_findings``, by keyed hash: a masked ``[email]`` no longer says which),
  the conversations and events in which it was found, the conversations those leads
  came from, a conversation whose ``externalUserId`` is the address, and, where
  scrubbing was off, a message whose text holds it;

then everything of those conversations and leads: messages, escalations, guardrail
events, leads, webhook events naming them, their findings. A person named by email is
not widened to every conversation of the user who typed it (an anonymous or shared
``externalUserId`` would take other people's records with it); erase by
``--external-user-id`` as well for that.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

import duckdb

from convo_analytics.privacy import PrivacyConfig, Scrubber, SubjectHasher

__all__ = ["Found", "IdentifierKind", "PersonRequest", "find_person"]

IdentifierKind = Literal["external_user_id", "email"]


@dataclass(frozen=True)
class PersonRequest:
    """One person of one workspace, by one identifier (never written anywhere as is)."""

    workspace_id: str
    workspace_name: str
    kind: IdentifierKind
    value: str = field(repr=False)

    def __repr__(self) -> str:
        return f"PersonRequest({self.workspace_name!r}, {self.kind})"


@dataclass
class Found:
    """The person's records in the warehouse, by id (of their workspace)."""

    conversations: set[str] = field(default_factory=set)
    leads: set[str] = field(default_factory=set)
    events: set[str] = field(default_factory=set)
    #: The identifier in every form it may be stored in (as given, its placeholder).
    forms: set[str] = field(default_factory=set)

    def strings(self) -> set[str]:
        """Every string that marks a line or a row as the person's (ids and identifier
        forms), for the stores that hold lines rather than rows (quarantine, archives)."""
        return {s for s in (*self.conversations, *self.leads, *self.events, *self.forms) if s}

    def empty(self) -> bool:
        return not (self.conversations or self.leads or self.events)


def stored_forms(request: PersonRequest, privacy: PrivacyConfig) -> set[str]:
    """The identifier as given and as scrubbing would have stored it (its keyed-hash
    placeholder: identifiers are stored hashed in both ``mask`` and ``hash`` modes)."""
    forms = {request.value}
    hashing = Scrubber.from_config(dataclasses.replace(privacy, mode="hash"), request.workspace_id)
    key = "externalUserId" if request.kind == "external_user_id" else "email"
    scrubbed = hashing.scrub_payload({key: request.value}, identifiers_hashed=True).value[key]
    forms.add(str(scrubbed))
    if request.kind == "email":
        forms.add(request.value.strip().lower())
    return forms


def email_hash(request: PersonRequest, privacy: PrivacyConfig) -> str | None:
    """The keyed hash ``privacy_findings`` holds for the address (None: not an address)."""
    hashing = Scrubber.from_config(dataclasses.replace(privacy, mode="hash"), request.workspace_id)
    try:
        return hashing.keyed_hash("email", request.value)
    except ValueError:
        return None


def _ids(con: duckdb.DuckDBPyConnection, sql: str, params: list[object]) -> set[str]:
    return {str(r[0]) for r in con.execute(sql, params).fetchall() if r[0] is not None}


def find_person(
    con: duckdb.DuckDBPyConnection, request: PersonRequest, privacy: PrivacyConfig
) -> Found:
    """Every record of the person in the warehouse ``con`` has open."""
    ws = request.workspace_id
    found = Found(forms=stored_forms(request, privacy))
    forms = sorted(found.forms)
    in_forms = "IN (SELECT unnest(?::VARCHAR[]))"
    convs = _ids(
        con,
        f"""SELECT id FROM conversations WHERE workspace_id = ? AND external_user_id {in_forms}
        UNION SELECT conversation_id FROM conversation_lifecycle
              WHERE workspace_id = ? AND external_user_id {in_forms}
        UNION SELECT conversation_id FROM mart_conversations
              WHERE workspace_id = ? AND external_user_id {in_forms}""",
        [ws, forms, ws, forms, ws, forms],
    )
    leads: set[str] = set()
    events: set[str] = set()
    if request.kind == "email":
        address = request.value.strip().lower()
        digest = email_hash(request, privacy) or ""
        leads = _ids(
            con,
            f"""SELECT id FROM leads WHERE workspace_id = ?
                  AND (lower(email) = ? OR email {in_forms})
            UNION SELECT lead_id FROM lead_qualifications WHERE workspace_id = ?
                  AND (lower(email) = ? OR email {in_forms})
            UNION SELECT record_id FROM privacy_findings WHERE workspace_id = ?
                  AND source = 'leads' AND kind = 'email' AND keyed_hash = ?""",
            [ws, address, forms, ws, address, forms, ws, digest],
        )
        events = _ids(
            con,
            """SELECT record_id FROM privacy_findings WHERE workspace_id = ?
                  AND source = 'events' AND kind = 'email' AND keyed_hash = ?
            UNION SELECT event_id FROM events WHERE workspace_id = ?
                  AND lower(json_extract_string(data, '$.email')) = ?""",
            [ws, digest, ws, address],
        )
        convs |= _ids(
            con,
            """SELECT record_id FROM privacy_findings WHERE workspace_id = ?
                  AND source = 'conversations' AND kind = 'email' AND keyed_hash = ?
            UNION SELECT conversation_id FROM leads
                  WHERE workspace_id = ? AND id IN (SELECT unnest(?::VARCHAR[]))
            UNION SELECT conversation_id FROM lead_qualifications
                  WHERE workspace_id = ? AND lead_id IN (SELECT unnest(?::VARCHAR[]))
            UNION SELECT conversation_id FROM events
                  WHERE workspace_id = ? AND event_id IN (SELECT unnest(?::VARCHAR[]))
            UNION SELECT conversation_id FROM messages
                  WHERE workspace_id = ? AND contains(lower(text), ?)""",
            [ws, digest, ws, sorted(leads), ws, sorted(leads), ws, sorted(events), ws, address],
        )
    conv_list = sorted(convs)
    leads |= _ids(
        con,
        """SELECT id FROM leads WHERE workspace_id = ?
              AND conversation_id IN (SELECT unnest(?::VARCHAR[]))
        UNION SELECT lead_id FROM lead_qualifications WHERE workspace_id = ?
              AND conversation_id IN (SELECT unnest(?::VARCHAR[]))""",
        [ws, conv_list, ws, conv_list],
    )
    events |= _ids(
        con,
        """SELECT event_id FROM events WHERE workspace_id = ?
              AND (conversation_id IN (SELECT unnest(?::VARCHAR[]))
                   OR json_extract_string(data, '$.conversationId')
                      IN (SELECT unnest(?::VARCHAR[]))
                   OR json_extract_string(data, '$.leadId') IN (SELECT unnest(?::VARCHAR[])))""",
        [ws, conv_list, conv_list, sorted(leads)],
    )
    found.conversations, found.leads, found.events = convs, leads, events
    return found


def subject_hash(request: PersonRequest, privacy: PrivacyConfig) -> str:
    """The person's salted hash: what certificates, logs and the suppression list hold."""
    return SubjectHasher(privacy, request.workspace_id).hash(request.kind, request.value)
