"""Label a CoNLL file's sentences with the names the packaged English extractor finds in them where letter case
is kept (capitalisation rules, tagger and typer: `indexing.analysis.entities`), and write them as a CoNLL file.

What for: the case-less name tagger (`fit_entity_tagger`) reads text without letter case, so it can learn from
what the cased extraction finds in Wikipedia's sentences (typed F1 0.76 on the English dev file, against the
tagger's 0.63 on its case-less copies) beside CoNLL-2003's gold news. The sentences here are WikiANN's training
split's (Wikipedia text); its own labels are dropped (link-derived, no MISC names, many names left untagged).

    python -m hybridrag.benchmarks.fitting.relabel_names ../shared/data/ner/en-wikiann-train.conll \
        --out /tmp/en-wikiann-train-relabelled.conll

Deterministic: the same extractor (its version is printed) gives the same file. Cased sentences are read by
the rules and `name_tagger/`'s tagger, never by the case-less one this file teaches, so shipping that one
does not change the file. The shipped case-less tagger (`name_tagger.CASELESS_FOLDER`;
benchmarks/docs/english-names.md, "The case-less tagger taught by the cased extraction") is fitted on it
beside CoNLL-2003:

    python -m hybridrag.benchmarks.fitting.fit_entity_tagger --out indexing/analysis/caseless_name_tagger \
        --train ../shared/data/ner/en-conll2003-train.conll /tmp/en-wikiann-train-relabelled.conll
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from hybridrag.benchmarks.entities import read_conll
from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.entities import EntityExtractor

_CODE = {"person": "PER", "organization": "ORG", "place": "LOC", "other": "MISC"}


def tags_of(tokens: list[str], names: list[tuple[str, str]]) -> list[str]:
    """BIO tags over `tokens` for each (surface, type): every place the surface's words are the tokens',
    longer names first, a token tagged once."""
    tags = ["O"] * len(tokens)
    for surface, kind in sorted(set(names), key=lambda name: (-len(name[0].split()), name)):
        words = surface.split()
        n = len(words)
        for at in range(len(tokens) - n + 1):
            if tokens[at : at + n] == words and all(tag == "O" for tag in tags[at : at + n]):
                tags[at : at + n] = [f"B-{_CODE[kind]}"] + [f"I-{_CODE[kind]}"] * (n - 1)
    return tags


def relabel(source: Path, out: Path) -> dict[str, object]:
    """Write `source`'s sentences to `out` with the extractor's names as their tags."""
    extractor = EntityExtractor(Analyzer())
    sentences = read_conll(source)
    texts = [s.text for s in sentences]
    found = extractor.extract_many(texts)
    counts = dict.fromkeys(_CODE, 0)
    lines: list[str] = []
    for text, mentions in zip(texts, found, strict=True):
        tokens = text.split(" ")
        named = [(m.surface, m.type) for m in mentions if not m.node_only and m.type in _CODE]
        tags = tags_of(tokens, named)
        for kind, code in _CODE.items():
            counts[kind] += sum(tag == f"B-{code}" for tag in tags)
        lines.extend(f"{k}\t{token}\t{tag}" for k, (token, tag) in enumerate(zip(tokens, tags, strict=True)))
        lines.append("")
    out.write_text("\n".join(lines) + "\n", "utf-8")
    return {"source": source.name, "sentences": len(texts), "names": counts, "extractor": extractor.version}


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", type=Path, help="a CoNLL file (its tokens are read, its tags dropped)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    print(json.dumps(relabel(args.source, args.out), indent=2))


if __name__ == "__main__":
    main()
