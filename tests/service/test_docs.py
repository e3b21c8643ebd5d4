"""The documentation tells the truth: the README stays short, its runnable blocks run against the sample
service, every relative link resolves, and tests that need ../shared are guarded."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    ROOT / "ARCHITECTURE.md",
    ROOT / "benchmarks" / "README.md",
    *sorted((ROOT / "benchmarks" / "docs").glob("*.md")),
    *sorted((ROOT / "docs").glob("*.md")),
]
README_MAX_LINES = 350
SAMPLE_URL = "http://127.0.0.1:8000"
_RUNNABLE = re.compile(r"<!-- runnable -->\s*```(bash|python)\n(.*?)```", re.S)
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def runnable_blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block marked `<!-- runnable -->` just above it."""
    return [(m.group(1), m.group(2)) for m in _RUNNABLE.finditer(text)]


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {
        _anchor(line.lstrip("#")) for line in path.read_text("utf-8").splitlines() if line.startswith("#")
    }


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text("utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail to docs/ or benchmarks/"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for target in _LINK.findall(doc.read_text("utf-8")):
        if re.match(r"^[a-z]+:", target):
            continue  # absolute URLs (the service's own, on a machine running it)
        file_part, _, anchor = target.partition("#")
        resolved = (doc.parent / file_part).resolve() if file_part else doc
        if not resolved.exists() or (
            anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved)
        ):
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)}: broken links {broken}"


def test_the_readme_has_runnable_blocks_of_both_kinds() -> None:
    kinds = [lang for lang, _ in runnable_blocks((ROOT / "README.md").read_text("utf-8"))]
    assert "bash" in kinds and "python" in kinds


@pytest.mark.parametrize(
    "block",
    runnable_blocks((ROOT / "README.md").read_text("utf-8")),
    ids=lambda b: f"{b[0]}:{b[1].splitlines()[0][:40]}",
)
def test_readme_block_runs_against_the_sample(block: tuple[str, str], live_service: str) -> None:
    lang, code = block
    code = code.replace(SAMPLE_URL, live_service)
    if lang == "bash":
        # curl fails on an HTTP error here (the README's commands keep -s only, for readable output).
        script = 'set -euo pipefail\ncurl() { command curl --fail-with-body "$@"; echo; }\n' + code
        done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr + done.stdout
        answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        assert answers and all("results" in a for a in answers), done.stdout[:500]
        assert all(a["results"] for a in answers)
    else:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "Sony" in done.stdout


_PAGE_POINTER = re.compile(r"benchmarks/((?:docs/)?[\w-]+\.md)")
_QUOTED_SECTION = re.compile(r'\s*(?:[,(]\s*|\s)?\(?\s*"([^"]+)"')
_SOURCES = ("service", "indexing", "schemas", "benchmarks", "tests", "docs")
_NOT_OURS = frozenset({"node_modules", ".cache", "__pycache__"})


def _titles(page: Path) -> list[str]:
    """A page's headings and the bold words that open its paragraphs (the titles pointers quote)."""
    text = page.read_text("utf-8")
    return re.findall(r"^#{1,4} (.+)$", text, re.M) + re.findall(r"^\*\*(.+?)\*\*", text, re.M)


def test_pointers_to_the_benchmark_pages_name_a_page_and_a_section_it_has() -> None:
    """A comment's `benchmarks/docs/scale.md, "Ten million"` leads to that page and that section, so
    moving a section from page to page cannot leave the code pointing at nothing."""
    files = [ROOT / "README.md", ROOT / "ARCHITECTURE.md"]
    files += [
        p
        for d in _SOURCES
        for p in sorted((ROOT / d).rglob("*"))
        # The project's own files: not npm's packages for the Zod check, nor a benchmark's cached corpora.
        if p.suffix in (".py", ".md") and not any(part in _NOT_OURS for part in p.relative_to(ROOT).parts)
    ]
    broken, checked = [], 0
    for path in files:
        text = path.read_text("utf-8")
        for match in _PAGE_POINTER.finditer(text):
            page = ROOT / "benchmarks" / match.group(1)
            where = f"{path.relative_to(ROOT)}: benchmarks/{match.group(1)}"
            if not page.exists():
                broken.append(where)
                continue
            # A pointer may wrap onto the next comment line.
            after = re.sub(r"\n\s*(?:#:?)?\s*", " ", text[match.end() : match.end() + 200])
            quoted = _QUOTED_SECTION.match(after)
            if quoted:
                checked += 1
                section = quoted.group(1).rstrip(".,")
                if not any(title.startswith(section) for title in _titles(page)):
                    broken.append(f'{where}, "{section}"')
    assert checked > 30, checked  # the pattern still reads the pointers
    assert not broken, broken


def test_tests_reach_shared_data_only_through_the_guarded_helpers() -> None:
    """A fresh clone has no ../shared: every test that reads it goes through conftest's `shared_path` /
    `needs_shared`, which skip with a reason, instead of building the path itself."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name == "conftest.py" or "node_modules" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and node.value == "shared" and path.name != "test_docs.py":
                offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, f"build ../shared paths with conftest.shared_path: {offenders}"
