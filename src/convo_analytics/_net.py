"""Network address rules shared by the client, the receiver and the sandbox."""

from __future__ import annotations

import ipaddress


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback.

    Plain HTTP is accepted only to such hosts; everything else needs TLS.
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
