"""A LangChain retriever over a Cari collection (`pip install 'cari[langchain]'`).

    from cari.langchain import CariRetriever

    retriever = CariRetriever(base_url="http://localhost:8000", collection="faq", k=5)
    documents = retriever.invoke("berapa cicilan honda civic?")

Each result becomes a `Document`: its text as `page_content`, its id (`chunk:12`,
`catalog:SKU`) as `id`, and in `metadata` the document id, chunk id, title, kind, fused score,
0-1 relevance and its band, highlight (a chunk's passage around the question's words, HTML
with the matches in <mark>), source and the stored metadata. Unset options take the
collection's defaults.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import SecretStr

from cari.client import AsyncClient, Client, SearchRequest, SearchResult
from cari.limits import Mode


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
    source = result.metadata.get("source")
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
