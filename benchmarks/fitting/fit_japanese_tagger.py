"""Fit the Japanese name tagger (`indexing/analysis/ja_tagger.py`) and write its model.

Data: the Japanese named-entity file of `../shared/data/ner/` (stockmarkteam/ner-wikipedia-dataset, Japanese
Wikipedia sentences with typed spans, CC BY-SA 3.0), its first `--sentences` sentences (2,000): there is no
other Japanese named-entity data here, so the file's remaining sentences are held back and the tagger is
measured on them (`hybridrag bench entities --dataset ../shared/data/ner/ja-stockmark-dev.jsonl --offset
2000`), never on what it was fitted on. Types as the benchmark maps them (人名 person; 法人名, 政治的組織名,
その他の組織名 organization; 地名, 施設名 place; 製品名, イベント名 other).

Each sentence is read by Sudachi and by the rules (`EntityExtractor.japanese_rules`); the CRF learns BIO tags
from the features `ja_tagger.features` gives (the rules' tags among them). CRFsuite's L-BFGS with L1 + L2
regularisation; single-threaded, so a refit writes the same bytes. Before fitting, `--folds` (5) models are
fitted on all but one interleaved fold each and scored on it, as the benchmark scores (surface after the
index's name normalisation, and type): their pooled precision, recall and F1 go into `model.json`.

    python -m hybridrag.benchmarks.fitting.fit_japanese_tagger --train ../shared/data/ner/ja-stockmark-dev.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hybridrag.benchmarks.entities import TYPES, Counts, Sentence, read_jsonl, tally
from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.entities import RULES_REVISION, EntityExtractor, normalize_name
from hybridrag.indexing.analysis.ja_tagger import (
    FOLDER,
    MODEL,
    Morpheme,
    bio,
    decode,
    sentence_features,
)

# Cross-validated on the first 2,000 sentences (typed F1, c2 0.05): c1 0.02 / 0.05 / 0.1 / 0.2: 0.7095 /
# 0.7081 / 0.7100 / 0.7097; a larger c1 keeps fewer features (a smaller model).
C1 = 0.1
C2 = 0.05
ITERATIONS = 150


@dataclass(slots=True)
class Example:
    sentence: Sentence
    morphemes: Sequence[Morpheme]
    x: list[list[str]]
    y: list[str]


def examples(sentences: Sequence[Sentence]) -> list[Example]:
    analyzer = Analyzer()
    rules = EntityExtractor(analyzer, rules_only=True)
    out = []
    for s in sentences:
        morphemes = analyzer.japanese.morphemes(s.text)
        names = rules.japanese_rules(s.text, morphemes)
        x = sentence_features(s.text, morphemes, names)
        out.append(Example(s, morphemes, x, bio(morphemes, s.spans)))
    return out


def fit(train: Sequence[Example], path: Path, c1: float, c2: float, iterations: int) -> None:
    import pycrfsuite

    trainer = pycrfsuite.Trainer(verbose=False)
    for e in train:
        if e.morphemes:
            trainer.append(e.x, e.y)
    trainer.set_params(
        {"c1": c1, "c2": c2, "max_iterations": iterations, "feature.possible_transitions": True}
    )
    trainer.train(str(path))


def score(test: Sequence[Example], path: Path) -> dict[str, Counts]:
    """Counts untyped, typed and per type, as `bench entities` counts them."""
    import pycrfsuite

    tagger = pycrfsuite.Tagger()
    tagger.open(str(path))
    found = [decode(e.sentence.text, e.morphemes, tagger.tag(e.x) if e.morphemes else []) for e in test]
    return tally([e.sentence for e in test], found, normalize_name)


def cross_validate(
    data: Sequence[Example], folds: int, c1: float, c2: float, iterations: int
) -> dict[str, Any]:
    pooled: dict[str, Counts] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for fold in range(folds):
            model = Path(tmp) / f"fold{fold}.crfsuite"
            fit([e for i, e in enumerate(data) if i % folds != fold], model, c1, c2, iterations)
            for name, c in score(data[fold::folds], model).items():
                pooled.setdefault(name, Counts()).merge(c)
    return {"folds": folds, **{name: c.scores() for name, c in pooled.items()}}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--train", type=Path, required=True, help="the Japanese JSON-lines file")
    parser.add_argument("--sentences", type=int, default=2000, help="fit on the first N (the rest held back)")
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds first (0: none)")
    parser.add_argument("--c1", type=float, default=C1)
    parser.add_argument("--c2", type=float, default=C2)
    parser.add_argument("--iterations", type=int, default=ITERATIONS)
    parser.add_argument("--out", type=Path, default=FOLDER, help="folder for model.crfsuite and model.json")
    args = parser.parse_args(argv)

    sentences = read_jsonl(args.train)[: args.sentences]
    data = examples(sentences)
    cv = cross_validate(data, args.folds, args.c1, args.c2, args.iterations) if args.folds > 1 else None
    if cv is not None:
        print(
            f"cross-validated typed F1 {cv['typed']['f1']}: " + ", ".join(f"{t} {cv[t]['f1']}" for t in TYPES)
        )
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / MODEL
    tmp = target.with_name(target.name + ".tmp")
    fit(data, tmp, args.c1, args.c2, args.iterations)
    os.replace(tmp, target)
    meta = {
        "model": "linear-chain CRF (CRFsuite via python-crfsuite), BIO tags over person / organization / place / other",
        "features": "ja_tagger.features: morpheme, part of speech, script, affixes, the rules' tags, two either side",
        "rulesRevision": RULES_REVISION,
        "data": {
            "file": args.train.name,
            "sha256": hashlib.sha256(args.train.read_bytes()).hexdigest(),
            "source": "stockmarkteam/ner-wikipedia-dataset ner.json, first half (as ../shared/data/ner/README.md)",
            "licence": "CC BY-SA 3.0",
            "sentences": len(sentences),
            "heldBack": "every sentence after these",
        },
        "params": {"c1": args.c1, "c2": args.c2, "maxIterations": args.iterations},
        "crossValidation": cv,
        "sha256": hashlib.sha256(target.read_bytes()).hexdigest(),
    }
    (args.out / "model.json").write_text(
        json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(f"wrote {target} ({target.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
