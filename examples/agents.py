"""The seeds' agents, wired to hybridrag: three LangGraph graphs that run with any chat model.

* `research_agent` — the LangGraph research agent (research-agent-data-model.md): a supervisor writes a
  `ResearchPlan`, the researcher runs each of its search queries through our provider (the adapter that returns
  the agent's own `SearchResult` records), a writer drafts from them.
* `slide_researcher` — the slide workflow's Researcher subgraph (langgraph-workflow-engine.md): a manager
  splits the request into sub-tasks, `Send` fans them out to workers in parallel, each worker answers its
  sub-task with one batch search, and the manager gathers the findings (reduce).
* `mcp_agent` — a tool-calling agent that reaches the service only through the MCP server, with its tools
  loaded by `langchain-mcp-adapters` (`mcp_tools`).

The model is a parameter: the tests drive each graph with a scripted chat model (no LLM, no network beyond
127.0.0.1); in real use it is the agent's own model. Needs `langgraph` (and `langchain-mcp-adapters` for the
MCP agent): `pip install 'hybridrag[client]' langgraph langchain-mcp-adapters`.
"""

from __future__ import annotations

import json
import operator
import sys
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Send

from hybridrag.client import HybridRagClient
from hybridrag.client.adapters.research_agent import to_search_results


class ResearchState(TypedDict, total=False):
    """The research agent's shared state (the seed's `ResearchState`, the fields this graph uses)."""

    messages: Annotated[list[AnyMessage], add_messages]
    task_plan: dict[str, Any] | None
    research_data: list[dict[str, Any]]
    current_draft: str | None
    iteration_count: int
    next_action: Literal["research", "write", "review", "end"]


def _json(message: BaseMessage) -> Any:
    text = message.content if isinstance(message.content, str) else json.dumps(message.content)
    return json.loads(text[text.find("{") if "{" in text else 0 :])


def research_agent(model: BaseChatModel, client: HybridRagClient, per_query: int = 5) -> Any:
    """The research agent's loop with hybridrag as its search provider (compiled LangGraph graph)."""

    def supervisor(state: ResearchState) -> ResearchState:
        ask = HumanMessage(
            "Write a research plan as JSON with theme, investigation_points, search_queries, plan_text for: "
            + str(state["messages"][-1].content)
        )
        plan = _json(model.invoke([*state["messages"], ask]))
        return {
            "task_plan": plan,
            "next_action": "research",
            "iteration_count": state.get("iteration_count", 0) + 1,
        }

    def researcher(state: ResearchState) -> ResearchState:
        plan = state["task_plan"] or {}
        found: dict[str, dict[str, Any]] = {r["url"]: r for r in state.get("research_data", [])}
        for query in plan.get("search_queries", []):
            for record in to_search_results(client.search(query, limit=per_query)):
                found.setdefault(record["url"], record)
        return {"research_data": list(found.values()), "next_action": "write"}

    def writer(state: ResearchState) -> ResearchState:
        sources = "\n".join(
            f"- {r['title']} ({r['url']}): {r['summary'][:200]}" for r in state["research_data"]
        )
        draft = model.invoke([HumanMessage(f"Write a short report from these sources:\n{sources}")])
        return {"current_draft": str(draft.content), "messages": [draft], "next_action": "end"}

    graph = StateGraph(ResearchState)
    graph.add_node("supervisor", supervisor)
    graph.add_node("researcher", researcher)
    graph.add_node("writer", writer)
    graph.add_edge(START, "supervisor")
    graph.add_edge("supervisor", "researcher")
    graph.add_edge("researcher", "writer")
    graph.add_edge("writer", END)
    return graph.compile()


class ResearcherState(TypedDict, total=False):
    """The Researcher subgraph's state: the request, its sub-tasks, and the workers' findings (reduced)."""

    request: str
    subtasks: list[dict[str, Any]]
    findings: Annotated[list[dict[str, Any]], operator.add]
    summary: str


class WorkerInput(TypedDict):
    subtask: dict[str, Any]


def slide_researcher(model: BaseChatModel, client: HybridRagClient, per_query: int = 3) -> Any:
    """Manager -> Send fan-out to workers (one batch search each) -> manager's reduce."""

    def manager(state: ResearcherState) -> ResearcherState:
        ask = HumanMessage(
            'Split into sub-tasks as JSON {"subtasks": [{"title": ..., "queries": [...]}]}: '
            + state["request"]
        )
        return {"subtasks": _json(model.invoke([ask]))["subtasks"]}

    def fan_out(state: ResearcherState) -> list[Send]:
        return [Send("worker", {"subtask": task}) for task in state["subtasks"]]

    def worker(state: WorkerInput) -> ResearcherState:
        task = state["subtask"]
        batch = client.search_batch(task["queries"], merge={"limit": per_query * 2}, limit=per_query)
        documents = [
            {
                "title": (m.item.metadata or {}).get("title"),
                "url": (m.item.metadata or {}).get("url"),
                "id": m.item.id,
            }
            for m in (batch.merged or [])
        ]
        return {"findings": [{"subtask": task["title"], "documents": documents}]}

    def reduce(state: ResearcherState) -> ResearcherState:
        lines = [
            f"{f['subtask']}: " + "; ".join(str(d["title"]) for d in f["documents"])
            for f in state["findings"]
        ]
        return {"summary": "\n".join(lines)}

    graph = StateGraph(ResearcherState)
    graph.add_node("manager", manager)
    graph.add_node("worker", worker)
    graph.add_node("reduce", reduce)
    graph.add_edge(START, "manager")
    graph.add_conditional_edges("manager", fan_out, ["worker"])
    graph.add_edge("worker", "reduce")
    graph.add_edge("reduce", END)
    return graph.compile()


def mcp_server_config(url: str, python: str = sys.executable) -> dict[str, Any]:
    """A `langchain-mcp-adapters` connection that spawns our MCP server over stdio, pointed at `url`."""
    return {
        "hybridrag": {"command": python, "args": ["-m", "hybridrag.mcp", "--url", url], "transport": "stdio"}
    }


async def mcp_tools(url: str) -> list[Any]:
    """The service's tools as LangChain tools, through the MCP server (langchain-mcp-adapters)."""
    from langchain_mcp_adapters.client import MultiServerMCPClient

    return list(await MultiServerMCPClient(mcp_server_config(url)).get_tools())


def mcp_agent(model: BaseChatModel, tools: list[Any]) -> Any:
    """A ReAct-style agent whose only tools are the MCP server's."""
    import warnings

    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():  # moved to `langchain.agents` in LangGraph 1.0, kept there until 2.0
        warnings.simplefilter("ignore", DeprecationWarning)
        return create_react_agent(model, tools)


__all__ = ["mcp_agent", "mcp_server_config", "mcp_tools", "research_agent", "slide_researcher"]
