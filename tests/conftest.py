"""Shared fixtures: real sandboxes served over HTTP on 127.0.0.1, on free ports."""

from __future__ import annotations

import os
import sys

# One thread each for OpenMP (scikit-learn's k-means) and OpenBLAS (numpy), here and in
# every child process the tests start: `make test` runs two workers on two cores, and
# their busy-waiting thread pools fought over them (topic discovery took several times as
# long; decision D-TEST-THREADS). Results do not depend on the thread count. Set before
# numpy is first imported, which reads them once.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from convo_analytics._serving import ServerThread
from convo_analytics.sandbox import Sandbox, SandboxSettings, create_app

#: A fixed end of history, so that tests see the same data on every run.
UNTIL_MS = 1_795_000_000_000  # 2026-11-18T...Z
ACME_KEY = "sk_test_acme_0123456789"
ACME_KEY_2 = "sk_test_acme_second_key"
GLOBEX_KEY = "sk_test_globex_987654321"


@pytest.fixture(scope="session", autouse=True)
def _audit_log_apart(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Commands run in this process record their audited actions (audit.enabled is on by
    default) in a throwaway log, never in the checkout's data/audit/."""
    os.environ.setdefault("CONVO_AUDIT_FILE", str(tmp_path_factory.mktemp("audit") / "audit.jsonl"))


@pytest.fixture(autouse=True)
def _streamlit_components_scanned_once() -> None:
    """Each new AppTest scans every installed package's metadata for Streamlit components
    on its first run (~0.3-1 s each; the served app scans once, at its start). The
    packages do not change while the tests run: the first scan's answer is kept for the
    process. Only where a test module has imported AppTest."""
    if "streamlit.testing.v1" not in sys.modules:
        return
    from streamlit.components.v2 import manifest_scanner

    if getattr(manifest_scanner.scan_component_manifests, "scanned_once", False):
        return
    found = manifest_scanner.scan_component_manifests()

    def scan(max_workers: int | None = None) -> list[Any]:
        return list(found)

    scan.scanned_once = True  # type: ignore[attr-defined]
    manifest_scanner.scan_component_manifests = scan


def make_settings(**overrides: Any) -> SandboxSettings:
    base: dict[str, Any] = {
        "seed": 7,
        "conversations": 300,
        "days": 14,
        "until_ms": UNTIL_MS,
        "rate_limit": "none",
        "workspaces": [("acme", ACME_KEY), ("acme", ACME_KEY_2), ("globex", GLOBEX_KEY)],
        "admin_token": "adm_test_token",
        "crawl_scope": "loopback",  # tests send traffic to 127.0.0.1 only
    }
    base.update(overrides)
    return SandboxSettings(**base)


class RunningSandbox:
    def __init__(self, sandbox: Sandbox, server: ServerThread) -> None:
        self.sandbox = sandbox
        self.server = server
        self.url = server.url

    def client(self, key: str = ACME_KEY, **kwargs: Any) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {key}"}, timeout=30, **kwargs
        )

    def admin(self, path: str, body: dict[str, Any], method: str = "POST") -> dict[str, Any]:
        r = httpx.request(
            method,
            self.url + path,
            json=body,
            headers={"Authorization": f"Bearer {self.sandbox.admin_token}"},
            timeout=30,
        )
        r.raise_for_status()
        result: dict[str, Any] = r.json()
        return result


@pytest.fixture
def start_sandbox() -> Iterator[Callable[..., RunningSandbox]]:
    """Start a sandbox with settings of the test's choosing; stopped after the test."""
    servers: list[ServerThread] = []

    def start(**overrides: Any) -> RunningSandbox:
        sandbox = Sandbox(make_settings(**overrides))
        server = ServerThread(create_app(sandbox)).start()
        servers.append(server)
        return RunningSandbox(sandbox, server)

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def shared_sandbox() -> Iterator[RunningSandbox]:
    """One read-mostly sandbox for a test module (tests must not change its data)."""
    sandbox = Sandbox(make_settings())
    with ServerThread(create_app(sandbox)) as server:
        yield RunningSandbox(sandbox, server)


def page_all(
    client: httpx.Client, path: str, params: dict[str, Any] | None = None, max_pages: int = 10_000
) -> list[dict[str, Any]]:
    """Every record of a list endpoint, following nextCursor (bounded)."""
    out: list[dict[str, Any]] = []
    query = dict(params or {})
    for _ in range(max_pages):
        r = client.get(path, params=query)
        r.raise_for_status()
        body = r.json()
        out.extend(body["data"])
        if not body["hasMore"]:
            return out
        query = {"cursor": body["nextCursor"], "limit": query.get("limit", 50)}
    raise AssertionError(f"{path} did not finish within {max_pages} pages")


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A PostgreSQL server of Debian's packages on a free loopback port, for the session
    (started only by the tests that ask for it); each test makes its own database."""
    from postgres_support import INSTALL_HINT, postgres_bin, running_postgres

    if postgres_bin() is None:
        pytest.fail(INSTALL_HINT)
    with running_postgres() as server:
        yield server
