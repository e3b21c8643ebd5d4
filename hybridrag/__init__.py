"""hybridrag: hybrid BM25 + vector + knowledge-graph search for research agents.

One import name for everything the distribution installs. The sub-packages live in the repository's
top-level folders and are mapped here (see ARCHITECTURE.md):

- `hybridrag.schemas`   (schemas/)           the wire contract: Pydantic models only
- `hybridrag.client`    (service/client/)    the Python client and the agent-framework adapters
- `hybridrag.indexing`  (indexing/)          documents -> chunks, keyword/vector/graph indexes, versions
- `hybridrag.pipeline`  (service/pipeline/)  the search pipeline: classify, retrieve, fuse, rerank, explain
- `hybridrag.http`      (service/http/)      the FastAPI service around the pipeline
- `hybridrag.benchmarks` (benchmarks/)       quality, latency, load and build-cost benchmarks
- `hybridrag.cli`       (service/cli/)       the `hybridrag` command line, above all of them
"""

__version__ = "0.1.0"
