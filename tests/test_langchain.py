"""The LangChain retriever against a real `cari serve`: LangChain's own standard test suite for
retrievers (langchain-tests), and what each returned Document carries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests

from cari.client import Client, CollectionCreate, DocumentIn
from cari.langchain import CariRetriever

pytestmark = pytest.mark.anyio  # the suite's async test runs under anyio, as the others do

COLLECTION = "garage"
TEXTS = {
    "tires/rotation": "Rotate the tires every ten thousand kilometres.",
    "tires/pressure": "Check the tire pressure every month when the tires are cold.",
    "tires/tread": "Replace tires whose tread is worn below two millimetres.",
    "tires/winter": "Winter tires grip better on snow than summer tires.",
    "oil": "Change the engine oil every six months.",
}


@pytest.fixture(scope="module")
def seeded(base_url: str) -> str:
    """The server with a collection of documents about tires."""
    with Client(base_url) as cari:
        cari.create_collection(CollectionCreate(name=COLLECTION, language="english"))
        documents = [
            # A result's source is its document's, as in an answer's citations.
            DocumentIn(
                id=id, title=id.split("/")[-1], text=text, source="manual", metadata={"v": 1}
            )
            for id, text in TEXTS.items()
        ]
        assert not cari.add_documents(COLLECTION, documents).rejected
    return base_url


class TestCariRetriever(RetrieversIntegrationTests):
    url = ""

    @pytest.fixture(autouse=True)
    def _serve(self, seeded: str) -> Iterator[None]:
        self.url = seeded
        yield

    @property
    def retriever_constructor(self) -> type[CariRetriever]:
        return CariRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        # Keyword search: the fake embedder's vectors carry no meaning to rank by.
        return {"base_url": self.url, "collection": COLLECTION, "mode": "keyword", "k": 2}

    @property
    def retriever_query_example(self) -> str:
        return "tires"


def test_documents_carry_the_result(seeded: str) -> None:
    retriever = CariRetriever(base_url=seeded, collection=COLLECTION, mode="keyword")
    (document,) = retriever.invoke("engine oil", k=1)
    assert isinstance(document, Document)
    assert document.page_content == TEXTS["oil"]
    assert document.id is not None and document.id.startswith("chunk:")
    metadata = document.metadata
    assert (metadata["document_id"], metadata["title"], metadata["kind"]) == ("oil", "oil", "chunk")
    assert metadata["chunk_id"] == int(document.id.removeprefix("chunk:"))
    assert metadata["source"] == "manual" and metadata["id"] == document.id
    assert metadata["score"] > 0 and 0 < metadata["relevance"] <= 1
    assert metadata["metadata"] == {"v": 1}
    assert "<mark>" in metadata["highlight"]


async def test_filters_and_async_invoke(seeded: str) -> None:
    retriever = CariRetriever(
        base_url=seeded,
        collection=COLLECTION,
        mode="keyword",
        filters={"document_ids": ["tires/winter"]},
    )
    found = await retriever.ainvoke("tires")
    assert [d.metadata["document_id"] for d in found] == ["tires/winter"]
    every = await retriever.ainvoke("tires", filters={}, k=4)
    assert len(every) == 4
