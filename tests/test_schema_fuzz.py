"""Schema fuzzing in the suite: requests generated from the API's own OpenAPI spec by schemathesis,
valid and invalid, against the app over the demo index. No response may be a 5xx, and every response must be
one the spec documents (status, content type, body schema).

A bounded, deterministic budget (``EXAMPLES`` per operation and mode, ~20 s); ``bench/fuzz_api.py`` runs the
same checks with thousands of requests against a live server.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.main import create_app

EXAMPLES = 40
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def schema(demo_settings):
    from ragnarok.judge.proxy import cosines

    # MiniLM (the proxy judge's, the embedding reranker's) loads on first use: over schemathesis's 10 s read
    # timeout on a loaded machine, so it is loaded before the first request rather than inside one
    cosines(["warm"], ["up"])
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(demo_settings, arena=False))


def test_generated_requests_get_documented_answers_and_no_5xx(schema):
    failures: list[str] = []
    counts: dict[int, int] = {}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def fuzz(case: schemathesis.Case) -> None:
                response = case.call()
                counts[response.status_code] = counts.get(response.status_code, 0) + 1
                try:
                    case.validate_response(response, checks=CHECKS)
                except FailureGroup as exc:  # what failed, and a curl command that repeats it
                    failures.append(f"{operation.label} ({mode.value}): {exc}"[:3000])

            try:
                fuzz()
            except Unsatisfiable:  # no invalid request exists for an operation without parameters
                assert mode is GenerationMode.NEGATIVE
    assert not failures, f"{len(failures)} failing responses; the first:\n" + "\n\n".join(failures[:3])
    assert sum(counts.values()) > 300 and not any(status >= 500 for status in counts), counts
