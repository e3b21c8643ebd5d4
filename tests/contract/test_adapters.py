"""Every adapter and the example research loop, driven against the real service on loopback."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import chunk_item_wire
from seed_models import SearchResult as SeedSearchResult

from hybridrag.client import AsyncHybridRagClient, HybridRagClient

ROOT = Path(__file__).resolve().parents[2]


def test_research_agent_results_validate_against_the_seed_model(live_service: str) -> None:
    from hybridrag.client.adapters.research_agent import research, to_search_results

    with HybridRagClient(live_service) as client:
        for query in ("Who founded Sony?", "湯川秀樹の中間子理論", "Toyota"):
            records = research(client, query, limit=10)
            assert records, query
            for record in records:
                SeedSearchResult.model_validate(record)  # raises if anything is off
            assert len({r["url"] for r in records}) == len(records)
            scores = [r["relevance_score"] for r in records]
            assert scores == sorted(scores, reverse=True)
        arxiv = to_search_results(client.search("Marie Curie", limit=3), source="arxiv")
        assert arxiv and all(SeedSearchResult.model_validate(r).source == "arxiv" for r in arxiv)
        # Hits without a source url get this service's document url, which resolves to the text.
        ours = [r["url"] for r in records if r["url"].startswith(live_service)]
        for url in ours:
            assert client.document(url.rsplit("/", 1)[1]).text


def test_research_agent_record_edges() -> None:
    from hybridrag.client.adapters.research_agent import to_search_result
    from hybridrag.schemas.search import SearchResultItem

    base = chunk_item_wire("x " * 3000)
    long = SearchResultItem.model_validate(
        {
            **base,
            "metadata": {"title": "t" * 900, "url": "https://example.org/a", "date": "2024-05-06T00:00:00"},
        }
    )
    record = to_search_result(long)
    assert record is not None
    seed = SeedSearchResult.model_validate(record)
    assert len(seed.title) == 500 and len(seed.summary) == 2000 and seed.published_date == "2024-05-06"
    untitled = SearchResultItem.model_validate(
        {**base, "metadata": {"title": "", "url": "http://h/d", "date": None}}
    )
    assert SeedSearchResult.model_validate(to_search_result(untitled)).title.startswith("x x")
    no_url = SearchResultItem.model_validate({**base, "metadata": {"title": "t", "url": "file:///etc"}})
    assert to_search_result(no_url) is None
    entity = SearchResultItem.model_validate({**base, "type": "entity", "metadata": {"url": "https://x"}})
    assert to_search_result(entity) is None


def test_deep_research_provider_and_helpers(live_service: str) -> None:
    from hybridrag.client.adapters.deep_research import HybridRagProvider, build_evidences, compute_coverage

    with HybridRagClient(live_service) as client:
        provider = HybridRagProvider(client, per_query=5, max_documents=6)
        subqueries = ["Toyota production system", "トヨタ 生産方式", "Toyota production system", " "]
        docs = provider.search(subqueries, section="background")
        assert 0 < len(docs) <= 6
        assert len({d.key for d in docs}) == len(docs)
        assert all(d.section_hints == ["background"] for d in docs)
        assert all(set(d.subqueries) <= {"Toyota production system", "トヨタ 生産方式"} for d in docs)
        again = provider.search(subqueries, section="background")
        assert [d.key for d in again] == [d.key for d in docs], "keys must be stable across calls"
    hit_map = {docs[0].key: {"background", "timeline"}, docs[-1].key: {"background"}}
    current, missing = compute_coverage(
        ["background", "timeline", "main_issues"], {"background": 3, "timeline": 1, "main_issues": 2}, hit_map
    )
    expected_bg = 2 if len(docs) > 1 else 1
    assert current == {"background": expected_bg, "timeline": 1, "main_issues": 0}
    assert missing == {"background": 3 - expected_bg, "timeline": 0, "main_issues": 2}
    evidences = build_evidences(docs + docs, hit_map)
    assert [e["id"] for e in evidences] == [f"e{i + 1}" for i in range(len(docs))]
    assert evidences[0]["sectionHints"] == ["background", "timeline"]


def test_langchain_retriever(live_service: str) -> None:
    from langchain_core.documents import Document

    from hybridrag.client.adapters.langchain import HybridRagRetriever

    retriever = HybridRagRetriever(base_url=live_service, k=3)
    docs = retriever.invoke("Who founded Sony?")
    assert 0 < len(docs) <= 3 and all(isinstance(d, Document) for d in docs)
    assert docs[0].page_content and 0 <= docs[0].metadata["score"] <= 1 and docs[0].metadata["url"]
    adocs = asyncio.run(retriever.ainvoke("Who founded Sony?"))
    assert [d.id for d in adocs] == [d.id for d in docs]


def test_llamaindex_retriever(live_service: str) -> None:
    from hybridrag.client.adapters.llamaindex import HybridRagLlamaRetriever

    retriever = HybridRagLlamaRetriever(base_url=live_service, limit=3)
    nodes = retriever.retrieve("トヨタ")
    assert 0 < len(nodes) <= 3
    assert nodes[0].node.get_content() and nodes[0].score is not None and 0 <= nodes[0].score <= 1
    anodes = asyncio.run(retriever.aretrieve("トヨタ"))
    assert [n.node.node_id for n in anodes] == [n.node.node_id for n in nodes]
    # LlamaIndex's usual name for the number of results works too, with the other options kept.
    top1 = HybridRagLlamaRetriever(base_url=live_service, similarity_top_k=1, filters={"minRelevance": 0})
    assert len(top1.retrieve("トヨタ")) == 1


def test_pydantic_ai_tool(live_service: str) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from hybridrag.client.adapters.pydantic_ai import HybridRagDeps, hybridrag_tool

    async def run() -> Any:
        async with AsyncHybridRagClient(live_service) as client:
            agent = Agent(
                TestModel(call_tools=["search_corpus"]), deps_type=HybridRagDeps, tools=[hybridrag_tool()]
            )
            return await agent.run("Who founded Sony?", deps=HybridRagDeps(client=client, max_limit=10))

    result = asyncio.run(run())
    returns = [
        part.content
        for message in result.all_messages()
        for part in getattr(message, "parts", [])
        if getattr(part, "part_kind", "") == "tool-return"
    ]
    assert returns and isinstance(returns[0], list)
    assert all({"id", "score", "text", "url"} <= set(hit) for hit in returns[0])


def test_pydantic_ai_tool_asks_the_model_to_retry_on_a_bad_limit(live_service: str) -> None:
    from pydantic_ai import ModelRetry

    from hybridrag.client.adapters.pydantic_ai import HybridRagDeps, search_corpus

    class Ctx:
        def __init__(self, deps: HybridRagDeps) -> None:
            self.deps = deps

    async def run() -> None:
        async with AsyncHybridRagClient(live_service) as client:
            with pytest.raises(ModelRetry, match="between 1 and 10"):
                await search_corpus(Ctx(HybridRagDeps(client)), "Sony", limit=50)  # type: ignore[arg-type]

    asyncio.run(run())


def test_missing_extra_names_what_to_install() -> None:
    from hybridrag.client.adapters import require

    with pytest.raises(ImportError, match=r"hybridrag\[nope\]"):
        require("surely_not_installed_module", "nope")


def test_example_research_loop(live_service: str) -> None:
    sys.path.insert(0, str(ROOT))
    from examples.research_loop import Section, research

    with HybridRagClient(live_service) as client:
        report = research(
            "Toyota production system and the Shinkansen",
            client,
            sections=[Section("background", 2, ("history",)), Section("key_points", 2)],
        )
    assert report["plannedSubqueries"]
    assert 1 <= len(report["rounds"]) <= 3
    assert report["covered"] is True and report["rounds"][-1]["missing"] == {"background": 0, "key_points": 0}
    keys = [e["key"] for e in report["evidences"]]
    assert len(keys) == len(set(keys)) and all(e["sectionHints"] for e in report["evidences"])
    # An unreachable target stays uncovered after the last round, and the loop stops there.
    with HybridRagClient(live_service) as client:
        short = research("Toyota", client, sections=[Section("everything", 500)])
    assert short["covered"] is False and len(short["rounds"]) == 3


def test_example_runs_as_a_script(live_service: str) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "examples/research_loop.py",
            "トヨタの歴史",
            "--url",
            live_service,
            "--sections",
            '{"overview": 1}',
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert '"covered": true' in out.stdout


# Adapter import guards in a client-only install ---------------------------------------------------------------


@pytest.fixture(scope="module")
def client_only_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with only the client extra's dependencies (pydantic, httpx) and the project's
    source on its path: what `pip install 'hybridrag[client]'` gives."""
    venv = tmp_path_factory.mktemp("client-only") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "pydantic>=2.9,<3",
            "pydantic-settings>=2.5,<3",
            "httpx>=0.27,<1",
        ],
        check=True,
        timeout=600,
    )
    return python


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "extra"),
    [("langchain", "langchain"), ("llamaindex", "llamaindex"), ("pydantic_ai", "pydantic-ai")],
)
def test_adapter_guards_name_their_extra(client_only_python: Path, module: str, extra: str) -> None:
    code = f"import hybridrag.client.adapters.{module}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([str(client_only_python), "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError:") and f"pip install 'hybridrag[{extra}]'" in last, done.stderr
    # The client itself imports there, with nothing heavy.
    done = subprocess.run(
        [str(client_only_python), "-c", "import hybridrag.client, sys; print('numpy' in sys.modules)"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.stdout.strip() == "False", done.stderr
