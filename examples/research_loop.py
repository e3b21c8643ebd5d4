"""An example research loop with no LLM: plan, batch-search, track section coverage, stop when covered.

It follows the deep-research orchestrator (../shared/seeds/deep-research-api.md): up to three rounds; in each,
every section still short of its target gets sub-queries (the question, the classifier's expanded queries,
and the question with the section's hint words), answered by one batch call; documents are keyed by
`url || providerId:docId` in a `sectionHitMap`; `computeCoverage` decides whether to go on.

    python examples/research_loop.py "トヨタの生産方式と新幹線の関係" --url http://127.0.0.1:8000
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hybridrag.client import HybridRagClient
from hybridrag.client.adapters.deep_research import HybridRagProvider, build_evidences, compute_coverage

MAX_ROUNDS = 3


@dataclass(frozen=True, slots=True)
class Section:
    key: str
    target: int
    hints: tuple[str, ...] = ()


DEFAULT_SECTIONS = (
    Section("purpose_overview", 2, ("overview", "概要")),
    Section("background", 2, ("history", "背景")),
    Section("key_points", 3),
)


def section_subqueries(section: Section, question: str, planned: Sequence[str]) -> list[str]:
    """buildSectionSubqueries: the question, the planned sub-queries, hint variants; unique, at most 10."""
    queries = [question, *planned, *(f"{question} {hint}" for hint in section.hints)]
    return list(dict.fromkeys(q for q in queries if q.strip()))[:10]


def research(
    question: str,
    client: HybridRagClient,
    sections: Sequence[Section] = DEFAULT_SECTIONS,
    min_score: float = 0.3,
) -> dict[str, Any]:
    """Run the loop; returns the evidences, the coverage per round and the sub-queries that were planned."""
    first = client.search(question, limit=1)
    planned = first.classification.expanded_queries if first.classification else []
    provider = HybridRagProvider(client)
    targets = {s.key: s.target for s in sections}
    keys = [s.key for s in sections]
    hit_map: dict[str, set[str]] = {}
    documents = []
    rounds: list[dict[str, Any]] = []
    for round_no in range(1, MAX_ROUNDS + 1):
        _current, missing = compute_coverage(keys, targets, hit_map)
        # Each round looks deeper, so a section that is still short can find documents it has not seen.
        provider.per_query = provider.max_documents = 5 * 2 ** (round_no - 1)
        for section in sections:
            if missing[section.key] == 0:
                continue
            for doc in provider.search(section_subqueries(section, question, planned), section.key):
                if doc.score < min_score:
                    continue
                hit_map.setdefault(doc.key, set()).add(section.key)
                documents.append(doc)
        current, missing = compute_coverage(keys, targets, hit_map)
        rounds.append({"round": round_no, "current": current, "missing": missing})
        if not any(missing.values()):
            break
    return {
        "question": question,
        "plannedSubqueries": planned,
        "rounds": rounds,
        "covered": not any(rounds[-1]["missing"].values()),
        "evidences": build_evidences(documents, hit_map),
    }


def _sections(spec: Mapping[str, int] | None) -> Sequence[Section]:
    return [Section(k, v) for k, v in spec.items()] if spec else DEFAULT_SECTIONS


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("question")
    parser.add_argument("--url", default=None, help="service base URL (default: $HYBRIDRAG_URL)")
    parser.add_argument("--sections", type=json.loads, default=None, help="e.g. '{\"overview\": 2}'")
    args = parser.parse_args(argv)
    with HybridRagClient(args.url) as client:
        report = research(args.question, client, _sections(args.sections))
    print(json.dumps(report, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
