"""The documents API: add (JSON or files) and delete documents as asynchronous tasks; read what is indexed
(the list, a document, a chunk) and a task's outcome.

Writes need the write key (`deps.require_write_key`), answer 202 with a task, and are applied by the
`DocumentWriter` on `app.state` in batches, each batch one new index version; reads (`GET /v1/documents`,
`GET /v1/documents/{id}`, `GET /v1/chunks/{id}`, `GET /v1/tasks/{id}`) need the search key when one is set.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from hybridrag.http.bodies import bounded_body, is_json, media_type, parse_body, require_utf8
from hybridrag.http.deps import (
    HttpDep,
    IndexDep,
    LanguageDep,
    rate_limit,
    require_api_key,
    require_write_key,
)
from hybridrag.http.problems import Problem, ProblemError, echo, field_error
from hybridrag.pipeline.loaded_index import LoadedIndex
from hybridrag.pipeline.response import document_url
from hybridrag.pipeline.settings import HttpSettings
from hybridrag.schemas.documents import (
    AddDocumentsRequest,
    ChunkDetail,
    ChunkSpan,
    DocumentDetail,
    DocumentList,
    DocumentSummary,
    WriteTask,
)
from hybridrag.writes.writer import DocumentWriter

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem, "content": {"application/problem+json": {}}}
    for status in (400, 401, 403, 404, 413, 415, 422, 503)
}
writes = APIRouter(dependencies=[Depends(require_write_key), Depends(rate_limit)], tags=["documents"])
reads = APIRouter(dependencies=[Depends(require_api_key), Depends(rate_limit)], tags=["documents"])


def _writer(request: Request) -> DocumentWriter:
    writer: DocumentWriter = request.app.state.writer
    return writer


def _accepted(task: WriteTask) -> Response:
    return Response(
        task.model_dump_json(by_alias=True),
        status_code=202,
        media_type="application/json",
        headers={"Location": f"/v1/tasks/{task.task_id}"},
    )


@writes.post(
    "/v1/documents",
    status_code=202,
    summary="Add documents (JSON) or files (multipart/form-data, field `files`) as an asynchronous task",
    response_model=WriteTask,
    responses=_ERRORS,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/AddDocumentsRequest"}},
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "files": {"type": "array", "items": {"type": "string", "format": "binary"}}
                        },
                    }
                },
            },
        }
    },
)
async def add_documents(request: Request, lang: LanguageDep) -> Response:
    settings: HttpSettings = request.app.state.http
    writer = _writer(request)
    limit = settings.documents_max_per_request
    ctype = media_type(request)
    body = await bounded_body(request, settings.documents_max_body_bytes)
    if is_json(ctype):
        require_utf8(request, body)
        parsed = await run_in_threadpool(parse_body, body, lang, AddDocumentsRequest)
        if len(parsed.documents) > limit:
            error = field_error(request, "documents", "too_many_documents", {"limit": limit})
            raise ProblemError(413, errors=[error])
        task = await run_in_threadpool(writer.submit_documents, parsed.documents)
        return _accepted(task)
    if ctype == "multipart/form-data":
        request._body = body  # the form parser reads the bounded, already-read body
        try:
            form = await request.form(max_files=limit + 1, max_fields=limit + 1)
        except Exception as exc:  # python-multipart's errors: a malformed body
            raise ProblemError(400, f"malformed multipart body: {type(exc).__name__}") from None
        files = [f for f in form.getlist("files") if isinstance(f, UploadFile)]
        if not files:
            raise ProblemError(422, errors=[field_error(request, "files", "no_files")])
        if len(files) > limit:
            raise ProblemError(
                413, errors=[field_error(request, "files", "too_many_documents", {"limit": limit})]
            )
        uploads = []
        for f in files:
            data = await f.read(settings.documents_max_file_bytes + 1)
            uploads.append((f.filename or "upload", data))
        task = await run_in_threadpool(writer.submit_files, uploads, settings.documents_max_file_bytes)
        return _accepted(task)
    raise ProblemError(415, errors=[field_error(request, "body", "unsupported_media_type_documents")])


@writes.delete(
    "/v1/documents/{doc_id}",
    status_code=202,
    summary="Delete a document (from every store) as an asynchronous task",
    response_model=WriteTask,
    responses=_ERRORS,
)
async def delete_document(doc_id: str, request: Request) -> Response:
    if len(doc_id) > 512:
        raise ProblemError(404, f"no document with id {echo(doc_id)}")
    task = await run_in_threadpool(_writer(request).submit_delete, doc_id)
    return _accepted(task)


@reads.get(
    "/v1/tasks/{task_id}",
    summary="A write task: its status and what happened to each document",
    responses=_ERRORS,
)
async def get_task(task_id: str, request: Request) -> Response:
    task = await run_in_threadpool(_writer(request).store.get, task_id)
    if task is None:
        raise ProblemError(404, f"no task with id {echo(task_id)}")
    return Response(task.model_dump_json(by_alias=True), media_type="application/json")


@reads.get(
    "/v1/documents", summary="The documents the index holds, by id, a page at a time", responses=_ERRORS
)
def list_documents(
    index: IndexDep,
    offset: int = Query(0, ge=0),
    limit: int = Query(100, ge=1, le=1000),
) -> Response:
    page = []
    for doc in index.documents.page_heads(offset, limit):
        page.append(
            DocumentSummary(
                id=doc.doc_id,
                title=doc.title,
                file_id=doc.file_id,
                url=doc.url,
                date=doc.date,
                language=doc.language,
                chunks=index.chunks.count_of_doc(doc.doc_id),
            )
        )
    answer = DocumentList(
        documents=page,
        total=len(index.documents),
        offset=offset,
        limit=limit,
        index_version=index.version_name,
    )
    return Response(answer.model_dump_json(by_alias=True), media_type="application/json")


def _json(model: DocumentDetail | ChunkDetail) -> Response:
    return Response(model.model_dump_json(by_alias=True), media_type="application/json")


@reads.get(
    "/v1/documents/{doc_id}",
    summary="A document's full text and metadata",
    response_model=DocumentDetail,
    responses=_ERRORS,
)
async def get_document(doc_id: str, http: HttpDep, index: IndexDep) -> Response:
    # A long document's text is joined from all its chunks: in a worker thread, not on the event loop.
    return await run_in_threadpool(_document, doc_id, http.base_url, index)


def _document(doc_id: str, base_url: str, index: LoadedIndex) -> Response:
    doc = index.documents.get(doc_id)
    if doc is None:
        raise ProblemError(404, f"no document with id {echo(doc_id)}")
    return _json(
        DocumentDetail(
            id=doc.doc_id,
            file_id=doc.file_id,
            title=doc.title,
            text=doc.text,
            url=doc.url or document_url(base_url, doc.doc_id),
            source_url=doc.url,
            date=doc.date,
            language=doc.language,
            metadata=doc.metadata,
            chunks=[
                ChunkSpan(id=c.chunk_id, position=c.position, start=c.start, end=c.end, pages=list(c.pages))
                for c in index.chunks.of_doc(doc_id)
            ],
            index_version=index.version_name,
        )
    )


@reads.get(
    "/v1/chunks/{chunk_id}",
    summary="A chunk's text, offsets in its document and neighbours",
    response_model=ChunkDetail,
    responses=_ERRORS,
)
async def get_chunk(chunk_id: str, http: HttpDep, index: IndexDep) -> Response:
    return await run_in_threadpool(_chunk, chunk_id, http.base_url, index)


def _chunk(chunk_id: str, base_url: str, index: LoadedIndex) -> Response:
    chunk = index.chunks.get(chunk_id)
    if chunk is None:
        raise ProblemError(404, f"no chunk with id {echo(chunk_id)}")
    # Its document's row without the text, and the ids and positions of its document's chunks: a chunk of
    # a long document no longer reads the whole document and every chunk's text.
    doc = index.documents.heads([chunk.doc_id])[chunk.doc_id]
    previous_id, next_id = index.chunks.neighbours(chunk)
    own = document_url(base_url, doc.doc_id)
    return _json(
        ChunkDetail(
            id=chunk.chunk_id,
            doc_id=doc.doc_id,
            file_id=chunk.file_id,
            title=doc.title,
            text=chunk.text,
            position=chunk.position,
            start=chunk.start,
            end=chunk.end,
            language=chunk.language,
            pages=list(chunk.pages),
            previous_id=previous_id,
            next_id=next_id,
            url=doc.url or own,
            document_url=own,
            index_version=index.version_name,
        )
    )
