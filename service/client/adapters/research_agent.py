"""The LangGraph research agent's `SearchResult` records (research-agent-data-model.md, section 3.3).

The seed validates: title 1-500 chars, summary 1-2000 chars, source Literal["tavily", "arxiv"], url
`^https?://`, published_date `YYYY-MM-DD` or None, relevance_score 0..1. Every hit of ours has an http(s)
url (the document's own, or this service's `/v1/documents/{id}`). The seed's `source` has no value for a
private corpus, so it is a parameter: "tavily" (web-like documents) unless the caller says "arxiv".
"""

from __future__ import annotations

import re
from typing import Any, Literal

from hybridrag.client import HybridRagClient
from hybridrag.schemas.search import SearchResult, SearchResultItem

TITLE_MAX = 500
SUMMARY_MAX = 2000
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")

SeedSource = Literal["tavily", "arxiv"]


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def to_search_result(item: SearchResultItem, source: SeedSource = "tavily") -> dict[str, Any] | None:
    """One hit as the research agent's SearchResult dict; None for a hit with no document (entity, community)."""
    meta = item.metadata or {}
    url = meta.get("url")
    if item.type != "chunk" or not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    text = item.content.text
    title = _clip(str(meta.get("title") or "") or text[:80] or item.id, TITLE_MAX)
    summary = _clip(item.content.summary or text, SUMMARY_MAX) or title
    date = meta.get("date")
    published = str(date)[:10] if date and _DATE.match(str(date)) else None
    return {
        "title": title,
        "summary": summary,
        "source": source,
        "url": url,
        "published_date": published,
        "authors": None,
        "categories": None,
        "relevance_score": round(float(item.score), 6),
    }


def to_search_results(result: SearchResult, source: SeedSource = "tavily") -> list[dict[str, Any]]:
    """Every chunk hit, one per url (the best-scoring chunk of a document stands for it), best first."""
    out: dict[str, dict[str, Any]] = {}
    for item in result.results:
        record = to_search_result(item, source)
        if record is not None and record["url"] not in out:
            out[record["url"]] = record
    return list(out.values())


def research(
    client: HybridRagClient, query: str, limit: int = 5, source: SeedSource = "tavily", **options: Any
) -> list[dict[str, Any]]:
    """What the Researcher node calls: a query in, SearchResult dicts out (metadata is always requested)."""
    result = client.search(query, limit=limit, includeMetadata=True, **options)
    return to_search_results(result, source)
