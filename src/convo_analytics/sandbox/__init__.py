"""The sandbox: a local Conversational Assistant Service that everything runs against.

Public surface: build a :class:`Sandbox` from :class:`SandboxSettings`, make its
ASGI app with :func:`create_app`, and serve it (``convo sandbox serve``) or run
it in a thread (:class:`convo_analytics._serving.ServerThread`) in tests.
"""

from convo_analytics.sandbox._app import create_app
from convo_analytics.sandbox._faults import FaultSettings
from convo_analytics.sandbox._generate import HistorySpec, Incident, generate_history
from convo_analytics.sandbox._history_archive import write_history_archive
from convo_analytics.sandbox._ratelimit import RateLimitPolicy
from convo_analytics.sandbox._service import Sandbox, SandboxSettings
from convo_analytics.sandbox._summary import summarize

__all__ = [
    "FaultSettings",
    "HistorySpec",
    "Incident",
    "RateLimitPolicy",
    "Sandbox",
    "SandboxSettings",
    "create_app",
    "generate_history",
    "summarize",
    "write_history_archive",
]
