"""JSON Schema of the whole contract, as OpenAPI components and as one exportable document."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from hybridrag.schemas.base import SCHEMA_RELEASE_DATE, SCHEMA_VERSION
from hybridrag.schemas.batch import BatchSearchRequest, BatchSearchResult
from hybridrag.schemas.documents import AddDocumentsRequest, DocumentList, WriteTask
from hybridrag.schemas.search import (
    CRAGScore,
    DateRange,
    Highlight,
    HighlightOffset,
    QueryClassification,
    RelevanceScore,
    RerankConfig,
    RRFConfig,
    SearchFilters,
    SearchOptions,
    SearchQuery,
    SearchRequest,
    SearchResult,
    SearchResultContent,
    SearchResultItem,
    SearchResultSources,
    SearchStrategyMetrics,
    SearchWeights,
    StrategyMetric,
)

CONTRACT_MODELS: tuple[type[BaseModel], ...] = (
    DateRange,
    SearchWeights,
    SearchFilters,
    SearchOptions,
    SearchQuery,
    SearchRequest,
    QueryClassification,
    HighlightOffset,
    Highlight,
    SearchResultContent,
    CRAGScore,
    RelevanceScore,
    SearchResultSources,
    SearchResultItem,
    StrategyMetric,
    SearchStrategyMetrics,
    SearchResult,
    RRFConfig,
    RerankConfig,
)


# Service-side additions that are not in the Zod contract (batch search, the documents API).
SERVICE_MODELS: tuple[type[BaseModel], ...] = (
    BatchSearchRequest,
    BatchSearchResult,
    AddDocumentsRequest,
    WriteTask,
    DocumentList,
)


def contract_components(mode: str = "validation", extra: bool = False) -> dict[str, Any]:
    """Every contract model (and with `extra`, the service's own additions) as named JSON Schemas
    (camelCase), refs in OpenAPI's components form."""
    models = CONTRACT_MODELS + (SERVICE_MODELS if extra else ())
    _, top = models_json_schema(
        [(m, "validation") for m in models],
        ref_template="#/components/schemas/{model}",
        by_alias=True,
    )
    return dict(top.get("$defs", {}))


def contract_document() -> dict[str, Any]:
    """A standalone JSON Schema document of the contract, with its version."""
    _, top = models_json_schema([(m, "validation") for m in CONTRACT_MODELS], by_alias=True)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "hybridrag search contract",
        "version": SCHEMA_VERSION,
        "releaseDate": SCHEMA_RELEASE_DATE,
        "$defs": top.get("$defs", {}),
    }
