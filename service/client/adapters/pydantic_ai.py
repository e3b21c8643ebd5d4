"""A Pydantic-AI tool: a leader agent (or a member it delegates to) searches the corpus (extra: `pydantic-ai`).

agent = Agent(model, deps_type=HybridRagDeps, tools=[hybridrag_tool()])
agent.run_sync("...", deps=HybridRagDeps(client=AsyncHybridRagClient()))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hybridrag.client.adapters import require

require("pydantic_ai", "pydantic-ai")

from pydantic_ai import ModelRetry, RunContext, Tool  # noqa: E402

from hybridrag.client import AsyncHybridRagClient  # noqa: E402


@dataclass
class HybridRagDeps:
    client: AsyncHybridRagClient
    max_limit: int = 10


async def search_corpus(ctx: RunContext[HybridRagDeps], query: str, limit: int = 5) -> list[dict[str, Any]]:
    """Search the document collection (keyword, semantic and knowledge-graph retrieval, fused).

    Args:
        query: What to look for, in English or Japanese.
        limit: How many passages to return (1-10).

    Returns:
        Passages best first, each with its text, title, url and a 0..1 relevance score.
    """
    if not 1 <= limit <= ctx.deps.max_limit:
        # Tell the model what went wrong so it can call again, rather than quietly changing its argument.
        raise ModelRetry(f"limit must be between 1 and {ctx.deps.max_limit}, got {limit}")
    result = await ctx.deps.client.search(query, limit=limit, includeMetadata=True)
    out = []
    for item in result.results:
        meta = item.metadata or {}
        out.append(
            {
                "id": item.id,
                "type": item.type,
                "score": round(item.score, 4),
                "title": meta.get("title"),
                "url": meta.get("url"),
                "text": item.content.text,
            }
        )
    return out


def hybridrag_tool(name: str = "search_corpus") -> Tool[HybridRagDeps]:
    return Tool(search_corpus, name=name, takes_ctx=True)
