"""What an operator sees: /metrics scraped and parsed with prometheus_client's own parser before
and after real searches and ingestion, request ids on responses and log records, and the JSON
log lines of a real `cari serve`."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pty
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bench.load import free_port
from litestar.testing import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import app_client, cli_env
from tests.fake_openai import FakeOpenAI

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]
SEARCH_ROUTE = "/v1/collections/{collection}/search"
DOCUMENTS = [
    {"id": "brio", "title": "Honda Brio", "text": "Honda Brio: mesin bensin 1.2 liter, irit."},
    {"id": "avanza", "title": "Toyota Avanza", "text": "Toyota Avanza: tujuh kursi, bensin."},
]


def scrape(client: TestClient[Any]) -> Series:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(series: Series, name: str, **labels: str) -> float:
    """The sample named `name` with exactly these labels, 0 if absent."""
    return series.get((name, frozenset(labels.items())), 0.0)


def grown(before: Series, after: Series, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


@pytest.fixture
def cars(dsn: str, fake: FakeOpenAI) -> Iterator[TestClient[Any]]:
    with app_client(dsn, fake) as client:
        assert client.post("/v1/collections", json={"name": "cars"}).status_code == 201
        yield client


def search(client: TestClient[Any], query: str, mode: str) -> httpx.Response:
    body = {"query": query, "mode": mode, "threshold": 0}
    return client.post("/v1/collections/cars/search", json=body)


def test_metrics_move_with_searches_and_ingestion(cars: TestClient[Any]) -> None:
    before = scrape(cars)
    added = cars.post("/v1/collections/cars/documents", json={"documents": DOCUMENTS})
    assert added.status_code == 200 and added.json()["rejected"] == []
    for mode in ("hybrid", "vector", "keyword"):
        assert search(cars, "mobil bensin irit", mode).status_code == 200
    assert cars.get("/v1/collections/nowhere").status_code == 404
    after = scrape(cars)

    # Requests by route template, method and status: the raw path is no label.
    route = {"app_name": "cari", "method": "POST", "path": SEARCH_ROUTE, "status_code": "200"}
    assert grown(before, after, "cari_requests_total", **route) == 3
    assert grown(before, after, "cari_request_duration_seconds_count", **route) == 3
    missing = {
        **route,
        "method": "GET",
        "path": "/v1/collections/{collection}",
        "status_code": "404",
    }
    assert grown(before, after, "cari_requests_total", **missing) == 1
    assert not [labels for _, labels in after if ("path", "/v1/collections/cars/search") in labels]

    # Searches by resolved mode, and the stages each mode ran.
    for mode in ("hybrid", "vector", "keyword"):
        assert grown(before, after, "cari_search_duration_seconds_count", mode=mode) == 1
        assert grown(before, after, "cari_search_duration_seconds_sum", mode=mode) > 0
    stages = {
        "hybrid": {"keyword", "embed", "vector", "fuse", "relevance", "route", "fetch"},
        "vector": {"embed", "vector", "fuse", "relevance", "route", "fetch"},
        "keyword": {"keyword", "fuse", "relevance", "route", "fetch"},
    }
    for mode, ran in stages.items():
        for stage in ("keyword", "embed", "vector", "fuse", "relevance", "route", "fetch"):
            count = grown(
                before, after, "cari_search_stage_duration_seconds_count", mode=mode, stage=stage
            )
            assert count == (stage in ran), (mode, stage)

    # Ingestion throughput, and nothing degraded or failed while the embedder answered.
    assert grown(before, after, "cari_ingest_documents_total", status="created") == 2
    assert grown(before, after, "cari_ingest_chunks_total", embedded="true") == 2
    assert grown(before, after, "cari_search_degraded_total", part="vector") == 0
    assert value(after, "cari_embedder_circuit_open") == 0

    # The pool as psycopg_pool counts it: a connection lent out shows as in use.
    assert value(after, "cari_pool_connections_max") == 10
    assert 1 <= value(after, "cari_pool_connections") <= 10
    assert value(after, "cari_pool_connections_in_use") == 0  # the scrape needs none
    assert value(after, "cari_pool_requests_waiting") == 0
    pool = cars.app.state.runtime.pool
    held = cars.blocking_portal.call(pool.getconn)
    try:
        lent = scrape(cars)
    finally:
        cars.blocking_portal.call(pool.putconn, held)
    assert value(lent, "cari_pool_connections_in_use") == 1


def test_a_failing_embedder_shows_as_degraded_searches_failures_and_an_open_circuit(
    cars: TestClient[Any], fake: FakeOpenAI
) -> None:
    before = scrape(cars)
    fake.close()
    added = cars.post("/v1/collections/cars/documents", json={"documents": DOCUMENTS[:1]})
    assert added.status_code == 200
    for query in ("mobil bensin", "mobil irit", "mobil keluarga"):  # three failures in a row
        response = search(cars, query, "hybrid")
        assert response.status_code == 200 and response.json()["degraded"] == ["vector"]
    skipped = search(cars, "mobil murah", "hybrid")  # the open circuit skips the embedder
    assert skipped.json()["degraded"] == ["vector"]
    after = scrape(cars)

    assert grown(before, after, "cari_search_degraded_total", part="vector") == 4
    failures = "cari_embedder_failures_total"
    assert grown(before, after, failures, use="query", reason="unavailable") == 3
    assert grown(before, after, failures, use="document", reason="unavailable") == 1
    assert grown(before, after, "cari_ingest_chunks_total", embedded="false") == 1
    assert value(after, "cari_embedder_circuit_open") == 1


def test_request_ids_are_echoed_and_on_the_requests_log_records(
    cars: TestClient[Any], fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    given = cars.get("/healthz", headers={"X-Request-ID": "edge-7f3a:42"})
    assert given.headers["x-request-id"] == "edge-7f3a:42"
    made = [cars.get("/healthz").headers["x-request-id"] for _ in range(2)]
    assert made[0] != made[1] and all(len(rid) == 32 for rid in made)
    for unsafe in ("a" * 129, "two words", "new\\nline"):
        replaced = cars.get("/healthz", headers={"X-Request-ID": unsafe})
        assert replaced.headers["x-request-id"] not in (unsafe, "")
    # Errors too: a route's (not found, invalid body), and a path no route matches.
    for response in (
        cars.get("/v1/collections/nowhere", headers={"X-Request-ID": "e1"}),
        cars.post("/v1/collections", json={"name": ""}, headers={"X-Request-ID": "e2"}),
        cars.get("/no/such/path", headers={"X-Request-ID": "e3"}),
    ):
        assert response.status_code >= 400
        assert response.headers["x-request-id"] == response.request.headers["x-request-id"]

    # The embedder's failure is logged while the search is served: with its request's id.
    fake.close()
    caplog.set_level(logging.WARNING)
    response = cars.post(
        "/v1/collections/cars/search",
        json={"query": "mobil bensin", "mode": "hybrid"},
        headers={"X-Request-ID": "search-1"},
    )
    assert response.json()["degraded"] == ["vector"]
    logged = [r for r in caplog.records if "embedding service" in r.getMessage()]
    assert logged and {getattr(r, "request_id", None) for r in logged} == {"search-1"}
    cars.get("/healthz")
    outside = logging.getLogger("tests").makeRecord("tests", logging.INFO, "", 0, "", (), None)
    assert outside.request_id is None  # type: ignore[attr-defined]


def wait_ready(url: str, server: subprocess.Popen[bytes], seconds: float = 120) -> None:
    """Until `cari serve` at `url` answers /readyz with 200 (or exits, or `seconds` pass)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if httpx.get(f"{url}/readyz").status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)


def test_serve_writes_json_lines_with_the_request_id(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    env = {**cli_env(clean_env, dsn, fake), "CARI_REEMBED_INTERVAL_S": "0"}
    command = [sys.executable, "-m", "cari.cli", "serve", "--port", str(port)]
    with log.open("wb") as out:
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, server)
        answered = httpx.get(f"{url}/v1/collections", headers={"X-Request-ID": "serve-1"})
        assert answered.headers["x-request-id"] == "serve-1"
    finally:
        server.terminate()
        server.wait(30)
    lines = [json.loads(line) for line in log.read_text().splitlines()]  # every line is JSON
    assert all({"time", "level", "logger", "message", "request_id"} <= set(line) for line in lines)
    # Cari's own INFO line, and the access log line of the request with its id.
    assert any(line["logger"] == "cari.cli.server" and line["level"] == "INFO" for line in lines)
    access = [line for line in lines if line["logger"] == "uvicorn.access"]
    assert [line["request_id"] for line in access if "/v1/collections" in line["message"]] == [
        "serve-1"
    ]


def test_serve_at_a_terminal_writes_text_lines_and_says_where_to_go(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    """Run from a terminal (here a pseudo-terminal), `cari serve` logs text lines for a person,
    the first ones giving the address of the console and of the API's docs."""
    port = free_port()
    env = {**cli_env(clean_env, dsn, fake), "CARI_REEMBED_INTERVAL_S": "0"}
    command = [sys.executable, "-m", "cari.cli", "serve", "--port", str(port)]
    terminal, end = pty.openpty()
    server = subprocess.Popen(command, env=env, stdin=end, stdout=end, stderr=end)
    os.close(end)
    output = bytearray()

    def drain() -> None:  # the server would block on a full terminal
        with contextlib.suppress(OSError):  # EIO once the server is gone
            while chunk := os.read(terminal, 4096):
                output.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, server)
        assert httpx.get(f"{url}/readyz").status_code == 200
    finally:
        server.terminate()
        server.wait(30)
        reader.join(30)
        os.close(terminal)
    lines = output.decode(errors="replace").splitlines()
    assert lines and not any(line.lstrip().startswith("{") for line in lines), lines
    assert any(
        f"serving {url}: the search console at {url}/console, the API at {url}/docs" in line
        for line in lines
    ), lines


def test_metrics_are_open_like_the_probes_and_outside_the_schema(dsn: str) -> None:
    with app_client(dsn, api_keys="secret") as client:
        assert client.get("/v1/collections").status_code == 401
        assert client.get("/metrics").status_code == 200
        assert "/metrics" not in client.get("/docs/openapi.json").json()["paths"]
