"""The documents API: add (JSON or files) and delete documents as asynchronous tasks, list what is indexed.

Writes need the write key (`deps.require_write_key`), answer 202 with a task, and are applied by the
`DocumentWriter` on `app.state` in batches, each batch one new index version; reads (`GET /v1/documents`,
`GET /v1/tasks/{id}`) need the search key when one is set.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from hybridrag.http.deps import IndexDep, LanguageDep, rate_limit, require_api_key, require_write_key
from hybridrag.http.problems import Problem, ProblemError, echo, field_error
from hybridrag.http.routes import decode_content, parse_body
from hybridrag.pipeline.documents import DocumentWriter
from hybridrag.schemas.documents import AddDocumentsRequest, DocumentList, DocumentSummary, WriteTask

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


async def _bounded_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ProblemError(413, errors=[field_error(request, "body", "body_too_large", {"limit": limit})])
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ProblemError(413, errors=[field_error(request, "body", "body_too_large", {"limit": limit})])
        chunks.append(chunk)
    return decode_content(request, b"".join(chunks), limit)


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
    settings = request.app.state.engine.settings
    writer = _writer(request)
    limit = settings.documents_max_per_request
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await _bounded_body(request, settings.documents_max_body_bytes)
    if ctype == "application/json" or ctype.endswith("+json"):
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            raise ProblemError(400, errors=[field_error(request, "body", "invalid_utf8")]) from None
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
    for doc in index.documents.page(offset, limit):
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
