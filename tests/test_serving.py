"""The request path under trouble: a hung or failing embedder, a busy local model, a full pool
and a statement timeout each get a prompt, truthful answer (status, stable code, Retry-After
where a retry can help), never a long wait."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import anyio
import numpy as np
import psycopg
import pytest
from litestar.testing import TestClient

from cari.embed import LocalEmbedder, Vector, _Turns
from cari.errors import EmbedderBusy, EmbedderUnavailable
from cari.search import query_vectors
from cari.search.query_vectors import QueryVectors
from cari.settings import Settings
from tests.conftest import app_client
from tests.fake_openai import FakeOpenAI, vector_for

DOCUMENTS = [
    {"id": "brio", "title": "Honda Brio", "text": "Honda Brio: mesin bensin 1.2 liter, irit."},
    {"id": "avanza", "title": "Toyota Avanza", "text": "Toyota Avanza: tujuh kursi, bensin."},
]


@pytest.fixture
def cars(dsn: str, fake: FakeOpenAI) -> Iterator[tuple[TestClient[Any], FakeOpenAI]]:
    """A collection written while the fake answers, served with a 0.5 s query-embedding
    budget."""
    with _cars(dsn, fake, 0.5) as client:
        yield client, fake


@contextmanager
def _cars(dsn: str, fake: FakeOpenAI, budget_s: float) -> Iterator[TestClient[Any]]:
    with app_client(dsn, fake, embedding_query_timeout_s=budget_s) as client:
        assert client.post("/v1/collections", json={"name": "cars"}).status_code == 201
        added = client.post("/v1/collections/cars/documents", json={"documents": DOCUMENTS})
        assert added.status_code == 200 and added.json()["rejected"] == []
        yield client


def _search(client: TestClient[Any], query: str, mode: str) -> tuple[Any, float]:
    started = time.monotonic()
    response = client.post(
        "/v1/collections/cars/search", json={"query": query, "mode": mode, "threshold": 0}
    )
    return response, time.monotonic() - started


def test_hung_embedder_costs_a_search_its_budget_then_the_breaker_skips_it(
    cars: tuple[TestClient[Any], FakeOpenAI],
) -> None:
    client, fake = cars
    # Far past the budget: the service must not wait for it. Each answer comes long before the
    # embedder's would, on any machine; that it comes within 2 s is bench.serving's to measure.
    fake.delay = 120.0
    hybrid, took = _search(client, "mobil bensin irit", "hybrid")
    assert hybrid.status_code == 200 and took < 60
    assert hybrid.json()["degraded"] == ["vector"]
    assert "no query embedding within the search's 0.5 s budget" in hybrid.json()["warnings"][0]
    assert hybrid.json()["results"]  # from keywords

    vector, took = _search(client, "mobil tujuh kursi", "vector")
    assert vector.status_code == 503 and took < 60
    assert vector.json()["code"] == "embedder_unavailable"
    assert vector.headers["retry-after"] == "1"  # the 0.5 s budget, rounded up

    _search(client, "mobil murah", "vector")  # the third failure in a row opens the breaker
    asked = len(fake.requests)
    skipped, took = _search(client, "mobil keluarga", "vector")
    assert skipped.status_code == 503 and took < 60
    assert skipped.json()["code"] == "embedder_unavailable"
    assert "after 3 failures in a row" in skipped.json()["detail"]
    assert int(skipped.headers["retry-after"]) >= 1
    degraded, _ = _search(client, "mobil keluarga", "hybrid")
    assert degraded.status_code == 200 and degraded.json()["degraded"] == ["vector"]
    assert len(fake.requests) == asked  # the open breaker sent nothing to the embedder


def test_a_refusing_embedder_is_reported_without_its_address(dsn: str, fake: FakeOpenAI) -> None:
    with app_client(dsn, fake, embedding_max_retries=0) as client:
        assert client.post("/v1/collections", json={"name": "cars"}).status_code == 201
        added = client.post("/v1/collections/cars/documents", json={"documents": DOCUMENTS})
        assert added.status_code == 200
        fake.close()
        vector, _ = _search(client, "mobil tujuh kursi", "vector")
        assert vector.status_code == 503 and vector.json()["code"] == "embedder_unavailable"
        assert "embedding service failed (1 attempt): cannot connect" in vector.json()["detail"]
        hybrid, _ = _search(client, "mobil bensin irit", "hybrid")
        assert hybrid.status_code == 200 and hybrid.json()["degraded"] == ["vector"]
        address = fake.url.split("//", 1)[1].split("/", 1)[0]
        for response in (vector, hybrid):
            assert address not in response.text


def test_database_failures_are_told_apart(dsn: str) -> None:
    with app_client(dsn, pool_max_size=1, pool_timeout_s=0.3, statement_timeout_ms=300) as client:
        assert client.post("/v1/collections", json={"name": "cars"}).status_code == 201
        pool = client.app.state.runtime.pool

        # Every connection in use: busy, worth a retry in a moment.
        held = client.blocking_portal.call(pool.getconn)
        try:
            busy = client.get("/v1/collections")
        finally:
            client.blocking_portal.call(pool.putconn, held)
        assert busy.status_code == 503
        assert busy.json()["code"] == "database_busy"
        assert "no connection came free within 0.3 s" in busy.json()["detail"]
        assert busy.headers["retry-after"] == "1"

        # A statement that runs past the timeout (here: waiting for a lock another session
        # holds): said as such, without a Retry-After, since it would run as long again.
        with psycopg.connect(dsn) as other:
            other.execute("LOCK TABLE collections IN ACCESS EXCLUSIVE MODE")
            slow = client.get("/v1/collections/cars")
        assert slow.status_code == 503
        assert slow.json()["code"] == "statement_timeout"
        assert "longer than 300 ms" in slow.json()["detail"]
        assert "retry-after" not in slow.headers
        assert client.get("/v1/collections/cars").status_code == 200  # and it recovers


# -- query vectors: one embedding per question at once, a budget, a breaker -----------------


class Scripted:
    """An embedder whose query embeddings take `delay` seconds, or fail, as a test says."""

    model_name = "scripted"
    dimension = 8

    def __init__(self) -> None:
        self.delay = 0.0
        self.failure: str | None = None
        self.queries: list[str] = []

    async def embed_query(self, text: str) -> Vector:
        self.queries.append(text)
        await anyio.sleep(self.delay)
        if self.failure is not None:
            raise EmbedderUnavailable(self.failure)
        return vector_for(text, self.dimension)

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        return [vector_for(text, self.dimension) for text in texts]

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        return [await self.embed_query(text) for text in texts]

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def aclose(self) -> None:
        pass


@pytest.mark.anyio
async def test_identical_questions_at_once_are_embedded_once() -> None:
    embedder = Scripted()
    embedder.delay = 0.05
    vectors = QueryVectors(embedder, size=10, timeout_s=5)
    results: list[tuple[np.ndarray, bool]] = []

    async def ask(text: str) -> None:
        results.append(await vectors.get(text))

    async with anyio.create_task_group() as group:
        for text in ["harga brio"] * 5 + ["harga avanza"]:
            group.start_soon(ask, text)
    assert sorted(embedder.queries) == ["harga avanza", "harga brio"]
    assert len(results) == 6 and not any(cached for _, cached in results)
    assert (await vectors.get("harga brio"))[1] is True  # then from the cache


@pytest.mark.anyio
async def test_breaker_opens_after_failures_and_a_probe_closes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(query_vectors, "BREAKER_COOLDOWN_S", 0.2)
    embedder = Scripted()
    embedder.failure = "connection refused"
    vectors = QueryVectors(embedder, size=10, timeout_s=5)
    for i in range(query_vectors.BREAKER_FAILURES):
        with pytest.raises(EmbedderUnavailable, match="connection refused"):
            await vectors.get(f"q{i}")
    with pytest.raises(EmbedderUnavailable, match="skipped after 3 failures") as skipped:
        await vectors.get("skipped")
    assert skipped.value.retry_after is not None
    assert embedder.queries == ["q0", "q1", "q2"]  # the open breaker asked nothing

    await anyio.sleep(0.25)
    embedder.failure = None
    embedder.delay = 0.1
    async with anyio.create_task_group() as group:
        group.start_soon(vectors.get, "probe")
        await anyio.sleep(0.02)
        with pytest.raises(EmbedderUnavailable, match="skipped"):  # one probe at a time
            await vectors.get("while probing")
    assert (await vectors.get("closed again"))[1] is False
    assert embedder.queries[-2:] == ["probe", "closed again"]


@pytest.mark.anyio
async def test_budget_bounds_a_hung_embedding() -> None:
    embedder = Scripted()
    embedder.delay = 600
    vectors = QueryVectors(embedder, size=10, timeout_s=0.2)
    # Gives up at its budget: long before the embedder answers, on any machine.
    with (
        anyio.fail_after(300),
        pytest.raises(EmbedderUnavailable, match=r"within the search's 0\.2 s budget"),
    ):
        await vectors.get("hung")


@pytest.mark.anyio
async def test_an_asker_gives_up_at_its_deadline_and_the_embedding_goes_on() -> None:
    """A search's deadline (its budget less what answering takes after the wait) bounds the
    embedding it starts; one that joins an embedding under way gives up at its own deadline,
    and the embedding goes on for the first."""
    embedder = Scripted()
    embedder.delay = 0.5
    vectors = QueryVectors(embedder, size=10, timeout_s=30)
    with pytest.raises(EmbedderUnavailable, match="within the search's 30 s budget"):
        await vectors.get("bounded", deadline=time.monotonic() + 0.05)
    with anyio.fail_after(20):  # the embedding it started ends with it, not 30 s later
        while vectors.pending:
            await anyio.sleep(0.01)

    async with anyio.create_task_group() as group:
        group.start_soon(vectors.get, "shared", time.monotonic() + 25)
        await anyio.sleep(0.01)
        with pytest.raises(EmbedderUnavailable, match="within the search's 30 s budget"):
            await vectors.get("shared", deadline=time.monotonic() + 0.05)
        assert vectors.pending == 1  # still being embedded for the first asker
    assert embedder.queries == ["bounded", "shared"]
    assert (await vectors.get("shared"))[1] is True


# -- the local model: queries first, a bounded backlog --------------------------------------


@pytest.mark.anyio
async def test_turns_go_to_queries_first_and_survive_cancellation() -> None:
    turns = _Turns()
    order: list[str] = []
    await turns.acquire(query=False)  # a computation runs

    async def wait(name: str, query: bool) -> None:
        await turns.acquire(query=query)
        order.append(name)
        turns.release()

    async with anyio.create_task_group() as group:
        group.start_soon(wait, "documents 1", False)
        await anyio.sleep(0.01)
        with anyio.CancelScope() as gone:  # a query whose client left while it waited
            gone.cancel()
            await turns.acquire(query=True)
        group.start_soon(wait, "documents 2", False)
        group.start_soon(wait, "query", True)
        await anyio.sleep(0.01)
        assert turns.waiting_queries == 1
        turns.release()
    assert order == ["query", "documents 1", "documents 2"]
    await turns.acquire(query=True)  # free again: no turn was lost
    turns.release()


class CountingLocalEmbedder(LocalEmbedder):
    """The local model, counting the batches of documents it has computed."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.batches = 0

    def _encode(self, texts: list[str], is_query: bool) -> Any:
        matrix = super()._encode(texts, is_query)
        if not is_query:
            self.batches += 1
        return matrix


@pytest.mark.anyio
async def test_local_query_waits_for_one_small_batch_not_the_whole_job() -> None:
    """Counted in batches, not seconds (a ratio of times is a benchmark's, and load skews it)."""
    embedder = CountingLocalEmbedder(batch_size=2, threads=1)
    await embedder.embed_query("warm up")
    texts = [f"Kalimat nomor {i} tentang harga dan cicilan mobil keluarga." * 8 for i in range(24)]
    seen: dict[str, int] = {}

    async def documents() -> None:
        await embedder.embed_documents(texts)
        seen["documents"] = embedder.batches

    async def query() -> None:
        await anyio.sleep(0.05)  # asked while the documents are being computed
        asked = embedder.batches
        await embedder.embed_query("berapa cicilan mobil keluarga?")
        seen["waited"] = embedder.batches - asked
        seen["after documents"] = "documents" in seen

    async with anyio.create_task_group() as group:
        group.start_soon(documents)
        group.start_soon(query)
    assert seen["documents"] == 12 and seen["after documents"] is False, seen
    assert seen["waited"] <= 1, seen  # the batch in progress, never the rest of the job


class MeetingLocalEmbedder(LocalEmbedder):
    """The local model on two slots, each computation held until `expected` computations are
    in progress together (or 60 s passed); records the most seen at once."""

    def __init__(self, expected: int) -> None:
        super().__init__(threads=2)
        self.expected = expected
        self.lock = threading.Lock()
        self.inside = 0
        self.most = 0
        self.met = threading.Event()

    def _encode(self, texts: list[str], is_query: bool) -> Any:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
            if self.inside >= self.expected:
                self.met.set()
        self.met.wait(timeout=60)
        try:
            return super()._encode(texts, is_query)
        finally:
            with self.lock:
                self.inside -= 1


@pytest.mark.anyio
async def test_local_questions_are_computed_side_by_side_each_as_alone() -> None:
    """On two threads two questions are computed at once, each on a core of its own, and each
    gets exactly the vector it gets alone: a text's vector never depends on the texts computed
    beside it (int8 layers batched together would quantise them by their common range)."""
    embedder = MeetingLocalEmbedder(expected=2)
    assert embedder.slots == 2
    asked = ["berapa cicilan mobil keluarga?", "how do I back up the database?"]
    vectors: dict[str, Vector] = {}

    async def query(text: str) -> None:
        vectors[text] = await embedder.embed_query(text)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            for text in asked:
                group.start_soon(query, text)
    assert embedder.most == 2 and embedder.met.is_set()
    for text in asked:
        np.testing.assert_array_equal(vectors[text], await embedder.embed_query(text))


@pytest.mark.anyio
async def test_local_documents_fill_every_slot_and_keep_their_order() -> None:
    embedder = MeetingLocalEmbedder(expected=2)
    texts = [f"Kalimat nomor {i} tentang cicilan mobil." for i in range(6)]
    with anyio.fail_after(60):
        vectors = await embedder.embed_documents(texts)
    assert embedder.most == 2
    alone = [(await embedder.embed_documents([text]))[0] for text in texts]
    for vector, expected in zip(vectors, alone, strict=True):
        np.testing.assert_array_equal(vector, expected)


@pytest.mark.anyio
async def test_local_backlog_is_bounded() -> None:
    embedder = LocalEmbedder(batch_size=8, max_waiting_queries=2, threads=1)
    await embedder.embed_query("warm up")
    outcomes: list[str] = []

    async def query(i: int) -> None:
        try:
            await embedder.embed_query(f"pertanyaan {i}")
            outcomes.append("embedded")
        except EmbedderBusy as exc:
            assert exc.retry_after == 1 and "2 query embeddings already wait" in exc.message
            outcomes.append("busy")

    texts = ["Harga mobil baru mulai dari 200 juta rupiah." * 10] * 8
    async with anyio.create_task_group() as group:
        group.start_soon(embedder.embed_documents, texts)
        await anyio.sleep(0.05)  # the batch is computing: queries must wait
        for i in range(5):
            group.start_soon(query, i)
    assert sorted(outcomes) == ["busy"] * 3 + ["embedded"] * 2


@pytest.mark.anyio
async def test_a_local_query_that_would_wait_past_its_share_of_the_budget_is_refused_at_once() -> (
    None
):
    """The 64-place backlog never fills at 16 clients; the expected wait refuses the excess."""
    settings = Settings(_env_file=None, embedding_query_timeout_s=1.5)  # type: ignore[call-arg]
    assert LocalEmbedder.from_settings(settings).max_wait_s == 0.75
    embedder = LocalEmbedder(batch_size=8, threads=1)
    for _ in range(2):
        await embedder.embed_query("warm up")
    assert embedder.query_s > 0
    # Room for the running batch (counted as one query) and one query: not for a second.
    embedder.max_wait_s = 2.5 * embedder.query_s
    outcomes: list[str] = []

    async def query(i: int) -> None:
        try:
            await embedder.embed_query(f"pertanyaan {i}")
            outcomes.append("embedded")
        except EmbedderBusy as exc:
            assert "computations ahead" in exc.message and "CARI_EMBEDDING_QUERY_TIMEOUT_S" in (
                exc.message
            )
            assert exc.retry_after is not None and exc.retry_after > embedder.max_wait_s
            outcomes.append("busy")

    async def documents() -> None:
        await embedder.embed_documents(texts)
        outcomes.append("documents")

    texts = ["Harga mobil baru mulai dari 200 juta rupiah." * 10] * 8
    async with anyio.create_task_group() as group:
        group.start_soon(documents)
        await anyio.sleep(0.05)  # the batch is computing: queries must wait
        for i in range(5):
            group.start_soon(query, i)
    assert sorted(outcomes) == ["busy"] * 4 + ["documents", "embedded"]
    # Refused at once: before the batch ahead of them ended, not after a wait (in order of
    # events, which a busy machine keeps, rather than under 0.05 s, which it does not).
    assert outcomes[:4] == ["busy"] * 4, outcomes


def test_the_pool_sessions_carry_the_hnsw_settings(dsn: str, fake: FakeOpenAI) -> None:
    """The pool's sessions start with ef_search and iterative scans, so a search at the
    server's ef_search needs no settings statement; a request's own ef_search applies to its
    search alone. (A budget no busy machine exhausts: with `cars`' 0.5 s, a CI run at load
    found this vector search refused for want of its embedding.)"""
    with _cars(dsn, fake, 60.0) as client:
        pool = client.app.state.runtime.pool
        assert client.blocking_portal.call(_session_settings, pool) == ("100", "strict_order")
        body = {"query": "mobil bensin", "mode": "vector", "threshold": 0, "explain": True}
        default = client.post("/v1/collections/cars/search", json=body)
        assert default.status_code == 200, default.text
        assert default.json()["explain"]["ef_search"]["applied"] == "100"
        own = client.post("/v1/collections/cars/search", json={**body, "ef_search": 33})
        assert own.status_code == 200, own.text
        explained = own.json()["explain"]["ef_search"]
        assert explained == {"requested": 33, "applied": "33", "source": "request"}
        assert client.blocking_portal.call(_session_settings, pool) == ("100", "strict_order")


async def _session_settings(pool: Any) -> tuple[str, str]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')"
        )
        row = await cur.fetchone()
    assert row is not None
    return str(row[0]), str(row[1])
