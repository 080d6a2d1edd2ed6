"""A typed Python client of Cari's HTTP API, blocking (`Client`) and async (`AsyncClient`).

    from cari.client import Client, SearchRequest

    with Client("http://localhost:8000", api_key="…") as cari:
        found = cari.search_collection("faq", SearchRequest(query="cicilan civic", top_k=5))

Each method is one operation of the OpenAPI document, named after it (`searchCollection` →
`search_collection`). Requests and answers are the server's own structs, exported here; errors
are `cari.errors.ClientError` and its subclasses, from the problem-details bodies.
"""

from cari.client._async.client import AsyncClient
from cari.client._sync.client import Client
from cari.client.routes import Retries
from cari.errors import (
    APIError,
    BadRequestError,
    ClientError,
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    TransportError,
    UnauthorizedError,
    UnavailableError,
)
from cari.schema.answer import (
    AnswerRequest,
    AnswerResponse,
    Citation,
    Citations,
    Done,
    EventData,
    Failed,
    LLMChunk,
    Metadata,
    NumberedSource,
    SearchComplete,
)
from cari.schema.catalog import (
    CatalogImport,
    CatalogItem,
    CatalogItemIn,
    FinancingRate,
    FinancingRateIn,
    RatesImport,
)
from cari.schema.collections import Collection, CollectionCreate, CollectionUpdate, Synonyms
from cari.schema.documents import Deleted, Document, DocumentIn, DocumentSummary, IngestResponse
from cari.schema.evaluate import EvalQuestion, EvalReport, EvalRequest
from cari.schema.health import Health, Readiness
from cari.schema.keys import Key, KeyAccess, KeyCreate, KeyCreated
from cari.schema.search import SearchRequest, SearchResponse, SearchResult
from cari.schema.tool import Tool
from cari.schema.tune import (
    EfSearchTuneRequest,
    EfSearchTuning,
    FusionConfig,
    FusionTuneRequest,
    FusionTuning,
)

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
    "EfSearchTuneRequest",
    "EfSearchTuning",
    "EvalQuestion",
    "EvalReport",
    "EvalRequest",
    "EventData",
    "Failed",
    "FinancingRate",
    "FinancingRateIn",
    "ForbiddenError",
    "FusionConfig",
    "FusionTuneRequest",
    "FusionTuning",
    "Health",
    "IngestResponse",
    "InvalidInputError",
    "Key",
    "KeyAccess",
    "KeyCreate",
    "KeyCreated",
    "LLMChunk",
    "Metadata",
    "NotFoundError",
    "NumberedSource",
    "RatesImport",
    "Readiness",
    "Retries",
    "SearchComplete",
    "SearchRequest",
    "SearchResponse",
    "SearchResult",
    "Synonyms",
    "Tool",
    "TransportError",
    "UnauthorizedError",
    "UnavailableError",
]
