"""The `cari_bm25` extension's keyword search against the SQL statement, on the same data.

The oracle is `search_keyword.sql`, the SQL engine, reading every posting wherever it is stored:
where it reads a lexeme's rows of the `postings` table, it reads a copy of the collection's
postings that adds the packed blocks', less the dead chunks, to the delta's (its one change),
taken again whenever what is stored changed. Both engines must
return the same chunks in the same order with the same scores, whatever the state of the
collection: all in the delta, all folded, folded then written, replaced and deleted, with
several languages, titles, synonyms, typo corrections, filters and candidates.

Where the server has no extension these tests skip, unless CARI_REQUIRE_BM25_EXTENSION is set
(CI sets it: there the extension must be built and both engines compared).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cari import collection, synonyms
from cari.db import keyword_engine, migrations
from cari.db.queries import query
from cari.ingest.store import (
    EVERY_DOCUMENT,
    CollectionRef,
    clear_documents,
    collection_ref,
    compact_statistics,
    delete_document,
    write_documents,
)
from cari.schema.collections import CollectionCreate
from cari.search import bm25
from cari.search.filters import compile_filters
from cari.settings import Settings
from tests.test_bm25 import WORDS, connect, corpus, prepared

AConn = psycopg.AsyncConnection[Any]
SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]
DATASETS = Path(__file__).resolve().parents[2] / "shared" / "eval" / "datasets"
NO_FILTERS = sql.SQL("")

# Every posting of a collection wherever it is stored: the posting rows', the blocks' less the
# dead chunks, and the chunk delta's, counted from the chunks' tsvectors in SQL. Copied into a
# temporary table with its index, so that each question reads its lexemes' postings as the SQL
# engine reads its `postings` table, not by unpacking every block again.
ORACLE_POSTINGS = """
CREATE TEMPORARY TABLE oracle_postings AS
SELECT %(c)s::bigint AS collection_id, a.* FROM (
    SELECT p.lexeme, p.chunk_id, p.tf_title, p.tf_body, p.len_title, p.len_body
    FROM postings AS p WHERE p.collection_id = %(c)s
    UNION ALL
    SELECT b.lexeme, u.chunk_id, u.tf_title::smallint, u.tf_body::smallint, u.len_title,
           u.len_body
    FROM bm25_blocks AS b CROSS JOIN LATERAL bm25_unpack(b.data) AS u
    WHERE b.collection_id = %(c)s
      AND NOT EXISTS (SELECT FROM bm25_dead AS d
                      WHERE d.collection_id = %(c)s AND d.chunk_id = u.chunk_id)
    UNION ALL
    SELECT x.lexeme, d.chunk_id, x.tf_title::smallint, x.tf_body::smallint,
           x.len_title::integer, x.len_body::integer
    FROM bm25_delta AS d
    JOIN chunks AS ch ON ch.id = d.chunk_id
    CROSS JOIN LATERAL (
        SELECT u.lexeme, cardinality(array_positions(u.weights, 'A')) AS tf_title,
               cardinality(u.weights) - cardinality(array_positions(u.weights, 'A')) AS tf_body,
               sum(cardinality(array_positions(u.weights, 'A'))) OVER () AS len_title,
               sum(cardinality(u.weights) - cardinality(array_positions(u.weights, 'A')))
                   OVER () AS len_body
        FROM unnest(ch.tsv) AS u
    ) AS x
    WHERE d.collection_id = %(c)s
) AS a
"""
# What the copy was taken from: every stored row's version (a write, delete or fold makes new
# ones), so that a comparison never reads a copy older than what the extension reads.
ORACLE_VERSION = """
SELECT coalesce(sum(hashtext(v)::bigint), 0), count(*) FROM (
    SELECT b.xmin::text || b.ctid::text AS v FROM bm25_blocks AS b WHERE b.collection_id = %(c)s
    UNION ALL
    SELECT d.xmin::text || d.ctid::text FROM bm25_dead AS d WHERE d.collection_id = %(c)s
    UNION ALL
    SELECT d.xmin::text || d.ctid::text || ch.xmin::text || ch.ctid::text
    FROM bm25_delta AS d JOIN chunks AS ch ON ch.id = d.chunk_id WHERE d.collection_id = %(c)s
    UNION ALL
    SELECT p.xmin::text || p.ctid::text FROM postings AS p WHERE p.collection_id = %(c)s
) AS rows
"""
# The SQL engine's statement, reading that copy where it reads the `postings` table.
ORACLE_FROM = "FROM postings AS o\n"
ORACLE_POSTINGS_FROM = "FROM pg_temp.oracle_postings AS o\n"


@pytest.fixture
def ext_dsn(dsn: str) -> Iterator[str]:
    """A fresh migrated database with the extension, or a skip where the server has none."""
    with psycopg.connect(dsn) as conn:
        installed = conn.execute(query("keyword_engine")).fetchone() is not None
    statement = bm25.keyword_statement("sql").as_string(None)
    assert ORACLE_FROM in statement, "the oracle no longer reads the statement"
    if not installed:
        if os.environ.get("CARI_REQUIRE_BM25_EXTENSION"):
            pytest.fail("the cari_bm25 extension is not installed in the test database")
        pytest.skip("the server has no cari_bm25 extension (no C compiler?)")
    yield dsn


async def fold(conn: AConn, ref: CollectionRef) -> None:
    await compact_statistics(conn, ref, fold_postings=1)
    cur = await conn.execute(
        "SELECT (SELECT count(*) FROM postings WHERE collection_id = %(c)s)"
        " + (SELECT count(*) FROM bm25_delta WHERE collection_id = %(c)s)",
        {"c": ref.id},
    )
    row = await cur.fetchone()
    assert row is not None and row[0] == 0, "the fold left postings in the delta"


async def both(
    conn: AConn,
    oracle: AConn,
    ref: CollectionRef,
    text: str,
    *,
    candidates: int,
    filters: sql.Composable = NO_FILTERS,
    params: dict[str, Any] | None = None,
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    args: dict[str, Any] = {"candidates": candidates, "filters": filters, "params": params or {}}
    packed = await bm25.search(conn, ref.id, text, engine="cari_bm25", **args)
    await copy_postings(oracle, ref)
    statement = bm25.keyword_statement("sql", filters).as_string(oracle)
    assert statement.count(ORACLE_FROM) == 1  # the one read of the posting rows
    cur = await oracle.execute(
        statement.replace(ORACLE_FROM, ORACLE_POSTINGS_FROM).encode(),
        {
            **(params or {}),
            **packed.lexemes.params(),  # the lexemes are the analysis' (query_lexemes.sql)
            "collection_id": ref.id,
            "candidates": candidates,
        },
    )
    return (
        [(c.chunk_id, c.score) for c in packed.candidates],
        [(int(r[0]), float(r[1])) for r in await cur.fetchall()],
    )


def assert_same(got: list[tuple[int, float]], expected: list[tuple[int, float]], what: str) -> None:
    """Same scores in the same order; the same chunks except where scores tie (to 1e-9), where
    the sums' order of additions may differ in the last bit."""
    assert len(got) == len(expected), what
    for (gid, gscore), (eid, escore) in zip(got, expected, strict=True):
        assert gscore == pytest.approx(escore, rel=1e-9, abs=1e-12), what
        if gid != eid:
            tied = {i for i, s in expected if s == pytest.approx(gscore, rel=1e-9)}
            assert gid in tied, what


# Each oracle connection's copy: the collection and the version it was taken from.
COPIED: weakref.WeakKeyDictionary[AConn, tuple[int, tuple[int, int]]] = weakref.WeakKeyDictionary()


async def copy_postings(oracle: AConn, ref: CollectionRef) -> None:
    """Copy the collection's postings for the oracle unless the copy is of what is stored."""
    cur = await oracle.execute(ORACLE_VERSION, {"c": ref.id})
    version = await cur.fetchone()
    assert version is not None
    if COPIED.get(oracle) == (ref.id, version):
        return
    await oracle.execute("DROP TABLE IF EXISTS pg_temp.oracle_postings")
    await oracle.execute(ORACLE_POSTINGS, {"c": ref.id})
    await oracle.execute("CREATE INDEX ON pg_temp.oracle_postings (collection_id, lexeme)")
    await oracle.execute("ANALYZE pg_temp.oracle_postings")
    COPIED[oracle] = (ref.id, version)


def test_the_extension_equals_the_sql_statement_in_every_state(ext_dsn: str) -> None:
    """Several languages, titles, synonyms and typo corrections; compared all in the delta,
    folded, and folded then added to, replaced and deleted; with filters and candidates."""
    rng = random.Random(38)
    docs = corpus(38, 400)
    spec = CollectionCreate(name="engines", language="english", typo_weight=0.7)
    queries = [" ".join(rng.sample(WORDS, rng.randint(1, 7))) for _ in range(40)]
    queries += ["pressures flowing", "turbulnt boundari layer", "wing heat transfer", "lift lift"]
    kept = {d[0] for d in docs[::4]}
    fragment, filter_params = compile_filters({"document_ids": sorted(kept)})

    async def compare(conn: AConn, oracle: AConn, ref: CollectionRef, state: str) -> None:
        for text in queries:
            for candidates in (1, 10, 40):
                got, expected = await both(conn, oracle, ref, text, candidates=candidates)
                assert_same(got, expected, f"{state}: {text!r} top {candidates}")
            got, expected = await both(
                conn, oracle, ref, text, candidates=10, filters=fragment, params=filter_params
            )
            assert_same(got, expected, f"{state}: {text!r} filtered")

    async def run() -> None:
        async with await connect(ext_dsn) as conn, await connect(ext_dsn) as oracle:
            await collection.create(conn, spec, SETTINGS)
            ref = await collection_ref(conn, spec.name)
            rules = ["flow, stream", "wing => airfoil, blade", "heat transfer => conduction"]
            await synonyms.replace(conn, spec.name, synonyms.Synonyms(rules=rules))
            languages = ["english", "simple", "indonesian", None]
            await write_documents(
                conn,
                ref,
                [prepared(*d, language=languages[i % 4]) for i, d in enumerate(docs)],
                compact=False,
            )
            await compare(conn, oracle, ref, "all in the delta")
            await fold(conn, ref)
            await compare(conn, oracle, ref, "folded")
            # New documents (appended), replaced ones (dead in the blocks, new in the delta)
            # and deleted ones.
            changed = [prepared(f"d{i}", *corpus(900 + i, 1)[0][1:]) for i in range(0, 400, 7)]
            fresh = [prepared(f"n{i}", *corpus(700 + i, 1)[0][1:]) for i in range(30)]
            await write_documents(conn, ref, changed + fresh, compact=False)
            for i in range(3, 400, 11):
                await delete_document(conn, ref, f"d{i}", EVERY_DOCUMENT)
            await compare(conn, oracle, ref, "folded, then written")
            await fold(conn, ref)
            await compare(conn, oracle, ref, "folded again")
            cur = await conn.execute("SELECT count(*) FROM bm25_dead")
            assert (await cur.fetchone()) == (0,)
            assert await collection.keyword_index_differences(conn, spec.name) == {
                "postings": 0,
                "document frequencies": 0,
                "sizes": 0,
            }

    asyncio.run(run())


def records(dataset: str) -> list[dict[str, str]]:
    with (DATASETS / dataset / "corpus.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def questions(dataset: str, split: str, limit: int) -> list[str]:
    wanted = {
        line.split("\t")[0]
        for line in (DATASETS / dataset / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]
    }
    with (DATASETS / dataset / "queries.jsonl").open(encoding="utf-8") as f:
        found = [json.loads(line) for line in f]
    return [q["text"] for q in found if q["_id"] in wanted][:limit]


@pytest.mark.parametrize(
    ("dataset", "language", "split", "limit"),
    [("cranfield", "english", "test", 225), ("tydiqa-goldp-id", "indonesian", "dev", 120)],
)
def test_the_extension_equals_the_sql_statement_on_real_questions(
    ext_dsn: str, dataset: str, language: str, split: str, limit: int
) -> None:
    """A real corpus folded, then a tenth of it written again into the delta: every question
    of the set (TyDi: the first of its dev split) ranks the same by both engines."""
    if not (DATASETS / dataset).is_dir():
        # The evaluation sets live beside the clone, not in it: a clone on its own has none.
        reason = f"no {dataset} evaluation set at {DATASETS}"
        if os.environ.get("CARI_REQUIRE_DATASETS"):
            pytest.fail(f"{reason}, and CARI_REQUIRE_DATASETS is set")
        pytest.skip(reason)
    docs = records(dataset)
    texts = questions(dataset, split, limit)
    spec = CollectionCreate(name="real", language=language)

    async def run() -> None:
        async with await connect(ext_dsn) as conn, await connect(ext_dsn) as oracle:
            await collection.create(conn, spec, SETTINGS)
            ref = await collection_ref(conn, spec.name)
            batch = [prepared(d["_id"], d.get("title", ""), d["text"]) for d in docs]
            for start in range(0, len(batch), 500):
                await write_documents(conn, ref, batch[start : start + 500], compact=False)
            await fold(conn, ref)
            again = [prepared(d["_id"], "", d["text"] + " " + d.get("title", "")) for d in docs]
            await write_documents(conn, ref, again[::10], compact=False)
            await compact_statistics(conn, ref, fold_postings=10**9)
            for text in texts:
                for candidates in (10, 40):
                    got, expected = await both(conn, oracle, ref, text, candidates=candidates)
                    assert_same(got, expected, f"{text!r} top {candidates}")

    asyncio.run(run())


def test_concurrent_writers_and_folds_stay_exact(ext_dsn: str) -> None:
    """Four writers add, replace and delete while folds run beside them: afterwards a recount
    finds the blocks, the delta and the statistics exact, and both engines agree."""
    spec = CollectionCreate(name="busy", language="english")
    rng = random.Random(7)

    async def writer(seed: int) -> None:
        local = random.Random(seed)
        async with await connect(ext_dsn) as conn:
            ref = await collection_ref(conn, "busy")
            for step in range(20):
                ids = local.sample(range(80), 8)
                docs = [prepared(f"d{i}", *corpus(seed * 100 + step + i, 1)[0][1:]) for i in ids]
                await write_documents(conn, ref, docs, compact=False)
                if step % 4 == 3:
                    try:
                        await delete_document(conn, ref, f"d{local.randrange(80)}", EVERY_DOCUMENT)
                    except Exception as exc:  # someone else deleted it first
                        assert "does not exist" in str(exc)

    async def folder(stop: asyncio.Event) -> None:
        async with await connect(ext_dsn) as conn:
            ref = await collection_ref(conn, "busy")
            while not stop.is_set():
                await compact_statistics(conn, ref, fold_postings=1)
                await asyncio.sleep(0.01)

    async def run() -> None:
        async with await connect(ext_dsn) as conn:
            await collection.create(conn, spec, SETTINGS)
        stop = asyncio.Event()
        folding = asyncio.create_task(folder(stop))
        await asyncio.gather(*(writer(rng.randrange(1000) * 10 + n) for n in range(4)))
        stop.set()
        await folding
        async with await connect(ext_dsn) as conn, await connect(ext_dsn) as oracle:
            ref = await collection_ref(conn, "busy")
            assert await collection.keyword_index_differences(conn, "busy") == {
                "postings": 0,
                "document frequencies": 0,
                "sizes": 0,
            }
            cur = await conn.execute("SELECT count(*) FROM bm25_blocks")
            assert ((await cur.fetchone()) or (0,))[0] > 0
            for text in [" ".join(rng.sample(WORDS, 3)) for _ in range(20)]:
                got, expected = await both(conn, oracle, ref, text, candidates=10)
                assert_same(got, expected, text)

    asyncio.run(run())


def test_choosing_the_sql_engine_unfolds_the_blocks(ext_dsn: str) -> None:
    """CARI_KEYWORD_ENGINE=sql where the extension was created: the packed postings go back to
    the postings table (the dead chunks' left out), the extension is dropped, and the SQL
    statement then ranks as the extension did."""
    docs = corpus(9, 200)
    queries = [" ".join(random.Random(i).sample(WORDS, 3)) for i in range(15)]

    async def before() -> list[list[tuple[int, float]]]:
        async with await connect(ext_dsn) as conn:
            await collection.create(conn, CollectionCreate(name="c"), SETTINGS)
            ref = await collection_ref(conn, "c")
            await write_documents(conn, ref, [prepared(*d) for d in docs], compact=False)
            await fold(conn, ref)
            await delete_document(conn, ref, docs[0][0], EVERY_DOCUMENT)
            found = []
            for text in queries:
                got = await bm25.search(
                    conn,
                    ref.id,
                    text,
                    candidates=10,
                    filters=NO_FILTERS,
                    params={},
                    engine="cari_bm25",
                )
                found.append([(c.chunk_id, c.score) for c in got.candidates])
            return found

    async def after() -> list[list[tuple[int, float]]]:
        async with await connect(ext_dsn) as conn:
            ref = await collection_ref(conn, "c")
            found = []
            for text in queries:
                got = await bm25.search(
                    conn, ref.id, text, candidates=10, filters=NO_FILTERS, params={}, engine="sql"
                )
                found.append([(c.chunk_id, c.score) for c in got.candidates])
            assert await collection.keyword_index_differences(conn, "c") == {
                "postings": 0,
                "document frequencies": 0,
                "sizes": 0,
            }
            return found

    expected = asyncio.run(before())
    forced = Settings(_env_file=None, keyword_engine="sql")  # type: ignore[call-arg]
    assert keyword_engine.install(ext_dsn, forced) == keyword_engine.SQL
    with psycopg.connect(ext_dsn) as conn:
        assert conn.execute(query("keyword_extension_installed")).fetchone() is None
        assert conn.execute("SELECT count(*) FROM bm25_blocks").fetchone() == (0,)
    for got, want in zip(asyncio.run(after()), expected, strict=True):
        assert_same(got, want, "after unfolding")


def test_a_folded_collection_cleared_and_half_deleted_stays_exact(ext_dsn: str) -> None:
    """Deleting half of a folded collection, then clearing it, then writing anew: each fold
    leaves blocks the recount agrees with, and both engines rank alike."""
    docs = corpus(11, 300)
    queries = [" ".join(random.Random(50 + i).sample(WORDS, 3)) for i in range(15)]

    async def run() -> None:
        async with await connect(ext_dsn) as conn, await connect(ext_dsn) as oracle:
            await collection.create(conn, CollectionCreate(name="c"), SETTINGS)
            ref = await collection_ref(conn, "c")
            await write_documents(conn, ref, [prepared(*d) for d in docs], compact=False)
            await fold(conn, ref)
            await conn.execute(
                "DELETE FROM documents WHERE collection_id = %s AND external_id = ANY(%s)",
                (ref.id, [d[0] for d in docs[::2]]),
            )
            await fold(conn, ref)
            for stage in ("half deleted", "cleared and written anew"):
                for text in queries:
                    got, expected = await both(conn, oracle, ref, text, candidates=10)
                    assert_same(got, expected, f"{stage}: {text}")
                assert await collection.keyword_index_differences(conn, "c") == {
                    "postings": 0,
                    "document frequencies": 0,
                    "sizes": 0,
                }
                await clear_documents(conn, ref)
                await fold(conn, ref)
                cur = await conn.execute("SELECT count(*) FROM bm25_blocks")
                assert await cur.fetchone() == (0,)
                await write_documents(conn, ref, [prepared(*d) for d in docs[:50]])
                await fold(conn, ref)

    asyncio.run(run())


@pytest.mark.parametrize("folded", [False, True])
def test_a_title_word_with_titles_and_k1_at_zero_scores_nothing(ext_dsn: str, folded: bool) -> None:
    """k1 0 and title boost 0 (both allowed): a posting only in a title has a count of 0 and
    scores 0 — not 0/0, which failed every search of the collection with a 422 — in both
    engines, from the delta and from the blocks."""

    async def run() -> None:
        async with await connect(ext_dsn) as conn, await connect(ext_dsn) as oracle:
            spec = CollectionCreate(name="z", bm25_k1=0.0, title_boost=0.0)
            await collection.create(conn, spec, SETTINGS)
            ref = await collection_ref(conn, "z")
            docs = [prepared("a", "turbine", "blade wake"), prepared("b", "", "turbine blade")]
            await write_documents(conn, ref, docs, compact=False)
            if folded:
                await fold(conn, ref)
            for text in ("turbine", "turbine blade", "wake"):
                got, expected = await both(conn, oracle, ref, text, candidates=10)
                assert_same(got, expected, text)
                assert got and all(score > 0 for _, score in got)

    asyncio.run(run())


async def _count(conn: AConn, table: str, ref: CollectionRef) -> int:
    cur = await conn.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE collection_id = %s").format(sql.Identifier(table)),
        (ref.id,),
    )
    return int(((await cur.fetchone()) or (0,))[0])


def test_both_kinds_of_delta_before_and_after_a_fold(ext_dsn: str) -> None:
    """With the extension a write appends one `bm25_delta` row per chunk and no posting row;
    without it (CARI_KEYWORD_ENGINE=sql) posting rows, the whole index. Switching back leaves
    those rows as a delta beside the chunk delta: chunks deleted and replaced in either before a
    fold leave nothing dead, both engines rank alike throughout, and one fold packs both."""
    docs = corpus(21, 240)
    queries = [" ".join(random.Random(300 + i).sample(WORDS, 3)) for i in range(15)]
    queries += ["pressures flowing", "wing heat transfer"]

    async def compare(ref: CollectionRef, state: str) -> None:
        async with await connect(ext_dsn) as conn, await connect(ext_dsn) as oracle:
            for text in queries:
                got, expected = await both(conn, oracle, ref, text, candidates=10)
                assert_same(got, expected, f"{state}: {text!r}")
            assert await collection.keyword_index_differences(conn, "c") == {
                "postings": 0,
                "document frequencies": 0,
                "sizes": 0,
            }

    async def chunk_delta() -> CollectionRef:
        async with await connect(ext_dsn) as conn:
            await collection.create(conn, CollectionCreate(name="c"), SETTINGS)
            ref = await collection_ref(conn, "c")
            await write_documents(conn, ref, [prepared(*d) for d in docs[:80]], compact=False)
            cur = await conn.execute(
                "SELECT count(*) FROM chunks WHERE collection_id = %s", (ref.id,)
            )
            chunks = ((await cur.fetchone()) or (0,))[0]
            assert await _count(conn, "bm25_delta", ref) == chunks > 0
            assert await _count(conn, "postings", ref) == 0
            return ref

    async def posting_rows(ref: CollectionRef) -> None:
        async with await connect(ext_dsn) as conn:
            # the SQL engine's own state: every posting a row, the chunk delta unfolded
            assert await _count(conn, "bm25_delta", ref) == 0
            assert await collection.keyword_index_differences(conn, "c") == {
                "postings": 0,
                "document frequencies": 0,
                "sizes": 0,
            }
            await write_documents(conn, ref, [prepared(*d) for d in docs[80:160]], compact=False)
            await delete_document(conn, ref, docs[0][0], EVERY_DOCUMENT)
            assert await _count(conn, "bm25_delta", ref) == 0

    async def both_deltas(ref: CollectionRef) -> None:
        async with await connect(ext_dsn) as conn:
            await write_documents(conn, ref, [prepared(*d) for d in docs[160:]], compact=False)
            assert await _count(conn, "bm25_delta", ref) > 0
            # deleted and replaced in the posting rows and in the chunk delta, before a fold
            for i in (1, 81, 161):
                await delete_document(conn, ref, docs[i][0], EVERY_DOCUMENT)
            replaced = [prepared(docs[i][0], *corpus(600 + i, 1)[0][1:]) for i in (2, 82, 162)]
            await write_documents(conn, ref, replaced, compact=False)
            assert await _count(conn, "bm25_dead", ref) == 0
        await compare(ref, "posting rows and chunk delta")
        async with await connect(ext_dsn) as conn:
            await fold(conn, ref)
            assert await _count(conn, "bm25_blocks", ref) > 0
            # deleted and replaced after the fold: dead in the blocks
            await delete_document(conn, ref, docs[3][0], EVERY_DOCUMENT)
            replaced = [prepared(docs[163][0], *corpus(700, 1)[0][1:])]
            await write_documents(conn, ref, replaced, compact=False)
            assert await _count(conn, "bm25_dead", ref) >= 2  # the chunks of both
            assert await _count(conn, "bm25_delta", ref) >= 1  # the replacement's
        await compare(ref, "folded, then deleted and replaced")

    ref = asyncio.run(chunk_delta())
    asyncio.run(compare(ref, "chunk delta"))
    forced = Settings(_env_file=None, keyword_engine="sql")  # type: ignore[call-arg]
    assert keyword_engine.install(ext_dsn, forced) == keyword_engine.SQL
    asyncio.run(posting_rows(ref))
    assert keyword_engine.install(ext_dsn, SETTINGS).name == "cari_bm25"
    asyncio.run(both_deltas(ref))


def test_downgrading_the_chunk_delta_keeps_every_posting(ext_dsn: str) -> None:
    """Revision 0017's downgrade turns the chunk delta back into posting rows (beside the blocks
    and the dead chunks, which revision 0016 reads as before) and its upgrade reads them as a
    delta: a recount agrees at each step and both engines rank alike at the end."""
    docs = corpus(33, 150)
    queries = [" ".join(random.Random(900 + i).sample(WORDS, 3)) for i in range(10)]
    settings = Settings(_env_file=None, database_url=ext_dsn)  # type: ignore[call-arg]

    async def load() -> CollectionRef:
        async with await connect(ext_dsn) as conn:
            await collection.create(conn, CollectionCreate(name="c"), SETTINGS)
            ref = await collection_ref(conn, "c")
            await write_documents(conn, ref, [prepared(*d) for d in docs[:100]], compact=False)
            await fold(conn, ref)
            await write_documents(conn, ref, [prepared(*d) for d in docs[100:]], compact=False)
            await delete_document(conn, ref, docs[0][0], EVERY_DOCUMENT)
            assert await _count(conn, "bm25_delta", ref) > 0
            assert await _count(conn, "bm25_dead", ref) > 0
            return ref

    async def recount() -> None:
        async with await connect(ext_dsn) as conn:
            assert await collection.keyword_index_differences(conn, "c") == {
                "postings": 0,
                "document frequencies": 0,
                "sizes": 0,
            }

    async def compare(ref: CollectionRef) -> None:
        async with await connect(ext_dsn) as conn, await connect(ext_dsn) as oracle:
            for text in queries:
                got, expected = await both(conn, oracle, ref, text, candidates=10)
                assert_same(got, expected, text)
            assert await _count(conn, "postings", ref) > 0  # the downgrade's rows: a delta
            await fold(conn, ref)
            for text in queries:
                got, expected = await both(conn, oracle, ref, text, candidates=10)
                assert_same(got, expected, f"folded: {text}")

    ref = asyncio.run(load())
    asyncio.run(recount())
    migrations.downgrade(ext_dsn, settings, "0016")
    with psycopg.connect(ext_dsn) as conn:
        assert conn.execute("SELECT to_regclass('bm25_delta')").fetchone() == (None,)
    asyncio.run(recount())
    migrations.upgrade(ext_dsn, settings)
    asyncio.run(recount())
    asyncio.run(compare(ref))


def test_a_fold_reads_the_block_ends_lexeme_by_lexeme(ext_dsn: str) -> None:
    """A collection created after `bm25_blocks` was analysed (beside another) has no blocks in
    the planner's statistics: its second fold still finds each changed lexeme's blocks by
    lexeme, never comparing every block with every changed lexeme (revision 0018's plan
    removed blocks times lexemes rows by join filter, 163M in a 9,000-chunk collection), and both
    engines rank alike after it. The fold's statements are read with auto_explain."""
    vocabulary = [f"w{i}" for i in range(2000)]
    docs = corpus(44, 1700, vocabulary)
    queries = [" ".join(random.Random(60 + i).sample(vocabulary[:200], 3)) for i in range(10)]
    plans: list[str] = []

    async def run() -> None:
        async with await connect(ext_dsn) as conn, await connect(ext_dsn) as oracle:
            await collection.create(conn, CollectionCreate(name="analysed"), SETTINGS)
            analysed = await collection_ref(conn, "analysed")
            await write_documents(conn, analysed, [prepared(*d) for d in docs[:200]])
            await fold(conn, analysed)
            await conn.execute("ANALYZE bm25_blocks")
            await collection.create(conn, CollectionCreate(name="c"), SETTINGS)
            ref = await collection_ref(conn, "c")
            await write_documents(conn, ref, [prepared(*d) for d in docs[200:800]], compact=False)
            await fold(conn, ref)
            await delete_document(conn, ref, docs[201][0], EVERY_DOCUMENT)  # dead in the blocks
            await write_documents(conn, ref, [prepared(*d) for d in docs[800:]], compact=False)
            cur = await conn.execute(
                "SELECT coalesce(sum(length(ch.tsv)), 0) FROM bm25_delta AS d"
                " JOIN chunks AS ch ON ch.id = d.chunk_id WHERE d.collection_id = %s",
                (ref.id,),
            )
            changed = int(((await cur.fetchone()) or (0,))[0])
            await conn.execute("LOAD 'auto_explain'")
            for setting in (
                "log_min_duration = 0",
                "log_nested_statements = on",
                "log_analyze = on",
                "log_level = notice",
            ):
                await conn.execute(f"SET auto_explain.{setting}")
            conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
            await fold(conn, ref)
            await conn.execute("SET auto_explain.log_min_duration = -1")
            removed = [
                int(line.split(":")[1])
                for plan in plans
                for line in plan.splitlines()
                if "Rows Removed by Join Filter" in line
            ]
            assert any("bm25_fold_ends" in plan for plan in plans), "no plan of the fold read"
            assert changed > 0 and sum(removed) <= changed, (sum(removed), changed)
            for text in queries:
                got, expected = await both(conn, oracle, ref, text, candidates=10)
                assert_same(got, expected, text)

    asyncio.run(run())


def test_at_extension_1_0_a_fold_folds_nothing_and_the_rows_stay(ext_dsn: str) -> None:
    """The extension at 1.0 (until Cari updates it) has no `bm25_tsv_terms`, which the fold
    counts with, and no engine serves from blocks: writes append posting rows, and a fold leaves
    them where the SQL statement reads them (revision 0018's packed them into blocks, and
    keyword search found nothing), without an error; the recount agrees."""
    with psycopg.connect(ext_dsn, autocommit=True) as conn:
        conn.execute("DROP EXTENSION cari_bm25")
        conn.execute("CREATE EXTENSION cari_bm25 VERSION '1.0'")
        assert conn.execute(query("keyword_engine")).fetchone() is None  # the SQL statement
    docs = corpus(55, 40)

    async def run() -> None:
        async with await connect(ext_dsn) as conn:
            await collection.create(conn, CollectionCreate(name="c"), SETTINGS)
            ref = await collection_ref(conn, "c")
            await write_documents(conn, ref, [prepared(*d) for d in docs], compact=False)
            rows = await _count(conn, "postings", ref)
            assert rows > 0 and await _count(conn, "bm25_delta", ref) == 0
            await compact_statistics(conn, ref, fold_postings=1)
            assert await _count(conn, "postings", ref) == rows
            assert await _count(conn, "bm25_blocks", ref) == 0
            found = await bm25.search(
                conn, ref.id, docs[0][2], candidates=10, filters=NO_FILTERS, params={}, engine="sql"
            )
            assert found.candidates  # revision 0018's fold packed them where no engine read
            assert await collection.keyword_index_differences(conn, "c") == {
                "postings": 0,
                "document frequencies": 0,
                "sizes": 0,
            }

    asyncio.run(run())
