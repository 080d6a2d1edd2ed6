"""API keys under /v1/keys, for keys that may manage keys: create (the secret shown once), list,
show, revoke; and /v1/access, for any key: what it may do."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import psycopg
from litestar import Controller, Request, delete, get, post
from litestar.di import NamedDependency
from litestar.openapi.spec import Example
from litestar.params import Body, Parameter

from cari import keys
from cari.api.auth import access_of, requires
from cari.api.openapi import V1Operation
from cari.api.problems import responses
from cari.keys import ACTIONS
from cari.schema.keys import Key, KeyAccess, KeyCreate, KeyCreated

Conn = NamedDependency[psycopg.AsyncConnection[Any]]

TENANT_SEARCH = Example(
    summary="A tenant's search key",
    value={
        "name": "acme storefront",
        "actions": ["search"],
        "collections": ["shop-*"],
        "filter": {"tenant": "acme"},
    },
)
MANAGE = requires("keys:manage")
KeyId = Annotated[
    str,
    Parameter(
        description="The key's id, its secret's visible start",
        max_length=64,
        examples=[Example(value="cari_3f9a1b2c")],
    ),
]


class KeysController(Controller):
    path = "/keys"
    tags = ["keys"]  # noqa: RUF012 (Litestar reads this class attribute)

    @post(
        "/",
        summary="Create an API key",
        description="The answer holds the key's secret, which is never shown again: Cari keeps "
        "its hash. A key gives only actions and collections the creating key has itself.",
        operation_id="createKey",
        responses=responses(400, 413, 422, 503),
        operation_class=V1Operation,
        opt=MANAGE,
    )
    async def create(
        self,
        request: Request[Any, Any, Any],
        conn: Conn,
        data: Annotated[KeyCreate, Body(examples=[TENANT_SEARCH])],
    ) -> KeyCreated:
        keys.check_within(access_of(request), data.actions, data.collections)
        key, secret = await keys.create(
            conn,
            data.name,
            data.actions,
            data.collections,
            data.filter,
            data.expires_at,
            datetime.now(UTC),
        )
        return KeyCreated(key=key.wire(), secret=secret)

    @get(
        "/",
        summary="List API keys (revoked ones too)",
        description="The keys within the calling key's own scope: no action it lacks, no "
        "collection it does not reach. Any other key does not exist for it.",
        operation_id="listKeys",
        responses=responses(422, 503),
        operation_class=V1Operation,
        opt=MANAGE,
    )
    async def index(self, request: Request[Any, Any, Any], conn: Conn) -> list[Key]:
        access = access_of(request)  # the keys within its scope, no other
        return [key.wire() for key in await keys.list_all(conn) if keys.manages(access, key)]

    @get(
        "/{key_id:str}",
        summary="An API key",
        operation_id="getKey",
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
        opt=MANAGE,
    )
    async def show(self, request: Request[Any, Any, Any], conn: Conn, key_id: KeyId) -> Key:
        return (await keys.get_managed(conn, key_id, access_of(request))).wire()

    @delete(
        "/{key_id:str}",
        summary="Revoke an API key",
        description="Every Cari process sharing the database refuses it within "
        "CARI_KEY_CACHE_TTL_S seconds (5). Its row stays, saying when it was revoked. A key "
        "sees and revokes only keys within its own scope (a 404 for any other).",
        status_code=200,
        operation_id="revokeKey",
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
        opt=MANAGE,
    )
    async def revoke(self, request: Request[Any, Any, Any], conn: Conn, key_id: KeyId) -> Key:
        await keys.get_managed(conn, key_id, access_of(request))
        return (await keys.revoke(conn, key_id)).wire()


@get(
    "/access",
    summary="What this request's key may do",
    description="The calling key's actions, the collections it reaches and the filter it sees "
    "documents through (the console shows them). Any key may ask.",
    operation_id="getAccess",
    tags=["keys"],
    responses=responses(503),
    operation_class=V1Operation,
    opt=requires(*ACTIONS),
)
async def access(request: Request[Any, Any, Any]) -> KeyAccess:
    found = access_of(request)
    return KeyAccess(
        key=found.prefix,
        name=found.name,
        actions=sorted(found.actions, key=ACTIONS.index),  # type: ignore[arg-type]
        collections=list(found.collections),
        filter=None if found.filter is None else dict(found.filter),
    )
