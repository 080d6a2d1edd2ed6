"""`cari.client` against a real `cari serve` (a subprocess on a real PostgreSQL, embedding through
the local fake): every method round-trips, errors come back typed, the streamed answer parses,
listings follow their cursors, and uploads wait out a 503 with Retry-After. Each scenario runs
with the blocking client and with the async one (driven from the test through an event loop in
a thread)."""

from __future__ import annotations

import functools
import inspect
import json
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

import httpx
import msgspec
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from httpx_sse import connect_sse

from cari.client import (
    AnswerRequest,
    AsyncClient,
    CatalogItemIn,
    Citations,
    Client,
    CollectionCreate,
    CollectionUpdate,
    ConflictError,
    DocumentIn,
    Done,
    FinancingRateIn,
    InvalidInputError,
    LLMChunk,
    Metadata,
    NotFoundError,
    Retries,
    SearchComplete,
    SearchRequest,
    Synonyms,
    TransportError,
    UnauthorizedError,
    UnavailableError,
    events,
)
from tests.conftest import cli_env
from tests.fake_openai import FakeOpenAI
from tests.local_server import LocalServer
from tests.test_cli import free_port, serving

T = TypeVar("T")


class Blocking:
    """The async client called from blocking test code: each coroutine runs on the portal's
    event loop, and an async iterator is collected into a list."""

    def __init__(self, client: AsyncClient, portal: BlockingPortal) -> None:
        self._client = client
        self._portal = portal

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)
        if inspect.isasyncgenfunction(method):
            return lambda *a, **k: self._portal.call(_collect, functools.partial(method, *a, **k))
        return lambda *a, **k: self._portal.call(functools.partial(method, *a, **k))


async def _collect(items: Callable[[], AsyncIterator[T]]) -> list[T]:
    return [item async for item in items()]


def connect(kind: str, base_url: str, **options: Any) -> Iterator[Any]:
    """A blocking client, or the async one behind `Blocking`."""
    if kind == "sync":
        with Client(base_url, **options) as client:
            yield client
        return
    with start_blocking_portal() as portal:
        client = AsyncClient(base_url, **options)
        try:
            yield Blocking(client, portal)
        finally:
            portal.call(client.aclose)


@pytest.fixture(params=["sync", "async"])
def cari(request: pytest.FixtureRequest, base_url: str) -> Iterator[Any]:
    yield from connect(request.param, base_url)


def _name(request: pytest.FixtureRequest) -> str:
    """A collection name of this test's own (the server is shared by the module)."""
    return "c" + str(abs(hash(request.node.nodeid)) % 10**12)


DOCUMENTS = [
    DocumentIn(
        id="manual/tires",
        title="Tires",
        text="Rotate the tires every ten thousand kilometres to keep the tread even.",
        metadata={"year": 2021},
        source="manuals",
    ),
    DocumentIn(
        id="manual/oil",
        title="Oil",
        text="Change the engine oil every six months or five thousand kilometres.",
        metadata={"year": 2019},
        source="manuals",
    ),
    DocumentIn(id="faq/wash", title="Washing", text="Wash the car by hand with mild soap."),
]


def test_every_method_round_trips(cari: Any, request: pytest.FixtureRequest) -> None:
    name = _name(request)
    assert cari.get_health().status == "ok"
    ready = cari.get_readiness()
    assert ready.status == "ready" and ready.schema

    created = cari.create_collection(CollectionCreate(name=name, language="english", top_k=3))
    assert (created.name, created.language, created.top_k) == (name, "english", 3)
    assert name in [c.name for c in cari.list_collections()]
    assert cari.update_collection(name, CollectionUpdate(top_k=4)).top_k == 4
    assert cari.get_collection(name).top_k == 4

    added = cari.add_documents(name, DOCUMENTS, batch_size=2)  # two requests
    assert [r.id for r in added.results] == [d.id for d in DOCUMENTS]
    assert {r.status for r in added.results} == {"created"} and added.rejected == []
    put = cari.put_document(name, "faq/wash", DocumentIn(text="Wash it in the shade."))
    assert [(r.id, r.status) for r in put.results] == [("faq/wash", "updated")]
    odd = "notes/50% off? yes #1"  # path characters in an id are sent escaped
    assert cari.put_document(name, odd, DocumentIn(text="Half price.")).results[0].id == odd
    assert cari.get_document(name, odd).id == odd
    cari.delete_document(name, odd)
    document = cari.get_document(name, "manual/tires")
    assert document.title == "Tires" and document.chunks[0].content.startswith("Rotate")

    rules = Synonyms(rules=["tyres, tires"])
    assert cari.put_synonyms(name, rules) == rules == cari.get_synonyms(name)
    found = cari.search_collection(name, SearchRequest(query="rotate the tyres", mode="keyword"))
    assert found.results[0].document_id == "manual/tires", found
    assert "<mark>tires</mark>" in (found.results[0].highlight or ""), found.results[0]
    answered = cari.answer_question(name, AnswerRequest(query="rotate the tires", mode="keyword"))
    assert answered.sources and "1" in answered.citations, answered
    tool = cari.get_search_tool(name)
    assert tool.type == "function" and "query" in tool.function.parameters["properties"]

    cari.delete_document(name, "faq/wash")
    assert [d.id for d in cari.list_documents(name)] == ["manual/oil", "manual/tires"]
    assert cari.clear_documents(name).deleted == 2

    item = CatalogItemIn(sku="CIVIC/RS", name="Honda Civic", variant="RS", price=Decimal("600e6"))
    assert [r.status for r in cari.add_catalog_items(name, [item]).results] == ["created"]
    assert cari.get_catalog_item(name, "CIVIC/RS").price == Decimal("600000000.00")
    assert [i.sku for i in cari.list_catalog_items(name, limit=10)] == ["CIVIC/RS"]
    cari.delete_catalog_item(name, "CIVIC/RS")
    assert cari.list_catalog_items(name) == []
    cari.add_catalog_items(name, [item])
    assert cari.clear_catalog(name).deleted == 1

    rate = FinancingRateIn(provider="BCA", tenor_months=36, rate=Decimal("0.05"), rate_type="flat")
    assert [r.status for r in cari.add_financing_rates(name, [rate]).results] == ["created"]
    (listed,) = cari.list_financing_rates(name)
    assert (listed.provider, listed.rate) == ("BCA", Decimal("0.05"))
    assert cari.clear_financing_rates(name).deleted == 1

    cari.delete_collection(name)
    with pytest.raises(NotFoundError):
        cari.get_collection(name)


def test_errors_come_back_typed(cari: Any, request: pytest.FixtureRequest) -> None:
    name = _name(request)
    with pytest.raises(NotFoundError) as missing:
        cari.search_collection("no-such-collection", SearchRequest(query="x"))
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    assert "no-such-collection" in missing.value.detail

    cari.create_collection(CollectionCreate(name=name))
    with pytest.raises(ConflictError) as exists:
        cari.create_collection(CollectionCreate(name=name))
    assert exists.value.code == "conflict"

    # The client sends what it is given: the server's checks name the field.
    with pytest.raises(InvalidInputError) as invalid:
        cari.search_collection(name, SearchRequest(query="x", top_k=99))
    assert invalid.value.status == 422
    assert [e["field"] for e in invalid.value.errors] == ["top_k"]
    with pytest.raises(InvalidInputError) as bad_filter:
        cari.search_collection(name, SearchRequest(query="x", filters={"colour": "red"}))
    assert [e["field"] for e in bad_filter.value.errors] == ["filters.colour"]
    with pytest.raises(NotFoundError):
        cari.get_document(name, "nothing/here")
    with pytest.raises(InvalidInputError) as bad_rule:
        cari.put_synonyms(name, Synonyms(rules=["a => b => c"]))
    assert [e["field"] for e in bad_rule.value.errors] == ["rules"]


def test_the_api_key_is_sent_as_a_bearer_token(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    env = {**cli_env(clean_env, dsn, fake), "CARI_API_KEYS": "key-one"}
    with serving(env) as url:
        with Client(url) as anonymous, pytest.raises(UnauthorizedError) as refused:
            anonymous.list_collections()
        assert (refused.value.status, refused.value.code) == (401, "unauthorized")
        with Client(url, api_key="key-one") as cari:
            assert cari.list_collections() == []
            assert cari.get_health().status == "ok"


def test_nothing_listening_is_a_transport_error() -> None:
    with (
        Client(f"http://127.0.0.1:{free_port()}", timeout=2) as client,
        pytest.raises(TransportError),
    ):
        client.get_health()


def test_the_streamed_answer_parses_into_typed_events(
    cari: Any, request: pytest.FixtureRequest
) -> None:
    name = _name(request)
    cari.create_collection(CollectionCreate(name=name, language="english"))
    cari.add_documents(name, DOCUMENTS)
    question = AnswerRequest(query="rotate the tires", mode="keyword")
    streamed = list(cari.answer_question_stream(name, question))
    kinds = [type(event) for event in streamed]
    assert kinds[0] is SearchComplete and kinds[-3:] == [Citations, Metadata, Done], kinds
    assert set(kinds[1:-3]) == {LLMChunk}
    sources = streamed[0].sources  # type: ignore[union-attr]
    assert sources[0].result.document_id == "manual/tires"
    whole = cari.answer_question(name, question)
    text = "".join(event.text for event in streamed if isinstance(event, LLMChunk))
    assert text == whole.answer
    assert streamed[-3].citations == whole.citations  # type: ignore[union-attr]
    with pytest.raises(NotFoundError):  # a problem before the stream starts is raised
        list(cari.answer_question_stream("no-such-collection", question))


def test_the_stream_events_carry_every_field_the_server_sends(
    base_url: str, request: pytest.FixtureRequest
) -> None:
    """Each event decodes to a struct that, encoded again, is what the server sent: decoding
    loses nothing."""
    name = _name(request)
    with Client(base_url) as client:
        client.create_collection(CollectionCreate(name=name, language="english"))
        client.add_documents(name, DOCUMENTS)
    question = {"query": "rotate the tires", "mode": "keyword"}
    with (
        httpx.Client(base_url=base_url) as http,
        connect_sse(http, "POST", f"/v1/collections/{name}/answer", json=question) as source,
    ):
        sent = list(source.iter_sse())
    assert {event.event for event in sent} >= {"search_complete", "llm_chunk", "done"}
    for event in sent:
        decoded = events.decode(event)
        assert msgspec.to_builtins(decoded) == json.loads(event.data), event.event


def test_listing_follows_every_page(cari: Any, request: pytest.FixtureRequest) -> None:
    name = _name(request)
    cari.create_collection(CollectionCreate(name=name))
    documents = [DocumentIn(id=f"d{i:02}", text=f"Document number {i}.") for i in range(7)]
    cari.add_documents(name, documents + DOCUMENTS)
    every = [d.id for d in cari.list_documents(name, limit=2)]  # five pages
    assert every == sorted(d.id for d in documents + DOCUMENTS)
    recent = cari.list_documents(name, limit=1, metadata={"year": {"gte": 2020}})
    assert [d.id for d in recent] == ["manual/tires"]
    manuals = cari.list_documents(name, source="manuals", limit=1)
    assert [d.id for d in manuals] == ["manual/oil", "manual/tires"]


# -- retries -----------------------------------------------------------------------------------


class Front(LocalServer):
    """A front for Cari over real HTTP that answers the first `busy` requests 503 with a
    Retry-After, as Cari does when its database is busy, then passes every request on."""

    def __init__(self, upstream: str, busy: int, retry_after: str = "1") -> None:
        self.upstream = upstream
        self.busy = busy
        self.retry_after = retry_after
        self.seen: list[tuple[str, float]] = []
        self._lock = threading.Lock()
        server = ThreadingHTTPServer(("127.0.0.1", 0), _FrontHandler)
        server.front = self  # type: ignore[attr-defined]
        super().__init__(server)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class _FrontHandler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _relay(self) -> None:
        front: Front = self.server.front  # type: ignore[attr-defined]
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        with front._lock:
            front.seen.append((self.command, time.monotonic()))
            busy = front.busy > 0
            front.busy -= busy
        if busy:
            problem = {"status": 503, "code": "database_busy", "detail": "database busy"}
            self._answer(503, json.dumps(problem).encode(), {"Retry-After": front.retry_after})
            return
        forwarded = urllib.request.Request(
            front.upstream + self.path,
            data=body or None,
            method=self.command,
            headers={"content-type": self.headers.get("content-type", "application/json")},
        )
        try:
            with urllib.request.urlopen(forwarded, timeout=30) as answer:
                self._answer(answer.status, answer.read(), {})
        except urllib.error.HTTPError as error:
            self._answer(error.code, error.read(), {})

    def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in {"content-type": "application/json", **headers}.items():
            self.send_header(key, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _relay


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_uploads_wait_out_a_503_with_retry_after(
    kind: str, base_url: str, request: pytest.FixtureRequest
) -> None:
    name = _name(request)
    with Client(base_url) as direct:
        direct.create_collection(CollectionCreate(name=name))
    with Front(base_url, busy=2) as front:
        for cari in connect(kind, front.base_url):
            added = cari.add_documents(name, DOCUMENTS)
    assert [r.status for r in added.results] == ["created"] * 3
    (first, _), (second, at_second), (third, at_third) = front.seen
    assert (first, second, third) == ("POST",) * 3
    assert at_third - at_second >= 0.9  # the server asked for a second
    with Client(base_url) as direct:
        assert len(list(direct.list_documents(name))) == 3


def test_retries_give_up_with_the_problem(base_url: str) -> None:
    with (
        Front(base_url, busy=3, retry_after="0") as front,
        Client(front.base_url, retries=Retries(max_retries=2)) as cari,
        pytest.raises(UnavailableError) as unavailable,
    ):
        cari.list_collections()
    assert len(front.seen) == 3  # the first try and two more
    assert (unavailable.value.code, unavailable.value.retry_after) == ("database_busy", 0)
