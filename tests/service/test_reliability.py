"""Reliability and access: metrics, rate limits, CORS, keys, hostile input, corrupt indexes, hot index swaps."""

from __future__ import annotations

import gc
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from hybridrag.http.app import create_app
from hybridrag.http.ratelimit import RateLimiter, caller_key
from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
from hybridrag.indexing.stores import versions
from hybridrag.pipeline.engine import SearchEngine
from hybridrag.pipeline.settings import Settings

SAMPLE = Path(__file__).resolve().parents[2] / "service" / "cli" / "sample_corpus"


def _app(index_dir: Path, embedder: Any = None, **settings: Any) -> Any:
    config = Settings(  # type: ignore[call-arg]
        index_dir=index_dir,
        embedding_model="minilm",
        load_embedder=embedder is not None,
        _env_file=None,
        **settings,
    )
    return create_app(config, SearchEngine(config, embedder=embedder), wait=True)


def test_prometheus_metrics(client: TestClient) -> None:
    client.post("/v1/search", json={"text": "Toyota", "options": {"rerankEnabled": False}})
    client.post("/v1/search", json={"text": ""})
    body = client.get("/metrics").text
    assert 'hybridrag_requests_total{method="POST",route="/v1/search",status="200"}' in body
    assert 'hybridrag_requests_total{method="POST",route="/v1/search",status="422"}' in body
    assert 'hybridrag_stage_seconds_count{stage="keyword"}' in body
    assert 'hybridrag_candidates_bucket{le="100.0",strategy="semantic"}' in body
    assert "hybridrag_index_info{version=" in body and "hybridrag_index_chunks" in body
    assert "hybridrag_request_seconds_bucket" in body


def test_metrics_can_be_turned_off(sample_index: Path) -> None:
    with TestClient(_app(sample_index, metrics_enabled=False)) as c:
        assert c.get("/metrics").status_code == 404


def test_rate_limiter_token_bucket() -> None:
    limiter = RateLimiter(rate=2.0, burst=3)
    assert [limiter.acquire("a", now=0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.acquire("a", now=0.0) == pytest.approx(0.5)
    assert limiter.acquire("b", now=0.0) == 0.0  # callers have their own buckets
    assert limiter.acquire("a", now=0.6) == 0.0  # 1.2 tokens refilled
    with pytest.raises(ValueError):
        RateLimiter(rate=0, burst=1)
    assert caller_key("s3cret", "1.2.3.4") == caller_key("s3cret", "5.6.7.8")
    assert caller_key("", "1.2.3.4") == "addr:1.2.3.4"
    assert "s3cret" not in caller_key("s3cret", None)
    # The key is read the way the API-key check reads it: a bearer token and X-API-Key are the same caller.
    from starlette.requests import Request

    from hybridrag.http.deps import presented_key

    def request(*headers: tuple[bytes, bytes]) -> Request:
        return Request({"type": "http", "headers": list(headers)})

    assert presented_key(request((b"authorization", b"Bearer s3cret"))) == "s3cret"
    assert presented_key(request((b"x-api-key", b"s3cret"))) == "s3cret"
    assert presented_key(request((b"authorization", b"Basic abc"))) == ""
    assert presented_key(request()) == ""


def test_rate_limit_answers_429_and_spares_health(sample_index: Path) -> None:
    with TestClient(_app(sample_index, rate_limit_per_s=0.5, rate_limit_burst=2)) as c:
        codes = [c.get("/v1/documents/none").status_code for _ in range(3)]
        assert codes == [404, 404, 429]
        r = c.post("/v1/search", json={"text": "x"})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert r.headers["content-type"] == "application/problem+json" and r.json()["status"] == 429
        assert all(c.get("/livez").status_code == 200 for _ in range(5))
        assert c.get("/readyz").status_code == 200
        # Another key is another caller.
        assert c.get("/v1/documents/none", headers={"X-API-Key": "other"}).status_code == 404
        assert "hybridrag_rate_limited_total 2.0" in c.get("/metrics").text


def test_cors_is_off_by_default_and_follows_settings(client: TestClient, sample_index: Path) -> None:
    preflight = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
    r = client.options("/v1/search", headers=preflight)
    assert "access-control-allow-origin" not in r.headers
    with TestClient(_app(sample_index, cors_origins=["https://app.example"])) as c:
        r = c.options("/v1/search", headers=preflight)
        assert r.headers["access-control-allow-origin"] == "https://app.example"
        other = c.options("/v1/search", headers={**preflight, "Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers


def test_api_key_guards_every_data_endpoint_but_not_health(sample_index: Path) -> None:
    with TestClient(_app(sample_index, api_key="k")) as c:
        for method, path in [
            ("POST", "/v1/search"),
            ("POST", "/search"),
            ("POST", "/v1/search/batch"),
            ("GET", "/v1/documents/x"),
            ("GET", "/v1/chunks/x"),
        ]:
            r = c.request(method, path, json={"text": "x"})
            assert r.status_code == 401, path
            assert r.headers["www-authenticate"] == "Bearer"
        assert c.get("/livez").status_code == 200 and c.get("/readyz").status_code == 200
        ok = c.post("/v1/search", json={"text": "Sony"}, headers={"Authorization": "Bearer k"})
        assert ok.status_code == 200


HOSTILE = [
    {"text": "!@#$%^&*()" * 100},
    {"text": "😀🎉🔥" * 166},  # 996 UTF-16 units: just inside the bound as Zod counts it
    {"text": "トヨタ Toyota 生産方式 production system " * 20},
    {"text": "a", "options": {"limit": 100, "offset": 10**9}},
    {"text": "\u0000\u200b\ufeff x"},
    {"text": "x", "filters": {"entityTypes": ["💥"] * 20, "fileIds": ["../../etc/passwd"]}},
    {"text": "x", "filters": {"dateRange": {"start": "0001-01-01", "end": "9999-12-31"}}},
]


@pytest.mark.parametrize("body", HOSTILE)
def test_hostile_but_valid_queries_answer_200(client: TestClient, body: dict[str, Any]) -> None:
    r = client.post("/v1/search", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["totalCount"] >= 0


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"text": "x" * 1001}, "text"),
        ({"text": "x", "options": {"limit": 10**12}}, "options.limit"),
        ({"text": "x", "options": {"offset": -1}}, "options.offset"),
        ({"text": "x", "embedding": [0.1] * 5000}, "embedding"),
        ({"text": "x", "embedding": [0.1] * 7}, "embedding"),
        ({"text": "x", "options": {"weights": {"keyword": 1, "semantic": 1, "graph": 1}}}, "options.weights"),
        ({"text": "x", "rrfConfig": {"k": 0}}, "rrfConfig.k"),
    ],
)
def test_invalid_input_names_the_field(client: TestClient, body: dict[str, Any], path: str) -> None:
    r = client.post("/v1/search", json=body)
    assert r.status_code == 422, r.text
    assert path in [e["path"] for e in r.json()["errors"]]


def test_deeply_nested_json_is_a_clean_4xx(client: TestClient) -> None:
    deep = b'{"text": "x", "filters": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5000 + b"}"
    r = client.post("/v1/search", content=deep, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500 and r.headers["content-type"] == "application/problem+json"
    arr = b'{"text": "x", "embedding": ' + b"[" * 10000 + b"]" * 10000 + b"}"
    r = client.post("/v1/search", content=arr, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500


@pytest.mark.parametrize("damage", ["chunks", "keyword", "manifest", "dangling"])
def test_damaged_index_gives_a_clear_readiness_failure(tmp_path: Path, damage: str) -> None:
    index_dir = tmp_path / "idx"
    IndexBuilder(index_dir, BuildConfig(embedding_model=None)).build(SAMPLE)
    version = versions.current_version(index_dir).path
    if damage == "chunks":
        (version / "chunks.arrow").write_bytes(b"not arrow at all")
    elif damage == "keyword":
        shutil.rmtree(version / "keyword")
    elif damage == "manifest":
        (version / "manifest.json").write_text("{", "utf-8")
    else:
        shutil.rmtree(version)
    with TestClient(_app(index_dir)) as c:
        r = c.get("/readyz")
        assert r.status_code == 503
        detail = r.json()["components"]["index"]["detail"]
        assert str(index_dir) in detail or "damaged" in detail or "no index" in detail, detail
        assert c.get("/livez").status_code == 200
        assert c.post("/v1/search", json={"text": "x"}).status_code == 503


def _open_files_under(path: Path) -> list[str]:
    out = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(str(path)):
            out.append(target)
    maps = Path("/proc/self/maps").read_text()
    out += [line.split()[-1] for line in maps.splitlines() if str(path) in line]
    return out


def test_index_swap_under_load(tmp_path: Path, embedder: Any, serve: Any) -> None:
    """Searches run while a new version is built and switched: none fails, none mixes versions."""
    index_dir = tmp_path / "idx"
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    config = BuildConfig(embedding_model="minilm")
    IndexBuilder(index_dir, config, embedder=embedder).build(corpus)
    old = versions.current_version(index_dir)
    settings = Settings(  # type: ignore[call-arg]
        index_dir=index_dir, embedding_model="minilm", reload_interval_s=0.05, _env_file=None
    )
    engine = SearchEngine(settings, embedder=embedder)
    url = serve(create_app(settings, engine, wait=True))
    stop = threading.Event()
    seen: list[tuple[int, str | None, list[str]]] = []

    def load() -> None:
        with httpx.Client(base_url=url, timeout=30) as http:
            while not stop.is_set():
                r = http.post("/v1/search", json={"text": "Toyota 新幹線 Curie", "options": {"limit": 10}})
                body = r.json()
                seen.append(
                    (r.status_code, body.get("indexVersion"), [i["id"] for i in body.get("results", [])])
                )

    workers = [threading.Thread(target=load) for _ in range(4)]
    for w in workers:
        w.start()
    try:
        (corpus / "new-doc.md").write_text("# Hybrid search\n\nToyota and the Shinkansen in one new note.\n")
        IndexBuilder(index_dir, config, embedder=embedder).build(corpus)
        new = versions.current_version(index_dir)
        deadline = threading.Event()
        for _ in range(200):
            if engine.index.version_name == new.version:
                break
            deadline.wait(0.05)
        deadline.wait(0.5)  # keep the load going on the new version for a while
    finally:
        stop.set()
        for w in workers:
            w.join()
    assert engine.index.version_name == new.version
    assert seen and all(code == 200 for code, _, _ in seen), {c for c, _, _ in seen}
    served = {v for _, v, _ in seen}
    assert served <= {old.version, new.version} and new.version in served
    # Every page comes from the version it names: its chunk ids all exist in that version.
    chunks = {
        v.version: {r["chunk_id"] for r in _chunk_rows(v.path)}
        for v in (old, versions.current_version(index_dir))
    }
    for _, version, ids in seen:
        assert version is not None
        assert set(i for i in ids if i.startswith("c-")) <= chunks[version]
    gc.collect()
    assert _open_files_under(old.path) == []


def _chunk_rows(version_path: Path) -> list[dict[str, Any]]:
    from hybridrag.indexing.stores.tables import CHUNKS, read_version_table

    return read_version_table(version_path, CHUNKS).to_pylist()  # type: ignore[no-any-return]


def test_a_damaged_new_version_keeps_the_old_one_serving(tmp_path: Path) -> None:
    index_dir = tmp_path / "idx"
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    IndexBuilder(index_dir, BuildConfig(embedding_model=None)).build(corpus)
    settings = Settings(index_dir=index_dir, load_embedder=False, reload_interval_s=0, _env_file=None)  # type: ignore[call-arg]
    engine = SearchEngine(settings)
    engine.start()
    served = engine.index.version_name
    (corpus / "x.md").write_text("# X\n\nanother document\n")
    IndexBuilder(index_dir, BuildConfig(embedding_model=None)).build(corpus)
    (versions.current_version(index_dir).path / "chunks.arrow").write_bytes(b"junk")
    assert engine.reload_if_switched() is False
    assert engine.index.version_name == served and engine.ready
    assert engine.reload_if_switched() is False  # a failed version is not retried in a loop
    engine.close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_build_and_add_killed_at_random_points(tmp_path: Path, seed: int) -> None:
    """SIGKILL `index build` / `index add` at a random moment: the serving version stays intact and usable,
    and a rerun completes. The kill moment is drawn from a seeded generator so a failure can be replayed."""
    import random
    import signal
    import subprocess
    import sys
    import time

    rng = random.Random(seed)
    index_dir = tmp_path / "idx"
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    base = [sys.executable, "-m", "hybridrag.cli", "index"]
    build = [*base, "build", str(corpus), "--out", str(index_dir), "--embedding-model", "none", "--json"]
    subprocess.run(build, check=True, capture_output=True, env=env)
    before = versions.current_version(index_dir)
    (corpus / "extra.md").write_text("# Extra\n\nA document added later about Kyoto and Osaka.\n", "utf-8")
    add = [*base, "add", str(corpus / "extra.md"), "--index", str(index_dir), "--json"]
    for cmd in (build, add):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        time.sleep(rng.uniform(0.5, 6.0))  # start-up, reading, indexing or publishing, whichever it is in
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        current = versions.current_version(index_dir)  # complete (it has a manifest), old or new
        assert current.version == before.version or current.manifest["counts"]["documents"] >= 12
        with TestClient(_app(index_dir)) as c:
            assert c.get("/readyz").status_code == 200
            assert c.post("/v1/search", json={"text": "Sony"}).json()["results"]
    done = subprocess.run(add, capture_output=True, env=env, text=True)
    assert done.returncode == 0, done.stderr
    assert not list(index_dir.glob(".staging-*"))
    assert versions.current_version(index_dir).manifest["counts"]["documents"] == 13


def test_malloc_arenas_are_capped_where_libc_is_glibc() -> None:
    """`HYBRIDRAG_MALLOC_ARENAS`: glibc accepts the cap (process-wide, so asked in a process of its own)."""
    import platform
    import subprocess
    import sys

    code = "from hybridrag.pipeline.lifecycle import limit_malloc_arenas as f; print(f(2))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(platform.libc_ver()[0] == "glibc")
