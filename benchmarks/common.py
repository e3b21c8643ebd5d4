"""Shared pieces of the benchmarks: BEIR datasets, cached indexes, machine facts, result files."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CACHE = Path(__file__).parent / ".cache"
#: Letter-case copies of text, for measuring what depends on letter case.
CASINGS: dict[str, Callable[[str], str]] = {
    "original": lambda text: text,
    # Character by character, so offsets stay valid ("ß".upper() is two characters).
    "lower": lambda text: "".join(c.lower() if len(c.lower()) == 1 else c for c in text),
    "upper": lambda text: "".join(c.upper() if len(c.upper()) == 1 else c for c in text),
}
RESULTS = Path(__file__).parent / "results"


@dataclass(slots=True)
class BeirDataset:
    name: str
    corpus: Path
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    split: str = ""  # the qrels file the judgements come from (`load_beir`'s split)

    def subset(self, keep: Iterable[str], corpus: Path | None = None) -> BeirDataset:
        """The queries `keep` with their judgements, over `corpus` (this dataset's by default)."""
        keep = list(keep)
        queries, qrels = {q: self.queries[q] for q in keep}, {q: self.qrels[q] for q in keep}
        return BeirDataset(self.name, corpus or self.corpus, queries, qrels, self.split)

    def query_texts(self, limit: int | None = None) -> list[str]:
        """The queries in id order, each cut to the contract's 1,000 characters; the first `limit`."""
        return [self.queries[q][:1000] for q in sorted(self.queries)[:limit]]


def load_beir(path: Path, split: str) -> BeirDataset:
    """Queries that have judgements in `qrels/<split>.tsv`, and those judgements."""
    qrels: dict[str, dict[str, int]] = {}
    lines = (path / "qrels" / f"{split}.tsv").read_text("utf-8").splitlines()
    for line in lines[1:]:
        if not line.strip():
            continue
        qid, did, score = line.split("\t")
        if int(score) > 0:
            qrels.setdefault(qid, {})[did] = int(score)
    queries = {}
    with open(path / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            if record["_id"] in qrels:
                queries[record["_id"]] = record["text"]
    return BeirDataset(path.name, path / "corpus.jsonl", queries, {q: qrels[q] for q in queries}, split)


def recased(dataset_dir: Path, casing: str, cache: Path | None = None, titles: bool = True) -> Path:
    """A copy of a BEIR-layout dataset with its corpus (titles and texts) and queries lower- or upper-cased
    (the qrels as they are), made once under the cache: text without normal capitalisation (OCR output,
    lower-cased research sets, chat logs), for measuring what depends on letter case. `titles=False` also
    empties every document's title (text with no names, no titles and no capitals: old reports, chat logs,
    physics abstracts in capitals); "original" casing with `titles=False` only drops the titles."""
    change = CASINGS[casing]
    suffix = casing if titles else f"notitle-{casing}"
    target = (cache or CACHE) / "recased" / f"{dataset_dir.name}-{suffix}"
    stamp = target / "source.json"
    source = {"corpus": fingerprint(dataset_dir / "corpus.jsonl"), "casing": casing, "titles": titles}
    if stamp.is_file() and json.loads(stamp.read_text("utf-8")) == source:
        return target
    target.mkdir(parents=True, exist_ok=True)
    for name, fields in (("corpus.jsonl", ("title", "text")), ("queries.jsonl", ("text",))):
        with (
            (dataset_dir / name).open(encoding="utf-8") as src,
            (target / name).open("w", encoding="utf-8") as out,
        ):
            for line in src:
                if line.strip():
                    record = json.loads(line)
                    for key in fields:
                        if isinstance(record.get(key), str):
                            record[key] = change(record[key])
                    if not titles and name == "corpus.jsonl":
                        record["title"] = ""
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
    qrels = target / "qrels"
    if qrels.is_symlink():
        qrels.unlink()
    qrels.symlink_to((dataset_dir / "qrels").resolve(), target_is_directory=True)
    stamp.write_text(json.dumps(source), "utf-8")
    return target


def fingerprint(path: Path) -> dict[str, Any]:
    """Identify a corpus by content: copies of the same data (new mtimes, other paths) reuse one index."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def regraph_if_older(index_dir: Path, config: Any = None) -> bool:
    """Regraph a cached index an older release built (its graph format, its graph arrays, no serving
    files for its vectors, or mentions another extractor found): a regraph rebuilds the graph and rewrites
    the tables and the vectors' serving files from what is stored (no document re-read, no re-embedding;
    mentions extracted again when the extractor changed), so a benchmark never measures the load-time
    fallbacks or an older extraction by accident. `config`: the build's (read from the manifest when not
    given). True when it regraphed."""
    from hybridrag.indexing.analysis.entities import packaged_extraction_version
    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
    from hybridrag.indexing.stores.graph import GRAPH_FORMAT
    from hybridrag.indexing.stores.graph_arrays import FOLDER as GRAPH_ARRAYS
    from hybridrag.indexing.stores.graph_arrays import GraphArrays
    from hybridrag.indexing.stores.versions import current_version

    version = current_version(index_dir)
    if config is None:
        config = BuildConfig.from_manifest(version.manifest)
    if not config.graph:
        return False
    graph = version.manifest.get("graph") or {}
    embedding = version.manifest.get("embedding") or {}
    old_graph = graph.get("format", 1) < GRAPH_FORMAT
    arrays = version.path / "graph" / GRAPH_ARRAYS
    # Arrays before format 5 cannot serve a later chunk table: a write into them would rebuild the graph.
    old_storage = (
        (bool(embedding) and not embedding.get("serving"))
        or not GraphArrays.present(arrays)
        or (GraphArrays.format_of(arrays) or 0) < 5
    )
    wanted = packaged_extraction_version(tagger_types=config.name_typing == "tagger")
    old_extraction = graph.get("extraction", "rules") != wanted
    if not (old_graph or old_storage or old_extraction):
        return False
    IndexBuilder(index_dir, config).regraph(reextract=old_extraction)
    return True


def cached_index(
    dataset: BeirDataset, config: Any, cache: Path | None = None, rebuild: bool = False
) -> tuple[Path, dict[str, Any] | None]:
    """An index of the dataset's corpus for `config`, built once and reused while corpus and config match.

    Returns the index directory and the build summary when a build happened (None when reused).
    """
    from dataclasses import asdict

    from hybridrag.indexing.builds.build import IndexBuilder, tqdm_progress
    from hybridrag.indexing.stores.versions import IndexUnavailable

    model = config.embedding_model or "none"
    # Indexes embedded by another passage encoder than torch live beside the torch-built one, not over it.
    encoder = "" if getattr(config, "encoder", "torch") == "torch" else f"-{config.encoder}"
    index_dir = (cache or CACHE) / f"{dataset.name}-{model.replace('/', '_')}-{config.chunk_size}{encoder}"
    stamp = {"corpus": fingerprint(dataset.corpus), "config": asdict(config)}
    stamp_file = index_dir / "bench-stamp.json"
    if not rebuild and stamp_file.is_file():
        try:
            if _same_stamp(json.loads(stamp_file.read_text("utf-8")), stamp, config):
                regraph_if_older(index_dir, config)
                return index_dir, None
        except (IndexUnavailable, json.JSONDecodeError):
            pass
    summary = IndexBuilder(index_dir, config, progress=tqdm_progress()).build(dataset.corpus)
    stamp_file.write_text(json.dumps(stamp, indent=2), "utf-8")
    return index_dir, summary.as_dict()


def _same_stamp(old: dict[str, Any], new: dict[str, Any], config: Any) -> bool:
    """Same corpus and same settings, reading settings a stamp predates as their defaults (a new build
    option must not force rebuilding every cached index)."""
    from dataclasses import asdict, fields

    known = {f.name for f in fields(config)}
    try:
        old_config = asdict(type(config)(**{k: v for k, v in old.get("config", {}).items() if k in known}))
    except TypeError:
        return False
    return bool(old.get("corpus") == new["corpus"] and old_config == new["config"])


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    with contextlib.suppress(ValueError, OSError):
        mem = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memoryGiB": mem,
        "python": platform.python_version(),
        "commit": _git_commit(),
    }


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_results(out: Path, data: dict[str, Any], markdown: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", "utf-8")
    out.with_suffix(".md").write_text(markdown, "utf-8")


LATENCY_HEADERS = ["requests", "errors", "p50 ms", "p95 ms", "p99 ms", "req/s"]


def latency_cells(row: dict[str, Any]) -> list[Any]:
    """The cells under LATENCY_HEADERS for a row of the latency or load reports."""
    return [row["requests"], row["errors"], row["p50ms"], row["p95ms"], row["p99ms"], row["qps"]]


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}"
        return "" if v is None else str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def timed_each(call: Callable[[Any], Any], items: Iterable[Any]) -> tuple[list[Any], list[float]]:
    """`call` on each item in turn: what each returned, and each call's milliseconds."""
    results, took = [], []
    for item in items:
        t0 = time.perf_counter()
        results.append(call(item))
        took.append((time.perf_counter() - t0) * 1000)
    return results, took


def percentile(values: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else 0.0
