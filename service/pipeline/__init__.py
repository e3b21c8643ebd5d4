"""The search pipeline: query classification, the keyword / semantic / graph retrievers, fusion, rerank,
CRAG, highlights and result building, and the lifecycle of the loaded index (hot swap).

Runs without a web server (benchmarks call it in process). May import `hybridrag.indexing` and
`hybridrag.schemas`; never the HTTP layer, the client or the CLI.
"""
