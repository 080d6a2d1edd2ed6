"""Keyword search (Okapi BM25 in PostgreSQL): the SQL engine against the `cari_bm25` extension.

    python -m bench.keyword [--chunks 100000] [--queries 200] [--corpus zipf,pessimistic]
                            [--language english] [--seed 1] [--ts-rank] [--no-load-baseline]
                            [--fold-every N] [--peer] [--keep]

Each corpus goes into a fresh database (one collection in `--language`: `english` drops stop
words when it analyses text, `simple` keeps every word as a lexeme; documents of 10
chunks; no embeddings). The same queries then run one query at a time on one held autocommit
connection, after one warm-up pass (psycopg prepares a statement on its 5th run and the server
plans it generic after 5 custom plans, so the measured pass mostly excludes planning; the
report says how many plans of each kind ran), in two phases on the same corpus:

- **on the rows** (everything written is in the `postings` delta, as without the extension):
  `sql`, `cari.search.bm25.search(engine="sql")` (`search_keyword.sql`, which sums every posting
  of the query's lexemes): the baseline of the ratios. With `--ts-rank` also the statements
  before BM25 (`ts_rank_cd` over `websearch_to_tsquery`, every word required, and OR-ed);
- then `bm25_fold` packs the delta into `bm25_blocks` (timed) and VACUUM (ANALYZE);
- **on the blocks**: `cari_bm25`, `bm25.search(engine="cari_bm25")` (`search_keyword_blocks.sql`:
  `bm25_topk` walks the blocks in C, the delta, now empty, summed in SQL). Its top 10 is
  compared with the SQL engine's: the same ids up to ties, scores within 1e-9.

At 1M chunks the delta of an unfolded load would hold ~160M rows; `--fold-every N` folds it
every N chunks of the load (as the writes' own folds would keep it small) and the SQL engine is
then not measured (the postings are no longer rows). `--peer` runs the bm25s library (numba,
one thread, in memory) on the same corpus and queries after the extension
(`bench/keyword_peer.py`, zipf only).

Corpora (both deterministic from --seed):

- `zipf`: synthetic text with English-like word statistics. The vocabulary is ranked: first the
  127 stop words PostgreSQL's `english` configuration removes (in rough English frequency order,
  "the", "of", "and", ...), then 200,000 pseudo-words made of syllables ("talorin", "bamuk"),
  kept only when the Snowball English stemmer leaves them intact (so one word is one lexeme);
  two syllables for the 10,000 most frequent, three after. Word rank r is drawn with probability
  ~ 1/r^1.07 (English's Zipf exponent): ~55% of tokens are stop words, as in English prose.
  Chunks are 250-450 tokens (uniform); each document's 3-8 word title, drawn the same way, is
  its chunks' title.
- `pessimistic`: the real passages of cranfield, cisi, cacm, med and TyDi QA (id) resampled into
  chunks exactly as `bench.search` builds them (each passage ~8.5 times at 100k, sentences
  shuffled): every lexeme's document frequency is ~8.5x what a real corpus of that size has, and
  copies of one passage tie, which is hard on BM25's pruning.

Queries, `--queries` of each kind:

- `typical`: zipf: 2-8 consecutive words of a random chunk, stop words included, as users type
  them; pessimistic: the real questions of the five sets' queries.jsonl (as `bench.search`),
  cut to their first 8 words;
- `worst`: 4-8 distinct lexemes among the 50 of highest document frequency (stop words are no
  lexemes), typed as the most frequent word that analyses to each.

Load: the chunks go in by binary COPY, 5,000 rows per COPY statement (each its own transaction,
so the statement triggers that write postings see 5,000 rows at a time), then `bm25_compact`
and `VACUUM (ANALYZE)`. The baseline (unless `--no-load-baseline`) is the same COPY with `ALTER
TABLE chunks DISABLE TRIGGER USER` first (foreign keys stay checked; the generated tsvector and
the GIN index are maintained in both), into the same empty table (TRUNCATE between): the
difference is the triggers' cost.

Output, per corpus: load rows/s (with and without the triggers); the fold's seconds; sizes of
the postings table (heap, each index) before the fold and of `bm25_blocks` (heap, TOAST, primary
key) after it, per chunk; then per query kind a table of p50/p95/p99 ms per ranker, their ratio
to `sql` (below 1: faster), the mean number of results, the load average after each phase and
how many top 10s are identical. Last, `EXPLAIN (ANALYZE, BUFFERS)` of the extension's statement
for a query with common lexemes, one with rare ones, and the slowest typical and worst query
(zipf, and every corpus at 1M). Targets (issue 38, the extension): 100k chunks typical p95 <= 5
ms and common-word (worst) p95 <= 10 ms; 1M: <= 10 and <= 40 ms.

Runs on DATABASE_URL if set (databases `cari_bench_keyword_<corpus>_<language>`, dropped at
the end unless `--keep`), else on a throwaway embedded server.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import math
import os
import random
import re
import time
from collections import Counter
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
import Stemmer
from psycopg import sql
from psycopg.types.json import Jsonb

from bench import harness, keyword_peer
from bench import search as search_bench
from bench.harness import dsn_of, fresh_runtime, timed
from cari.db.queries import query
from cari.ingest import store
from cari.search import bm25, lexemes
from cari.search.bm25 import KeywordResult
from cari.settings import load_settings

AConn = psycopg.AsyncConnection[Any]

CORPORA = ("zipf", "pessimistic")
COLLECTION = "bench"
LANGUAGES = ("english", "simple")
CANDIDATES = 40
COPY_BATCH = 5_000
CHUNKS_PER_DOCUMENT = 10
MAX_QUERY_WORDS = 8
COMMON_RANKS = 50

# The vocabulary's first ranks: these first, roughly by English frequency, then the rest.
_FREQUENT_FIRST_TEXT = (
    "the of and to a in is that for it as was with be by on not he i this are or his from at "
    "which but have an they you were her she there been their all if has will so no more when "
    "who can we what him about them its into than only other some then do any these"
)
STOP_WORDS = list(dict.fromkeys([*_FREQUENT_FIRST_TEXT.split(), *harness.ENGLISH_STOP_WORDS]))
assert len(STOP_WORDS) == len(harness.ENGLISH_STOP_WORDS) == 127
PSEUDO_WORDS = 200_000
SHORT_WORDS = 10_000  # the most frequent pseudo-words have two syllables, the rest three
ZIPF_EXPONENT = 1.07
CHUNK_TOKENS = (250, 450)
TITLE_WORDS = (3, 8)
_ONSETS = list("bdfgklmnprstvz")
_VOWELS = list("aeiou")
_CODAS = ["n", "r", "l", "k", "m", "t", ""]

# Measured on the collection's rows (everything in the `postings` delta, before the fold): the
# SQL engine, the baseline of the ratios, and with --ts-rank the statements before BM25.
ROW_RANKERS = ("sql", "ts_rank_cd AND", "ts_rank_cd OR")
BASELINE = "sql"
# Measured after the fold (everything in packed blocks): the extension's engine.
BLOCK_RANKER = "cari_bm25"
TOP = 10  # the top compared between the engines
SCORE_TOLERANCE = 1e-9
TYPICAL_P95_TARGET_MS = {100_000: 5.0, 1_000_000: 10.0}
WORST_P95_TARGET_MS = {100_000: 10.0, 1_000_000: 40.0}

# The keyword statement Cari ran before BM25 (filters empty): AND semantics.
TS_RANK_AND = """
SELECT c.id, ts_rank_cd(c.tsv, q.query) AS score
FROM websearch_to_tsquery(%(language)s::oid::regconfig, %(query)s) AS q (query),
     chunks AS c
WHERE c.collection_id = %(collection_id)s
  AND c.tsv @@ q.query
ORDER BY score DESC, c.id
LIMIT %(candidates)s
"""
# The same ranking over chunks holding any of the query's lexemes (each quoted, so taken as is).
TS_RANK_OR = """
SELECT c.id, ts_rank_cd(c.tsv, q.query) AS score
FROM (
    SELECT array_to_string(array(
        SELECT quote_literal(w.lexeme)
        FROM unnest(to_tsvector(%(language)s::oid::regconfig, %(query)s)) AS w
    ), ' | ')::tsquery
) AS q (query),
     chunks AS c
WHERE c.collection_id = %(collection_id)s
  AND c.tsv @@ q.query
ORDER BY score DESC, c.id
LIMIT %(candidates)s
"""


@dataclass(frozen=True, slots=True)
class Row:
    document: int
    ordinal: int
    title: str
    content: str


@dataclass(slots=True)
class Corpus:
    name: str
    description: str
    documents: list[str]  # titles; document i is external id f"doc-{i}"
    rows: list[Row]
    typical: list[str]  # the typical queries


@dataclass(slots=True)
class LoadReport:
    rows: int
    seconds: float  # COPY with the triggers (the folds during the load excluded)
    baseline_seconds: float | None  # the same COPY, triggers disabled (None: not measured)
    compact_seconds: float
    vacuum_seconds: float
    load_folds: list[float]  # seconds of each bm25_fold run during the load (--fold-every)
    fold_seconds: float | None  # the final bm25_fold (None: no extension)
    fold_vacuum_seconds: float | None


@dataclass(slots=True)
class KindReport:
    queries: list[str]
    lexemes: list[int]  # per query
    latency: dict[str, list[float]]  # ms per ranker, one per query
    results: dict[str, list[int]]
    read: list[int]  # postings of the query's lexemes (what the SQL engine sums)
    top: dict[str, list[list[tuple[int, float]]]]  # ranker -> per query, its top TOP
    load: dict[str, tuple[float, float, float]]  # ranker -> load average when its pass ended


@dataclass(slots=True)
class CorpusReport:
    name: str
    language: str
    description: str
    chunks: int
    documents: int
    load: LoadReport
    sizes_rows: dict[str, int]  # relation -> bytes, before the fold
    sizes_blocks: dict[str, int]  # relation -> bytes, after the fold
    postings_rows: int  # postings rows before the fold (0: folded during the load)
    blocks: int  # bm25_blocks rows after the fold
    lexemes: int
    kinds: dict[str, KindReport]
    explains: list[tuple[str, list[str]]]
    server: str
    engine: str
    planning: list[str]  # how the server planned each statement while measuring
    peer: list[str]  # the bm25s peer's report lines (--peer)


# Corpora ------------------------------------------------------------------------------------


def pseudo_words(count: int, seed: int) -> list[str]:
    """`count` distinct syllable words, none a stop word, each its own English stem."""
    rng = random.Random(seed)
    stem = Stemmer.Stemmer("english").stemWord
    seen = set(STOP_WORDS)
    words: list[str] = []
    while len(words) < count:
        syllables = 2 if len(words) < SHORT_WORDS else 3
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables))
        word += rng.choice(_CODAS)
        if word not in seen and stem(word) == word:
            seen.add(word)
            words.append(word)
    return words


def zipf_corpus(chunks: int, queries: int, seed: int) -> Corpus:
    vocabulary = np.array([*STOP_WORDS, *pseudo_words(PSEUDO_WORDS, seed)], dtype=object)
    weights = np.arange(1, len(vocabulary) + 1, dtype=np.float64) ** -ZIPF_EXPONENT
    cdf = np.cumsum(weights / weights.sum())
    stop_share = float(cdf[len(STOP_WORDS) - 1])
    rng = np.random.default_rng(seed)

    def draw(n: int) -> list[str]:
        ranks = np.minimum(np.searchsorted(cdf, rng.random(n)), len(vocabulary) - 1)
        return list(vocabulary[ranks])

    documents = [
        " ".join(draw(int(rng.integers(TITLE_WORDS[0], TITLE_WORDS[1] + 1))))
        for _ in range(math.ceil(chunks / CHUNKS_PER_DOCUMENT))
    ]
    lengths = rng.integers(CHUNK_TOKENS[0], CHUNK_TOKENS[1] + 1, size=chunks)
    rows = []
    for i, length in enumerate(lengths):
        document, ordinal = divmod(i, CHUNKS_PER_DOCUMENT)
        rows.append(Row(document, ordinal, documents[document], " ".join(draw(int(length)))))
    pick = random.Random(seed)
    typical = []
    for _ in range(queries):
        words = pick.choice(rows).content.split()
        n = pick.randint(2, MAX_QUERY_WORDS)
        start = pick.randrange(len(words) - n + 1)
        typical.append(" ".join(words[start : start + n]))
    description = (
        f"{len(STOP_WORDS)} stop words + {PSEUDO_WORDS:,} pseudo-words, P(rank r) ~ "
        f"1/r^{ZIPF_EXPONENT} (stop words {stop_share:.0%} of tokens), chunks "
        f"{CHUNK_TOKENS[0]}-{CHUNK_TOKENS[1]} tokens, titles {TITLE_WORDS[0]}-{TITLE_WORDS[1]} "
        f"words, {CHUNKS_PER_DOCUMENT} chunks per document"
    )
    return Corpus("zipf", description, documents, rows, typical)


def pessimistic_corpus(chunks: int, queries: int, seed: int) -> Corpus:
    passages = search_bench.load_passages()
    rng = random.Random(seed)
    rows = []
    for i in range(chunks):
        ordinal, document = divmod(i, len(passages))
        passage = passages[document]
        rows.append(
            Row(document, ordinal, passage.title, search_bench.row_text(passage, ordinal, i, rng))
        )
    typical = [" ".join(q.split()[:MAX_QUERY_WORDS]) for q in search_bench.load_queries(queries)]
    used = min(chunks, len(passages))
    description = (
        f"{len(passages):,} real passages of {', '.join(search_bench.SETS)}, resampled as "
        f"bench.search does (~{chunks / len(passages):.1f} copies each, sentences shuffled); "
        "typical queries: the sets' real questions, first 8 words"
    )
    return Corpus("pessimistic", description, [p.title for p in passages[:used]], rows, typical)


def build_corpus(name: str, chunks: int, queries: int, seed: int) -> Corpus:
    if name == "zipf":
        return zipf_corpus(chunks, queries, seed)
    if name == "pessimistic":
        return pessimistic_corpus(chunks, queries, seed)
    raise ValueError(f"unknown corpus {name!r}: use {', '.join(CORPORA)}")


# Load and storage -----------------------------------------------------------------------------


async def copy_rows(
    conn: AConn,
    collection_id: int,
    language: int,
    document_ids: list[int],
    rows: list[Row],
    *,
    fold_every: int = 0,
    folds: list[float] | None = None,
) -> float:
    """Seconds to COPY `rows` in batches of COPY_BATCH, each its own statement and commit. With
    `fold_every`, `bm25_fold` runs after each `fold_every` rows (its seconds go to `folds`, not
    to the result) so the delta stays small, as a bulk load of that size would."""
    copying = 0.0
    for start in range(0, len(rows), COPY_BATCH):
        started = time.perf_counter()
        async with conn.cursor().copy(query("chunks_copy")) as copy:
            copy.set_types(store.CHUNK_COLUMN_TYPES)
            for row in rows[start : start + COPY_BATCH]:
                await copy.write_row(
                    (
                        collection_id,
                        document_ids[row.document],
                        row.ordinal,
                        row.title,
                        row.content,
                        Jsonb({}),
                        language,
                        round(len(row.content.split()) * 1.4),
                        None,
                    )
                )
        copying += time.perf_counter() - started
        done = start + COPY_BATCH
        if fold_every and folds is not None and done % fold_every == 0 and done < len(rows):
            folds.append(await fold(conn, collection_id))
            print(
                f"  loaded {done:,} chunks: COPY {copying:.0f} s, fold {folds[-1]:.1f} s "
                f"(load {harness.load_average()})",
                flush=True,
            )
    return copying


async def fold(conn: AConn, collection_id: int) -> float:
    """Seconds of `bm25_fold` (the statistics compacted first, as a write does)."""
    started = time.perf_counter()
    await conn.execute("SELECT bm25_compact(%s)", (collection_id,))
    cur = await conn.execute("SELECT bm25_fold(%s)", (collection_id,))
    row = await cur.fetchone()
    if not row or not row[0]:
        raise RuntimeError("bm25_fold folded nothing (no extension, or a writer held the delta)")
    return time.perf_counter() - started


async def load(
    conn: AConn,
    corpus: Corpus,
    language: str,
    *,
    load_baseline: bool,
    fold_every: int,
) -> tuple[int, int, LoadReport]:
    """Create the collection and its documents, COPY the chunks (first without the triggers
    when `load_baseline`, then with them), fold the statistics and vacuum. The postings stay in
    the delta unless `fold_every` folds them during the load. Returns the collection id and
    language oid."""
    cur = await conn.execute(
        "INSERT INTO collections (name, language) VALUES (%s, %s) RETURNING id, language::oid",
        (COLLECTION, language),
    )
    collection_id, language_oid = await cur.fetchone() or (0, 0)
    cur = await conn.execute(
        "INSERT INTO documents (collection_id, external_id, title, content_hash) "
        "SELECT %s, 'doc-' || (n - 1), t, '' FROM unnest(%s::text[]) WITH ORDINALITY AS u (t, n) "
        "ORDER BY n RETURNING id",
        (collection_id, corpus.documents),
    )
    document_ids = [int(r[0]) for r in await cur.fetchall()]

    baseline = None
    if load_baseline:
        await conn.execute("ALTER TABLE chunks DISABLE TRIGGER USER")
        try:
            baseline = await copy_rows(conn, collection_id, language_oid, document_ids, corpus.rows)
        finally:
            await conn.execute("ALTER TABLE chunks ENABLE TRIGGER USER")
        await conn.execute("TRUNCATE chunks")
    folds: list[float] = []
    seconds = await copy_rows(
        conn,
        collection_id,
        language_oid,
        document_ids,
        corpus.rows,
        fold_every=fold_every,
        folds=folds,
    )
    started = time.perf_counter()
    await conn.execute("SELECT bm25_compact(%s)", (collection_id,))
    compacted = time.perf_counter()
    await conn.execute("VACUUM (ANALYZE)")
    vacuumed = time.perf_counter()
    report = LoadReport(
        len(corpus.rows),
        seconds,
        baseline,
        compacted - started,
        vacuumed - compacted,
        folds,
        None,
        None,
    )
    return int(collection_id), int(language_oid), report


STORAGE_ROWS = (
    ("postings (total)", "pg_total_relation_size('postings')"),
    ("  heap", "pg_relation_size('postings')"),
    ("  postings_lexeme_idx", "pg_relation_size('postings_lexeme_idx')"),
    ("  postings_chunk_idx", "pg_relation_size('postings_chunk_idx')"),
    ("bm25_terms", "pg_total_relation_size('bm25_terms')"),
    ("bm25_pending_terms", "pg_total_relation_size('bm25_pending_terms')"),
    ("bm25_sizes", "pg_total_relation_size('bm25_sizes')"),
    ("bm25_pending_sizes", "pg_total_relation_size('bm25_pending_sizes')"),
    ("chunks (total)", "pg_total_relation_size('chunks')"),
    ("  chunks_tsv_idx (GIN)", "pg_relation_size('chunks_tsv_idx')"),
)
STORAGE_BLOCKS = (
    ("bm25_blocks (total)", "pg_total_relation_size('bm25_blocks')"),
    ("  heap", "pg_relation_size('bm25_blocks')"),
    (
        "  TOAST",
        "coalesce(pg_total_relation_size(nullif((SELECT reltoastrelid FROM pg_class "
        "WHERE oid = 'bm25_blocks'::regclass), 0)), 0)",
    ),
    ("  bm25_blocks_pkey", "pg_relation_size('bm25_blocks_pkey')"),
    ("bm25_dead (total)", "pg_total_relation_size('bm25_dead')"),
    ("postings (total, the delta)", "pg_total_relation_size('postings')"),
    ("bm25_terms", "pg_total_relation_size('bm25_terms')"),
    ("chunks (total)", "pg_total_relation_size('chunks')"),
)


async def sizes(conn: AConn, relations: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Relation sizes in bytes."""
    expressions = sql.SQL(", ").join(sql.SQL(e) for _, e in relations)
    cur = await conn.execute(sql.SQL("SELECT ") + expressions)
    found = dict(zip((n for n, _ in relations), await cur.fetchone() or (), strict=True))
    return {k: int(v) for k, v in found.items()}


async def counts(conn: AConn) -> tuple[int, int, int]:
    """Postings rows, bm25_blocks rows and distinct lexemes."""
    cur = await conn.execute(
        "SELECT (SELECT count(*) FROM postings), (SELECT count(*) FROM bm25_blocks), "
        "(SELECT count(*) FROM bm25_terms WHERE df > 0)"
    )
    postings, blocks, lexemes = await cur.fetchone() or (0, 0, 0)
    return int(postings), int(blocks), int(lexemes)


# Queries --------------------------------------------------------------------------------------


async def surface_words(
    conn: AConn, corpus: Corpus, lexemes: Sequence[str], language: str
) -> dict[str, str]:
    """For each lexeme, the most frequent word of (a sample of) the corpus that analyses to it
    alone; the lexeme itself when none does."""
    counts: Counter[str] = Counter()
    for row in corpus.rows[:: max(1, len(corpus.rows) // 2000)]:
        counts.update(re.findall(r"[a-z]+", row.content.lower()))
    words = [w for w, _ in counts.most_common(50_000)]
    cur = await conn.execute(
        "SELECT u.w, l.lexeme FROM unnest(%s::text[]) WITH ORDINALITY AS u (w, n), "
        "unnest(to_tsvector(%s::regconfig, u.w)) AS l "
        "WHERE l.lexeme = ANY (%s) ORDER BY u.n",
        (words, language, list(lexemes)),
    )
    found: dict[str, str] = {}
    for word, lexeme in await cur.fetchall():
        found.setdefault(lexeme, word)
    return {lexeme: found.get(lexeme, lexeme) for lexeme in lexemes}


async def worst_queries(
    conn: AConn, corpus: Corpus, collection_id: int, language: str, count: int, seed: int
) -> list[str]:
    cur = await conn.execute(
        "SELECT lexeme FROM bm25_terms WHERE collection_id = %s ORDER BY df DESC, lexeme LIMIT %s",
        (collection_id, COMMON_RANKS),
    )
    common = [str(r[0]) for r in await cur.fetchall()]
    words = await surface_words(conn, corpus, common, language)
    rng = random.Random(seed)
    return [
        " ".join(words[x] for x in rng.sample(common, rng.randint(4, MAX_QUERY_WORDS)))
        for _ in range(count)
    ]


async def rare_query(conn: AConn, corpus: Corpus, collection_id: int, language: str) -> str:
    """Three lexemes of document frequency 2-20, as words."""
    cur = await conn.execute(
        "SELECT lexeme FROM bm25_terms WHERE collection_id = %s AND df BETWEEN 2 AND 20 "
        "AND lexeme ~ '^[a-z]+$' ORDER BY md5(lexeme) LIMIT 3",
        (collection_id,),
    )
    lexemes = [str(r[0]) for r in await cur.fetchall()]
    words = await surface_words(conn, corpus, lexemes, language)
    return " ".join(words[x] for x in lexemes)


# Measurement ----------------------------------------------------------------------------------


def _top(value: Any) -> list[tuple[int, float]]:
    if isinstance(value, KeywordResult):
        return [(c.chunk_id, c.score) for c in value.candidates[:TOP]]
    return [(int(r[0]), float(r[1])) for r in value[:TOP]]


class Rankers:
    def __init__(self, conn: AConn, collection_id: int, language: int) -> None:
        self.conn = conn
        self.collection_id = collection_id
        self.language = language
        self.params = {
            "collection_id": collection_id,
            "language": language,
            "candidates": CANDIDATES,
        }

    async def bm25(self, engine: bm25.Engine, text: str) -> KeywordResult:
        return await bm25.search(
            self.conn,
            self.collection_id,
            text,
            candidates=CANDIDATES,
            filters=sql.SQL(""),
            params={},
            engine=engine,
        )

    async def ts_rank(self, statement: str, text: str) -> list[tuple[Any, ...]]:
        cur = await self.conn.execute(statement, {**self.params, "query": text})
        return await cur.fetchall()

    def run(self, ranker: str, text: str) -> Awaitable[Any]:
        if ranker in ("sql", "cari_bm25"):
            return self.bm25(ranker, text)  # type: ignore[arg-type]
        return self.ts_rank(TS_RANK_AND if ranker == "ts_rank_cd AND" else TS_RANK_OR, text)


async def new_kind(rankers: Rankers, queries: list[str]) -> KindReport:
    cur = await rankers.conn.execute(
        "SELECT length(to_tsvector(%s::oid::regconfig, q)) FROM unnest(%s::text[]) AS q",
        (rankers.language, queries),
    )
    lexemes = [int(r[0]) for r in await cur.fetchall()]
    return KindReport(queries, lexemes, {}, {}, read=[], top={}, load={})


async def measure(rankers: Rankers, report: KindReport, measured: Sequence[str]) -> None:
    """Each ranker of `measured` on every query of `report`, one query at a time, after a
    warm-up pass; the order of the rankers rotates query by query."""
    for ranker in measured:
        report.latency[ranker] = []
        report.results[ranker] = []
        report.top[ranker] = []
    for round_ in range(2):  # round 0 warms up
        for n, text in enumerate(report.queries):
            shift = (n + round_) % len(measured)
            values: dict[str, Any] = {}
            for ranker in [*measured[shift:], *measured[:shift]]:
                ms, values[ranker] = await timed(rankers.run(ranker, text))
                if round_:
                    report.latency[ranker].append(ms)
            if not round_:
                continue
            for ranker in measured:
                value = values[ranker]
                if isinstance(value, KeywordResult):
                    if ranker == BASELINE or not report.read:
                        report.read.append(value.postings_read)
                    report.results[ranker].append(len(value.candidates))
                else:
                    report.results[ranker].append(len(value))
                report.top[ranker].append(_top(value))
    for ranker in measured:
        report.load[ranker] = os.getloadavg()


def same_top(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    """Whether two top lists are the same: as long, each rank's score within SCORE_TOLERANCE,
    and the same ids among the chunks scored above the last one (ties with it may differ)."""
    if len(a) != len(b):
        return False
    if any(abs(x - y) > SCORE_TOLERANCE for (_, x), (_, y) in zip(a, b, strict=True)):
        return False
    if not a:
        return True
    last = min(a[-1][1], b[-1][1]) + SCORE_TOLERANCE
    return {i for i, s in a if s > last} == {i for i, s in b if s > last}


def mismatches(report: KindReport, a: str, b: str) -> list[int]:
    """The queries whose top TOP differ between rankers a and b."""
    return [
        n
        for n, (x, y) in enumerate(zip(report.top[a], report.top[b], strict=True))
        if not same_top(x, y)
    ]


async def explain(conn: AConn, collection_id: int, text: str) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS) of the extension's statement as bm25.search runs it (after
    reading the question's lexemes: no filters)."""
    asked = await lexemes.analyse(conn, collection_id, text)
    cur = await conn.execute(
        sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + bm25.keyword_statement("cari_bm25"),
        {**asked.params(), "collection_id": collection_id, "candidates": CANDIDATES},
    )
    return [str(r[0]) for r in await cur.fetchall()]


async def planning(conn: AConn) -> list[str]:
    """How the server planned each keyword statement psycopg prepared on `conn` (it prepares a
    statement on its 5th run; the server then plans it custom or generic)."""
    out = []
    for name, marker in (  # each statement's first line, which is sent
        ("search_keyword.sql", query("search_keyword").splitlines()[0]),
        ("search_keyword_blocks.sql", query("search_keyword_blocks").splitlines()[0]),
    ):
        cur = await conn.execute(
            "SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0), count(*) "
            "FROM pg_prepared_statements WHERE strpos(statement, %s) > 0",
            (marker,),
        )
        generic, custom, prepared = await cur.fetchone() or (0, 0, 0)
        digest = hashlib.sha256(query(name.removesuffix(".sql")).encode()).hexdigest()[:12]
        out.append(
            f"{name} sha256 {digest}: {prepared} prepared variant(s) ran {generic} generic and "
            f"{custom} custom plans"
        )
    return out


async def bench_corpus(
    conn: AConn,
    corpus: Corpus,
    language: str,
    queries: int,
    seed: int,
    *,
    engine: str,
    explains: bool,
    ts_rank: bool,
    load_baseline: bool,
    fold_every: int,
    peer: bool,
) -> CorpusReport:
    """Load `corpus` into the (fresh, migrated) database of `conn`, an autocommit connection,
    measure the SQL engine on the rows, fold, measure the extension on the blocks."""
    collection_id, language_oid, loaded = await load(
        conn, corpus, language, load_baseline=load_baseline, fold_every=fold_every
    )
    if not fold_every and engine.startswith(BLOCK_RANKER):
        # With the extension the load appended one delta row per chunk: its postings become
        # rows here (as CARI_KEYWORD_ENGINE=sql's unfold makes them), which the SQL engine's
        # baseline reads and the extension reads as a delta until the fold below.
        await conn.execute(query("bm25_unfold"))
    sizes_rows = await sizes(conn, STORAGE_ROWS)
    postings, _, lexemes = await counts(conn)
    server = await server_settings(conn)
    texts = {
        "typical": corpus.typical[:queries],
        "worst": await worst_queries(conn, corpus, collection_id, language, queries, seed),
    }
    rankers = Rankers(conn, collection_id, language_oid)
    kinds = {kind: await new_kind(rankers, t) for kind, t in texts.items()}
    extension = engine.startswith(BLOCK_RANKER)
    await measure_engines(
        conn,
        collection_id,
        rankers,
        kinds,
        loaded,
        fold_every=fold_every,
        extension=extension,
        ts_rank=ts_rank,
    )
    sizes_blocks = await sizes(conn, STORAGE_BLOCKS) if extension else {}
    _, blocks, _ = await counts(conn)
    plans_used = await planning(conn)

    plans = (
        await slow_plans(conn, corpus, collection_id, language, kinds)
        if explains and extension
        else []
    )
    peer_lines = await peer_report(conn, corpus, language, kinds) if peer and extension else []
    return CorpusReport(
        corpus.name,
        language,
        corpus.description,
        len(corpus.rows),
        len(corpus.documents),
        loaded,
        sizes_rows,
        sizes_blocks,
        postings if not fold_every else 0,
        blocks,
        lexemes,
        kinds,
        plans,
        server,
        engine,
        plans_used,
        peer_lines,
    )


async def server_settings(conn: AConn) -> str:
    """The server's version and the settings that weigh on the statements' speed."""
    cur = await conn.execute(
        "SELECT version(), current_setting('shared_buffers'), current_setting('work_mem'), "
        "current_setting('jit')"
    )
    version, shared_buffers, work_mem, jit = await cur.fetchone() or ("", "", "", "")
    return f"{version}; shared_buffers {shared_buffers}, work_mem {work_mem}, jit {jit}"


async def measure_engines(
    conn: AConn,
    collection_id: int,
    rankers: Rankers,
    kinds: dict[str, KindReport],
    loaded: LoadReport,
    *,
    fold_every: int,
    extension: bool,
    ts_rank: bool,
) -> None:
    """The SQL engine on the rows (unless the load folded them), then, with the extension, the
    fold (timed into `loaded`) and the extension on the blocks."""
    gc.collect()
    gc.freeze()
    try:
        if not fold_every:  # the rows are all in the delta: the SQL engine's baseline
            measured = ROW_RANKERS if ts_rank else (BASELINE,)
            for kind, report in kinds.items():
                await measure(rankers, report, measured)
                print(f"  {kind}: measured {', '.join(measured)} on the rows", flush=True)
        if extension:
            loaded.fold_seconds = await fold(conn, collection_id)
            started = time.perf_counter()
            await conn.execute("VACUUM (ANALYZE)")
            loaded.fold_vacuum_seconds = time.perf_counter() - started
            for kind, report in kinds.items():
                await measure(rankers, report, (BLOCK_RANKER,))
                print(f"  {kind}: measured {BLOCK_RANKER} on the blocks", flush=True)
    finally:
        gc.unfreeze()


async def peer_report(
    conn: AConn, corpus: Corpus, language: str, kinds: dict[str, KindReport]
) -> list[str]:
    """The bm25s peer on the same corpus and queries, against the extension's figures."""
    return await keyword_peer.compare(
        conn,
        corpus,
        language,
        {k: (r.queries, r.top[BLOCK_RANKER], r.latency[BLOCK_RANKER]) for k, r in kinds.items()},
    )


async def slow_plans(
    conn: AConn, corpus: Corpus, collection_id: int, language: str, kinds: dict[str, KindReport]
) -> list[tuple[str, list[str]]]:
    """The extension's plan for common and rare lexemes and for each kind's slowest query."""
    plans: list[tuple[str, list[str]]] = []
    common = kinds["worst"].queries[0]
    rare = await rare_query(conn, corpus, collection_id, language)
    plans.append((f"common lexemes {common!r}", await explain(conn, collection_id, common)))
    plans.append((f"rare lexemes {rare!r}", await explain(conn, collection_id, rare)))
    for kind in ("typical", "worst"):
        k = kinds[kind]
        slowest = int(np.argmax(k.latency[BLOCK_RANKER]))
        text = k.queries[slowest]
        plans.append(
            (
                f"slowest {kind} query {text!r} ({k.latency[BLOCK_RANKER][slowest]:.1f} ms)",
                await explain(conn, collection_id, text),
            )
        )
    return plans


# Report ---------------------------------------------------------------------------------------


def _mb(n: int) -> str:
    return f"{n / 2**20:,.1f} MB"


def _p(values: Sequence[float]) -> np.ndarray:
    return np.percentile(values, [50, 95, 99])


def format_report(report: CorpusReport) -> list[str]:
    out = [
        f"== corpus {report.name} ({report.language}): {report.chunks:,} chunks, "
        f"{report.documents:,} documents; keyword engine of the database: {report.engine}"
    ]
    out.append(f"   {report.description}")
    out.append(f"   {report.server}")
    out.extend(f"   {line}" for line in report.planning)
    out.extend(format_load(report))
    out.extend(format_storage(report))
    for kind, k in report.kinds.items():
        out.extend(format_kind(report.name, kind, k))
    out.extend(report.peer)
    return out


def format_load(report: CorpusReport) -> list[str]:
    """The load's and the fold's times."""
    out: list[str] = []
    ld = report.load
    line = (
        f"load (binary COPY, {COPY_BATCH:,} rows per statement): with triggers {ld.seconds:.1f} s "
        f"({ld.rows / ld.seconds:,.0f} rows/s)"
    )
    if ld.baseline_seconds:
        line += (
            f"; triggers disabled {ld.baseline_seconds:.1f} s "
            f"({ld.rows / ld.baseline_seconds:,.0f} rows/s): "
            f"x{ld.seconds / ld.baseline_seconds:.2f}"
        )
    if ld.load_folds:
        line += (
            f"; {len(ld.load_folds)} folds during the load: {sum(ld.load_folds):.1f} s in all "
            f"(mean {np.mean(ld.load_folds):.1f}, max {max(ld.load_folds):.1f} s)"
        )
    line += (
        f"; then bm25_compact {ld.compact_seconds:.2f} s, VACUUM (ANALYZE) "
        f"{ld.vacuum_seconds:.1f} s"
    )
    out.append(line)
    if ld.fold_seconds is not None:
        moved = f" of {report.postings_rows:,} postings" if report.postings_rows else ""
        out.append(
            f"fold (SELECT bm25_fold, after bm25_compact){moved}: {ld.fold_seconds:.1f} s, then "
            f"VACUUM (ANALYZE) {ld.fold_vacuum_seconds:.1f} s; {report.blocks:,} blocks"
        )
    return out


def format_storage(report: CorpusReport) -> list[str]:
    """Bytes a chunk of the keyword index before the fold (rows) and after it (blocks)."""
    out: list[str] = []
    if report.postings_rows:
        out.append(
            f"storage before the fold: {report.postings_rows:,} postings rows "
            f"({report.postings_rows / report.chunks:.1f} per chunk), {report.lexemes:,} distinct "
            "lexemes"
        )
        for name, size in report.sizes_rows.items():
            out.append(f"  {name:<28} {_mb(size):>12} {size / report.chunks:10,.0f} B/chunk")
    if report.sizes_blocks:
        out.append(f"storage after the fold ({report.lexemes:,} distinct lexemes):")
        for name, size in report.sizes_blocks.items():
            out.append(f"  {name:<28} {_mb(size):>12} {size / report.chunks:10,.0f} B/chunk")
        if report.postings_rows:
            before = report.sizes_rows["postings (total)"]
            after = report.sizes_blocks["bm25_blocks (total)"]
            out.append(
                f"  blocks / postings rows (total, indexes included): {after / before:.3f} "
                f"(x{before / after:.1f} smaller)"
            )
    return out


def format_kind(name: str, kind: str, k: KindReport) -> list[str]:
    """One kind of query: each ranker's percentiles against the SQL engine's, and whether the
    extension's top 10 is the SQL statement's."""
    out: list[str] = []
    n = len(k.queries)
    out.append("")
    out.append(
        f"-- {name} / {kind}: {n} queries, {np.mean(k.lexemes):.1f} lexemes on average "
        f"(max {max(k.lexemes)}); one at a time, after 1 warm-up pass"
    )
    base = _p(k.latency[BASELINE]) if BASELINE in k.latency else None
    out.append(
        f"  {'ranker':<16} {'p50 ms':>8} {'p95':>8} {'p99':>8}   {'p50/sql':>7} {'p95/sql':>7}"
        f" {'p99/sql':>7}   {'results':>7}   load after"
    )
    for ranker in k.latency:
        p = _p(k.latency[ranker])
        ratio = " ".join(f"{x:7.3f}" for x in p / base) if base is not None else f"{'-':>23}"
        out.append(
            f"  {ranker:<16} {p[0]:8.2f} {p[1]:8.2f} {p[2]:8.2f}   {ratio}   "
            f"{np.mean(k.results[ranker]):7.1f}   {' '.join(f'{x:.2f}' for x in k.load[ranker])}"
        )
    read = np.array(k.read)
    out.append(
        f"  postings of the query's lexemes: p50 {np.percentile(read, 50):,.0f}, p95 "
        f"{np.percentile(read, 95):,.0f}"
    )
    if BASELINE in k.top and BLOCK_RANKER in k.top:
        bad = mismatches(k, BASELINE, BLOCK_RANKER)
        out.append(
            f"  top {TOP} {BLOCK_RANKER} vs {BASELINE} (ids up to ties, scores within "
            f"{SCORE_TOLERANCE:g}): {n - len(bad)} of {n} identical"
        )
        for q in bad[:5]:
            out.append(f"    differs: {k.queries[q]!r}")
            out.append(f"      sql       {k.top[BASELINE][q]}")
            out.append(f"      cari_bm25 {k.top[BLOCK_RANKER][q]}")
    return out


def format_targets(reports: list[CorpusReport]) -> list[str]:
    out = []
    for report in reports:
        for kind, k in report.kinds.items():
            if BLOCK_RANKER not in k.latency:
                continue
            p95 = float(np.percentile(k.latency[BLOCK_RANKER], 95))
            targets = TYPICAL_P95_TARGET_MS if kind == "typical" else WORST_P95_TARGET_MS
            target = targets.get(report.chunks)
            verdict = (
                f"target <= {target:g} ms {'MET' if p95 <= target else 'MISSED'}"
                if target
                else "no target at this size"
            )
            out.append(
                f"  {report.name:<12} {report.language:<8} {kind:<8} {BLOCK_RANKER} p95 "
                f"{p95:.2f} ms: {verdict}"
            )
    return out


def format_explains(report: CorpusReport) -> list[str]:
    out = []
    for title, lines in report.explains:
        out.append("")
        out.append(f"EXPLAIN (ANALYZE, BUFFERS) search_keyword_blocks.sql, {report.name}: {title}")
        out.extend(f"  {line}" for line in lines)
    return out


async def run(args: argparse.Namespace, corpora: list[str]) -> None:
    began = time.perf_counter()
    settings = load_settings(reembed_interval_s=0, statement_timeout_ms=0)
    reports: list[CorpusReport] = []
    for name in corpora:
        started = time.perf_counter()
        corpus = build_corpus(name, args.chunks, args.queries, args.seed)
        print(
            f"{name}: built {len(corpus.rows):,} chunks in {time.perf_counter() - started:.1f} s "
            f"(load {harness.load_average()})",
            flush=True,
        )
        database = f"cari_bench_keyword_{name}_{args.language}"
        async with fresh_runtime(database, settings) as rt:
            # The next corpus goes to a fresh database on the same server.
            server = psycopg.conninfo.make_conninfo(dsn_of(rt.pool), dbname="postgres")
            settings = settings.model_copy(update={"database_url": server})
            engine = str(await rt.keyword_engine.current())
            async with rt.pool.connection() as conn:
                report = await bench_corpus(
                    conn,
                    corpus,
                    args.language,
                    args.queries,
                    args.seed,
                    engine=engine,
                    explains=name == "zipf" or args.chunks >= 1_000_000,
                    ts_rank=args.ts_rank,
                    load_baseline=args.load_baseline,
                    fold_every=args.fold_every,
                    peer=args.peer,
                )
        if not args.keep:
            with psycopg.connect(server, autocommit=True) as admin:
                admin.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(database)
                    )
                )
        del corpus
        reports.append(report)
        print("\n".join(format_report(report)), flush=True)
        print("\n".join(format_explains(report)), flush=True)
        print(flush=True)
    print("targets (issue 38), the extension's engine:")
    print("\n".join(format_targets(reports)))
    print()
    print(f"total runtime {time.perf_counter() - began:.0f} s, load {harness.load_average()}")


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--corpus", default=",".join(CORPORA), help="comma-separated")
    parser.add_argument("--language", choices=LANGUAGES, default=LANGUAGES[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--ts-rank", action="store_true", help="also measure the ts_rank_cd statements"
    )
    parser.add_argument(
        "--load-baseline",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="COPY the chunks once with the postings triggers disabled first (the load's baseline)",
    )
    parser.add_argument(
        "--fold-every",
        type=int,
        default=0,
        help="fold the delta into blocks after every N chunks of the load (a multiple of "
        f"{COPY_BATCH:,}); then the SQL engine is not measured (the postings are not in rows)",
    )
    parser.add_argument(
        "--peer", action="store_true", help="the bm25s peer (numba, one thread) on zipf"
    )
    parser.add_argument("--keep", action="store_true", help="keep the databases at the end")
    args = parser.parse_args()
    if args.fold_every % COPY_BATCH:
        parser.error(f"--fold-every must be a multiple of {COPY_BATCH}")
    corpora = [c.strip() for c in args.corpus.split(",") if c.strip()]
    for name in corpora:
        if name not in CORPORA:
            parser.error(f"unknown corpus {name!r}: use {', '.join(CORPORA)}")
    asyncio.run(run(args, corpora))


if __name__ == "__main__":
    main()
