"""schemathesis against the app on a real database: requests generated from the OpenAPI
document (its examples, then values at and past its bounds, then random ones) for every
operation, each answer checked against the document with every check schemathesis has (the
CLI's `--checks all`: a schema-valid request must be accepted, an invalid one refused, ...);
then stateful scenarios, each from the same seeded state, that follow the document's links from
a new collection to its documents and their deletion (a deleted document must be gone). Zero
server errors, zero failing checks.

The app runs through schemathesis's ASGI transport, with its lifespan (the pool). The
collection `faq` the examples name holds a document, a catalog item and a rate, and gets them
back after a request deleted them, so each operation also meets real data. Bounded and
derandomized: the same cases every run.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from typing import Any, cast

import msgspec
import psycopg_pool.base
import pytest
import requests
import schemathesis
from hypothesis import settings as hypothesis_settings
from hypothesis.internal.conjecture import providers
from hypothesis.internal.constants_ast import Constants
from litestar.serialization import encode_json
from schemathesis.openapi.checks import RejectedPositiveData
from schemathesis.python import asgi

from cari.api.app import create_app
from cari.api.openapi import NOT_BLANK_NUL_FREE, RULE
from cari.schema.catalog import FRACTION_BELOW, FRACTION_TEXT, PRICE_TEXT
from cari.schema.collections import CollectionCreate
from cari.schema.consistency import HEADER, TOKEN_PATTERN
from cari.settings import LOCAL_EMBEDDING_DIMENSION
from tests.conftest import app_client, settings_for
from tests.fake_openai import FakeOpenAI

CONFIG = {
    "seed": 24,
    # Fuzzing takes this many cases per operation, after the examples and the coverage phase.
    "generation": {"max-examples": 8, "deterministic": True},
    # Every check, as the CLI's `--checks all` (a response time limit aside).
    "checks": {"enabled": True},
}
# What the document states in words, for JSON Schema cannot: a 422 naming one of these fields is
# the server applying its description to a schema-valid request. A relevance scale's floor below
# its ceiling; a text-search configuration the database has (its own set, which `CREATE TEXT
# SEARCH CONFIGURATION` grows); a synonym rule's grammar (two terms, or terms both sides of
# `=>`; none twice; each with a searchable word in the collection's language).
# A PUT's body id differing from the path's, a SKU twice in one request, and a financing rate's
# provider, tenor and rate type twice in one request (JSON Schema's uniqueItems compares whole
# items), too. Every other rule is in the schema: amounts, tenors, rate types, the metadata
# filter's grammar, and that no string the server stores holds NUL.
STATED_IN_WORDS = {"relevance_scale", "language", "rules", "id", "sku", "provider"}
# Stateful runs: scenarios, each of up to this many steps.
STATEFUL = {"max_examples": 16, "stateful_step_count": 8}
# Each operation's statuses, for the check that it met real data.
STATUSES: dict[str, set[int]] = {}


def seed(client: requests.Session) -> None:
    """The collection the document's examples name, with something in each of its stores."""
    if client.get("/v1/collections/faq").status_code == 404:
        created = client.post("/v1/collections", json={"name": "faq", "language": "indonesian"})
        assert created.status_code == 201, created.text
    else:  # its settings back to the defaults, after a PATCH
        defaults = {k: v for k, v in CREATE_DEFAULTS.items() if k not in ("name", "embedder")}
        changed = client.patch("/v1/collections/faq", json=defaults)
        assert changed.status_code == 200, changed.text
    document = {"title": "Cicilan", "text": "Tenor 12 sampai 60 bulan, DP mulai 20 persen."}
    item = {"sku": "CIVIC-RS", "name": "Honda Civic", "variant": "RS", "price": 600000000}
    rate = {"provider": "BCA Finance", "tenor_months": 36, "rate": 0.05, "rate_type": "flat"}
    for response in (
        client.put("/v1/collections/faq/documents/faq/cicilan", json=document),
        client.post("/v1/collections/faq/catalog", json=[item]),
        client.post("/v1/collections/faq/financing-rates", json=[rate]),
    ):
        assert response.status_code == 200, response.text


CREATE_DEFAULTS = msgspec.to_builtins(CollectionCreate(name="faq", language="indonesian"))


def document() -> dict[str, Any]:
    """The app's OpenAPI document, which it makes without a database."""
    app = create_app(settings_for("postgresql://cari@127.0.0.1:9/cari"))
    return cast(dict[str, Any], json.loads(encode_json(app.openapi_schema.to_schema())))


DOCUMENT = document()
# Not the keys' own operations: the first key stored asks every later request for a key, and
# this app serves without one (tests/test_keys.py runs them with a key).
api = schemathesis.openapi.from_dict(
    DOCUMENT, config=schemathesis.Config.from_dict(CONFIG)
).exclude(tag="keys")
# Stateful scenarios send schema-valid requests only: a refused step would end the scenario's
# path along the links before it reaches the deletes (single operations test refusals above).
POSITIVE = {**CONFIG, "generation": {**CONFIG["generation"], "mode": "positive"}}
positive_api = schemathesis.openapi.from_dict(
    DOCUMENT, config=schemathesis.Config.from_dict(POSITIVE)
).exclude(tag="keys")


@api.hook
def filter_failure(
    _context: schemathesis.HookContext,
    failure: schemathesis.Failure,
    _case: schemathesis.Case,
    response: schemathesis.Response,
) -> bool:
    """Keep every failure but a schema-valid request refused for a rule stated in words."""
    if not isinstance(failure, RejectedPositiveData) or response.status_code != 422:
        return True
    fields = {error["field"] for error in response.json().get("errors", [])}
    # A field path's indexes and keys (`[0]`, `["a key"]`) off: `documents[0].metadata["k"]`
    # names documents and metadata.
    named = [set(re.sub(r'\[(?:\d+|"(?:[^"\\]|\\.)*")\]', "", f).split(".")) for f in fields]
    token = response.request.headers.get(HEADER)
    if fields == {HEADER} and token is not None and not re.match(TOKEN_PATTERN, token):
        return False  # schemathesis's coverage phase sent "0" as a valid token: its slip
    return not named or not all(parts & STATED_IN_WORDS for parts in named)


positive_api.hook(filter_failure)


@pytest.fixture(scope="module", autouse=True)
def same_cases_whatever_ran_before() -> Iterator[None]:
    """The cases this module draws depend on the seed alone, not on what else the process did.

    Two things outside the seed fed the draws, so that a stateful run reached a document's
    delete in one run and not in the next. Hypothesis mixes into its draws the constants of
    every project module loaded so far (`cari.*`, `bench.*`): a set that grows with the tests
    that ran earlier in the process, and mid-run when the app imports a module lazily. And the
    app's pool, in a thread of its own, draws from the global `random` that schemathesis draws
    from (each connection's expiry jitter), whenever a connection comes up: the app's lifespan
    restarts after each test (schemathesis ends it at teardown), so its pool opens again while
    the next cases are drawn. Here Hypothesis sees no project constants, and the pool draws
    from a generator of its own. Both are private names: a release that renames them fails
    here, loudly.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(providers, "_get_local_constants", Constants)
        patch.setattr(psycopg_pool.base, "random", random.Random().random)
        providers.CONSTANTS_CACHE.cache.clear()  # the constants drawn from before this module
        yield
    providers.CONSTANTS_CACHE.cache.clear()


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


@api.parametrize()
def test_the_api_answers_as_documented(case: schemathesis.Case, client: requests.Session) -> None:
    response = case.call_and_validate(base_url=f"http://{asgi.HOST}", session=client)
    if response.request.method == case.method:  # not one of the coverage phase's other methods
        STATUSES.setdefault(case.operation.label, set()).add(response.status_code)
    if case.method in ("DELETE", "PATCH") and response.status_code < 300:
        seed(client)


def test_stateful_runs_follow_links_to_document_deletes(client: requests.Session) -> None:
    """Scenarios along the document's links: create a collection, add documents, read, change
    and delete them, every answer checked as above."""
    reached: dict[str, set[int]] = {}

    class Scenarios(positive_api.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            # Each scenario starts from the same server state, so that hypothesis replaying
            # one meets the same answers (a collection left by an earlier scenario would turn
            # a create into a 409 and empty the link's bundle: FlakyStrategyDefinition).
            for collection in client.get("/v1/collections").json():
                deleted = client.delete(f"/v1/collections/{collection['name']}")
                assert deleted.status_code == 204, deleted.text
            seed(client)

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            return {"base_url": f"http://{asgi.HOST}", "session": client}

        def after_call(self, response: Any, case: schemathesis.Case) -> None:
            super().after_call(response, case)
            reached.setdefault(case.operation.label, set()).add(response.status_code)

    Scenarios.run(
        settings=hypothesis_settings(
            Scenarios.TestCase.settings, derandomize=True, database=None, **STATEFUL
        )
    )
    deleted = reached.get("DELETE /v1/collections/{collection}/documents/{document_id}", set())
    # Every operation's statuses in full (a dict's repr is cut short in the report).
    assert 204 in deleted, "; ".join(f"{op}: {sorted(codes)}" for op, codes in reached.items())


def test_the_document_states_the_rules_the_server_enforces() -> None:
    """Issue 37's ten: each in the schema, or (floor below ceiling) in the description."""
    schemas = DOCUMENT["components"]["schemas"]
    paths = DOCUMENT["paths"]
    collection = "/v1/collections/{collection}"
    for route in ("catalog", "financing-rates"):
        body = paths[f"{collection}/{route}"]["post"]["requestBody"]["content"]
        assert body["application/json"]["schema"]["allOf"][0]["minItems"] == 1  # empty items
    assert schemas["NewDocument"]["required"] == ["id"]  # a new document's id
    assert schemas["DocumentBatch"]["properties"]["documents"]["items"]["$ref"].endswith(
        "/NewDocument"
    )
    assert {tuple(shape["required"]) for shape in schemas["DocumentIn"]["anyOf"]} == {
        ("text",),
        ("content",),
    }  # text (or content), not blank
    rule = schemas["Synonyms"]["properties"]["rules"]["items"]
    assert rule["minLength"] == 3 and rule["pattern"] == RULE  # no empty rule
    [cursor] = [
        p for p in paths[f"{collection}/documents"]["get"]["parameters"] if p["name"] == "cursor"
    ]
    assert cursor["schema"]["pattern"].startswith("^")  # the cursor's format
    [token] = [
        p for p in paths[f"{collection}/search"]["post"]["parameters"] if p["in"] == "header"
    ]
    assert token["schema"]["pattern"] == TOKEN_PATTERN  # the consistency token's format
    scale = schemas["CollectionUpdate"]["properties"]["relevance_scale"]["description"]
    assert "`cosine_floor` must be below `cosine_ceiling`" in scale
    assert schemas["CollectionCreate"]["properties"]["embedder"]["enum"] == ["local", None]


def test_the_document_states_languages_offsets_duplicates_tokens_and_rules() -> None:
    """The rules schemathesis found the server enforcing past the first ten: a language is an
    installed text-search configuration, a catalog offset a bigint, items and rates are unique,
    a GET's consistency token has the token's format, a synonym rule has two terms (or two
    sides), and any /v1 request may be answered 400 (a line the HTTP server cannot parse)."""
    schemas = DOCUMENT["components"]["schemas"]
    paths = DOCUMENT["paths"]
    collection = "/v1/collections/{collection}"
    for name in ("CollectionCreate", "CollectionUpdate", "DocumentIn", "NewDocument"):
        assert "installed" in schemas[name]["properties"]["language"]["description"], name
    [offset] = [
        p for p in paths[f"{collection}/catalog"]["get"]["parameters"] if p["name"] == "offset"
    ]
    assert offset["schema"]["maximum"] == 2**63 - 1
    for route in ("catalog", "financing-rates"):
        body = paths[f"{collection}/{route}"]["post"]["requestBody"]["content"]
        assert body["application/json"]["schema"]["allOf"][0]["uniqueItems"] is True
    rule = re.compile(schemas["Synonyms"]["properties"]["rules"]["items"]["pattern"])
    for good in ("a, b", "CRV,CR-V", "angsuran => cicilan", "a, b => c", "x=y, z"):
        assert rule.search(good), good
    for bad in ("00", "a,", ", b", "a =>", "=> b", " , ", "a\x00, b"):
        assert not rule.search(bad), bad
    for path, item in paths.items():
        for method, operation in item.items():
            if not path.startswith("/v1/"):
                continue
            assert "application/problem+json" in operation["responses"]["400"]["content"], path
            if method == "get":
                [token] = [p for p in operation["parameters"] if p["name"] == HEADER]
                assert token["in"] == "header" and token["schema"]["pattern"] == TOKEN_PATTERN


def test_requests_breaking_those_rules_get_the_documented_4xx(dsn: str) -> None:
    with app_client(dsn) as client:
        assert client.post("/v1/collections", json={"name": "kb"}).status_code == 201
        over = client.get("/v1/collections/kb/catalog", params={"offset": str(2**63)})
        assert over.status_code == 422 and over.json()["errors"][0]["field"] == "offset"
        at_most = client.get("/v1/collections/kb/catalog", params={"offset": str(2**63 - 1)})
        assert at_most.status_code == 200 and at_most.json() == []
        rate = {"provider": "BCA", "tenor_months": 36, "rate": 0.05, "rate_type": "flat"}
        twice = client.post("/v1/collections/kb/financing-rates", json=[rate, rate])
        assert twice.status_code == 422, twice.text
        item = {"sku": "A", "name": "B"}
        assert client.post("/v1/collections/kb/catalog", json=[item, item]).status_code == 422
        token = client.get("/v1/collections/kb", headers={HEADER: "0"})
        assert token.status_code == 422 and token.json()["errors"][0]["field"] == HEADER
        for rules in (["00"], ["a,"], ["=> b"]):
            refused = client.put("/v1/collections/kb/synonyms", json={"rules": rules})
            assert refused.status_code == 422, rules
        language = client.post("/v1/collections", json={"name": "x", "language": "nope"})
        assert language.status_code == 422, language.text


def test_a_blank_value_is_what_the_server_strips_to_nothing() -> None:
    """The pattern of a question, a document's text, a rule: refused exactly where str.strip()
    leaves nothing (U+001C alone passed it and was refused as empty; U+FEFF is a character)."""
    pattern = re.compile(NOT_BLANK_NUL_FREE)
    for code in range(1, 0x10000):
        character = chr(code)
        assert (pattern.search(character) is None) == (character.strip() == ""), hex(code)
    assert pattern.search(" \x1c\u3000 a ") and not pattern.search("\x1c\x85 ")


def refuses_nul(string: dict[str, Any]) -> bool:
    """Whether a string's schema refuses NUL: its pattern says so, or is a whole value made of
    characters it lists (a slug, digits; a currency, whose length is its pattern's)."""
    pattern = string.get("pattern", "")
    if "\\x00" in pattern:
        return True
    listed = not re.search(r"(?<!\\)\.|\[\^|\\[SDW]", pattern)
    whole = pattern.endswith("$") or string.get("maxLength") == 3 == string.get("minLength")
    return pattern.startswith("^") and whole and listed


def test_the_document_states_amounts_nul_and_the_metadata_filter() -> None:
    """Issue 37 item 12's remainder: a catalog item's price, a financing rate's numbers and type,
    that no string the server stores holds NUL, and the metadata filter's grammar."""
    schemas = DOCUMENT["components"]["schemas"]
    rate = schemas["FinancingRateIn"]["properties"]
    assert (rate["tenor_months"]["minimum"], rate["tenor_months"]["maximum"]) == (1, 600)
    assert rate["rate_type"]["enum"] == ["flat", "annuity"]
    price = schemas["CatalogItemIn"]["properties"]["price"]["oneOf"]
    for shapes, below, pattern in (
        (price, 10**18, PRICE_TEXT),
        (rate["rate"]["oneOf"], FRACTION_BELOW, FRACTION_TEXT),
        (rate["min_down_payment"]["oneOf"], FRACTION_BELOW, FRACTION_TEXT),
    ):
        number, text = shapes[:2]
        assert number == {"type": "number", "minimum": 0, "exclusiveMaximum": float(below)}
        assert text == {"type": "string", "pattern": pattern}

    def strings(schema: Any, name: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
        if isinstance(schema, dict):
            if schema.get("type") == "string" and "enum" not in schema:
                yield name, schema
            for key, value in schema.items():
                if key == "properties":
                    for field, inner in value.items():
                        yield from strings(inner, field)
                elif key not in ("examples", "default"):
                    yield from strings(value, name)
        elif isinstance(schema, list):
            for inner in schema:
                yield from strings(inner, name)

    requests_ = ["DocumentIn", "NewDocument", "CatalogItemIn", "FinancingRateIn", "Synonyms"]
    requests_ += ["CollectionCreate", "CollectionUpdate", "SearchRequest", "AnswerRequest"]
    requests_ += ["JsonValue", "MetadataFilter"]
    for name in requests_:
        for field, string in strings(schemas[name]):
            # No NUL; a question's and a document's text's are dropped (where they are stated
            # as required: not only whitespace and NUL).
            if field not in ("query", "text", "content") or "pattern" in string:
                assert refuses_nul(string), (name, field, string)
    for path, item in DOCUMENT["paths"].items():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path" or parameter["name"] == "source":
                    assert refuses_nul(parameter["schema"]), (path, parameter)
    assert schemas["NewDocument"]["properties"]["metadata"]["additionalProperties"] == {
        "$ref": "#/components/schemas/JsonValue"
    }
    [listed] = [
        p
        for p in DOCUMENT["paths"]["/v1/collections/{collection}/documents"]["get"]["parameters"]
        if p["name"] == "metadata"
    ]
    filter_ = {"$ref": "#/components/schemas/MetadataFilter"}
    assert listed["content"]["application/json"]["schema"] == filter_
    search = schemas["SearchRequest"]["properties"]["filters"]["oneOf"][0]
    assert search["properties"]["metadata"] == filter_
    grammar = schemas["MetadataFilter"]
    assert grammar["maxProperties"] == 64 and grammar["propertyNames"]["maxLength"] == 200
    equal, any_of, range_ = grammar["additionalProperties"]["anyOf"]
    assert {"required": ["in"]} in equal["not"]["anyOf"]
    assert any_of["properties"]["in"]["maxItems"] == 1000
    assert set(range_["properties"]) == {"gte", "lte"}
