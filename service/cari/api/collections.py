"""Collections CRUD under /v1/collections."""

from __future__ import annotations

from typing import Any

import psycopg
from litestar import Controller, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import JSONBody, Parameter

from cari import collection
from cari.collection import Collection, CollectionCreate, CollectionUpdate

Conn = NamedDependency[psycopg.AsyncConnection[Any]]
NamePath = Parameter(description="Collection name")


class CollectionsController(Controller):
    path = "/collections"
    tags = ["collections"]  # noqa: RUF012 (Litestar reads this class attribute)

    @post("/", summary="Create a collection")
    async def create(self, conn: Conn, data: JSONBody[CollectionCreate]) -> Collection:
        return await collection.create(conn, data)

    @get("/", summary="List collections")
    async def list(self, conn: Conn) -> list[Collection]:
        return await collection.list_all(conn)

    @get("/{name:str}", summary="Get a collection")
    async def get(self, conn: Conn, name: str = NamePath) -> Collection:
        return await collection.get(conn, name)

    @patch("/{name:str}", summary="Change a collection's settings")
    async def update(
        self, conn: Conn, data: JSONBody[CollectionUpdate], name: str = NamePath
    ) -> Collection:
        return await collection.update(conn, name, data)

    @delete("/{name:str}", summary="Delete a collection and everything in it")
    async def delete(self, conn: Conn, name: str = NamePath) -> None:
        await collection.delete(conn, name)
