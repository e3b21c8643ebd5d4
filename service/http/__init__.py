"""The HTTP layer: the FastAPI app, its routes and dependencies, problem+json errors, rate limits, metrics,
request ids and logging.

Owns everything about the wire but the contract itself (that is `hybridrag.schemas`). May import
`hybridrag.pipeline`, `hybridrag.indexing` and `hybridrag.schemas`; nothing below it imports this package.
"""
