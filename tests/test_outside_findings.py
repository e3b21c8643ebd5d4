"""Defects found from outside (second round): client-side validation errors, echoed ids, adapter import guards
in a client-only install, content encodings, integral floats, malformed requests below the app, licence."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]


# 1. One exception family, the same errors, whoever finds the problem -----------------------------------------

INVALID_SEARCHES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # (name, client keyword arguments, the same request as a wire body)
    (
        "weights",
        {"weights": {"keyword": 0.5, "semantic": 0.5, "graph": 0.5}},
        {"options": {"weights": {"keyword": 0.5, "semantic": 0.5, "graph": 0.5}}},
    ),
    ("limit 0", {"limit": 0}, {"options": {"limit": 0}}),
    ("misspelled option", {"limt": 3}, {"options": {"limt": 3}}),
    ("limit 10.5", {"limit": 10.5}, {"options": {"limit": 10.5}}),
]


def _service_errors(url: str, body: dict[str, Any], path: str, language: str) -> list[dict[str, Any]]:
    answer = httpx.post(f"{url}{path}", json=body, headers={"Accept-Language": language}, timeout=30)
    assert answer.status_code == 422, answer.text
    errors: list[dict[str, Any]] = answer.json()["errors"]
    return errors


@pytest.mark.parametrize("language", ["ja", "en"])
@pytest.mark.parametrize("case", INVALID_SEARCHES, ids=lambda c: c[0])
def test_client_validation_raises_the_services_error(
    case: tuple[str, dict[str, Any], dict[str, Any]], language: str, live_service: str
) -> None:
    from hybridrag.client import HybridRagClient, HybridRagError, HybridRagValidationError

    _name, kwargs, wire = case
    expected = _service_errors(live_service, {"text": "Who founded Sony?", **wire}, "/v1/search", language)
    with HybridRagClient(live_service, retries=0) as rag, pytest.raises(HybridRagValidationError) as caught:
        rag.search("Who founded Sony?", language=language, **kwargs)
    assert isinstance(caught.value, HybridRagError)
    assert caught.value.source == "client" and caught.value.status_code == 422
    assert caught.value.errors == expected
    assert all(isinstance(e, dict) for e in caught.value.errors)  # a list, not a method


def test_client_language_is_the_clients_default(live_service: str) -> None:
    from hybridrag.client import HybridRagClient, HybridRagValidationError

    with (
        HybridRagClient(live_service, language="en") as rag,
        pytest.raises(HybridRagValidationError) as caught,
    ):
        rag.search("Who founded Sony?", weights={"keyword": 0.5, "semantic": 0.5, "graph": 0.5})
    assert caught.value.errors[0]["message"] == "Search weights must sum to 1.0"
    with HybridRagClient(live_service) as rag, pytest.raises(HybridRagValidationError) as caught:
        rag.search("Who founded Sony?", weights={"keyword": 0.5, "semantic": 0.5, "graph": 0.5})
    assert caught.value.errors[0]["message"] == "検索重みの合計は1.0である必要があります"


def test_batch_validation_errors_match_the_service(live_service: str) -> None:
    from hybridrag.client import AsyncHybridRagClient, HybridRagClient, HybridRagValidationError

    bad_weights = {"keyword": 0.5, "semantic": 0.5, "graph": 0.5}
    # Shared options with weights inside a batch, and a raw-dict sub-query.
    expected = _service_errors(
        live_service,
        {"queries": [{"text": "Sony"}, {"text": "Toyota", "options": {"weights": bad_weights}}]},
        "/v1/search/batch",
        "en",
    )
    with HybridRagClient(live_service, language="en") as rag:
        with pytest.raises(HybridRagValidationError) as caught:
            rag.search_batch(["Sony", {"text": "Toyota", "options": {"weights": bad_weights}}])
        assert caught.value.errors == expected
        with pytest.raises(HybridRagValidationError) as caught:
            rag.search_batch(["Sony", "Toyota"], weights=bad_weights)
        assert [e["path"] for e in caught.value.errors] == [
            "queries[0].options.weights",
            "queries[1].options.weights",
        ]
    import asyncio

    async def run() -> list[dict[str, Any]]:
        async with AsyncHybridRagClient(live_service, language="en") as rag:
            try:
                await rag.search_batch([{"text": "Toyota", "options": {"limit": 0}}])
            except HybridRagValidationError as exc:
                return exc.errors
        return []

    assert asyncio.run(run()) == [
        {
            "path": "queries[0].options.limit",
            "message": "Must be greater than or equal to 1",
            "code": "greater_than_equal",
        }
    ]


# 2. Error bodies stay bounded whatever the request -------------------------------------------------------------


def _raw_get(url: str, target: bytes) -> tuple[int, dict[str, str], bytes]:
    """One GET over a plain socket (httpx refuses URLs this long), answer read until the server closes."""
    host, port = url.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize(("path", "length"), [("/v1/documents/", 10_000), ("/v1/chunks/", 10_000)])
def test_long_path_parameters_are_not_echoed(client: Any, path: str, length: int) -> None:
    answer = client.get(path + "a" * length)
    assert answer.status_code == 404
    assert len(answer.content) < 1_000, len(answer.content)
    problem = answer.json()
    assert f"({length} characters)" in problem["detail"]
    assert len(problem["instance"]) <= 201


@pytest.mark.parametrize("path", [b"/v1/documents/", b"/v1/chunks/"])
def test_very_long_paths_get_a_small_answer(live_service: str, path: bytes) -> None:
    status, headers, body = _raw_get(live_service, path + b"a" * 100_000)
    assert status in (400, 404, 414)
    assert len(body) < 1_000 and headers["content-type"] == "application/problem+json"


def test_a_request_refused_before_it_has_all_arrived_still_gets_its_answer(live_service: str) -> None:
    # The head arrives in two parts: h11 refuses the first (40 KB with no end of line) while the second is on
    # its way. Closed at once, the server's socket answered the unread second part with a reset, which
    # destroyed the 400 before the client read it (most tries failed so); it now drains until the client closes.
    host, port = live_service.rsplit("/", 1)[1].split(":")
    for _ in range(10):
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(b"GET /v1/documents/" + b"a" * 40_000)
            sock.sendall(b"a" * 60_000 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400"), head[:80]
        assert json.loads(body)["status"] == 400


# 4. Content encodings ------------------------------------------------------------------------------------------


def _post(client: Any, body: bytes, encoding: str | None) -> Any:
    headers = {"Content-Type": "application/json", "Accept-Language": "en"}
    if encoding:
        headers["Content-Encoding"] = encoding
    return client.post("/v1/search", content=body, headers=headers)


def test_gzip_bodies_are_accepted(client: Any) -> None:
    body = json.dumps({"text": "Who founded Sony?", "options": {"limit": 3}}).encode()
    plain = _post(client, body, None)
    zipped = _post(client, gzip.compress(body), "gzip")
    assert zipped.status_code == 200, zipped.text
    assert [r["id"] for r in zipped.json()["results"]] == [r["id"] for r in plain.json()["results"]]


def test_a_gzip_bomb_is_a_413_and_other_encodings_a_415(client: Any) -> None:
    # 5 MB of spaces around a query: a few kilobytes compressed, five times the body limit inflated.
    bomb = gzip.compress(b'{"text": "Sony"' + b" " * 5_000_000 + b"}")
    assert len(bomb) < 20_000
    answer = _post(client, bomb, "gzip")
    assert answer.status_code == 413 and answer.json()["errors"][0]["code"] == "body_too_large"
    answer = _post(client, b"\x1f\x8b not gzip at all", "gzip")
    assert answer.status_code == 400 and answer.json()["errors"][0]["code"] == "invalid_gzip"
    answer = _post(client, b"{}", "br")
    assert answer.status_code == 415
    error = answer.json()["errors"][0]
    assert error["code"] == "unsupported_content_encoding" and "br" in error["message"]


# 5. Integral floats for integer fields (JavaScript has one number type) -----------------------------------------


def test_integral_floats_are_integers(client: Any) -> None:
    ok = client.post(
        "/v1/search", json={"text": "Who founded Sony?", "options": {"limit": 2.0, "offset": 0.0}}
    )
    assert ok.status_code == 200, ok.text
    assert len(ok.json()["results"]) == 2 and ok.json()["query"]["options"]["limit"] == 2
    bad = client.post("/v1/search", json={"text": "Sony", "options": {"limit": 2.5}})
    assert bad.status_code == 422 and bad.json()["errors"][0]["path"] == "options.limit"


# 6. Requests too malformed to reach the app still get the service's problem shape ------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"GET /v1/s\xc3\xa9arch HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /v1/\tsearch HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Bad: a\rb\r\n\r\n",
        b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Bad: a\x00b\r\n\r\n",
    ],
    ids=["non-ascii path", "tab in path", "bare CR in header", "NUL in header"],
)
def test_malformed_requests_get_problem_json(live_service: str, raw: bytes) -> None:
    host, port = live_service.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(raw)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1.1 400")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    assert headers["content-type"] == "application/problem+json"
    assert headers["x-request-id"]
    problem = json.loads(body)
    assert problem["status"] == 400 and problem["requestId"] == headers["x-request-id"]


# 3. Adapter import guards in a client-only install ---------------------------------------------------------------


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


# 7. Licence metadata ------------------------------------------------------------------------------------------


def test_license_is_an_spdx_string() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["license"] == "MIT"
