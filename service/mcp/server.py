"""An MCP server that forwards to a running hybridrag service through the Python client.

One service backs many agent processes: each host (Claude Desktop or Code, Cursor, the OpenAI Agents SDK,
LangGraph through `langchain-mcp-adapters`) spawns this server (stdio) or connects to it (streamable HTTP),
and every call goes to the service with the configured API key, timeout and language, so keys and rate
limits apply as for any client. Tool arguments are typed with the contract's own models, so their JSON
schemas come from the contract; an invalid argument, or a 4xx from the service, is a tool error whose text
names the field and says what is wrong, which the model can read and correct. The service being down is a
tool error too, and the next call tries again.

Needs only the `mcp` extra (`pip install 'hybridrag[mcp]'`: the client's pydantic and httpx, and the MCP
SDK), never the server's dependencies.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from pydantic import ConfigDict, Field, ValidationError

from hybridrag.client import DEFAULT_TIMEOUT, AsyncHybridRagClient, HybridRagError, HybridRagUnavailable
from hybridrag.schemas.base import QueryTypeName, SearchStrategyName
from hybridrag.schemas.batch import BatchSearchResult
from hybridrag.schemas.documents import DocumentDetail
from hybridrag.schemas.errors import Language, translate_errors
from hybridrag.schemas.search import SearchFilters, SearchResult, SearchResultItem, SearchWeights
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.fastmcp.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import CallToolResult, TextContent, ToolAnnotations

T = TypeVar("T")
INSTRUCTIONS = (
    "Search a private document collection (English and Japanese) with hybrid keyword + semantic + "
    "knowledge-graph retrieval. Use `search` for one question, `search_batch` to fan out several "
    "sub-questions at once, and `get_document` to read a whole document a result points at. Results cite "
    "a title, a url and, for PDFs, a page; cite them in your answer. A graph result says which entities "
    "linked it to the question (useful for multi-hop questions)."
)
DOCUMENT_TEXT_CHARS = 20_000  # a document's text in one tool answer; the rest is fetched by offset
SNIPPET_CHARS = 300


@dataclass(slots=True)
class ServiceConfig:
    """Where the service is and how to call it (each value also from the environment)."""

    url: str = field(default_factory=lambda: os.environ.get("HYBRIDRAG_URL", "http://127.0.0.1:8000"))
    api_key: str | None = field(default_factory=lambda: os.environ.get("HYBRIDRAG_API_KEY"))
    # The deep-research provider gives the service 15 s; a tool call should not wait longer by default.
    timeout: float = field(
        default_factory=lambda: float(os.environ.get("HYBRIDRAG_MCP_TIMEOUT", DEFAULT_TIMEOUT))
    )
    language: str | None = field(default_factory=lambda: os.environ.get("HYBRIDRAG_MCP_LANGUAGE", "en"))
    retries: int = 1
    # With the service's write key the server also offers `add_document` (the documents API).
    write_api_key: str | None = field(default_factory=lambda: os.environ.get("HYBRIDRAG_WRITE_API_KEY"))


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _path_text(path: list[dict[str, Any]]) -> str:
    """A graph path as one line: seed → entity → passage."""
    steps = []
    for step in path:
        if step.get("type") == "entity":
            steps.append(f"{step.get('name')} ({step.get('entityType')})")
        else:
            steps.append(f"passage '{step.get('title') or step.get('id')}'")
    return " → ".join(steps)


def item_text(rank: int, item: SearchResultItem) -> str:
    """One result as a few lines a model reads well: rank, score, title, url, page, snippet, graph path."""
    meta = item.metadata or {}
    head = f"[{rank}] score {item.score:.3f}"
    if item.type != "chunk":
        head += f" ({item.type})"
    lines = [f"{head} — {meta.get('title') or item.id}"]
    if meta.get("url"):
        page = f" (page {meta['page']})" if meta.get("page") else ""
        lines.append(f"    url: {meta['url']}{page}")
    if meta.get("date"):
        lines.append(f"    date: {str(meta['date'])[:10]}")
    lines.append("    " + _one_line(item.content.summary or item.content.text, SNIPPET_CHARS))
    if meta.get("graphPath") and len(meta["graphPath"]) > 1:
        lines.append("    found through: " + _path_text(meta["graphPath"]))
    lines.append(f"    id: {item.id}" + (f", document: {meta['docId']}" if meta.get("docId") else ""))
    return "\n".join(lines)


def result_text(result: SearchResult) -> str:
    if not result.results:
        return f"No results for {result.query.text!r}."
    lines = [f"{len(result.results)} of {result.total_count} results for {result.query.text!r}:"]
    lines += [item_text(i, item) for i, item in enumerate(result.results, start=1)]
    return "\n".join(lines)


def invalid_arguments(errors: list[dict[str, Any]]) -> ToolError:
    """Field errors as one tool error: `invalid arguments: path: message [code]; ...`, never the values."""
    fields = "; ".join(
        f"{e.get('path') or 'request'}: {e.get('message')}" + (f" [{e['code']}]" if e.get("code") else "")
        for e in errors
    )
    return ToolError(f"invalid arguments: {fields}")


def _tool_error(exc: HybridRagError, url: str) -> ToolError:
    """A failed call as a tool error the model can act on: the fields and what is wrong with them."""
    if isinstance(exc, HybridRagUnavailable) and exc.status_code is None:
        return ToolError(f"the search service at {url} cannot be reached right now ({exc}); try again later")
    if exc.errors:
        return invalid_arguments(exc.errors)
    return ToolError(str(exc))


class ContractArguments(FuncMetadata):
    """A tool's arguments checked as the service checks a request: unknown names refused, and every error
    in the contract's words (path, message, code) in the configured language, without the values sent or
    pydantic's links, the same as the errors the service itself reports."""

    language: Language = "en"

    async def call_fn_with_arg_validation(
        self,
        fn: Callable[..., Any],
        fn_is_async: bool,
        arguments_to_validate: dict[str, Any],
        arguments_to_pass_directly: dict[str, Any] | None,
    ) -> Any:
        try:
            self.arg_model.model_validate(self.pre_parse_json(arguments_to_validate))
        except ValidationError as exc:
            details = translate_errors(exc, self.language)
            raise invalid_arguments([d.model_dump() for d in details]) from None
        return await super().call_fn_with_arg_validation(
            fn, fn_is_async, arguments_to_validate, arguments_to_pass_directly
        )


def _strict_tools(mcp: FastMCP, language: Language) -> None:
    """Every tool refuses unknown arguments (its input schema says `additionalProperties: false`) and
    reports bad ones as `ContractArguments` does. The SDK builds a lenient model from each signature; this
    swaps in a strict subclass of it."""
    for tool in mcp._tool_manager.list_tools():
        lenient = tool.fn_metadata.arg_model
        strict: type[ArgModelBase] = type(
            lenient.__name__,
            (lenient,),
            {"model_config": ConfigDict(**{**lenient.model_config, "extra": "forbid"})},
        )
        tool.fn_metadata = ContractArguments(
            **{name: getattr(tool.fn_metadata, name) for name in FuncMetadata.model_fields},
            language=language,
        )
        tool.fn_metadata.arg_model = strict
        tool.parameters = strict.model_json_schema(by_alias=True)


class Tools:
    """The MCP tools, each forwarding to the service through the client (a client per call: a service that
    went away and came back is simply reached again)."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config

    async def call(self, action: Callable[[AsyncHybridRagClient], Awaitable[T]]) -> T:
        config = self.config
        async with AsyncHybridRagClient(
            config.url, config.api_key, config.timeout, retries=config.retries, language=config.language
        ) as client:
            try:
                return await action(client)
            except HybridRagError as exc:
                raise _tool_error(exc, config.url) from None

    async def search(
        self,
        text: Annotated[str, Field(description="The question or keywords (1-1000 characters).")],
        limit: Annotated[int, Field(ge=1, le=100, description="How many results (default 5).")] = 5,
        strategies: Annotated[
            list[SearchStrategyName] | None,
            Field(description="Retrievers to use; default ['hybrid'] (keyword + semantic + graph, fused)."),
        ] = None,
        weights: Annotated[
            SearchWeights | None,
            Field(
                description="Fusion weights keyword/semantic/graph summing to 1.0; default: the service's choice for the question."
            ),
        ] = None,
        filters: Annotated[
            SearchFilters | None,
            Field(
                description="fileIds, entityTypes (person, place, organization, other), dateRange, minRelevance."
            ),
        ] = None,
        type: Annotated[
            QueryTypeName | None,
            Field(
                description="local (facts), global (themes), relationship (how things connect), hybrid; default: classified."
            ),
        ] = None,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Search the collection for passages that answer `text`. Returns the best passages with title, url,
        page, a snippet, a 0..1 score relative to this query and, for graph results, the entities that led there."""
        options: dict[str, Any] = {"limit": limit}
        if strategies is not None:
            options["strategies"] = strategies
        if weights is not None:
            options["weights"] = weights.to_wire()
        if filters is not None:
            options["filters"] = filters.to_wire(exclude_unset=True)
        if type is not None:
            options["type"] = type
        result = await self.call(lambda client: client.search(text, **options))
        return CallToolResult(
            content=[TextContent(type="text", text=result_text(result))],
            structuredContent=result.to_wire(),
        )

    async def search_batch(
        self,
        queries: Annotated[
            list[str], Field(min_length=1, max_length=20, description="1-20 questions, searched at once.")
        ],
        limit: Annotated[int, Field(ge=1, le=100, description="Results per question (default 5).")] = 5,
        merge: Annotated[
            bool, Field(description="Also return one merged list, one entry per document.")
        ] = True,
    ) -> Annotated[CallToolResult, BatchSearchResult]:
        """Search several sub-questions in one call (for fanning out a research plan). Returns each
        question's results and, with `merge`, one list of distinct documents across all of them."""
        batch = await self.call(lambda client: client.search_batch(queries, merge=merge, limit=limit))
        parts = []
        for outcome in batch.results:
            if outcome.result is not None:
                parts.append(result_text(outcome.result))
            elif outcome.error is not None:
                parts.append(f"query {outcome.index + 1} failed: {outcome.error.detail}")
        if batch.merged:
            merged = [f"Merged, {len(batch.merged)} distinct documents:"]
            merged += [item_text(i, m.item) for i, m in enumerate(batch.merged, start=1)]
            parts.append("\n".join(merged))
        return CallToolResult(
            content=[TextContent(type="text", text="\n\n".join(parts))], structuredContent=batch.to_wire()
        )

    async def get_document(
        self,
        id: Annotated[
            str, Field(description="A document id (a result's `document:` id, or metadata.docId).")
        ],
        offset: Annotated[int, Field(ge=0, description="Character offset to start reading from.")] = 0,
    ) -> CallToolResult:
        """Read a whole document: title, url, date and its text (long texts in parts: pass `offset`)."""
        document = await self.call(lambda client: client.document(id))
        return CallToolResult(
            content=[TextContent(type="text", text=document_text(document, offset))],
            structuredContent={k: v for k, v in document.to_wire().items() if k != "chunks"},
        )

    async def add_document(
        self,
        text: Annotated[str, Field(min_length=1, description="The document's text.")],
        title: Annotated[str, Field(description="Its title.")] = "",
        url: Annotated[str | None, Field(description="Where it came from (http or https).")] = None,
        date: Annotated[str | None, Field(description="Its date, ISO 8601 (2024-05-01).")] = None,
        id: Annotated[
            str | None, Field(description="A stable id; the same id replaces the document.")
        ] = None,
    ) -> CallToolResult:
        """Add a document you found (a paper, a web page's text) to the collection, so later searches
        find it. Waits until it is indexed and says whether it was added, replaced or already there."""
        doc: dict[str, Any] = {"text": text, "title": title}
        doc.update({k: v for k, v in (("url", url), ("date", date), ("id", id)) if v})
        async with AsyncHybridRagClient(
            self.config.url,
            self.config.write_api_key,
            self.config.timeout,
            retries=self.config.retries,
            language=self.config.language,
        ) as client:
            try:
                task = await client.wait(
                    await client.add_documents([doc]), timeout=max(self.config.timeout, 60.0)
                )
            except HybridRagError as exc:
                raise _tool_error(exc, self.config.url) from None
        outcome = task.documents[0] if task.documents else None
        if task.status != "succeeded" or outcome is None:
            raise ToolError(f"the document was not added: {task.error or task.status}")
        if outcome.status == "refused":
            raise ToolError(f"the document was refused: {outcome.reason}")
        text_out = f"{outcome.status}: document {outcome.id} (index version {task.index_version})"
        return CallToolResult(
            content=[TextContent(type="text", text=text_out)], structuredContent=task.to_wire()
        )

    async def document_resource(self, doc_id: str) -> str:
        """A document of the collection, as text."""
        return document_text(await self.call(lambda client: client.document(doc_id)), 0)


def create_server(config: ServiceConfig | None = None, host: str = "127.0.0.1", port: int = 8765) -> FastMCP:
    """The MCP server: tools `search`, `search_batch`, `get_document` (and `add_document` with a write key);
    resource hybridrag://documents/{id}."""
    config = config or ServiceConfig()
    mcp = FastMCP("hybridrag", instructions=INSTRUCTIONS, host=host, port=port)
    tools = Tools(config)
    read_only = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
    for tool in (tools.search, tools.search_batch, tools.get_document):
        mcp.tool(annotations=read_only)(tool)
    if config.write_api_key:
        writes = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True)
        mcp.tool(annotations=writes)(tools.add_document)
    mcp.resource("hybridrag://documents/{doc_id}", mime_type="text/plain")(tools.document_resource)
    _strict_tools(mcp, "ja" if config.language == "ja" else "en")
    return mcp


def document_text(document: DocumentDetail, offset: int) -> str:
    text = document.text
    part = text[offset : offset + DOCUMENT_TEXT_CHARS]
    head = [f"{document.title or document.id}", f"url: {document.url}"]
    if document.date:
        head.append(f"date: {document.date}")
    if offset or offset + DOCUMENT_TEXT_CHARS < len(text):
        end = offset + len(part)
        head.append(
            f"characters {offset}-{end} of {len(text)}"
            + (f" (next: offset={end})" if end < len(text) else "")
        )
    return "\n".join(head) + "\n\n" + part


def main(argv: list[str] | None = None) -> None:
    """`hybridrag mcp` / `hybridrag-mcp` / `python -m hybridrag.mcp`."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="hybridrag mcp", description="An MCP server that forwards to a running hybridrag service."
    )
    parser.add_argument(
        "--url",
        default=None,
        help="The service's base URL (default: $HYBRIDRAG_URL or http://127.0.0.1:8000)",
    )
    parser.add_argument("--api-key", default=None, help="The service's API key (default: $HYBRIDRAG_API_KEY)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="Seconds per service call (default: 15, $HYBRIDRAG_MCP_TIMEOUT)",
    )
    parser.add_argument(
        "--language", choices=["en", "ja"], default=None, help="Language of error messages (default en)"
    )
    parser.add_argument(
        "--write-api-key",
        default=None,
        help="The service's write key: adds the add_document tool (default: $HYBRIDRAG_WRITE_API_KEY)",
    )
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    parser.add_argument(
        "--host", default="127.0.0.1", help="streamable-http: address to bind (loopback by default)"
    )
    parser.add_argument("--port", type=int, default=8765, help="streamable-http: port (path /mcp)")
    args = parser.parse_args(argv)
    config = ServiceConfig()
    if args.url:
        config.url = args.url
    if args.api_key:
        config.api_key = args.api_key
    if args.timeout is not None:
        config.timeout = args.timeout
    if args.language:
        config.language = args.language
    if args.write_api_key:
        config.write_api_key = args.write_api_key
    create_server(config, args.host, args.port).run(args.transport)


__all__ = ["ServiceConfig", "create_server", "main"]
