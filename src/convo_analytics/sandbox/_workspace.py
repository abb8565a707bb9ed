"""A workspace of the sandbox: its conversations and leads, and where its events go."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from convo_analytics.sandbox._activity import Activity
from convo_analytics.sandbox._model import Conversation, Event, EventFactory, Lead
from convo_analytics.sandbox._store import Collection, Filter, Ordering

CONVERSATION_ORDERINGS = (
    Ordering("updatedAt", lambda c: c.updated_at),
    Ordering("createdAt", lambda c: c.created_at),
)
LEAD_ORDERINGS = (
    Ordering("updatedAt", lambda lead: lead.updated_at),
    Ordering("createdAt", lambda lead: lead.created_at),
)
TIME_FILTERS = (
    Filter("updatedSince", "updatedAt", "ge", "updated at or after this instant"),
    Filter("updatedBefore", "updatedAt", "lt", "updated before this instant"),
    Filter("createdSince", "createdAt", "ge", "created at or after this instant"),
    Filter("createdBefore", "createdAt", "lt", "created before this instant"),
)
CONVERSATION_FILTERS = (
    *TIME_FILTERS,
    Filter("channel", "channel", "eq", "only this channel, e.g. web"),
    Filter("status", "status", "eq", "open, resolved or abandoned"),
    Filter("escalated", "escalated", "eq", "true or false"),
    Filter("externalUserId", "externalUserId", "eq", "only this end user's conversations"),
)
LEAD_FILTERS = (
    *TIME_FILTERS,
    Filter("minScore", "score", "min", "score at or above this value (0-100)"),
    Filter("intent", "intent", "eq", "only this intent, e.g. pricing"),
    Filter("status", "status", "eq", "qualified (default), scored, or any"),
)


@dataclass
class Workspace:
    """One tenant. Its ``lock`` serialises changes; reads see published versions only."""

    id: str
    name: str
    events: EventFactory
    activity: Activity
    conversations: Collection[Conversation] = field(init=False)
    leads: Collection[Lead] = field(init=False)
    sinks: list[Callable[[list[Event]], None]] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        self.conversations = Collection(
            CONVERSATION_ORDERINGS, Conversation.summary_json, lambda c: c.id
        )
        base = self.events.app_base
        self.leads = Collection(LEAD_ORDERINGS, lambda lead: lead.to_json(base), lambda x: x.id)

    @classmethod
    def create(cls, name: str, app_base: str, seed: int, event_fields: str = "both") -> Workspace:
        events = EventFactory(app_base=app_base, fields=event_fields)
        activity = Activity(events=events, rng=random.Random(f"live:{seed}:{name}"))
        return cls(id=f"ws_{name}", name=name, events=events, activity=activity)

    def load_history(self, history: Iterable[Conversation]) -> None:
        convs = list(history)
        self.conversations.load(convs)
        self.leads.load(c.lead for c in convs if c.lead is not None)

    def get(self, conversation_id: str) -> Conversation | None:
        return self.conversations.records.get(conversation_id)

    def add(self, conv: Conversation, events: list[Event]) -> None:
        """Publish a new conversation and announce what happened."""
        with self.lock:
            self.conversations.after_change(conv, None)
            if conv.lead is not None:
                self.leads.after_change(conv.lead, None)
        self.publish(events)

    def change(
        self, conv: Conversation, mutate: Callable[[Conversation], list[Event]]
    ) -> list[Event]:
        """Apply ``mutate`` to a conversation, publish the new versions and announce events."""
        with self.lock:
            before = self.conversations.before_change(conv.id)
            lead_before = self.leads.before_change(conv.lead.id) if conv.lead else None
            events = mutate(conv)
            self.conversations.after_change(conv, before)
            lead = conv.lead
            if lead is not None and (
                lead_before is None or self.leads.serialize(lead) != lead_before
            ):
                self.leads.after_change(lead, lead_before)
        self.publish(events)
        return events

    def publish(self, events: list[Event]) -> None:
        if events:
            for sink in self.sinks:
                sink(events)
