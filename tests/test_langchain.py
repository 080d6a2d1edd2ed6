"""The LangChain retriever and vector store against a real `cari serve`: LangChain's own standard
test suites for retrievers and vector stores (langchain-tests), what each returned Document
carries, and the message when the extra is missing."""

from __future__ import annotations

import contextlib
import itertools
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import (
    RetrieversIntegrationTests,
    VectorStoreIntegrationTests,
)

from cari.client import Client, CollectionCreate, DocumentIn, NotFoundError
from cari.langchain import CariRetriever, CariVectorStore

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


# -- the vector store -------------------------------------------------------------------------

_stores = itertools.count()


class TestCariVectorStore(VectorStoreIntegrationTests):
    """Every test of the standard suite applies (`has_sync`, `has_async` and `has_get_by_ids`
    keep their defaults). The suite's fake embeddings are not used: the server embeds (here
    through the test server's fake embedder). Its expected orders hold on Cari's hybrid search:
    the document whose text is the query matches it by keyword and by vector, the others by
    vector only, and no threshold cuts them."""

    @pytest.fixture
    def vectorstore(self, base_url: str) -> Iterator[CariVectorStore]:  # type: ignore[override]
        """An empty store: a collection of its own, deleted after the test."""
        name = f"lc_{next(_stores)}"
        with Client(base_url) as cari:
            cari.create_collection(CollectionCreate(name=name))
            yield CariVectorStore(name, base_url=base_url)
            cari.delete_collection(name)


@pytest.fixture
def store(base_url: str) -> Iterator[CariVectorStore]:
    """An empty store searching by keyword: the fake embedder's vectors carry no meaning to
    rank by."""
    name = f"lc_{next(_stores)}"
    with Client(base_url) as cari:
        cari.create_collection(CollectionCreate(name=name, language="english"))
        yield CariVectorStore(name, base_url=base_url, mode="keyword")
        cari.delete_collection(name)


def test_store_scores_and_retriever(store: CariVectorStore) -> None:
    ids = store.add_texts(
        list(TEXTS.values()), [{"n": i, "source": "manual"} for i in range(len(TEXTS))]
    )
    assert len(set(ids)) == len(TEXTS)  # one UUID each
    scored = store.similarity_search_with_score("engine oil", k=3)
    assert next(d.page_content for d, _ in scored) == TEXTS["oil"]
    assert all(0 <= relevance <= 1 for _, relevance in scored)
    assert [s for _, s in scored] == [
        s for _, s in store.similarity_search_with_relevance_scores("engine oil", k=3)
    ]
    # A string "source" in the metadata is also the document's source, which answers cite.
    with Client(store.base_url) as cari:
        assert cari.get_document(store.collection, ids[-1]).source == "manual"
    retriever = store.as_retriever(search_kwargs={"k": 2})
    assert next(d.id for d in retriever.invoke("engine oil")) == ids[-1]
    only = store.similarity_search("tires", k=5, filter={"metadata": {"n": 3}})
    assert [d.metadata["n"] for d in only] == [3]
    store.delete()  # None: every document
    assert store.similarity_search("tires", k=5) == []


def test_store_returns_a_long_document_once(store: CariVectorStore) -> None:
    """A text of several chunks is one document: found once, by its best chunk; fetched by id
    as its chunks."""
    long = "\n\n".join(f"Paragraph {i} is about the tires and their tread. " * 30 for i in range(4))
    store.add_texts([long, "Tires wear evenly when rotated."], ids=["long", "short"])
    with Client(store.base_url) as cari:
        assert len(cari.get_document(store.collection, "long").chunks) > 1
    found = store.similarity_search("tires tread", k=2)
    assert sorted(d.id for d in found if d.id is not None) == ["long", "short"]
    (whole,) = store.get_by_ids(["long"])
    assert "Paragraph 0" in whole.page_content and "Paragraph 3" in whole.page_content


def test_store_from_texts(base_url: str) -> None:
    name = f"lc_{next(_stores)}"
    with pytest.raises(ValueError, match="embedding=None"):
        CariVectorStore.from_texts(["a"], object(), collection=name, base_url=base_url)  # type: ignore[arg-type]
    store = CariVectorStore.from_texts(
        ["Rotate the tires.", "Change the oil."],
        None,
        [{"n": 1}, {"n": 2}],
        ids=["a", "b"],
        collection=name,
        base_url=base_url,
    )
    try:
        assert {d.id for d in store.get_by_ids(["a", "b", "c"])} == {"a", "b"}
        # Again into the same collection: it exists, the ids are replaced.
        CariVectorStore.from_texts(
            ["Rotate them."], None, ids=["a"], collection=name, base_url=base_url
        )
        (a,) = store.get_by_ids(["a"])
        assert (a.page_content, a.metadata) == ("Rotate them.", {})
        # Documents Cari refuses are named; the others are stored.
        with pytest.raises(ValueError, match=r"refused 1 of the documents: empty: text: is empty"):
            store.add_texts(["Check the oil.", ""], ids=["c", "empty"])
        assert [d.id for d in store.get_by_ids(["c", "empty"])] == ["c"]
    finally:
        with Client(base_url) as cari:
            cari.delete_collection(name)


def test_adding_to_a_new_store_creates_its_collection(base_url: str) -> None:
    """As docs/clients.md shows it: a store named, then texts added, sync or async."""
    names = [f"lc_{next(_stores)}", f"lc_{next(_stores)}"]
    try:
        store = CariVectorStore(names[0], base_url=base_url, language="english")
        assert store.add_texts(["Ganti oli setiap 10.000 km."], ids=["oli"]) == ["oli"]
        later = CariVectorStore(names[1], base_url=base_url)
        assert anyio.run(later.aadd_texts, ["Rotate the tires."]) != []
        with Client(base_url) as cari:
            assert cari.get_collection(names[0]).language == "english"
            assert cari.get_collection(names[1]).language == "simple"
        assert [d.id for d in store.get_by_ids(["oli"])] == ["oli"]
        # Added again: the collection exists, the document is replaced.
        assert store.add_texts(["Ganti oli setiap 5.000 km."], ids=["oli"]) == ["oli"]
        (oli,) = store.get_by_ids(["oli"])
        assert oli.page_content == "Ganti oli setiap 5.000 km."
    finally:
        with Client(base_url) as cari:
            for name in names:
                with contextlib.suppress(NotFoundError):
                    cari.delete_collection(name)


async def test_store_async(store: CariVectorStore) -> None:
    ids = await store.aadd_texts(["Rotate the tires.", "Change the oil."], [{"n": 1}, {"n": 2}])
    found = await store.asimilarity_search_with_score("Change the oil.", k=1)
    assert [(d.id, d.page_content, d.metadata) for d, _ in found] == [
        (ids[1], "Change the oil.", {"n": 2})
    ]
    assert await store.adelete([ids[1], "missing"])
    assert [d.id for d in await store.aget_by_ids(ids)] == [ids[0]]
    assert [d.id for d in await store.as_retriever().ainvoke("tires")] == [ids[0]]


def test_missing_extra_names_the_install() -> None:
    """Without LangChain the import says which extra to install, not a bare
    ModuleNotFoundError."""
    code = (
        "import sys; sys.modules['langchain_core'] = None\n"
        "try:\n"
        "    import cari.langchain\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        "ImportError cari.langchain needs LangChain: pip install 'langchain-core>=1.0' (in "
        "Cari's checkout, pip install -e '.[langchain]')"
    )
