"""The `hybridrag` command line, above every other package (it imports them; none imports it).

`main` checks first that the command line's own dependencies are installed, so that a client-only install
(`pip install 'hybridrag[client]'`) says which extra to add instead of failing with a bare import error.
"""

from __future__ import annotations

import importlib.util
import sys

#: Modules the command line needs beyond the client: the `server` extra brings them all, and so does the
#: torch-free `server-onnx` (torch-only steps, such as `models install`, say so when they are asked for).
REQUIRED = ("typer", "numpy", "tantivy", "lancedb", "onnxruntime")


def missing_modules() -> list[str]:
    return [name for name in REQUIRED if importlib.util.find_spec(name) is None]


def main() -> None:
    if sys.argv[1:2] == ["mcp"]:
        # The MCP server needs only the client and the MCP SDK (the `mcp` extra), not the server's stack.
        from hybridrag.mcp import main as mcp_main

        mcp_main(sys.argv[2:])
        return
    missing = missing_modules()
    if missing:
        sys.stderr.write(
            f"hybridrag: the command line needs {', '.join(missing)}, which this installation lacks.\n"
            "Install the server extra: pip install 'hybridrag[server]', or 'hybridrag[server-onnx]' without "
            "torch (the client extra holds the Python client only).\n"
        )
        raise SystemExit(2)
    from hybridrag.cli.bench import app  # registers the bench commands on the shared app

    app()
