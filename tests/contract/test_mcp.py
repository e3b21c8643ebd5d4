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

ROOT = Path(__file__).resolve().parents[2]


def _server_args(url: str, *extra: str) -> list[str]:
    return ["-m", "hybridrag.mcp", "--url", url, "--timeout", "15", *extra]


@asynccontextmanager
async def stdio_session(url: str, *extra: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=_server_args(url, *extra), env=dict(os.environ)
    )
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


@pytest.mark.parametrize("language", ["en", "ja"])
def test_tool_arguments_are_checked_as_the_contract_checks_them(live_service: str, language: str) -> None:
    """Unknown argument names are refused (the schemas say so), and every invalid argument reads like the
    service's own errors: path, message and code in the chosen language, no value echoed, no pydantic dump."""
    english = language == "en"
    cases = [
        (
            {"text": "Sony", "limt": 3},
            "limt",
            "Unknown field" if english else "不明なフィールドです",
            "extra_forbidden",
        ),
        (
            {"text": "Sony", "limit": 0},
            "limit",
            "Must be greater than or equal to 1" if english else "1以上",
            "greater_than_equal",
        ),
        (
            {"text": "Sony", "filters": {"dateRange": {"start": "2024-02-30"}}},
            "filters.dateRange.start",
            "Invalid date" if english else "日付の形式が正しくありません",
            "datetime_from_date_parsing",
        ),
        (
            {"text": "Sony", "weights": {"keyword": 0.3, "semantic": 0.3, "graph": 0.3}},
            "weights",
            "Search weights must sum to 1.0" if english else "検索重みの合計は1.0である必要があります",
            "weights_sum",
        ),
        ({"queries": ["a"], "merge": True, "limitt": 2}, "limitt", "", "extra_forbidden"),
    ]

    async def run() -> None:
        async with stdio_session(live_service, "--language", language) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            for tool in tools.values():
                assert tool.inputSchema.get("additionalProperties") is False, tool.name
            for arguments, path, message, code in cases:
                name = "search_batch" if "queries" in arguments else "search"
                result = await session.call_tool(name, arguments)
                text = _text(result)
                assert result.isError, (arguments, text)
                assert f"invalid arguments: {path}: {message}" in text and f"[{code}]" in text, text
                for leak in ("validation error", "errors.pydantic.dev", "input_value", "2024-02-30", "0.3"):
                    assert leak not in text, (leak, text)

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


@pytest.mark.slow
def test_the_mcp_commands_without_the_mcp_extra_say_which_extra_to_install(tmp_path: Path) -> None:
    """An install with the client only: `hybridrag-mcp` and `hybridrag mcp` print the one-line hint naming
    `hybridrag[mcp]` (no traceback), and an MCP host that spawns it sees the hint on the server's stderr."""
    venv = venv_with("client", tmp_path)
    for command in (["hybridrag-mcp"], ["hybridrag", "mcp"]):
        ran = subprocess.run([str(venv / "bin" / command[0]), *command[1:]], capture_output=True, text=True)
        assert ran.returncode == 2, ran.stderr
        assert "pip install 'hybridrag[mcp]'" in ran.stderr and "Traceback" not in ran.stderr, ran.stderr
    errlog = tmp_path / "server-stderr.txt"

    async def host() -> None:
        params = StdioServerParameters(command=str(venv / "bin" / "hybridrag-mcp"), args=[])
        with open(errlog, "w") as err:
            async with (
                stdio_client(params, errlog=err) as (read, write),
                ClientSession(read, write) as session,
            ):
                await asyncio.wait_for(session.initialize(), timeout=30)

    with pytest.raises(BaseException):  # noqa: B017 - the SDK reports a closed pipe in its own ways
        asyncio.run(host())
    logged = errlog.read_text()
    assert "pip install 'hybridrag[mcp]'" in logged and "Traceback" not in logged, logged
