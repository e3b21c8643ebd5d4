"""The documents API's contract: documents in, asynchronous write tasks out (camelCase on the wire).

`POST /v1/documents` takes `AddDocumentsRequest` (or files as multipart/form-data) and answers 202 with a
`WriteTask`; `DELETE /v1/documents/{id}` answers a task too; `GET /v1/tasks/{taskId}` says how each document
fared and which index version holds the result. Writes are applied in batches, each batch one new version.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from hybridrag.schemas.base import ContractModel

MAX_DOCUMENT_ID_CHARS = 512
MAX_TITLE_CHARS = 2_000
MAX_URL_CHARS = 2_048

TaskStatus = Literal["queued", "running", "succeeded", "failed"]
TaskKind = Literal["add", "delete"]
#: What happened to one document of a task.
Outcome = Literal["added", "replaced", "unchanged", "deleted", "not_found", "refused", "pending"]


class DocumentIn(ContractModel):
    """One document to add. `id` is kept as the document id (a document with that id is replaced); without
    it the id is a content hash, so adding the same content twice changes nothing."""

    id: Annotated[str, Field(min_length=1, max_length=MAX_DOCUMENT_ID_CHARS)] | None = None
    title: Annotated[str, Field(max_length=MAX_TITLE_CHARS)] = ""
    text: Annotated[str, Field(min_length=1)]
    url: Annotated[str, Field(max_length=MAX_URL_CHARS, pattern=r"^https?://")] | None = None
    date: Annotated[str, Field(max_length=40)] | None = Field(None, description="ISO 8601 date or date-time")
    file_id: Annotated[str, Field(min_length=1, max_length=MAX_DOCUMENT_ID_CHARS)] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise PydanticCustomError("blank_text", "text must contain something other than whitespace")
        return value

    @field_validator("date")
    @classmethod
    def _iso_date(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise PydanticCustomError("date_type", "a date must be an ISO 8601 string") from None
        return value


class AddDocumentsRequest(ContractModel):
    """The JSON body of `POST /v1/documents`: one or many documents (ids unique within the request)."""

    documents: Annotated[list[DocumentIn], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_ids(self) -> AddDocumentsRequest:
        seen: set[str] = set()
        for doc in self.documents:
            if doc.id is not None:
                if doc.id in seen:
                    raise PydanticCustomError(
                        "duplicate_document_id", "duplicate document id {id}", {"id": doc.id[:80]}
                    )
                seen.add(doc.id)
        return self


class DocumentOutcome(ContractModel):
    """What a task did to one document (or file)."""

    id: str | None = Field(None, description="The document id (None for a file that yielded no document)")
    source: str | None = Field(None, description="The uploaded file's name, for files")
    status: Outcome
    reason: str | None = None


class WriteTask(ContractModel):
    """An asynchronous write: queued, then applied with others as one new index version."""

    task_id: str
    kind: TaskKind
    status: TaskStatus
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    documents: list[DocumentOutcome] = Field(default_factory=list)
    index_version: str | None = Field(None, description="The index version that holds this task's writes")
    error: str | None = None


class DocumentSummary(ContractModel):
    id: str
    title: str
    file_id: str
    url: str | None = None
    date: str | None = None
    language: str
    chunks: int


class DocumentList(ContractModel):
    """A page of the documents the index holds (by id)."""

    documents: list[DocumentSummary]
    total: int
    offset: int
    limit: int
    index_version: str


class ChunkSpan(ContractModel):
    """Where one of a document's chunks lies in its text."""

    id: str
    position: int
    start: int
    end: int
    pages: list[int] = Field(default_factory=list)


class DocumentDetail(ContractModel):
    """`GET /v1/documents/{id}`: a document's full text and metadata, with its chunks' offsets."""

    id: str
    file_id: str
    title: str
    text: str
    url: str = Field(description="Where to read it: its source URL, else this service's document URL")
    source_url: str | None = None
    date: str | None = None
    language: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    chunks: list[ChunkSpan] = Field(default_factory=list)
    index_version: str


class ChunkDetail(ContractModel):
    """`GET /v1/chunks/{id}`: a chunk's text, its offsets in its document and its neighbours' ids."""

    id: str
    doc_id: str
    file_id: str
    title: str
    text: str
    position: int
    start: int
    end: int
    language: str
    pages: list[int] = Field(default_factory=list)
    previous_id: str | None = None
    next_id: str | None = None
    url: str
    document_url: str
    index_version: str
