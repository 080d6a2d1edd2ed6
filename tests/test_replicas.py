"""Reads on a streaming replica: a real primary and a real standby (two PostgreSQL servers of
their own, the standby copied with pg_basebackup and replaying the primary's WAL), the HTTP app
on both. Every wait is bounded."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from bench.replicas import caught_up
from litestar.testing import TestClient

from cari.db import embedded, migrations, standby
from cari.schema.consistency import HEADER, format_token, parse_token
from cari.settings import Settings
from tests.conftest import app_client, cli_env, settings_for
from tests.fake_openai import FakeOpenAI
from tests.test_observability import scrape, value

DOCUMENTS = [
    {"id": "brio", "title": "Honda Brio", "text": "Honda Brio: mesin bensin 1.2 liter, irit."},
    {"id": "avanza", "title": "Toyota Avanza", "text": "Toyota Avanza: tujuh kursi, bensin."},
]


@dataclass(frozen=True)
class Pair:
    primary: str  # DSN of Cari's database on the primary
    standby: str  # ... on the standby
    standby_dir: Path


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """A migrated primary and its standby, for this module. The primary stops at interpreter
    exit (the embedded server's own handle), after its standby."""
    data_dir = tmp_path_factory.mktemp("primary")
    primary = embedded.start(data_dir)
    migrations.upgrade(primary, settings_for(primary))
    owner = embedded.pgdata_path(data_dir).owner() if os.geteuid() == 0 else None
    standby_dir = tmp_path_factory.mktemp("standby") / "pg"
    standby.create(primary, standby_dir, user=owner)
    try:
        yield Pair(primary, standby.start(standby_dir), standby_dir)
    finally:
        standby.stop(standby_dir)


@pytest.fixture
def replicated(pair: Pair, fake: FakeOpenAI) -> Callable[..., TestClient[Any]]:
    """The app on the pair: writes on the primary, reads on the standby."""

    def client(**overrides: Any) -> TestClient[Any]:
        values: dict[str, Any] = {"read_database_urls": [pair.standby], **overrides}
        return app_client(pair.primary, fake, **values)

    return client


_names = iter(range(1_000_000))


def new_collection(client: TestClient[Any]) -> tuple[str, str]:
    """A collection holding DOCUMENTS: its name and the token of the last write."""
    name = f"cars{next(_names)}"
    created = client.post("/v1/collections", json={"name": name})
    assert created.status_code == 201, created.text
    added = client.post(f"/v1/collections/{name}/documents", json={"documents": DOCUMENTS})
    assert added.status_code == 200, added.text
    assert parse_token(added.headers[HEADER]) >= parse_token(created.headers[HEADER])
    return name, added.headers[HEADER]


def search(
    client: TestClient[Any], collection: str, query: str, token: str | None = None
) -> dict[str, Any]:
    response = client.post(
        f"/v1/collections/{collection}/search",
        json={"query": query, "mode": "keyword", "threshold": 0, "explain": True},
        headers={HEADER: token} if token else {},
    )
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def found_ids(response: dict[str, Any]) -> list[str]:
    return [r["document_id"] for r in response["results"]]


def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not within the bound"
        time.sleep(0.05)


def replica_in_use(client: TestClient[Any]) -> bool:
    return value(scrape(client), "cari_replica_in_use", replica="replica1") == 1


def replay(pair: Pair, action: str) -> None:
    with psycopg.connect(pair.standby, autocommit=True) as conn:
        conn.execute(f"SELECT pg_wal_replay_{action}()")  # pause or resume


def replayed(pair: Pair) -> None:
    """Wait until the standby has replayed what the primary has flushed: a search without a
    token that reaches it before a new collection is replayed is a 404 (CI once paused it
    first)."""
    asyncio.run(caught_up(pair.primary, [pair.standby]))


def test_a_search_is_served_by_the_standby_and_sees_the_write_of_its_token(
    replicated: Callable[..., TestClient[Any]],
) -> None:
    with replicated() as client:
        assert replica_in_use(client)
        name, token = new_collection(client)
        before = scrape(client)
        found = search(client, name, "bensin irit", token)
        assert found["explain"]["served_by"] == "replica1"
        assert found_ids(found)[0] == "brio"
        after = scrape(client)
        reads = value(after, "cari_reads_total", node="replica1")
        assert reads - value(before, "cari_reads_total", node="replica1") == 1
        assert value(after, "cari_replica_lag_seconds", replica="replica1") >= 0
        # GET reads go to the replica as well; the write's token makes them see the write.
        listed = client.get(f"/v1/collections/{name}/documents", headers={HEADER: token})
        assert [d["id"] for d in listed.json()["documents"]] == ["avanza", "brio"]
        assert value(scrape(client), "cari_reads_total", node="replica1") == reads + 1
        answered = client.post(
            f"/v1/collections/{name}/answer",
            json={"query": "mobil tujuh kursi"},
            headers={HEADER: token},
        )
        assert answered.status_code == 200, answered.text
        assert value(scrape(client), "cari_reads_total", node="replica1") == reads + 2


def test_the_token_waits_for_replay_or_goes_to_the_primary(
    pair: Pair, replicated: Callable[..., TestClient[Any]]
) -> None:
    # A long lag bound: the paused standby stays in use, and only the token tells.
    with replicated(max_replica_lag_s=60, replica_wait_s=0.2) as client:
        name, token = new_collection(client)
        until(lambda: search(client, name, "bensin", token)["explain"]["served_by"] == "replica1")
        replay(pair, "pause")
        try:
            changed = client.put(
                f"/v1/collections/{name}/documents/brio",
                json={"title": "Honda Brio", "text": "Honda Brio listrik, tanpa bensin."},
            )
            assert changed.status_code == 200, changed.text
            written = changed.headers[HEADER]
            assert parse_token(written) > parse_token(token)
            stale = search(client, name, "listrik")
            assert stale["explain"]["served_by"] == "replica1"
            assert stale["results"] == []  # the replica has not replayed the change
            fresh = search(client, name, "listrik", written)
            assert fresh["explain"]["served_by"] == "primary"  # after waiting 0.2 s
            assert found_ids(fresh) == ["brio"]
            # A collection created after the pause: a clear 404 on the replica, found with
            # its token.
            created = client.post("/v1/collections", json={"name": f"{name}new"})
            missing = client.post(f"/v1/collections/{name}new/search", json={"query": "bensin"})
            assert missing.status_code == 404
            assert "replica1, a replica" in missing.json()["detail"]
            assert HEADER in missing.json()["detail"]
            with_token = client.post(
                f"/v1/collections/{name}new/search",
                json={"query": "bensin"},
                headers={HEADER: created.headers[HEADER]},
            )
            assert with_token.status_code == 200, with_token.text
        finally:
            replay(pair, "resume")
        until(
            lambda: search(client, name, "listrik", written)["explain"]["served_by"] == "replica1"
        )


def test_a_lagging_standby_is_taken_out_and_comes_back(
    pair: Pair, replicated: Callable[..., TestClient[Any]]
) -> None:
    with replicated(max_replica_lag_s=1.0) as client:
        name, _ = new_collection(client)
        replayed(pair)
        assert search(client, name, "bensin")["explain"]["served_by"] == "replica1"
        replay(pair, "pause")
        try:
            # A paused standby that misses nothing is not behind: a write makes it so.
            client.post("/v1/collections", json={"name": f"{name}lag"})
            until(lambda: not replica_in_use(client), timeout_s=5)
            assert value(scrape(client), "cari_replica_lag_seconds", replica="replica1") > 1.0
            assert search(client, name, "bensin")["explain"]["served_by"] == "primary"
        finally:
            replay(pair, "resume")
        until(lambda: replica_in_use(client), timeout_s=5)
        assert search(client, name, "bensin")["explain"]["served_by"] == "replica1"


def test_stopping_the_standby_sends_searches_to_the_primary_without_error(
    pair: Pair, replicated: Callable[..., TestClient[Any]]
) -> None:
    with replicated() as client:
        name, token = new_collection(client)
        until(lambda: search(client, name, "bensin", token)["explain"]["served_by"] == "replica1")
        standby.stop(pair.standby_dir)
        try:
            # At once, before any check noticed: the failed search is run again on the primary.
            for _ in range(5):
                assert search(client, name, "bensin")["explain"]["served_by"] == "primary"
            assert not replica_in_use(client)
        finally:
            standby.start(pair.standby_dir)
        until(lambda: replica_in_use(client))
        assert search(client, name, "bensin")["explain"]["served_by"] == "replica1"


def test_a_malformed_token_is_refused(replicated: Callable[..., TestClient[Any]]) -> None:
    with replicated() as client:
        name, _ = new_collection(client)
        response = client.post(
            f"/v1/collections/{name}/search", json={"query": "bensin"}, headers={HEADER: "x/y"}
        )
        assert response.status_code == 422
        assert response.json()["errors"][0]["field"] == HEADER


def test_without_replicas_writes_carry_no_token(dsn: str, fake: FakeOpenAI) -> None:
    with app_client(dsn, fake) as client:
        created = client.post("/v1/collections", json={"name": "plain"})
        assert created.status_code == 201
        assert HEADER not in created.headers
        # A token is still accepted: the primary has every write.
        found = client.post(
            "/v1/collections/plain/search",
            json={"query": "x", "explain": True},
            headers={HEADER: "0/1"},
        )
        assert found.json()["explain"]["served_by"] == "primary"


def test_tokens_read_back_as_written() -> None:
    for position in (0, 1, 0xFFFFFFFF, 0x16_B374D848, (1 << 64) - 1):
        assert parse_token(format_token(position)) == position


def test_read_urls_are_split_on_spaces_and_checked() -> None:
    urls = "postgresql://a,b/cari postgresql://c/cari"
    settings = Settings(_env_file=None, read_database_urls=urls)  # type: ignore[call-arg]
    assert settings.read_database_urls == ["postgresql://a,b/cari", "postgresql://c/cari"]
    with pytest.raises(ValueError, match="bad port"):
        Settings(_env_file=None, read_database_urls="postgresql://a:x/cari")  # type: ignore[call-arg]


def test_cari_db_replica_starts_a_standby_that_follows_the_embedded_server(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    from tests.test_cli import run

    env = {**clean_env, "CARI_DATA_DIR": str(tmp_path / "data")}
    made = run(["db", "replica"], env)
    assert made.returncode == 0, made.stderr
    replica = made.stdout.strip()
    try:
        primary = run(["db", "url"], env).stdout.strip()
        with psycopg.connect(primary, autocommit=True) as conn:
            conn.execute("INSERT INTO collections (name) VALUES ('followed')")

        def followed() -> bool:
            with psycopg.connect(replica) as conn:
                row = conn.execute("SELECT count(*) FROM collections").fetchone()
            return row == (1,)

        until(followed)
        with psycopg.connect(replica) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        # Started again, it is the same standby.
        assert run(["db", "replica"], env).stdout.strip() == replica
        assert (tmp_path / "data" / "replicas" / "replica1" / "standby.signal").exists()
        refused = run(["db", "replica", "--name", "../x"], env)
        assert refused.returncode == 1 and "--name" in refused.stderr
    finally:
        assert run(["db", "replica", "--stop"], env).stdout.strip() == "stopped"
        assert run(["db", "stop", "--force"], env).stdout.strip() == "stopped"
    assert run(["db", "replica", "--stop"], env).stderr.strip() == "not running"


def test_the_client_reads_its_own_writes_from_a_server_with_a_replica(
    pair: Pair, clean_env: dict[str, str], fake: FakeOpenAI
) -> None:
    from cari.client import Client, CollectionCreate, DocumentIn, SearchRequest
    from tests.test_cli import serving

    env = {**cli_env(clean_env, pair.primary, fake), "CARI_READ_DATABASE_URLS": pair.standby}
    keyword = SearchRequest(query="listrik", mode="keyword", threshold=0, explain=True)
    with serving(env) as url, Client(url) as writer, Client(url) as other:
        writer.create_collection(CollectionCreate(name="session"))
        assert writer.consistency_token is not None
        replayed(pair)  # then paused: the collection is there, its document not
        replay(pair, "pause")
        try:
            first = writer.consistency_token
            writer.add_documents("session", [DocumentIn(id="ev", text="Mobil listrik murah.")])
            assert parse_token(writer.consistency_token) > parse_token(first)
            # The writer's search carries its token: it sees the write (on the primary, as the
            # paused replica has not replayed it).
            mine = writer.search_collection("session", keyword)
            assert [r.document_id for r in mine.results] == ["ev"]
            assert mine.explain is not None and mine.explain.served_by == "primary"
            # Another client, without the token, reads the replica as it is.
            theirs = other.search_collection("session", keyword)
            assert theirs.results == []
            assert theirs.explain is not None and theirs.explain.served_by == "replica1"
        finally:
            replay(pair, "resume")
