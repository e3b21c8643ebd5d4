"""The scripts that fit the models the project ships (entity typer, name tagger, Japanese tagger): each reads its
training data from a path, fits with a fixed seed and writes the weights into the package."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

#: What each known training file is (the metadata names it; any other file is named by its file name alone).
TRAINING_DATA = {
    "en-wikiann-train.conll": "WikiANN English train split (Babelscape/wikineural @d2e28c7 data/wikiann/en/train.conllu)",
    "en-conll2003-train.conll": "CoNLL-2003 English train split (Tjong Kim Sang & De Meulder 2003; gold, Reuters)",
    "ja-stockmark-dev.jsonl": "stockmarkteam/ner-wikipedia-dataset ner.json, first half (Japanese Wikipedia; CC BY-SA 3.0)",
}


def training_sources(paths: Sequence[Path]) -> dict[str, list[str]]:
    """What a model's metadata says of its training files, in the order they were read."""
    return {
        "trainingData": [TRAINING_DATA.get(p.name, p.name) for p in paths],
        "trainingFiles": [p.name for p in paths],
        "trainingSha256": [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths],
    }
