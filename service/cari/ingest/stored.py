"""A stored document as clients read it (`cari.schema.documents.Document`): the HTTP API's
document read and the MCP `get_document` tool both answer with `read`."""

from __future__ import annotations

import msgspec

from cari.ingest import store
from cari.schema.documents import Document


async def read(
    conn: store.Conn, collection: str, document_id: str, visible: store.Visible
) -> Document:
    """The document `document_id` of `collection` with its chunks (NotFound if either is
    missing, or `visible` hides it)."""
    ref = await store.collection_ref(conn, collection)
    document = await store.get_document(conn, ref, document_id, visible)
    # The row's own id is internal; clients know a document by its external id.
    document.pop("id")
    document["id"] = document.pop("external_id")
    return msgspec.convert(document, Document)
