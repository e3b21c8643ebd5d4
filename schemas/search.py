"""Pydantic mirror of the Zod search contract (`search-zod-schemas.md`, version 1.0.0).

Every schema of the contract has a model here with the same field names (camelCase on the wire), bounds,
defaults and refinements. Two deliberate request-side conveniences, both backwards compatible:

* In a request, `query.type` may be absent (the classifier decides) and nullable fields may be omitted
  (they default to null); responses always carry every field.
* A request may carry the contract's `rrfConfig` and `rerankConfig` next to the query, and `fusion`
  ("score-rrf" or "rrf"; absent = the service's default) to choose how ranked lists are fused.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from hybridrag.schemas.base import (
    INTEGRAL,
    ContractModel,
    CragRelevance,
    QueryType,
    SearchResultType,
    SearchStrategy,
    SearchStrategyName,
    _enum_error,
)

WEIGHT_SUM_TOLERANCE = 0.01
MAX_EMBEDDING_DIM = 4096
# Bounds the seed's Zod schema leaves open, so that the work and the error body of a request stay bounded
# by its meaning rather than its size (README, "Limits").
MAX_FILE_IDS = 1000
MAX_FILE_ID_CHARS = 512
MAX_ENTITY_TYPES = 20
MAX_ENTITY_TYPE_CHARS = 64
MAX_STRATEGIES = 4
MAX_MODEL_NAME_CHARS = 256
MAX_TEXT_CHARS = 1000


def utf16_length(text: str) -> int:
    """The length JavaScript (and so Zod) gives a string: UTF-16 code units, 2 for an astral character."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _js_max_length(limit: int) -> AfterValidator:
    """Zod's `.max(n)` on a string counts UTF-16 units; Python counts code points. Check both ways."""

    def check(text: str) -> str:
        if utf16_length(text) > limit:
            raise PydanticCustomError(
                "string_too_long", "at most {max_length} characters", {"max_length": limit}
            )
        return text

    return AfterValidator(check)


def _no_number_dates(value: Any) -> Any:
    # Lax datetime parsing would read 1704067200 as a Unix time; the contract's dates are dates, so on the
    # JSON wire they must be ISO 8601 strings (Zod's z.date() rejects numbers too).
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise PydanticCustomError("date_type", "a date must be an ISO 8601 string")
    return value


QueryText = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS), _js_max_length(MAX_TEXT_CHARS)]

Unit = Annotated[float, Field(ge=0, le=1)]
FusionMethod = Annotated[Literal["score-rrf", "rrf"], _enum_error("enum_fusion")]
NonNegInt = Annotated[int, Field(ge=0), INTEGRAL]


class DateRange(ContractModel):
    """dateRangeSchema: both ends nullable (open interval); start <= end when both are given."""

    # Lax here (unlike the rest of the contract) so that a plain ISO date such as "2024-01-01" is accepted.
    start: Annotated[datetime | None, Field(strict=False), BeforeValidator(_no_number_dates)] = None
    end: Annotated[datetime | None, Field(strict=False), BeforeValidator(_no_number_dates)] = None

    @model_validator(mode="after")
    def _start_before_end(self) -> DateRange:
        if self.start is not None and self.end is not None:
            start, end = _comparable(self.start), _comparable(self.end)
            if start > end:
                raise PydanticCustomError("date_range_order", "start must be on or before end")
        return self


def _comparable(value: datetime) -> datetime:
    # A naive datetime is read as UTC so that mixing "2024-01-01" and "2024-01-01T00:00:00Z" compares.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class SearchWeights(ContractModel):
    """searchWeightsSchema: each weight in 0..1 and the sum within 0.01 of 1.0."""

    keyword: Unit
    semantic: Unit
    graph: Unit

    @model_validator(mode="after")
    def _sum_to_one(self) -> SearchWeights:
        total = self.keyword + self.semantic + self.graph
        if not abs(total - 1.0) < WEIGHT_SUM_TOLERANCE:
            raise PydanticCustomError(
                "weights_sum", "weights must sum to 1.0 (got {total})", {"total": total}
            )
        return self


def default_weights() -> SearchWeights:
    return SearchWeights(keyword=0.35, semantic=0.35, graph=0.3)


class SearchFilters(ContractModel):
    """searchFiltersSchema."""

    file_ids: (
        Annotated[
            list[Annotated[str, Field(min_length=1, max_length=MAX_FILE_ID_CHARS)]],
            Field(max_length=MAX_FILE_IDS),
        ]
        | None
    ) = None
    entity_types: (
        Annotated[
            list[Annotated[str, Field(max_length=MAX_ENTITY_TYPE_CHARS)]], Field(max_length=MAX_ENTITY_TYPES)
        ]
        | None
    ) = None
    date_range: DateRange | None = None
    min_relevance: Unit = 0.3


def _default_strategies() -> list[SearchStrategyName]:
    return ["hybrid"]


class SearchOptions(ContractModel):
    """searchOptionsSchema."""

    limit: Annotated[int, Field(ge=1, le=100), INTEGRAL] = 20
    offset: NonNegInt = 0
    include_metadata: bool = True
    include_highlights: bool = True
    rerank_enabled: bool = True
    crag_enabled: bool = False
    strategies: Annotated[list[SearchStrategy], Field(min_length=1, max_length=MAX_STRATEGIES)] = Field(
        default_factory=_default_strategies, json_schema_extra={"default": ["hybrid"]}
    )
    weights: SearchWeights = Field(
        default_factory=default_weights,
        json_schema_extra={"default": {"keyword": 0.35, "semantic": 0.35, "graph": 0.3}},
    )


def _finite(values: list[float] | None) -> list[float] | None:
    if values is not None and not all(math.isfinite(v) for v in values):
        raise PydanticCustomError("finite_number", "embedding values must be finite numbers")
    return values


class SearchQuery(ContractModel):
    """searchQuerySchema as it appears in a response: `type` is always resolved."""

    text: QueryText
    type: QueryType
    embedding: Annotated[list[float], Field(min_length=1, max_length=MAX_EMBEDDING_DIM)] | None = None
    filters: SearchFilters = Field(default_factory=SearchFilters)
    options: SearchOptions = Field(default_factory=SearchOptions)


class RRFConfig(ContractModel):
    """rrfConfigSchema."""

    k: Annotated[int, Field(ge=1, le=1000), INTEGRAL] = 60
    normalize_scores: bool = True


class RerankConfig(ContractModel):
    """rerankConfigSchema."""

    enabled: bool = True
    model: Annotated[str, Field(max_length=MAX_MODEL_NAME_CHARS)] = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    top_k: Annotated[int, Field(ge=1, le=100), INTEGRAL] = 50
    batch_size: Annotated[int, Field(ge=1, le=32), INTEGRAL] = 16


class SearchRequest(ContractModel):
    """The body of `POST /v1/search`: a searchQuery whose `type` may be left to the classifier.

    The text must contain something other than whitespace: a blank query cannot be searched, and saying so
    beats answering with nothing.
    """

    text: QueryText
    type: QueryType | None = None
    embedding: Annotated[list[float], Field(min_length=1, max_length=MAX_EMBEDDING_DIM)] | None = None
    filters: SearchFilters = Field(default_factory=SearchFilters)
    options: SearchOptions = Field(default_factory=SearchOptions)
    rrf_config: RRFConfig = Field(default_factory=RRFConfig)
    rerank_config: RerankConfig = Field(default_factory=RerankConfig)
    fusion: FusionMethod | None = None

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise PydanticCustomError("blank_text", "text must not be blank")
        return text

    @model_validator(mode="after")
    def _check(self) -> SearchRequest:
        _finite(self.embedding)
        return self


class QueryClassification(ContractModel):
    """queryClassificationSchema."""

    original_query: str
    type: QueryType
    confidence: Unit
    extracted_entities: list[str]
    suggested_weights: SearchWeights
    expanded_queries: list[str]


class HighlightOffset(ContractModel):
    """highlightOffsetSchema: character offsets, start < end."""

    start: NonNegInt
    end: NonNegInt

    @model_validator(mode="after")
    def _start_before_end(self) -> HighlightOffset:
        if not self.start < self.end:
            raise PydanticCustomError("highlight_offset_order", "start must be less than end")
        return self


class Highlight(ContractModel):
    """highlightSchema."""

    field: str
    fragment: str
    offsets: list[HighlightOffset]


class SearchResultContent(ContractModel):
    """searchResultContentSchema."""

    text: str
    summary: str | None
    context_before: str | None
    context_after: str | None


class CRAGScore(ContractModel):
    """cragScoreSchema."""

    relevance: CragRelevance
    confidence: Unit
    needs_web_search: bool
    refined_query: str | None


class RelevanceScore(ContractModel):
    """relevanceScoreSchema."""

    combined: Unit
    keyword: Unit
    semantic: Unit
    graph: Unit
    rerank: Unit | None
    crag: CRAGScore | None


class SearchResultSources(ContractModel):
    """searchResultSourcesSchema."""

    chunk_id: str | None
    file_id: str | None
    entity_ids: list[str]
    community_id: str | None
    relation_ids: list[str]


class SearchResultItem(ContractModel):
    """searchResultItemSchema, plus optional `metadata` (title, url, date, language) when includeMetadata."""

    id: str
    type: SearchResultType
    score: Unit
    relevance: RelevanceScore
    content: SearchResultContent
    highlights: list[Highlight]
    sources: SearchResultSources
    metadata: dict[str, Any] | None = None


class StrategyMetric(ContractModel):
    """strategyMetricSchema; processingTime is in milliseconds."""

    enabled: bool
    result_count: NonNegInt
    processing_time: Annotated[float, Field(ge=0)]
    top_score: Unit


class SearchStrategyMetrics(ContractModel):
    """searchStrategyMetricsSchema."""

    keyword: StrategyMetric
    semantic: StrategyMetric
    graph: StrategyMetric


class StageNote(ContractModel):
    """Why a stage (a strategy, rerank, CRAG) did not run or ran degraded: never a silent no-op."""

    stage: str
    status: str
    reason: str


class SearchResult(ContractModel):
    """searchResultSchema, plus the optional extras an agent needs to trust a page of results."""

    query: SearchQuery
    results: list[SearchResultItem]
    total_count: NonNegInt
    processing_time: Annotated[float, Field(ge=0)]
    strategies: SearchStrategyMetrics
    classification: QueryClassification | None = None
    crag: CRAGScore | None = None
    notes: list[StageNote] = Field(default_factory=list)
    index_version: str | None = None
    request_id: str | None = None
    schema_version: str | None = None
