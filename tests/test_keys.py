"""API keys stored in the database (issue 65): every route declares its actions; a key outside
its actions or collections gets 403 naming what it lacks; no key, or an unknown, revoked or
expired one, 401; CARI_API_KEYS keeps every action; the API is open until the first key is
stored; a revocation holds on another process within its cache's time; keys are managed over
HTTP and the command line; bad scopes are 422s with nothing written."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from litestar.testing import TestClient

from cari.api.app import create_app
from cari.keys import ACTIONS, hashed
from tests.conftest import app_client, settings_for

Client = TestClient[Any]


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def make_key(client: Client, admin: dict[str, str] | None = None, **scope: Any) -> str:
    """A new key's secret, created over HTTP (by `admin`, or an open API)."""
    created = client.post("/v1/keys", json=scope, headers=admin or {})
    assert created.status_code == 201, created.text
    secret: str = created.json()["secret"]
    return secret


@pytest.fixture
def client(dsn: str) -> Iterator[Client]:
    """The app on `dsn`, reading stored keys on every request (no cache to wait out)."""
    with app_client(dsn, key_cache_ttl_s=0) as app:
        yield app


def test_every_v1_route_and_mcp_declares_its_actions(dsn: str) -> None:
    app = create_app(settings_for(dsn))
    undeclared = []
    seen = 0
    for route in app.routes:
        if not route.path.startswith(("/v1", "/mcp")):
            continue
        handlers = getattr(route, "route_handlers", None) or [route.route_handler]  # type: ignore[attr-defined]
        # Litestar's own OPTIONS handlers say which methods a route has, to anyone.
        for handler in [h for h in handlers if getattr(h, "http_methods", None) != {"OPTIONS"}]:
            seen += 1
            actions = handler.opt.get("actions")
            if not actions or not set(actions) <= set(ACTIONS):
                undeclared.append(f"{route.path} {sorted(getattr(handler, 'http_methods', []))}")
    assert seen > 25  # the walk met the routes
    assert not undeclared, f"routes without actions: {undeclared}"


def test_the_api_is_open_until_the_first_key_is_stored(client: Client) -> None:
    assert client.get("/v1/collections").status_code == 200
    secret = make_key(client, name="admin", actions=list(ACTIONS), collections=["*"])
    refused = client.get("/v1/collections")
    assert refused.status_code == 401
    assert refused.json()["code"] == "unauthorized"
    assert refused.headers["www-authenticate"] == "Bearer"
    assert client.get("/v1/collections", headers=bearer(secret)).status_code == 200
    wrong = secret[:-4] + ("aaaa" if not secret.endswith("aaaa") else "bbbb")
    assert client.get("/v1/collections", headers=bearer(wrong)).status_code == 401
    # Revoking the last key does not open the API again.
    key_id = secret[: len("cari_") + 8]
    revoked = client.delete(f"/v1/keys/{key_id}", headers=bearer(secret))
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["revoked_at"] is not None
    assert client.get("/v1/collections").status_code == 401
    assert client.get("/v1/collections", headers=bearer(secret)).status_code == 401
    assert client.get("/healthz").status_code == 200


def test_any_key_reads_what_it_may_do(dsn: str) -> None:
    with app_client(dsn, key_cache_ttl_s=0) as client:
        every = {"actions": list(ACTIONS), "collections": ["*"], "filter": None}
        assert client.get("/v1/access").json() == {"key": None, "name": "open API", **every}
        scope = {"actions": ["search"], "collections": ["shop-*"], "filter": {"tenant": "acme"}}
        secret = make_key(client, name="acme storefront", **scope)
        assert client.get("/v1/access").status_code == 401
        mine = client.get("/v1/access", headers=bearer(secret))
        assert mine.json() == {
            "key": secret[: len("cari_") + 8],
            "name": "acme storefront",
            **scope,
        }
    with app_client(dsn, api_keys="old-key") as client:
        configured = client.get("/v1/access", headers=bearer("old-key")).json()
        assert configured == {"key": None, "name": "CARI_API_KEYS", **every}


def test_a_key_is_refused_outside_its_actions_and_collections(client: Client) -> None:
    admin = bearer(make_key(client, name="admin", actions=list(ACTIONS), collections=["*"]))
    for name in ("shop-a", "shop-b", "faq"):
        created = client.post(
            "/v1/collections", json={"name": name, "language": "english"}, headers=admin
        )
        assert created.status_code == 201, created.text
    reader = bearer(
        make_key(client, admin, name="reader", actions=["documents:read"], collections=["shop-*"])
    )
    listed = client.get("/v1/collections", headers=reader)
    assert [c["name"] for c in listed.json()] == ["shop-a", "shop-b"]
    assert client.get("/v1/collections/shop-a/documents", headers=reader).status_code == 200
    assert client.get("/v1/collections/shop-a", headers=reader).status_code == 200

    write = client.put(
        "/v1/collections/shop-a/documents/x", json={"text": "Hello."}, headers=reader
    )
    assert write.status_code == 403
    problem = write.json()
    assert problem["code"] == "forbidden"
    assert problem["type"] == "urn:cari:problem:forbidden"
    assert "documents:write" in problem["detail"]
    other = client.get("/v1/collections/faq/documents", headers=reader)
    assert other.status_code == 403
    assert "'faq'" in other.json()["detail"]
    assert client.get("/v1/keys", headers=reader).status_code == 403
    made = client.post(
        "/v1/collections", json={"name": "elsewhere", "language": "english"}, headers=admin
    )
    assert made.status_code == 201
    manager = bearer(
        make_key(
            client, admin, name="shops", actions=["collections:manage"], collections=["shop-*"]
        )
    )
    outside = client.post(
        "/v1/collections", json={"name": "blog", "language": "english"}, headers=manager
    )
    assert outside.status_code == 403
    inside = client.post(
        "/v1/collections", json={"name": "shop-c", "language": "english"}, headers=manager
    )
    assert inside.status_code == 201
    assert client.delete("/v1/collections/faq", headers=manager).status_code == 403
    assert client.delete("/v1/collections/shop-c", headers=manager).status_code == 204


def test_configured_keys_keep_every_action_beside_stored_ones(dsn: str) -> None:
    with app_client(dsn, api_keys="old-key", key_cache_ttl_s=0) as client:
        old = bearer("old-key")
        assert client.get("/v1/collections").status_code == 401
        secret = make_key(client, old, name="search", actions=["search"], collections=["*"])
        assert client.get("/v1/keys", headers=old).status_code == 200
        assert client.get("/v1/keys", headers=bearer(secret)).status_code == 403
        created = client.post(
            "/v1/collections", json={"name": "faq", "language": "english"}, headers=old
        )
        assert created.status_code == 201


def test_a_key_gives_no_more_than_it_has(client: Client) -> None:
    admin = bearer(make_key(client, name="admin", actions=list(ACTIONS), collections=["*"]))
    keeper = bearer(
        make_key(
            client,
            admin,
            name="keeper",
            actions=["keys:manage", "search"],
            collections=["shop-*"],
        )
    )
    stronger = client.post(
        "/v1/keys",
        json={"name": "x", "actions": ["documents:write"], "collections": ["shop-*"]},
        headers=keeper,
    )
    assert stronger.status_code == 403
    assert "documents:write" in stronger.json()["detail"]
    wider = client.post(
        "/v1/keys", json={"name": "x", "actions": ["search"], "collections": ["*"]}, headers=keeper
    )
    assert wider.status_code == 403
    narrower = client.post(
        "/v1/keys",
        json={"name": "x", "actions": ["search"], "collections": ["shop-eu-*"]},
        headers=keeper,
    )
    assert narrower.status_code == 201
    # Keys beyond its scope do not exist for it: it neither sees nor revokes the admin's.
    admin_id = admin["Authorization"].removeprefix("Bearer ")[: len("cari_") + 8]
    keeper_id = keeper["Authorization"].removeprefix("Bearer ")[: len("cari_") + 8]
    narrower_id = narrower.json()["key"]["id"]
    listed = client.get("/v1/keys", headers=keeper)
    assert sorted(k["id"] for k in listed.json()) == sorted([keeper_id, narrower_id])
    assert len(client.get("/v1/keys", headers=admin).json()) == 3
    for method in ("GET", "DELETE"):
        hidden = client.request(method, f"/v1/keys/{admin_id}", headers=keeper)
        assert hidden.status_code == 404
        assert hidden.json()["detail"] == f"key '{admin_id}' does not exist"
    assert client.get(f"/v1/keys/{admin_id}", headers=admin).json()["revoked_at"] is None
    assert client.get(f"/v1/keys/{narrower_id}", headers=keeper).status_code == 200
    own = client.delete(f"/v1/keys/{narrower_id}", headers=keeper)
    assert own.status_code == 200


@pytest.mark.parametrize(
    ("scope", "field"),
    [
        ({"actions": ["search", "fly"]}, "actions"),
        ({"actions": []}, "actions"),
        ({"collections": ["shop a"]}, "collections"),
        ({"collections": []}, "collections"),
        ({"filter": {"tenant": {"like": "a%"}}}, "filter"),
        ({"filter": {}}, "filter"),
        ({"filter": "tenant=acme"}, "filter"),
        ({"filter": {"tenant": "acme"}, "actions": ["collections:manage"]}, "actions"),
        ({"filter": {"tenant": {"in": ["a", "b"]}}, "actions": ["documents:write"]}, "filter"),
        ({"expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
        ({"expires_at": "2999-01-01T00:00:00"}, "expires_at"),  # no time zone
        ({"name": " "}, "name"),
        ({"owner": "me"}, "owner"),
    ],
)
def test_a_bad_scope_is_a_422_and_nothing_is_stored(
    client: Client, dsn: str, scope: dict[str, Any], field: str
) -> None:
    body = {"name": "k", "actions": ["search"], "collections": ["*"], **scope}
    refused = client.post("/v1/keys", json=body)
    assert refused.status_code == 422, refused.text
    named = refused.json()["errors"][0]["field"]
    assert named.split("[")[0].split(".")[0] == field, refused.json()
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM api_keys").fetchone() == (0,)


def test_the_table_holds_no_usable_secret(client: Client, dsn: str) -> None:
    created = client.post(
        "/v1/keys", json={"name": "k", "actions": ["search"], "collections": ["*"]}
    ).json()
    secret = created["secret"]
    assert created["key"]["id"] == secret[: len("cari_") + 8]
    assert len(secret) > 50
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT api_keys::text, secret_hash FROM api_keys").fetchone()
    assert row is not None
    assert secret[len("cari_") + 9 :] not in str(row[0])
    assert bytes(row[1]) == hashed(secret)
    listed = client.get("/v1/keys", headers=bearer(secret))
    assert listed.status_code == 403  # a search key
    shown = client.get(f"/v1/keys/{created['key']['id']}")
    assert shown.status_code == 401  # the API is closed now


def test_unknown_key_ids_are_404(client: Client) -> None:
    admin = bearer(make_key(client, name="admin", actions=list(ACTIONS), collections=["*"]))
    assert client.get("/v1/keys/cari_00000000", headers=admin).status_code == 404
    assert client.delete("/v1/keys/cari_00000000", headers=admin).status_code == 404
    assert client.get("/v1/keys/nope", headers=admin).status_code == 404


def test_an_expired_key_is_refused(client: Client, dsn: str) -> None:
    admin = bearer(make_key(client, name="admin", actions=list(ACTIONS), collections=["*"]))
    soon = datetime.now(UTC) + timedelta(hours=1)
    secret = make_key(
        client,
        admin,
        name="brief",
        actions=["search"],
        collections=["*"],
        expires_at=soon.isoformat(),
    )
    assert client.get("/v1/collections", headers=bearer(secret)).status_code == 200
    with psycopg.connect(dsn) as conn:  # its hour has passed
        conn.execute("UPDATE api_keys SET expires_at = now() - interval '1 s' WHERE name = 'brief'")
    assert client.get("/v1/collections", headers=bearer(secret)).status_code == 401


def test_use_is_noted_at_most_once_a_minute(client: Client, dsn: str) -> None:
    secret = make_key(client, name="k", actions=["search"], collections=["*"])
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT last_used_at FROM api_keys").fetchone() == (None,)
        assert client.get("/v1/collections", headers=bearer(secret)).status_code == 200
        first = conn.execute("SELECT last_used_at FROM api_keys").fetchone()
        assert first is not None and first[0] is not None
        assert client.get("/v1/collections", headers=bearer(secret)).status_code == 200
        assert conn.execute("SELECT last_used_at FROM api_keys").fetchone() == first


def test_a_revocation_holds_on_another_process_within_its_cache_time(dsn: str) -> None:
    """Two apps on one database, each remembering a key for 0.5 s: one revokes, the other
    refuses the key once its memory of it has expired (polled, with a generous deadline)."""
    with (
        app_client(dsn, key_cache_ttl_s=0.5) as one,
        app_client(dsn, key_cache_ttl_s=0.5) as other,
    ):
        admin = bearer(make_key(one, name="admin", actions=list(ACTIONS), collections=["*"]))
        secret = make_key(one, admin, name="k", actions=["search"], collections=["*"])
        assert other.get("/v1/collections", headers=bearer(secret)).status_code == 200
        revoked = one.delete(f"/v1/keys/{secret[: len('cari_') + 8]}", headers=admin)
        assert revoked.status_code == 200
        deadline = time.monotonic() + 30
        while other.get("/v1/collections", headers=bearer(secret)).status_code != 401:
            assert time.monotonic() < deadline, "the other process still takes the key"
            time.sleep(0.05)


def test_the_openapi_document_states_401_and_403(client: Client) -> None:
    document = client.get("/docs/openapi.json").json()
    for path, item in document["paths"].items():
        if not path.startswith("/v1"):
            continue
        for method, operation in item.items():
            assert {"401", "403"} <= set(operation["responses"]), (method, path)
            assert operation["security"] == [{"bearer": []}, {}], (method, path)
    forbidden = document["paths"]["/v1/keys"]["post"]["responses"]["403"]
    assert forbidden["content"]["application/problem+json"]["examples"]
