"""Adapters that plug hybridrag into research-agent frameworks; each needs its own optional extra.

* `research_agent` — the LangGraph research agent's `SearchResult` dicts (needs only the `client` extra).
* `deep_research` — a provider for the deep-research orchestrator: sub-queries in, evidence records out.
* `langchain` — a LangChain `BaseRetriever` (extra `langchain`).
* `llamaindex` — a LlamaIndex retriever (extra `llamaindex`).
* `pydantic_ai` — a Pydantic-AI tool for leader/member agents (extra `pydantic-ai`).
"""

from __future__ import annotations


def require(module: str, extra: str) -> None:
    """Raise a clear ImportError naming the extra to install when an optional framework is missing."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing ("llama_index.core")
        found = False
    if not found:
        raise ImportError(f"{module} is not installed: pip install 'hybridrag[{extra}]'")
