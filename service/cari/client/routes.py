"""Every operation of Cari's HTTP API as the client sends it — method, path, body and answer
types, named by its OpenAPI `operationId` — and what a response means: the answer decoded, a
problem raised as its error type, or a wait before another try. The sync and async clients
share all of it and only do the I/O.

The bodies and answers are the server's own structs, so client and server decode the same
shapes; tests/test_client_schema.py checks this table against the OpenAPI document.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from cari.errors import (
    APIError,
    BadRequestError,
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    UnauthorizedError,
    UnavailableError,
)
from cari.remote import backoff, retry_after
from cari.schema.answer import AnswerRequest, AnswerResponse
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
    DocumentPage,
    IngestResponse,
)
from cari.schema.evaluate import EvalReport, EvalRequest
from cari.schema.health import Health, Readiness
from cari.schema.keys import Key, KeyAccess, KeyCreate, KeyCreated
from cari.schema.search import SearchRequest, SearchResponse
from cari.schema.tool import Tool
from cari.schema.tune import EfSearchTuneRequest, EfSearchTuning, FusionTuneRequest, FusionTuning

T = TypeVar("T")

# Prices and rates are Decimals: sent as JSON numbers, as the API documents them.
_encoder = msgspec.json.Encoder(decimal_format="number")


@dataclass(frozen=True)
class Route(Generic[T]):
    """One operation: `answer` is what a success decodes to (None: no body); `body` the type
    the client sends (None: no body); `query` its query parameters."""

    operation: str
    method: str
    path: str
    answer: Any
    body: Any = None
    query: tuple[str, ...] = ()
    # Statuses besides 2xx whose body is the answer (readiness answers 503 when not ready).
    also: frozenset[int] = frozenset()

    def call(
        self,
        body: object = None,
        *,
        params: Mapping[str, str | int | None] | None = None,
        headers: Mapping[str, str] | None = None,
        **path: str,
    ) -> Call[T]:
        return Call(
            route=self,
            url=self.path.format(**{name: _segment(value) for name, value in path.items()}),
            params={k: v for k, v in (params or {}).items() if v is not None},
            content=None if body is None else _encoder.encode(body),
            headers={
                **({"content-type": "application/json"} if body is not None else {}),
                **(headers or {}),
            },
        )


def _segment(value: str) -> str:
    # Every reserved character escaped, '/' too, so the server reads a document id or SKU
    # exactly (`x/` stays `x/`); and '.', so that no URL library resolves an id of '..' to the
    # collection's own URL.
    return quote(value, safe="").replace(".", "%2E")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request, ready to send."""

    route: Route[T]
    url: str
    params: dict[str, str | int]
    content: bytes | None
    headers: dict[str, str] = field(default_factory=dict)

    def decode(self, response: httpx.Response) -> T:
        """The answer, or the problem raised as its error type."""
        if response.is_error and response.status_code not in self.route.also:
            raise problem(response)
        if self.route.answer is None:
            return None  # type: ignore[return-value]  # a Route[None]
        return msgspec.json.decode(response.content, type=self.route.answer)  # type: ignore[no-any-return]


# -- the operations, by operationId ---------------------------------------------------------

COLLECTIONS = "/v1/collections"
COLLECTION = COLLECTIONS + "/{collection}"
DOCUMENTS = COLLECTION + "/documents"
CATALOG = COLLECTION + "/catalog"
RATES = COLLECTION + "/financing-rates"

GET_HEALTH: Route[Health] = Route("getHealth", "GET", "/healthz", Health)
GET_READINESS: Route[Readiness] = Route(
    "getReadiness", "GET", "/readyz", Readiness, also=frozenset({503})
)
CREATE_COLLECTION: Route[Collection] = Route(
    "createCollection", "POST", COLLECTIONS, Collection, CollectionCreate
)
LIST_COLLECTIONS: Route[list[Collection]] = Route(
    "listCollections", "GET", COLLECTIONS, list[Collection]
)
GET_COLLECTION: Route[Collection] = Route("getCollection", "GET", COLLECTION, Collection)
UPDATE_COLLECTION: Route[Collection] = Route(
    "updateCollection", "PATCH", COLLECTION, Collection, CollectionUpdate
)
DELETE_COLLECTION: Route[None] = Route("deleteCollection", "DELETE", COLLECTION, None)
GET_SYNONYMS: Route[Synonyms] = Route("getSynonyms", "GET", COLLECTION + "/synonyms", Synonyms)
PUT_SYNONYMS: Route[Synonyms] = Route(
    "putSynonyms", "PUT", COLLECTION + "/synonyms", Synonyms, Synonyms
)
ADD_DOCUMENTS: Route[IngestResponse] = Route(
    "addDocuments", "POST", DOCUMENTS, IngestResponse, DocumentBatch
)
PUT_DOCUMENT: Route[IngestResponse] = Route(
    "putDocument", "PUT", DOCUMENTS + "/{document_id}", IngestResponse, DocumentIn
)
LIST_DOCUMENTS: Route[DocumentPage] = Route(
    "listDocuments",
    "GET",
    DOCUMENTS,
    DocumentPage,
    query=("limit", "cursor", "source", "metadata"),
)
GET_DOCUMENT: Route[Document] = Route("getDocument", "GET", DOCUMENTS + "/{document_id}", Document)
DELETE_DOCUMENT: Route[None] = Route("deleteDocument", "DELETE", DOCUMENTS + "/{document_id}", None)
CLEAR_DOCUMENTS: Route[Deleted] = Route("clearDocuments", "DELETE", DOCUMENTS, Deleted)
ADD_CATALOG_ITEMS: Route[CatalogImport] = Route(
    "addCatalogItems", "POST", CATALOG, CatalogImport, list[CatalogItemIn]
)
LIST_CATALOG_ITEMS: Route[list[CatalogItem]] = Route(
    "listCatalogItems", "GET", CATALOG, list[CatalogItem], query=("limit", "offset")
)
GET_CATALOG_ITEM: Route[CatalogItem] = Route(
    "getCatalogItem", "GET", CATALOG + "/{sku}", CatalogItem
)
DELETE_CATALOG_ITEM: Route[None] = Route("deleteCatalogItem", "DELETE", CATALOG + "/{sku}", None)
CLEAR_CATALOG: Route[Deleted] = Route("clearCatalog", "DELETE", CATALOG, Deleted)
ADD_FINANCING_RATES: Route[RatesImport] = Route(
    "addFinancingRates", "POST", RATES, RatesImport, list[FinancingRateIn]
)
LIST_FINANCING_RATES: Route[list[FinancingRate]] = Route(
    "listFinancingRates", "GET", RATES, list[FinancingRate]
)
CLEAR_FINANCING_RATES: Route[Deleted] = Route("clearFinancingRates", "DELETE", RATES, Deleted)
SEARCH_COLLECTION: Route[SearchResponse] = Route(
    "searchCollection",
    "POST",
    COLLECTION + "/search",
    SearchResponse,
    SearchRequest,
)
ANSWER_QUESTION: Route[AnswerResponse] = Route(
    "answerQuestion", "POST", COLLECTION + "/answer", AnswerResponse, AnswerRequest
)
GET_SEARCH_TOOL: Route[Tool] = Route("getSearchTool", "GET", COLLECTION + "/tool", Tool)
EVALUATE_COLLECTION: Route[EvalReport] = Route(
    "evaluateCollection", "POST", COLLECTION + "/eval", EvalReport, EvalRequest
)
TUNE_EF_SEARCH: Route[EfSearchTuning] = Route(
    "tuneEfSearch", "POST", COLLECTION + "/tune/ef-search", EfSearchTuning, EfSearchTuneRequest
)
TUNE_FUSION: Route[FusionTuning] = Route(
    "tuneFusion", "POST", COLLECTION + "/tune/fusion", FusionTuning, FusionTuneRequest
)
KEYS = "/v1/keys"
CREATE_KEY: Route[KeyCreated] = Route("createKey", "POST", KEYS, KeyCreated, KeyCreate)
LIST_KEYS: Route[list[Key]] = Route("listKeys", "GET", KEYS, list[Key])
GET_KEY: Route[Key] = Route("getKey", "GET", KEYS + "/{key_id}", Key)
REVOKE_KEY: Route[Key] = Route("revokeKey", "DELETE", KEYS + "/{key_id}", Key)
GET_ACCESS: Route[KeyAccess] = Route("getAccess", "GET", "/v1/access", KeyAccess)

ROUTES: list[Route[Any]] = [value for value in list(globals().values()) if isinstance(value, Route)]


# -- documents in batches -------------------------------------------------------------------


def batches(documents: Iterable[DocumentIn], size: int) -> Iterator[list[DocumentIn]]:
    batch: list[DocumentIn] = []
    for document in documents:
        batch.append(document)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def merge(responses: list[tuple[int, IngestResponse]]) -> IngestResponse:
    """One answer for a load sent in batches (each with the index of its first document):
    a rejection's `index` counts from the first document of the whole load."""
    merged = IngestResponse(results=[], rejected=[], warnings=[])
    for offset, response in responses:
        merged.results.extend(response.results)
        merged.rejected.extend(
            msgspec.structs.replace(r, index=r.index + offset) for r in response.rejected
        )
        merged.warnings.extend(w for w in response.warnings if w not in merged.warnings)
    return merged


def metadata_param(metadata: Mapping[str, Any] | None) -> str | None:
    """The `metadata` filter of a document listing: a JSON object in a query parameter."""
    return None if metadata is None else json.dumps(metadata)


# -- errors and retries ---------------------------------------------------------------------

_ERRORS: Mapping[int, type[APIError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: BadRequestError,
    422: InvalidInputError,
    503: UnavailableError,
}


class _Problem(msgspec.Struct):
    """The fields of a problem (RFC 9457) the errors carry; a body from something other than
    Cari (a proxy) may have none of them."""

    code: str = "error"
    detail: str = ""
    errors: list[dict[str, Any]] = msgspec.field(default_factory=list)


def problem(response: httpx.Response) -> APIError:
    """The error a failed response means, from its problem-details body."""
    try:
        body = msgspec.json.decode(response.content, type=_Problem)
    except msgspec.DecodeError:  # not Cari's problem JSON: keep what it said
        body = _Problem(detail=" ".join(response.text.split())[:300] or response.reason_phrase)
    error = _ERRORS.get(response.status_code, APIError)
    return error(
        response.status_code,
        body.code,
        body.detail,
        errors=body.errors,
        retry_after=retry_after(response.headers),
    )


@dataclass(frozen=True)
class Retries:
    """How a client retries a call Cari answered 429 or 503 (writes are safe to repeat:
    documents, items and rates are upserts): up to `max_retries` more times, after the
    `Retry-After` the answer gave (up to `cap_s`), else after an exponential backoff with
    jitter. A statement timeout is not retried: the statement would run as long again."""

    max_retries: int = 3
    base_s: float = 0.5
    cap_s: float = 30.0

    def wait(self, response: httpx.Response, attempt: int) -> float | None:
        """Seconds to wait before trying again, or None: the response is the answer."""
        if response.status_code not in (429, 503) or attempt >= self.max_retries:
            return None
        if problem(response).code == "statement_timeout":
            return None
        return backoff(attempt, self.base_s, self.cap_s, retry_after(response.headers))
