"""Collections CRUD under /v1/collections."""

from __future__ import annotations

from typing import Annotated, Any

import psycopg
from litestar import Controller, Request, delete, get, patch, post, put
from litestar.di import NamedDependency
from litestar.openapi.spec import Example
from litestar.params import Body

import cari.collection
from cari import synonyms
from cari.api.auth import READ_COLLECTION, access_of, requires
from cari.api.openapi import CollectionName, V1Operation
from cari.api.problems import responses
from cari.api.state import AppState
from cari.schema.collections import Collection, CollectionCreate, CollectionUpdate, Synonyms

Conn = NamedDependency[psycopg.AsyncConnection[Any]]

NEW = Example(
    summary="An Indonesian FAQ",
    value={"name": "faq", "language": "indonesian", "top_k": 5},
)
CHANGE = Example(summary="Favour keywords", value={"keyword_weight": 2.0, "threshold": 0.3})


class CollectionsController(Controller):
    path = "/collections"
    tags = ["collections"]  # noqa: RUF012 (Litestar reads this class attribute)

    # Before the handlers named `get` and `delete`, which hide Litestar's decorators below them.
    @get(
        "/{collection:str}/synonyms",
        summary="Get a collection's synonym rules",
        operation_id="getSynonyms",
        opt=READ_COLLECTION,
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
    )
    async def get_synonyms(self, conn: Conn, collection: CollectionName) -> Synonyms:
        return await synonyms.get(conn, collection)

    @put(
        "/{collection:str}/synonyms",
        summary="Replace a collection's synonym rules",
        description="`a, b, c` makes the terms equivalent; `a, b => c` makes a query for a or "
        "b also look for c. Rules apply to keyword search (and highlights) from the next query "
        "on, with no re-indexing; `explain` shows the rules a query fires. A bad rule is "
        "named in a 422 and no rule is changed.",
        operation_id="putSynonyms",
        opt=requires("collections:manage"),
        responses=responses(400, 404, 413, 422, 503),
        operation_class=V1Operation,
    )
    async def put_synonyms(
        self,
        conn: Conn,
        collection: CollectionName,
        data: Annotated[Synonyms, Body()],  # its example is on the struct: also the answer
    ) -> Synonyms:
        return await synonyms.replace(conn, collection, data)

    @post(
        "/",
        summary="Create a collection",
        operation_id="createCollection",
        opt=requires("collections:manage"),
        responses=responses(400, 409, 413, 422, 503),
        operation_class=V1Operation,
    )
    async def create(
        self,
        request: Request[Any, Any, Any],
        conn: Conn,
        state: AppState,
        data: Annotated[CollectionCreate, Body(examples=[NEW])],
    ) -> Collection:
        access_of(request).check_reaches(data.name)  # a collection its body names
        created = await cari.collection.create(conn, data, state.settings)
        state.runtime.searcher.collections.forget()
        return cari.collection.named(created, state.settings)

    @get(
        "/",
        summary="List collections",
        operation_id="listCollections",
        opt=READ_COLLECTION,
        responses=responses(422, 503),  # 422: a consistency token that is none
        operation_class=V1Operation,
    )
    async def index(
        self, request: Request[Any, Any, Any], conn: Conn, state: AppState
    ) -> list[Collection]:
        access = access_of(request)  # the collections the key reaches, no other
        return [
            cari.collection.named(c, state.settings)
            for c in await cari.collection.list_all(conn)
            if access.reaches(c.name)
        ]

    @get(
        "/{collection:str}",
        summary="Get a collection",
        operation_id="getCollection",
        opt=READ_COLLECTION,
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
    )
    async def get(self, conn: Conn, state: AppState, collection: CollectionName) -> Collection:
        return cari.collection.named(await cari.collection.get(conn, collection), state.settings)

    @patch(
        "/{collection:str}",
        summary="Change a collection's settings",
        operation_id="updateCollection",
        opt=requires("collections:manage"),
        responses=responses(400, 404, 413, 422, 503),
        operation_class=V1Operation,
    )
    async def update(
        self,
        conn: Conn,
        state: AppState,
        collection: CollectionName,
        data: Annotated[CollectionUpdate, Body(examples=[CHANGE])],
    ) -> Collection:
        updated = await cari.collection.update(conn, collection, data)
        state.runtime.searcher.collections.forget()
        return cari.collection.named(updated, state.settings)

    @delete(
        "/{collection:str}",
        summary="Delete a collection and everything in it",
        operation_id="deleteCollection",
        opt=requires("collections:manage"),
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
    )
    async def delete(self, conn: Conn, state: AppState, collection: CollectionName) -> None:
        await cari.collection.delete(conn, collection)
        state.runtime.searcher.collections.forget()
