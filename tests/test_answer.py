"""Answers over real HTTP: the real local model for search, a real local OpenAI-compatible chat
server and Cohere-compatible reranker (tests/fake_llm.py) for the rest; the SSE stream is read
with a standard SSE client (httpx-sse)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import httpx
import pytest
from bench import load
from httpx_sse import EventSource, connect_sse
from litestar.testing import TestClient

from tests.conftest import app_client
from tests.fake_llm import FakeLLM

DOCUMENTS = [
    {
        "id": "civic",
        "title": "Honda Civic RS",
        "source": "faq",
        "text": "Honda Civic RS dijual seharga Rp 600 juta. Mesinnya turbo 1.5 liter dengan "
        "tenaga 178 PS. Tersedia warna merah dan putih.",
    },
    {
        "id": "brio",
        "title": "Honda Brio",
        "text": "Honda Brio adalah city car yang irit. Harganya mulai Rp 170 juta.",
    },
    {
        "id": "service",
        "title": "Servis berkala",
        "text": "Servis berkala dilakukan setiap 10.000 km atau enam bulan di bengkel resmi.",
    },
]
QUESTION = "berapa harga honda civic rs?"


@pytest.fixture(scope="module")
def collection_dsn(module_dsn: str) -> str:
    """A collection embedded once by the real local model."""
    with app_client(module_dsn) as client:
        assert client.post("/v1/collections", json={"name": "cars"}).status_code == 201
        added = client.post("/v1/collections/cars/documents", json={"documents": DOCUMENTS})
        assert added.status_code == 200 and added.json()["rejected"] == []
    return module_dsn


def ask(client: TestClient[Any], **body: Any) -> dict[str, Any]:
    response = client.post("/v1/collections/cars/answer", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def events(client: TestClient[Any], **body: Any) -> list[tuple[str, dict[str, Any]]]:
    headers = {"accept": "text/event-stream"}
    with connect_sse(
        client, "POST", "/v1/collections/cars/answer", json=body, headers=headers
    ) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        return [(event.event, json.loads(event.data)) for event in source.iter_sse()]


def test_extractive_answer_without_llm_cites_real_sources(collection_dsn: str) -> None:
    with app_client(collection_dsn) as client:
        answer = ask(client, query=QUESTION)
    assert answer["model"] == "extractive" and answer["no_information"] is False
    assert "600 juta" in answer["answer"] and "[1]" in answer["answer"]
    assert answer["sources"][0]["result"]["document_id"] == "civic"
    first = answer["citations"]["1"]
    assert first["document_id"] == "civic" and first["title"] == "Honda Civic RS"
    # The document's own `source`, as stored (it was null: read from the metadata only).
    assert first["source"] == "faq" and answer["sources"][0]["result"]["source"] == "faq"
    assert "600 juta" in first["snippet"]
    numbers = {str(s["number"]) for s in answer["sources"]}
    assert set(answer["citations"]) <= numbers


def test_llm_answer_maps_citations_and_removes_invented_ones(
    collection_dsn: str, llm: FakeLLM
) -> None:
    llm.reply = "Honda Civic RS harganya Rp 600 juta [1]. Ada 9 airbag [7]."
    with app_client(collection_dsn, **llm.settings(rerank_base_url=None)) as client:
        answer = ask(client, query=QUESTION)
    assert answer["answer"] == "Honda Civic RS harganya Rp 600 juta [1]. Ada 9 airbag."
    assert answer["invented_citations"] == [7]
    assert list(answer["citations"]) == ["1"]
    assert answer["citations"]["1"]["document_id"] == answer["sources"][0]["result"]["document_id"]
    assert answer["model"] == "fake-chat-model"
    assert answer["usage"]["completion_tokens"] == len(llm.pieces)
    # The prompt numbers every source and keeps the answer in the question's language.
    [request] = llm.requests
    system, user = request["messages"]
    assert "[1]" in user["content"] and QUESTION in user["content"]
    assert "Indonesia" in system["content"] or "bahasa" in system["content"].lower()


def test_stream_sends_events_in_order(collection_dsn: str, llm: FakeLLM) -> None:
    llm.reply = "Harganya Rp 600 juta [1][2]. Servis tiap 10.000 km [3]."
    with app_client(collection_dsn, **llm.settings(rerank_base_url=None)) as client:
        received = events(client, query=QUESTION, top_k=2)
    names = [name for name, _ in received]
    assert names[0] == "search_complete" and names[-3:] == ["citations", "metadata", "done"]
    assert set(names[1:-3]) == {"llm_chunk"} and len(names[1:-3]) > 2  # piece by piece
    sources = received[0][1]["sources"]
    assert [s["number"] for s in sources] == [1, 2]
    text = "".join(data["text"] for name, data in received if name == "llm_chunk")
    assert text == "Harganya Rp 600 juta [1][2]. Servis tiap 10.000 km."
    assert set(received[-3][1]["citations"]) == {"1", "2"}
    metadata = received[-2][1]
    assert metadata["invented_citations"] == [3]
    assert {"search", "answer", "total"} <= set(metadata["timings_ms"])
    # `stream: true` without the Accept header streams too.
    body = {"query": QUESTION, "stream": True}
    with (
        app_client(collection_dsn, **llm.settings(rerank_base_url=None)) as client,
        client.stream("POST", "/v1/collections/cars/answer", json=body) as response,
    ):
        assert [e.event for e in EventSource(response).iter_sse()][-1] == "done"


def test_llm_failure_midway_ends_the_stream_with_an_error(
    collection_dsn: str, llm: FakeLLM
) -> None:
    llm.reply = "Harganya Rp 600 juta menurut sumber pertama dan kedua [1]."
    llm.fail_after = 2
    with app_client(collection_dsn, **llm.settings(rerank_base_url=None)) as client:
        received = events(client, query=QUESTION)
        whole = client.post("/v1/collections/cars/answer", json={"query": QUESTION})
    names = [name for name, _ in received]
    assert names[0] == "search_complete" and names[-1] == "error"
    assert names.count("llm_chunk") == 2 and "done" not in names
    assert "fake-chat-model" in received[-1][1]["message"]
    assert whole.status_code == 503 and "fake-chat-model" in whole.json()["detail"]


def test_no_information_skips_the_llm(collection_dsn: str, llm: FakeLLM) -> None:
    with app_client(collection_dsn, **llm.settings(rerank_base_url=None)) as client:
        indonesian = ask(client, query="siapa penemu bola lampu?")
        english = ask(client, query="who invented the light bulb?")
        # An English title inside an Indonesian question: still Indonesian.
        titled = ask(client, query="tahun berapakah The Greatest Showman dirilis?")
        received = events(client, query="who invented the light bulb?")
        patched = client.patch("/v1/collections/cars", json={"no_information": "Belum ada."})
        assert patched.status_code == 200 and patched.json()["no_information"] == "Belum ada."
        own = ask(client, query="who invented the light bulb?")
        reset = client.patch("/v1/collections/cars", json={"no_information": None})
        assert reset.status_code == 200 and reset.json()["no_information"] is None
    assert indonesian["answer"] == "Maaf, saya tidak memiliki informasi tersebut."
    assert english["answer"] == "Sorry, I don't have that information."
    assert titled["answer"] == "Maaf, saya tidak memiliki informasi tersebut."
    assert english["no_information"] and english["citations"] == {} and english["sources"] == []
    assert own["answer"] == "Belum ada."
    assert [name for name, _ in received] == [
        "search_complete", "llm_chunk", "citations", "metadata", "done"]  # fmt: skip
    assert llm.requests == []


def test_reranker_order_is_applied_and_its_outage_degrades(
    collection_dsn: str, llm: FakeLLM
) -> None:
    with app_client(collection_dsn, **llm.settings(llm_base_url=None)) as client:
        fused = ask(client, query="honda", rerank=False, threshold=0, top_k=3)
        order = [s["result"]["document_id"] for s in fused["sources"]]
        llm.rerank_order = [2, 0, 1]  # the fused third first
        reranked = ask(client, query="honda", threshold=0, top_k=2)
        llm.rerank_status = 500
        degraded = ask(client, query="honda", threshold=0, top_k=2)
    assert [s["result"]["document_id"] for s in reranked["sources"]] == [order[2], order[0]]
    assert reranked["sources"][0]["result"]["retrievers"]["rerank"]["rank"] == 1
    assert len(llm.rerank_requests[0]["documents"]) == 3  # every fused candidate, then top 2
    assert [s["result"]["document_id"] for s in degraded["sources"]] == order[:2]
    assert "reranker unavailable" in degraded["warnings"][0]


def test_search_reranks_on_request_and_warns_without_a_reranker(
    collection_dsn: str, llm: FakeLLM
) -> None:
    def search(client: TestClient[Any], **body: Any) -> dict[str, Any]:
        response = client.post("/v1/collections/cars/search", json={"query": "honda", **body})
        assert response.status_code == 200, response.text
        return dict(response.json())

    def documents(found: dict[str, Any]) -> list[str]:
        return [r["document_id"] for r in found["results"] if r["kind"] == "chunk"]

    with app_client(collection_dsn, **llm.settings(llm_base_url=None)) as client:
        fused = search(client, threshold=0, top_k=3)
        assert llm.rerank_requests == []  # off unless asked
        llm.rerank_order = [1, 2, 0]
        reranked = search(client, threshold=0, top_k=2, rerank=True, explain=True)
    order = documents(fused)
    assert documents(reranked) == [order[1], order[2]]
    assert [r["retrievers"]["rerank"]["rank"] for r in reranked["results"]] == [1, 2]
    assert len(llm.rerank_requests[0]["documents"]) == 3  # every fused candidate, then top 2
    assert "rerank" in reranked["explain"]["timings_ms"]
    with app_client(collection_dsn, **llm.settings(rerank_base_url=None)) as client:
        unconfigured = search(client, threshold=0, top_k=2, rerank=True)
    assert documents(unconfigured) == order[:2]
    assert "no reranker is configured" in unconfigured["warnings"][0]


def test_tool_describes_the_search(collection_dsn: str) -> None:
    with app_client(collection_dsn) as client:
        tool = client.get("/v1/collections/cars/tool").json()
        missing = client.get("/v1/collections/nope/tool")
    assert tool["type"] == "function" and tool["function"]["name"] == "search_cars"
    parameters = tool["function"]["parameters"]
    assert parameters["required"] == ["query"] and "top_k" in parameters["properties"]
    assert missing.status_code == 404


def test_bad_answer_input_names_the_field(collection_dsn: str) -> None:
    with app_client(collection_dsn) as client:
        for body, field in (({"query": "x", "top_k": 0}, "top_k"), ({"q": "x"}, "q")):
            response = client.post("/v1/collections/cars/answer", json=body)
            assert response.status_code == 422, response.text
            assert [error["field"] for error in response.json()["errors"]] == [field]
        assert client.post("/v1/collections/nope/answer", json={"query": "x"}).status_code == 404


def test_disconnecting_client_stops_the_llm(
    collection_dsn: str, llm: FakeLLM, clean_env: dict[str, str]
) -> None:
    """Through a real `cari serve`: closing the stream mid-answer closes the LLM request."""
    llm.reply = " ".join(["kata"] * 200) + " [1]."
    llm.delay = 0.05
    env = {**clean_env, **{f"CARI_{k.upper()}": str(v) for k, v in llm.settings().items()}}
    env["CARI_RERANK_BASE_URL"] = ""

    async def run() -> int:
        async with load.served(collection_dsn, env) as server:
            async with (
                httpx.AsyncClient(base_url=server.url, timeout=60) as http,
                http.stream(
                    "POST", "/v1/collections/cars/answer",
                    json={"query": QUESTION, "stream": True},
                ) as response,
            ):  # fmt: skip
                chunks = 0
                async for event in EventSource(response).aiter_sse():
                    chunks += event.event == "llm_chunk"
                    if chunks == 3:
                        break  # leaving the block closes the connection
            return chunks

    assert asyncio.run(run()) == 3
    assert llm.disconnected.wait(5)


def test_cli_ask_prints_the_answer_and_its_sources(
    collection_dsn: str, clean_env: dict[str, str]
) -> None:
    env = {**clean_env, "DATABASE_URL": collection_dsn}
    done = subprocess.run(
        [sys.executable, "-m", "cari.cli", "ask", QUESTION, "-c", "cars"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "600 juta" in done.stdout and "[1] Honda Civic RS (civic)" in done.stdout
    raw = subprocess.run(
        [sys.executable, "-m", "cari.cli", "ask", "who invented the light bulb?", "-c", "cars",
         "--json"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    lines = [json.loads(line) for line in raw.stdout.splitlines()]
    assert [line["event"] for line in lines][-1] == "done"
    assert lines[1]["data"]["text"] == "Sorry, I don't have that information."


def test_an_answers_sources_reach_its_threshold_where_a_search_keeps_companions(
    collection_dsn: str,
) -> None:
    """A search with a threshold keeps, beside a chunk that reaches it, those reaching half of
    it; an answer's sources must reach it themselves."""
    with app_client(collection_dsn) as client:
        ranked = client.post(
            "/v1/collections/cars/search", json={"query": QUESTION, "top_k": 5}
        ).json()["results"]
        best, second = sorted((r["relevance"] for r in ranked), reverse=True)[:2]
        assert best > second > 0
        threshold = min(best, 1.98 * second)  # the second is under it, over half of it
        searched = client.post(
            "/v1/collections/cars/search",
            json={"query": QUESTION, "top_k": 5, "threshold": threshold},
        ).json()["results"]
        answer = ask(client, query=QUESTION, threshold=threshold)
    assert min(r["relevance"] for r in searched) < threshold  # its companion came along
    relevances = [s["result"]["relevance"] for s in answer["sources"]]
    assert relevances and min(relevances) >= threshold
