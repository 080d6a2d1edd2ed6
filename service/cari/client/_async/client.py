"""The client of Cari's HTTP API. `_async/client.py` is the source of both clients:
`scripts/sync_client.py` writes the blocking one, `_sync/client.py`, from it (a test checks that
it is current: edit the async one). Each method is one OpenAPI operation (`createCollection` →
`create_collection`), sending and answering the server's own structs (`cari.client.routes`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import httpx
import msgspec
from httpx_sse import EventSource

from cari.client import events, routes
from cari.client.routes import Call, Retries
from cari.errors import TransportError
from cari.schema import consistency
from cari.schema.answer import AnswerRequest, AnswerResponse, EventData
from cari.schema.catalog import (
    CatalogImport,
    CatalogItem,
    CatalogItemIn,
    FinancingRate,
    FinancingRateIn,
    RatesImport,
)
from cari.schema.collections import Collection, CollectionCreate, CollectionUpdate, Synonyms
from cari.schema.documents import (
    Deleted,
    Document,
    DocumentBatch,
    DocumentIn,
    DocumentSummary,
    IngestResponse,
)
from cari.schema.evaluate import EvalReport, EvalRequest
from cari.schema.health import Health, Readiness
from cari.schema.keys import Key, KeyAccess, KeyCreate, KeyCreated
from cari.schema.search import SearchRequest, SearchResponse
from cari.schema.tool import Tool
from cari.schema.tune import EfSearchTuneRequest, EfSearchTuning, FusionTuneRequest, FusionTuning

T = TypeVar("T")
STREAM = {"accept": "text/event-stream"}


class AsyncClient:
    """`base_url` of a Cari server; `api_key` when it requires one; `timeout` in seconds per
    request; calls Cari answers 429 or 503 are retried as `retries` says.

    With `read_your_writes` (the default) every read sees this client's earlier writes, also
    when the server reads from replicas: the client keeps the newest consistency token its
    writes were answered with (`consistency_token`) and sends it with each request."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        retries: Retries = Retries(),  # noqa: B008 (frozen)
        read_your_writes: bool = True,
    ) -> None:
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout)
        self.retries = retries
        self.read_your_writes = read_your_writes
        self.consistency_token: str | None = None

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- probes ---------------------------------------------------------------------------

    async def get_health(self) -> Health:
        return await self._send(routes.GET_HEALTH.call())

    async def get_readiness(self) -> Readiness:
        """Ready, or why not (a 503 is an answer here, not an error)."""
        return await self._send(routes.GET_READINESS.call())

    # -- collections ----------------------------------------------------------------------

    async def create_collection(self, collection: CollectionCreate) -> Collection:
        return await self._send(routes.CREATE_COLLECTION.call(collection))

    async def list_collections(self) -> list[Collection]:
        return await self._send(routes.LIST_COLLECTIONS.call())

    async def get_collection(self, collection: str) -> Collection:
        return await self._send(routes.GET_COLLECTION.call(collection=collection))

    async def update_collection(self, collection: str, update: CollectionUpdate) -> Collection:
        return await self._send(routes.UPDATE_COLLECTION.call(update, collection=collection))

    async def delete_collection(self, collection: str) -> None:
        await self._send(routes.DELETE_COLLECTION.call(collection=collection))

    async def get_synonyms(self, collection: str) -> Synonyms:
        return await self._send(routes.GET_SYNONYMS.call(collection=collection))

    async def put_synonyms(self, collection: str, synonyms: Synonyms) -> Synonyms:
        return await self._send(routes.PUT_SYNONYMS.call(synonyms, collection=collection))

    # -- documents ------------------------------------------------------------------------

    async def add_documents(
        self, collection: str, documents: Iterable[DocumentIn], *, batch_size: int = 100
    ) -> IngestResponse:
        """Sends the documents `batch_size` at a time (at most the server's
        CARI_MAX_BATCH_DOCUMENTS); a rejection's `index` counts from the first document."""
        answers: list[tuple[int, IngestResponse]] = []
        offset = 0
        for batch in routes.batches(documents, batch_size):
            call = routes.ADD_DOCUMENTS.call(DocumentBatch(batch), collection=collection)
            answers.append((offset, await self._send(call)))
            offset += len(batch)
        return routes.merge(answers)

    async def put_document(
        self, collection: str, document_id: str, document: DocumentIn
    ) -> IngestResponse:
        call = routes.PUT_DOCUMENT.call(document, collection=collection, document_id=document_id)
        return await self._send(call)

    async def list_documents(
        self,
        collection: str,
        *,
        source: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 100,
    ) -> AsyncIterator[DocumentSummary]:
        """Every document (filtered by `source` and a `metadata` filter), in id order, fetched
        `limit` at a time as the iteration goes."""
        cursor: str | None = None
        while True:
            params = {"limit": limit, "cursor": cursor, "source": source}
            params["metadata"] = routes.metadata_param(metadata)
            page = await self._send(
                routes.LIST_DOCUMENTS.call(params=params, collection=collection)
            )
            for document in page.documents:
                yield document
            if (cursor := page.next_cursor) is None:
                return

    async def get_document(self, collection: str, document_id: str) -> Document:
        call = routes.GET_DOCUMENT.call(collection=collection, document_id=document_id)
        return await self._send(call)

    async def delete_document(self, collection: str, document_id: str) -> None:
        await self._send(
            routes.DELETE_DOCUMENT.call(collection=collection, document_id=document_id)
        )

    async def clear_documents(self, collection: str) -> Deleted:
        return await self._send(routes.CLEAR_DOCUMENTS.call(collection=collection))

    # -- catalog and financing rates ------------------------------------------------------

    async def add_catalog_items(self, collection: str, items: list[CatalogItemIn]) -> CatalogImport:
        return await self._send(routes.ADD_CATALOG_ITEMS.call(items, collection=collection))

    async def list_catalog_items(
        self, collection: str, *, limit: int = 100, offset: int = 0
    ) -> list[CatalogItem]:
        params = {"limit": limit, "offset": offset}
        return await self._send(
            routes.LIST_CATALOG_ITEMS.call(params=params, collection=collection)
        )

    async def get_catalog_item(self, collection: str, sku: str) -> CatalogItem:
        return await self._send(routes.GET_CATALOG_ITEM.call(collection=collection, sku=sku))

    async def delete_catalog_item(self, collection: str, sku: str) -> None:
        await self._send(routes.DELETE_CATALOG_ITEM.call(collection=collection, sku=sku))

    async def clear_catalog(self, collection: str) -> Deleted:
        return await self._send(routes.CLEAR_CATALOG.call(collection=collection))

    async def add_financing_rates(
        self, collection: str, rates: list[FinancingRateIn]
    ) -> RatesImport:
        return await self._send(routes.ADD_FINANCING_RATES.call(rates, collection=collection))

    async def list_financing_rates(self, collection: str) -> list[FinancingRate]:
        return await self._send(routes.LIST_FINANCING_RATES.call(collection=collection))

    async def clear_financing_rates(self, collection: str) -> Deleted:
        return await self._send(routes.CLEAR_FINANCING_RATES.call(collection=collection))

    # -- search and answers ---------------------------------------------------------------

    async def search_collection(self, collection: str, request: SearchRequest) -> SearchResponse:
        return await self._send(routes.SEARCH_COLLECTION.call(request, collection=collection))

    async def answer_question(self, collection: str, request: AnswerRequest) -> AnswerResponse:
        whole = msgspec.structs.replace(request, stream=False)
        return await self._send(routes.ANSWER_QUESTION.call(whole, collection=collection))

    async def answer_question_stream(
        self, collection: str, request: AnswerRequest
    ) -> AsyncIterator[EventData]:
        """The answer as it is written: the events of `cari.answer.service`, in order."""
        call = routes.ANSWER_QUESTION.call(request, headers=STREAM, collection=collection)
        response = await self._response(call, stream=True)
        try:
            if response.is_error:
                raise routes.problem(response)
            async for sent in EventSource(response).aiter_sse():
                if (event := events.decode(sent)) is not None:
                    yield event
        finally:
            await response.aclose()

    async def get_search_tool(self, collection: str) -> Tool:
        return await self._send(routes.GET_SEARCH_TOOL.call(collection=collection))

    async def evaluate_collection(self, collection: str, request: EvalRequest) -> EvalReport:
        """The collection's ranking quality per mode on judged questions (`cari eval`)."""
        return await self._send(routes.EVALUATE_COLLECTION.call(request, collection=collection))

    async def tune_ef_search(self, collection: str, request: EfSearchTuneRequest) -> EfSearchTuning:
        """HNSW recall against the exact top k, and latency, per ef_search; `apply` stores the
        recommendation (`cari tune ef-search`)."""
        return await self._send(routes.TUNE_EF_SEARCH.call(request, collection=collection))

    async def tune_fusion(self, collection: str, request: FusionTuneRequest) -> FusionTuning:
        """The fusion that ranks judged questions best, its gain cross-validated; `apply`
        stores it when the gain is beyond the noise (`cari tune fusion`)."""
        return await self._send(routes.TUNE_FUSION.call(request, collection=collection))

    # -- API keys (a key allowed `keys:manage`; `get_access`: any key) ---------------------

    async def get_access(self) -> KeyAccess:
        """What the client's own key may do: its actions, collections and filter."""
        return await self._send(routes.GET_ACCESS.call())

    async def create_key(self, key: KeyCreate) -> KeyCreated:
        """The new key and its secret, shown this once."""
        return await self._send(routes.CREATE_KEY.call(key))

    async def list_keys(self) -> list[Key]:
        return await self._send(routes.LIST_KEYS.call())

    async def get_key(self, key_id: str) -> Key:
        return await self._send(routes.GET_KEY.call(key_id=key_id))

    async def revoke_key(self, key_id: str) -> Key:
        return await self._send(routes.REVOKE_KEY.call(key_id=key_id))

    # -- I/O ------------------------------------------------------------------------------

    def _remember(self, token: str | None) -> None:
        """Keep the newest token: WAL positions only grow, answers may arrive out of order."""
        if token is None:
            return
        newest = self.consistency_token
        if newest is None or consistency.parse_token(token) > consistency.parse_token(newest):
            self.consistency_token = token

    async def _send(self, call: Call[T]) -> T:
        response = await self._response(call)
        return call.decode(response)

    async def _response(self, call: Call[Any], *, stream: bool = False) -> httpx.Response:
        attempt = 0
        headers = call.headers
        if self.read_your_writes and self.consistency_token is not None:
            headers = {**headers, consistency.HEADER: self.consistency_token}
        while True:
            request = self._http.build_request(
                call.route.method,
                call.url,
                params=call.params,
                content=call.content,
                headers=headers,
            )
            try:
                response = await self._http.send(request, stream=stream)
                if response.is_error:
                    await response.aread()  # a problem: small, and what the error is made of
            except httpx.TransportError as exc:
                raise TransportError(f"{call.route.method} {request.url}: {exc!r}") from exc
            self._remember(response.headers.get(consistency.HEADER))
            wait = self.retries.wait(response, attempt)
            if wait is None:
                return response
            await response.aclose()
            await anyio.sleep(wait)
            attempt += 1
