"""The seeds' agents end to end against the live sample service, each driven by a scripted chat model (no
LLM; nothing leaves 127.0.0.1): the LangGraph research agent with our provider, the slide workflow's fan-out
researcher with batch search, and a tool-calling agent that reaches the service only through the MCP server
(tools loaded by langchain-mcp-adapters). Each checks what the agent received, not only that it ran."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("langgraph")
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from seed_models import SearchResult as SeedSearchResult

from examples.agents import mcp_agent, mcp_tools, research_agent, slide_researcher
from hybridrag.client import HybridRagClient


class ScriptedModel(FakeMessagesListChatModel):
    """A chat model that answers from a script, and accepts tools (as a tool-calling model does)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self


def test_research_agent_collects_the_seeds_search_results(live_service: str) -> None:
    plan = {
        "theme": "Japanese companies and their founders",
        "investigation_points": ["Who founded Sony", "How Toyota began"],
        "search_queries": ["Who founded Sony?", "Sakichi Toyoda automatic loom"],
        "plan_text": "Find the founders of Sony and Toyota in the collection.",
    }
    model = ScriptedModel(
        responses=[AIMessage(json.dumps(plan)), AIMessage("Sony was founded by Ibuka and Morita.")]
    )
    with HybridRagClient(live_service) as client:
        state = research_agent(model, client).invoke(
            {"messages": [HumanMessage("Founders of Sony and Toyota")]}
        )
    records = [SeedSearchResult.model_validate(r) for r in state["research_data"]]  # the seed's own model
    titles = [r.title for r in records]
    assert any("Sony" in t for t in titles) and any("Toyoda" in t or "Toyota" in t for t in titles)
    sony = next(r for r in records if "Sony" in r.title)
    assert sony.url.startswith(live_service + "/v1/documents/") and sony.published_date == "1946-05-07"
    assert state["current_draft"] == "Sony was founded by Ibuka and Morita." and state["next_action"] == "end"


def test_slide_researcher_fans_out_batch_searches(live_service: str) -> None:
    subtasks = {
        "subtasks": [
            {"title": "Physics", "queries": ["radium and polonium", "湯川秀樹 中間子"]},
            {"title": "Railways", "queries": ["Tokaido Shinkansen opening", "東京タワー"]},
        ]
    }
    model = ScriptedModel(responses=[AIMessage(json.dumps(subtasks, ensure_ascii=False))])
    with HybridRagClient(live_service) as client:
        state = slide_researcher(model, client).invoke({"request": "Slides on Japanese science and railways"})
    by_task = {f["subtask"]: f["documents"] for f in state["findings"]}
    assert set(by_task) == {"Physics", "Railways"}
    physics = " ".join(str(d["title"]) for d in by_task["Physics"])
    railways = " ".join(str(d["title"]) for d in by_task["Railways"])
    assert "Curie" in physics and "湯川" in physics
    assert "Shinkansen" in railways and "東京タワー" in railways
    assert all(d["url"].startswith("http") for docs in by_task.values() for d in docs)
    assert "Physics:" in state["summary"] and "Railways:" in state["summary"]


def test_agent_through_the_mcp_server(live_service: str) -> None:
    call = {
        "name": "search",
        "args": {"text": "Who founded Sony?", "limit": 3},
        "id": "call-1",
        "type": "tool_call",
    }
    model = ScriptedModel(
        responses=[AIMessage("", tool_calls=[call]), AIMessage("Masaru Ibuka and Akio Morita.")]
    )

    async def run() -> dict[str, Any]:
        tools = await mcp_tools(live_service)
        assert {t.name for t in tools} >= {"search", "search_batch", "get_document"}
        result: dict[str, Any] = await mcp_agent(model, tools).ainvoke(
            {"messages": [HumanMessage("Who founded Sony?")]}
        )
        return result

    state = asyncio.run(run())
    tool_messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1 and tool_messages[0].status != "error"
    content = str(tool_messages[0].content)
    assert "Sony: Masaru Ibuka and Akio Morita" in content and f"url: {live_service}/v1/documents/" in content
    assert state["messages"][-1].content == "Masaru Ibuka and Akio Morita."
