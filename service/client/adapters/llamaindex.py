"""A LlamaIndex retriever backed by the hybridrag service (extra: `llamaindex`)."""

from __future__ import annotations

from typing import Any

from hybridrag.client.adapters import require

require("llama_index.core", "llamaindex")

from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import (  # noqa: E402
    BaseNode,
    NodeWithScore,
    QueryBundle,
    TextNode,
)

from hybridrag.client import DEFAULT_TIMEOUT, AsyncHybridRagClient, HybridRagClient  # noqa: E402
from hybridrag.schemas.documents import WriteTask  # noqa: E402
from hybridrag.schemas.search import SearchResult  # noqa: E402


def to_wire_document(node: BaseNode) -> dict[str, Any]:
    """A LlamaIndex document or node as the documents API's input (its text; title, url, date from metadata)."""
    meta = dict(node.metadata or {})
    out: dict[str, Any] = {
        "id": node.node_id,
        "text": node.get_content(),
        "title": str(meta.pop("title", "") or ""),
    }
    for key in ("url", "date"):
        if meta.get(key):
            out[key] = str(meta.pop(key))
    out["metadata"] = {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool)) or v is None}
    return out


def to_nodes(result: SearchResult) -> list[NodeWithScore]:
    nodes = []
    for item in result.results:
        meta = {k: v for k, v in (item.metadata or {}).items() if k != "ranks"}
        meta.update(type=item.type, summary=item.content.summary)
        node = TextNode(id_=item.id, text=item.content.text, metadata=meta)
        nodes.append(NodeWithScore(node=node, score=item.score))
    return nodes


class HybridRagLlamaRetriever(BaseRetriever):
    """`retriever.retrieve("query")` -> NodeWithScore list, scores in 0..1 from the fused ranking."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        **search_options: Any,
    ) -> None:
        super().__init__()
        self._base_url, self._api_key, self._timeout = base_url, api_key, timeout
        if "similarity_top_k" in search_options:  # LlamaIndex's usual name for the number of results
            search_options["limit"] = search_options.pop("similarity_top_k")
        self._options = {"limit": 5, **search_options}

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        with HybridRagClient(self._base_url, self._api_key, self._timeout) as client:
            return to_nodes(client.search(query_bundle.query_str, **self._options))

    def insert(self, documents: list[BaseNode], wait: bool = True, timeout: float = 300.0) -> WriteTask:
        """Add LlamaIndex documents to the collection this retriever searches (needs the write key as
        `api_key`), as an index's `insert` does; with `wait`, returns the finished task."""
        with HybridRagClient(self._base_url, self._api_key, self._timeout) as client:
            task = client.add_documents([to_wire_document(d) for d in documents])
            return client.wait(task, timeout) if wait else task

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        async with AsyncHybridRagClient(self._base_url, self._api_key, self._timeout) as client:
            return to_nodes(await client.search(query_bundle.query_str, **self._options))
