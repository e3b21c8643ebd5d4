"""Entity detection and typing measured on named-entity files: untyped and typed F1, overall and per type, on
a file's text as written and on lower- and upper-cased copies, with throughput.

Formats (as in `../shared/data/ner/`): CoNLL with BIO tags (`index<TAB>token<TAB>tag`, a blank line between
sentences; the sentence text is the tokens joined by single spaces), and JSON lines with `text` and
`entities` (`name`, `span` as character offsets, `type`). Types are mapped to the index's four (person,
organization, place, other). A mention counts as found when its surface, after the index's own name
normalisation, and (for typed F1) its type match a gold mention of the same sentence.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hybridrag.benchmarks.common import CASINGS, machine, markdown_table, now
from hybridrag.indexing.analysis.bio import bio_spans

TYPE_MAP = {
    "PER": "person",
    "ORG": "organization",
    "LOC": "place",
    "MISC": "other",
    "人名": "person",
    "法人名": "organization",
    "政治的組織名": "organization",
    "その他の組織名": "organization",
    "地名": "place",
    "施設名": "place",
    "製品名": "other",
    "イベント名": "other",
}
TYPES = ("person", "organization", "place", "other")


@dataclass(frozen=True, slots=True)
class Sentence:
    text: str
    spans: tuple[tuple[int, int, str], ...]  # (start, end, type) in the index's types


def read_conll(path: Path) -> list[Sentence]:
    sentences: list[Sentence] = []
    tokens: list[tuple[str, str]] = []

    def flush() -> None:
        if not tokens:
            return
        starts = [0]
        for token, _tag in tokens:
            starts.append(starts[-1] + len(token) + 1)
        spans = bio_spans([tag for _token, tag in tokens])
        sentences.append(
            Sentence(
                " ".join(token for token, _tag in tokens),
                tuple((starts[a], starts[b] - 1, TYPE_MAP.get(kind, "other")) for a, b, kind in spans),
            )
        )
        tokens.clear()

    for line in path.read_text("utf-8").splitlines():
        if not line.strip():
            flush()
            continue
        parts = line.split("\t")
        tokens.append((parts[1], parts[2] if len(parts) > 2 else "O"))
    flush()
    return sentences


def read_jsonl(path: Path) -> list[Sentence]:
    out = []
    for line in path.read_text("utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            spans = tuple(
                (int(e["span"][0]), int(e["span"][1]), TYPE_MAP.get(e["type"], "other"))
                for e in record.get("entities", [])
            )
            out.append(Sentence(record["text"], spans))
    return out


def read_dataset(path: Path) -> list[Sentence]:
    return read_jsonl(path) if path.suffix == ".jsonl" else read_conll(path)


@dataclass(slots=True)
class Counts:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    def add(self, predicted: set[Any], gold: set[Any]) -> None:
        self.tp += len(predicted & gold)
        self.fp += len(predicted - gold)
        self.fn += len(gold - predicted)

    def merge(self, other: Counts) -> None:
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn

    def scores(self) -> dict[str, float]:
        p = self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0
        r = self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4)}


def tally(
    sentences: Sequence[Sentence],
    extracted: Iterable[Iterable[tuple[str, str]]],
    normalize: Callable[[str], str],
) -> dict[str, Counts]:
    """Matches of each sentence's extracted (surface, type) pairs against its gold spans, after `normalize`:
    untyped (surface only), typed, and per type."""
    counts = {"untyped": Counts(), "typed": Counts(), **{t: Counts() for t in TYPES}}
    for sentence, pairs in zip(sentences, extracted, strict=True):
        predicted = {(normalize(surface), kind) for surface, kind in pairs}
        gold = {(normalize(sentence.text[s:e]), kind) for s, e, kind in sentence.spans}
        counts["untyped"].add({n for n, _ in predicted}, {n for n, _ in gold})
        counts["typed"].add(predicted, gold)
        for t in TYPES:
            counts[t].add({p for p in predicted if p[1] == t}, {g for g in gold if g[1] == t})
    return counts


def score(
    sentences: Sequence[Sentence],
    extract: Callable[[list[str]], Iterable[Iterable[tuple[str, str]]]],
    normalize: Callable[[str], str],
) -> dict[str, Any]:
    """F1 of `extract` (texts -> (surface, type) pairs of each) against the gold spans, per sentence."""
    t0 = time.perf_counter()
    counts = tally(sentences, extract([s.text for s in sentences]), normalize)
    seconds = time.perf_counter() - t0
    return {
        "sentences": len(sentences),
        "untyped": counts["untyped"].scores(),
        "typed": counts["typed"].scores(),
        "perType": {t: counts[t].scores() for t in TYPES},
        "goldMentions": dict(Counter(kind for s in sentences for *_span, kind in s.spans)),
        "sentencesPerSecond": round(len(sentences) / seconds, 1) if seconds > 0 else None,
    }


def run_entities(
    dataset: Path,
    casings: Sequence[str] = ("original",),
    limit: int | None = None,
    rules_only: bool = False,
    offset: int = 0,
) -> dict[str, Any]:
    """The index's entity extractor on `dataset` (each casing a copy of the text), its sentences from
    `offset` on (`limit` of them); `rules_only` names entities by the rules alone, without the fitted
    typer and taggers (the earlier extractor, for comparison)."""
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.analysis.entities import EntityExtractor, normalize_name

    sentences = read_dataset(dataset)[offset:][:limit]
    extractor = EntityExtractor(Analyzer(), rules_only=rules_only)

    def extract(texts: list[str]) -> list[list[tuple[str, str]]]:
        # Node-only names are the graph's, not a claim that something is named there.
        found = extractor.extract_many(texts)
        return [[(m.surface, m.type) for m in names if not m.node_only] for names in found]

    extractor.extract_many(["warm-up: the tagger loads on its first case-less sentence."])
    results = {}
    for casing in casings:
        change = CASINGS[casing]
        copies = [Sentence(change(s.text), s.spans) for s in sentences]
        results[casing] = score(copies, extract, normalize_name)
    return {
        "benchmark": "entities",
        "dataset": dataset.name,
        "date": now(),
        "machine": machine(),
        "extractor": "rules (capitalisation, Sudachi part of speech)"
        + (
            ""
            if rules_only
            else ", English names typed by the name tagger and the fitted typer together, names in English"
            " without letter case found by the name tagger, Japanese names by the CRF tagger over the rules'"
            " names and the piece tagger (e5) together"
        ),
        "extractionVersion": extractor.version,
        "offset": offset,
        "results": results,
    }


def to_markdown(report: dict[str, Any]) -> str:
    rows = []
    for casing, r in report["results"].items():
        per = r["perType"]
        rows.append(
            [
                casing,
                r["sentences"],
                r["untyped"]["f1"],
                r["typed"]["f1"],
                *(per[t]["f1"] for t in TYPES),
                r["sentencesPerSecond"],
            ]
        )
    headers = ["casing", "sentences", "untyped F1", "typed F1", *(f"{t} F1" for t in TYPES), "sentences/s"]
    offset = report.get("offset", 0)
    part = f" (sentences from number {offset + 1} on)" if offset else ""
    return (
        f"### Entities — {report['dataset']}{part}, {report['extractor']}, {report['date'][:10]}, "
        f"{report['machine']['cores']} cores\n\n" + markdown_table(headers, rows)
    )
