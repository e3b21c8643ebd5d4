"""Fit and check the absolute relevance (`pipeline.relevance`): does `minRelevance` drop junk and keep answers?

For each dev set, every query is searched (hybrid, the service's defaults, no cut) against its own index,
and each dev set's queries against every other dev set's index, plus strings of random words (random
letters, English words of the other dev sets' queries, Japanese characters in random order: queries about
nothing the corpus holds). The query-level evidence (`relevance.query_evidence`) of every search and its
first results' fused scores are kept, then:

* `fit`: a logistic model per evidence kind (keyword and semantic; keyword only; semantic only) of the
  event "the query asks about this corpus" (a dev set's query on its own index; not a query on another
  set's index, not random words), by maximum likelihood with a small L2 penalty, pooled over the dev sets
  (each index weighted equally, and within it its own queries and the off-topic ones half each), and the
  decay of later results: the largest on a grid whose Recall@10 loss at the default cut stays within
  `RECALL_BUDGET` on every dev set;
* `evaluate`: per dev set, Recall@10 with the default cut (0.3) against no cut, the share of off-topic
  searches that return nothing, the expected calibration error of the search-level probability and of each
  result's relevance, and a reliability table; with `--fit`, also leave-one-set-out (fitted on the others).
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.benchmarks.common import BeirDataset, cached_index, load_beir, machine, markdown_table, now

DEFAULT_CUT = 0.3
TOP = 10
KEEP = 30  # fused results kept per search: enough for Recall@10 after chunks fold into documents
RECALL_BUDGET = 0.005  # the issue allows 0.01; half of it leaves room for sets we do not have
DECAYS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
KINDS: dict[str, tuple[str, ...]] = {
    "full": ("coverage", "top", "agreement"),
    "keyword": ("coverage",),
    "semantic": ("top",),
}
L2 = 1e-2  # chosen by leave-one-set-out among 1e-3, 1e-2, 0.1, 1 (benchmarks/docs/relevance.md)
RANDOM_QUERIES = 200
OFF_TOPIC_QUERIES = 500  # of each other dev set's queries, on each index (the first by id)
BINS = 10


@dataclass(slots=True)
class Search:
    """One search: its evidence, whether it is on its own index, and its first results."""

    source: str  # the dev set the query came from, or "random"
    index: str  # the dev set whose index answered
    evidence: dict[str, float]
    fused: list[float]  # fused scores of the first KEEP results, best first
    docs: list[str | None]  # their documents (None: an entity or a community report)
    relevant: list[str] = field(default_factory=list)  # judged-relevant documents (own index only)

    @property
    def own(self) -> bool:
        return self.source == self.index


def first_documents(docs: Iterable[str | None], n: int) -> list[str]:
    out: list[str] = []
    for d in docs:
        if d is not None and d not in out:
            out.append(d)
            if len(out) == n:
                break
    return out


def random_queries(vocabulary: Sequence[str], characters: Sequence[str], n: int, seed: int = 0) -> list[str]:
    """Strings of random words (seeded): a third random letters, a third English words of the other dev
    sets' queries, a third Japanese characters of the dev queries in random order."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i % 3 == 0:
            letters = "abcdefghijklmnopqrstuvwxyz"
            words = [
                "".join(rng.choice(letters) for _ in range(rng.randint(3, 9)))
                for _ in range(rng.randint(2, 6))
            ]
            out.append(" ".join(words))
        elif i % 3 == 1:
            out.append(" ".join(rng.choice(vocabulary) for _ in range(rng.randint(2, 7))))
        else:
            out.append("".join(rng.choice(characters) for _ in range(rng.randint(3, 10))))
    return out


def query_words(datasets: Sequence[BeirDataset]) -> tuple[list[str], list[str]]:
    """The English words (longer than three letters) and the Japanese characters of the datasets' queries."""
    from hybridrag.indexing.analysis.text import has_japanese

    english: set[str] = set()
    japanese: set[str] = set()
    for data in datasets:
        for text in data.queries.values():
            if has_japanese(text):
                japanese.update(ch for ch in text if has_japanese(ch))
            else:
                english.update(w.lower() for w in text.split() if w.isalpha() and len(w) > 3)
    return sorted(english), sorted(japanese)


def collect(engine: Any, index_name: str, queries: dict[str, tuple[str, str, list[str]]]) -> list[Search]:
    """Search each query (id -> (source, text, relevant documents)) on `engine` with no cut."""
    from hybridrag.schemas.search import SearchRequest

    chunks = engine.index.chunks
    out = []
    for source, text, relevant in queries.values():
        request = SearchRequest.model_validate(
            {"text": text[:1000], "filters": {"minRelevance": 0}, "options": {"rerankEnabled": False}}
        )
        ranking = engine.rank(request)
        kept = ranking.kept[:KEEP]
        out.append(
            Search(
                source,
                index_name,
                dict(ranking.evidence),
                [f.score for f in kept],
                [chunks[f.id].doc_id if f.id in chunks else None for f in kept],
                relevant,
            )
        )
    return out


def collect_all(
    sets: Sequence[tuple[str, Path, str]], model: str, random_n: int = RANDOM_QUERIES
) -> list[Search]:
    """Every dev set's queries on every dev set's index, and random strings on each index."""
    from hybridrag.indexing.builds.build import BuildConfig
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    datasets = {name: load_beir(path, split) for name, path, split in sets}
    _, characters = query_words(list(datasets.values()))
    searches: list[Search] = []
    for name, _path, _split in sets:
        data = datasets[name]
        # Words of the other corpora's queries only: words drawn from this corpus' own queries make real
        # queries about it ("alirocumab inhibiting" on SciFact), not junk.
        english, _ = query_words([d for other, d in datasets.items() if not _same_corpus(other, name)])
        noise = random_queries(english, characters, random_n)
        index_dir, _ = cached_index(data, BuildConfig(embedding_model=model))
        engine = SearchEngine(Settings(index_dir=index_dir, embedding_model=model, _env_file=None))
        engine.start()
        queries: dict[str, tuple[str, str, list[str]]] = {}
        for other, odata in datasets.items():
            if other != name and _same_corpus(other, name):
                continue  # a casing copy of the same corpus is not off topic
            ids = sorted(odata.queries) if other == name else sorted(odata.queries)[:OFF_TOPIC_QUERIES]
            for qid in ids:
                relevant = sorted(odata.qrels[qid]) if other == name else []
                queries[f"{other}/{qid}"] = (other, odata.queries[qid], relevant)
        queries.update({f"random/{i}": ("random", text, []) for i, text in enumerate(noise)})
        searches += collect(engine, name, queries)
        engine.close()
    return searches


def _same_corpus(a: str, b: str) -> bool:
    return a.split("-")[0] == b.split("-")[0]


# -- fitting


def _matrix(searches: Sequence[Search], names: Sequence[str]) -> np.ndarray:
    return np.array([[s.evidence.get(n, 0.0) for n in names] for s in searches], dtype=np.float64)


def fit_logistic(
    x: np.ndarray, y: np.ndarray, weights: np.ndarray, l2: float = L2
) -> tuple[float, np.ndarray]:
    """Weighted logistic regression by Newton's method (L2 on the coefficients, not the intercept)."""
    design = np.hstack([np.ones((len(x), 1)), x])
    beta = np.zeros(design.shape[1])
    penalty = np.full(design.shape[1], l2)
    penalty[0] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-np.clip(design @ beta, -60, 60)))
        grad = design.T @ (weights * (p - y)) + penalty * beta
        hess = (
            (design * (weights * p * (1 - p))[:, None]).T @ design
            + np.diag(penalty)
            + 1e-9 * np.eye(len(beta))
        )
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-10:
            break
    return float(beta[0]), beta[1:]


def _balanced_weights(searches: Sequence[Search]) -> np.ndarray:
    """Each answering index counts equally, and within it its own queries and the off-topic ones half each:
    the model's prior is even odds, whatever the number of queries a dev set has. Scaled to a mean of 1, so
    that `L2` weighs against the likelihood of as many searches as there are."""
    counts: Counter[tuple[str, bool]] = Counter((s.index, s.own) for s in searches)
    weights = np.array([0.5 / counts[(s.index, s.own)] for s in searches])
    return weights * len(searches) / weights.sum()


def fit(searches: Sequence[Search]) -> dict[str, Any]:
    """The model file's content: one logistic model per evidence kind, and the decay."""
    # "About this corpus", not "a judged document in the first ten": a query the dev set asks of its own
    # corpus is a fair search even where the ranking misses its judged document (SciFact: a fifth of them),
    # and labelling those junk would teach the cut to drop answers to hard questions.
    y = np.array([1.0 if s.own else 0.0 for s in searches])
    w = _balanced_weights(searches)
    kinds = {}
    for kind, names in KINDS.items():
        intercept, coef = fit_logistic(_matrix(searches, names), y, w)
        kinds[kind] = {
            "intercept": round(intercept, 6),
            "coefficients": {n: round(float(c), 6) for n, c in zip(names, coef, strict=True)},
        }
    model = {"decay": 1.0, "kinds": kinds}
    model["decay"] = choose_decay(searches, model)
    return model


def choose_decay(searches: Sequence[Search], model: dict[str, Any]) -> float:
    """The largest decay whose Recall@10 loss at the default cut is within the budget on every index."""
    best = DECAYS[0]
    for decay in DECAYS:
        trial = {**model, "decay": decay}
        losses = [r["recallLoss"] for r in per_index(searches, trial).values()]
        if max(losses) <= RECALL_BUDGET:
            best = decay
    return best


# -- applying and measuring


def _probability(model: dict[str, Any], evidence: dict[str, float], kind: str = "full") -> float:
    m = model["kinds"][kind]
    z = m["intercept"] + sum(c * evidence.get(n, 0.0) for n, c in m["coefficients"].items())
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def relevances(model: dict[str, Any], s: Search) -> list[float]:
    q = _probability(model, s.evidence)
    top = s.fused[0] if s.fused else 0.0
    return [q * (max(0.0, f) / top) ** model["decay"] if top > 0 else 0.0 for f in s.fused]


def recall_at(docs: Sequence[str | None], relevant: Sequence[str], n: int = TOP) -> float:
    return len(set(first_documents(docs, n)) & set(relevant)) / len(relevant) if relevant else 0.0


def ndcg_at(docs: Sequence[str | None], relevant: Sequence[str], n: int = TOP) -> float:
    """Binary nDCG@n over the first n documents."""
    wanted = set(relevant)
    gain = sum(1.0 / math.log2(i + 2) for i, d in enumerate(first_documents(docs, n)) if d in wanted)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(n, len(wanted))))
    return gain / ideal if ideal else 0.0


def ece(
    probabilities: Sequence[float], labels: Sequence[float], bins: int = BINS
) -> tuple[float, list[list[Any]]]:
    """Expected calibration error over equal-width bins, and the reliability table (bin, n, mean p, share)."""
    p = np.asarray(probabilities, dtype=float)
    y = np.asarray(labels, dtype=float)
    table, total = [], 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = (p >= lo) & ((p < hi) if b < bins - 1 else (p <= hi))
        if inside.any():
            gap = abs(p[inside].mean() - y[inside].mean())
            total += inside.sum() * gap
            table.append(
                [
                    f"{lo:.1f}-{hi:.1f}",
                    int(inside.sum()),
                    round(float(p[inside].mean()), 3),
                    round(float(y[inside].mean()), 3),
                ]
            )
    return (total / len(p) if len(p) else 0.0), table


def per_index(
    searches: Sequence[Search], model: dict[str, Any], cut: float = DEFAULT_CUT
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for index in sorted({s.index for s in searches}):
        mine = [s for s in searches if s.index == index]
        own = [s for s in mine if s.own]
        off = [s for s in mine if not s.own]
        before = after = ndcg_before = ndcg_after = 0.0
        q_probs, q_labels, item_probs, item_labels = [], [], [], []
        for s in own:
            scores = relevances(model, s)
            kept = [d for d, r in zip(s.docs, scores, strict=True) if r >= cut]
            before += recall_at(s.docs, s.relevant)
            after += recall_at(kept, s.relevant)
            ndcg_before += ndcg_at(s.docs, s.relevant)
            ndcg_after += ndcg_at(kept, s.relevant)
            q_probs.append(scores[0] if scores else 0.0)
            q_labels.append(1.0)
            seen: set[str] = set()
            for d, r in zip(s.docs, scores, strict=True):
                if d is not None and d not in seen and len(seen) < TOP:
                    seen.add(d)
                    item_probs.append(r)
                    item_labels.append(1.0 if d in s.relevant else 0.0)
        # A search's relevances fall from its first (the fused order), so it is empty when its first is cut.
        first = [relevances(model, s)[0] if s.fused else 0.0 for s in off]
        q_probs += first
        q_labels += [0.0] * len(off)
        emptied = [p < cut for p in first]
        empty = {
            source: float(np.mean([e for s, e in zip(off, emptied, strict=True) if s.source == source]))
            for source in sorted({s.source for s in off})
        }
        search_ece, table = ece(q_probs, q_labels)
        item_ece, item_table = ece(item_probs, item_labels)
        n = max(1, len(own))
        out[index] = {
            "queries": len(own),
            "recall10": round(before / n, 4),
            "recall10Cut": round(after / n, 4),
            "recallLoss": round((before - after) / n, 4),
            "ndcg10": round(ndcg_before / n, 4),
            "ndcg10Cut": round(ndcg_after / n, 4),
            "offTopicEmpty": {k: round(v, 3) for k, v in empty.items()},
            "offTopicEmptyAll": round(sum(emptied) / max(1, len(off)), 3),
            "searchEce": round(search_ece, 4),
            "searchReliability": table,
            "resultEce": round(item_ece, 4),
            "resultReliability": item_table,
        }
    return out


def leave_one_out(searches: Sequence[Search]) -> dict[str, dict[str, Any]]:
    """Each dev set measured with a model fitted on the others (its queries, its index and the off-topic
    searches on it all left out): how the setting carries to a collection it never saw."""
    out = {}
    for index in sorted({s.index for s in searches}):
        held = [
            s
            for s in searches
            if s.index == index or _same_corpus(s.index, index) or _same_corpus(s.source, index)
        ]
        rest = [s for s in searches if s not in held]
        model = fit(rest)
        out[index] = per_index([s for s in searches if s.index == index], model)[index]
    return out


def report(
    searches: Sequence[Search], model: dict[str, Any], embedding_model: str, loo: bool
) -> dict[str, Any]:
    data = {
        "benchmark": "relevance",
        "embeddingModel": embedding_model,
        "date": now(),
        "machine": machine(),
        "cut": DEFAULT_CUT,
        "decay": model["decay"],
        "model": model["kinds"],
        "results": per_index(searches, model),
    }
    if loo:
        data["leaveOneOut"] = leave_one_out(searches)
    return data


def to_markdown(data: dict[str, Any]) -> str:
    rows = []
    for name, r in data["results"].items():
        loo = data.get("leaveOneOut", {}).get(name)
        rows.append(
            [
                name,
                r["queries"],
                r["recall10"],
                r["recall10Cut"],
                f"{r['ndcg10']:.3f} / {r['ndcg10Cut']:.3f}",
                r["offTopicEmptyAll"],
                ", ".join(f"{k} {v:.2f}" for k, v in r["offTopicEmpty"].items()),
                r["searchEce"],
                r["resultEce"],
                f"{loo['recallLoss']:.4f} / {loo['offTopicEmptyAll']:.3f}" if loo else "",
            ]
        )
    text = (
        f"### Relevance at minRelevance {data['cut']} — {data['embeddingModel']}, {data['date'][:10]} "
        f"(decay {data['decay']})\n\n"
        + markdown_table(
            [
                "index",
                "queries",
                "R@10 no cut",
                f"R@10 cut {data['cut']}",
                "nDCG@10 no cut / cut",
                "off-topic empty",
                "by source",
                "ECE (search)",
                "ECE (result)",
                "left out: R@10 loss / empty",
            ],
            rows,
        )
    )
    for name, r in data["results"].items():
        text += f"\nReliability, {name} (search-level: bin, searches, mean estimate, on-topic share): "
        text += "; ".join(f"{b} {n} {p:.2f}/{y:.2f}" for b, n, p, y in r["searchReliability"]) + "\n"
    return text


def model_file(model: dict[str, Any], embedding_model: str, path: Path) -> None:
    """Write (or update) the shipped model file with this embedding model's coefficients."""
    data = json.loads(path.read_text("utf-8")) if path.is_file() else {"models": {}}
    data["decay"] = model["decay"]
    data["models"][embedding_model] = model["kinds"]
    # Any other embedding model: its cosines are on another scale, so only the keyword evidence carries over.
    data["models"]["*"] = {"keyword": model["kinds"]["keyword"]}
    data["fittedBy"] = "hybridrag bench relevance --fit (benchmarks/relevance.py)"
    data.setdefault("data", {})[embedding_model] = model.get("data", [])
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
