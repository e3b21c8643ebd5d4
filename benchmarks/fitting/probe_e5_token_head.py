"""Measure one option for typing names: a head over e5's own token states (nothing shipped from it).

A build already runs e5 (its ONNX export outputs every word piece's last hidden state, pooled in numpy), so a
head over those states would type names at almost no extra cost, in any language e5 reads. This script
fits such a head on CoNLL-2003 (gold PER / ORG / LOC / MISC; the original text and its lower- and upper-cased
copies) and measures typed F1 on the WikiNEuRal dev file in the three casings, as `bench entities` scores it
(MISC counted as `other`). Each piece is labelled B-/I- of the span its first character falls in; a softmax
(`--hidden 0`) or a one-layer MLP over the piece's state (with its neighbours' at `--context 1`) is fitted
with AdamW (fixed seed), and the tags are decoded with Viterbi under BIO's constraints.

    python -m hybridrag.benchmarks.fitting.probe_e5_token_head \
        --train ../shared/data/ner/en-conll2003-train.conll --dev ../shared/data/ner/en-wikineural-dev.conll

Needs `hybridrag models install e5-multilingual` (the ONNX export) and torch for the fit. What it gave is in
benchmarks/docs/entities.md, "Entity typing from e5's token states".
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.benchmarks.common import CASINGS
from hybridrag.benchmarks.entities import TYPES, Sentence, read_dataset, tally
from hybridrag.indexing.analysis.bio import best_bio
from hybridrag.indexing.analysis.entities import normalize_name
from hybridrag.indexing.models.onnx_encoder import onnx_dir

PREFIX = "passage: "  # as a build embeds a passage
LABELS = ("O", *(f"{p}-{t}" for t in TYPES for p in ("B", "I")))
SEED = 0
BATCH = 1024


@dataclass(slots=True)
class Pieces:
    """Every kept word piece of a set of sentences: its state, label, sentence and character span."""

    states: np.ndarray
    labels: np.ndarray
    sentence: np.ndarray
    start: np.ndarray
    end: np.ndarray


@cache
def _session() -> tuple[Any, Any]:
    """The int8 export and its tokenizer, loaded once for every set and casing."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    folder = onnx_dir("e5-multilingual")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(512)
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(
        str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
    ), tokenizer


def _spans(offsets: Sequence[tuple[int, int]], text: str) -> list[tuple[int, int]]:
    """Each piece's characters in `text` (the prefix and a piece's leading space left out); (-1, -1) for
    pieces that cover none."""
    out = []
    for s, t in offsets:
        s, t = max(s - len(PREFIX), 0), t - len(PREFIX)
        while s < t and text[s] == " ":
            s += 1
        out.append((s, t) if s < t else (-1, -1))
    return out


def piece_states(sentences: Sequence[Sentence], casing: str) -> Pieces:
    """One run of the int8 export per sentence (as the build runs it: one text per call)."""
    session, tokenizer = _session()
    change = CASINGS[casing]
    states, labels, sentence, starts, ends = [], [], [], [], []
    for i, s in enumerate(sentences):
        text = change(s.text)
        encoding = tokenizer.encode(PREFIX + text)
        ids = np.array([encoding.ids], dtype=np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0][0]
        for k, (a, b) in enumerate(_spans(encoding.offsets, text)):
            if a < 0:
                continue
            gold = next((g for g in s.spans if g[0] <= a < g[1]), None)
            label = 0 if gold is None else LABELS.index(("B-" if a == gold[0] else "I-") + gold[2])
            states.append(hidden[k].astype(np.float16))
            labels.append(label)
            sentence.append(i)
            starts.append(a)
            ends.append(b)
    return Pieces(np.vstack(states), np.array(labels), np.array(sentence), np.array(starts), np.array(ends))


def features(pieces: Pieces, context: int) -> np.ndarray:
    """The piece's state, with its neighbours' in the same sentence (zeros past its ends) at `context` 1."""
    x = pieces.states.astype(np.float32)
    if not context:
        return x
    parts = [x]
    for shift in (-1, 1):  # the next piece's state, then the previous one's
        y = np.roll(x, shift, axis=0)
        y[np.roll(pieces.sentence, shift) != pieces.sentence] = 0
        parts.append(y)
    return np.hstack(parts)


def viterbi(logp: np.ndarray) -> list[int]:
    """The best tag sequence in which I-X follows only B-X or I-X (`bio.best_bio`), as label indices."""
    return [LABELS.index(tag) for tag in best_bio(logp, LABELS)]


def names(tags: Sequence[int], starts: np.ndarray, ends: np.ndarray, text: str) -> list[tuple[str, str]]:
    out: list[list[Any]] = []
    for tag, s, e in zip(tags, starts, ends, strict=True):
        label = LABELS[tag]
        if label.startswith("I-") and out and out[-1][2] == label[2:] and out[-1][3]:
            out[-1][1] = int(e)
            continue
        if out:
            out[-1][3] = False
        if label.startswith("B-"):
            out.append([int(s), int(e), label[2:], True])
    return [(text[s:e], kind) for s, e, kind, _open in out]


def fit_and_measure(
    train: Path, dev: Path, casings: Sequence[str], hidden: int, context: int, epochs: int
) -> dict[str, Any]:
    import torch

    torch.manual_seed(SEED)
    training = read_dataset(train)
    t0 = time.perf_counter()
    sets = [piece_states(training, c) for c in casings]
    extract_s = time.perf_counter() - t0
    x = torch.from_numpy(np.vstack([features(p, context) for p in sets]))
    y = torch.from_numpy(np.concatenate([p.labels for p in sets]).astype(np.int64))
    mean, std = x.mean(0), x.std(0) + 1e-6
    x = (x - mean) / std
    width = x.shape[1]
    model = (
        torch.nn.Sequential(
            torch.nn.Linear(width, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, len(LABELS))
        )
        if hidden
        else torch.nn.Linear(width, len(LABELS))
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    generator = torch.Generator().manual_seed(SEED)
    t1 = time.perf_counter()
    for _epoch in range(epochs):
        for idx in torch.randperm(len(x), generator=generator).split(BATCH):
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    fit_s = time.perf_counter() - t1
    model.eval()
    sentences = read_dataset(dev)
    results = {}
    for casing in ("original", "lower", "upper"):
        pieces = piece_states(sentences, casing)
        with torch.no_grad():
            inputs = (torch.from_numpy(features(pieces, context)) - mean) / std
            logp = torch.log_softmax(model(inputs), -1).numpy()
        bounds = np.searchsorted(pieces.sentence, np.arange(len(sentences) + 1))
        change = CASINGS[casing]
        copies = [Sentence(change(s.text), s.spans) for s in sentences]
        found = []
        for i, s in enumerate(copies):
            a, b = bounds[i], bounds[i + 1]
            tags = viterbi(logp[a:b]) if b > a else []
            found.append(names(tags, pieces.start[a:b], pieces.end[a:b], s.text))
        counts = tally(copies, found, normalize_name)
        results[casing] = {
            "typed": counts["typed"].scores(),
            "perType": {t: counts[t].scores()["f1"] for t in TYPES},
        }
    return {
        "train": train.name,
        "trainCasings": list(casings),
        "dev": dev.name,
        "head": f"mlp {hidden}" if hidden else "softmax",
        "context": context,
        "epochs": epochs,
        "pieceStatesSeconds": round(extract_s),
        "fitSeconds": round(fit_s),
        "results": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", type=Path, required=True)
    parser.add_argument("--dev", type=Path, required=True)
    parser.add_argument("--casings", default="original,lower,upper")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--context", type=int, default=1, choices=(0, 1))
    parser.add_argument("--epochs", type=int, default=6)
    args = parser.parse_args()
    report = fit_and_measure(
        args.train, args.dev, args.casings.split(","), args.hidden, args.context, args.epochs
    )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
