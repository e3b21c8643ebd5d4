"""The query classifier against a small labelled set in both languages (its accuracy is a tested floor)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.pipeline.classifier import QueryClassifier

LABELLED = [
    json.loads(line) for line in (Path(__file__).parents[1] / "data" / "classifier_labelled.jsonl").open()
]
CLASSIFIER = QueryClassifier(Analyzer())


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_accuracy_on_the_labelled_set(lang: str) -> None:
    rows = [r for r in LABELLED if r["lang"] == lang]
    wrong = [(r["query"], r["type"], CLASSIFIER.classify(r["query"]).type) for r in rows]
    wrong = [w for w in wrong if w[1] != w[2]]
    accuracy = 1 - len(wrong) / len(rows)
    print(f"{lang}: accuracy {accuracy:.2f} on {len(rows)} queries; wrong: {wrong}")
    assert accuracy >= 0.85, wrong


def test_classification_is_a_valid_contract_object() -> None:
    c = CLASSIFIER.classify("What is the relationship between Marie Curie and the University of Paris?")
    assert c.type == "relationship" and c.confidence > 0.8
    assert c.extracted_entities == ["Marie Curie", "University of Paris"]
    w = c.suggested_weights
    local = CLASSIFIER.classify("Marie Curie won the Nobel Prize in 1903.")
    assert local.type == "local"
    # A relationship question leans more on the graph than a local statement does, and an English question
    # about named things (the graph's walk answers those best) at least as much as a relationship question.
    assert abs(w.keyword + w.semantic + w.graph - 1.0) < 0.01 and w.graph > local.suggested_weights.graph
    question = CLASSIFIER.classify("When did Marie Curie win the Nobel Prize?")
    assert question.type == "local" and question.suggested_weights.graph >= w.graph
    assert CLASSIFIER.classify("キュリーはいつノーベル賞を受賞したか？").suggested_weights.graph < w.graph
    assert "Marie Curie" in c.expanded_queries


def test_japanese_entities_and_expansions() -> None:
    c = CLASSIFIER.classify("トヨタ自動車と豊田佐吉の関係は？")
    assert c.type == "relationship"
    assert {"トヨタ自動車", "豊田佐吉"} <= set(c.extracted_entities)
    assert c.expanded_queries and all(q != c.original_query for q in c.expanded_queries)


@pytest.mark.parametrize("recase", [str.lower, str.upper])
def test_a_query_without_case_is_read_with_the_index_names(recase) -> None:  # type: ignore[no-untyped-def]
    """Capitals reveal no name in `who founded sony?`: the index's own names do, and the weights follow
    the cased question's."""
    names = {"sony": "Sony", "masaru ibuka": "Masaru Ibuka"}

    def known(text: str) -> list[str]:
        return [name for key, name in names.items() if key in text.lower()]

    classifier = QueryClassifier(Analyzer(), known)
    cased = classifier.classify("Who founded Sony with Masaru Ibuka?")
    plain = classifier.classify(recase("Who founded Sony with Masaru Ibuka?"))
    assert sorted(plain.extracted_entities) == sorted(cased.extracted_entities) == ["Masaru Ibuka", "Sony"]
    assert plain.suggested_weights == cased.suggested_weights
    # Capitals in an upper-cased query are not names: every word would be one.
    assert QueryClassifier(Analyzer()).classify("WHO FOUNDED SONY?").extracted_entities == []
    # A cased query keeps reading capitals; a lower-case statement with no known name stays keyword-leaning.
    assert classifier.classify("Akio Morita met him").extracted_entities == ["Akio Morita"]
    statement = classifier.classify(recase("transistor radios were popular"))
    assert statement.extracted_entities == [] and statement.suggested_weights.graph < 0.1
