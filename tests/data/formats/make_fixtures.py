"""Write the index fixtures of the formats a release writes (`tests/unit/test_formats.py` reads them).

Run with the source tree of the release whose formats are wanted first on the import path, e.g. for the
release that introduced format 2 (a git worktree of its commit):

    PYTHONPATH=/tmp/release HF_HUB_OFFLINE=1 python tests/data/formats/make_fixtures.py tests/data/formats

It builds a twelve-document index (minilm vectors, the graph), then adds one document and deletes another
with the graph deferred, as the documents API does; each step's current version is packed as
`format-<formatVersion>-<step>.tar.gz` (the version folder and `current`). Format 1 is a full build's,
format 2 a deferred add's (table and vector segments), format 3 a deferred delete's (deleted rows); from
format 4 (the graph stored as arrays alone) every step's version is format 4, from format 5 (documents'
texts left to their chunks) format 5, from format 6 (float16 vectors) format 6.

The fixtures kept here: `format-1-build` and `format-2-add` by the release of bd6c64b (2026-11-28, the
first with format 2), `format-3-delete` by the one that introduced format 3, `format-4-delete` by the one that introduced format 4
(2026-11-28, graph arrays format 7), `format-5-delete` by the one that introduced format 5 (2026-11-28; its
base's float32 vectors also read in place from LanceDB's data files), `format-6-delete` by the one that
introduced format 6 (2026-11-29, float16 vectors).
"""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
from hybridrag.indexing.documents.sources import Document
from hybridrag.indexing.stores import versions

TOPICS = [
    ("Granite", "Granite is a coarse igneous rock of quartz and feldspar quarried in Aberdeen."),
    ("Basalt", "Basalt is a fine volcanic rock; the Giant's Causeway in Antrim is made of its columns."),
    (
        "Glacier",
        "A glacier is a river of ice; the Aletsch Glacier in Switzerland is the longest in the Alps.",
    ),
    ("Fjord", "A fjord is a long inlet carved by a glacier; Sognefjord in Norway is the deepest."),
    ("Moraine", "A moraine is rock and soil left by a glacier, as in the hills around Lake Geneva."),
    ("Delta", "A delta forms where a river meets the sea; the Nile Delta is one of the largest."),
    ("Estuary", "An estuary mixes river and sea water; the Thames Estuary opens to the North Sea."),
    ("Lichen", "Lichen is a fungus and an alga together; Linnaeus described many species in Uppsala."),
    ("Tide", "Tides follow the Moon; the Bay of Fundy in Canada has the highest in the world."),
    ("Dune", "Dunes are hills of sand shaped by wind, as in the Namib Desert of Namibia."),
    ("Cave", "Caves form where water dissolves limestone, like the Mammoth Cave in Kentucky."),
    ("Geyser", "A geyser erupts hot water; Old Faithful in Yellowstone is the best known."),
]


def _pack(index_dir: Path, out: Path, step: str) -> str:
    version = versions.current_version(index_dir)
    fmt = version.manifest.get("formatVersion", 1)
    name = f"format-{fmt}-{step}.tar.gz"
    with tarfile.open(out / name, "w:gz") as tar:
        tar.add(version.path, arcname=f"index/versions/{version.path.name}")
        tar.add(index_dir / "current", arcname="index/current")
    return name


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="formats-"))
    try:
        corpus = work / "corpus.jsonl"
        with corpus.open("w", encoding="utf-8") as fh:
            for i, (title, text) in enumerate(TOPICS):
                fh.write(json.dumps({"_id": f"doc-{i:02d}", "title": title, "text": text}) + "\n")
        index_dir = work / "index"
        config = BuildConfig(embedding_model="minilm")
        builder = IndexBuilder(index_dir, config)
        builder.build(corpus)
        made = [_pack(index_dir, out, "build")]
        added = Document(
            doc_id="doc-added",
            file_id="api",
            title="Volcano",
            text="Mount Etna in Sicily is an active volcano.",
        )
        IndexBuilder(index_dir, config, embedder=builder.embedder).apply([added], [], defer_graph=True)
        made.append(_pack(index_dir, out, "add"))
        IndexBuilder(index_dir, config, embedder=builder.embedder).apply([], ["doc-03"], defer_graph=True)
        made.append(_pack(index_dir, out, "delete"))
        print("\n".join(made))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
