"""schemathesis against the app on a real database: requests generated from the OpenAPI
document (its examples, then values at and past its bounds, then random ones) for every
operation, each answer checked against the document. Zero server errors, zero mismatches.

The app runs through schemathesis's ASGI transport, with its lifespan (the pool). The
collection `faq` the examples name holds a document, a catalog item and a rate, and gets them
back after a request deleted them, so each operation also meets real data. Bounded and
derandomized: the same cases every run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import pytest
import requests
import schemathesis
from litestar.serialization import encode_json
from schemathesis.checks import not_a_server_error
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from cari.api.app import create_app
from cari.settings import LOCAL_EMBEDDING_DIMENSION
from tests.conftest import settings_for
from tests.fake_openai import FakeOpenAI

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
CONFIG = {
    "seed": 24,
    # Fuzzing takes this many cases per operation, after the examples and the coverage phase.
    "generation": {"max-examples": 8, "deterministic": True},
    "phases": {"stateful": {"enabled": False}},
}
# Each operation's statuses, for the check that it met real data.
STATUSES: dict[str, set[int]] = {}


def seed(client: requests.Session) -> None:
    """The collection the document's examples name, with something in each of its stores."""
    if client.get("/v1/collections/faq").status_code == 404:
        created = client.post("/v1/collections", json={"name": "faq", "language": "indonesian"})
        assert created.status_code == 201, created.text
    document = {"title": "Cicilan", "text": "Tenor 12 sampai 60 bulan, DP mulai 20 persen."}
    item = {"sku": "CIVIC-RS", "name": "Honda Civic", "variant": "RS", "price": 600000000}
    rate = {"provider": "BCA Finance", "tenor_months": 36, "rate": 0.05, "rate_type": "flat"}
    for response in (
        client.put("/v1/collections/faq/documents/faq/cicilan", json=document),
        client.post("/v1/collections/faq/catalog", json=[item]),
        client.post("/v1/collections/faq/financing-rates", json=[rate]),
    ):
        assert response.status_code == 200, response.text


def document() -> dict[str, Any]:
    """The app's OpenAPI document, which it makes without a database."""
    app = create_app(settings_for("postgresql://cari@127.0.0.1:9/cari"))
    return cast(dict[str, Any], json.loads(encode_json(app.openapi_schema.to_schema())))


DOCUMENT = document()
api = schemathesis.openapi.from_dict(DOCUMENT, config=schemathesis.Config.from_dict(CONFIG))


@pytest.fixture(scope="module")
def client(module_dsn: str) -> Iterator[requests.Session]:
    """A client of the app, which is up (its lifespan started) and seeded."""
    with FakeOpenAI(dimension=LOCAL_EMBEDDING_DIMENSION) as fake:
        settings = settings_for(
            module_dsn, reembed_interval_s=0, embedding_max_retries=0, **fake.settings()
        )
        with asgi.get_client(create_app(settings, module_dsn)) as session:
            assert session.get("/docs/openapi.json").json() == DOCUMENT  # the one tested
            seed(session)
            yield session
        # Close the pool (the app's lifespan) before the database is dropped.
        asgi.shutdown_lifespans()
    failed = sorted(op for op, codes in STATUSES.items() if not any(c < 300 for c in codes))
    assert not failed, f"never succeeded, so never checked against real data: {failed}"


# The app serves in a thread of its own, where psycopg_pool seeds each new connection's expiry
# from the global `random`; when that happens while Hypothesis draws a case in this thread,
# Hypothesis sees the global state change and blames the strategy. Nothing here draws from
# `random`: the warning is about the other thread, so it is not an error of this test.
@pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies"
    ":hypothesis.errors.HypothesisDeprecationWarning"
)
@api.parametrize()
def test_the_api_answers_as_documented(case: schemathesis.Case, client: requests.Session) -> None:
    response = case.call_and_validate(base_url=f"http://{asgi.HOST}", session=client, checks=CHECKS)
    if response.request.method == case.method:  # not one of the coverage phase's other methods
        STATUSES.setdefault(case.operation.label, set()).add(response.status_code)
    if case.method in ("DELETE", "PATCH") and response.status_code < 300:
        seed(client)
