"""LangChain over a Cari collection (`pip install 'cari[langchain]'`): a retriever and a
vector store, both through Cari's HTTP API (`cari.client`).

    from cari.langchain import CariRetriever, CariVectorStore

    retriever = CariRetriever(base_url="http://localhost:8000", collection="faq", k=5)
    documents = retriever.invoke("berapa cicilan honda civic?")

    store = CariVectorStore("notes", base_url="http://localhost:8000")
    store.add_texts(["Ganti oli setiap 10.000 km."], ids=["oli"])
    store.similarity_search_with_score("kapan ganti oli?", k=1)

The retriever's results become `Document`s: the text as `page_content`, its id (`chunk:12`,
`catalog:SKU`) as `id`, and in `metadata` the document id, chunk id, title, kind, fused score,
0-1 relevance and its band, highlight (a chunk's passage around the question's words, HTML
with the matches in <mark>), source and the stored metadata. Unset options take the
collection's defaults.

The vector store keeps each LangChain `Document` as one Cari document (`CariVectorStore`).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import Any, Self

from pydantic import SecretStr

from cari.client import (
    AsyncClient,
    Client,
    CollectionCreate,
    ConflictError,
    DocumentIn,
    IngestResponse,
    NotFoundError,
    SearchRequest,
    SearchResult,
)
from cari.client import Document as StoredDocument
from cari.limits import Mode

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.vectorstores import VectorStore
except ModuleNotFoundError as missing:  # the extra is not installed
    if not (missing.name or "").startswith("langchain_core"):
        raise
    # Not `pip install 'cari[langchain]'`: that asks PyPI for a package named cari, which is
    # not this one.
    raise ImportError(
        "cari.langchain needs LangChain: pip install 'langchain-core>=1.0' (in Cari's checkout, "
        "pip install -e '.[langchain]')"
    ) from missing


class CariRetriever(BaseRetriever):
    """Searches `collection` on the Cari at `base_url`. `k` (results), `filters` and `mode` can
    also be given per call: `retriever.invoke(query, k=3)`. Each call opens its own HTTP client:
    a retriever has no close in LangChain, and an async client belongs to the event loop it
    first ran on, while one retriever may serve several."""

    base_url: str = "http://127.0.0.1:8000"
    api_key: SecretStr | None = None
    timeout: float = 60.0
    collection: str
    mode: Mode | None = None
    k: int | None = None
    filters: dict[str, Any] | None = None
    threshold: float | None = None

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        filters: dict[str, Any] | None = None,
        mode: Mode | None = None,
    ) -> list[Document]:
        with Client(self.base_url, api_key=self._key(), timeout=self.timeout) as cari:
            found = cari.search_collection(self.collection, self._request(query, k, filters, mode))
        return [_document(r) for r in found.results]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        filters: dict[str, Any] | None = None,
        mode: Mode | None = None,
    ) -> list[Document]:
        async with AsyncClient(self.base_url, api_key=self._key(), timeout=self.timeout) as cari:
            found = await cari.search_collection(
                self.collection, self._request(query, k, filters, mode)
            )
        return [_document(r) for r in found.results]

    def _key(self) -> str | None:
        return None if self.api_key is None else self.api_key.get_secret_value()

    def _request(
        self, query: str, k: int | None, filters: dict[str, Any] | None, mode: Mode | None
    ) -> SearchRequest:
        return SearchRequest(
            query=query,
            mode=mode if mode is not None else self.mode,
            top_k=k if k is not None else self.k,
            filters=filters if filters is not None else self.filters,
            threshold=self.threshold,
        )


def _document(result: SearchResult) -> Document:
    source = result.source if result.source is not None else result.metadata.get("source")
    return Document(
        id=result.id,
        page_content=result.content,
        metadata={
            "id": result.id,
            "kind": result.kind,
            "document_id": result.document_id,
            "chunk_id": result.chunk_id,
            "title": result.title,
            "score": result.score,
            "relevance": result.relevance,
            "band": result.band,
            "highlight": result.highlight,
            "source": None if source is None else str(source),
            "metadata": result.metadata,
        },
    )


# The search asks for this many chunks per result wanted, so that k documents come back when
# some have several chunks among the best (the API's top_k caps it).
_CHUNKS_PER_DOCUMENT = 3
_TOP_K_MAX = 50


class CariVectorStore(VectorStore):
    """The documents of the Cari collection `collection` on the server at `base_url`, added,
    deleted, fetched and searched through its HTTP API.

    Cari embeds, not LangChain: the server chunks each text and embeds it with the
    collection's embedder (`CARI_EMBEDDER`, or the collection's own `embedder`), and embeds each
    search's query the same way. So the store takes no `Embeddings` (`embeddings` is None) and
    searches are Cari's own: hybrid (`mode`), with no relevance threshold unless `threshold` is
    given, so `k` documents come back while the collection has them (`k` up to 16: a search
    reads at most the API's 50 chunks, 3 per document wanted).

    Each LangChain document is one Cari document: its id the document's (a new UUID when it has
    none; adding an id again replaces that document), `page_content` its text, `metadata` its
    metadata (JSON), and a string `metadata["source"]` also its source, which answers cite. A
    search returns each document found once, by its best chunk: `page_content` is that chunk's
    text, which is the whole text when it fits in one chunk (split long texts first, as LangChain
    recommends). `get_by_ids` returns the whole document, its chunks joined by blank lines.

    Adding to a store whose collection does not exist creates it, in `language` (Cari's
    collections are otherwise created explicitly: POST /v1/collections, `cari ingest --create`).

    Each call opens its own HTTP client (an async client belongs to its event loop) and passes
    on the consistency token of the last, so every call sees the store's earlier writes also
    when the server reads from replicas.
    """

    def __init__(
        self,
        collection: str,
        *,
        base_url: str = "http://127.0.0.1:8000",
        api_key: str | None = None,
        timeout: float = 60.0,
        mode: Mode | None = None,
        threshold: float = 0.0,
        language: str = "simple",
    ) -> None:
        self.collection = collection
        self.language = language  # of the collection, if adding to it creates it
        self.base_url = base_url
        self.api_key = api_key
        self.timeout = timeout
        self.mode = mode
        self.threshold = threshold
        self._token: str | None = None

    @property
    def embeddings(self) -> Embeddings | None:
        """None: Cari embeds on the server, with the collection's embedder."""
        return None

    # -- writes -----------------------------------------------------------------------------

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        documents = _documents_in(texts, metadatas, ids)
        with self._client() as cari:
            try:
                added = cari.add_documents(self.collection, documents)
            except NotFoundError:  # the first add to a new store: as `from_texts` does
                with contextlib.suppress(ConflictError):  # created meanwhile
                    cari.create_collection(self._new_collection())
                added = cari.add_documents(self.collection, documents)
        _check(added)
        return [str(d.id) for d in documents]

    async def aadd_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        documents = _documents_in(texts, metadatas, ids)
        async with self._aclient() as cari:
            try:
                added = await cari.add_documents(self.collection, documents)
            except NotFoundError:  # the first add to a new store: as `from_texts` does
                with contextlib.suppress(ConflictError):  # created meanwhile
                    await cari.create_collection(self._new_collection())
                added = await cari.add_documents(self.collection, documents)
        _check(added)
        return [str(d.id) for d in documents]

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Delete the documents `ids` (ids that are not there are no error); None: all."""
        with self._client() as cari:
            if ids is None:
                cari.clear_documents(self.collection)
            for document_id in ids or []:
                with contextlib.suppress(NotFoundError):
                    cari.delete_document(self.collection, document_id)
        return True

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Delete the documents `ids` (ids that are not there are no error); None: all."""
        async with self._aclient() as cari:
            if ids is None:
                await cari.clear_documents(self.collection)
            for document_id in ids or []:
                with contextlib.suppress(NotFoundError):
                    await cari.delete_document(self.collection, document_id)
        return True

    # -- reads ------------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        found: list[Document] = []
        with self._client() as cari:
            for document_id in dict.fromkeys(ids):
                with contextlib.suppress(NotFoundError):
                    found.append(_whole(cari.get_document(self.collection, document_id)))
        return found

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        found: list[Document] = []
        async with self._aclient() as cari:
            for document_id in dict.fromkeys(ids):
                with contextlib.suppress(NotFoundError):
                    found.append(_whole(await cari.get_document(self.collection, document_id)))
        return found

    def similarity_search(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        return [d for d, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    async def asimilarity_search(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        found = await self.asimilarity_search_with_score(query, k, filter, **kwargs)
        return [d for d, _ in found]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The `k` documents that best match `query`, best first, each with its relevance
        (0-1, absolute: Cari's `relevance`). `filter` is Cari's search filter:
        `{"metadata": {...}, "document_ids": [...]}` (docs/api.md)."""
        with self._client() as cari:
            found = cari.search_collection(self.collection, self._search(query, k, filter))
        return _best_per_document(found.results, k)

    async def asimilarity_search_with_score(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The `k` documents that best match `query`, best first, each with its relevance
        (0-1, absolute: Cari's `relevance`). `filter` is Cari's search filter:
        `{"metadata": {...}, "document_ids": [...]}` (docs/api.md)."""
        async with self._aclient() as cari:
            request = self._search(query, k, filter)
            found = await cari.search_collection(self.collection, request)
        return _best_per_document(found.results, k)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return lambda relevance: relevance  # already 0-1, higher is closer

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        collection: str = "langchain",
        language: str = "simple",
        **kwargs: Any,
    ) -> Self:
        """A store of `collection` (created with `language` if it does not exist) holding
        `texts`. `embedding` must be None: the server embeds, with the collection's embedder.
        The other keywords are the store's (`base_url`, `api_key`, `mode`, ...)."""
        if embedding is not None:
            raise ValueError(
                "Cari embeds texts on the server with the collection's embedder (CARI_EMBEDDER "
                "or the collection's `embedder`): pass embedding=None"
            )
        store = cls(collection, language=language, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    def _new_collection(self) -> CollectionCreate:
        return CollectionCreate(name=self.collection, language=self.language)

    # -- I/O --------------------------------------------------------------------------------

    def _search(self, query: str, k: int, filters: dict[str, Any] | None) -> SearchRequest:
        return SearchRequest(
            query=query,
            mode=self.mode,
            top_k=min(_TOP_K_MAX, k * _CHUNKS_PER_DOCUMENT),
            threshold=self.threshold,
            filters=filters,
            decompose=False,  # the query as given, not split into sub-questions
            structured=False,  # documents only, no catalog items or installments
        )

    @contextlib.contextmanager
    def _client(self) -> Iterator[Client]:
        with Client(self.base_url, api_key=self.api_key, timeout=self.timeout) as cari:
            cari.consistency_token = self._token
            try:
                yield cari
            finally:
                self._token = cari.consistency_token

    @contextlib.asynccontextmanager
    async def _aclient(self) -> AsyncIterator[AsyncClient]:
        async with AsyncClient(self.base_url, api_key=self.api_key, timeout=self.timeout) as cari:
            cari.consistency_token = self._token
            try:
                yield cari
            finally:
                self._token = cari.consistency_token


def _documents_in(
    texts: Iterable[str], metadatas: list[dict[str, Any]] | None, ids: Sequence[str | None] | None
) -> list[DocumentIn]:
    texts = list(texts)
    if metadatas is not None and len(metadatas) != len(texts):
        raise ValueError(f"{len(metadatas)} metadatas for {len(texts)} texts")
    if ids is not None and len(ids) != len(texts):
        raise ValueError(f"{len(ids)} ids for {len(texts)} texts")
    documents = []
    for i, text in enumerate(texts):
        metadata = dict(metadatas[i]) if metadatas is not None else {}
        source = metadata.get("source")
        documents.append(
            DocumentIn(
                id=(ids[i] if ids is not None else None) or str(uuid.uuid4()),
                text=text,
                metadata=metadata,
                source=source if isinstance(source, str) else None,
            )
        )
    return documents


def _check(added: IngestResponse) -> None:
    if added.rejected:
        refused = "; ".join(f"{r.id or r.index}: {r.reason}" for r in added.rejected)
        raise ValueError(f"Cari refused {len(added.rejected)} of the documents: {refused}")


def _best_per_document(results: list[SearchResult], k: int) -> list[tuple[Document, float]]:
    found: dict[str, tuple[Document, float]] = {}
    for result in results:
        if result.kind != "chunk" or result.document_id is None:
            continue
        if result.document_id not in found:
            document = Document(
                id=result.document_id, page_content=result.content, metadata=result.metadata
            )
            found[result.document_id] = (document, result.relevance)
        if len(found) == k:
            break
    return list(found.values())


def _whole(stored: StoredDocument) -> Document:
    text = "\n\n".join(c.content for c in sorted(stored.chunks, key=lambda c: c.ordinal))
    return Document(id=stored.id, page_content=text, metadata=stored.metadata)
