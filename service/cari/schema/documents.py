"""Documents (`…/documents`): what a client sends to ingest, what it is answered, and a stored
document as it reads it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from cari.limits import LANGUAGE_NAME_PATTERN, DocumentId


class DocumentIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One document. `text` (or its alias `content`) is parsed according to `format`."""

    id: DocumentId | None = None
    title: str = ""
    text: str | None = None
    content: str | None = None
    format: Literal["text", "markdown", "html"] = "text"
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    source: str | None = None
    language: (
        Annotated[
            str,
            msgspec.Meta(
                pattern=LANGUAGE_NAME_PATTERN,
                description="Text-search configuration of this document, if not the "
                "collection's: one installed on the server, english, indonesian, simple, ... "
                "(another name is refused, naming those installed; in a batch, this document "
                "alone).",
            ),
        ]
        | None
    ) = None


class DocumentBatch(msgspec.Struct, forbid_unknown_fields=True):
    documents: list[DocumentIn]


class Rejection(msgspec.Struct):
    index: int
    id: str | None
    reason: str


class DocumentResult(msgspec.Struct):
    id: str
    status: Literal["created", "updated", "unchanged"]
    chunks: int
    embedded: bool


class IngestResponse(msgspec.Struct):
    results: list[DocumentResult]
    rejected: list[Rejection]
    warnings: list[str]


class DocumentSummary(msgspec.Struct):
    id: str
    title: str
    source: str | None
    metadata: dict[str, Any]
    content_hash: str
    chunks: int
    created_at: datetime
    updated_at: datetime


class DocumentPage(msgspec.Struct):
    documents: list[DocumentSummary]
    next_cursor: str | None  # pass as `cursor` for the next page; None: this was the last


class Deleted(msgspec.Struct):
    deleted: int


# A stored document with its chunks (`GET …/documents/{id}`, the MCP `get_document` tool).


class Chunk(msgspec.Struct):
    id: int
    ordinal: int
    content: str
    token_count: int
    metadata: dict[str, Any]
    embedded: bool


class Document(msgspec.Struct):
    id: str
    title: str
    source: str | None
    metadata: dict[str, Any]
    content_hash: str
    created_at: datetime
    updated_at: datetime
    chunks: list[Chunk]
