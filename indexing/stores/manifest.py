"""A version's manifest as a typed record: what builds write and everyone else reads.

The builder writes the manifest (`builds.build`); the service, the documents writer's recovery and the
benchmarks read it through `Manifest`, never by hand. Settings a manifest predates read as their defaults,
which are the builder's (`BuildConfig` takes them from here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The analysis settings an index is searched with (the keyword index and the query analyzer must match the
# build's): their defaults, shared with `BuildConfig`.
SUDACHI_MODE = "B"
JAPANESE_TOKENS = True
BIGRAM_WEIGHT = 0.3


@dataclass(frozen=True, slots=True)
class Manifest:
    """What a version's manifest.json says that its readers use."""

    version: str
    config: Mapping[str, Any] = field(default_factory=dict)
    embedding: Mapping[str, Any] | None = None  # model, dim, encoder, serving; None: built without vectors
    graph: Mapping[str, Any] = field(default_factory=dict)
    counts: Mapping[str, int] = field(default_factory=dict)
    tasks: tuple[str, ...] = ()  # the documents API's write tasks this version holds

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Manifest:
        return cls(
            version=str(data["version"]),
            config=dict(data.get("config") or {}),
            embedding=dict(data["embedding"]) if data.get("embedding") else None,
            graph=dict(data.get("graph") or {}),
            counts=dict(data.get("counts") or {}),
            tasks=tuple(str(t) for t in data.get("tasks", ())),
        )

    @property
    def sudachi_mode(self) -> str:
        return str(self.config.get("sudachi_mode", SUDACHI_MODE))

    @property
    def japanese_tokens(self) -> bool:
        return bool(self.config.get("japanese_tokens", JAPANESE_TOKENS))

    @property
    def bigram_weight(self) -> float:
        return float(self.config.get("bigram_weight", BIGRAM_WEIGHT))

    @property
    def embedding_model(self) -> str | None:
        return None if self.embedding is None else self.embedding.get("model")

    @property
    def dim(self) -> int | None:
        return None if self.embedding is None else self.embedding.get("dim")
