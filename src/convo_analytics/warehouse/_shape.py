"""Where a service puts what the typed tables hold: the column sources of one extraction.

The typed tables name the sandbox's fields as their columns' sources; a
service that names them otherwise (``sentAt`` for a message's time,
``csat.score`` for the feedback rating) or keeps a detail's transcript
under another key (``transcript``) is loaded through a :class:`LoadShape`
built from the configured and detected field paths. The load statements
are generated from the shape, so a foreign service costs nothing more to
load than the sandbox.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from convo_analytics.warehouse._sql import _structure
from convo_analytics.warehouse._tables import (
    CONVERSATION_ESCALATIONS,
    CONVERSATION_GUARDRAIL_EVENTS,
    CONVERSATIONS,
    LEADS,
    MESSAGES,
    SERVICE_SUMMARIES,
    Table,
)

__all__ = ["DETAIL_LISTS", "FIELD_TABLES", "LoadShape", "field_key", "source_path"]

#: The typed tables whose columns come from the service's records, by name.
FIELD_TABLES: dict[str, Table] = {
    t.name: t for t in (CONVERSATIONS, MESSAGES, LEADS, CONVERSATION_ESCALATIONS,
                        CONVERSATION_GUARDRAIL_EVENTS, SERVICE_SUMMARIES)
}  # fmt: skip
#: The lists nested in a conversation's detail: the child table and the sandbox's key for it.
DETAIL_LISTS: dict[str, str] = {
    MESSAGES.name: "messages",
    CONVERSATION_ESCALATIONS.name: "escalations",
    CONVERSATION_GUARDRAIL_EVENTS.name: "guardrailEvents",
}


def field_key(table: str, column: str) -> str:
    """The ``[extract.fields]`` key of a typed column: ``messages.created_at``."""
    return f"{table}.{column}"


def source_path(source: str | None) -> str | None:
    """A column's source as a dotted path (``feedback.comment``), None when it has none."""
    return source.removeprefix("$.") if source else None


@dataclass(frozen=True)
class LoadShape:
    """The typed tables with each column's source as this service names it.

    ``fields`` maps ``table.column`` to a dotted path in the record (an empty
    path: the service has no such field, the column stays NULL); ``lists``
    maps a child table to the key of the detail record holding its items
    (empty: the detail has none). What is not given keeps the sandbox's name.
    """

    fields: Mapping[str, str] = field(default_factory=dict)
    lists: Mapping[str, str] = field(default_factory=dict)

    def table(self, name: str) -> Table:
        """The typed table ``name`` with its columns' sources as this service names them."""
        return self._tables[name]

    @cached_property
    def _tables(self) -> dict[str, Table]:
        out = {}
        for name, table in FIELD_TABLES.items():
            columns = []
            for col in table.columns:
                path = self.fields.get(field_key(name, col.name))
                if path is None or col.source is None:
                    columns.append(col)
                else:
                    columns.append(replace(col, source=f"$.{path}" if path else None))
            out[name] = replace(table, columns=tuple(columns))
        return out

    def list_key(self, child: str) -> str:
        """The detail record's key holding the items of child table ``child`` ("": none)."""
        return self.lists.get(child, DETAIL_LISTS[child])

    @cached_property
    def conversation_structure(self) -> dict[str, Any]:
        """How a listed conversation is parsed for its typed columns."""
        return _structure(self.table(CONVERSATIONS.name).columns)

    @cached_property
    def detail_lists(self) -> dict[str, str]:
        """The detail's list keys that are staged flat, each to its child table's name."""
        return {key: child for child in DETAIL_LISTS if (key := self.list_key(child))}

    @cached_property
    def detail_structure(self) -> dict[str, Any]:
        """A conversation's detail parsed once, while staging: its typed columns and its
        lists (staged as flat tables of their own, see ``stage_records``); a list's key may
        be a path (``relationships.messages.data``), parsed where it is."""
        out = copy.deepcopy(self.conversation_structure)
        for key, child in self.detail_lists.items():
            *parents, last = key.split(".")
            node = out
            for part in parents:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):  # a typed column reads it whole: left there
                    break
            else:
                node[last] = [_structure(self.table(child).columns)]
        return out

    @cached_property
    def children(self) -> tuple[tuple[Table, str], ...]:
        """Each child table present in the details, with the name its items are staged under."""
        return tuple((self.table(child), child) for child in self.detail_lists.values())


#: The sandbox's shape: every column under the name the sandbox gives it.
DEFAULT_SHAPE = LoadShape()
