"""Service configuration from environment variables prefixed `HYBRIDRAG_` (or a `.env` file).

`Settings` is the one flat surface an operator sets (`HYBRIDRAG_<NAME>`); each component is handed only its
group of it — `http` (the app, its limits and keys), `search` (the engine's models and budgets), `index`
(where versions are read and how they are mapped) and `writer` (the documents API's batching).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hybridrag.indexing.models.embedders import DEFAULT_EMBEDDING_MODEL
from hybridrag.indexing.stores.memory_maps import RELEASE_EVERY
from hybridrag.indexing.stores.remote import default_cache_dir, is_remote, mirror_dir


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """What the HTTP app needs: where it listens, its body limits, keys, rate limit, CORS and metrics."""

    host: str
    port: int
    header_timeout_s: float
    keep_alive_s: float
    max_body_bytes: int
    documents_max_body_bytes: int
    documents_max_per_request: int
    documents_max_file_bytes: int
    api_key: SecretStr | None
    write_api_key: SecretStr | None
    rate_limit_per_s: float | None
    rate_limit_burst: int
    cors_origins: tuple[str, ...]
    metrics_enabled: bool
    base_url: str


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """What the search engine needs: its models, its budget, fusion and its threads."""

    embedding_model: str
    encoder: Literal["torch", "onnx", "auto"]
    device: Literal["cpu", "cuda", "auto"]
    load_embedder: bool
    model_threads: int
    query_batch_max: int
    query_batch_window_ms: float
    rerank_model: str
    rerank_sources: dict[str, str]
    search_budget_s: float
    fusion: Literal["score-rrf", "rrf"]
    search_threads: int
    max_concurrent_searches: int | None
    blas_threads: int
    scan_threads: int
    malloc_arenas: int
    base_url: str


@dataclass(frozen=True, slots=True)
class IndexSettings:
    """Where the served index lives (a folder, or the mirror of a bucket) and how its versions are read."""

    index_dir: Path
    index_url: str | None
    cache_dir: Path
    reload_interval_s: float
    projected_min_rows: int
    release_mapped_every: int


@dataclass(frozen=True, slots=True)
class WriterSettings:
    """How the documents API's writer batches writes and how long it keeps finished tasks."""

    documents_batch_max: int
    documents_batch_wait_s: float
    documents_keep_tasks_s: float
    documents_merge_after_s: float | None
    documents_merge_share: float | None
    device: Literal["cpu", "cuda", "auto"]


_Group = TypeVar("_Group", HttpSettings, SearchSettings, IndexSettings, WriterSettings)


class Settings(BaseSettings):
    """Every setting can be given as `HYBRIDRAG_<NAME>`, e.g. `HYBRIDRAG_INDEX_DIR=/data/index`."""

    model_config = SettingsConfigDict(env_prefix="HYBRIDRAG_", env_file=".env", extra="ignore")

    index_dir: Path = Field(
        Path("./index"),
        description="Index directory (the one holding `current`), or an object-storage URL "
        "(s3://bucket/prefix), which sets `index_url`.",
    )
    index_url: str | None = Field(
        None,
        description="Object-storage URL of the index to follow (s3://bucket/prefix): the replica mirrors its "
        "current version into `cache_dir` and serves the mirror (index_dir is then that mirror).",
    )
    cache_dir: Path = Field(
        default_factory=default_cache_dir, description="Where remote indexes are mirrored locally."
    )
    host: str = Field("127.0.0.1", description="Address to bind; loopback unless you mean otherwise.")
    port: int = Field(8000, ge=1, le=65535)
    embedding_model: str = Field(
        DEFAULT_EMBEDDING_MODEL,
        description="Query embedding model; must be the model the index was built with.",
    )
    encoder: Literal["torch", "onnx", "auto"] = Field(
        "auto",
        description="How the query model runs: sentence-transformers on torch, its ONNX export "
        "(`hybridrag models install NAME`; about 4x faster per query here), or auto (the export when "
        "installed). Any of them searches an index built by any other (same model, cosine >= 0.99).",
    )
    device: Literal["cpu", "cuda", "auto"] = Field(
        "cpu",
        description="Where the service's model runs, for queries and for the passages the documents API "
        "writes: the CPU, a CUDA device (torch; not ready when torch sees none), or auto (CUDA when torch "
        "sees one). A batch of written passages is what an accelerator speeds up; cpu does not import torch "
        "to look for one.",
    )
    query_batch_max: int = Field(
        32, ge=1, le=256, description="Most query texts encoded in one call when searches arrive together."
    )
    query_batch_window_ms: float = Field(
        0.0,
        ge=0,
        le=50,
        description="How long the query encoder waits for more queries before a call (0: take what is "
        "already waiting; queries that arrive while it is busy still share the next call).",
    )
    load_embedder: bool = Field(True, description="Load the embedding model (semantic search) at start-up.")
    rerank_model: str = Field(
        "cross-encoder/ms-marco-MiniLM-L-6-v2",
        description="Cross-encoder used when a request does not name one: a local folder or a model in the "
        "local Hugging Face cache (never downloaded).",
    )
    rerank_models: dict[str, str] = Field(
        default_factory=dict,
        description="Further cross-encoders a request may name in `rerankConfig.model`, as JSON "
        '{"name": "local folder or Hugging Face cache id"}; `rerank_model` is always allowed. Any other '
        "name is refused (422): a caller never makes the server probe or load a path of its choosing.",
    )
    api_key: SecretStr | None = Field(None, description="When set, search and document endpoints need it.")
    write_api_key: SecretStr | None = Field(
        None,
        description="The key that may write (POST/DELETE /v1/documents); it may also search. Unset: writes "
        "are refused with 403, so a default deployment cannot be written to from the network.",
    )
    documents_batch_max: int = Field(
        100, ge=1, le=10_000, description="Most documents applied as one index version by the writer."
    )
    documents_batch_wait_s: float = Field(
        0.1,
        ge=0,
        le=60,
        description="How long an idle writer lets a batch gather before it applies it (writes that arrive "
        "while a batch is applied form the next batch).",
    )
    documents_merge_after_s: float | None = Field(
        2.0,
        ge=0,
        le=86_400,
        description="Written documents are searchable by keyword and meaning at once and join the graph "
        "(entities, relations, communities) at a merge, run in the background once writes have paused this "
        "long; unset (null) leaves merging to `hybridrag index merge`.",
    )
    documents_merge_share: float | None = Field(
        0.05,
        gt=0,
        le=1,
        description="With background merges on, the graph is also merged while writes go on once the passages "
        "waiting for it are this share of the index (unset: only when writes pause).",
    )
    documents_max_body_bytes: int = Field(
        50_000_000, ge=1_024, description="Largest body of a documents request (JSON or multipart)."
    )
    documents_max_per_request: int = Field(1000, ge=1, description="Most documents or files in one request.")
    documents_keep_tasks_s: float = Field(
        7 * 86400, ge=60, description="How long a finished write task can still be read (GET /v1/tasks/{id})."
    )
    documents_max_file_bytes: int = Field(
        20_000_000, ge=1_024, description="Largest uploaded file; a larger one is refused in its task."
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=300,
        description="Close a connection whose request headers are not complete this many seconds after "
        "they began (uvicorn has no such limit of its own).",
    )
    keep_alive_s: float = Field(
        5.0, gt=0, le=300, description="Close kept-alive idle connections after this."
    )
    max_body_bytes: int = Field(1_000_000, ge=1_024, description="Largest accepted request body.")
    search_budget_s: float = Field(
        10.0, gt=0, le=60, description="Time budget per search; stages that would overrun are skipped."
    )
    fusion: Literal["score-rrf", "rrf"] = Field(
        "score-rrf",
        description="Default fusion: weighted RRF with each term scaled by the candidate's score evidence "
        "(score-rrf), or plain weighted RRF (rrf). A request's `fusion` field wins.",
    )
    model_threads: int = Field(
        0,
        ge=0,
        description="Intra-op threads of the query model (torch or onnxruntime); 0: the runtime's default, every "
        "core. With `serve --workers N`, cores / N.",
    )
    blas_threads: int = Field(
        1,
        ge=0,
        description="Threads for numpy's BLAS (in-memory vector search); 0 leaves the library default. One "
        "keeps idle BLAS threads from spinning against the embedding model's threads on small machines.",
    )
    scan_threads: int = Field(
        1,
        ge=0,
        description="OpenMP threads of the 8-bit vector code scan (faiss); 0 leaves the library default (every "
        "core). One, as for BLAS: each thread that calls faiss gets its own team of OpenMP threads, whose idle "
        "spinning competes with the model and the other retrievers on a small machine.",
    )
    malloc_arenas: int = Field(
        2,
        ge=0,
        description="Most glibc malloc arenas (mallopt M_ARENA_MAX) set at start-up; 0 leaves glibc's default "
        "(8 a core). Every thread that allocates can get an arena of its own that keeps its freed memory, so the "
        "process' anonymous memory grew with concurrent clients; ignored where libc is not glibc.",
    )
    projected_min_rows: int = Field(
        50_000,
        ge=1,
        description="From this many vectors the in-memory semantic search runs in two stages: a scan of the "
        "vectors projected on their 96 principal components, then the best 2,000 (40 per result beyond 50) "
        "rescored exactly; below it every vector is scored (exact). A value above the index's size keeps "
        "search exact.",
    )
    release_mapped_every: int = Field(
        RELEASE_EVERY,
        ge=0,
        description="Every this many searches, the index pages they read are dropped from the process' page "
        "tables (they stay in the page cache; a later read maps them again), so resident memory holds what "
        "recent searches touched rather than every page ever read; 0: never (fastest when memory is ample).",
    )
    search_threads: int = Field(8, ge=1, le=64, description="Threads for running retrievers concurrently.")
    max_concurrent_searches: int | None = Field(
        None,
        ge=1,
        le=256,
        description="Searches that retrieve, fuse and answer at once (after their query is encoded); the rest "
        "wait their turn in arrival order. Unset: one per CPU core (more only hand the GIL back and forth).",
    )
    rate_limit_per_s: float | None = Field(
        None,
        gt=0,
        description="Average requests per second per caller (API key, else address); off when unset.",
    )
    rate_limit_burst: int = Field(
        20, ge=1, description="Requests a caller may send at once before the limit bites."
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="Origins allowed by CORS, as JSON (e.g. '[\"https://app.example\"]'); CORS is off when empty.",
    )
    reload_interval_s: float = Field(
        5.0,
        ge=0,
        description="How often to check whether `current` points at a new index version (0: never).",
    )
    metrics_enabled: bool = Field(True, description="Serve Prometheus metrics at /metrics.")
    public_base_url: str | None = Field(
        None, description="Base URL used to give every hit a resolvable url (defaults to http://host:port)."
    )
    log_level: str = Field("INFO")
    log_json: bool = Field(True, description="One JSON object per log line.")

    @model_validator(mode="before")
    @classmethod
    def _remote_index_dir(cls, data: Any) -> Any:
        if isinstance(data, dict) and is_remote(str(data.get("index_dir", ""))):
            data = {**data, "index_url": str(data["index_dir"])}
            del data["index_dir"]
        return data

    @model_validator(mode="after")
    def _mirror(self) -> Settings:
        if self.index_url is not None:
            if not is_remote(self.index_url):
                raise ValueError(f"index_url {self.index_url!r} is not an s3://, gs:// or az:// URL")
            self.index_dir = mirror_dir(self.cache_dir, self.index_url)
        return self

    @property
    def rerank_sources(self) -> dict[str, str]:
        """The allow-list of cross-encoder names a request may use, each with where it is loaded from."""
        return {self.rerank_model: self.rerank_model, **self.rerank_models}

    @property
    def base_url(self) -> str:
        return (self.public_base_url or f"http://{self.host}:{self.port}").rstrip("/")

    def _group(self, group: type[_Group]) -> _Group:
        values = {f.name: getattr(self, f.name) for f in fields(group)}
        return group(**values)

    @property
    def http(self) -> HttpSettings:
        return replace(self._group(HttpSettings), cors_origins=tuple(self.cors_origins))

    @property
    def search(self) -> SearchSettings:
        return self._group(SearchSettings)

    @property
    def index(self) -> IndexSettings:
        return self._group(IndexSettings)

    @property
    def writer(self) -> WriterSettings:
        return self._group(WriterSettings)
