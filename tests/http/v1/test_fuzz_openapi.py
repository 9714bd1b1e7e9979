"""A bounded schemathesis run over `/v1/openapi.json` against a real server, with a key and
real objects for half the cases' ids: no 5xx, every status and header documented, every
body matching its schema (positive and negative cases)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from core.http.api_app import create_api_app
from tests.support.api import WEBHOOK
from tests.support.fuzzing import served, tenant_with_form
from tests.support.peers import closed_port

EXAMPLES_PER_OPERATION = 15
# The operations are fuzzed in this many tests (every PARTS-th operation each), so that the
# parallel suite's workers share them rather than one worker running them all.
PARTS = 4
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


def _objects(base: str, headers: dict[str, str], form: str) -> dict[str, str]:
    with httpx.Client(base_url=base, headers=headers) as client:
        # A closed loopback port: a test send fails at once instead of reaching out.
        hook = {**WEBHOOK, "config": {"url": f"http://127.0.0.1:{closed_port()}/hook"}}
        destination = client.post("/v1/destinations", json=hook).json()["id"]
        route = client.post(f"/v1/forms/{form}/routes", json={"destination_id": destination})
    return {"form_id": form, "destination_id": destination, "route_id": route.json()["id"]}


@pytest.mark.slow
@pytest.mark.parametrize("part", range(PARTS))
def test_fuzz_openapi__no_5xx_and_no_schema_mismatch(
    db_url: str, tmp_path: Path, part: int
) -> None:
    tenant, form = tenant_with_form(db_url)
    failures: dict[tuple[str, str], str] = {}
    cases = 0
    with served(db_url, tmp_path, create_api_app) as base:
        ids = _objects(base, tenant.headers, form)
        # Fetched here, with room for the parts being served beside each other on a busy
        # machine (schemathesis's own fetch gives up after 10 s).
        document = httpx.get(f"{base}/v1/openapi.json", timeout=120).json()
        schema = schemathesis.openapi.from_dict(document)
        operations = [result.ok() for result in schema.get_all_operations()]
        mine = operations[part::PARTS]
        for operation in mine:
            known = {k: v for k, v in ids.items() if "{" + k + "}" in operation.path}
            strategies = [
                operation.as_strategy(mode, path_parameters=params)
                for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
                for params in ([None, known] if known else [None])
            ]

            @settings(
                max_examples=EXAMPLES_PER_OPERATION * len(strategies),
                deadline=None,
                database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=st.one_of(*strategies))
            def call(case: Any) -> None:
                nonlocal cases
                cases += 1
                try:
                    case.call_and_validate(base_url=base, headers=tenant.headers, checks=CHECKS)
                except BaseException as exc:  # schemathesis raises a group of failures
                    if isinstance(exc, KeyboardInterrupt):
                        raise
                    failures.setdefault((case.operation.label, type(exc).__name__), str(exc)[:2000])

            call()
    print(f"schemathesis: {cases} cases over {len(mine)} /v1 operations, {len(failures)} failures")
    assert not failures, "\n\n".join(f"{k}: {v}" for k, v in failures.items())
    # At least 300 cases over all the operations, shared by the parts as the operations are.
    assert cases >= math.ceil(300 * len(mine) / len(operations))
