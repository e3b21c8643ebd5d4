"""The playground page (`/ui`) driven in a real headless Chromium against the live test service.

Skipped, with the reason, where Chromium or Playwright is missing (scripts/test.sh installs Chromium from
Debian's packages when it can). Screenshots of the main views go to the test's output folder, and also to
$HYBRIDRAG_UI_SCREENSHOTS when set (that is how docs/*.png are refreshed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")

# Offline and quiet: without the background-networking flags Chromium tries Google's hosts at start.
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("screenshots")
    yield folder
    target = os.environ.get("HYBRIDRAG_UI_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for png in folder.glob("*.png"):
            shutil.copy(png, Path(target) / png.name)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield instance
        instance.close()


class Recorder:
    """Every request the page makes, and its JSON body when it has one."""

    def __init__(self, page: Any) -> None:
        self.requests: list[Any] = []
        self.errors: list[str] = []
        page.on("request", lambda request: self.requests.append(request))
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def hosts(self) -> set[str]:
        return {urlsplit(r.url).netloc for r in self.requests if not r.url.startswith("data:")}

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [
            json.loads(r.post_data) for r in self.requests if urlsplit(r.url).path == path and r.post_data
        ]


@pytest.fixture()
def page(browser: Any, live_service: str) -> Iterator[tuple[Any, Recorder]]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    recorder = Recorder(tab)
    yield tab, recorder
    host = urlsplit(live_service).netloc
    assert recorder.hosts() <= {host}, f"the page reached another host: {recorder.hosts()}"
    assert not recorder.errors, recorder.errors
    context.close()


def test_results_view_shows_highlights_scores_and_the_graph_path(
    page: tuple[Any, Recorder], live_service: str, shots: Path
) -> None:
    tab, rec = page
    tab.goto(f"{live_service}/ui?q={quote('Who founded Sony?')}")  # the URL alone runs the search
    tab.wait_for_selector(".result")
    api = httpx.post(
        f"{live_service}/v1/search", json={"text": "Who founded Sony?", "options": {"limit": 10}}
    ).json()
    cards = tab.locator(".result")
    assert cards.count() == len(api["results"])
    first, expected = cards.nth(0), api["results"][0]
    assert first.get_attribute("data-id") == expected["id"]
    assert first.locator(".text").inner_text().strip() == expected["content"]["text"].strip()
    text = expected["content"]["text"]
    marks = first.locator(".text mark").all_inner_texts()
    assert marks == [text[o["start"] : o["end"]] for h in expected["highlights"] for o in h["offsets"]]
    assert {m.lower() for m in marks} <= {"sony", "founded"} and marks
    assert first.locator(".bars .bar-fill.keyword").count() == 1
    assert "rank 1" in first.locator(".bars").inner_text()
    assert tab.locator("#query-type").inner_text() == api["classification"]["type"]
    # The walk that reached a hit, drawn: the seed (the query's entity or a top dense passage), then each
    # step to the passage, labelled by entity name or the passage's title.
    walked = next(i for i, r in enumerate(api["results"]) if len(r["metadata"].get("graphPath", [])) >= 2)
    path = api["results"][walked]["metadata"]["graphPath"]
    nodes = cards.nth(walked).locator(".path g.node")
    assert nodes.count() == len(path) and "seed" in (nodes.nth(0).get_attribute("class") or "")
    labels = [(s.get("name") or s.get("title") or "passage") for s in path]
    assert [nodes.nth(i).locator("text").text_content() for i in range(len(path))] == [
        label if len(label) <= 18 else label[:17] + "…" for label in labels
    ]
    tab.screenshot(path=str(shots / "ui-results.png"), full_page=True)
    assert rec.bodies("/v1/search")[0] == {
        "text": "Who founded Sony?",
        "options": {"limit": 10, "strategies": ["hybrid"]},
    }


def test_toggles_and_sliders_shape_the_request(page: tuple[Any, Recorder], live_service: str) -> None:
    tab, rec = page
    tab.goto(f"{live_service}/ui")
    tab.fill("#q", "Toyota production system")
    tab.uncheck("input[name=strategy][value=graph]")
    tab.click("#go")
    tab.wait_for_selector(".result")
    body = rec.bodies("/v1/search")[-1]
    assert body["options"]["strategies"] == ["keyword", "semantic"]
    assert "weights" not in body["options"], "untouched sliders leave the weights to the classifier"
    assert "s=keyword%2Csemantic" in tab.url
    # Move one slider with the keyboard: the other two follow so the sum stays 1.0.
    tab.focus("#w-keyword")
    before = float(tab.input_value("#w-keyword"))
    tab.keyboard.press("ArrowRight")
    tab.keyboard.press("ArrowRight")
    assert float(tab.input_value("#w-keyword")) == before + 10
    with tab.expect_response(lambda r: r.url.endswith("/v1/search")):
        tab.click("#go")
    weights = rec.bodies("/v1/search")[-1]["options"]["weights"]
    assert weights["keyword"] == pytest.approx((before + 10) / 100)
    assert sum(weights.values()) == pytest.approx(1.0, abs=0.01)
    assert "w=" in tab.url and tab.locator("#weights-source").inner_text() == "(yours)"
    # The link reopens the same search, with the same controls, in a fresh tab.
    link = tab.url
    other = tab.context.new_page()
    other_rec = Recorder(other)
    other.goto(link)
    other.wait_for_selector(".result")
    assert not other.is_checked("input[name=strategy][value=graph]")
    assert other_rec.bodies("/v1/search")[-1]["options"] == rec.bodies("/v1/search")[-1]["options"]
    other.close()


def test_compare_view_marks_the_same_document_across_columns(
    page: tuple[Any, Recorder], live_service: str, shots: Path
) -> None:
    tab, rec = page
    tab.goto(f"{live_service}/ui?q={quote('Toyota founder')}&view=compare")
    tab.wait_for_selector("#compare li")
    columns = tab.locator("#compare .column")
    assert [columns.nth(i).get_attribute("data-strategy") for i in range(4)] == [
        "keyword",
        "semantic",
        "graph",
        "hybrid",
    ]
    (batch,) = rec.bodies("/v1/search/batch")
    assert [q["options"]["strategies"] for q in batch["queries"]] == [
        ["keyword"],
        ["semantic"],
        ["graph"],
        ["hybrid"],
    ]
    docs = [li.get_attribute("data-doc") for li in tab.locator("#compare li").all()]
    shared = {d for d in docs if docs.count(d) > 1}
    assert shared, "some document is found by more than one strategy"
    doc = sorted(shared)[0]
    tab.locator(f'#compare li[data-doc="{doc}"]').first.hover()
    assert tab.locator(f'#compare li.same[data-doc="{doc}"]').count() == docs.count(doc)
    tab.screenshot(path=str(shots / "ui-compare.png"), full_page=True)


def test_document_view_highlights_the_matched_chunk(page: tuple[Any, Recorder], live_service: str) -> None:
    tab, _ = page
    tab.goto(f"{live_service}/ui")
    tab.keyboard.press("/")  # keyboard only: "/" focuses the query box
    tab.keyboard.type("Who founded Sony?")
    tab.keyboard.press("Enter")
    tab.wait_for_selector(".result")
    chunk_id = tab.locator(".result").first.get_attribute("data-id")
    tab.locator(".result .doc-link").first.focus()
    tab.keyboard.press("Enter")
    tab.wait_for_selector("#document mark.chunk")
    assert "view=document" in tab.url
    chunk = httpx.get(f"{live_service}/v1/chunks/{chunk_id}").json()
    assert tab.locator("#document mark.chunk").inner_text() == chunk["text"]
    document = httpx.get(f"{live_service}/v1/documents/{chunk['docId']}").json()
    assert tab.locator("#document article").inner_text().strip() == document["text"].strip()
    tab.go_back()
    tab.wait_for_selector(".result")


def test_japanese_at_phone_width(browser: Any, live_service: str, shots: Path) -> None:
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True
    )
    tab = context.new_page()
    recorder = Recorder(tab)
    tab.goto(f"{live_service}/ui?q={quote('トヨタ自動車を設立したのは誰ですか')}&crag=1")
    tab.wait_for_selector(".result")
    assert "トヨタ" in tab.locator(".result").first.inner_text()
    assert (
        tab.locator(".result .badge.correct, .result .badge.ambiguous, .result .badge.incorrect").count() > 0
    )
    overflow = tab.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the page is {overflow}px wider than a phone"
    tab.screenshot(path=str(shots / "ui-phone-ja.png"), full_page=True)
    assert recorder.hosts() <= {urlsplit(live_service).netloc} and not recorder.errors
    context.close()


def test_the_page_sets_a_policy_that_forbids_other_hosts(live_service: str) -> None:
    response = httpx.get(f"{live_service}/ui")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "connect-src 'self'" in policy
    for asset in ("playground.js", "playground.css"):
        assert httpx.get(f"{live_service}/ui/assets/{asset}").status_code == 200


def test_add_a_document_form_shows_the_tasks_outcome(
    browser: Any, tmp_path: Path, sample_index: Path, embedder: Any
) -> None:
    """The playground's "Add a document" form: pasted text with the write key, then the task's outcome; a
    search finds the document afterwards. Without the key the form shows the refusal."""
    from conftest import _start_server

    from hybridrag.http.app import create_app
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    index = tmp_path / "index"
    shutil.copytree(sample_index, index, symlinks=True)
    settings = Settings(  # type: ignore[call-arg]
        index_dir=index,
        embedding_model="minilm",
        write_api_key="w",
        documents_batch_wait_s=0.05,
        reload_interval_s=0,
        _env_file=None,
    )
    server, url = _start_server(create_app(settings, SearchEngine(settings, embedder=embedder), wait=True))
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    try:
        tab.goto(f"{url}/ui")
        tab.click("#add-document summary")
        tab.fill("#add-title", "Okapi")
        tab.fill("#add-text", "The okapi is a giraffid of the Ituri rainforest, striped like a zebra.")
        tab.click("#add-go")
        result = tab.locator("#add-result")
        sync_api.expect(result).to_have_text(re.compile(r"^401"))
        tab.fill("#write-key", "w")
        tab.click("#add-go")
        sync_api.expect(result).to_have_text(re.compile(r"^succeeded"), timeout=60000)
        assert ": added" in tab.locator("#add-result").inner_text()
        found = httpx.post(
            f"{url}/v1/search", json={"text": "okapi giraffid Ituri", "options": {"strategies": ["keyword"]}}
        ).json()
        assert found["results"][0]["metadata"]["title"] == "Okapi"
    finally:
        context.close()
        server.should_exit = True
