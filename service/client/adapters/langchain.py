"""A LangChain retriever backed by the hybridrag service (extra: `langchain`)."""

from __future__ import annotations

from typing import Any

from hybridrag.client.adapters import require

require("langchain_core", "langchain")

from langchain_core.callbacks import (  # noqa: E402
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict, Field  # noqa: E402

from hybridrag.client import DEFAULT_TIMEOUT, AsyncHybridRagClient, HybridRagClient  # noqa: E402
from hybridrag.schemas.search import SearchResult  # noqa: E402


def to_documents(result: SearchResult) -> list[Document]:
    """Hits as Documents: the text as page_content, score, ids, url and strategy scores in metadata."""
    docs = []
    for item in result.results:
        meta = dict(item.metadata or {})
        meta.pop("ranks", None)
        meta.update(
            id=item.id,
            type=item.type,
            score=item.score,
            relevance=item.relevance.model_dump(by_alias=True),
            summary=item.content.summary,
        )
        docs.append(Document(page_content=item.content.text, metadata=meta, id=item.id))
    return docs


class HybridRagRetriever(BaseRetriever):
    """`retriever.invoke("query")` -> Documents; `search_options` are the contract's options (limit, ...)."""

    base_url: str | None = None
    api_key: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    search_options: dict[str, Any] = Field(default_factory=lambda: {"limit": 5})

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        with HybridRagClient(self.base_url, self.api_key, self.timeout) as client:
            return to_documents(client.search(query, **self.search_options))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        async with AsyncHybridRagClient(self.base_url, self.api_key, self.timeout) as client:
            return to_documents(await client.search(query, **self.search_options))
