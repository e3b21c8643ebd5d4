"""Every validation rule of the contract, valid and invalid, with messages in Japanese and English."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import chunk_item_wire
from pydantic import BaseModel, ValidationError

from hybridrag.schemas.errors import pick_language, translate_errors
from hybridrag.schemas.search import (
    CRAGScore,
    DateRange,
    HighlightOffset,
    QueryClassification,
    RelevanceScore,
    RerankConfig,
    RRFConfig,
    SearchFilters,
    SearchOptions,
    SearchQuery,
    SearchRequest,
    SearchResultItem,
    SearchWeights,
    StrategyMetric,
)


def errors(model: type[BaseModel], data: Any, lang: str = "ja") -> list[tuple[str, str, str]]:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data) if not isinstance(data, str) else model.model_validate_json(data)
    return [(e.path, e.code, e.message) for e in translate_errors(info.value, lang)]  # type: ignore[arg-type]


# -- enums
@pytest.mark.parametrize("value", ["local", "global", "relationship", "hybrid"])
def test_query_type_accepts_each_value(value: str) -> None:
    assert SearchRequest.model_validate({"text": "q", "type": value}).type == value


def test_query_type_rejects_other_values_with_contract_message() -> None:
    assert errors(SearchRequest, {"text": "q", "type": "semantic"}) == [
        (
            "type",
            "enum_query_type",
            "クエリタイプは local, global, relationship, hybrid のいずれかである必要があります",
        )
    ]
    assert errors(SearchRequest, {"text": "q", "type": "x"}, "en")[0][2] == (
        "Query type must be one of local, global, relationship, hybrid"
    )


@pytest.mark.parametrize("value", ["keyword", "semantic", "graph", "hybrid"])
def test_strategy_accepts_each_value(value: str) -> None:
    assert SearchOptions.model_validate({"strategies": [value]}).strategies == [value]


def test_strategy_rejects_other_values() -> None:
    assert errors(SearchOptions, {"strategies": ["keyword", "vector"]}) == [
        (
            "strategies[1]",
            "enum_search_strategy",
            "検索戦略は keyword, semantic, graph, hybrid のいずれかである必要があります",
        )
    ]
    assert errors(SearchOptions, {"strategies": ["vector"]}, "en")[0][2].startswith(
        "Search strategy must be one of"
    )


def test_result_type_enum() -> None:
    item = chunk_item_wire()
    assert SearchResultItem.model_validate(item).type == "chunk"
    for t in ("entity", "community"):
        assert SearchResultItem.model_validate({**item, "type": t}).type == t
    assert errors(SearchResultItem, {**item, "type": "doc"})[0] == (
        "type",
        "enum_search_result_type",
        "結果タイプは chunk, entity, community のいずれかである必要があります",
    )


# -- dateRange
def test_date_range_valid_and_open_ended() -> None:
    assert DateRange.model_validate({"start": "2024-01-01", "end": "2024-12-31"}).start is not None
    assert DateRange.model_validate({"start": "2024-01-01", "end": None}).end is None
    assert DateRange.model_validate({"start": None, "end": "2024-12-31T10:00:00Z"}).start is None
    assert DateRange.model_validate({"start": "2024-01-01", "end": "2024-01-01"})  # equal is allowed


def test_date_range_reversed_is_rejected() -> None:
    assert errors(DateRange, {"start": "2024-12-31", "end": "2024-01-01"}) == [
        ("", "date_range_order", "開始日は終了日以前である必要があります")
    ]
    assert errors(DateRange, {"start": "2024-12-31", "end": "2024-01-01"}, "en")[0][2] == (
        "Start date must be on or before end date"
    )


def test_date_range_mixed_zones_compare_correctly() -> None:
    # 2024-01-01T08:00+09:00 is 2023-12-31T23:00Z: before a naive (UTC) 2024-01-01.
    assert DateRange.model_validate({"start": "2024-01-01T08:00:00+09:00", "end": "2024-01-01"})
    assert errors(DateRange, {"start": "2024-01-01T10:00:00+09:00", "end": "2023-12-31T12:00:00Z"})


def test_date_range_bad_date() -> None:
    path, code, message = errors(DateRange, {"start": "not a date", "end": None})[0]
    assert path == "start" and code.startswith("datetime") and "ISO 8601" in message


# -- searchWeights
def test_weights_examples_from_the_seed() -> None:
    assert SearchWeights.model_validate({"keyword": 0.35, "semantic": 0.35, "graph": 0.3})
    assert SearchWeights.model_validate(
        {"keyword": 0.334, "semantic": 0.333, "graph": 0.333}
    )  # 0.999 within 0.01
    assert errors(SearchWeights, {"keyword": 0.5, "semantic": 0.5, "graph": 0.5}) == [
        ("", "weights_sum", "検索重みの合計は1.0である必要があります")
    ]
    assert errors(SearchWeights, {"keyword": 0.5, "semantic": 0.5, "graph": 0.5}, "en")[0][2] == (
        "Search weights must sum to 1.0"
    )


def test_weights_tolerance_is_strict() -> None:
    assert SearchWeights.model_validate({"keyword": 0.995, "semantic": 0.0, "graph": 0.0})  # |sum-1| = 0.005
    assert errors(SearchWeights, {"keyword": 0.98, "semantic": 0.0, "graph": 0.0})  # |sum-1| = 0.02


def test_weights_bounds() -> None:
    assert errors(SearchWeights, {"keyword": 1.2, "semantic": -0.2, "graph": 0.0}) == [
        ("keyword", "less_than_equal", "1以下である必要があります"),
        ("semantic", "greater_than_equal", "0以上である必要があります"),
    ]
    assert [e[2] for e in errors(SearchWeights, {"keyword": 1.2, "semantic": -0.2, "graph": 0.0}, "en")] == [
        "Must be less than or equal to 1",
        "Must be greater than or equal to 0",
    ]


def test_weights_nan_and_types() -> None:
    assert errors(SearchWeights, '{"keyword": NaN, "semantic": 0.5, "graph": 0.5}')[0][:2] == (
        "keyword",
        "finite_number",
    )
    assert errors(SearchWeights, {"keyword": "0.5", "semantic": 0.5, "graph": 0.0})[0] == (
        "keyword",
        "float_type",
        "数値である必要があります",
    )
    assert ("graph", "missing", "必須項目です") in errors(SearchWeights, {"keyword": 0.5, "semantic": 0.5})


# -- searchFilters
def test_filters_defaults_and_nullables() -> None:
    f = SearchFilters.model_validate({})
    assert (f.file_ids, f.entity_types, f.date_range, f.min_relevance) == (None, None, None, 0.3)
    f = SearchFilters.model_validate(
        {"fileIds": ["a.md"], "entityTypes": ["person"], "dateRange": None, "minRelevance": 0}
    )
    assert f.file_ids == ["a.md"] and f.min_relevance == 0


def test_filters_min_relevance_bounds() -> None:
    assert errors(SearchFilters, {"minRelevance": 1.5}) == [
        ("minRelevance", "less_than_equal", "1以下である必要があります")
    ]
    assert errors(SearchFilters, {"minRelevance": -0.1}, "en") == [
        ("minRelevance", "greater_than_equal", "Must be greater than or equal to 0")
    ]


def test_filters_types() -> None:
    assert errors(SearchFilters, {"fileIds": "a.md"})[0][:2] == ("fileIds", "list_type")
    assert errors(SearchFilters, {"entityTypes": [1]})[0] == (
        "entityTypes[0]",
        "string_type",
        "文字列である必要があります",
    )


# -- searchOptions
def test_options_defaults() -> None:
    o = SearchOptions.model_validate({})
    assert (
        o.limit,
        o.offset,
        o.include_metadata,
        o.include_highlights,
        o.rerank_enabled,
        o.crag_enabled,
    ) == (20, 0, True, True, True, False)
    assert o.strategies == ["hybrid"]
    assert (o.weights.keyword, o.weights.semantic, o.weights.graph) == (0.35, 0.35, 0.3)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"limit": 0}, ("limit", "greater_than_equal", "1以上である必要があります")),
        ({"limit": 101}, ("limit", "less_than_equal", "100以下である必要があります")),
        ({"limit": 2.5}, ("limit", "int_from_float", "整数である必要があります")),
        ({"offset": -1}, ("offset", "greater_than_equal", "0以上である必要があります")),
        ({"strategies": []}, ("strategies", "too_short", "1個以上の要素が必要です")),
        ({"includeMetadata": "yes"}, ("includeMetadata", "bool_type", "真偽値である必要があります")),
        ({"cragEnabled": 1}, ("cragEnabled", "bool_type", "真偽値である必要があります")),
        ({"limit": "10"}, ("limit", "int_type", "数値である必要があります")),
    ],
)
def test_options_bounds_japanese(data: dict[str, Any], expected: tuple[str, str, str]) -> None:
    assert errors(SearchOptions, data) == [expected]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"limit": 0}, "Must be greater than or equal to 1"),
        ({"limit": 101}, "Must be less than or equal to 100"),
        ({"strategies": []}, "Must contain at least 1 item(s)"),
        ({"includeHighlights": "no"}, "Must be a boolean"),
    ],
)
def test_options_bounds_english(data: dict[str, Any], message: str) -> None:
    assert errors(SearchOptions, data, "en")[0][2] == message


def test_options_boundaries_accepted() -> None:
    assert SearchOptions.model_validate({"limit": 1}).limit == 1
    assert SearchOptions.model_validate({"limit": 100, "offset": 10_000}).offset == 10_000


def test_options_nested_weights_error_path() -> None:
    assert errors(SearchOptions, {"weights": {"keyword": 1, "semantic": 1, "graph": 1}}) == [
        ("weights", "weights_sum", "検索重みの合計は1.0である必要があります")
    ]


# -- searchQuery / request
def test_request_text_bounds() -> None:
    assert errors(SearchRequest, {"text": ""}) == [
        ("text", "string_too_short", "1文字以上である必要があります")
    ]
    assert errors(SearchRequest, {"text": "x" * 1001}) == [
        ("text", "string_too_long", "1000文字以下である必要があります")
    ]
    assert errors(SearchRequest, {"text": "x" * 1001}, "en")[0][2] == "Must be at most 1000 characters"
    assert SearchRequest.model_validate({"text": "x" * 1000})
    assert errors(SearchRequest, {"text": "   "})[0][1] == "blank_text"
    assert errors(SearchRequest, {})[0] == ("text", "missing", "必須項目です")


def test_request_type_optional_and_defaults() -> None:
    r = SearchRequest.model_validate({"text": "q"})
    assert r.type is None and r.embedding is None
    assert r.options.limit == 20 and r.filters.min_relevance == 0.3
    assert r.rrf_config.k == 60 and r.rerank_config.top_k == 50


def test_request_rejects_unknown_fields_everywhere() -> None:
    assert errors(SearchRequest, {"text": "q", "foo": 1}) == [
        ("foo", "extra_forbidden", "不明なフィールドです")
    ]
    assert errors(SearchRequest, {"text": "q", "options": {"limitt": 5}}, "en") == [
        ("options.limitt", "extra_forbidden", "Unknown field")
    ]


def test_request_accepts_snake_and_camel_case() -> None:
    a = SearchRequest.model_validate({"text": "q", "options": {"includeMetadata": False}})
    b = SearchRequest.model_validate({"text": "q", "options": {"include_metadata": False}})
    assert a.options.include_metadata is b.options.include_metadata is False
    assert "includeMetadata" in a.to_wire()["options"]


def test_request_embedding() -> None:
    assert SearchRequest.model_validate({"text": "q", "embedding": [0.1, 0.2]}).embedding == [0.1, 0.2]
    assert errors(SearchRequest, {"text": "q", "embedding": []})[0][:2] == ("embedding", "too_short")
    assert errors(SearchRequest, '{"text": "q", "embedding": [1.0, Infinity]}')[0][:2] == (
        "embedding[1]",
        "finite_number",
    )
    assert errors(SearchRequest, {"text": "q", "embedding": ["a"]})[0][:2] == ("embedding[0]", "float_type")


def test_search_query_requires_type() -> None:
    assert ("type", "missing", "必須項目です") in errors(SearchQuery, {"text": "q"})


# -- result-side schemas
def test_highlight_offset_refinement() -> None:
    assert HighlightOffset.model_validate({"start": 0, "end": 1})
    assert errors(HighlightOffset, {"start": 3, "end": 3}) == [
        ("", "highlight_offset_order", "開始位置は終了位置より小さい必要があります")
    ]
    assert (
        errors(HighlightOffset, {"start": 5, "end": 2}, "en")[0][2]
        == "Start offset must be less than end offset"
    )
    assert errors(HighlightOffset, {"start": -1, "end": 2})[0][:2] == ("start", "greater_than_equal")


def test_crag_score() -> None:
    ok = {"relevance": "ambiguous", "confidence": 0.5, "needsWebSearch": True, "refinedQuery": None}
    assert CRAGScore.model_validate(ok).needs_web_search is True
    assert errors(CRAGScore, {**ok, "relevance": "maybe"})[0][:2] == ("relevance", "enum_crag_relevance")
    assert errors(CRAGScore, {**ok, "confidence": 2})[0][:2] == ("confidence", "less_than_equal")


def test_relevance_score_bounds() -> None:
    ok = {"combined": 1, "keyword": 0, "semantic": 0.5, "graph": 0, "rerank": None, "crag": None}
    assert RelevanceScore.model_validate(ok)
    for name in ("combined", "keyword", "semantic", "graph", "rerank"):
        assert errors(RelevanceScore, {**ok, name: 1.01})[0][:2] == (name, "less_than_equal")
    assert ("rerank", "missing", "必須項目です") in errors(
        RelevanceScore, {k: v for k, v in ok.items() if k != "rerank"}
    )


def test_strategy_metric_and_classification() -> None:
    assert StrategyMetric.model_validate(
        {"enabled": True, "resultCount": 0, "processingTime": 0, "topScore": 0}
    )
    assert errors(StrategyMetric, {"enabled": True, "resultCount": -1, "processingTime": 0, "topScore": 0})[
        0
    ][:2] == ("resultCount", "greater_than_equal")
    bad = {
        "originalQuery": "q",
        "type": "local",
        "confidence": 1.2,
        "extractedEntities": [],
        "expandedQueries": [],
        "suggestedWeights": {"keyword": 0.5, "semantic": 0.5, "graph": 0.5},
    }
    codes = {e[1] for e in errors(QueryClassification, bad)}
    assert codes == {"less_than_equal", "weights_sum"}


def test_config_schemas() -> None:
    assert RRFConfig().k == 60 and RRFConfig().normalize_scores is True
    assert errors(RRFConfig, {"k": 0})[0] == ("k", "greater_than_equal", "1以上である必要があります")
    assert errors(RRFConfig, {"k": 1001})[0] == ("k", "less_than_equal", "1000以下である必要があります")
    r = RerankConfig()
    assert (r.enabled, r.model, r.top_k, r.batch_size) == (
        True,
        "cross-encoder/ms-marco-MiniLM-L-6-v2",
        50,
        16,
    )
    assert errors(RerankConfig, {"topK": 101})[0][:2] == ("topK", "less_than_equal")
    assert errors(RerankConfig, {"batchSize": 33})[0] == (
        "batchSize",
        "less_than_equal",
        "32以下である必要があります",
    )
    assert errors(RerankConfig, {"batchSize": 0}, "en")[0][2] == "Must be greater than or equal to 1"


def test_pick_language() -> None:
    assert pick_language(None) == "ja"
    assert pick_language("en") == "en"
    assert pick_language("en-US,en;q=0.9") == "en"
    assert pick_language("ja,en;q=0.5") == "ja"
    assert pick_language("fr, en;q=0.8, ja;q=0.9") == "ja"
    assert pick_language("fr") == "ja"
