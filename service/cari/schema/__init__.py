"""The wire types: what Cari's HTTP API (and its MCP tools and SSE stream) sends and receives.

The server answers with these structs and `cari.client` decodes into them, so both read the
same shapes. They depend on msgspec, `cari.limits` and `cari.errors` only, never on the server's
code or its libraries (tests/test_structure.py holds this): importing a client loads no
database driver, web framework or model.

    search       SearchRequest, SearchResponse, SearchResult, Explain
    answer       AnswerRequest, AnswerResponse, Citation, the stream's events
    documents    DocumentIn, IngestResponse, Document, DocumentPage, ...
    catalog      CatalogItemIn, FinancingRateIn, CatalogItem, FinancingRate, ...
    collections  Collection, CollectionCreate, CollectionUpdate, Synonyms
    health       Health, Readiness, DamagedCollection
    tool         Tool (a collection's search as an OpenAI function)
    consistency  the consistency token's header and form
"""
