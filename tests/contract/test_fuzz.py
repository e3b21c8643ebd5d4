"""Schema fuzzing: schemathesis generates requests from our own OpenAPI document for every endpoint.

Checks: never a 5xx, and every 4xx is problem+json with a status and, for validation errors, the fields.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import schemathesis

# schemathesis imports its OpenAPI loaders and its transports lazily (inside `from_asgi`, and inside the first
# `case.call()`), and it and hypothesis import some generation modules lazily too (the body overrides and
# dictionaries, deep inside hypothesis' generation; the regex and flat-map strategies, the optimiser). In a
# fresh venv those are compiled at that depth, where CPython 3.11.7's compiler intermittently fails with
# "SystemError: AST constructor recursion depth mismatch" (seen in CI). Importing them here, at
# collection, compiles them at a shallow stack. Every module this test imported after collection is here.
import schemathesis.specs.openapi.schemas
import schemathesis.transport.asgi
import schemathesis.transport.requests
import schemathesis.transport.wsgi
from hypothesis import HealthCheck, given, settings

from hybridrag.http.app import create_app
from hybridrag.pipeline.engine import SearchEngine
from hybridrag.pipeline.settings import Settings

for _lazy in (
    "hypothesis.internal.conjecture.optimiser",
    "hypothesis.strategies._internal.flatmapped",
    "hypothesis.strategies._internal.regex",
    "schemathesis.generation.body_overrides",
    "schemathesis.generation.dictionaries",
):
    importlib.import_module(_lazy)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fuzz_app(sample_index, embedder):  # type: ignore[no-untyped-def]
    config = Settings(index_dir=sample_index, embedding_model="minilm", reload_interval_s=0, _env_file=None)  # type: ignore[call-arg]
    engine = SearchEngine(config, embedder=embedder)
    engine.start()
    return create_app(config, engine)


def _problem_shape(response: Any) -> None:
    status = response.status_code
    assert status < 500, f"{status}: {response.text[:500]}"
    if status >= 400 and status != 405:
        assert response.headers["content-type"][0].startswith("application/problem+json"), response.headers
        body = response.json()
        assert body["status"] == status and body["title"]
        if status == 422:
            assert body["errors"] and all({"path", "message", "code"} <= set(e) for e in body["errors"])


def test_every_endpoint_survives_generated_input(fuzz_app: Any) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzz_app)
    operations = [result.ok() for result in schema.get_all_operations()]
    paths = {op.path for op in operations}
    assert {
        "/v1/search",
        "/search",
        "/v1/search/batch",
        "/v1/documents/{doc_id}",
        "/v1/chunks/{chunk_id}",
    } <= paths
    seen: dict[str, set[int]] = {}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case: Any) -> None:
            response = case.call()
            seen.setdefault(case.operation.path, set()).add(response.status_code)
            _problem_shape(response)

        check()
    # Generated input reached both the happy path and the validators (the fuzzing is not vacuous).
    assert {200, 422} <= seen["/v1/search"], seen
    assert 200 in seen["/v1/search/batch"] or 422 in seen["/v1/search/batch"], seen
    print(seen)
