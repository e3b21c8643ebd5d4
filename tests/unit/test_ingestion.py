"""PDF, DOCX and web-page ingestion: real sample PDFs, generated Japanese PDF and DOCX, bad files, pages."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import needs_shared, shared_path
from typer.testing import CliRunner

from hybridrag.cli.bench import app
from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder, NothingToIndex
from hybridrag.indexing.documents import sources
from hybridrag.indexing.documents.formats import clean_pdf_text, read_docx, read_html, read_pdf
from hybridrag.indexing.documents.sources import SourceReport, iter_documents
from hybridrag.indexing.stores.tables import CHUNKS, chunk_from_row, read_version_table
from hybridrag.indexing.stores.versions import current_version

PDFS = shared_path("data", "pdf")
needs_pdfs = needs_shared("data", "pdf")


def _japanese_pdf(path: Path, pages: list[str], title: str) -> None:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(UnicodeCIDFont("HeiseiMin-W3"))
    pdf = canvas.Canvas(str(path))
    pdf.setTitle(title)
    for lines in pages:
        pdf.setFont("HeiseiMin-W3", 12)
        for i, line in enumerate(lines.split("\n")):
            pdf.drawString(72, 800 - 16 * i, line)
        pdf.showPage()
    pdf.save()


def _docx(path: Path) -> None:
    import docx

    document = docx.Document()
    document.core_properties.title = "Report on Toyota"
    document.add_heading("Origins", level=1)
    document.add_paragraph("Sakichi Toyoda invented the automatic loom.")
    document.add_heading("豊田の歴史", level=2)
    document.add_paragraph("トヨタ自動車は1937年に設立された。")
    table = document.add_table(rows=2, cols=2)
    for r, row in enumerate([("Company", "Founded"), ("Toyota", "1937")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.save(str(path))


def test_japanese_pdf_text_comes_back_character_for_character(tmp_path: Path) -> None:
    pages = [
        "豊田佐吉は自動織機を発明した。\n織機の会社は一九二六年に生まれた。",
        "トヨタ自動車は一九三七年に設立された。",
    ]
    _japanese_pdf(tmp_path / "ja.pdf", pages, "トヨタの歴史")
    record = read_pdf(tmp_path / "ja.pdf")
    assert record["title"] == "トヨタの歴史"
    assert record["text"] == pages[0] + "\n\n" + pages[1]
    starts = record["metadata"]["pageStarts"]
    assert starts == [0, len(pages[0]) + 2] and record["metadata"]["pages"] == 2
    assert record["date"][:4].isdigit()


def test_docx_keeps_headings_and_tables(tmp_path: Path) -> None:
    _docx(tmp_path / "r.docx")
    record = read_docx(tmp_path / "r.docx")
    assert record["title"] == "Report on Toyota"
    assert record["text"] == (
        "# Origins\n\nSakichi Toyoda invented the automatic loom.\n\n## 豊田の歴史\n\n"
        "トヨタ自動車は1937年に設立された。\n\nCompany | Founded\n\nToyota | 1937"
    )


def test_web_pages_lose_their_boilerplate() -> None:
    body = "".join(
        f"<p>Hideki Yukawa predicted the meson in 1935 ({i}), a particle that carries the strong force.</p>"
        for i in range(3)
    )
    raw = (
        '<html><head><title>Yukawa | Example News</title><link rel="canonical" href="https://example.org/yukawa">'
        '<meta property="article:published_time" content="2024-05-01"></head><body>'
        "<header><nav><ul><li><a href='/'>Home</a></li><li><a href='/about'>About us</a></li></ul></nav></header>"
        "<div class='cookie-banner'>We use cookies. Accept all cookies?</div>"
        f"<main><article><h1>Yukawa and the meson</h1>{body}<p>湯川秀樹は中間子を予言した。</p></article></main>"
        "<footer>Copyright 2024 Example Corp. All rights reserved.</footer></body></html>"
    )
    record = read_html(raw)
    assert record["title"] == "Yukawa and the meson"
    assert record["url"] == "https://example.org/yukawa" and record["date"] == "2024-05-01"
    assert "湯川秀樹は中間子を予言した。" in record["text"] and "(2)" in record["text"]
    for boilerplate in ("Home", "About us", "cookies", "Copyright"):
        assert boilerplate not in record["text"], boilerplate


def test_pdf_text_cleaning() -> None:
    assert clean_pdf_text("adip-\niscing ﬁlled  and\u00a0so") == "adipiscing filled and so"
    assert clean_pdf_text("Czech-\nRepublic") == "Czech-\nRepublic"  # not a hyphenated line break


def test_bad_files_are_reported_and_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "src"
    folder.mkdir()
    _japanese_pdf(folder / "good.pdf", ["豊田佐吉は自動織機を発明した。"], "良い")
    good = (folder / "good.pdf").read_bytes()
    (folder / "empty.pdf").write_bytes(b"")
    (folder / "truncated.pdf").write_bytes(good[: len(good) // 3])
    (folder / "garbage.pdf").write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 10)
    (folder / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    (folder / "huge.txt").write_text("x" * 5000)
    (folder / "ok.md").write_text("# Fine\n\nStill indexed.")
    monkeypatch.setattr(sources, "MAX_FILE_BYTES", 4096)
    report = SourceReport()
    docs = list(iter_documents(folder, report))
    assert sorted(d.file_id for d in docs) == ["good.pdf", "ok.md"]
    reasons = {Path(s.source).name: s.reason for s in report.skipped}
    assert reasons["empty.pdf"] == "empty file (0 bytes)"
    assert reasons["truncated.pdf"].startswith(("damaged or truncated PDF", "no extractable text"))
    assert reasons["garbage.pdf"].startswith("damaged or truncated PDF")
    assert reasons["broken.docx"].startswith("damaged or not a DOCX file")
    assert reasons["huge.txt"].startswith("too large")


def test_a_build_that_indexes_nothing_fails_and_changes_nothing(tmp_path: Path, sample_index: Path) -> None:
    folder = tmp_path / "nothing"
    folder.mkdir()
    (folder / "empty.pdf").write_bytes(b"")
    index = tmp_path / "index"
    shutil.copytree(sample_index, index, symlinks=True)
    before = current_version(index).version
    with pytest.raises(NothingToIndex) as info:
        IndexBuilder(index, BuildConfig(embedding_model=None)).add(folder)
    assert "empty file" in str(info.value.report.skipped[0])
    result = CliRunner().invoke(
        app, ["index", "build", str(folder), "--out", str(index), "--embedding-model", "none"]
    )
    assert result.exit_code == 1
    assert "nothing to index" in result.output and "empty.pdf: empty file (0 bytes)" in result.output
    assert current_version(index).version == before


def test_old_chunk_rows_without_pages_still_load() -> None:
    row: dict[str, Any] = {
        "chunk_id": "c",
        "doc_id": "d",
        "file_id": "f",
        "position": 0,
        "start": 0,
        "end": 1,
        "text": "t",
        "language": "en",
        "entity_types": [],
    }
    assert chunk_from_row(row).pages == []


@pytest.fixture(scope="module")
def pdf_index(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> tuple[Path, list[str]]:
    if not PDFS.is_dir():
        pytest.skip(f"needs {PDFS} (the project's evaluation data beside the repository as ../shared)")
    folder = tmp_path_factory.mktemp("pdf-src")
    for pdf in PDFS.glob("*.pdf"):
        shutil.copy(pdf, folder / pdf.name)
    _japanese_pdf(
        folder / "toyota-ja.pdf",
        ["豊田佐吉は自動織機を発明した。", "トヨタ自動車は一九三七年に設立された。"],
        "トヨタ",
    )
    index = tmp_path_factory.mktemp("pdf-index")
    summary = IndexBuilder(index, BuildConfig(embedding_model="minilm"), embedder=embedder).build(folder)
    return index, [str(s) for s in summary.skipped]


@needs_pdfs
def test_sample_pdfs_build_with_reasons_for_the_unreadable(pdf_index: tuple[Path, list[str]]) -> None:
    index, skipped = pdf_index
    manifest = current_version(index).manifest
    assert manifest["counts"]["documents"] == 9  # the 8 readable samples and the generated Japanese PDF
    assert len(skipped) == 2
    assert any("grayscale-image.pdf: no extractable text" in s and "image-only" in s for s in skipped)
    assert any("libreoffice-writer-password.pdf: encrypted" in s for s in skipped)
    chunks = [chunk_from_row(r) for r in read_version_table(current_version(index).path, CHUNKS).to_pylist()]
    assert chunks and all(len(c.pages) == 1 for c in chunks), "a chunk never crosses a page"
    four_pages = {p for c in chunks if c.file_id == "pdflatex-4-pages.pdf" for p in c.pages}
    assert four_pages == {1, 2, 3, 4}


@needs_pdfs
def test_a_pdf_hit_cites_its_page_over_http(pdf_index: tuple[Path, list[str]], embedder: Any) -> None:
    from fastapi.testclient import TestClient

    from hybridrag.http.app import create_app
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    index, _ = pdf_index
    settings = Settings(index_dir=index, embedding_model="minilm", _env_file=None)  # type: ignore[call-arg]
    with TestClient(create_app(settings, SearchEngine(settings, embedder=embedder), wait=True)) as client:
        top = client.post(
            "/v1/search", json={"text": "population of Belgium", "options": {"limit": 3}}
        ).json()
        hit = top["results"][0]
        assert hit["metadata"]["title"] == "Two-Column Document with Lorem Ipsum"
        assert "Belgium 11.5" in hit["content"]["text"] and "Population (millions)" in hit["content"]["text"]
        assert hit["metadata"]["page"] == 3 and hit["metadata"]["pages"] == [3]
        assert hit["metadata"]["url"].endswith(f"/v1/documents/{hit['metadata']['docId']}#page=3")
        ja = client.post("/v1/search", json={"text": "トヨタ自動車の設立", "options": {"limit": 1}}).json()
        assert ja["results"][0]["metadata"]["page"] == 2
        chunk = client.get(f"/v1/chunks/{hit['id']}").json()
        assert chunk["pages"] == [3]
        document = client.get(f"/v1/documents/{hit['metadata']['docId']}").json()
        assert document["metadata"]["pages"] == 3 and len(document["metadata"]["pageStarts"]) == 3


@needs_pdfs
def test_extraction_benchmark_compares_two_extractors(tmp_path: Path) -> None:
    out = tmp_path / "extraction.json"
    result = CliRunner().invoke(
        app, ["bench", "extract", "--source", str(PDFS), "--repeats", "1", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    by_name = {r["extractor"]: r for r in report["rows"]}
    assert set(by_name) == {"pypdf", "pypdfium2"}
    assert by_name["pypdf"]["arabicLogicalOrder"] and by_name["pypdf"]["columnsInOrder"]
    assert by_name["pypdf"]["files"] == 9 and by_name["pypdf"]["pagesPerS"] > 0


def test_index_build_reads_text_files_in_their_own_encoding(tmp_path: Path) -> None:
    """`index build` of a folder of Shift_JIS, EUC-JP, cp1252 and UTF-16 files: all indexed, each saying
    its encoding; a binary file named .txt is reported as undecodable and skipped."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    texts = {
        "sjis.txt": ("浜松市はヤマハと河合楽器製作所の本社がある楽器の街である。", "cp932"),
        "eucjp.md": ("# 有田焼\n\n有田焼は佐賀県有田町で作られる磁器である。", "euc_jp"),
        "latin.txt": ("Café Procope served crème brûlée to Voltaire.", "cp1252"),
        "wide.txt": ("The Hindenburg burned at Lakehurst in 1937 — “Oh, the humanity”.", "utf-16"),
        "plain.md": ("# Plain\n\nUTF-8 text about the Seto Ohashi bridge.", "utf-8"),
    }
    for name, (text, encoding) in texts.items():
        (folder / name).write_bytes(text.encode(encoding))
    (folder / "noise.txt").write_bytes(bytes(range(256)) * 8)
    result = CliRunner().invoke(
        app,
        [
            "index",
            "build",
            str(folder),
            "--out",
            str(tmp_path / "index"),
            "--embedding-model",
            "none",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["documents"] == 5
    assert [s for s in summary["skipped"] if "noise.txt" in s and "undecodable bytes" in s], summary[
        "skipped"
    ]
    docs = {d.file_id: d for d in iter_documents(folder, SourceReport())}
    for name, (text, encoding) in texts.items():
        doc = docs[name]
        assert text.split("\n")[-1] in doc.text, name
        assert doc.metadata.get("encoding") == (None if encoding == "utf-8" else encoding), name
