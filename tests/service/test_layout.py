"""The package layout: one top-level import, and sub-packages that import only downwards (no cycles)."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "hybridrag"

#: What each sub-package may import from hybridrag besides itself. The order is the layering, bottom up;
#: the CLI sits above everything and nothing imports it.
ALLOWED: dict[str, set[str]] = {
    "schemas": set(),
    "client": {"schemas"},
    "mcp": {"client", "schemas"},
    "indexing": set(),
    "pipeline": {"indexing", "schemas"},
    "writes": {"pipeline", "indexing", "schemas"},
    "http": {"writes", "pipeline", "indexing", "schemas"},
    "benchmarks": {"pipeline", "indexing", "schemas"},
    "cli": {"http", "writes", "pipeline", "indexing", "schemas", "benchmarks", "client", "mcp"},
}
OLD_TOP_LEVEL = {"service", "indexing", "schemas", "benchmarks", "examples"}
#: Inside `indexing`, its rooms and what each may import besides itself, bottom up (ARCHITECTURE.md).
INDEXING: dict[str, set[str]] = {
    "models": set(),
    "analysis": {"models"},  # the name tagger finds its ONNX export where the models are installed
    "documents": {"analysis", "models"},
    "stores": {"analysis", "documents", "models"},
    "builds": {"analysis", "documents", "models", "stores"},
}


def _imports(path: Path) -> set[str]:
    """Every absolute module name a file imports (top-level and function-local imports alike)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _package_files() -> dict[str, list[Path]]:
    files: dict[str, list[Path]] = {}
    for sub in sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        files[sub.name] = sorted(sub.rglob("*.py"))
    return files


def test_every_subpackage_has_a_layering_rule() -> None:
    assert set(_package_files()) == set(ALLOWED)


def test_subpackages_import_only_what_their_layer_allows() -> None:
    violations = []
    for package, files in _package_files().items():
        for path in files:
            for name in _imports(path):
                parts = name.split(".")
                if parts[0] in OLD_TOP_LEVEL:
                    violations.append(f"{path.relative_to(ROOT)} imports the old top-level {name}")
                if parts[0] == "hybridrag" and len(parts) > 1 and parts[1] in ALLOWED:
                    target = parts[1]
                    if target != package and target not in ALLOWED[package]:
                        violations.append(f"{path.relative_to(ROOT)} ({package}) imports {name}")
    assert not violations, "\n".join(violations)


def test_indexing_rooms_import_only_downwards() -> None:
    root = PACKAGE / "indexing"
    assert {p.name for p in root.glob("*.py")} == {"__init__.py"}, "indexing's modules live in its rooms"
    assert {p.name for p in root.iterdir() if (p / "__init__.py").is_file()} == set(INDEXING)
    violations = []
    for room, allowed in INDEXING.items():
        for path in sorted((root / room).rglob("*.py")):
            for name in _imports(path):
                parts = name.split(".")
                inside = parts[:2] == ["hybridrag", "indexing"] and len(parts) > 2
                if inside and parts[2] != room and parts[2] not in allowed:
                    violations.append(f"{path.relative_to(ROOT)} ({room}) imports {name}")
    assert not violations, "\n".join(violations)


#: Rooms of `indexing` a sub-package may not import although its layer may import `indexing`: searching
#: never builds (only the write path does).
FORBIDDEN_ROOMS: dict[str, set[str]] = {"pipeline": {"builds"}, "http": {"builds"}}


def test_the_search_path_never_imports_the_builder() -> None:
    violations = []
    for package, rooms in FORBIDDEN_ROOMS.items():
        for path in _package_files()[package]:
            for name in _imports(path):
                parts = name.split(".")
                if parts[:2] == ["hybridrag", "indexing"] and len(parts) > 2 and parts[2] in rooms:
                    violations.append(f"{path.relative_to(ROOT)} ({package}) imports {name}")
    assert not violations, "\n".join(violations)


def test_no_indexing_module_imports_itself_back() -> None:
    # Module by module, function-local imports included: no chain of imports leads back to where it began.
    modules = {
        ".".join(("hybridrag", sub, *p.relative_to(PACKAGE / sub).with_suffix("").parts)).removesuffix(
            ".__init__"
        ): p
        for sub, files in _package_files().items()
        if sub == "indexing"
        for p in files
    }
    assert len(modules) > 20 and "hybridrag.indexing.models.embedders" in modules
    graph = {m: {n for n in _imports(p) if n in modules and n != m} for m, p in modules.items()}
    done: set[str] = set()

    def visit(node: str, stack: tuple[str, ...]) -> None:
        assert node not in stack, f"cycle: {' -> '.join((*stack[stack.index(node) :], node))}"
        if node in done:
            return
        for dep in sorted(graph[node]):
            visit(dep, (*stack, node))
        done.add(node)

    for module in sorted(graph):
        visit(module, ())


def test_layering_has_no_cycles() -> None:
    # The rules themselves must form a DAG, so following them can never close a cycle.
    seen: dict[str, int] = {}

    def visit(node: str, stack: tuple[str, ...]) -> None:
        assert node not in stack, f"cycle: {' -> '.join((*stack, node))}"
        if seen.get(node):
            return
        for dep in ALLOWED[node]:
            visit(dep, (*stack, node))
        seen[node] = 1

    for package in ALLOWED:
        visit(package, ())


def test_schemas_import_no_web_framework() -> None:
    for path in (PACKAGE / "schemas").rglob("*.py"):
        assert not {n for n in _imports(path) if n.split(".")[0] in {"fastapi", "starlette"}}, path


def test_the_command_line_says_which_extra_a_client_install_lacks() -> None:
    code = (
        "import importlib.util, sys\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'typer' else real(name, *a)\n"
        "sys.argv = ['hybridrag', '--help']\n"
        "from hybridrag.cli import main\n"
        "main()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "typer" in out.stderr and "hybridrag[server]" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_the_wheel_installs_one_top_level_package(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            ".",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("hybridrag-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        requires = [
            line for line in zf.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")
        ]
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"hybridrag"}
    # The links in the checkout became plain files, every sub-package is there, and the sample corpus too.
    for sub in ALLOWED:
        assert f"hybridrag/{sub}/__init__.py" in names, sub
    assert "hybridrag/pipeline/engine.py" in names and "hybridrag/client/adapters/langchain.py" in names
    assert any(n.startswith("hybridrag/cli/sample_corpus/") and n.endswith(".md") for n in names)
    assert {"hybridrag/http/static/index.html", "hybridrag/http/static/playground.js"} <= set(names)
    typer_files = {
        f"hybridrag/indexing/analysis/entity_typer/{f}"
        for f in ("model.json", "vocabulary.json", "weights.npz")
    }
    assert typer_files <= set(names)  # the entity typer's weights ship with the package
    assert not any("/tests/" in n or n.startswith("examples/") for n in names)
    # The client extra stays light: pydantic (base) and httpx, nothing heavy.
    client = sorted(r.split(";")[0].split()[1] for r in requires if 'extra == "client"' in r)
    base = sorted(r.split()[1].split(">")[0].split("<")[0] for r in requires if ";" not in r)
    assert base == ["pydantic", "pydantic-settings"]
    assert [c.split(">")[0].split("<")[0] for c in client] == ["httpx"]


def test_license_is_an_spdx_string() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["license"] == "MIT"
