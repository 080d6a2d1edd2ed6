"""What highlights and synonym rules add per search, at 10k chunks, against same-run baselines.

    python -m bench.highlights [--chunks 10000] [--queries 100] [--rounds 3] [--rules 200]

Corpus, queries and settings as `bench.search` (synthesised rows of real passages, language
`simple`, real questions of the five sets), at 10k chunks by default. Two figures:

- **Highlights**: for each question, its result page (the service's hybrid top 10, threshold
  0) is fetched with `chunks_for_results` (text, provenance and each chunk's `ts_headline`)
  and with the same fetch without highlights (`BARE_FETCH`, the statement before them), one
  after the other on one connection in autocommit, which goes first alternating. The
  difference is what highlights add to a search; it is printed beside the mean time of the
  whole hybrid search through the service (`Searcher.search`, query vectors cached), which
  includes them.
- **Synonyms**: the service's keyword statement on the database's engine (`search_keyword`,
  or with the extension `search_keyword_blocks` on the blocks the load's fold packed; the
  service's candidates) for every question, with the collection holding no rule, then holding
  `--rules` equivalence rules built from the questions' own words (each word with a word of the
  corpus: most questions fire several), alternating round by round; and, on the SQL engine
  only (it reads postings rows), the keyword statement before synonyms (`KEYWORD_BEFORE`,
  `query_terms` and one sum per chunk) beside it on every question (which goes first
  alternating), the baseline for what the expansion costs a collection with no rule.
"""

from __future__ import annotations

import asyncio
import random
import re
import statistics
import time
from typing import Any

from bench import harness
from bench.harness import fetch_ms, fresh_runtime, summary_ms, timed
from bench.search import (
    COLLECTION,
    TOP_K,
    Passage,
    build_corpus,
    load_queries,
)
from cari import synonyms
from cari.db.queries import query
from cari.runtime import Runtime
from cari.schema.collections import Synonyms
from cari.schema.search import SearchRequest
from cari.search import bm25, highlights, lexemes
from cari.settings import load_settings

DATABASE = "cari_bench_highlights"
BARE_FETCH = """
SELECT c.id, d.external_id AS document_id, c.title, c.content, c.metadata, c.ordinal
FROM chunks AS c
JOIN documents AS d ON d.id = c.document_id
WHERE c.id = ANY(%(ids)s)
"""
# sql/search_keyword.sql before synonyms (no filters): the query's lexemes by `query_terms`.
KEYWORD_BEFORE = """
WITH params AS (
    SELECT c.bm25_k1 AS k1, c.bm25_b AS b, c.bm25_k3 AS k3, c.title_boost AS boost, c.language
    FROM collections AS c WHERE c.id = %(collection_id)s
), sizes AS (
    SELECT s.language, sum(s.chunks) AS chunks,
           sum(s.length_title * p.boost + s.length_body) AS length
    FROM (
        SELECT language, chunks, length_title, length_body
        FROM bm25_sizes WHERE collection_id = %(collection_id)s
        UNION ALL
        SELECT language, chunks, length_title, length_body
        FROM bm25_pending_sizes WHERE collection_id = %(collection_id)s
    ) AS s, params AS p
    GROUP BY s.language
), totals AS (
    SELECT sum(chunks) AS n, sum(length) / nullif(sum(chunks), 0) AS avglen FROM sizes
), words AS (
    SELECT w.lexeme, max(w.qtf) AS qtf
    FROM (SELECT language FROM sizes WHERE chunks > 0 UNION SELECT language FROM params) AS l,
         query_terms(l.language, %(query)s) AS w
    GROUP BY w.lexeme
), terms AS (
    SELECT w.lexeme, d.df,
           ln(1 + (t.n - d.df + 0.5) / (d.df + 0.5)) * bm25_query_weight(w.qtf, p.k3) AS weight
    FROM words AS w CROSS JOIN totals AS t CROSS JOIN params AS p
    CROSS JOIN LATERAL (
        SELECT sum(df) AS df FROM (
            SELECT df FROM bm25_terms
            WHERE collection_id = %(collection_id)s AND lexeme = w.lexeme
            UNION ALL
            SELECT df FROM bm25_pending_terms
            WHERE collection_id = %(collection_id)s AND lexeme = w.lexeme
        ) AS s
    ) AS d
    WHERE d.df > 0
), scored AS (
    SELECT heads.chunk_id, sum(heads.part) AS score
    FROM (
        SELECT h.chunk_id,
               t.weight * bm25_tf(h.tf_title * p.boost + h.tf_body,
                               h.len_title * p.boost + h.len_body, a.avglen, p.k1, p.b) AS part
        FROM terms AS t CROSS JOIN params AS p CROSS JOIN totals AS a
        CROSS JOIN LATERAL (
            SELECT o.chunk_id, o.tf_title, o.tf_body, o.len_title, o.len_body
            FROM postings AS o
            WHERE o.collection_id = %(collection_id)s AND o.lexeme = t.lexeme
        ) AS h
    ) AS heads
    GROUP BY heads.chunk_id
)
SELECT chunk_id, score, (SELECT sum(df) FROM terms) AS postings_read
FROM scored WHERE score > 0
ORDER BY score DESC, chunk_id
LIMIT %(candidates)s
"""
WORD = re.compile(r"[a-z]{5,}")


async def run(chunks: int, query_count: int, rounds: int, rule_count: int) -> None:
    settings = load_settings(reembed_interval_s=0, statement_timeout_ms=0, embedder="local")
    async with fresh_runtime(DATABASE, settings) as rt:
        passages = await build_corpus(rt, chunks)
        queries = load_queries(query_count)
        for text in queries:
            await rt.searcher.vectors.get(text.strip())
        async with rt.pool.connection() as conn:
            cur = await conn.execute("SELECT id FROM collections WHERE name = %s", (COLLECTION,))
            collection_id = int((await cur.fetchone() or (0,))[0])
        await measure_highlights(rt, queries, collection_id, rounds)
        await measure_synonyms(rt, passages, queries, collection_id, rounds, rule_count)


async def measure_highlights(
    rt: Runtime, queries: list[str], collection_id: int, rounds: int
) -> None:
    """The same result pages fetched with and without highlights, against the search."""
    pages: dict[str, list[int]] = {}
    service: list[float] = []
    with_: list[float] = []
    bare: list[float] = []
    for round_ in range(rounds + 1):  # round 0 warms up
        for n, text in enumerate(queries):
            request = SearchRequest(query=text, mode="hybrid", top_k=TOP_K, threshold=0)
            served, response = await timed(rt.searcher.search(COLLECTION, request))
            pages[text] = [r.chunk_id for r in response.results if r.chunk_id is not None]
            async with rt.pool.connection() as conn:
                await conn.set_autocommit(True)
                asked = await lexemes.analyse(conn, collection_id, text)
                params = {"ids": pages[text], **highlights.params([asked])}
                if (n + round_) % 2:
                    lit = await fetch_ms(conn, query("chunks_for_results"), params)
                    plain = await fetch_ms(conn, BARE_FETCH, params)
                else:
                    plain = await fetch_ms(conn, BARE_FETCH, params)
                    lit = await fetch_ms(conn, query("chunks_for_results"), params)
            if round_:
                service.append(served)
                with_.append(lit)
                bare.append(plain)
    sizes = [len(ids) for ids in pages.values()]
    added = [w - b for w, b in zip(with_, bare, strict=True)]
    print(
        f"\nhighlights: {len(queries)} questions x {rounds} rounds, pages of "
        f"{statistics.fmean(sizes):.1f} chunks"
    )
    print(f"  fetch without highlights  {summary_ms(bare)}")
    print(f"  fetch with highlights     {summary_ms(with_)}")
    print(f"  added per search          {summary_ms(added)}")
    print(
        f"  hybrid search (service)   {summary_ms(service)}; highlights "
        f"{statistics.fmean(added) / statistics.fmean(service):.1%} of it"
    )


async def searched_ms(conn: Any, keyword: Any, base: dict[str, Any], text: str) -> float:
    """Milliseconds of a keyword search as the service runs it: the question's lexemes (where
    synonym rules fire), then the statement."""
    started = time.perf_counter()
    asked = await lexemes.analyse(conn, base["collection_id"], text)
    await (await conn.execute(keyword, {**base, **asked.params()})).fetchall()
    return harness.since_ms(started)


def synonym_rules(passages: list[Passage], queries: list[str], count: int) -> list[str]:
    """`count` rules, each a word of the questions and a random word of the passages."""
    rng = random.Random(0)
    words = sorted({w for text in queries for w in WORD.findall(text.lower())})
    corpus = sorted({w for p in passages[:2000] for w in WORD.findall(p.text.lower())})
    rng.shuffle(words)
    return [f"{w}, {rng.choice([c for c in corpus if c != w])}" for w in words[:count]]


async def measure_synonyms(
    rt: Runtime,
    passages: list[Passage],
    queries: list[str],
    collection_id: int,
    rounds: int,
    rule_count: int,
) -> None:
    """Keyword search with no rule, with rules, and the statement before them."""
    rules = synonym_rules(passages, queries, rule_count)
    # The service's keyword statement on the database's engine. KEYWORD_BEFORE reads the
    # postings rows only, so it is the baseline on the SQL engine alone (with the extension
    # the load's fold packed them into blocks).
    engine = (await rt.keyword_engine.current()).name
    keyword = bm25.keyword_statement(engine)
    base: dict[str, Any] = {
        "collection_id": collection_id,
        "candidates": rt.settings.search_candidates,
    }
    times: dict[str, list[float]] = {"no rule": [], "rules": []}
    if engine == "sql":
        times["before"] = []
    fired: list[int] = []
    for round_ in range(2 * rounds + 1):
        state = "rules" if round_ % 2 else "no rule"
        async with rt.pool.connection() as conn:
            await conn.set_autocommit(True)
            wanted = Synonyms(rules=rules if state == "rules" else [])
            await synonyms.replace(conn, COLLECTION, wanted)
            for n, text in enumerate(queries):
                params = {**base, "query": text}
                before = 0.0
                if (n + round_) % 2:  # which goes first alternates
                    after = await searched_ms(conn, keyword, base, text)
                    if "before" in times:
                        before = await fetch_ms(conn, KEYWORD_BEFORE, params)
                else:
                    if "before" in times:
                        before = await fetch_ms(conn, KEYWORD_BEFORE, params)
                    after = await searched_ms(conn, keyword, base, text)
                if round_ >= 1:
                    times[state].append(after)
                    if state == "no rule" and "before" in times:
                        times["before"].append(before)
                if round_ == 1:
                    fired.append(len(await synonyms.fired(conn, collection_id, text)))
    print(
        f"\nsynonyms: keyword search (engine {engine}), {rt.settings.search_candidates} "
        "candidates, "
        f"{len(rules)} rules; rules fired per question: mean {statistics.fmean(fired):.1f}, "
        f"{sum(1 for f in fired if f) / len(fired):.0%} of questions fire one or more"
    )
    for state, values in times.items():
        print(f"  {state:8s} {summary_ms(values)}")
    mean = {state: statistics.fmean(values) for state, values in times.items()}
    against_before = (
        f"no rule / before: {mean['no rule'] / mean['before']:.3f}; "
        if "before" in mean
        else "before: measured on the SQL engine only; "
    )
    print(f"  {against_before}rules / no rule: {mean['rules'] / mean['no rule']:.3f}")


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rules", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(run(args.chunks, args.queries, args.rounds, args.rules))


if __name__ == "__main__":
    main()
