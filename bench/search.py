"""Search latency at 100k chunks, per mode, against the same SQL run alone in the same run.

    python -m bench.search [--chunks 100000] [--queries 200] [--rounds 2]

For each mode (keyword, vector, hybrid) it times, one request at a time:

- **service**: `await searcher.search("bench", request)` in process, the server-side path
  (collection lookup, the retrievers on their own pooled connections in parallel, fusion, the
  result fetch), with the query vectors already in the searcher's LRU cache, so the query
  embedding is excluded;
- **SQL alone**: every statement the service runs, with the same parameters (collection id,
  language, the server's candidates and ef_search), on two connections held for the whole run in
  autocommit: the collection lookup; then keyword is `query_lexemes` and `search_keyword` (two
  round trips), vector is `search_vector` (one round trip: the server's ef_search is the
  connections' own) beside `query_lexemes`, hybrid is both at once on the two connections
  (`asyncio.gather`), each asking for as many candidates as the service does (a lone retriever
  only the 2·top_k it weighs); then
  `search_evidence` for the first 2·top_k chunks and the fetch of the top 10. The ratio
  service/SQL is what the service adds: pool, Python, fusion, routing, serialisation.
- **equal-weight RRF**: after each hybrid request, the same query through the service with
  plain equal-weight RRF (k 60) on 40 candidates per retriever at `ef_search` 40, the defaults
  before fusion and `ef_search` were tuned; the ratio hybrid/RRF is what the tuned fusion,
  depth and `ef_search` cost.

Service and SQL alone alternate query by query (which goes first alternates too), so both see
the same cache state and CPU speed. One warm-up pass, then `--rounds` measured passes.

Corpus. Real embeddings of 100k chunks would take hours with the local model (~4 chunks/s on
2 cores), so the rows are synthesised from real data:

- passages: every document of the English sets (cranfield, cisi, cacm, med) and of TyDi QA
  Indonesian, 11,745 in all (two empty records skipped; a cacm record without abstract is
  its title);
- base vectors: 400 passages sampled at random (seed 0), cut to their first 100 words, embedded
  with the real local model (`LocalEmbedder`, passage mode, title + text as Cari embeds chunks);
  cached in `bench/.cache/` under the model's name and a hash of the texts;
- rows: row i takes passage i mod 11,745 (so each passage appears ~8.5 times at 100k). Its
  first copy is the passage as it is; later copies shuffle its sentences and, half the time,
  replace one by another sentence of the same passage. Text is capped at 350 words (one chunk)
  and ends with a marker `[i]`. Metadata `{"source": dataset, "n": i}`; one document per
  passage (its copies are the document's chunks, ordinal = copy number);
- vectors: the base vector of a random base passage + Gaussian noise, sigma 0.04 per dimension,
  re-normalised (noise norm ~0.78: a row keeps cosine ~0.79 with its base, ~0.62 with a row of
  the same base, ~0.46 with a row of another; real e5 vectors of unrelated passages are ~0.75
  apart; the run prints the measured values).

Loaded with one binary COPY into one collection (language `simple`, the default) with the HNSW
index dropped, then the index is built once and the table vacuumed and analysed (`VACUUM
(ANALYZE)`: the state autovacuum leaves a table in; it also flushes the GIN pending list).

Queries: `--queries` real questions taken in turn from the five sets' `queries.jsonl`.
Settings: `reembed_interval_s=0, statement_timeout_ms=0`, defaults otherwise (top_k 10 asked).
Runs on DATABASE_URL if set (in a fresh database `cari_bench_search`), else on a throwaway
embedded server in a temporary folder.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import random
import re
import time
from collections.abc import Awaitable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from psycopg import sql
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from bench import harness
from bench.embedding_cache import CACHE_DIR as CACHE
from bench.harness import DATASETS, ROOT, explain, fresh_runtime, percentiles, timed
from cari.db import migrations
from cari.db.queries import query
from cari.db.vector_space import space
from cari.embed import Embedder
from cari.ingest import store
from cari.limits import Mode
from cari.runtime import Runtime
from cari.schema.collections import CollectionCreate
from cari.schema.search import SearchRequest
from cari.search import bm25, highlights, lexemes
from cari.search.engine import Searcher
from cari.search.lexemes import Lexemes
from cari.settings import Settings, load_settings

SETS = ["cranfield", "cisi", "cacm", "med", "tydiqa-goldp-id"]
FOLDERS = tuple(DATASETS / name for name in SETS)
DATABASE = "cari_bench_search"
COLLECTION = "bench"
MODES: list[Mode] = ["keyword", "vector", "hybrid"]

BASE_SAMPLE = 400
BASE_WORDS = 100
SIGMA = 0.04
ROW_WORDS = 350
TOP_K = 10
# Every search at threshold 0: the corpus's vectors are synthetic, so their cosines to real
# questions say nothing of relevance, and a threshold would empty the results it times (the
# relevance stage still runs and is timed).
SEED = 0


@dataclass(frozen=True, slots=True)
class Passage:
    dataset: str
    external_id: str
    title: str
    text: str
    sentences: list[str]


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def load_passages(folders: Sequence[Path] = FOLDERS) -> list[Passage]:
    passages = []
    for folder in folders:
        name = folder.name
        with (folder / "corpus.jsonl").open() as corpus:
            for line in corpus:
                row = json.loads(line)
                title = " ".join(str(row.get("title") or "").split())
                text = " ".join(str(row.get("text") or "").split()) or title
                if not text:
                    continue
                sentences = [s for s in _SENTENCE_END.split(text) if s]
                passages.append(Passage(name, f"{name}:{row['_id']}", title, text, sentences))
    return passages


def load_queries(count: int, folders: Sequence[Path] = FOLDERS) -> list[str]:
    """At most `count` distinct questions, taken in turn from each set's queries.jsonl."""

    def texts(folder: Path) -> Iterator[str]:
        with (folder / "queries.jsonl").open() as lines:
            for line in lines:
                yield " ".join(str(json.loads(line)["text"]).split())

    sources = [texts(folder) for folder in folders]
    chosen: list[str] = []
    seen: set[str] = set()
    while len(chosen) < count and sources:
        for source in list(sources):
            text = next(source, None)
            if text is None:
                sources.remove(source)
            elif text and text not in seen:
                seen.add(text)
                chosen.append(text)
                if len(chosen) == count:
                    break
    return chosen


async def base_vectors(embedder: Embedder, passages: list[Passage]) -> np.ndarray:
    """Real embeddings of a random sample of passages (first words only), cached on disk."""
    sample = random.Random(SEED).sample(range(len(passages)), BASE_SAMPLE)
    texts = [
        store.embedding_text(passages[i].title, " ".join(passages[i].text.split()[:BASE_WORDS]))
        for i in sample
    ]
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    path = CACHE / f"base-{embedder.model_name}-{BASE_SAMPLE}x{BASE_WORDS}-{digest}.npz"
    if path.exists():
        print(f"base vectors: {BASE_SAMPLE} from cache {path.relative_to(ROOT)}")
        vectors: np.ndarray = np.load(path)["vectors"]
        return vectors
    started = time.perf_counter()
    vectors = np.stack(await embedder.embed_documents(texts)).astype(np.float32)
    took = time.perf_counter() - started
    print(
        f"base vectors: embedded {BASE_SAMPLE} passages with {embedder.model_name} in {took:.0f} s"
    )
    CACHE.mkdir(exist_ok=True)
    np.savez(path, vectors=vectors)
    return vectors


def synthetic_vectors(base: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(SEED)
    owner = rng.integers(0, len(base), size=count)
    vectors = base[owner] + rng.standard_normal((count, base.shape[1]), dtype=np.float32) * SIGMA
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32), owner


def row_text(passage: Passage, copy: int, i: int, rng: random.Random) -> str:
    sentences = passage.sentences
    if copy > 0 and len(sentences) > 1:
        sentences = sentences.copy()
        rng.shuffle(sentences)
        if rng.random() < 0.5:
            sentences[rng.randrange(len(sentences))] = rng.choice(passage.sentences)
    words = " ".join(sentences).split()[:ROW_WORDS]
    return f"{' '.join(words)} [{i}]"


async def load_corpus(
    pool: AsyncConnectionPool,
    settings: Settings,
    passages: list[Passage],
    vectors: np.ndarray,
    *,
    language: str = "simple",
) -> None:
    """The corpus in collection `COLLECTION`, whose text-search configuration is `language`."""
    rng = random.Random(SEED)
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO collections (name, language) VALUES (%s, %s)", (COLLECTION, language)
        )
        collection = await store.collection_ref(conn, COLLECTION)
        await conn.execute(
            migrations.vector_index_drop_statement(space(settings.embedding_dimension, settings))
        )
        await conn.commit()

        started = time.perf_counter()
        used = passages[: len(vectors)]
        cur = await conn.execute(
            "INSERT INTO documents (collection_id, external_id, title, content_hash) "
            "SELECT %s, e, t, '' FROM unnest(%s::text[], %s::text[]) AS u (e, t) "
            "RETURNING external_id, id",
            (collection.id, [p.external_id for p in used], [p.title for p in used]),
        )
        document_ids: dict[str, int] = dict(await cur.fetchall())
        async with conn.cursor().copy(query("chunks_copy")) as copy:
            copy.set_types(store.CHUNK_COLUMN_TYPES)
            for i in range(len(vectors)):
                passage = passages[i % len(passages)]
                ordinal = i // len(passages)
                text = row_text(passage, ordinal, i, rng)
                await copy.write_row(
                    (
                        collection.id,
                        document_ids[passage.external_id],
                        ordinal,
                        passage.title,
                        text,
                        Jsonb({"source": passage.dataset, "n": i}),
                        collection.language,
                        round(len(text.split()) * 1.4),
                        vectors[i],
                    )
                )
        await conn.commit()
        loaded = time.perf_counter()
        print(
            f"load: {len(document_ids)} documents, {len(vectors)} chunks by binary COPY "
            f"(GIN maintained, HNSW dropped) in {loaded - started:.1f} s "
            f"({len(vectors) / (loaded - started):,.0f} rows/s)"
        )
        await index_and_fold(conn, settings, collection, loaded)


async def index_and_fold(
    conn: Any, settings: Settings, collection: store.CollectionRef, loaded: float
) -> None:
    """After the load (done at `loaded`): build HNSW once, fold the keyword index, vacuum, on
    `conn`, one of the pool's: autocommit, as it stays for the pool's next user."""
    async with conn.transaction():
        await conn.execute(migrations.vector_indexes_statement(settings))
    built = time.perf_counter()
    print(
        f"HNSW build (m {settings.hnsw_m}, ef_construction {settings.hnsw_ef_construction}) "
        f"in {built - loaded:.1f} s"
    )
    # As a bulk load ends: the statistics folded, and the postings packed into blocks where
    # the extension serves (a no-op on the SQL engine, which reads them as rows).
    await store.compact_statistics(conn, collection, fold_postings=1)
    folded = time.perf_counter()
    cur = await conn.execute(
        "SELECT (SELECT count(*) FROM bm25_blocks WHERE collection_id = %(c)s), "
        "(SELECT count(*) FROM postings WHERE collection_id = %(c)s)",
        {"c": collection.id},
    )
    blocks, delta = await cur.fetchone() or (0, 0)
    print(
        f"fold (compact_statistics, fold_postings=1) in {folded - built:.1f} s: "
        f"{blocks:,} packed blocks, {delta:,} postings rows left in the delta"
    )
    await conn.execute("VACUUM (ANALYZE) chunks, postings, bm25_blocks, bm25_terms")
    print(f"VACUUM (ANALYZE) in {time.perf_counter() - folded:.1f} s")


async def build_corpus(
    rt: Runtime,
    chunks: int,
    *,
    passages: list[Passage] | None = None,
    base: np.ndarray | None = None,
    language: str = "simple",
) -> list[Passage]:
    """The corpus of `chunks` rows loaded in collection `COLLECTION` of the runtime's database,
    from `passages` and `base` vectors (read and embedded when not given): the passages."""
    passages = passages if passages is not None else load_passages()
    base = base if base is not None else await base_vectors(rt.embedder, passages)
    vectors, _ = synthetic_vectors(base, chunks)
    await load_corpus(rt.pool, rt.settings, passages, vectors, language=language)
    return passages


class SqlAlone:
    """Every statement the service runs for a search, bare, on two held connections: the
    collection lookup, the retriever(s) (both at once for hybrid), the relevance evidence of the
    chunks weighed and the fetch of the top 10."""

    def __init__(
        self, conns: list[Any], collection_id: int, settings: Settings, engine: bm25.Engine
    ):
        self.a, self.b = conns
        empty = sql.SQL("")
        self.keyword_statement = bm25.keyword_statement(engine)
        self.vector_statement = space(settings.embedding_dimension, settings).statement(
            "search_vector", filters=empty, alias=sql.Identifier("c")
        )
        self.params = {"collection_id": collection_id}
        self.candidates = settings.search_candidates
        self.ef_search = settings.hnsw_ef_search
        self.vectors: dict[str, np.ndarray] = {}
        self.asked = Lexemes()  # the last question's, read by `keyword` or `request`

    async def analysed(self, text: str, conn: Any = None) -> Lexemes:
        """The question's lexemes, as the service reads them once per search."""
        return await lexemes.analyse(conn or self.a, self.params["collection_id"], text)

    async def keyword(self, text: str, candidates: int, conn: Any = None) -> list[Any]:
        # As the service's keyword search: the question's lexemes, then the statement.
        self.asked = await self.analysed(text, conn)
        cur = await (conn or self.a).execute(
            self.keyword_statement,
            {**self.params, **self.asked.params(), "candidates": candidates},
        )
        rows: list[Any] = await cur.fetchall()
        return rows

    async def vector(self, text: str, candidates: int, conn: Any = None) -> list[Any]:
        # The server's ef_search, which the pooled connection has already: one statement.
        cur = await (conn or self.a).execute(
            self.vector_statement,
            {**self.params, "vector": self.vectors[text], "candidates": candidates},
        )
        rows: list[Any] = await cur.fetchall()
        return rows

    async def hybrid(self, text: str, candidates: int) -> list[Any]:
        keyword, vector = await asyncio.gather(
            self.keyword(text, candidates), self.vector(text, candidates, self.b)
        )
        return [keyword, vector]

    def run(self, mode: Mode, text: str) -> Awaitable[list[Any]]:
        return self.request(mode, text)

    async def request(self, mode: Mode, text: str) -> list[Any]:
        await self.a.execute(query("collection_for_search"), {"name": COLLECTION})
        retrieve = {"keyword": self.keyword, "vector": self.vector, "hybrid": self.hybrid}[mode]
        weighed = 2 * TOP_K  # what the service weighs, and all a lone retriever is asked for
        found: list[Any]
        if mode == "vector":  # no keyword search to read the lexemes: side by side, as served
            found, self.asked = await asyncio.gather(
                self.vector(text, weighed), self.analysed(text, self.b)
            )
        else:
            found = await retrieve(text, self.candidates if mode == "hybrid" else weighed)
        lists = found if mode == "hybrid" else [found]
        head = list(dict.fromkeys(row[0] for rows in lists for row in rows))[:weighed]
        if head:
            cur = await self.a.execute(
                query("search_evidence"),
                {
                    **self.params,
                    **self.asked.params(),
                    "vector": None if mode == "keyword" else self.vectors[text],
                    "ids": head,
                },
            )
            await cur.fetchall()
        top = head[:TOP_K]
        if top:
            cur = await self.a.execute(
                query("chunks_for_results"), {"ids": top, **highlights.params([self.asked])}
            )
            await cur.fetchall()
        return found


# The defaults before fusion and ef_search were tuned (docs/benchmarks.md).
EQUAL_RRF_CANDIDATES = 40
EQUAL_RRF_EF_SEARCH = 40


def equal_rrf(text: str) -> SearchRequest:
    """Plain equal-weight RRF, the fusion hybrid search is measured against."""
    return SearchRequest(
        query=text,
        mode="hybrid",
        top_k=TOP_K,
        fusion="rrf",
        vector_weight=1.0,
        keyword_weight=1.0,
        rrf_k=60,
        candidates=EQUAL_RRF_CANDIDATES,
        ef_search=EQUAL_RRF_EF_SEARCH,
        threshold=0,
    )


async def run(chunks: int, query_count: int, rounds: int) -> None:
    began = time.perf_counter()
    settings = load_settings(reembed_interval_s=0, statement_timeout_ms=0, embedder="local")
    async with fresh_runtime(DATABASE, settings) as rt:
        await measure(rt, chunks, query_count, rounds)
    print()
    print(f"total runtime {time.perf_counter() - began:.0f} s")


@dataclass(slots=True)
class Latencies:
    """Milliseconds per request of the measured rounds, and what the first one found."""

    service: dict[Mode, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    alone: dict[Mode, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    hits: dict[Mode, list[int]] = field(default_factory=lambda: {m: [] for m in MODES})
    keyword_candidates: list[int] = field(default_factory=list)  # hybrid's keyword list
    rrf_equal: list[float] = field(default_factory=list)
    seconds: float = 0.0  # how long measuring took


@dataclass(frozen=True, slots=True)
class Facts:
    """The database the run measured."""

    collection_id: int
    rows: int
    version: str
    pgvector: str
    size: str
    shared_buffers: str


async def measure(rt: Runtime, chunks: int, query_count: int, rounds: int) -> None:
    passages = load_passages()
    print(f"passages: {len(passages)} from {', '.join(SETS)}")
    base = await base_vectors(rt.embedder, passages)
    vectors, owner = synthetic_vectors(base, chunks)
    describe_vectors(base, vectors, owner)
    await load_corpus(rt.pool, rt.settings, passages, vectors)
    del vectors, owner

    queries = load_queries(query_count)
    query_vectors = await warm_queries(rt, queries)
    facts = await corpus_facts(rt.pool)

    gc.collect()
    gc.freeze()
    async with rt.pool.connection() as a, rt.pool.connection() as b:
        # Autocommit: a lone statement is one round trip; the vector pair gets BEGIN/COMMIT.
        await a.set_autocommit(True)
        await b.set_autocommit(True)
        engine = await rt.keyword_engine.current()
        print(f"keyword engine: {engine}")
        bare = SqlAlone([a, b], facts.collection_id, rt.settings, engine.name)
        bare.vectors = query_vectors
        latencies = await measure_rounds(rt.searcher, bare, queries, rounds)
        # Where the service's time goes: its own stage timings (explain=True), one extra pass.
        stages = await stage_timings(rt.searcher, queries)
        explained = await plans(a, bare, rt.searcher, queries[0])
        held, borrowed = await round_trips(a, rt.pool)
        await a.set_autocommit(False)
        await b.set_autocommit(False)
    gc.unfreeze()

    print_latencies(facts, rt.settings, latencies, len(queries), rounds)
    print_stages(stages)
    print_plans(explained, queries[0], bare.ef_search)
    print()
    print(
        f"SELECT 1 p50: {np.percentile(held, 50):.3f} ms on a held autocommit connection "
        f"(one round trip); {np.percentile(borrowed, 50):.3f} ms borrowing a pooled one as the "
        "service does (BEGIN, SELECT 1, COMMIT: three round trips)"
    )


def describe_vectors(base: np.ndarray, vectors: np.ndarray, owner: np.ndarray) -> None:
    """Print the mean cosines of rows to their base, between rows and between bases."""
    check = np.random.default_rng(1).integers(0, len(vectors), size=(2000, 2))
    own = float(np.mean(np.sum(vectors[check[:, 0]] * base[owner[check[:, 0]]], axis=1)))
    pairs = check[owner[check[:, 0]] != owner[check[:, 1]]]
    other = float(np.mean(np.sum(vectors[pairs[:, 0]] * vectors[pairs[:, 1]], axis=1)))
    base_cos = base @ base.T
    print(
        f"vectors: base + N(0, {SIGMA}^2) per dimension, re-normalised; mean cosine row-own base "
        f"{own:.3f}, rows of different bases {other:.3f}, between bases "
        f"{float(base_cos[~np.eye(len(base), dtype=bool)].mean()):.3f}"
    )


async def warm_queries(rt: Runtime, queries: list[str]) -> dict[str, np.ndarray]:
    """Each question embedded once by the real model, into the searcher's cache: its vector."""
    started = time.perf_counter()
    vectors: dict[str, np.ndarray] = {}
    for text in queries:
        key = text.replace("\x00", " ").strip()  # as Searcher.search normalises it
        vectors[text], _ = await rt.searcher.vectors.get(key)
    print(
        f"queries: {len(queries)} embedded once with the real model in "
        f"{time.perf_counter() - started:.1f} s, pre-warmed in the searcher's cache"
    )
    return vectors


async def corpus_facts(pool: AsyncConnectionPool) -> Facts:
    async with pool.connection() as conn:
        cur = await conn.execute(query("collection_for_search"), {"name": COLLECTION})
        row = await cur.fetchone()
        assert row is not None
        collection_id = int(row[0])
        cur = await conn.execute(
            "SELECT count(*), version(), "
            "(SELECT extversion FROM pg_extension WHERE extname = 'vector'), "
            "pg_size_pretty(pg_total_relation_size('chunks')), "
            "current_setting('shared_buffers') FROM chunks"
        )
        rows, version, pgvector, size, shared_buffers = await cur.fetchone() or ()
    return Facts(collection_id, int(rows), str(version), str(pgvector), str(size), shared_buffers)


async def measure_rounds(
    searcher: Searcher, bare: SqlAlone, queries: list[str], rounds: int
) -> Latencies:
    """One warm-up round, then `rounds` measured: every query in every mode through the service
    and as SQL alone (which goes first alternates), and hybrid's equal-weight RRF after it."""
    found = Latencies()
    started = time.perf_counter()
    for round_ in range(rounds + 1):  # round 0 is the warm-up
        for n, text in enumerate(queries):
            for mode in MODES:
                request = SearchRequest(query=text, mode=mode, top_k=TOP_K, threshold=0)
                if (n + round_) % 2:
                    served_ms, response = await timed(searcher.search(COLLECTION, request))
                    alone_ms, rows = await timed(bare.run(mode, text))
                else:
                    alone_ms, rows = await timed(bare.run(mode, text))
                    served_ms, response = await timed(searcher.search(COLLECTION, request))
                if mode == "hybrid":
                    # The previous default, for the fusion's cost: same query, same state.
                    equal_ms, _ = await timed(searcher.search(COLLECTION, equal_rrf(text)))
                    if round_:
                        found.rrf_equal.append(equal_ms)
                if round_ == 0:
                    continue
                found.service[mode].append(served_ms)
                found.alone[mode].append(alone_ms)
                if round_ == 1:
                    found.hits[mode].append(len(response.results))
                    if mode == "hybrid":  # the keyword list hybrid fuses
                        found.keyword_candidates.append(len(rows[0]))
    found.seconds = time.perf_counter() - started
    return found


async def stage_timings(
    searcher: Searcher, queries: list[str]
) -> dict[Mode, dict[str, list[float]]]:
    """Each mode's stage timings (explain=True) per query, in one pass of their own."""
    stages: dict[Mode, dict[str, list[float]]] = {m: {} for m in MODES}
    for text in queries:
        for mode in MODES:
            response = await searcher.search(
                COLLECTION,
                SearchRequest(query=text, mode=mode, top_k=TOP_K, threshold=0, explain=True),
            )
            assert response.explain is not None
            for stage, ms in response.explain.timings_ms.items():
                stages[mode].setdefault(stage, []).append(ms)
    return stages


async def plans(a: Any, bare: SqlAlone, searcher: Searcher, text: str) -> dict[str, list[str]]:
    """`EXPLAIN (ANALYZE, BUFFERS)` of the keyword and vector statements, and of the result
    fetch and relevance evidence of the hybrid top k, for the question `text`."""
    vector = bare.vectors[text]
    asked = await bare.analysed(text, a)
    keyword = await explain(
        a,
        bare.keyword_statement,
        {**bare.params, **asked.params(), "candidates": bare.candidates},
    )
    vector_plan = await explain(
        a, bare.vector_statement, {**bare.params, "vector": vector, "candidates": bare.candidates}
    )
    hybrid = await searcher.search(
        COLLECTION, SearchRequest(query=text, mode="hybrid", top_k=TOP_K, threshold=0)
    )
    ids = [r.chunk_id for r in hybrid.results]
    fetch = await explain(
        a, sql.SQL(query("chunks_for_results")), {"ids": ids, **highlights.params([asked])}
    )
    evidence = await explain(
        a,
        sql.SQL(query("search_evidence")),
        {**bare.params, **asked.params(), "vector": vector, "ids": ids},
    )
    return {"keyword": keyword, "vector": vector_plan, "fetch": fetch, "evidence": evidence}


async def round_trips(a: Any, pool: AsyncConnectionPool) -> tuple[list[float], list[float]]:
    """The floor under any extra statement: `SELECT 1` on a held and on a borrowed connection."""
    held, borrowed = [], []
    for _ in range(200):
        held.append((await timed(a.execute("SELECT 1")))[0])
        borrowed.append((await timed(select_one(pool)))[0])
    return held, borrowed


def print_latencies(
    facts: Facts, settings: Settings, found: Latencies, queries: int, rounds: int
) -> None:
    print()
    print(f"PostgreSQL: {facts.version}")
    print(
        f"pgvector {facts.pgvector}; chunks: {facts.rows:,} rows, {facts.size} with indexes; "
        f"shared_buffers {facts.shared_buffers}"
    )
    print(
        f"{queries} queries x {rounds} round(s) per mode after 1 warm-up round, one at a "
        f"time; top_k {TOP_K}, candidates {settings.search_candidates}, ef_search "
        f"{settings.hnsw_ef_search}; query embedding excluded; measuring took "
        f"{found.seconds:.0f} s"
    )
    empty = sum(1 for c in found.keyword_candidates if c == 0)
    print(
        f"keyword candidates per hybrid query: mean {np.mean(found.keyword_candidates):.1f}, "
        f"{empty} of {len(found.keyword_candidates)} queries match nothing; results per "
        "request: " + ", ".join(f"{m} {np.mean(found.hits[m]):.1f}" for m in MODES)
    )
    print()
    print(
        f"{'mode':<8} {'service p50':>12} {'p95':>7}   {'SQL alone p50':>14} {'p95':>7}   "
        f"{'ratio p50':>10} {'p95':>6}"
    )
    worst = 0.0
    for mode in MODES:
        s50, s95 = percentiles(found.service[mode], (50, 95))
        q50, q95 = percentiles(found.alone[mode], (50, 95))
        worst = max(worst, s50 / q50, s95 / q95)
        print(
            f"{mode:<8} {s50:9.2f} ms {s95:7.2f}   {q50:11.2f} ms {q95:7.2f}   "
            f"{s50 / q50:10.2f} {s95 / q95:6.2f}"
        )
    e50, e95 = percentiles(found.rrf_equal, (50, 95))
    h50, h95 = percentiles(found.service["hybrid"], (50, 95))
    defaults = CollectionCreate(name=COLLECTION)
    print(
        f"hybrid with the defaults ({defaults.fusion}, vector_weight {defaults.vector_weight:g}, "
        f"keyword_weight {defaults.keyword_weight:g}, candidates {settings.search_candidates}, "
        f"ef_search {settings.hnsw_ef_search}) against equal-weight RRF (k 60, "
        f"{EQUAL_RRF_CANDIDATES} candidates, ef_search {EQUAL_RRF_EF_SEARCH}), service p50 / p95: "
        f"{h50:.2f} / {h95:.2f} ms against {e50:.2f} / {e95:.2f} ms, ratio {h50 / e50:.2f} / "
        f"{h95 / e95:.2f}"
    )
    print()
    print(
        f"targets: ratio service/SQL <= 1.3 -> worst {worst:.2f} "
        f"{'MET' if worst <= 1.3 else 'MISSED'}; hybrid p95 <= 25 ms -> "
        f"{h95:.2f} ms {'MET' if h95 <= 25 else 'MISSED'}"
    )


def print_stages(stages: dict[Mode, dict[str, list[float]]]) -> None:
    print()
    print("service stages, p50 / p95 ms (explain=True timings, separate pass):")
    for mode in MODES:
        parts = [
            f"{stage} {np.percentile(v, 50):.2f} / {np.percentile(v, 95):.2f}"
            for stage, v in stages[mode].items()
        ]
        print(f"  {mode:<8} " + "; ".join(parts))


def print_plans(explained: dict[str, list[str]], text: str, ef_search: int) -> None:
    titles = {
        "keyword": f"keyword, query {text!r}",
        "vector": f"vector (ef_search {ef_search}), same query",
        "fetch": f"result fetch of the hybrid top {TOP_K}, same query",
        "evidence": f"relevance evidence of the hybrid top {TOP_K}",
    }
    for name, title in titles.items():
        print()
        print(f"EXPLAIN (ANALYZE, BUFFERS) {title}:")
        print("\n".join(f"  {line}" for line in explained[name]))


async def select_one(pool: AsyncConnectionPool) -> None:
    async with pool.connection() as conn:
        await conn.execute("SELECT 1")


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(run(args.chunks, args.queries, args.rounds))


if __name__ == "__main__":
    main()
