"""The reranker client against a real local Cohere-compatible server (tests/fake_llm.py)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cari.errors import RerankUnavailable
from cari.search.rerank import Reranker
from tests.fake_llm import DEFAULT_RERANK_MODEL, FakeLLM

DOCUMENTS = [
    "Honda Jazz 2019 hatchback bekas",
    "Civic RS harga Rp 600 juta",
    "Harga Civic Type R",
    "Toyota Avanza harga terjangkau",
]


@contextlib.asynccontextmanager
async def reranker(base_url: str, **overrides: Any) -> AsyncIterator[Reranker]:
    values: dict[str, Any] = {
        "base_url": base_url,
        "model": DEFAULT_RERANK_MODEL,
        "api_key": "test-key",
        "timeout_s": 5.0,
    }
    values.update(overrides)
    client = Reranker(**values)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.mark.anyio
async def test_ranks_best_first(llm: FakeLLM) -> None:
    async with reranker(llm.url + "/") as client:
        ranking = await client.rerank("harga civic rs", DOCUMENTS, top_n=10)
    assert [index for index, _ in ranking] == [1, 2, 3, 0]
    scores = [score for _, score in ranking]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] == 1.0
    [body] = llm.rerank_requests
    assert body == {
        "model": DEFAULT_RERANK_MODEL,
        "query": "harga civic rs",
        "documents": DOCUMENTS,
        "top_n": len(DOCUMENTS),  # never more than there are documents
    }
    assert llm.authorizations == ["Bearer test-key"]


@pytest.mark.anyio
async def test_scripted_order_and_top_n(llm: FakeLLM) -> None:
    llm.rerank_order = [3, 0, 2, 1]
    async with reranker(llm.url, api_key=None) as client:
        ranking = await client.rerank("anything", DOCUMENTS, top_n=2)
    assert [index for index, _ in ranking] == [3, 0]
    assert llm.rerank_requests[0]["top_n"] == 2
    assert llm.authorizations == [None]


@pytest.mark.anyio
async def test_server_order_is_not_trusted(llm: FakeLLM) -> None:
    llm.rerank_body = {
        "results": [
            {"index": 0, "relevance_score": 0.1},
            {"index": 2, "relevance_score": 0.9},
            {"index": 1, "relevance_score": 0.5},
        ]
    }
    async with reranker(llm.url) as client:
        ranking = await client.rerank("q", DOCUMENTS[:3], top_n=2)
    assert ranking == [(2, 0.9), (1, 0.5)]


@pytest.mark.anyio
async def test_no_documents_no_request(llm: FakeLLM) -> None:
    async with reranker(llm.url) as client:
        assert await client.rerank("q", [], top_n=5) == []
    assert llm.rerank_requests == []


@pytest.mark.anyio
async def test_failure_status(llm: FakeLLM, caplog: pytest.LogCaptureFixture) -> None:
    llm.rerank_status = 503
    async with reranker(llm.url) as client:
        with pytest.raises(RerankUnavailable, match="HTTP 503: Service Unavailable") as info:
            await client.rerank("q", DOCUMENTS, top_n=2)
    # The message reaches API clients: the endpoint is for the operator's log only.
    assert llm.url not in info.value.message
    assert any(f"at {llm.url}/rerank" in record.getMessage() for record in caplog.records)


@pytest.mark.anyio
async def test_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with reranker(f"http://127.0.0.1:{port}/v1") as client:
        with pytest.raises(RerankUnavailable, match="connection failed"):
            await client.rerank("q", DOCUMENTS, top_n=2)


@pytest.mark.anyio
async def test_timeout(llm: FakeLLM) -> None:
    llm.delay = 2.0
    async with reranker(llm.url, timeout_s=0.2) as client:
        with pytest.raises(RerankUnavailable, match=r"no answer within 0\.2 s"):
            await client.rerank("q", DOCUMENTS, top_n=2)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "body",
    [
        [],
        {},
        {"results": "none"},
        {"results": [{"index": 4, "relevance_score": 0.5}]},
        {"results": [{"index": -1, "relevance_score": 0.5}]},
        {"results": [{"index": True, "relevance_score": 0.5}]},
        {"results": [{"index": "0", "relevance_score": 0.5}]},
        {"results": [{"index": 0}]},
        {"results": [{"index": 0, "relevance_score": "high"}]},
        {"results": [{"index": 0, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.4}]},
        {"results": [{"index": 0, "relevance_score": float("nan")}]},
        {"results": [None]},
        b"<html>502 Bad Gateway</html>",
    ],
)
async def test_malformed_answer(llm: FakeLLM, body: object) -> None:
    llm.rerank_body = body
    async with reranker(llm.url) as client:
        with pytest.raises(RerankUnavailable, match="failed"):
            await client.rerank("q", DOCUMENTS, top_n=2)
