"""Embeddings wider than 2,000 dimensions (halfvec) and an embedder per collection: a 3,072-d
and a 384-d collection in one database through the HTTP API, each searched through the index of
its own width, and a collection moved to another model while searches go on."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import numpy as np
import psycopg
import pytest
from litestar.testing import TestClient
from pgvector.psycopg import register_vector, register_vector_async
from psycopg import sql

from cari.db import database as db
from cari.db import migrations
from cari.db.queries import query
from cari.db.vector_space import Space, space
from cari.errors import ConfigError
from cari.ingest import store
from cari.ingest.chunking import NewChunk
from cari.ingest.formats import Section
from cari.settings import Settings, load_settings
from tests.conftest import app_client, cli_env, settings_for
from tests.fake_openai import FakeOpenAI, vector_for

WIDE = 3072
DOCUMENTS = {
    "lighthouse": "The lighthouse keeper climbs one hundred steps every evening.",
    "bakery": "The bakery opens at dawn and sells rye bread until noon.",
    "harbour": "Fishing boats return to the harbour before the storm.",
    "orchard": "Apple trees in the orchard bloom in late spring.",
}


def profiles(fake: FakeOpenAI) -> dict[str, Any]:
    """CARI_EMBEDDERS naming the fake at 3,072 dimensions."""
    return {
        "large": {
            "model": fake.model,
            "dimensions": WIDE,
            "base_url": fake.url,
            "cosine_floor": 0.1,  # calibrated for its model, not the bundled one's 0.8
            "cosine_ceiling": 0.6,
        }
    }


@pytest.fixture
def wide() -> Any:
    """One fake embedding server: 384-d for the default embedder, 3,072-d for `large` (it
    answers the width it is asked for)."""
    with FakeOpenAI(dimension=384) as server:
        yield server


def open_app(dsn: str, fake: FakeOpenAI) -> TestClient[Any]:
    settings = settings_for(dsn, **fake.settings(), embedders=profiles(fake))
    migrations.ensure_vector_indexes(dsn, settings)  # as `cari serve` does at start
    return app_client(dsn, fake, embedders=profiles(fake))


def add(client: TestClient[Any], collection: str) -> None:
    documents = [{"id": key, "text": text} for key, text in DOCUMENTS.items()]
    response = client.post(f"/v1/collections/{collection}/documents", json={"documents": documents})
    assert response.status_code in (200, 201), response.text


def top(client: TestClient[Any], collection: str, text: str) -> str:
    response = client.post(
        f"/v1/collections/{collection}/search",
        json={"query": text, "mode": "vector", "top_k": 1, "threshold": 0},
    )
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert results, response.json()
    return str(results[0]["document_id"])


def widths(dsn: str, collection: str) -> set[int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT DISTINCT vector_dims(c.embedding) FROM chunks c "
            "JOIN collections k ON k.id = c.collection_id WHERE k.name = %s",
            (collection,),
        ).fetchall()
    return {int(r[0]) for r in rows if r[0] is not None}


def plan(dsn: str, collection: str, width: Space) -> str:
    """EXPLAIN of Cari's own vector statement for `collection`, run as Cari runs it: unprepared,
    so planned with its values each time, six times over (a prepared statement would get a
    generic plan from the sixth run on, which sorts the whole collection once the table holds a
    few: cari.db.vector_space.Space.statement)."""
    statement = width.statement("search_vector", filters=sql.SQL(""), alias=sql.Identifier("c"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        row = conn.execute("SELECT id FROM collections WHERE name = %s", (collection,)).fetchone()
        assert row is not None
        conn.execute("SET hnsw.iterative_scan = strict_order")
        args = {"vector": vector_for("anything", width.dimension), "collection_id": row[0]}
        args["candidates"] = 10
        for _ in range(6):
            conn.execute(statement, args, prepare=False).fetchall()
        rows = conn.execute(sql.SQL("EXPLAIN ") + statement, args, prepare=False).fetchall()
    return "\n".join(str(r[0]) for r in rows)


def pad(dsn: str, collection: str, dimension: int, count: int) -> None:
    """`count` more chunks of random `dimension`-d vectors in `collection`, so that the planner
    prefers the index to reading every row."""
    rng = np.random.default_rng(dimension)
    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        (cid,) = conn.execute(
            "SELECT id FROM collections WHERE name = %s", (collection,)
        ).fetchone() or (None,)
        (did,) = conn.execute(
            "INSERT INTO documents (collection_id, external_id, content_hash) "
            "VALUES (%s, 'padding', '') RETURNING id",
            (cid,),
        ).fetchone() or (None,)
        (simple,) = conn.execute("SELECT 'simple'::regconfig::oid").fetchone() or (None,)
        with conn.cursor().copy(
            "COPY chunks (collection_id, document_id, ordinal, content, language, embedding) "
            "FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["int8", "int8", "int4", "text", "oid", "vector"])
            for i in range(count):
                vector = rng.standard_normal(dimension).astype(np.float32)
                copy.write_row((cid, did, i, f"padding {i}", simple, vector))
        conn.execute("ANALYZE chunks")


def test_a_wide_and_a_narrow_collection_side_by_side(dsn: str, wide: FakeOpenAI) -> None:
    with open_app(dsn, wide) as client:
        assert client.post("/v1/collections", json={"name": "narrow"}).status_code == 201
        created = client.post("/v1/collections", json={"name": "broad", "embedder": "large"})
        assert created.status_code == 201, created.text
        assert (created.json()["embedder"], created.json()["dimensions"]) == ("large", WIDE)
        refused = client.post("/v1/collections", json={"name": "x", "embedder": "missing"})
        assert refused.status_code == 422
        assert "embedder 'missing' is not configured" in refused.json()["detail"]
        add(client, "narrow")
        add(client, "broad")
        assert widths(dsn, "narrow") == {384}
        assert widths(dsn, "broad") == {WIDE}
        # Each query is embedded with its collection's model: the fake's vector of the text
        # at that width is the chunk's own, so the document comes first in both.
        for key, text in DOCUMENTS.items():
            assert top(client, "narrow", text) == key
            assert top(client, "broad", text) == key
        requested = {body.get("dimensions") for body in wide.requests}
        assert requested == {384, WIDE}
        for name, scale in (("narrow", [0.8, 0.98]), ("broad", [0.1, 0.6])):
            explained = client.post(
                f"/v1/collections/{name}/search", json={"query": "bread", "explain": True}
            ).json()["explain"]["relevance_scale"]
            assert [explained["cosine_floor"], explained["cosine_ceiling"]] == scale

    pad(dsn, "narrow", 384, 2000)
    pad(dsn, "broad", WIDE, 300)
    narrow = plan(dsn, "narrow", space(384, settings_for(dsn)))
    assert "Index Scan using chunks_embedding_vector_384_idx" in narrow, narrow
    broad = plan(dsn, "broad", space(WIDE, settings_for(dsn)))
    assert "Index Scan using chunks_embedding_halfvec_3072_idx" in broad, broad


def test_a_collection_moves_to_another_model_while_searches_answer(
    dsn: str, wide: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    with open_app(dsn, wide) as client:
        assert client.post("/v1/collections", json={"name": "moving"}).status_code == 201
        add(client, "moving")
        assert widths(dsn, "moving") == {384}
        for text in DOCUMENTS.values():  # cached: the searches below measure the database
            top(client, "moving", text)

        env = cli_env(clean_env, dsn, wide)
        env["CARI_EMBEDDERS"] = json.dumps(profiles(wide))
        env["CARI_EMBEDDING_BATCH_SIZE"] = "1"
        wide.delay = 0.3  # each of the 4 chunks takes a while: searches run meanwhile
        # Waited for even when an assertion below fails: a process left running would fail a
        # later test with a ResourceWarning.
        with subprocess.Popen(
            [sys.executable, "-m", "cari.cli", "reembed", "-c", "moving", "--embedder", "large"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as move:
            during, states = 0, set()
            while move.poll() is None:
                for key, text in DOCUMENTS.items():
                    assert top(client, "moving", text) == key
                    during += 1
                collection = client.get("/v1/collections/moving").json()
                states.add((collection["embedder"], collection["next_embedder"]))
                time.sleep(0.05)
            out, err = move.communicate()
        assert move.returncode == 0, err
        assert "now uses large" in out
        # Searched on the old model meanwhile: the default one, named by CARI_EMBEDDER.
        assert during > 0 and ("openai", "large") in states

        wide.delay = 0
        collection = client.get("/v1/collections/moving").json()
        assert (collection["embedder"], collection["next_embedder"]) == ("large", None)
        assert collection["dimensions"] == WIDE
        assert widths(dsn, "moving") == {WIDE}
        for key, text in DOCUMENTS.items():
            assert top(client, "moving", text) == key
    with psycopg.connect(dsn) as conn:
        left = conn.execute("SELECT count(*) FROM chunks WHERE next_embedding IS NOT NULL")
        assert left.fetchone() == (0,)


def test_a_search_that_read_its_collection_before_a_move_searches_the_new_model(
    dsn: str, wide: FakeOpenAI, clean_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search reads its collection's row (kept by the server until the change is announced),
    then embeds the question and searches that model's width. When `cari reembed` finishes in
    between (or its announcement is late), no vector of the old width is left: the search
    starts again on the row as it is now, rather than answering with no vector results."""
    with open_app(dsn, wide) as client:
        assert client.post("/v1/collections", json={"name": "late"}).status_code == 201
        add(client, "late")
        rows = client.app.state.runtime.searcher.collections
        kept: dict[str, Any] = {}
        read = rows.get

        async def unannounced(pool: Any, name: str) -> Any:  # the row from before the move
            kept.setdefault(name, await read(pool, name))
            return kept[name]

        monkeypatch.setattr(rows, "get", unannounced)
        assert top(client, "late", DOCUMENTS["harbour"]) == "harbour"
        assert kept["late"].embedder is None

        env = cli_env(clean_env, dsn, wide)
        env["CARI_EMBEDDERS"] = json.dumps(profiles(wide))
        moved = subprocess.run(
            [sys.executable, "-m", "cari.cli", "reembed", "-c", "late", "--embedder", "large"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert moved.returncode == 0, moved.stderr
        assert widths(dsn, "late") == {WIDE}

        for mode in ("vector", "hybrid"):
            for key, text in DOCUMENTS.items():
                response = client.post(
                    "/v1/collections/late/search",
                    json={"query": text, "mode": mode, "top_k": 1, "explain": True},
                ).json()
                (found,) = response["results"]
                assert (found["document_id"], "vector" in found["retrievers"]) == (key, True)
                assert response["degraded"] == []


def test_widths_above_pgvectors_limit_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"CARI_EMBEDDING_DIMENSIONS: 5000 dimensions .*4,000"):
        load_settings(embedder="openai", embedding_model="m", embedding_dimensions=5000)
    too_wide = {"big": {"model": "m", "dimensions": 4001, "base_url": "http://x/v1"}}
    with pytest.raises(ConfigError, match=r"CARI_EMBEDDERS.*4001 dimensions"):
        load_settings(embedders=too_wide)
    upside_down = {"big": too_wide["big"] | {"dimensions": 8, "cosine_floor": 0.99}}
    with pytest.raises(ConfigError, match=r"cosine floor 0\.99 must be below its ceiling 0\.98"):
        load_settings(embedders=upside_down)
    with pytest.raises(ConfigError, match="'local' names the bundled model"):
        load_settings(embedders={"local": too_wide["big"] | {"dimensions": 8}})
    at_limit = Settings(_env_file=None, embedder="openai", embedding_dimensions=4000)  # type: ignore[call-arg]
    assert space(at_limit.embedding_dimension, at_limit) == Space(4000, "halfvec")
    assert space(2000, at_limit) == Space(2000, "vector")


def test_resize_moves_the_default_collections_to_halfvec(empty_dsn: str) -> None:
    """From 1,536 dimensions (vector) to 3,072 (halfvec): the vectors of the other width are
    emptied, the 3,072 index built, the 1,536 one dropped; the bundled model's stays."""
    narrow = settings_for(empty_dsn, embedder="openai", embedding_dimensions=1536)
    migrations.upgrade(empty_dsn, narrow)
    with psycopg.connect(empty_dsn) as conn:
        conn.execute("INSERT INTO collections (name) VALUES ('c')")
    broad = settings_for(empty_dsn, embedder="openai", embedding_dimensions=WIDE)
    assert migrations.resize_embeddings(empty_dsn, broad) == 1
    with psycopg.connect(empty_dsn) as conn:
        indexes = {str(r[0]) for r in conn.execute(query("vector_indexes_present")).fetchall()}
        dimensions = conn.execute("SELECT dimensions FROM collections").fetchone()
    assert dimensions == (WIDE,)
    assert indexes == {
        f"{table}_embedding_{kind}_idx"
        for table in ("chunks", "catalog_items")
        for kind in ("vector_384", "halfvec_3072")
    }


def test_start_up_refuses_a_collection_its_embedder_no_longer_fits(dsn: str) -> None:
    large = {"large": {"model": "m", "dimensions": WIDE, "base_url": "http://x/v1"}}
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO collections (name, embedder, dimensions) VALUES ('w', 'large', %s)",
            (WIDE,),
        )
    db.check_embedding_dimension(dsn, settings_for(dsn, embedders=large))
    with pytest.raises(ConfigError, match="embedder 'large' is not configured"):
        db.check_embedding_dimension(dsn, settings_for(dsn))
    narrower = {"large": large["large"] | {"dimensions": 1024}}
    with pytest.raises(ConfigError, match=r"stores 3072-dimensional .* 'w' .* makes 1024"):
        db.check_embedding_dimension(dsn, settings_for(dsn, embedders=narrower))


def test_a_collection_on_the_bundled_model_beside_an_embedding_service(
    dsn: str, wide: FakeOpenAI
) -> None:
    """The default embedder is the service; a collection naming `local` is embedded, and its
    questions too, by the real bundled model, which the service never hears of."""
    with open_app(dsn, wide) as client:
        created = client.post("/v1/collections", json={"name": "bundled", "embedder": "local"})
        assert created.status_code == 201, created.text
        add(client, "bundled")
        assert widths(dsn, "bundled") == {384}
        for key, text in DOCUMENTS.items():
            assert top(client, "bundled", text) == key
    assert wide.requests == []


def test_vectors_of_a_replaced_model_are_not_written(dsn: str) -> None:
    """A batch embedded before its collection moved to another model is stored without
    vectors (the server's re-embedding gives it the new model's), not with the old ones."""

    async def write() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await register_vector_async(conn)
            await conn.execute("INSERT INTO collections (name) VALUES ('raced')")
            before = await store.collection_ref(conn, "raced")
            await conn.execute("UPDATE collections SET embedder = 'local' WHERE name = 'raced'")
            document = store.NewDocument("d", "", [Section("text")], {}, None)
            chunk = NewChunk(0, "", "text", 1, {})
            vector = np.ones(384, dtype=np.float32)
            await store.write_documents(
                conn, before, [store.PreparedDocument(document, [chunk], [vector])]
            )

    asyncio.run(write())
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT embedding IS NULL FROM chunks").fetchone()
    assert row == (True,)
