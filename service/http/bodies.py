"""Request bodies, read once and checked in one place: media type, size (declared and streamed), content
encoding (gzip, bounded), UTF-8, and validation against a contract model (off the event loop)."""

from __future__ import annotations

import zlib
from typing import TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from hybridrag.http.problems import ProblemError, field_error
from hybridrag.schemas.errors import Language, translate_errors

M = TypeVar("M", bound=BaseModel)


def media_type(request: Request) -> str:
    """The request's media type, lower case, without parameters ("" when it sent none)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def is_json(ctype: str) -> bool:
    return ctype == "application/json" or ctype.endswith("+json")


def _too_large(request: Request, limit: int) -> ProblemError:
    return ProblemError(413, errors=[field_error(request, "body", "body_too_large", {"limit": limit})])


async def bounded_body(request: Request, limit: int) -> bytes:
    """The whole body after its content encoding, refused with a 413 past `limit` bytes (declared, read or
    inflated), so no request makes the service hold more than that."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(request, limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(request, limit)
        chunks.append(chunk)
    return decode_content(request, b"".join(chunks), limit)


def require_utf8(request: Request, body: bytes) -> bytes:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        raise ProblemError(400, errors=[field_error(request, "body", "invalid_utf8")]) from None
    return body


async def read_json_body(request: Request, limit: int) -> bytes:
    """A JSON body: the wrong media type, an oversized body and invalid UTF-8 refused with clear errors."""
    # A body without a Content-Type is refused too: the media type is the caller's claim, never our guess.
    if not is_json(media_type(request)):
        raise ProblemError(415, errors=[field_error(request, "body", "unsupported_media_type")])
    return require_utf8(request, await bounded_body(request, limit))


def decode_content(request: Request, body: bytes, limit: int) -> bytes:
    """The body after its `Content-Encoding`: none, or gzip (HTTP clients compress large batch bodies).

    Decompression stops past `limit` bytes, so a small bomb is a 413 like any oversized body; another encoding
    is a 415 naming it; a damaged gzip stream is a 400.
    """
    encodings = [
        e.strip().lower() for e in request.headers.get("content-encoding", "").split(",") if e.strip()
    ]
    encodings = [e for e in encodings if e != "identity"]
    if not encodings:
        return body
    if encodings not in (["gzip"], ["x-gzip"]):
        shown = ", ".join(encodings)[:40]
        raise ProblemError(
            415, errors=[field_error(request, "body", "unsupported_content_encoding", {"encoding": shown})]
        )
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, limit + 1)
        complete = inflater.eof and not inflater.unconsumed_tail and not inflater.unused_data
    except zlib.error:
        raise ProblemError(400, errors=[field_error(request, "body", "invalid_gzip")]) from None
    if len(out) > limit:
        raise _too_large(request, limit)
    if not complete:
        raise ProblemError(400, errors=[field_error(request, "body", "invalid_gzip")])
    return out


def parse_body(body: bytes, lang: Language, model: type[M]) -> M:
    """Validate `body` against `model`; run it off the event loop (a large body takes a while)."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        errors = translate_errors(exc, lang)
        status = 400 if any(e.code in ("json_invalid", "json_type") for e in errors) else 422
        raise ProblemError(status, errors=errors, error_count=exc.error_count()) from None
