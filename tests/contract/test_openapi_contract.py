"""The OpenAPI document served at /openapi.json checked against the Zod contract, field by field.

CONTRACT below is a transcription of `search-zod-schemas.md` (version 1.0.0): for each schema, each field's
kind, bounds, default and nullability. Fields we add beyond the contract must be optional.
"""

from __future__ import annotations

from typing import Any

import pytest

from hybridrag.schemas.openapi import contract_components, contract_document

N = "nullable"


def num(
    lo: float | None = None, hi: float | None = None, default: Any = ..., integer: bool = False, *flags: str
) -> dict[str, Any]:
    return {
        "kind": "integer" if integer else "number",
        "min": lo,
        "max": hi,
        "default": default,
        "flags": set(flags),
    }


def f(kind: str, default: Any = ..., *flags: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "default": default, "flags": set(flags), **extra}


UNIT = num(0, 1)
CONTRACT: dict[str, dict[str, dict[str, Any]]] = {
    "DateRange": {"start": f("date-time", ..., N), "end": f("date-time", ..., N)},
    "SearchWeights": {"keyword": UNIT, "semantic": UNIT, "graph": UNIT},
    "SearchFilters": {
        "fileIds": f("array", ..., N),
        "entityTypes": f("array", ..., N),
        "dateRange": f("ref:DateRange", ..., N),
        "minRelevance": num(0, 1, 0.3),
    },
    "SearchOptions": {
        "limit": num(1, 100, 20, True),
        "offset": num(0, None, 0, True),
        "includeMetadata": f("boolean", True),
        "includeHighlights": f("boolean", True),
        "rerankEnabled": f("boolean", True),
        "cragEnabled": f("boolean", False),
        "strategies": f("array", ["hybrid"], min_items=1, enum=["keyword", "semantic", "graph", "hybrid"]),
        "weights": f("ref:SearchWeights", {"keyword": 0.35, "semantic": 0.35, "graph": 0.3}),
    },
    "SearchQuery": {
        "text": f("string", ..., min_length=1, max_length=1000),
        "type": f("enum", ..., enum=["local", "global", "relationship", "hybrid"]),
        "embedding": f("array", ..., N),
        "filters": f("ref:SearchFilters"),
        "options": f("ref:SearchOptions"),
    },
    "QueryClassification": {
        "originalQuery": f("string"),
        "type": f("enum", enum=["local", "global", "relationship", "hybrid"]),
        "confidence": UNIT,
        "extractedEntities": f("array"),
        "suggestedWeights": f("ref:SearchWeights"),
        "expandedQueries": f("array"),
    },
    "HighlightOffset": {"start": num(0, None, ..., True), "end": num(0, None, ..., True)},
    "Highlight": {"field": f("string"), "fragment": f("string"), "offsets": f("array")},
    "SearchResultContent": {
        "text": f("string"),
        "summary": f("string", ..., N),
        "contextBefore": f("string", ..., N),
        "contextAfter": f("string", ..., N),
    },
    "CRAGScore": {
        "relevance": f("enum", enum=["correct", "incorrect", "ambiguous"]),
        "confidence": UNIT,
        "needsWebSearch": f("boolean"),
        "refinedQuery": f("string", ..., N),
    },
    "RelevanceScore": {
        "combined": UNIT,
        "keyword": UNIT,
        "semantic": UNIT,
        "graph": UNIT,
        "rerank": num(0, 1, ..., False, N),
        "crag": f("ref:CRAGScore", ..., N),
    },
    "SearchResultSources": {
        "chunkId": f("string", ..., N),
        "fileId": f("string", ..., N),
        "entityIds": f("array"),
        "communityId": f("string", ..., N),
        "relationIds": f("array"),
    },
    "SearchResultItem": {
        "id": f("string"),
        "type": f("enum", enum=["chunk", "entity", "community"]),
        "score": UNIT,
        "relevance": f("ref:RelevanceScore"),
        "content": f("ref:SearchResultContent"),
        "highlights": f("array"),
        "sources": f("ref:SearchResultSources"),
    },
    "StrategyMetric": {
        "enabled": f("boolean"),
        "resultCount": num(0, None, ..., True),
        "processingTime": num(0),
        "topScore": UNIT,
    },
    "SearchStrategyMetrics": {
        "keyword": f("ref:StrategyMetric"),
        "semantic": f("ref:StrategyMetric"),
        "graph": f("ref:StrategyMetric"),
    },
    "SearchResult": {
        "query": f("ref:SearchQuery"),
        "results": f("array"),
        "totalCount": num(0, None, ..., True),
        "processingTime": num(0),
        "strategies": f("ref:SearchStrategyMetrics"),
    },
    "RRFConfig": {"k": num(1, 1000, 60, True), "normalizeScores": f("boolean", True)},
    "RerankConfig": {
        "enabled": f("boolean", True),
        "model": f("string", "cross-encoder/ms-marco-MiniLM-L-6-v2"),
        "topK": num(1, 100, 50, True),
        "batchSize": num(1, 32, 16, True),
    },
}
# Response-side schemas whose every contract field must be required (requests may omit defaulted ones).
RESPONSE_SIDE = {
    "QueryClassification",
    "HighlightOffset",
    "Highlight",
    "SearchResultContent",
    "CRAGScore",
    "RelevanceScore",
    "SearchResultSources",
    "SearchResultItem",
    "StrategyMetric",
    "SearchStrategyMetrics",
    "SearchResult",
}


@pytest.fixture(scope="module")
def components(client) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    doc = client.get("/openapi.json").json()
    assert doc["info"]["x-schema-version"] == "1.0.0"
    return doc["components"]["schemas"]


def _unwrap(prop: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The non-null branch of a property and whether null is allowed."""
    if "anyOf" in prop:
        branches = [b for b in prop["anyOf"] if b.get("type") != "null"]
        nullable = len(branches) < len(prop["anyOf"])
        assert len(branches) == 1, prop
        return {**branches[0], **{k: v for k, v in prop.items() if k != "anyOf"}}, nullable
    return prop, False


def _enum_of(schema: dict[str, Any], components: dict[str, Any]) -> list[str] | None:
    if "enum" in schema:
        return list(schema["enum"])
    if "$ref" in schema:
        return _enum_of(components[schema["$ref"].rsplit("/", 1)[1]], components)
    return None


@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_schema_matches_contract(name: str, components: dict[str, Any]) -> None:
    schema = components[name]
    props = schema["properties"]
    expected = CONTRACT[name]
    assert set(expected) <= set(props), f"{name} lacks {set(expected) - set(props)}"
    required = set(schema.get("required", []))
    extras = set(props) - set(expected)
    assert not (extras & required), f"{name}: added fields must be optional: {extras & required}"
    assert schema.get("additionalProperties") is False, f"{name} must reject unknown fields"
    for field, spec in expected.items():
        prop, nullable = _unwrap(props[field])
        where = f"{name}.{field}"
        assert nullable == (N in spec["flags"]), f"{where}: nullable should be {N in spec['flags']}"
        kind = spec["kind"]
        if kind.startswith("ref:"):
            assert prop.get("$ref", "").endswith("/" + kind[4:]), where
        elif kind == "enum":
            assert _enum_of(prop, components) == spec["enum"], where
        elif kind == "date-time":
            assert prop.get("format") == "date-time", where
        else:
            assert prop.get("type") == kind, f"{where}: type {prop.get('type')} != {kind}"
        if kind in ("number", "integer"):
            assert prop.get("minimum") == spec["min"], f"{where}: minimum"
            assert prop.get("maximum") == spec["max"], f"{where}: maximum"
        if "min_length" in spec:
            assert (prop.get("minLength"), prop.get("maxLength")) == (
                spec["min_length"],
                spec["max_length"],
            ), where
        if "min_items" in spec:
            assert prop.get("minItems") == spec["min_items"], where
            assert _enum_of(prop["items"], components) == spec["enum"], where
        if spec["default"] is not ...:
            assert prop.get("default") == spec["default"], f"{where}: default {prop.get('default')!r}"
        if name in RESPONSE_SIDE:
            assert field in required, f"{where} must be required in responses"


def test_request_body_and_responses_are_documented(client) -> None:  # type: ignore[no-untyped-def]
    doc = client.get("/openapi.json").json()
    for path in ("/v1/search", "/search"):
        op = doc["paths"][path]["post"]
        assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/SearchRequest")
        assert op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
            "/SearchResult"
        )
        assert "422" in op["responses"]
    request = doc["components"]["schemas"]["SearchRequest"]
    assert request["required"] == ["text"]
    assert set(request["properties"]) == {
        "text",
        "type",
        "embedding",
        "filters",
        "options",
        "rrfConfig",
        "rerankConfig",
        "fusion",
    }


def test_standalone_contract_document_has_every_schema() -> None:
    doc = contract_document()
    assert doc["version"] == "1.0.0"
    assert set(CONTRACT) <= set(doc["$defs"])
    assert set(CONTRACT) <= set(contract_components())
