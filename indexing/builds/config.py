"""What a build is asked to do and what it says it did: the settings the manifest records, the summary of a
new version, and the refusal of a source with nothing to index."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hybridrag.indexing.documents.sources import SourceReport
from hybridrag.indexing.models.embedders import DEFAULT_EMBEDDING_MODEL
from hybridrag.indexing.stores.manifest import BIGRAM_WEIGHT, JAPANESE_TOKENS, SUDACHI_MODE

#: `BuildConfig.name_typing`'s choices.
NAME_TYPINGS = ("tagger", "typer")


@dataclass(frozen=True, slots=True)
class BuildConfig:
    """Settings recorded in the manifest; `add` reuses the manifest's settings, never new ones."""

    chunk_size: int = 800
    chunk_overlap: int = 120
    embedding_model: str | None = DEFAULT_EMBEDDING_MODEL
    sudachi_mode: str = SUDACHI_MODE
    japanese_tokens: bool = JAPANESE_TOKENS
    bigram_weight: float = BIGRAM_WEIGHT
    embed_batch_size: int = 32
    graph: bool = True
    # Synonym edges between entities with close embedded names (graph.SYNONYM_THRESHOLD). Off by default: on
    # the dev sets they changed nothing measurable and cost an embedding per entity (benchmarks/README.md).
    graph_synonyms: bool = False
    # How passages are embedded: "torch", "onnx" (the model's export from `hybridrag models install`; an
    # error without one) or "auto" (the export when installed). The manifest's `embedding.encoder` records
    # which one ran; queries by any encoder search the index (cosine >= 0.99 between them). `index build`
    # defaults to auto; the library keeps torch so that existing configs (and cached indexes) mean what they did.
    encoder: str = "torch"
    # What types the English names capitalisation finds: "tagger" (the name tagger reads each one's sentence
    # and the typer its words: typed F1 0.689 on the English dev file) or "typer" (the typer alone: 0.606,
    # but no tagger pass over cased text, which is ~46 s of SciFact's ~260 s build and most of a build whose
    # vectors are replayed; benchmarks/docs/entities.md). Case-less English is read by the tagger either way.
    # A write keeps its index's setting, so one index types one way.
    name_typing: str = "tagger"

    def __post_init__(self) -> None:
        if self.name_typing not in NAME_TYPINGS:
            raise ValueError(f"name_typing: use one of {', '.join(NAME_TYPINGS)}, not {self.name_typing!r}")

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any]) -> BuildConfig:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in manifest.get("config", {}).items() if k in known})


class NothingToIndex(ValueError):
    """The source held no readable document; `report.skipped` says what was found and why it was skipped."""

    def __init__(self, report: SourceReport) -> None:
        super().__init__(f"nothing to index: no readable document ({len(report.skipped)} item(s) skipped)")
        self.report = report


@dataclass(slots=True)
class BuildSummary:
    version: str
    path: str
    documents: int
    chunks: int
    added_documents: int = 0
    deleted_documents: int = 0
    skipped: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    bytes_on_disk: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
