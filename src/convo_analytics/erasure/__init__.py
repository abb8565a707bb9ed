"""Erasure and access requests: one person of one workspace, in every store (issue 30).

``erase_person`` removes a person's records (found by ``externalUserId`` or email,
``_person``) from the warehouse, the marts and the published snapshots, adds them to
the suppression list extract and ingest honour, and certifies it in ``erasure_log``
(D-ERASURE). ``export_person`` hands out everything the warehouse holds about them
(``convo export person``), reading the same list of tables (``_holders``).
"""

from convo_analytics.erasure._access import PersonExport, export_person, person_export
from convo_analytics.erasure._erase import ErasureResult, erase_person, resolve_workspace
from convo_analytics.erasure._holders import HOLDERS, Holder
from convo_analytics.erasure._person import Found, PersonRequest, find_person

__all__ = [
    "HOLDERS",
    "ErasureResult",
    "Found",
    "Holder",
    "PersonExport",
    "PersonRequest",
    "erase_person",
    "export_person",
    "find_person",
    "person_export",
    "resolve_workspace",
]
