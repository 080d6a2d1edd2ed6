"""Keyword search (Okapi BM25 in PostgreSQL) at 100k chunks: latency, exactness, load, storage.

    python -m bench.keyword [--chunks 100000] [--queries 200] [--corpus zipf,pessimistic]
                            [--language english] [--seed 1]

Each corpus goes into a fresh database (one collection in `--language`: `english` drops stop
words when it analyses text, `simple` keeps every word as a lexeme; documents of 10
chunks; no embeddings), then the same queries run through four rankers, one query at a time on
one held autocommit connection, after one warm-up pass (the order of the four rotates query by
query, so all see the same cache state):

- **bm25**: `cari.search.bm25.search(candidates=40)`, the service's path: `search_keyword.sql`
  sums every posting of the query's lexemes (exact BM25; its scores are checked against the
  bm25s library by tests/test_bm25.py and bench/bm25_quality.py);
- **ts_rank_cd AND**: the statement Cari ran before BM25 (`websearch_to_tsquery` on the GIN index,
  `ts_rank_cd`, LIMIT 40), which only returns chunks holding every query lexeme;
- **ts_rank_cd OR**: the same ranking over chunks holding any query lexeme (the lexemes of
  `to_tsvector(query)` OR-ed into a tsquery), the same match semantics as BM25: the baseline.

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
and `VACUUM (ANALYZE)`. The baseline is the same COPY with `ALTER TABLE chunks DISABLE TRIGGER
USER` (foreign keys stay checked; the generated tsvector and the GIN index are maintained in
both), into the same empty table (TRUNCATE between): the difference is the triggers' cost.

Output, per corpus: load rows/s with and without the triggers; sizes of the postings table
(heap, each index), the statistics tables and chunks, with bytes and postings rows per chunk;
then per query kind a table of p50/p95/p99 ms per ranker and their ratio to ts_rank_cd OR
(below 1: faster than the OR baseline), the mean number of results and the postings bm25 read.
Last, `EXPLAIN (ANALYZE, BUFFERS)` of the statement for a query with common lexemes, one with
rare ones, and the slowest typical query (zipf). Target: bm25 p95 <= 20 ms on zipf for queries
up to 8 words.

Runs on DATABASE_URL if set (databases `cari_bench_keyword_<corpus>_<language>`), else on a
throwaway embedded server.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import math
import random
import re
import time
from collections import Counter
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import psycopg
import Stemmer  # type: ignore[import-not-found]
from psycopg import sql
from psycopg.types.json import Jsonb

from bench import search as search_bench
from bench.database import fresh_runtime
from cari.ingest import store
from cari.queries import query
from cari.search import bm25
from cari.search.bm25 import KeywordResult
from cari.settings import load_settings

AConn = psycopg.AsyncConnection[Any]
T = TypeVar("T")

CORPORA = ("zipf", "pessimistic")
COLLECTION = "bench"
LANGUAGES = ("english", "simple")
CANDIDATES = 40
COPY_BATCH = 5_000
CHUNKS_PER_DOCUMENT = 10
MAX_QUERY_WORDS = 8
COMMON_RANKS = 50
P95_TARGET_MS = 20.0

# PostgreSQL's english.stop (the 127 words `english` drops), as in the file.
_ENGLISH_STOP_TEXT = (
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself "
    "she her hers herself it its itself they them their theirs themselves what which who whom "
    "this that these those am is are was were be been being have has had having do does did "
    "doing a an the and but if or because as until while of at by for with about against between "
    "into through during before after above below to from up down in out on off over under "
    "again further then once here there when where why how all any both each few more most "
    "other some such no nor not only own same so than too very s t can will just don should now"
)
_ENGLISH_STOP = _ENGLISH_STOP_TEXT.split()
# The vocabulary's first ranks: these first, roughly by English frequency, then the rest.
_FREQUENT_FIRST_TEXT = (
    "the of and to a in is that for it as was with be by on not he i this are or his from at "
    "which but have an they you were her she there been their all if has will so no more when "
    "who can we what him about them its into than only other some then do any these"
)
STOP_WORDS = list(dict.fromkeys([*_FREQUENT_FIRST_TEXT.split(), *_ENGLISH_STOP]))
assert len(STOP_WORDS) == len(_ENGLISH_STOP) == 127
PSEUDO_WORDS = 200_000
SHORT_WORDS = 10_000  # the most frequent pseudo-words have two syllables, the rest three
ZIPF_EXPONENT = 1.07
CHUNK_TOKENS = (250, 450)
TITLE_WORDS = (3, 8)
_ONSETS = list("bdfgklmnprstvz")
_VOWELS = list("aeiou")
_CODAS = ["n", "r", "l", "k", "m", "t", ""]

RANKERS = ("bm25", "ts_rank_cd AND", "ts_rank_cd OR")

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
    seconds: float  # COPY with the triggers
    baseline_seconds: float  # the same COPY, triggers disabled
    compact_seconds: float
    vacuum_seconds: float


@dataclass(slots=True)
class KindReport:
    queries: list[str]
    lexemes: list[int]  # per query
    latency: dict[str, list[float]]  # ms per ranker, one per query
    results: dict[str, list[int]]
    read: list[int]  # postings bm25 read


@dataclass(slots=True)
class CorpusReport:
    name: str
    language: str
    description: str
    chunks: int
    documents: int
    load: LoadReport
    sizes: dict[str, int]  # relation -> bytes
    postings_rows: int
    lexemes: int
    kinds: dict[str, KindReport]
    explains: list[tuple[str, list[str]]]
    server: str
    planning: str  # how the server planned the keyword statement while measuring


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
    conn: AConn, collection_id: int, language: int, document_ids: list[int], rows: list[Row]
) -> float:
    """Seconds to COPY `rows` in batches of COPY_BATCH, each its own statement and commit."""
    started = time.perf_counter()
    for start in range(0, len(rows), COPY_BATCH):
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
    return time.perf_counter() - started


async def load(conn: AConn, corpus: Corpus, language: str) -> tuple[int, int, LoadReport]:
    """Create the collection and its documents, COPY the chunks once without and once with the
    triggers, fold the statistics and vacuum. Returns the collection id and language oid."""
    cur = await conn.execute(
        "INSERT INTO collections (name, language) VALUES (%s, %s) RETURNING id, language::oid",
        (COLLECTION, language),
    )
    collection_id, language = await cur.fetchone() or (0, 0)
    cur = await conn.execute(
        "INSERT INTO documents (collection_id, external_id, title, content_hash) "
        "SELECT %s, 'doc-' || (n - 1), t, '' FROM unnest(%s::text[]) WITH ORDINALITY AS u (t, n) "
        "ORDER BY n RETURNING id",
        (collection_id, corpus.documents),
    )
    document_ids = [int(r[0]) for r in await cur.fetchall()]

    await conn.execute("ALTER TABLE chunks DISABLE TRIGGER USER")
    try:
        baseline = await copy_rows(conn, collection_id, language, document_ids, corpus.rows)
    finally:
        await conn.execute("ALTER TABLE chunks ENABLE TRIGGER USER")
    await conn.execute("TRUNCATE chunks")
    seconds = await copy_rows(conn, collection_id, language, document_ids, corpus.rows)
    started = time.perf_counter()
    await conn.execute("SELECT bm25_compact(%s)", (collection_id,))
    compacted = time.perf_counter()
    await conn.execute("VACUUM (ANALYZE)")
    vacuumed = time.perf_counter()
    report = LoadReport(
        len(corpus.rows), seconds, baseline, compacted - started, vacuumed - compacted
    )
    return int(collection_id), int(language), report


STORAGE = (
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


async def storage(conn: AConn) -> tuple[dict[str, int], int, int]:
    """Relation sizes in bytes, the number of postings rows and of distinct lexemes."""
    expressions = sql.SQL(", ").join(sql.SQL(e) for _, e in STORAGE)
    cur = await conn.execute(sql.SQL("SELECT ") + expressions)
    sizes = dict(zip((n for n, _ in STORAGE), await cur.fetchone() or (), strict=True))
    cur = await conn.execute(
        "SELECT (SELECT count(*) FROM postings), (SELECT count(*) FROM bm25_terms WHERE df > 0)"
    )
    postings, lexemes = await cur.fetchone() or (0, 0)
    return {k: int(v) for k, v in sizes.items()}, int(postings), int(lexemes)


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


async def timed(work: Awaitable[T]) -> tuple[float, T]:
    started = time.perf_counter()
    value = await work
    return (time.perf_counter() - started) * 1000, value


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

    async def adaptive(self, text: str) -> KeywordResult:
        return await bm25.search(
            self.conn,
            self.collection_id,
            text,
            candidates=CANDIDATES,
            filters=sql.SQL(""),
            params={},
        )

    async def ts_rank(self, statement: str, text: str) -> list[tuple[Any, ...]]:
        cur = await self.conn.execute(statement, {**self.params, "query": text})
        return await cur.fetchall()

    def run(self, ranker: str, text: str) -> Awaitable[Any]:
        if ranker == "bm25":
            return self.adaptive(text)
        return self.ts_rank(TS_RANK_AND if ranker == "ts_rank_cd AND" else TS_RANK_OR, text)


async def measure(rankers: Rankers, queries: list[str]) -> KindReport:
    cur = await rankers.conn.execute(
        "SELECT length(to_tsvector(%s::oid::regconfig, q)) FROM unnest(%s::text[]) AS q",
        (rankers.language, queries),
    )
    lexemes = [int(r[0]) for r in await cur.fetchall()]
    report = KindReport(
        queries,
        lexemes,
        {r: [] for r in RANKERS},
        {r: [] for r in RANKERS},
        read=[],
    )
    for round_ in range(2):  # round 0 warms up
        for n, text in enumerate(queries):
            shift = (n + round_) % len(RANKERS)
            values: dict[str, Any] = {}
            for ranker in RANKERS[shift:] + RANKERS[:shift]:
                ms, values[ranker] = await timed(rankers.run(ranker, text))
                if round_:
                    report.latency[ranker].append(ms)
            if not round_:
                continue
            report.read.append(values["bm25"].postings_read)
            for ranker in RANKERS:
                value = values[ranker]
                report.results[ranker].append(
                    len(value) if isinstance(value, list) else len(value.candidates)
                )
    return report


def keyword_statement() -> sql.Composed:
    return sql.SQL(query("search_keyword")).format(filters=sql.SQL(""))


def keyword_params(collection_id: int, text: str) -> dict[str, Any]:
    """The parameters bm25.search sends (no filters)."""
    return {
        "collection_id": collection_id,
        "query": text,
        "candidates": CANDIDATES,
    }


async def explain(conn: AConn, collection_id: int, text: str) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS) of the keyword statement as bm25.search runs it."""
    cur = await conn.execute(
        sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + keyword_statement(),
        keyword_params(collection_id, text),
    )
    return [str(r[0]) for r in await cur.fetchall()]


async def bench_corpus(
    conn: AConn, corpus: Corpus, language: str, queries: int, seed: int, *, explains: bool
) -> CorpusReport:
    """Load `corpus` into the (fresh, migrated) database of `conn`, an autocommit connection,
    and measure `queries` queries of each kind."""
    collection_id, language_oid, loaded = await load(conn, corpus, language)
    sizes, postings, lexemes = await storage(conn)
    cur = await conn.execute(
        "SELECT version(), current_setting('shared_buffers'), current_setting('work_mem'), "
        "current_setting('jit')"
    )
    version, shared_buffers, work_mem, jit = await cur.fetchone() or ("", "", "", "")
    server = f"{version}; shared_buffers {shared_buffers}, work_mem {work_mem}, jit {jit}"
    kinds = {
        "typical": corpus.typical[:queries],
        "worst": await worst_queries(conn, corpus, collection_id, language, queries, seed),
    }
    rankers = Rankers(conn, collection_id, language_oid)
    gc.collect()
    gc.freeze()
    try:
        measured = {kind: await measure(rankers, texts) for kind, texts in kinds.items()}
    finally:
        gc.unfreeze()
    # psycopg prepares a statement on its 5th run; the server may then plan it generically.
    cur = await conn.execute(
        "SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0), count(*) "
        "FROM pg_prepared_statements WHERE strpos(statement, %s) > 0",
        ("heads AS MATERIALIZED",),
    )
    generic, custom, prepared = await cur.fetchone() or (0, 0, 0)
    digest = hashlib.sha256(query("search_keyword").encode()).hexdigest()[:12]
    plans_used = (
        f"search_keyword.sql sha256 {digest}: {prepared} prepared variant(s) ran "
        f"{generic} generic and {custom} custom plans (EXPLAINs below are custom plans)"
    )

    plans: list[tuple[str, list[str]]] = []
    if explains:
        common = kinds["worst"][0]
        rare = await rare_query(conn, corpus, collection_id, language)
        plans.append((f"common lexemes {common!r}", await explain(conn, collection_id, common)))
        plans.append((f"rare lexemes {rare!r}", await explain(conn, collection_id, rare)))
        typical = measured["typical"]
        slowest = int(np.argmax(typical.latency["bm25"]))
        text = typical.queries[slowest]
        plans.append(
            (
                f"slowest typical query {text!r} ({typical.latency['bm25'][slowest]:.1f} ms)",
                await explain(conn, collection_id, text),
            )
        )
    return CorpusReport(
        corpus.name,
        language,
        corpus.description,
        len(corpus.rows),
        len(corpus.documents),
        loaded,
        sizes,
        postings,
        lexemes,
        measured,
        plans,
        server,
        plans_used,
    )


# Report ---------------------------------------------------------------------------------------


def _mb(n: int) -> str:
    return f"{n / 2**20:,.1f} MB"


def format_report(report: CorpusReport) -> list[str]:
    out = [
        f"== corpus {report.name} ({report.language}): {report.chunks:,} chunks, "
        f"{report.documents:,} documents"
    ]
    out.append(f"   {report.description}")
    out.append(f"   {report.server}")
    out.append(f"   {report.planning}")
    ld = report.load
    out.append(
        f"load (binary COPY, {COPY_BATCH:,} rows per statement): with triggers {ld.seconds:.1f} s "
        f"({ld.rows / ld.seconds:,.0f} rows/s); triggers disabled {ld.baseline_seconds:.1f} s "
        f"({ld.rows / ld.baseline_seconds:,.0f} rows/s): x{ld.seconds / ld.baseline_seconds:.2f}"
        f"; then bm25_compact {ld.compact_seconds:.2f} s, VACUUM (ANALYZE) "
        f"{ld.vacuum_seconds:.1f} s"
    )
    out.append(
        f"storage: {report.postings_rows:,} postings rows "
        f"({report.postings_rows / report.chunks:.1f} per chunk), {report.lexemes:,} distinct "
        "lexemes"
    )
    for name, size in report.sizes.items():
        out.append(f"  {name:<26} {_mb(size):>12} {size / report.chunks:10,.0f} B/chunk")
    for kind, k in report.kinds.items():
        n = len(k.queries)
        out.append("")
        out.append(
            f"-- {report.name} / {kind}: {n} queries, {np.mean(k.lexemes):.1f} lexemes on average "
            f"(max {max(k.lexemes)}); one at a time, after 1 warm-up pass"
        )
        out.append(
            f"  {'ranker':<16} {'p50 ms':>8} {'p95':>8} {'p99':>8}   {'p50/OR':>7} {'p95/OR':>7}"
            f" {'p99/OR':>7}   {'results':>7}"
        )
        base = np.percentile(k.latency["ts_rank_cd OR"], [50, 95, 99])
        for ranker in RANKERS:
            p = np.percentile(k.latency[ranker], [50, 95, 99])
            r = p / base
            out.append(
                f"  {ranker:<16} {p[0]:8.2f} {p[1]:8.2f} {p[2]:8.2f}   {r[0]:7.2f} {r[1]:7.2f} "
                f"{r[2]:7.2f}   {np.mean(k.results[ranker]):7.1f}"
            )
        read = np.array(k.read)
        out.append(
            f"  postings bm25 summed per query: p50 {np.percentile(read, 50):,.0f}, p95 "
            f"{np.percentile(read, 95):,.0f}"
        )
    return out


def format_targets(reports: list[CorpusReport]) -> list[str]:
    out = []
    for report in reports:
        for kind, k in report.kinds.items():
            p95 = float(np.percentile(k.latency["bm25"], 95))
            latency = (
                f"p95 {p95:.2f} ms {'MET' if p95 <= P95_TARGET_MS else 'MISSED'}"
                if report.name == "zipf"
                else f"p95 {p95:.2f} ms (no target)"
            )
            out.append(f"  {report.name:<12} {kind:<8} {latency}")
    return out


def format_explains(report: CorpusReport) -> list[str]:
    out = []
    for title, lines in report.explains:
        out.append("")
        out.append(f"EXPLAIN (ANALYZE, BUFFERS) {report.name}: {title}")
        out.extend(f"  {line}" for line in lines)
    return out


async def run(chunks: int, queries: int, corpora: list[str], language: str, seed: int) -> None:
    began = time.perf_counter()
    settings = load_settings(reembed_interval_s=0, statement_timeout_ms=0)
    reports: list[CorpusReport] = []
    for name in corpora:
        started = time.perf_counter()
        corpus = build_corpus(name, chunks, queries, seed)
        print(
            f"{name}: built {len(corpus.rows):,} chunks in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        async with fresh_runtime(f"cari_bench_keyword_{name}_{language}", settings) as rt:
            # The next corpus goes to a fresh database on the same server.
            settings = settings.model_copy(update={"database_url": rt.pool.conninfo})
            async with rt.pool.connection() as conn:
                report = await bench_corpus(
                    conn, corpus, language, queries, seed, explains=name == "zipf"
                )
        del corpus
        reports.append(report)
        print("\n".join(format_report(report)), flush=True)
        print(flush=True)
    print(f"target: bm25 p95 <= {P95_TARGET_MS:.0f} ms on zipf")
    print("\n".join(format_targets(reports)))
    for report in reports:
        print("\n".join(format_explains(report)))
    print()
    print(f"total runtime {time.perf_counter() - began:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--corpus", default=",".join(CORPORA), help="comma-separated")
    parser.add_argument("--language", choices=LANGUAGES, default=LANGUAGES[0])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    corpora = [c.strip() for c in args.corpus.split(",") if c.strip()]
    for name in corpora:
        if name not in CORPORA:
            parser.error(f"unknown corpus {name!r}: use {', '.join(CORPORA)}")
    asyncio.run(run(args.chunks, args.queries, corpora, args.language, args.seed))


if __name__ == "__main__":
    main()
