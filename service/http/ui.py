"""The playground page (`GET /ui`): static files shipped in the package, no build step, no CDN.

The page calls the public API like any client (`POST /v1/search`, `/v1/search/batch`,
`GET /v1/documents/{id}`); its Content-Security-Policy lets it reach this service and nothing else.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"
# The page may load and call only its own origin: no third-party script, style, font or connection.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)

ui = APIRouter(tags=["playground"])


@ui.get("/ui", include_in_schema=False)
async def playground() -> FileResponse:
    return FileResponse(
        STATIC / "index.html", media_type="text/html", headers={"Content-Security-Policy": CSP}
    )


def mount_ui(app: FastAPI) -> None:
    app.include_router(ui)
    app.mount("/ui/assets", StaticFiles(directory=STATIC), name="ui-assets")
