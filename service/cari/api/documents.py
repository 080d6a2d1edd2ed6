"""Documents under /v1/collections/{collection}/documents: add, upsert, list, read, delete,
clear."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import anyio.to_thread
import msgspec
import psycopg
from litestar import Controller, Request, delete, get, post, put
from litestar.di import NamedDependency
from litestar.openapi.spec import Example
from litestar.params import Body, Parameter

from cari import keys, limits
from cari.api.auth import access_of, requires
from cari.api.openapi import CURSOR, CollectionName, DocumentedAs, V1Operation
from cari.api.path_ids import path_id, whole_collection
from cari.api.problems import responses
from cari.api.state import AppState
from cari.errors import CariError, InvalidInput
from cari.ingest import formats, store, stored
from cari.ingest.pipeline import BatchResult, Ingestor
from cari.ingest.store import NewDocument
from cari.schema.documents import (
    Deleted,
    Document,
    DocumentBatch,
    DocumentIn,
    DocumentPage,
    DocumentResult,
    DocumentSummary,
    IngestResponse,
    Rejection,
)
from cari.search.filters import compile_documents
from cari.settings import Settings

Conn = NamedDependency[psycopg.AsyncConnection[Any]]


def _cursor(last_id: str) -> str:
    """An opaque token for "after this id": clients pass it back, never build it."""
    return base64.urlsafe_b64encode(last_id.encode()).decode().rstrip("=")


def _after(cursor: str | None) -> str | None:
    """The id a cursor stands for. Any cursor of the documented form is a position in id order
    (bytes that are no UTF-8 read as U+FFFD), so the document's pattern is the whole rule."""
    if cursor is None:
        return None
    # `match`, as JSON Schema tools read the pattern: `$` also before a final newline.
    if len(cursor) < 2 or not re.match(CURSOR, cursor):
        raise InvalidInput("cursor", "is not a cursor from a previous page")
    cursor = cursor.rstrip("\n")
    after = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    return after.decode("utf-8", "replace").replace("\x00", "\ufffd")


def _metadata_filter(metadata: str | None) -> Any:
    if metadata is None:
        return {}
    try:
        return json.loads(metadata)
    except (ValueError, RecursionError):
        raise InvalidInput("metadata", "must be a JSON object") from None


# Bodies are checked document by document (a batch keeps its valid documents).
OneOrBatch = Annotated[
    dict[str, Any],
    DocumentedAs(DocumentIn, DocumentBatch),
    Body(
        examples=[
            Example(
                summary="One document",
                value={
                    "id": "faq/cicilan",
                    "title": "Cicilan",
                    "text": "# Cicilan\n\nTenor 12 sampai 60 bulan.",
                    "format": "markdown",
                    "metadata": {"topic": "financing"},
                },
            ),
            Example(
                summary="A batch",
                value={"documents": [{"id": "a", "text": "Satu."}, {"id": "b", "text": "Dua."}]},
            ),
        ]
    ),
]
OneDocument = Annotated[
    dict[str, Any],
    DocumentedAs(DocumentIn),
    Body(examples=[Example(summary="A document", value={"text": "Tenor 12 sampai 60 bulan."})]),
]
DocumentId = Annotated[
    Path,
    Parameter(
        description="The document's id, percent-encoded: '/' as %2F, '.' as %2E (exact; an id "
        "may hold '/', but not only '/')",
        examples=[Example(value="faq/cicilan")],
        schema_extra={"format": None},  # Litestar calls a path parameter a URI
    ),
]


def to_document(
    raw: object,
    settings: Settings,
    *,
    path_id: str | None = None,
    unknown_languages: Mapping[str, InvalidInput] | None = None,
) -> NewDocument:
    """Validate one request document; errors name the field. `unknown_languages`: why each
    `language` the server lacks is refused (`_unknown_languages`)."""
    try:
        spec = msgspec.convert(raw, DocumentIn)
    except msgspec.ValidationError as exc:
        raise InvalidInput.from_msgspec(str(exc), "document") from None
    if unknown_languages and spec.language is not None and spec.language in unknown_languages:
        raise unknown_languages[spec.language]
    if path_id is not None and not 1 <= len(path_id) <= 512:
        raise InvalidInput("id", f"must be 1 to 512 characters, not {len(path_id)}")
    if path_id is not None and spec.id not in (None, path_id):
        raise InvalidInput("id", f"'{spec.id}' differs from the id in the path '{path_id}'")
    external_id = path_id or spec.id
    if external_id is None:
        raise InvalidInput("id", "is required")
    if spec.text is not None and spec.content is not None:
        raise InvalidInput("text", "give either text or content, not both")
    text = spec.text if spec.text is not None else spec.content
    if text is None or not text.strip():
        raise InvalidInput("text", "is empty")
    data = text.encode()
    if len(data) > settings.max_document_bytes:
        raise InvalidInput(
            "text", f"is {len(data)} bytes, over the {settings.max_document_bytes}-byte limit"
        )
    parsed = [p for p in formats.parse(data, spec.format, name=external_id)]
    assert len(parsed) == 1 and isinstance(parsed[0], formats.ParsedDocument)
    document = NewDocument(
        external_id=external_id,
        title=spec.title or parsed[0].title,
        sections=parsed[0].sections,
        metadata=spec.metadata,
        source=spec.source,
        language=spec.language,
    )
    store.check_storable(document)
    return document


async def _unknown_languages(
    ingestor: Ingestor, raw_documents: Sequence[object]
) -> dict[str, InvalidInput]:
    """Why each `language` the documents name that PostgreSQL does not know is refused, asked
    before any is written: the write itself would refuse the whole batch."""
    names = {
        raw["language"]
        for raw in raw_documents
        if isinstance(raw, dict) and isinstance(raw.get("language"), str)
    }
    if not names:
        return {}
    async with ingestor.pool.connection() as conn:
        return await store.unknown_languages(conn, names)


def _validate_batch(
    raw_documents: list[object],
    settings: Settings,
    batch: bool,
    unknown_languages: Mapping[str, InvalidInput],
) -> tuple[list[NewDocument], list[Rejection], list[tuple[str, str]]]:
    """The valid documents, why each other one was rejected (a lone document raises), and
    the field of each rejection with its reason (`documents[1].language`)."""
    documents: list[NewDocument] = []
    rejected: list[Rejection] = []
    fields: list[tuple[str, str]] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_documents):
        raw_id = raw.get("id") if isinstance(raw, dict) else None
        try:
            document = to_document(raw, settings, unknown_languages=unknown_languages)
            if document.external_id in seen:
                raise InvalidInput("id", "appears twice in this batch")
        except CariError as exc:
            if not batch:
                raise
            rejected.append(Rejection(index, str(raw_id) if raw_id else None, exc.message))
            where = f"documents[{index}]"
            if isinstance(exc, InvalidInput) and exc.field != "document":
                fields.append((f"{where}.{exc.field}", exc.reason))
            else:
                fields.append((where, exc.message))
            continue
        seen.add(document.external_id)
        documents.append(document)
    return documents, rejected, fields


def _id(request: Request[Any, Any, Any], routed: Path) -> str:
    """The document id, exactly as sent (it may hold '/': files from folders do)."""
    return path_id(request, routed, "documents")


async def _as_tenant(
    request: Request[Any, Any, Any],
    ingestor: Ingestor,
    collection: str,
    documents: list[NewDocument],
) -> list[NewDocument]:
    """The documents as the request's key may write them: a key with a filter stamps the
    filter's values on each (a differing value of the document's own is refused), and may not
    replace a document its filter hides: that id is taken, 409 (`store.taken`), said here
    before anything is embedded; the write itself holds it too (`store.write_documents`)."""
    access = access_of(request)
    if access.filter is None:
        return documents
    stamped = [dataclasses.replace(d, metadata=keys.stamp(access, d.metadata)) for d in documents]
    async with ingestor.pool.connection() as conn:
        ref = await store.collection_ref(conn, collection)
        visible = compile_documents(None, "metadata")
        hidden = await store.hidden_documents(conn, ref, [d.external_id for d in stamped], visible)
    if hidden:
        raise store.taken(collection, hidden[0])
    return stamped


def _response(result: BatchResult, rejected: list[Rejection]) -> IngestResponse:
    return IngestResponse(
        results=[DocumentResult(o.id, o.status, o.chunks, o.embedded) for o in result.outcomes],
        rejected=rejected,
        warnings=result.warnings,
    )


class DocumentsController(Controller):
    path = "/collections/{collection:str}/documents"
    tags = ["documents"]  # noqa: RUF012 (Litestar reads this class attribute)

    @post(
        "/",
        summary="Add documents",
        description=(
            'Body: one document, or {"documents": [...]} for a batch. Each document has '
            "`id`, `text` (or `content`), optional `title`, `format` (text, markdown, html), "
            "`metadata` (an object) and `source`. Valid documents are stored even when others "
            "in the batch are rejected; `rejected` lists those with the reason. Unchanged "
            "content is not re-processed."
        ),
        status_code=200,
        operation_id="addDocuments",
        opt=requires("documents:write"),
        responses=responses(400, 404, 409, 413, 422, 503),
        operation_class=V1Operation,
        guards=[whole_collection],
    )
    async def add(
        self,
        request: Request[Any, Any, Any],
        state: AppState,
        collection: CollectionName,
        data: OneOrBatch,
    ) -> IngestResponse:
        settings: Settings = state.settings
        batch = "documents" in data and isinstance(data["documents"], list)
        raw_documents: list[object] = data["documents"] if batch else [data]
        if batch and len(data) > 1:
            unknown = sorted(set(data) - {"documents"})[0]
            raise InvalidInput(unknown, "is not a known field of a batch")
        if not raw_documents:
            raise InvalidInput("documents", "is empty")
        if len(raw_documents) > settings.max_batch_documents:
            raise InvalidInput(
                "documents",
                f"{len(raw_documents)} documents, over the limit of "
                f"{settings.max_batch_documents} per request",
            )
        ingestor: Ingestor = state.runtime.ingestor
        refused = await _unknown_languages(ingestor, raw_documents)
        # Parsing large HTML or Markdown is CPU work: keep it off the event loop.
        documents, rejected, fields = await anyio.to_thread.run_sync(
            _validate_batch, raw_documents, settings, batch, refused
        )
        if not documents:
            raise InvalidInput(
                "documents",
                "every document was rejected: "
                + "; ".join(f"[{r.index}] {r.reason}" for r in rejected),
                errors=fields,
            )
        documents = await _as_tenant(request, ingestor, collection, documents)
        budget = settings.write_embedding_budget_s
        result = await ingestor.ingest(
            collection,
            documents,
            embedding_budget_s=budget,
            visible=compile_documents(None, "metadata"),
        )
        return _response(result, rejected)

    @put(
        "/{document_id:path}",
        summary="Create or replace a document by id",
        operation_id="putDocument",
        opt=requires("documents:write"),
        responses=responses(400, 404, 409, 413, 422, 503),
        operation_class=V1Operation,
    )
    async def upsert(
        self,
        request: Request[Any, Any, Any],
        state: AppState,
        collection: CollectionName,
        document_id: DocumentId,
        data: OneDocument,
    ) -> IngestResponse:
        ingestor: Ingestor = state.runtime.ingestor
        refused = await _unknown_languages(ingestor, [data])
        document = await anyio.to_thread.run_sync(
            partial(
                to_document,
                data,
                state.settings,
                path_id=_id(request, document_id),
                unknown_languages=refused,
            )
        )
        [document] = await _as_tenant(request, ingestor, collection, [document])
        budget = state.settings.write_embedding_budget_s
        return _response(
            await ingestor.ingest(
                collection,
                [document],
                embedding_budget_s=budget,
                visible=compile_documents(None, "metadata"),
            ),
            [],
        )

    @get(
        "/",
        summary="List documents",
        description=(
            "Documents in id order, without their chunks, a page at a time: pass the "
            "response's `next_cursor` as `cursor` for the next page (null on the last). "
            "`source` keeps one source; `metadata` is a JSON object in the grammar of search "
            'filters: {"lang": "id", "brand": {"in": ["honda"]}, "year": {"gte": 2020}}.'
        ),
        operation_id="listDocuments",
        opt=requires("documents:read"),
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
        guards=[whole_collection],
    )
    async def list(
        self,
        conn: Conn,
        collection: CollectionName,
        limit: Annotated[int, Parameter(ge=1, le=limits.MAX_PAGE_LIMIT)] = limits.PAGE_LIMIT,
        cursor: Annotated[str | None, Parameter(max_length=1024)] = None,
        source: Annotated[str | None, Parameter(max_length=4096)] = None,
        metadata: Annotated[
            str | None,
            Parameter(max_length=65536, examples=[Example(value='{"year": {"gte": 2020}}')]),
        ] = None,
    ) -> DocumentPage:
        after = _after(cursor)
        fragment, params = compile_documents(_metadata_filter(metadata), "metadata")
        limits.refuse_nul("source", source)
        ref = await store.collection_ref(conn, collection)
        rows = await store.list_documents(
            conn,
            ref,
            after=after,
            limit=limit + 1,  # one more: is there a next page?
            source=source,
            metadata=fragment,
            metadata_params=params,
        )
        page = [msgspec.convert(row, DocumentSummary) for row in rows[:limit]]
        more = len(rows) > limit
        return DocumentPage(page, _cursor(page[-1].id) if more else None)

    @get(
        "/{document_id:path}",
        summary="A document with its chunks",
        operation_id="getDocument",
        opt=requires("documents:read"),
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
    )
    async def read(
        self,
        request: Request[Any, Any, Any],
        conn: Conn,
        collection: CollectionName,
        document_id: DocumentId,
    ) -> Document:
        visible = compile_documents(None, "metadata")
        return await stored.read(conn, collection, _id(request, document_id), visible)

    @delete(
        "/{document_id:path}",
        summary="Delete a document and its chunks",
        operation_id="deleteDocument",
        opt=requires("documents:write"),
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
    )
    async def remove(
        self,
        request: Request[Any, Any, Any],
        conn: Conn,
        collection: CollectionName,
        document_id: DocumentId,
    ) -> None:
        ref = await store.collection_ref(conn, collection)
        visible = compile_documents(None, "metadata")
        await store.delete_document(conn, ref, _id(request, document_id), visible)

    @delete(
        "/",
        summary="Delete every document of the collection",
        status_code=200,
        operation_id="clearDocuments",
        opt=requires("documents:write", beyond_filter=True),
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
        guards=[whole_collection],  # `…/documents/%2F` is routed here: it names a document
    )
    async def clear(self, conn: Conn, collection: CollectionName) -> Deleted:
        ref = await store.collection_ref(conn, collection)
        return Deleted(await store.clear_documents(conn, ref))
