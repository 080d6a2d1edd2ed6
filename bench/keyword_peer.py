"""The bm25s peer of `bench.keyword --peer`: the same corpus and queries, in memory, one thread.

The peer is the `bm25s` library (0.3.16, its "lucene" BM25) with its numba backend, queried one
query at a time with `retrieve(..., n_threads=1)` (`NUMBA_NUM_THREADS=1` too), float32 (its
default dtype), k = 40 as Cari's candidates.

Same tokens: the corpus is `zipf`, whose words analyse to themselves in PostgreSQL (`simple`
keeps every word; `english` drops its 127 stop words and leaves the pseudo-words intact, which
the generator checks with the same Snowball stemmer), so each chunk's lexemes are computed here
without the database; a title counts `title_boost` times (3: the collection's default), as
Cari's `tf_title * boost + tf_body` does. The queries' lexemes are PostgreSQL's (`query_terms`,
as `bench.reference.query_terms` gets them).

The index is built here in numpy (score per (chunk, lexeme) = idf · tf·(k1+1) / (tf + k1·(1 - b
+ b·len/avglen)), in bm25s's CSC layout, lexeme-major) and handed to a `bm25s.BM25`; building
it through `BM25.index` would take the same arrays, much longer, at 1M chunks. The (k1+1)
factor, which bm25s leaves out, is kept so scores are on Cari's scale (the ranking is the same).

Comparison: bm25s's top 10 ids against Cari's (up to ties), and exact float64 scores computed
from the same matrix with Cari's query-term weight (k3) against Cari's scores (within 1e-9).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from bench.harness import ENGLISH_STOP_WORDS, load_average
from bench.reference import QUERY_TERMS

K1 = 1.2
B = 0.75
BOOST = 3  # collections.title_boost's default
K3 = 1000.0  # collections.bm25_k3's default
K = 40
TOP = 10
BATCH = 20_000

AConn = psycopg.AsyncConnection[Any]
Top = list[tuple[int, float]]


class Peer:
    """bm25s over the corpus's lexemes."""

    def __init__(self, titles: Sequence[str], rows: Sequence[Any], stop: set[str]) -> None:
        import bm25s

        started = time.perf_counter()
        vocab: dict[str, int] = {}

        def ids(text: str) -> list[int]:
            return [vocab.setdefault(w, len(vocab)) for w in text.split() if w not in stop]

        title_ids = [np.array(ids(t), dtype=np.int64) for t in titles]
        docs, terms, tfs = [], [], []
        for start in range(0, len(rows), BATCH):
            batch = rows[start : start + BATCH]
            d_parts, t_parts, w_parts = [], [], []
            for n, row in enumerate(batch):
                body = np.array(ids(row.content), dtype=np.int64)
                title = title_ids[row.document]
                d_parts.append(np.full(len(body) + len(title), n, dtype=np.int64))
                t_parts.append(np.concatenate([body, title]))
                w_parts.append(
                    np.concatenate([np.ones(len(body)), np.full(len(title), float(BOOST))])
                )
            keys = np.concatenate(d_parts) * (1 << 32) + np.concatenate(t_parts)
            unique, inverse = np.unique(keys, return_inverse=True)
            tf = np.bincount(inverse, weights=np.concatenate(w_parts))
            docs.append((unique >> 32).astype(np.int32) + start)
            terms.append((unique & 0xFFFFFFFF).astype(np.int32))
            tfs.append(tf.astype(np.float32))
        doc = np.concatenate(docs)
        term = np.concatenate(terms)
        tf64 = np.concatenate(tfs).astype(np.float64)
        del docs, terms, tfs
        n_docs, n_vocab = len(rows), len(vocab)
        length = np.bincount(doc, weights=tf64, minlength=n_docs)
        avglen = length.mean()
        df = np.bincount(term, minlength=n_vocab).astype(np.float64)
        idf = np.log(1 + (n_docs - df + 0.5) / (df + 0.5))
        score = idf[term] * tf64 * (K1 + 1) / (tf64 + K1 * (1 - B + B * length[doc] / avglen))
        order = np.argsort(term, kind="stable")  # lexeme-major, chunks ascending in each
        self.data64 = score[order]
        indices = doc[order]
        indptr = np.concatenate([[0], np.cumsum(df.astype(np.int64))])
        del score, doc, term, tf64, order

        self.bm25 = bm25s.BM25(method="lucene", k1=K1, b=B, backend="numba")
        self.bm25.scores = {
            "data": self.data64.astype(np.float32),
            "indices": indices,
            "indptr": indptr,
            "num_docs": n_docs,
        }
        self.bm25.vocab_dict = vocab
        self.bm25.unique_token_ids_set = set(vocab.values())
        self.bm25.nonoccurrence_array = None
        self.vocab = vocab
        self.postings = len(indices)
        self.build_seconds = time.perf_counter() - started

    def ids(self, lexemes: Sequence[str]) -> list[int]:
        return [self.vocab[x] for x in lexemes if x in self.vocab]

    def retrieve(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """bm25s's own query: each token once per occurrence in the query."""
        found = self.bm25.retrieve([ids], k=K, n_threads=1, show_progress=False)
        return found.documents[0], found.scores[0]

    def exact(self, lexemes: Sequence[str]) -> Top:
        """Float64 scores with Cari's query-term weight, the best TOP (ties by chunk)."""
        scores = np.zeros(self.bm25.scores["num_docs"])
        indptr, indices = self.bm25.scores["indptr"], self.bm25.scores["indices"]
        for lexeme, n in Counter(lexemes).items():
            if (t := self.vocab.get(lexeme)) is not None:
                weight = n * (K3 + 1) / (K3 + n)
                span = slice(indptr[t], indptr[t + 1])
                scores[indices[span]] += self.data64[span] * weight
        hits = np.flatnonzero(scores > 0)
        best = hits[np.lexsort((hits, -scores[hits]))][:TOP]
        return [(int(i), float(scores[i])) for i in best]


async def query_lexemes(conn: AConn, language: str, texts: Sequence[str]) -> list[list[str]]:
    """Each query's lexemes as Cari weighs them, once per occurrence."""
    out: list[list[str]] = [[] for _ in texts]
    cur = await conn.execute(QUERY_TERMS, (list(texts), language))
    for ordinal, lexeme, count in await cur.fetchall():
        out[ordinal - 1].extend([lexeme] * int(count))
    return out


def _same(a: Top, b: Top, tolerance: float) -> bool:
    if len(a) != len(b):
        return False
    if any(abs(x - y) > tolerance * max(1.0, abs(x)) for (_, x), (_, y) in zip(a, b, strict=True)):
        return False
    if not a:
        return True
    last = min(a[-1][1], b[-1][1]) * (1 + tolerance)
    return {i for i, s in a if s > last} == {i for i, s in b if s > last}


async def compare(
    conn: AConn,
    corpus: Any,
    language: str,
    cari: dict[str, tuple[list[str], list[Top], list[float]]],
) -> list[str]:
    """Build the peer, time it on each kind's queries, compare its top 10 with Cari's (`cari`:
    kind -> queries, Cari's top TOP per query, Cari's ms per query, measured before)."""
    if corpus.name != "zipf":
        return ["bm25s peer: only on zipf (its lexemes are computed without the database)"]
    numba_threads = os.environ.get("NUMBA_NUM_THREADS", "unset")
    cur = await conn.execute("SELECT id FROM chunks ORDER BY id")
    chunk_ids = np.array([int(r[0]) for r in await cur.fetchall()], dtype=np.int64)
    peer = Peer(
        corpus.documents, corpus.rows, set(ENGLISH_STOP_WORDS) if language == "english" else set()
    )
    out = [
        "",
        f"-- bm25s peer (bm25s numba backend, float32, k={K}, n_threads=1, NUMBA_NUM_THREADS="
        f"{numba_threads}): index of {peer.postings:,} postings built in numpy in "
        f"{peer.build_seconds:.0f} s; one query at a time after 1 warm-up pass",
        f"  {'kind':<8} {'bm25s p50':>9} {'p95':>8} {'p99':>8}   {'cari p50':>9} {'p95':>8} "
        f"{'p99':>8}   {'p50 x':>6} {'p95 x':>6}   top10 ids (float32)   exact scores (1e-9)",
    ]
    for kind, (texts, tops, cari_ms) in cari.items():
        lexemes = await query_lexemes(conn, language, texts)
        ids = [peer.ids(x) for x in lexemes]
        asked = [n for n, i in enumerate(ids) if i]
        for n in asked:  # warm-up (compiles the numba functions the first time)
            peer.retrieve(ids[n])
        latency, same_ids, same_scores = [], 0, 0
        for n in asked:
            started = time.perf_counter()
            documents, scores = peer.retrieve(ids[n])
            latency.append((time.perf_counter() - started) * 1000)
            mine = [(int(chunk_ids[d]), float(s)) for d, s in zip(documents, scores, strict=True)]
            mine = [(d, s) for d, s in mine if s > 0][:TOP]
            same_ids += _same(mine, tops[n], 1e-5)
            exact = [(int(chunk_ids[d]), s) for d, s in peer.exact(lexemes[n])]
            same_scores += _same(exact, tops[n], 1e-9)
        p = np.percentile(latency, [50, 95, 99])
        c = np.percentile([cari_ms[n] for n in asked], [50, 95, 99])
        out.append(
            f"  {kind:<8} {p[0]:9.2f} {p[1]:8.2f} {p[2]:8.2f}   {c[0]:9.2f} {c[1]:8.2f} "
            f"{c[2]:8.2f}   {c[0] / p[0]:6.2f} {c[1] / p[1]:6.2f}   {same_ids:>4} of {len(asked)}"
            f"          {same_scores:>4} of {len(asked)}"
            f"   ({len(texts) - len(asked)} without a known lexeme left out)"
        )
    out.append(f"  load after the peer: {load_average()}")
    return out
