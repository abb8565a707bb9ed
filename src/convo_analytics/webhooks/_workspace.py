"""Which workspace a webhook event belongs to: the one whose endpoint received it.

A workspace's endpoint (``/webhooks/NAME``) and its archive folder
(``ARCHIVE/workspaces/NAME/``) verify with that workspace's secrets only, so
whoever holds a secret can write into that one workspace and no other
(decision D-WEBHOOK-WORKSPACE). The event's own claim is checked against it:

- the claim is the envelope's ``workspaceId`` (event set B) or ``tenantId``
  (event set A, at the top or in ``data``); each one present must be a
  non-empty string of printable characters, and all of them the same;
- absent, the event is the endpoint's workspace's;
- naming another workspace, it is refused (``workspace_mismatch``);
- while the endpoint's workspace id is not known yet (not configured, never
  learned), the first claim binds it, unless that id is another workspace's;
  an event naming none is set aside (``workspace_unknown``) until it is known.

The flat endpoint (``/webhooks``, verified with ``webhooks.secret``) belongs to a
flat configuration's one workspace, or, beside ``[[workspaces]]``, to whoever the
operator gave that all-workspaces secret: there the claim is only read (it must
still be a string), as before.

Stored events carry the workspace decided here (``events.workspace_id``), never
the body's word alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "INVALID_WORKSPACE",
    "WORKSPACE_MISMATCH",
    "WORKSPACE_UNKNOWN",
    "EndpointWorkspace",
    "WorkspaceScope",
    "claimed_workspace",
]

INVALID_WORKSPACE = "invalid_workspace"
WORKSPACE_MISMATCH = "workspace_mismatch"
WORKSPACE_UNKNOWN = "workspace_unknown"
#: The longest workspace id read from an event.
_MAX_ID = 256


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str) and not value:
        return "empty"
    if isinstance(value, str) and len(value) > _MAX_ID:
        return f"{len(value):,} characters long"
    return "not printable text"


def _claims(event: Mapping[str, Any]) -> list[tuple[str, Any]]:
    found = [(name, event[name]) for name in ("workspaceId", "tenantId") if name in event]
    data = event.get("data")
    if isinstance(data, dict) and "tenantId" in data:
        found.append(("data.tenantId", data["tenantId"]))
    return found


_ABSENT = object()


def claimed_workspace(event: Mapping[str, Any]) -> tuple[str | None, tuple[str, str] | None]:
    """The workspace id an event names (None: it names none), or why its claim is refused
    (a reason and a one-line detail)."""
    # the common event (one workspaceId of plain text, no tenantId) decided inline: this
    # runs for every line the ingest reads
    named = event.get("workspaceId", _ABSENT)
    data = event.get("data")
    if "tenantId" not in event and not (type(data) is dict and "tenantId" in data):
        if named is _ABSENT:
            return None, None
        if type(named) is str and 0 < len(named) <= _MAX_ID and named.isprintable():
            return named, None
    claims = _claims(event)
    if not claims:
        return None, None
    for where, value in claims:
        if (
            not isinstance(value, str)
            or not value
            or len(value) > _MAX_ID
            or not value.isprintable()
        ):
            detail = f"the event's {where} is {_describe(value)}; it must be a workspace id (text)"
            return None, (INVALID_WORKSPACE, detail)
    ids = dict.fromkeys(value for _, value in claims)
    if len(ids) > 1:
        named = " and ".join(f"{where} {value!r}" for where, value in claims)
        return None, (WORKSPACE_MISMATCH, f"the event names two workspaces: {named}")
    return claims[0][1], None


@dataclass(frozen=True, slots=True)
class EndpointWorkspace:
    """The workspace an endpoint or archive folder belongs to, as the config says.

    ``name`` None: the flat endpoint (``webhooks.secret``). ``others``: every other
    configured workspace, name to its configured id (or None).
    """

    name: str | None
    configured_id: str | None = None
    others: Mapping[str, str | None] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"workspace {self.name}" if self.name else "the flat endpoint"


class WorkspaceScope:
    """Decides, event by event, under which workspace id an endpoint's event is stored.

    ``bound``: the ids known for each name (configured, or bound in the warehouse, or by
    the receiver); the scope's own id is learned on first sight when not known, and
    ``learned`` then says so for the caller to record.
    """

    def __init__(self, endpoint: EndpointWorkspace, bound: Mapping[str, str] | None = None) -> None:
        self.endpoint = endpoint
        bound = dict(bound or {})
        name = endpoint.name
        self.workspace_id: str | None = endpoint.configured_id or (
            bound.get(name) if name is not None else None
        )
        self.learned: str | None = None
        #: Ids (and names) that are other workspaces': a claim of one is refused.
        self.taken: dict[str, str] = {}
        for other, wid in bound.items():
            if other != name:
                self.taken[wid] = other
        for other, configured in endpoint.others.items():
            if other != name:
                self.taken.setdefault(other, other)
                if configured:
                    self.taken[configured] = other

    @property
    def strict(self) -> bool:
        """Whether events must be this one workspace's (a workspace's own endpoint)."""
        return self.endpoint.name is not None

    def admit(self, event: Mapping[str, Any]) -> tuple[str | None, tuple[str, str] | None]:
        """The workspace id to store ``event`` under (None: it names none, on the flat
        endpoint), or why it is refused (reason, detail)."""
        claim, problem = claimed_workspace(event)
        if problem is not None:
            return None, problem
        if not self.strict:
            return claim, None
        name, known = self.endpoint.name, self.workspace_id
        if claim is None:
            if known is not None:
                return known, None
            return None, (
                WORKSPACE_UNKNOWN,
                f"the event names no workspace and workspace {name!r}'s id is not known yet: "
                f"set workspace_id in its [[workspaces]] table (or run convo extract for it), "
                "then convo webhooks quarantine replay",
            )
        if known is not None:
            if claim == known:
                return known, None
            owner = self.taken.get(claim)
            whose = f" (workspace {owner!r}'s)" if owner else ""
            return None, (
                WORKSPACE_MISMATCH,
                f"the event names workspace {claim!r}{whose}; this endpoint receives workspace "
                f"{name!r} ({known!r})",
            )
        owner = self.taken.get(claim)
        if owner is not None:
            return None, (
                WORKSPACE_MISMATCH,
                f"the event names workspace {claim!r}, which is workspace {owner!r}'s; this "
                f"endpoint receives workspace {name!r}",
            )
        self.workspace_id = self.learned = claim
        return claim, None
