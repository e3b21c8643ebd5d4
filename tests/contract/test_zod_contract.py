"""The contract checked by Zod itself: the seed's schemas, run with zod 3 under node, against the live service.

Responses of the live test server must parse with the seed's `searchResultSchema`. A corpus of request
bodies gets a verdict from Zod (`searchQuerySchema`) and from the service (2xx or 4xx); they must agree,
except for the deliberate differences listed in `DIFFERENCES` (and in the README's contract section).
The small fix-ups needed to run the seed's TypeScript as JavaScript are listed in tests/zod/check.mjs.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import shared_path

ROOT = Path(__file__).resolve().parents[2]
ZOD_DIR = ROOT / "tests" / "zod"
SEED = shared_path("seeds", "search-zod-schemas.md")

#: Where the service and Zod disagree on purpose (README, "Contract: deliberate differences from Zod").
DIFFERENCES = {
    "omitted-fields": "a request may omit `type` (or send null: the classifier decides), `filters`, `options` "
    "and nullable fields; Zod requires every key",
    "unknown-keys": "unknown fields are a 422 (a typo must not pass unnoticed); Zod strips them",
    "blank-text": "whitespace-only text is a 422 (nothing to search); Zod's min(1) accepts it",
    "impossible-date": "an impossible date such as 2024-02-30 is a 422; JavaScript's Date rolls it over to "
    "March 1 and Zod accepts it",
    "added-bounds": "bounds the seed leaves open (fileIds <= 1000 items of 1..512 characters, entityTypes "
    "<= 20 of <= 64, strategies <= 4, rerankConfig.model <= 256 characters)",
    "embedding-dimension": "an embedding must have the index's dimension (384 here); Zod checks only the type",
    "extension-fields": "rrfConfig, rerankConfig and fusion beside the query are validated (and rerank models "
    "allow-listed); Zod strips them",
}


def _full(**changes: Any) -> dict[str, Any]:
    """A request as a TypeScript client holding the seed's schema would send it: every key present."""
    body: dict[str, Any] = {
        "text": "Who founded Sony?",
        "type": "local",
        "embedding": None,
        "filters": {"fileIds": None, "entityTypes": None, "dateRange": None, "minRelevance": 0.3},
        "options": {
            "limit": 5,
            "offset": 0,
            "includeMetadata": True,
            "includeHighlights": True,
            "rerankEnabled": False,
            "cragEnabled": False,
            "strategies": ["hybrid"],
            "weights": {"keyword": 0.35, "semantic": 0.35, "graph": 0.3},
        },
    }
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = body
        for part in parents:
            node = node[part]
        if value is _DROP:
            node.pop(leaf, None)
        else:
            node[leaf] = copy.deepcopy(value)
    return body


_DROP = object()


def _request_cases(dim: int) -> list[tuple[str, dict[str, Any], str | None]]:
    """(name, body, documented difference or None) for every request body of the corpus."""
    vector = [0.01] * dim
    same: list[tuple[str, dict[str, Any]]] = [
        ("full", _full()),
        ("empty text", _full(text="")),
        ("1000 ascii", _full(text="a" * 1000)),
        ("1001 ascii", _full(text="a" * 1001)),
        ("500 astral = 1000 units", _full(text="𝐀" * 500)),
        ("501 astral = 1002 units", _full(text="𝐀" * 501)),
        ("text not a string", _full(text=5)),
        ("bad type", _full(type="bogus")),
        *[(f"type {t}", _full(type=t)) for t in ("local", "global", "relationship", "hybrid")],
        ("limit 0", _full(options__limit=0)),
        ("limit 100", _full(options__limit=100)),
        ("limit 101", _full(options__limit=101)),
        ("limit 5.5", _full(options__limit=5.5)),
        # JSON has one number type: 10.0 is an integer to Zod (and a JavaScript caller cannot send 10 otherwise).
        ("limit 10.0", _full(options__limit=10.0)),
        ("offset 2.0", _full(options__offset=2.0)),
        ("limit as string", _full(options__limit="5")),
        ("offset -1", _full(options__offset=-1)),
        ("offset 10", _full(options__offset=10)),
        ("no strategies", _full(options__strategies=[])),
        ("bad strategy", _full(options__strategies=["bogus"])),
        ("two strategies", _full(options__strategies=["keyword", "semantic"])),
        ("weights sum 0.9", _full(options__weights={"keyword": 0.3, "semantic": 0.3, "graph": 0.3})),
        ("weights sum 1.005", _full(options__weights={"keyword": 0.335, "semantic": 0.37, "graph": 0.3})),
        ("weight above 1", _full(options__weights={"keyword": 1.5, "semantic": -0.5, "graph": 0})),
        ("keyword only", _full(options__weights={"keyword": 1, "semantic": 0, "graph": 0})),
        ("weights missing one", _full(options__weights={"keyword": 0.5, "semantic": 0.5})),
        ("minRelevance 1.5", _full(filters__minRelevance=1.5)),
        ("minRelevance 0", _full(filters__minRelevance=0)),
        ("dates in order", _full(filters__dateRange={"start": "2024-01-01", "end": "2024-12-31"})),
        ("dates reversed", _full(filters__dateRange={"start": "2024-12-31", "end": "2024-01-01"})),
        ("open date range", _full(filters__dateRange={"start": "2024-01-01T00:00:00Z", "end": None})),
        ("date as a number", _full(filters__dateRange={"start": 1704067200, "end": None})),
        ("date not a date", _full(filters__dateRange={"start": "yesterday", "end": None})),
        ("fileIds empty", _full(filters__fileIds=[])),
        ("fileIds", _full(filters__fileIds=["a", "b"])),
        ("fileIds not strings", _full(filters__fileIds=[1])),
        ("entityTypes", _full(filters__entityTypes=["person", "organization"])),
        ("includeMetadata string", _full(options__includeMetadata="yes")),
        ("cragEnabled", _full(options__cragEnabled=True)),
        ("embedding of the index's size", _full(embedding=vector)),
        ("embedding of strings", _full(embedding=["a"] * dim)),
        ("filters null", _full(filters=None)),
    ]
    differ: list[tuple[str, dict[str, Any], str]] = [
        ("minimal body", {"text": "Who founded Sony?"}, "omitted-fields"),
        ("type null", _full(type=None), "omitted-fields"),
        ("no filters key", _full(filters=_DROP), "omitted-fields"),
        ("unknown key", {**_full(), "foo": 1}, "unknown-keys"),
        ("unknown option", _full(options__foo=1), "unknown-keys"),
        ("blank text", _full(text="   "), "blank-text"),
        ("Feb 30", _full(filters__dateRange={"start": "2024-02-30", "end": None}), "impossible-date"),
        ("1001 fileIds", _full(filters__fileIds=["f"] * 1001), "added-bounds"),
        ("empty fileId", _full(filters__fileIds=[""]), "added-bounds"),
        ("5 strategies", _full(options__strategies=["hybrid"] * 5), "added-bounds"),
        ("embedding of 3", _full(embedding=[0.1, 0.2, 0.3]), "embedding-dimension"),
        ("rrfConfig.k 0", {**_full(), "rrfConfig": {"k": 0}}, "extension-fields"),
        ("rerank model not allowed", {**_full(), "rerankConfig": {"model": "/etc"}}, "extension-fields"),
    ]
    return [(n, b, None) for n, b in same] + differ


def _run_zod(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["node", str(ZOD_DIR / "check.mjs"), str(SEED)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    verdicts: list[dict[str, Any]] = json.loads(out.stdout)
    assert len(verdicts) == len(cases)
    return verdicts


@pytest.fixture(scope="module")
def zod() -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the Zod contract check needs node (scripts/test.sh installs zod)")
    if not SEED.is_file():
        pytest.skip(
            f"needs the seed {SEED} (the project's seeds beside the repository as ../shared; CI has it)"
        )
    assert (ZOD_DIR / "node_modules" / "zod").is_dir(), (
        "run: npm install --prefix tests/zod (scripts/test.sh does)"
    )


def _responses(url: str, dim: int) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = [
        {"text": "Who founded Sony?"},
        {"text": "トヨタ自動車を設立したのは誰ですか", "options": {"limit": 10}},
        {"text": "relationship between Sakichi Toyoda and Toyota", "options": {"cragEnabled": True}},
        {"text": "What are the main themes across these documents?", "type": "global"},
        {
            "text": "Marie Curie",
            "options": {"strategies": ["graph"], "limit": 20},
            "filters": {"minRelevance": 0},
        },
        {"text": "Shinkansen", "filters": {"dateRange": {"start": "1900-01-01", "end": "2030-01-01"}}},
        {
            "text": "computer",
            "filters": {"entityTypes": ["person"], "minRelevance": 0},
            "options": {"offset": 2},
        },
        {"text": "zzzz qqqq nonexistent", "filters": {"minRelevance": 0}},
        {"text": "Sony", "embedding": [0.01] * dim, "options": {"strategies": ["semantic"]}},
        {"text": "x", "filters": {"fileIds": []}},
    ]
    results = []
    for body in bodies:
        response = httpx.post(f"{url}/v1/search", json=body, timeout=60)
        assert response.status_code == 200, response.text
        results.append(response.json())
    batch = httpx.post(f"{url}/v1/search/batch", json={"queries": bodies[:3]}, timeout=60).json()
    results.extend(r["result"] for r in batch["results"])
    return results


def test_every_response_parses_with_the_seeds_schema(zod: None, live_service: str, embedder: Any) -> None:
    results = _responses(live_service, embedder.dim)
    verdicts = _run_zod([{"schema": "searchResultSchema", "value": r} for r in results])
    failures = [(r["query"]["text"], v["issues"][:3]) for r, v in zip(results, verdicts, strict=True)]
    assert all(v["success"] for v in verdicts), [
        f for f, v in zip(failures, verdicts, strict=True) if not v["success"]
    ]
    items = [item for r in results for item in r["results"]]
    assert len(items) > 50 and {i["type"] for i in items} >= {"chunk", "entity"}
    for item in items:  # every highlight offset lies inside the text it points into
        for highlight in item["highlights"]:
            assert all(
                0 <= o["start"] < o["end"] <= len(item["content"]["text"]) for o in highlight["offsets"]
            )


def test_request_verdicts_agree_with_zod_except_where_documented(
    zod: None, live_service: str, embedder: Any
) -> None:
    cases = _request_cases(embedder.dim)
    verdicts = _run_zod([{"schema": "searchQuerySchema", "value": body} for _, body, _ in cases])
    disagreements = []
    for (name, body, reason), verdict in zip(cases, verdicts, strict=True):
        response = httpx.post(f"{live_service}/v1/search", json=body, timeout=60)
        assert response.status_code < 500, (name, response.text)
        service_ok = response.status_code == 200
        agree = service_ok == verdict["success"]
        if reason is None and not agree:
            disagreements.append(f"{name}: service {response.status_code}, zod {verdict}")
        if reason is not None:
            assert reason in DIFFERENCES
            if agree:
                disagreements.append(f"{name}: documented as '{reason}' but both say {service_ok}")
    assert not disagreements, "\n".join(disagreements)
    # The corpus is not vacuous: both verdicts occur among the agreeing cases.
    agreeing = [v["success"] for (_, _, r), v in zip(cases, verdicts, strict=True) if r is None]
    assert agreeing.count(True) >= 10 and agreeing.count(False) >= 10


def test_documented_differences_are_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    for reason in DIFFERENCES:
        assert f"`{reason}`" in readme, reason
