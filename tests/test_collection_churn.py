"""A collection deleted and recreated while clients write into it: every write answers what is
true (stored, or 404 for the collection that is gone), never a 500 nor a false 503, and a write
whose transaction committed is never reported failed because the BM25 upkeep after it was."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import httpx
import psycopg
import pytest

from cari import collection
from cari.errors import NotFound
from cari.ingest.store import collection_ref, write_documents
from cari.schema.collections import CollectionCreate
from cari.settings import Settings
from tests.test_bm25 import connect, prepared

SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]
ROUNDS = 12  # deletes and recreations, each after a few writes have gone in


def test_a_write_into_a_collection_deleted_meanwhile_is_not_found(dsn: str) -> None:
    async def run() -> None:
        async with await connect(dsn) as conn:
            await collection.create(conn, CollectionCreate(name="gone"), SETTINGS)
            ref = await collection_ref(conn, "gone")
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as other:
                await other.execute("DELETE FROM collections WHERE name = 'gone'")
            with pytest.raises(NotFound, match="collection 'gone' does not exist"):
                await write_documents(conn, ref, [prepared("a", "", "some text")])

    asyncio.run(run())


def test_writes_beside_a_collection_deleted_and_recreated(base_url: str) -> None:
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    stop = threading.Event()

    def writer(seed: int) -> None:
        with httpx.Client(base_url=base_url, timeout=60) as client:
            n = 0
            while not stop.is_set():
                n += 1
                if n % 2:
                    r = client.put(
                        f"/v1/collections/churn/documents/w{seed}-{n % 5}",
                        json={"text": f"pressure flow over the wing, note {n}"},
                    )
                else:
                    documents: list[dict[str, Any]] = [
                        {"id": f"b{seed}-{i}", "text": f"boundary layer heat {n} {i}"}
                        for i in range(3)
                    ]
                    r = client.post(
                        "/v1/collections/churn/documents", json={"documents": documents}
                    )
                statuses[r.status_code] += 1
                if r.status_code not in (200, 201, 207, 404):
                    failures.append(f"{r.status_code} {r.text[:300]}")

    with httpx.Client(base_url=base_url, timeout=60) as admin:
        assert admin.post("/v1/collections", json={"name": "churn"}).status_code == 201
        threads = [threading.Thread(target=writer, args=(s,)) for s in range(3)]
        for t in threads:
            t.start()
        try:
            for _ in range(ROUNDS):
                stop.wait(0.4)
                assert admin.delete("/v1/collections/churn").status_code in (200, 204)
                created = admin.post("/v1/collections", json={"name": "churn"})
                assert created.status_code == 201, created.text
        finally:
            stop.set()
            for t in threads:
                t.join()
    assert not failures, failures[:5]
    assert statuses[404] + sum(statuses[s] for s in (200, 201, 207)) == sum(statuses.values())
    assert sum(statuses[s] for s in (200, 201, 207)) > 0
