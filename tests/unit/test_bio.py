"""BIO tags to names: one reading shared by the taggers and the benchmark's reader of tagged data."""

from __future__ import annotations

from pathlib import Path

from hybridrag.indexing.analysis.bio import bio_spans


def test_b_and_i_tags_make_names_and_o_ends_them() -> None:
    assert bio_spans(["B-person", "I-person", "O", "B-place"]) == [(0, 2, "person"), (3, 4, "place")]
    assert bio_spans([]) == []
    assert bio_spans(["O", "O"]) == []


def test_a_b_tag_starts_a_new_name_even_of_the_same_type() -> None:
    assert bio_spans(["B-place", "B-place", "I-place"]) == [(0, 1, "place"), (1, 3, "place")]


def test_a_stray_i_tag_starts_a_name() -> None:
    # After O, after another type, or first in the sentence: taggers emit these and tagged data has them.
    assert bio_spans(["I-org", "O", "I-org", "I-person", "I-person"]) == [
        (0, 1, "org"),
        (2, 3, "org"),
        (3, 5, "person"),
    ]


def test_a_tag_of_another_scheme_is_outside_every_name() -> None:
    assert bio_spans(["B-x", "E-x", "I-x"]) == [(0, 1, "x"), (2, 3, "x")]


def test_conll_reader_gives_character_spans_of_the_joined_sentence(tmp_path: Path) -> None:
    from hybridrag.benchmarks.entities import read_conll

    conll = tmp_path / "s.conll"
    rows = [("0", "Ada", "B-PER"), ("1", "Lovelace", "I-PER"), ("2", "met", "O"), ("3", "Babbage", "I-PER")]
    conll.write_text("\n".join("\t".join(r) for r in rows) + "\n\n", encoding="utf-8")
    (sentence,) = read_conll(conll)
    assert sentence.text == "Ada Lovelace met Babbage"
    assert [sentence.text[a:b] for a, b, _ in sentence.spans] == ["Ada Lovelace", "Babbage"]
    assert {kind for _, _, kind in sentence.spans} == {"person"}


def test_the_e5_probe_decodes_only_valid_bio() -> None:
    """The probe of a head over e5's token states (benchmarks/fitting): Viterbi never starts a name with I-,
    and a name is the run of its B- and I- pieces."""
    import numpy as np

    from hybridrag.benchmarks.fitting.probe_e5_token_head import LABELS, names, viterbi

    index = {label: i for i, label in enumerate(LABELS)}
    logp = np.full((4, len(LABELS)), -5.0)
    # Argmax alone would read I-person first (invalid), then I-place after I-person (invalid).
    for row, best, second in (
        (0, "I-person", "B-person"),
        (1, "I-person", "O"),
        (2, "I-place", "O"),
        (3, "O", "O"),
    ):
        logp[row, index[best]] = -0.1
        logp[row, index[second]] = -0.5
    tags = viterbi(logp)
    assert [LABELS[t] for t in tags] == ["B-person", "I-person", "O", "O"]
    text = "Ann Lee ran home"
    starts, ends = np.array([0, 4, 8, 12]), np.array([3, 7, 11, 16])
    assert names(tags, starts, ends, text) == [("Ann Lee", "person")]
    place = [index["B-place"], index["I-place"], index["B-other"], index["I-person"]]
    assert names(place, starts, ends, text) == [("Ann Lee", "place"), ("ran", "other")]


def test_best_bio_follows_the_scores_where_bio_allows_and_mends_where_it_does_not() -> None:
    import numpy as np
    import pytest

    from hybridrag.indexing.analysis.bio import best_bio

    labels = ("O", "B-person", "I-person", "B-place", "I-place")
    at = {label: i for i, label in enumerate(labels)}

    def scores(*rows: dict[str, float]) -> np.ndarray:
        out = np.full((len(rows), len(labels)), np.log(1e-3))
        for i, row in enumerate(rows):
            for label, p in row.items():
                out[i, at[label]] = np.log(p)
        return out

    # Allowed as it stands: the argmax of each position.
    ok = scores({"B-person": 0.9}, {"I-person": 0.8}, {"O": 0.9}, {"B-place": 0.7})
    assert best_bio(ok, labels) == ["B-person", "I-person", "O", "B-place"]
    # I- first, and I-place after I-person: each read as the best path BIO allows, not as a stray name.
    bad = scores({"I-person": 0.6, "B-person": 0.4}, {"I-place": 0.5, "I-person": 0.45}, {"O": 0.9})
    assert best_bio(bad, labels) == ["B-person", "I-person", "O"]
    assert best_bio(np.zeros((0, len(labels))), labels) == []
    # Equal scores: the earlier label, every time.
    assert best_bio(np.zeros((2, len(labels))), labels) == ["O", "O"]
    with pytest.raises(ValueError, match="columns"):
        best_bio(np.zeros((2, 3)), labels)
