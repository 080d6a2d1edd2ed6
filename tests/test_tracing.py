"""Traces as a collector receives them: a real `cari serve` exports OTLP/HTTP to a local
receiver, which decodes the protobuf requests with OpenTelemetry's own message types. A search's
trace holds its request's server span, named by route, and a child span per search stage."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from bench.load import free_port
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.conftest import app_client, cli_env
from tests.fake_openai import FakeOpenAI
from tests.local_server import LocalServer

SEARCH = "POST /v1/collections/{collection}/search"
# The search's caller's trace (W3C Trace Context): its trace id and span, sampled.
CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
# The server spans of `exercise`'s requests (the probe is not traced).
REQUESTS = ["POST /v1/collections", "POST /v1/collections/{collection}/documents", SEARCH, "GET"]
# A hybrid search asking a price ("harga") runs every stage but `rerank` (no reranker here).
STAGES = {"decompose", "lexemes", "keyword", "embed", "vector", "fuse", "relevance", "route"}
STAGES |= {"fetch", "structured"}
DOCUMENTS = [
    {"id": "brio", "title": "Honda Brio", "text": "Honda Brio: mesin bensin 1.2 liter, irit."},
    {"id": "avanza", "title": "Toyota Avanza", "text": "Toyota Avanza: tujuh kursi, bensin."},
]


class Receiver(LocalServer):
    """An OTLP/HTTP trace receiver: keeps every span posted to /v1/traces, with its service."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, Span]] = []  # (service.name, span)
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                if self.path != "/v1/traces" or (
                    self.headers["content-type"] != "application/x-protobuf"
                ):
                    self.send_error(404)
                    return
                request = ExportTraceServiceRequest.FromString(body)
                with receiver.lock:
                    for resource in request.resource_spans:
                        service = attributes(resource.resource.attributes)["service.name"]
                        for scope in resource.scope_spans:
                            receiver.spans += [(service, span) for span in scope.spans]
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        super().__init__(ThreadingHTTPServer(("127.0.0.1", 0), Handler))

    def received(self) -> list[tuple[str, Span]]:
        with self.lock:
            return list(self.spans)


def attributes(values: Any) -> dict[str, Any]:
    """OTLP's key-value list as a dict of plain values."""
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in values}


@contextmanager
def serving(env: dict[str, str], log: Path) -> Iterator[str]:
    """`cari serve` with `env`, its log lines in `log`: its base URL once ready."""
    port = free_port()
    command = [sys.executable, "-m", "cari.cli", "serve", "--port", str(port)]
    with log.open("wb") as out:
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while server.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        assert server.poll() is None, log.read_text()
        yield url
    finally:
        server.terminate()
        server.wait(30)


def exercise(url: str, key: dict[str, str]) -> None:
    """A collection, two documents, a search (its request id `search-1`, in the trace
    `CALLER`), each with the headers `key`, a probe, and a path no route matches."""
    created = httpx.post(f"{url}/v1/collections", json={"name": "cars"}, headers=key)
    assert created.status_code == 201
    added = httpx.post(
        f"{url}/v1/collections/cars/documents", json={"documents": DOCUMENTS}, headers=key
    )
    assert added.status_code == 200 and added.json()["rejected"] == []
    found = httpx.post(
        f"{url}/v1/collections/cars/search",
        json={"query": "harga mobil bensin irit", "threshold": 0},
        headers={"X-Request-ID": "search-1", "traceparent": CALLER, **key},
    )
    assert found.status_code == 200 and found.json()["results"]
    assert httpx.get(f"{url}/healthz").status_code == 200
    assert httpx.get(f"{url}/no/such/cars").status_code == 404


def environment(clean_env: dict[str, str], dsn: str, fake: FakeOpenAI) -> dict[str, str]:
    # Batches of spans go out every 50 ms instead of every 5 s: the test waits for them.
    env = {"CARI_REEMBED_INTERVAL_S": "0", "OTEL_BSP_SCHEDULE_DELAY": "50"}
    return {**cli_env(clean_env, dsn, fake), **env}


def servers(received: list[tuple[str, Span]]) -> list[str]:
    return [span.name for _, span in received if span.kind == Span.SPAN_KIND_SERVER]


def log_lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_search_is_traced_from_its_request_to_each_stage(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str], tmp_path: Path
) -> None:
    log = tmp_path / "serve.log"
    with app_client(dsn, fake) as client:  # a stored key, made while the API is open
        body = {"name": "t", "actions": ["search", "documents:write", "collections:manage"]}
        stored = client.post("/v1/keys", json={**body, "collections": ["*"]}).json()
    key = {"Authorization": f"Bearer {stored['secret']}"}
    with Receiver() as receiver:
        env = {
            **environment(clean_env, dsn, fake),
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
        }
        with serving(env, log) as url:
            exercise(url, key)
            deadline = time.monotonic() + 10
            while len(servers(receiver.received())) < len(REQUESTS) and time.monotonic() < deadline:
                time.sleep(0.05)
    spans = [span for _, span in receiver.received()]
    assert {service for service, _ in receiver.received()} == {"cari"}

    # One server span per request, named by its route template (the collection's name is in
    # no name), the unmatched path by its method alone; the probe is not traced.
    assert sorted(servers(receiver.received())) == sorted(REQUESTS)
    (search,) = [span for span in spans if span.name == SEARCH]
    tags = attributes(search.attributes)
    assert tags["http.route"] == "/v1/collections/{collection}/search"
    assert tags["cari.request_id"] == "search-1"
    # The key that sent it, by its prefix; its secret is in no span.
    assert tags["cari.api_key"] == stored["key"]["id"]
    assert stored["secret"].encode() not in b"".join(s.SerializeToString() for s in spans)
    _, trace_id, parent, _ = CALLER.split("-")  # the caller's trace, continued
    assert (search.trace_id.hex(), search.parent_span_id.hex()) == (trace_id, parent)
    assert len({span.trace_id for span in spans}) == len(REQUESTS)  # a trace per request

    # Its trace: the stages the search ran, each a child of its server span, within its time;
    # the question's analysis is part of the keyword stage, which reads it first.
    stages = [span for span in spans if span.trace_id == search.trace_id and span is not search]
    assert sorted(span.name for span in stages) == sorted(STAGES)
    (keyword,) = [span for span in stages if span.name == "keyword"]
    for span in stages:
        parent = keyword if span.name == "lexemes" else search
        assert span.parent_span_id == parent.span_id
        assert span.kind == Span.SPAN_KIND_INTERNAL
        assert parent.start_time_unix_nano <= span.start_time_unix_nano
        assert span.start_time_unix_nano < span.end_time_unix_nano <= parent.end_time_unix_nano

    # The request's log lines name its trace and span.
    access = [
        line
        for line in log_lines(log)
        if line["logger"] == "uvicorn.access" and "/search" in line["message"]
    ]
    assert [(line["trace_id"], line["span_id"]) for line in access] == [
        (search.trace_id.hex(), search.span_id.hex())
    ]


def test_without_an_endpoint_nothing_is_traced(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str], tmp_path: Path
) -> None:
    """Other OpenTelemetry settings without an endpoint do not turn traces on: no provider, so
    no request has a trace (with one, every log line of a request names its trace)."""
    log = tmp_path / "serve.log"
    env = {**environment(clean_env, dsn, fake), "OTEL_SERVICE_NAME": "cari-test"}
    with serving(env, log) as url:
        exercise(url, {})  # the API open: no key yet
    lines = log_lines(log)
    assert len([line for line in lines if line["logger"] == "uvicorn.access"]) >= 5
    assert not [line for line in lines if "trace_id" in line or "span_id" in line]


def test_an_endpoint_without_the_extra_or_over_grpc_stops_serve_in_one_line(
    clean_env: dict[str, str],
) -> None:
    endpoint = {**clean_env, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    # The `otel` extra missing: the SDK, exporter and instrumentation (the API is there, the MCP
    # SDK depends on it).
    without_sdk = (
        "import sys; sys.modules.update(dict.fromkeys(['opentelemetry.sdk',"
        " 'opentelemetry.exporter', 'opentelemetry.instrumentation'])); "
        "from cari.cli import main; main()"
    )
    cases = [
        (
            ["-c", without_sdk],
            endpoint,
            "Error: OTEL_EXPORTER_OTLP_ENDPOINT is set but tracing is not installed "
            "(opentelemetry.exporter.otlp is missing): pip install -e '.[otel]' in Cari's "
            "checkout, or unset it",
        ),
        (
            ["-m", "cari.cli"],
            {**endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "Error: OTEL_EXPORTER_OTLP_PROTOCOL: Cari sends traces over OTLP/HTTP only "
            "(http/protobuf)",
        ),
    ]
    runs = [  # side by side: each spends its time importing
        subprocess.Popen(
            [sys.executable, *command, "serve", "--port", str(free_port())],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for command, env, _ in cases
    ]
    for run, (_, _, message) in zip(runs, cases, strict=True):
        out, err = run.communicate(timeout=60)
        assert (run.returncode, out, err.splitlines()) == (1, "", [message])
