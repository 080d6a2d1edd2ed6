"""Keyword search is Okapi BM25: scores equal a reference library's, pruning keeps the top exact,
statistics stay exact under concurrent writers, and languages stem as they should."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest
from bench.reference import ReferenceBM25, analyzed_tokens, query_terms
from pgvector.psycopg import register_vector_async
from psycopg import sql

from cari import collection
from cari.db import keyword_engine
from cari.ingest import store
from cari.ingest.chunking import NewChunk
from cari.ingest.formats import Section
from cari.ingest.store import (
    EVERY_DOCUMENT,
    CollectionRef,
    NewDocument,
    PreparedDocument,
    clear_documents,
    collection_ref,
    delete_document,
    write_documents,
)
from cari.schema.collections import CollectionCreate, CollectionUpdate
from cari.search import bm25
from cari.search.filters import compile_filters
from cari.settings import Settings
from tests.conftest import app_client

AConn = psycopg.AsyncConnection[Any]
NO_FILTERS = sql.SQL("")

# Real words with very different frequencies: a few common, a long tail of rare ones.
WORDS = [
    "flow",
    "pressure",
    "wing",
    "boundary",
    "layer",
    "heat",
    "transfer",
    "shock",
    "wave",
    "supersonic",
    "laminar",
    "turbulent",
    "model",
    "theory",
    "solution",
    "equation",
    "velocity",
    "surface",
    "plate",
    "cylinder",
    "cone",
    "jet",
    "nozzle",
    "mach",
    "number",
    "reynolds",
    "stagnation",
    "point",
    "separation",
    "viscous",
    "inviscid",
    "compressible",
    "buoyancy",
    "radiation",
    "conduction",
    "convection",
    "vortex",
    "wake",
    "drag",
    "lift",
    "airfoil",
    "blade",
    "rotor",
    "stator",
    "combustion",
    "flame",
    "ignition",
    "detonation",
    "plasma",
    "magnetic",
    "electric",
    "field",
    "charge",
    "ion",
]

SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]


def corpus(seed: int, documents: int, vocabulary: list[str] = WORDS) -> list[tuple[str, str, str]]:
    """(id, title, text) with Zipf-like word frequencies over the vocabulary."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) ** 1.1 for rank in range(len(vocabulary))]
    out = []
    for i in range(documents):
        title = " ".join(rng.choices(vocabulary, weights, k=rng.randint(0, 4)))
        text = " ".join(rng.choices(vocabulary, weights, k=rng.randint(3, 60)))
        out.append((f"d{i}", title, text))
    return out


def prepared(doc_id: str, title: str, text: str, language: str | None = None) -> PreparedDocument:
    document = NewDocument(doc_id, title, [Section(text)], {}, None, language)
    return PreparedDocument(document, [NewChunk(0, title, text, len(text.split()), {})], None)


async def connect(dsn: str) -> AConn:
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    await register_vector_async(conn)
    return conn


async def with_collection(
    dsn: str, spec: CollectionCreate, work: Callable[[AConn, CollectionRef], Awaitable[Any]]
) -> Any:
    async with await connect(dsn) as conn:
        await collection.create(conn, spec, SETTINGS)
        return await work(conn, await collection_ref(conn, spec.name))


async def external_ids(conn: AConn) -> dict[int, str]:
    """Each chunk's document id."""
    cur = await conn.execute(
        "SELECT c.id, d.external_id FROM chunks c JOIN documents d ON d.id = c.document_id"
    )
    return {int(r[0]): str(r[1]) for r in await cur.fetchall()}


async def keyword(conn: AConn, ref: CollectionRef, text: str, k: int = 10) -> list[Any]:
    """The top k by the database's engine; with the extension, everything written is folded
    into blocks first, so these tests check the C walker (and the SQL statement elsewhere)."""
    found = await bm25.search(
        conn,
        ref.id,
        text,
        candidates=k,
        filters=NO_FILTERS,
        params={},
        engine=await folded_engine(conn, ref),
    )
    return found.candidates


async def folded_engine(conn: AConn, ref: CollectionRef) -> bm25.Engine:
    await store.compact_statistics(conn, ref, fold_postings=1)
    return (await keyword_engine.detect(conn, SETTINGS)).name


@pytest.mark.parametrize("engine", ["installed", "sql"])
@pytest.mark.parametrize("k3", [0.0, 1.2, 1000.0])
def test_scores_equal_the_reference_library(dsn: str, k3: float, engine: str) -> None:
    """With title boost 1, Cari's BM25 on its tsvector equals bm25s on the same tokens, a word
    the query repeats weighed by k3 as Okapi's formula says: by the database's engine (the
    extension where the server has it) and by the SQL statement alone (the extension dropped,
    as on a server without it)."""
    if engine == "sql":
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP EXTENSION IF EXISTS cari_bm25")
    docs = corpus(1, 300)
    rng = random.Random(2)
    # Two queries in three say their first word again, once or twice.
    queries = []
    for i in range(40):
        words = rng.sample(WORDS, rng.randint(1, 6))
        queries.append(" ".join(words + [words[0]] * (i % 3)))

    async def work(conn: AConn, ref: CollectionRef) -> None:
        await write_documents(conn, ref, [prepared(*d) for d in docs])
        with psycopg.connect(dsn) as sync:
            tokens = analyzed_tokens(sync, "english", [f"{t} {x}" for _, t, x in docs])
            query_tokens = query_terms(sync, "english", queries)
        assert sum(len(set(q)) < len(q) for q in query_tokens) >= 20
        reference = ReferenceBM25(tokens, k1=1.2, b=0.75)
        ids = await external_ids(conn)
        for text, q in zip(queries, query_tokens, strict=True):
            expected = reference.search(q, k=20, k3=k3)
            got = await keyword(conn, ref, text, k=20)
            assert [round(c.score, 6) for c in got] == [round(s, 6) for _, s in expected]
            # The same documents in the same order, up to ties (also across the cut).
            by_score: dict[float, set[str]] = {}
            for index, score in reference.search(q, k=len(docs), k3=k3):
                by_score.setdefault(round(score, 6), set()).add(docs[index][0])
            for c in got:
                assert ids[c.chunk_id] in by_score[round(c.score, 6)]

    spec = CollectionCreate(name="ref", language="english", title_boost=1.0, bm25_k3=k3)
    asyncio.run(with_collection(dsn, spec, work))


@pytest.mark.parametrize("engine", ["installed", "sql"])
def test_the_ceiling_is_what_every_word_said_very_often_scores(dsn: str, engine: str) -> None:
    """A keyword search returns the question's ceiling, Σ idf · (k1 + 1) over its words: with
    no length normalisation (b 0), a chunk saying each of them 300 times comes within 1 % of
    it, one saying one of them once far below; by either engine."""
    if engine == "sql":
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP EXTENSION IF EXISTS cari_bm25")
    docs = [
        *corpus(3, 60),
        ("full", "", " ".join(["solar wind"] * 300)),
        ("once", "", "solar " + " ".join(WORDS[:20])),
    ]

    async def work(conn: AConn, ref: CollectionRef) -> None:
        await write_documents(conn, ref, [prepared(*d) for d in docs])
        found = await bm25.search(
            conn,
            ref.id,
            "solar wind",
            candidates=10,
            filters=NO_FILTERS,
            params={},
            engine=await folded_engine(conn, ref),
        )
        ids = await external_ids(conn)
        scores = {ids[c.chunk_id]: c.score for c in found.candidates}
        assert 0.99 * found.ceiling < scores["full"] < found.ceiling
        assert scores["once"] < 0.5 * found.ceiling

    spec = CollectionCreate(name="ceiling", language="english", title_boost=1.0, bm25_b=0.0)
    asyncio.run(with_collection(dsn, spec, work))


def test_filters_keep_the_ranking_of_what_passes(dsn: str) -> None:
    """A filtered keyword search ranks exactly like the unfiltered one, minus what fails."""
    docs = corpus(3, 400)
    rng = random.Random(4)
    queries = [" ".join(rng.choices(WORDS, k=rng.randint(1, 8))) for _ in range(30)]
    kept = {d[0] for d in docs[::3]}
    fragment, params = compile_filters({"document_ids": sorted(kept)})

    async def work(conn: AConn, ref: CollectionRef) -> None:
        await write_documents(conn, ref, [prepared(*d) for d in docs])
        cur = await conn.execute(
            "SELECT c.id, d.external_id FROM chunks c JOIN documents d ON d.id = c.document_id"
        )
        owner = {int(r[0]): str(r[1]) for r in await cur.fetchall()}
        for q in queries:
            everything = await keyword(conn, ref, q, k=len(docs))
            found = await bm25.search(
                conn,
                ref.id,
                q,
                candidates=10,
                filters=fragment,
                params=params,
                engine=await folded_engine(conn, ref),
            )
            expected = [c for c in everything if owner[c.chunk_id] in kept][:10]
            assert [round(c.score, 9) for c in found.candidates] == [
                round(c.score, 9) for c in expected
            ], q

    asyncio.run(with_collection(dsn, CollectionCreate(name="filters", language="english"), work))


def test_title_words_weigh_more_and_parameters_apply_at_once(dsn: str) -> None:
    async def work(conn: AConn, ref: CollectionRef) -> None:
        await write_documents(
            conn,
            ref,
            [
                prepared("in-title", "turbine blades", "a report on maintenance schedules"),
                prepared("in-body", "maintenance", "a report on turbine blades schedules"),
            ],
        )

        async def order() -> list[str]:
            found = await keyword(conn, ref, "turbine blades")
            cur = await conn.execute(
                "SELECT d.external_id FROM unnest(%s::bigint[]) WITH ORDINALITY AS f(id, n) "
                "JOIN chunks c ON c.id = f.id JOIN documents d ON d.id = c.document_id "
                "ORDER BY n",
                ([c.chunk_id for c in found],),
            )
            return [str(r[0]) for r in await cur.fetchall()]

        assert await order() == ["in-title", "in-body"]
        await collection.update(conn, "boost", CollectionUpdate(title_boost=0.0))
        assert await order() == ["in-body"]  # a title word now counts for nothing
        await collection.update(conn, "boost", CollectionUpdate(title_boost=3.0, bm25_k1=2.0))
        assert await order() == ["in-title", "in-body"]

    asyncio.run(with_collection(dsn, CollectionCreate(name="boost", language="english"), work))


@pytest.mark.parametrize(
    ("language", "text", "query"),
    [
        ("indonesian", "Pembelian mobil baru secara kredit", "beli mobil"),
        ("indonesian", "Cara membeli rumah", "pembelian rumah"),
        ("english", "The engineers were running the turbines", "engineer runs turbine"),
    ],
)
def test_collection_language_stems(dsn: str, language: str, text: str, query: str) -> None:
    async def work(conn: AConn, ref: CollectionRef) -> list[Any]:
        await write_documents(conn, ref, [prepared("doc", "", text), prepared("other", "", "x")])
        return await keyword(conn, ref, query)

    found = asyncio.run(with_collection(dsn, CollectionCreate(name="l", language=language), work))
    assert len(found) == 1


def test_indonesian_question_words_are_not_search_terms(dsn: str) -> None:
    """PostgreSQL's `indonesian` has no stop words: "siapakah" was a search term, and a rare one
    in declarative text. Query stop words (migration 0007) drop it; documents keep it."""
    documents = [
        ("answer", "Soekarno", "Soekarno adalah presiden pertama Republik Indonesia"),
        ("asks", "", "Siapakah dia? Apakah itu benar? Siapa yang tahu?"),
        *((f"filler-{i}", "", f"kota {i} terletak di pulau Jawa") for i in range(6)),
    ]

    async def work(conn: AConn, ref: CollectionRef) -> dict[str, list[str]]:
        await write_documents(conn, ref, [prepared(*d) for d in documents])
        ids = await external_ids(conn)

        async def found(text: str) -> list[str]:
            return [ids[c.chunk_id] for c in await keyword(conn, ref, text)]

        result = {
            "question": await found("Siapakah presiden pertama Indonesia?"),
            "only stop words": await found("Apakah itu?"),
            "stop word itself": await found("yang"),
        }
        # The list is a table: a word added there stops counting at once.
        result["before"] = await found("terletak")
        await conn.execute(
            "INSERT INTO query_stopwords SELECT 'indonesian', lexeme"
            " FROM unnest(to_tsvector('indonesian', 'terletak'))"
        )
        result["after"] = await found("terletak")
        return result

    found = asyncio.run(
        with_collection(dsn, CollectionCreate(name="tanya", language="indonesian"), work)
    )
    assert found["question"] == ["answer"]
    assert found["only stop words"] == []
    assert found["stop word itself"] == []
    assert len(found["before"]) == 6
    assert found["after"] == []


def test_a_document_may_carry_its_own_language(dsn: str) -> None:
    with app_client(dsn) as client:
        client.post("/v1/collections", json={"name": "mixed", "language": "indonesian"})
        response = client.post(
            "/v1/collections/mixed/documents",
            json={
                "documents": [
                    {"id": "en", "text": "The engineers were running tests", "language": "english"},
                    {"id": "id", "text": "Para insinyur sedang menjalankan pengujian"},
                ]
            },
        )
        assert response.status_code == 200, response.text

        def top(query: str) -> list[str]:
            body = {"query": query, "mode": "keyword"}
            found = client.post("/v1/collections/mixed/search", json=body).json()
            return [r["document_id"] for r in found["results"]]

        assert top("engineer run") == ["en"]  # stemmed as English, though the collection isn't
        assert top("jalankan uji") == ["id"]
        bad = client.post(
            "/v1/collections/mixed/documents",
            json={"documents": [{"id": "x", "text": "hello", "language": "klingon"}]},
        )
        assert bad.status_code == 422  # its one document rejected, named with the reason
        assert "klingon" in bad.json()["errors"][0]["message"]
        assert "klingon" in bad.json()["detail"]


def test_statistics_stay_exact_under_concurrent_writers(dsn: str) -> None:
    """Four connections insert, replace, delete and clear documents at once; a full recount then
    finds the postings and statistics exactly right, and a corrupted one is caught."""
    spec = CollectionCreate(name="busy", language="english")
    rng = random.Random(5)

    async def writer(seed: int) -> None:
        local = random.Random(seed)
        async with await connect(dsn) as conn:
            ref = await collection_ref(conn, "busy")
            for step in range(25):
                ids = local.sample(range(60), 8)  # overlapping ids: replacements race
                docs = [prepared(f"d{i}", *corpus(seed * 100 + step + i, 1)[0][1:]) for i in ids]
                await write_documents(conn, ref, docs)
                if step % 5 == 4:
                    try:
                        await delete_document(conn, ref, f"d{local.randrange(60)}", EVERY_DOCUMENT)
                    except Exception as exc:  # someone else deleted it first
                        assert "does not exist" in str(exc)
                if seed == 3 and step == 12:
                    await clear_documents(conn, ref)

    async def run() -> dict[str, int]:
        async with await connect(dsn) as conn:
            await collection.create(conn, spec, SETTINGS)
        await asyncio.gather(*(writer(rng.randrange(1000) * 10 + n) for n in range(4)))
        async with await connect(dsn) as conn:
            return await collection.keyword_index_differences(conn, "busy")

    differences = asyncio.run(run())
    assert differences == {
        "postings": 0,
        "document frequencies": 0,
        "sizes": 0,
    }
    with psycopg.connect(dsn, autocommit=True) as conn:
        chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()
        sizes = conn.execute("SELECT sum(chunks) FROM bm25_sizes").fetchone()
        assert chunks is not None and sizes is not None and chunks[0] > 0
        assert sizes[0] == chunks[0]  # folded by compaction, not left pending
        conn.execute("UPDATE bm25_terms SET df = df + 1 WHERE lexeme = 'flow'")
        # One posting wrong: a posting row lost or, where there is none (the extension writes
        # one delta row per chunk and folds into blocks), one the chunk does not have.
        if conn.execute("SELECT FROM postings LIMIT 1").fetchone() is not None:
            conn.execute("DELETE FROM postings WHERE ctid = (SELECT min(ctid) FROM postings)")
        else:
            conn.execute(
                "INSERT INTO postings (collection_id, lexeme, chunk_id, tf_title, tf_body,"
                " len_title, len_body) SELECT collection_id, 'nosuchlexeme', id, 0, 1, 0, 1"
                " FROM chunks ORDER BY id LIMIT 1"
            )

    async def recount() -> dict[str, int]:
        async with await connect(dsn) as conn:
            return await collection.keyword_index_differences(conn, "busy")

    broken = asyncio.run(recount())
    assert broken["document frequencies"] >= 1 and broken["postings"] == 1


def test_cli_checks_and_repairs(dsn: str, clean_env: dict[str, str]) -> None:
    async def work(conn: AConn, ref: CollectionRef) -> None:
        await write_documents(conn, ref, [prepared(*d) for d in corpus(6, 50)])

    asyncio.run(with_collection(dsn, CollectionCreate(name="ops", language="english"), work))
    env = {**clean_env, "DATABASE_URL": dsn}

    def cari(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cari.cli", "bm25", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    assert cari("check").stdout == "ops: exact\n"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM bm25_terms WHERE lexeme = 'flow'")
    failed = cari("check", "-c", "ops")
    assert failed.returncode == 1
    assert failed.stdout == "ops: differs: 1 document frequencies\n"
    assert cari("repair").stdout == "ops: rebuilt\n"
    assert cari("check").returncode == 0
    missing = cari("repair", "-c", "nope")
    assert missing.returncode == 1 and "'nope' does not exist" in missing.stderr


def test_a_large_document_goes_in_several_copies_and_stays_whole(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document of more chunks than one COPY takes is written by several (so no statement
    grows with the document), in one transaction: whole, indexed exactly, or not at all."""
    monkeypatch.setattr(store, "COPY_ROWS", 4)

    def document(doc_id: str, texts: list[str]) -> PreparedDocument:
        chunks = [NewChunk(i, "", t, len(t.split()), {}) for i, t in enumerate(texts)]
        return PreparedDocument(
            NewDocument(doc_id, "", [Section(" ".join(texts))], {}, None), chunks, None
        )

    words = [f"alpha beta word{i}" for i in range(10)]

    async def work(conn: AConn, ref: CollectionRef) -> None:
        # Each statement that inserts chunks logs how many (this test's own database).
        await conn.execute("CREATE TABLE inserts (n bigint)")
        await conn.execute(
            "CREATE FUNCTION log_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "INSERT INTO inserts SELECT count(*) FROM new_rows; RETURN NULL; END $$"
        )
        await conn.execute(
            "CREATE TRIGGER log_insert AFTER INSERT ON chunks REFERENCING NEW TABLE AS new_rows "
            "FOR EACH STATEMENT EXECUTE FUNCTION log_insert()"
        )
        await write_documents(conn, ref, [document("big", words)])
        cur = await conn.execute("SELECT n FROM inserts")
        assert [r[0] for r in await cur.fetchall()] == [4, 4, 2]
        cur = await conn.execute("SELECT ordinal FROM chunks ORDER BY ordinal")
        assert [r[0] for r in await cur.fetchall()] == list(range(10))
        assert set((await collection.keyword_index_differences(conn, "big")).values()) == {0}
        # A row the third COPY cannot take (NUL in text) undoes the first two as well.
        broken = [*words[:9], "bad\x00text"]
        with pytest.raises(psycopg.DataError):
            await write_documents(conn, ref, [document("broken", broken)])
        cur = await conn.execute("SELECT count(*) FROM chunks")
        assert await cur.fetchone() == (10,)
        cur = await conn.execute("SELECT count(*) FROM documents")
        assert await cur.fetchone() == (1,)

    asyncio.run(with_collection(dsn, CollectionCreate(name="big", language="english"), work))
