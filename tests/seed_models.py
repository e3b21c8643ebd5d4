"""A Pydantic copy of the research agent's `SearchResult` (../shared/seeds/research-agent-data-model.md, 3.3).

Copied field by field; the seed's pydantic-v1 spellings (`min_items`, `max_items`, `class Config`) are
written in their v2 form (`min_length`, `max_length`), which validate the same way.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class SearchResult(BaseModel):
    """検索結果モデル（共通スキーマ）"""

    title: str = Field(..., description="タイトル", min_length=1, max_length=500)
    summary: str = Field(..., description="要約", min_length=1, max_length=2000)
    source: Literal["tavily", "arxiv"] = Field(..., description="情報源")
    url: str = Field(..., description="URL", pattern=r"^https?://")
    published_date: str | None = Field(None, description="公開日", pattern=r"^\d{4}-\d{2}-\d{2}$")
    authors: list[str] | None = Field(None, description="著者リスト（arXiv用）", max_length=50)
    categories: list[str] | None = Field(None, description="カテゴリリスト（arXiv用）", max_length=20)
    relevance_score: float | None = Field(None, description="関連性スコア", ge=0.0, le=1.0)
