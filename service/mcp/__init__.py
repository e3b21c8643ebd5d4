"""The MCP server (`hybridrag mcp`): the service's search as tools for any MCP host (extra `mcp`)."""

from __future__ import annotations

import importlib.util
import sys

#: Said by `hybridrag mcp` and `hybridrag-mcp` alike where the SDK is missing, instead of a traceback.
MISSING_SDK = "hybridrag mcp needs the MCP SDK: pip install 'hybridrag[mcp]'\n"


def main(argv: list[str] | None = None) -> None:
    """`hybridrag-mcp` / `hybridrag mcp` / `python -m hybridrag.mcp`: the server, or the extra to install."""
    if importlib.util.find_spec("mcp") is None:
        sys.stderr.write(MISSING_SDK)
        raise SystemExit(2)
    from hybridrag.mcp.server import main as server_main

    server_main(argv)
