"""The English name taggers themselves: packaged weights and their names, reproducible fitting (with and
without MISC names), the ONNX export against torch, relabelling, and torch left unloaded for cased text."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.entities import TAGGER_ROLE, EntityExtractor
from hybridrag.indexing.analysis.name_tagger import NameTagger
from tests.reference.stand_in_taggers import TRAINING_ROWS, training_file

ANALYZER = Analyzer()
TYPED = EntityExtractor(ANALYZER)
RULES = EntityExtractor(ANALYZER, rules_only=True)


def test_the_packaged_tagger_names_its_weights() -> None:
    """The extraction version carries the taggers' digests, and each digest is its shipped weights'."""
    import hashlib

    from hybridrag.indexing.analysis.entities import packaged_extraction_version
    from hybridrag.indexing.analysis.name_tagger import (
        CASELESS_FOLDER,
        FOLDER,
        packaged_caseless_tagger,
        packaged_tagger,
    )

    tagger = packaged_tagger()
    assert tagger is not None
    digest = hashlib.sha256((FOLDER / "weights.npz").read_bytes()).hexdigest()[:12]
    # Its export (int8) where `models install` made one, as in every test environment; torch's otherwise.
    assert tagger.version == f"tagger-{digest}" + ("-int8" if tagger.precision == "int8" else "")
    # The extraction's version names the tagger's weights and what it does (it types cased names too).
    assert (
        f"{tagger.version}-{TAGGER_ROLE}" in TYPED.version.split("+") and tagger.version not in RULES.version
    )
    # The case-less tagger: its own weights (fitted on more data), named in the version too.
    caseless = packaged_caseless_tagger()
    assert caseless is not None and caseless.version != tagger.version
    digest = hashlib.sha256((CASELESS_FOLDER / "weights.npz").read_bytes()).hexdigest()[:12]
    assert caseless.version.startswith(f"tagger-{digest}")
    assert json.loads((CASELESS_FOLDER / "model.json").read_text("utf-8"))["digest"] == digest
    assert f"{caseless.version}-caseless" in TYPED.version.split("+")
    assert packaged_extraction_version() == TYPED.version


def test_fitting_the_tagger_is_reproducible(tmp_path: Path) -> None:
    """The fitting script on a tiny training file: same seed, same adapters; the tagger it writes loads."""
    from hybridrag.benchmarks.fitting.fit_entity_tagger import fit as fit_tagger

    conll = training_file(tmp_path / "train.conll", TRAINING_ROWS[:2] * 4)
    first = fit_tagger(conll, tmp_path / "a", epochs=1)
    second = fit_tagger(conll, tmp_path / "b", epochs=1)
    assert first["digest"] == second["digest"] and first["sentences"] == 8
    a, b = np.load(tmp_path / "a" / "weights.npz"), np.load(tmp_path / "b" / "weights.npz")
    assert a.files == b.files and "head.weight" in a.files
    assert all(np.array_equal(a[k], b[k]) for k in a.files)
    tags = NameTagger(tmp_path / "a").tag(["john smith works for acme corp in boston .", ""])
    assert len(tags) == 2 and tags[1] == []
    assert all(0 <= t.start < t.end <= 42 for t in tags[0])


def test_an_english_tagger_on_e5_labels_and_reads_a_word_from_its_first_character(tmp_path: Path) -> None:
    """`fit_entity_tagger --base e5-multilingual`: SentencePiece's pieces hold the space before a word, so
    a name's first word is labelled B- (it was O when read from the space) and the tagger written reads its
    names from their first character, not the space before them."""
    from transformers import AutoTokenizer

    from hybridrag.benchmarks.entities import Sentence
    from hybridrag.benchmarks.fitting.fit_entity_tagger import encode
    from hybridrag.benchmarks.fitting.fit_entity_tagger import fit as fit_tagger
    from hybridrag.indexing.analysis.name_tagger import MISC_LABELS, base_of

    tokenizer = AutoTokenizer.from_pretrained(str(base_of({"baseModel": "e5-multilingual"})))
    text = "He met Hrithik Roshan in Mumbai ."
    _ids, labels = encode(tokenizer, Sentence(text, ((7, 21, "person"), (25, 31, "place"))), MISC_LABELS)
    assert [MISC_LABELS[x] for x in labels if x >= 0] == ["O", "O", "B-PER", "I-PER", "O", "B-LOC", "O"]
    conll = training_file(tmp_path / "train.conll", TRAINING_ROWS[:2] * 4)
    meta = fit_tagger(conll, tmp_path / "e5", epochs=1, base_model="e5-multilingual")
    assert meta["baseModel"] == "e5-multilingual" and meta["sentences"] == 8
    tagger = NameTagger(tmp_path / "e5")
    sentence = "John Smith works for Acme Corp in Boston ."
    (_i, _probs, offsets, firsts), *_ = tagger._read([sentence])
    assert [sentence[offsets[f][0]] for f in firsts] == [w[0] for w in sentence.split()]
    assert all(not sentence[t.start].isspace() for t in tagger.tag([sentence])[0])


def test_relabelling_tags_the_extractors_names_on_the_files_tokens(tmp_path: Path) -> None:
    """`relabel_names` writes a CoNLL file whose tags are the packaged extractor's names (longer names
    first, a token tagged once), which `read_conll` reads back as those names."""
    from hybridrag.benchmarks.entities import read_conll
    from hybridrag.benchmarks.fitting.relabel_names import relabel, tags_of

    tokens = "He flew from New York to York with Apollo 13 .".split()
    assert tags_of(tokens, [("York", "place"), ("New York", "place"), ("Apollo 13", "other")]) == [
        "O", "O", "O", "B-LOC", "I-LOC", "O", "B-LOC", "O", "B-MISC", "I-MISC", "O",
    ]  # fmt: skip
    source = tmp_path / "in.conll"
    source.write_text(
        "0\tShe\tO\n1\tjoined\tO\n2\tGoldman\tB-PER\n3\tSachs\tO\n4\tin\tO\n5\tLondon\tO\n6\t.\tO\n"
    )
    info = relabel(source, tmp_path / "out.conll")
    assert info["sentences"] == 1
    [sentence] = read_conll(tmp_path / "out.conll")
    found = [(sentence.text[a:b], kind) for a, b, kind in sentence.spans]
    assert found == [("Goldman Sachs", "organization"), ("London", "place")]


def test_the_tagger_reads_a_given_span_as_one_name() -> None:
    """`span_readings`: for names found by other means, the probability of each type that the span is one name
    of it (B- at its first word, I- after), so a name's later words count ("Tokyo Tsushin Kogyo": a place's
    word, then an organisation's); None where no word starts inside the span; texts without spans are not
    read."""
    from hybridrag.indexing.analysis.name_tagger import packaged_tagger

    tagger = packaged_tagger()
    assert tagger is not None
    text = "Masaru Ibuka and Akio Morita founded Tokyo Tsushin Kogyo in Tokyo in 1946."
    spans = [(text.index(n), text.index(n) + len(n)) for n in ("Tokyo Tsushin Kogyo", "Akio Morita")]
    spans += [(text.rindex("Tokyo"), text.rindex("Tokyo") + 5), (len(text) - 1, len(text) - 1)]
    read, nothing = tagger.span_readings([text, "No names here."], [spans, []])
    assert nothing == []
    company, person, city, empty = read
    assert empty is None
    types = []
    for reading in (company, person, city):
        assert reading is not None and abs(float(reading.types.sum()) - 1.0) < 1e-5
        types.append(tagger.kinds[int(np.argmax(reading.types))])
    assert types == ["organization", "person", "place"]


def test_text_with_letter_case_never_loads_torch() -> None:
    """Where the tagger's ONNX export is (as every test environment installs it), extraction never loads
    torch, cased text included (a fresh interpreter)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from hybridrag.indexing.analysis.analyzers import Analyzer\n"
        "from hybridrag.indexing.analysis.entities import EntityExtractor\n"
        "EntityExtractor(Analyzer()).extract_many(['Alice met Bob in Paris. 561.', '東京に行った。'])\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False"


_CASELESS = [
    "sakichi toyoda founded toyoda automatic loom works in kariya in 1926 .",
    "THE EUROPEAN CENTRAL BANK RAISED RATES, SAID CHRISTINE LAGARDE IN FRANKFURT.",
    "ada lovelace met charles babbage in london; " * 40,  # longer than one window of word pieces
    "",
]


@pytest.mark.slow
def test_the_onnx_export_tags_as_torch_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tagger's ONNX export (what torch-free builds and services run): int8 where it tags the sample as
    torch does (`export_onnx` checks), which it does here, and then finds and types nearly every name torch
    does; its version says int8; one window a call, so a text's tags never depend on the texts read with it;
    an export of other weights is not taken for it."""
    from hybridrag.indexing.analysis import name_tagger

    info = name_tagger.export_onnx(tmp_path / "onnx" / "name-tagger")
    assert info["digest"] == json.loads((name_tagger.FOLDER / "model.json").read_text())["digest"]
    assert info["recipe"] == name_tagger.EXPORT_RECIPE and info["precision"] == "int8"
    assert name_tagger.export_is_current(tmp_path / "onnx" / "name-tagger")
    exported = name_tagger.NameTagger(onnx=tmp_path / "onnx" / "name-tagger")
    on_torch = name_tagger.NameTagger()
    assert exported.precision == "int8" and exported.version == on_torch.version + "-int8"
    # The same vocabulary: heading labels are told apart alike (`EnglishNames._label_end`).
    words = ["RESULTS", "Setting", "outcome", "COPD", "NASCAR", "Microsimulation"]
    assert [exported.common_word(w) for w in words] == [on_torch.common_word(w) for w in words]
    assert on_torch.common_word("RESULTS") and not on_torch.common_word("COPD")
    # Read from the tokenizer alone: neither model was loaded for it.
    assert exported._loaded is None and on_torch._loaded is None
    torch_tags, onnx_tags = on_torch.tag(_CASELESS), exported.tag(_CASELESS)
    assert [len(t) for t in onnx_tags[:2]] != [0, 0] and len(onnx_tags[2]) > 40 and onnx_tags[3] == []
    ours = {(i, t.start, t.end, t.type) for i, tags in enumerate(onnx_tags) for t in tags}
    theirs = {(i, t.start, t.end, t.type) for i, tags in enumerate(torch_tags) for t in tags}
    assert len(ours & theirs) >= 0.9 * max(len(ours), len(theirs))
    # A text alone and among others: the same tags and confidences.
    alone = [exported.tag([text])[0] for text in _CASELESS]
    assert alone == onnx_tags
    # Where the export is, the packaged tagger runs it; an export of other weights is ignored.
    monkeypatch.setenv("HYBRIDRAG_MODELS_DIR", str(tmp_path))
    name_tagger.packaged_tagger.cache_clear()
    try:
        packaged = name_tagger.packaged_tagger()
        assert packaged is not None and packaged.runtime == "onnx"
        info_file = tmp_path / "onnx" / "name-tagger" / "export.json"
        info_file.write_text(json.dumps({**info, "digest": "0" * 12}), "utf-8")
        name_tagger.packaged_tagger.cache_clear()
        packaged = name_tagger.packaged_tagger()
        assert packaged is not None and packaged.runtime == "torch"
    finally:
        name_tagger.packaged_tagger.cache_clear()


def test_a_tagger_fitted_with_misc_names_types_them_other(tmp_path: Path) -> None:
    """A training file with MISC names (CoNLL-2003) adds B-MISC / I-MISC to the tagger's labels, and such a
    name is typed `other`; a file without them keeps the three types' labels."""
    from hybridrag.benchmarks.fitting.fit_entity_tagger import fit as fit_tagger
    from hybridrag.indexing.analysis.name_tagger import LABELS, MISC_LABELS

    rows = [
        (TRAINING_ROWS[2][0], ["O", "B-MISC", "O", "O", "O", "B-LOC", "O", "B-ORG", "O"]),
        *TRAINING_ROWS[:2],
    ]
    meta = fit_tagger(training_file(tmp_path / "misc.conll", rows * 2), tmp_path / "misc", epochs=1)
    assert meta["labels"] == list(MISC_LABELS)
    plain = fit_tagger(
        training_file(tmp_path / "plain.conll", TRAINING_ROWS[:2]), tmp_path / "plain", epochs=1
    )
    assert plain["labels"] == list(LABELS)
    tagger = NameTagger(tmp_path / "misc")
    # One word piece per word here: [CLS] the olympics were [SEP]; "olympics" sure of B-MISC.
    probs = np.full((5, len(MISC_LABELS)), 0.01, dtype=np.float32)
    probs[:, 0] = 0.9
    probs[2] = 0.01
    probs[2, MISC_LABELS.index("B-MISC")] = 0.9
    tags = tagger._decode(probs, [(0, 0), (0, 3), (4, 12), (13, 17), (0, 0)], [1, 2, 3])
    assert [(t.start, t.end, t.type) for t in tags] == [(4, 12, "other")]
    # Its nine-label head loads and runs on text.
    assert all(
        t.type in ("person", "organization", "place", "other")
        for t in tagger.tag(["the olympics in rome ."])[0]
    )


def test_a_file_without_misc_names_beside_one_with_them_gives_partial_labels(tmp_path: Path) -> None:
    """WikiANN tags no MISC: fitted beside CoNLL-2003, its untagged words may be O, B-MISC or I-MISC, and
    their loss is that of the three together; a labelled word's loss is plain cross-entropy."""
    import torch
    from transformers import AutoTokenizer

    from hybridrag.benchmarks.entities import read_conll
    from hybridrag.benchmarks.fitting.fit_entity_tagger import PARTIAL, _loss, encode
    from hybridrag.benchmarks.fitting.fit_entity_tagger import fit as fit_tagger
    from hybridrag.indexing.analysis.name_tagger import MISC_LABELS, base_path

    misc_rows = [(TRAINING_ROWS[2][0], ["O", "B-MISC", "O", "O", "O", "B-LOC", "O", "B-ORG", "O"])]
    misc = training_file(tmp_path / "misc.conll", misc_rows * 2)
    plain = training_file(tmp_path / "plain.conll", TRAINING_ROWS[:2])
    meta = fit_tagger([misc, plain], tmp_path / "both", epochs=1)
    assert meta["labels"] == list(MISC_LABELS) and "partialLabels" in meta
    assert "partialLabels" not in fit_tagger(misc, tmp_path / "misc-only", epochs=1)
    tokenizer = AutoTokenizer.from_pretrained(str(base_path()))
    sentence = read_conll(plain)[0]
    _ids, exact = encode(tokenizer, sentence, MISC_LABELS)
    _ids, partial = encode(tokenizer, sentence, MISC_LABELS, misc_unknown=True)
    outside = MISC_LABELS.index("O")
    assert PARTIAL in partial and outside not in partial
    assert [PARTIAL if e == outside else e for e in exact] == partial  # names keep their labels
    torch.manual_seed(0)
    logits = torch.randn(4, len(MISC_LABELS))
    maybe = torch.tensor([outside, MISC_LABELS.index("B-MISC"), MISC_LABELS.index("I-MISC")])
    gold = torch.tensor([1, -100, 3, 0])
    assert torch.allclose(_loss(logits, gold, maybe), torch.nn.functional.cross_entropy(logits, gold))
    log_p = torch.log_softmax(logits, dim=-1)
    want = -(log_p[0, 1] + torch.logsumexp(log_p[2, maybe], 0) + log_p[3, 0]) / 3
    assert torch.allclose(_loss(logits, torch.tensor([1, -100, PARTIAL, 0]), maybe), want)
