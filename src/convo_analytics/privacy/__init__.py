"""Personal data in free text: found, then masked or replaced by a keyed hash (issue 30).

Emails, phone numbers (libphonenumber), payment card numbers (Luhn and issuer
ranges), IBANs (mod-97) and IP addresses (``ipaddress``), and the installation's own
``privacy.extra_patterns``, are found in text (:class:`Detector`) and replaced
(:class:`Scrubber`): ``[email]`` in ``mask`` mode, ``[email:1a2b3c4d5e6f]`` in
``hash`` mode, a keyed hash under the workspace's own key, so equal values join within
a workspace and never across two. The findings (kind and keyed hash, never the value)
come back beside the text, for an erasure to find the person later.

    scrubber = Scrubber.of(settings, workspace_id)
    scrubbed = scrubber.scrub("write to ann@example.com")   # Scrubbed(text, findings)
    payload = scrubber.scrub_payload(raw_record)             # every string of a JSON tree

Names and postal addresses are not found (D-PRIVACY-SCRUB says why and what else is
not). Nothing here downloads anything. Extract and the webhook path call it before
anything is written (D-PRIVACY-SCRUB-AT-LOAD).
"""

from convo_analytics.privacy._config import MODES, Mode, PrivacyConfig, privacy_config
from convo_analytics.privacy._detect import Detector
from convo_analytics.privacy._extra import ExtraPattern, parse_extra_patterns
from convo_analytics.privacy._scrub import (
    Finding,
    Scrubbed,
    ScrubbedPayload,
    Scrubber,
    is_identifier_key,
    local_mac_key,
)
from convo_analytics.privacy._spans import BUILTIN_KINDS, Span
from convo_analytics.privacy._subject import (
    SUBJECT_KINDS,
    SubjectHasher,
    SubjectKind,
    names_suppressed,
)

__all__ = [
    "BUILTIN_KINDS",
    "MODES",
    "SUBJECT_KINDS",
    "Detector",
    "ExtraPattern",
    "Finding",
    "Mode",
    "PrivacyConfig",
    "Scrubbed",
    "ScrubbedPayload",
    "Scrubber",
    "Span",
    "SubjectHasher",
    "SubjectKind",
    "is_identifier_key",
    "local_mac_key",
    "names_suppressed",
    "parse_extra_patterns",
    "privacy_config",
]
