"""A stored document as clients read it: its fields and its chunks. The HTTP API's document read
and the MCP `get_document` tool both answer with `read`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from cari.ingest import store


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


async def read(conn: store.Conn, collection: str, document_id: str) -> Document:
    """The document `document_id` of `collection` with its chunks (NotFound if either is
    missing)."""
    ref = await store.collection_ref(conn, collection)
    document = await store.get_document(conn, ref, document_id)
    # The row's own id is internal; clients know a document by its external id.
    document.pop("id")
    document["id"] = document.pop("external_id")
    return msgspec.convert(document, Document)
