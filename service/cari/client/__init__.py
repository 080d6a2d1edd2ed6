"""A typed Python client of Cari's HTTP API, blocking (`Client`) and async (`AsyncClient`).

    from cari.client import Client, SearchRequest

    with Client("http://localhost:8000", api_key="…") as cari:
        found = cari.search_collection("faq", SearchRequest(query="cicilan civic", top_k=5))

Each method is one operation of the OpenAPI document, named after it (`searchCollection` →
`search_collection`). Requests and answers are the server's own structs, exported here; errors
are `cari.errors.ClientError` and its subclasses, from the problem-details bodies.
"""

from cari.answer.citations import Citation
from cari.answer.service import (
    AnswerRequest,
    AnswerResponse,
    Citations,
    Done,
    EventData,
    Failed,
    LLMChunk,
    Metadata,
    SearchComplete,
    Source,
)
from cari.api.answer import Tool
from cari.api.catalog import CatalogImport, RatesImport
from cari.api.documents import Deleted, DocumentIn, DocumentSummary, IngestResponse
from cari.api.health import Health, Readiness
from cari.catalog.store import CatalogItem, CatalogItemIn, FinancingRate, FinancingRateIn
from cari.client._async.client import AsyncClient
from cari.client._sync.client import Client
from cari.client.routes import Retries
from cari.collection import Collection, CollectionCreate, CollectionUpdate
from cari.errors import (
    APIError,
    BadRequestError,
    ClientError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    TransportError,
    UnauthorizedError,
    UnavailableError,
)
from cari.ingest.stored import Document
from cari.search.engine import SearchRequest, SearchResponse, SearchResult
from cari.synonyms import Synonyms

__all__ = [
    "APIError",
    "AnswerRequest",
    "AnswerResponse",
    "AsyncClient",
    "BadRequestError",
    "CatalogImport",
    "CatalogItem",
    "CatalogItemIn",
    "Citation",
    "Citations",
    "Client",
    "ClientError",
    "Collection",
    "CollectionCreate",
    "CollectionUpdate",
    "ConflictError",
    "Deleted",
    "Document",
    "DocumentIn",
    "DocumentSummary",
    "Done",
    "EventData",
    "Failed",
    "FinancingRate",
    "FinancingRateIn",
    "Health",
    "IngestResponse",
    "InvalidInputError",
    "LLMChunk",
    "Metadata",
    "NotFoundError",
    "RatesImport",
    "Readiness",
    "Retries",
    "SearchComplete",
    "SearchRequest",
    "SearchResponse",
    "SearchResult",
    "Source",
    "Synonyms",
    "Tool",
    "TransportError",
    "UnauthorizedError",
    "UnavailableError",
]
