"""The MCP server, driven by the MCP SDK's own client over stdio and over streamable HTTP, against a live
test service: tools listed with schemas from the contract, calls answered, bad arguments and a service that
is down as tool errors, and recovery when the service comes back."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import _start_server, free_port, venv_with

pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters
from mcp.client import streamable_http as _streamable
from mcp.client.stdio import stdio_client

# The SDK renamed the client (1.2x); either name opens the same transport.
streamable_client = getattr(_streamable, "streamable_http_client", None) or _streamable.streamablehttp_client

ROOT = Path(__file__).resolve().parents[1]


def _server_args(url: str, *extra: str) -> list[str]:
    return ["-m", "hybridrag.mcp", "--url", url, "--timeout", "15", *extra]


@asynccontextmanager
async def stdio_session(url: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=_server_args(url), env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def _exercise(session: ClientSession) -> None:
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert {"search", "search_batch", "get_document"} <= set(tools)
    schema = tools["search"].inputSchema
    # Schemas come from the contract: the weights model with its three fields, the strategy enum.
    assert "weights" in schema["properties"] and "limit" in schema["properties"]
    assert "hybrid" in str(schema) and "keyword" in str(schema)
    assert tools["search"].outputSchema is not None
    result = await session.call_tool("search", {"text": "Who founded Sony?", "limit": 3})
    assert not result.isError, _text(result)
    text = _text(result)
    assert "Sony" in text and "url: http" in text
    top = result.structuredContent["results"][0]
    assert "Sony" in top["metadata"]["title"]
    doc_id = top["metadata"]["docId"]
    document = await session.call_tool("get_document", {"id": doc_id})
    assert not document.isError and "Masaru Ibuka" in _text(document)
    resource = await session.read_resource(f"hybridrag://documents/{doc_id}")  # type: ignore[arg-type]
    assert "Masaru Ibuka" in resource.contents[0].text  # type: ignore[union-attr]
    batch = await session.call_tool("search_batch", {"queries": ["radium", "東京タワー"], "limit": 2})
    assert not batch.isError and "Merged" in _text(batch)
    assert len(batch.structuredContent["results"]) == 2
    # A bad argument is a tool error that names the field, in words the model can act on.
    bad = await session.call_tool(
        "search", {"text": "Sony", "weights": {"keyword": 0.5, "semantic": 0.5, "graph": 0.5}}
    )
    assert bad.isError and "weights" in _text(bad)
    too_many = await session.call_tool("search", {"text": "Sony", "limit": 500})
    assert too_many.isError and "limit" in _text(too_many)
    unknown = await session.call_tool("get_document", {"id": "no-such-document"})
    assert unknown.isError and "404" in _text(unknown)


def test_stdio_tools_against_the_live_service(live_service: str) -> None:
    async def run() -> None:
        async with stdio_session(live_service) as session:
            await _exercise(session)

    asyncio.run(run())


@pytest.fixture()
def http_mcp(live_service: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, *_server_args(live_service, "--transport", "streamable-http", "--port", str(port))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            httpx.get(url, timeout=1)
            break
        except httpx.TransportError:
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_streamable_http_tools_against_the_live_service(http_mcp: str) -> None:
    async def run() -> None:
        async with streamable_client(http_mcp) as (read, write, _), ClientSession(read, write) as session:
            await session.initialize()
            await _exercise(session)

    asyncio.run(run())


def test_a_service_that_is_down_is_a_tool_error_and_the_server_recovers(
    sample_index: Path, embedder: Any
) -> None:
    from hybridrag.http.app import create_app
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    port = free_port()
    url = f"http://127.0.0.1:{port}"

    async def run() -> None:
        async with stdio_session(url) as session:
            down = await session.call_tool("search", {"text": "Who founded Sony?"})
            assert down.isError and "cannot be reached" in _text(down)
            settings = Settings(index_dir=sample_index, embedding_model="minilm", port=port, _env_file=None)  # type: ignore[call-arg]
            engine = SearchEngine(settings, embedder=embedder)
            engine.start()
            server, _ = _start_server(create_app(settings, engine), port)
            try:
                up = await session.call_tool("search", {"text": "Who founded Sony?"})
                assert not up.isError and "Sony" in _text(up)
            finally:
                server.should_exit = True

    asyncio.run(run())


def test_the_mcp_command_is_routed_without_the_server_stack() -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "hybridrag"), "mcp", "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "--transport" in done.stdout


@pytest.mark.slow
def test_the_mcp_extra_installs_without_torch_or_the_server_stack(tmp_path: Path) -> None:
    venv = venv_with("mcp", tmp_path)
    heavy = (
        "torch",
        "numpy",
        "tantivy",
        "lancedb",
        "fastapi",
        "onnxruntime",
        "sentence_transformers",
        "typer",
    )
    probe = f"import importlib.util as u; print([m for m in {heavy!r} if u.find_spec(m)])"
    found = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True)
    assert found.stdout.strip() == "[]", found.stdout + found.stderr
    for command in (["hybridrag", "mcp", "--help"], ["hybridrag-mcp", "--help"]):
        ran = subprocess.run([str(venv / "bin" / command[0]), *command[1:]], capture_output=True, text=True)
        assert ran.returncode == 0 and "--transport" in ran.stdout, ran.stderr
