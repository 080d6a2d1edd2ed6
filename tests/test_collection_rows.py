"""A serving process keeps the collection rows its searches read, and drops them when the
collections table announces a change, whoever makes it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
from litestar.testing import TestClient

from cari.search.collection_rows import APPLICATION_NAME, CollectionRows
from tests.conftest import app_client
from tests.fake_openai import FakeOpenAI

DOCS = [{"id": f"d{n}", "text": f"Pompa air nomor {n} untuk sawah."} for n in range(5)]


def found(client: TestClient[Any]) -> int:
    response = client.post(
        "/v1/collections/faq/search", json={"query": "pompa air", "mode": "keyword", "threshold": 0}
    )
    assert response.status_code == 200, response.text
    return len(response.json()["results"])


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30  # a bound for a busy machine; it takes milliseconds idle
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def change_unannounced(dsn: str, statement: str) -> None:
    """Change collections with triggers off (a replica's apply mode), so nothing is announced:
    what a search then sees tells whether it reads the row or keeps it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute(statement)


def listening_with_faq(client: TestClient[Any]) -> CollectionRows:
    """The app's collection rows, once they listen, and a collection "faq" of DOCS, top_k 5."""
    rows: CollectionRows = client.app.state.runtime.searcher.collections
    eventually(lambda: rows.listening, "never listened")
    assert client.post("/v1/collections", json={"name": "faq", "top_k": 5}).status_code == 201
    response = client.post("/v1/collections/faq/documents", json={"documents": DOCS})
    assert response.status_code == 200, response.text
    assert found(client) == 5
    return rows


def test_rows_are_kept_and_dropped_on_every_change(dsn: str, fake: FakeOpenAI) -> None:
    with app_client(dsn, fake) as client:
        listening_with_faq(client)

        # Kept: a change nobody announces is not seen.
        change_unannounced(dsn, "UPDATE collections SET top_k = 1 WHERE name = 'faq'")
        assert found(client) == 5

        # An announced change, made outside this process, is seen by the next searches.
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("UPDATE collections SET top_k = 2 WHERE name = 'faq'")
        eventually(lambda: found(client) == 2, "the announced change was not seen")

        # A collection dropped and made again under the same name is the new one.
        assert client.delete("/v1/collections/faq").status_code == 204
        assert client.post("/v1/collections/faq/search", json={"query": "x"}).status_code == 404
        assert client.post("/v1/collections", json={"name": "faq", "top_k": 3}).status_code == 201
        response = client.post("/v1/collections/faq/documents", json={"documents": DOCS})
        assert response.status_code == 200, response.text
        assert found(client) == 3


def test_unheard_announcements_mean_every_search_reads_its_row(dsn: str, fake: FakeOpenAI) -> None:
    with app_client(dsn, fake) as client:
        rows = listening_with_faq(client)

        # The listening connection dies: what was kept is dropped, searches read again.
        with psycopg.connect(dsn, autocommit=True) as conn:
            cur = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = %s",
                (APPLICATION_NAME,),
            )
            assert [row[0] for row in cur.fetchall()] == [True]
        eventually(lambda: not rows.listening, "the dead connection went unnoticed")
        change_unannounced(dsn, "UPDATE collections SET top_k = 1 WHERE name = 'faq'")
        assert found(client) == 1

        # It listens again, and keeps rows again.
        eventually(lambda: rows.listening, "never listened again")
        assert found(client) == 1
        change_unannounced(dsn, "UPDATE collections SET top_k = 4 WHERE name = 'faq'")
        assert found(client) == 1
