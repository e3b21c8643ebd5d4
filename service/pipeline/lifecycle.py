"""Index lifecycle: load models and the current index version at start-up, follow `current`, hot swap.

Owns what a search reads but not how it ranks: the loaded index (pinned by each search, so a swap never
mixes versions within one response), the embedding model and the cross-encoder pool, and the readiness of
each component. Imports `hybridrag.indexing` and the pipeline's own modules, never the HTTP layer.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from hybridrag.indexing.models.embedders import NO_EMBEDDING_MODEL, Embedder, ModelUnavailable, load_embedder
from hybridrag.indexing.stores import versions
from hybridrag.indexing.stores.remote import DamagedVersion, RemoteIndex, RemoteUnavailable, sync_mirror
from hybridrag.pipeline.admission import Admission
from hybridrag.pipeline.batching import BatchingEmbedder
from hybridrag.pipeline.errors import NotReady
from hybridrag.pipeline.loaded_index import LoadedIndex, load_index
from hybridrag.pipeline.relevance import RelevanceModel
from hybridrag.pipeline.rerank import RerankerPool, RerankerUnavailable
from hybridrag.pipeline.settings import Settings

log = logging.getLogger("hybridrag.engine")


_M_ARENA_MAX = -8  # glibc's malloc.h


def limit_malloc_arenas(arenas: int) -> bool:
    """Cap glibc's malloc arenas; False where the C library is not glibc (musl, macOS) or refuses.

    Process-wide by nature; arenas already created stay, so call it before the retriever threads start.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas))


def limit_scan_threads(threads: int) -> None:
    """faiss's OpenMP threads for scans run in the calling thread (0: the library default, every core).

    libgomp keeps the count per thread: set in the main thread only, it left the retriever threads, which
    run the scans, with the default team of one thread per core (benchmarks/docs/speed.md, "The index on
    disk").
    """
    if not threads:
        return
    try:
        import faiss
    except ImportError:  # an installation without faiss serves versions without serving files only
        return
    faiss.omp_set_num_threads(threads)


@dataclass(slots=True)
class ComponentStatus:
    ready: bool
    detail: str
    required: bool = True


class IndexLifecycle:
    """Owns the loaded index, the models and the retriever thread pool; `SearchEngine` adds the search."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        self.search_settings = settings.search
        self.index_settings = settings.index
        self._embedder = embedder
        self._index: LoadedIndex | None = None
        self._reload_lock = threading.Lock()
        self._stop = threading.Event()
        self._failed_target: str | None = None
        self._refused_remote: str | None = None
        self._rerankers = RerankerPool()
        self._relevance = RelevanceModel.load()
        self._admission = Admission(self.search_settings.max_concurrent_searches or os.cpu_count() or 1)
        self._pool = ThreadPoolExecutor(
            max_workers=self.search_settings.search_threads,
            thread_name_prefix="retriever",
            initializer=limit_scan_threads,
            initargs=(self.search_settings.scan_threads,),
        )
        self.components: dict[str, ComponentStatus] = {
            "index": ComponentStatus(False, "not loaded"),
            "embedder": ComponentStatus(False, "not loaded"),
        }
        if self.index_settings.index_url is not None:
            self.components["storage"] = ComponentStatus(False, "not contacted yet", required=False)

    # -- lifecycle
    def start(self) -> None:
        """Load models and the index; failures are recorded per component, never raised."""
        if self.search_settings.malloc_arenas:
            limit_malloc_arenas(self.search_settings.malloc_arenas)
        if self.search_settings.blas_threads:
            from threadpoolctl import threadpool_limits

            # Process-wide by nature (BLAS has one pool); one thread is faster here (benchmarks/README.md, "Constants").
            threadpool_limits(limits=self.search_settings.blas_threads, user_api="blas")
        # The retriever threads set theirs as they start; this one serves searches run in the caller's thread.
        limit_scan_threads(self.search_settings.scan_threads)
        if self.search_settings.embedding_model == NO_EMBEDDING_MODEL and self._embedder is None:
            # Keyword + graph: a legitimate service of an index built with `--embedding-model none`.
            self.components["embedder"] = ComponentStatus(
                True, "no embedding model (HYBRIDRAG_EMBEDDING_MODEL=none): semantic search is unavailable"
            )
        elif self.search_settings.load_embedder and self._embedder is None:
            try:
                self._embedder = load_embedder(
                    self.search_settings.embedding_model,
                    self.search_settings.encoder,
                    self.search_settings.model_threads,
                    self.search_settings.device,
                )
                self._embedder.embed_queries(["warm-up"])
                encoder = getattr(self._embedder, "encoder", "torch")
                device = getattr(self._embedder, "device", "cpu")
                if device != "cpu":
                    encoder += f" on {device}"
                self.components["embedder"] = ComponentStatus(
                    True, f"{self.search_settings.embedding_model} loaded ({encoder})"
                )
            except (ModelUnavailable, OSError, ValueError) as exc:
                self.components["embedder"] = ComponentStatus(False, str(exc))
        elif self._embedder is not None:
            self.components["embedder"] = ComponentStatus(True, f"{self._embedder.name} loaded")
        else:
            self.components["embedder"] = ComponentStatus(True, "disabled by configuration")
        if self._embedder is not None and not isinstance(self._embedder, BatchingEmbedder):
            # Concurrent searches share encoder calls instead of queueing behind a lock one by one.
            self._embedder = BatchingEmbedder(
                self._embedder,
                self.search_settings.query_batch_max,
                self.search_settings.query_batch_window_ms / 1000,
            )
        try:
            self._rerankers.get(self.search_settings.rerank_model)
            self.components["reranker"] = ComponentStatus(
                True, f"{self.search_settings.rerank_model} loaded", False
            )
        except RerankerUnavailable as exc:
            # Optional: searches still work, and say in their notes that rerank was skipped and why.
            self.components["reranker"] = ComponentStatus(False, str(exc), False)
        self.sync_remote()
        self.reload()

    def sync_remote(self) -> None:
        """Follow a remote index: mirror its current version locally (checked) before it is loaded.

        Failures never stop the service: a replica that cannot reach the store, or finds the new version
        damaged, keeps serving the version it has and says so in the `storage` component.
        """
        url = self.index_settings.index_url
        if url is None:
            return
        served = self._index.version_name if self._index is not None else "nothing"
        try:
            remote = RemoteIndex.open(url)
            wanted, mirrored = sync_mirror(remote, self.index_settings.index_dir, refuse=self._refused_remote)
        except DamagedVersion as exc:
            log.error("remote index version refused: %s", exc)
            self._refused_remote = exc.version
            self.components["storage"] = ComponentStatus(False, f"{exc}; refused, serving {served}", False)
            return
        except RemoteUnavailable as exc:
            log.error("object store unreachable: %s", exc)
            self.components["storage"] = ComponentStatus(
                False, f"cannot reach {url} ({exc}); serving {served}", False
            )
            return
        if wanted is not None and wanted == self._refused_remote:
            return  # still the damaged version: keep saying so
        self._refused_remote = None
        self.components["storage"] = ComponentStatus(
            True, f"following {url}: current {wanted}, mirrored {mirrored}", False
        )

    def reload(self) -> bool:
        """(Re)open the current index version; the previous one keeps serving if this fails.

        Searches in flight keep the version they started with (they hold a reference to it), so a switch
        never mixes versions within one response; the old version's files are released with its last search.
        """
        with self._reload_lock:
            try:
                loaded = load_index(
                    self.index_settings.index_dir,
                    self.search_settings.embedding_model,
                    self._embedder,
                    projected_min_rows=self.index_settings.projected_min_rows,
                    release_mapped_every=self.index_settings.release_mapped_every,
                )
            except versions.IndexUnavailable as exc:
                log.error("index unavailable: %s", exc)
                self._failed_target = versions.current_target(self.index_settings.index_dir)
                if self._index is None:
                    self.components["index"] = ComponentStatus(False, str(exc))
                return False
            self._failed_target = None
            self._index = loaded
        self.components["index"] = ComponentStatus(
            True,
            f"version {loaded.version_name}: {len(loaded.documents)} documents, {len(loaded.chunks)} chunks",
        )
        log.info("index loaded", extra={"index_version": loaded.version_name})
        return True

    def reload_if_switched(self) -> bool:
        """Reload when `current` points at another version than the one served (and not one that failed)."""
        target = versions.current_target(self.index_settings.index_dir)
        served = self._index.version_name if self._index is not None else None
        if target is None or target == served or target == self._failed_target:
            return False
        return self.reload()

    def watch(self, interval_s: float) -> None:
        """Poll `current` every `interval_s` seconds in a daemon thread until `close()`."""

        def loop() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.sync_remote()
                    self.reload_if_switched()
                except Exception:  # the watcher must outlive any one bad version
                    log.exception("index reload failed")

        threading.Thread(target=loop, name="index-watch", daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if isinstance(self._embedder, BatchingEmbedder):
            self._embedder.close()

    @property
    def ready(self) -> bool:
        return all(c.ready for c in self.components.values() if c.required)

    @property
    def current_index(self) -> LoadedIndex | None:
        return self._index

    @property
    def index(self) -> LoadedIndex:
        index = self._index
        if index is None:
            raise NotReady(self.components["index"].detail)
        return index
