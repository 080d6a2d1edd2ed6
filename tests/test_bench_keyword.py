"""The keyword benchmark's core on a small Zipf corpus: it loads, measures every ranker, counts
the postings BM25 sums and explains the statement."""

from __future__ import annotations

import asyncio
from collections import Counter

import psycopg
import pytest
from bench import keyword
from pgvector.psycopg import register_vector_async

from cari.db import keyword_engine
from cari.settings import Settings

CHUNKS = 2_000
QUERIES = 10


def test_zipf_vocabulary_is_analysed_as_intended(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    """Stop words vanish under `english`; each pseudo-word is its own lexeme."""
    row = conn.execute(
        "SELECT length(to_tsvector('english', %s))", (" ".join(keyword.STOP_WORDS),)
    ).fetchone()
    assert row == (0,)
    words = keyword.pseudo_words(2_000, seed=3)
    assert len(set(words)) == len(words)
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE tsvector_to_array(to_tsvector('english', w)) = ARRAY[w])"
        " FROM unnest(%s::text[]) AS w",
        (words,),
    ).fetchone()
    assert row is not None
    # PostgreSQL's Snowball and PyStemmer's could differ on a rare word: "mostly intact".
    assert int(str(row[0])) >= 0.99 * len(words)


@pytest.mark.parametrize("language", keyword.LANGUAGES)
def test_bench_core_reports_latency_exactness_load_and_storage(dsn: str, language: str) -> None:
    """On a tiny corpus: the SQL statement and ts_rank_cd on the rows, the fold, the extension
    on the blocks with its top 10 compared, both storages, and the EXPLAINs."""
    corpus = keyword.zipf_corpus(CHUNKS, QUERIES, seed=1)
    assert len(corpus.rows) == CHUNKS and len(corpus.typical) == QUERIES
    assert all(2 <= len(q.split()) <= keyword.MAX_QUERY_WORDS for q in corpus.typical)

    async def run() -> keyword.CorpusReport:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await register_vector_async(conn)
            settings = Settings(_env_file=None)  # type: ignore[call-arg]
            engine = await keyword_engine.detect(conn, settings)
            return await keyword.bench_corpus(
                conn,
                corpus,
                language,
                QUERIES,
                seed=1,
                engine=str(engine),
                explains=True,
                ts_rank=True,
                load_baseline=True,
                fold_every=0,
                peer=False,
            )

    report = asyncio.run(run())

    assert report.chunks == CHUNKS and report.documents == CHUNKS // keyword.CHUNKS_PER_DOCUMENT
    assert report.load.rows == CHUNKS
    assert report.load.seconds > 0 and report.load.baseline_seconds > 0
    assert report.language == language and report.engine.startswith(keyword.BLOCK_RANKER)
    # ~160 distinct lexemes per chunk, stop words aside: `simple` keeps them (~60 more).
    per_chunk = report.postings_rows / CHUNKS
    assert per_chunk > (200 if language == "simple" else 100)
    assert report.sizes_rows["postings (total)"] >= (
        report.sizes_rows["  heap"]
        + report.sizes_rows["  postings_lexeme_idx"]
        + report.sizes_rows["  postings_chunk_idx"]
    )
    assert report.sizes_rows["chunks (total)"] > 0
    assert report.blocks > 0 and report.sizes_blocks["bm25_blocks (total)"] > 0

    assert set(report.kinds) == {"typical", "worst"}
    for kind in report.kinds.values():
        assert len(kind.queries) == QUERIES
        for ranker in (*keyword.ROW_RANKERS, keyword.BLOCK_RANKER):
            assert len(kind.latency[ranker]) == QUERIES
            assert all(ms > 0 for ms in kind.latency[ranker])
            assert len(kind.results[ranker]) == QUERIES
        assert len(kind.read) == QUERIES and all(r > 0 for r in kind.read)
        assert not keyword.mismatches(kind, keyword.BASELINE, keyword.BLOCK_RANKER)
    worst = report.kinds["worst"]
    assert min(worst.lexemes) >= 4
    assert all(n == keyword.CANDIDATES for n in worst.results[keyword.BLOCK_RANKER])
    assert Counter(worst.results["ts_rank_cd OR"]) == Counter(worst.results["sql"])

    titles = [title for title, _ in report.explains]
    assert any("common" in t for t in titles) and any("rare" in t for t in titles)
    assert all(any("Execution Time" in line for line in plan) for _, plan in report.explains)

    lines = keyword.format_report(report) + keyword.format_targets([report])
    assert any(f"{QUERIES} of {QUERIES} identical" in line for line in lines)
    assert any("ts_rank_cd OR" in line for line in lines)
