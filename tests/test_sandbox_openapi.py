"""schemathesis against /openapi.json over real HTTP: no 5xx, nothing outside the schema.

Each operation of the published schema is fuzzed with schemathesis' strategies,
in both positive and negative generation modes, and every response is checked
by ``call_and_validate`` (status codes, content types, response schemas).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from conftest import ACME_KEY, make_settings
from convo_analytics._serving import ServerThread
from convo_analytics.sandbox import Sandbox, create_app

AUTH = {"Authorization": f"Bearer {ACME_KEY}"}
#: "No 5xx and no response outside the schema". Whether a schema-valid query is
#: accepted is not checked: an opaque cursor or a date string can be
#: well-formed for the schema and still be refused with a documented 400.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


@pytest.fixture(scope="module")
def api_schema() -> Iterator[Any]:
    sandbox = Sandbox(make_settings(conversations=60))
    with ServerThread(create_app(sandbox)) as server:
        yield schemathesis.openapi.from_url(server.url + "/openapi.json")


def _operations(schema: Any) -> list[Any]:
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_the_sandbox_keeps_to_its_published_schema(api_schema: Any, mode: GenerationMode) -> None:
    operations = _operations(api_schema)
    assert len(operations) >= 8
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None
        )
        def check(case: Any) -> None:
            response = case.call(headers=AUTH)
            case.validate_response(response, checks=CHECKS)

        check()


def test_the_schema_describes_every_endpoint_of_the_read_side(api_schema: Any) -> None:
    raw = api_schema.raw_schema
    paths = set(raw["paths"])
    assert {
        "/v1/conversations",
        "/v1/conversations/{conversation_id}",
        "/v1/leads",
        "/v1/analytics/summary",
        "/v1/webhooks",
    } <= paths
    assert "bearer" in str(raw["components"]["securitySchemes"]).lower()
    assert not any(p.startswith("/_sandbox") for p in paths)
