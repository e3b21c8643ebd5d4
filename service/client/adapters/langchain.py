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
from pydantic import ConfigDict, Field, model_validator  # noqa: E402

from hybridrag.client import DEFAULT_TIMEOUT, AsyncHybridRagClient, HybridRagClient  # noqa: E402
from hybridrag.schemas.documents import WriteTask  # noqa: E402
from hybridrag.schemas.search import SearchResult  # noqa: E402


def to_wire_document(doc: Document) -> dict[str, Any]:
    """A LangChain Document as the documents API's input: page_content is the text; `id` (or metadata
    id), title, url and date come along; other metadata is kept as the document's metadata."""
    meta = dict(doc.metadata or {})
    out: dict[str, Any] = {"text": doc.page_content, "title": str(meta.pop("title", "") or "")}
    doc_id = doc.id or meta.pop("id", None)
    if doc_id:
        out["id"] = str(doc_id)
    for key in ("url", "date"):
        if meta.get(key):
            out[key] = str(meta.pop(key))
    out["metadata"] = {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool)) or v is None}
    return out


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
    """`retriever.invoke("query")` -> at most `k` Documents.

    `k` (LangChain's name for the number of documents) is the search's `limit`; `invoke(q, k=3)` overrides
    it for one call. `search_options` are the contract's other options (strategies, filters, ...), sent as
    given and nothing more, so the service's classifier still chooses the weights you did not set.
    """

    base_url: str | None = None
    api_key: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    k: int = Field(5, ge=1, le=100)
    search_options: dict[str, Any] = Field(default_factory=dict)

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @model_validator(mode="after")
    def _limit_is_k(self) -> HybridRagRetriever:
        if "limit" in self.search_options:
            raise ValueError("set the number of documents with k, not search_options['limit']")
        return self

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        unknown = set(kwargs) - {"k"}
        if unknown:
            # LangChain forwards invoke()'s extra keywords; ignoring one silently would hide a mistake.
            raise TypeError(f"unexpected search arguments: {sorted(unknown)} (only k is accepted)")
        k = kwargs.get("k", self.k)
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 100:
            raise ValueError(f"k must be an integer from 1 to 100, got {k!r}")
        return {**self.search_options, "limit": k}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        options = self._options(kwargs)
        with HybridRagClient(self.base_url, self.api_key, self.timeout) as client:
            return to_documents(client.search(query, **options))

    def add_documents(
        self, documents: list[Document], wait: bool = True, timeout: float = 300.0
    ) -> WriteTask:
        """Add what an agent found to the collection it searches (needs the service's write key as
        `api_key`); with `wait`, returns once the task succeeded or failed (`task.documents` says how each
        document fared). Not a VectorStore: the service chunks, embeds and links the documents itself."""
        with HybridRagClient(self.base_url, self.api_key, self.timeout) as client:
            task = client.add_documents([to_wire_document(d) for d in documents])
            return client.wait(task, timeout) if wait else task

    async def aadd_documents(
        self, documents: list[Document], wait: bool = True, timeout: float = 300.0
    ) -> WriteTask:
        async with AsyncHybridRagClient(self.base_url, self.api_key, self.timeout) as client:
            task = await client.add_documents([to_wire_document(d) for d in documents])
            return await client.wait(task, timeout) if wait else task

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        options = self._options(kwargs)
        async with AsyncHybridRagClient(self.base_url, self.api_key, self.timeout) as client:
            return to_documents(await client.search(query, **options))
