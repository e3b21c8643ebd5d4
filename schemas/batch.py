"""Batch search: several sub-queries in one call, each answered on its own, plus an optional merged list.

Not part of the Zod contract (which has no batch schema); built from the contract's own models so every
sub-query is exactly a `SearchRequest` and every sub-result exactly a `SearchResult`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from hybridrag.schemas.base import INTEGRAL, ContractModel
from hybridrag.schemas.errors import ErrorDetail
from hybridrag.schemas.search import NonNegInt, SearchRequest, SearchResult, SearchResultItem, Unit

MAX_BATCH_QUERIES = 20
MAX_MERGED = 200


class BatchMerge(ContractModel):
    """How to merge the sub-results: deduplicate, then diversify with Maximal Marginal Relevance.

    `mmrLambda` = 1 ranks by relevance alone; lower values trade relevance for novelty against what was
    already picked (cosine of the chunks' embeddings, or word overlap when the index has none).
    """

    enabled: bool = True
    limit: Annotated[int, Field(ge=1, le=MAX_MERGED), INTEGRAL] = 20
    mmr_lambda: Unit = 0.7
    dedupe_by: Literal["document", "chunk"] = "document"


class BatchSearchRequest(ContractModel):
    """The body of `POST /v1/search/batch`."""

    queries: Annotated[list[SearchRequest], Field(min_length=1, max_length=MAX_BATCH_QUERIES)]
    merge: BatchMerge | None = None


class BatchError(ContractModel):
    """Why one sub-query failed (the others still answer): an HTTP-like status and the field errors."""

    status: int
    detail: str
    errors: list[ErrorDetail] = Field(default_factory=list)


class BatchOutcome(ContractModel):
    """One sub-query's answer: exactly one of `result` and `error` is set."""

    index: NonNegInt
    result: SearchResult | None = None
    error: BatchError | None = None


class MergedHit(ContractModel):
    """A merged, deduplicated hit: the best item for its key and every sub-query that found it."""

    key: str
    doc_id: str | None
    item: SearchResultItem
    query_indexes: list[NonNegInt]
    relevance: Unit
    mmr_score: float


class BatchSearchResult(ContractModel):
    results: list[BatchOutcome]
    merged: list[MergedHit] | None = None
    processing_time: Annotated[float, Field(ge=0)]
    index_version: str | None = None
    request_id: str | None = None
    schema_version: str | None = None
