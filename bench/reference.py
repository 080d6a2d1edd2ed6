"""A reference Okapi BM25 to check Cari's in-database scores against, in the same run.

Cari scores keywords with BM25 inside PostgreSQL. To show those scores are right, the benchmarks
run the `bm25s` library (its "lucene" variant) on exactly the tokens PostgreSQL produces
(`analyzed_tokens`), so any difference is in the scoring, not in the analysis; and, as a second
reference, on bm25s's own tokenizer with a Snowball stemmer (`native_tokens`), to show what a
stock library setup would retrieve.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import bm25s
import numpy as np
import psycopg
import Stemmer

_BATCH = 500

# Each text's lexemes with their number of positions. PostgreSQL keeps at most 256 positions
# per lexeme and clamps positions past 16383, so that count is the term frequency Cari sees too.
_ANALYZE = """
SELECT d.ord, l.lexeme, cardinality(l.positions)
FROM unnest(%s::text[]) WITH ORDINALITY AS d(body, ord),
     unnest(to_tsvector(%s::regconfig, d.body)) AS l
"""

# bm25s's default English list (Lucene's 33 words); bm25s 0.3.16 has none for Indonesian.
_STOPWORDS: dict[str, Sequence[str]] = {
    "english": bm25s.stopwords.STOPWORDS_EN,
    "indonesian": (),
}


def analyzed_tokens(
    conn: psycopg.Connection[Any], language: str, texts: Sequence[str]
) -> list[list[str]]:
    """The tokens of each text as PostgreSQL's `to_tsvector(language, text)` analyzes them, each
    lexeme repeated once per position (order is lost; BM25 needs only the counts).

    NUL, which PostgreSQL text cannot hold, is read as a space. Texts go 500 to a query."""
    return _per_text(conn, _ANALYZE, language, texts)


# Each text's lexemes as Cari's keyword search weighs them, with their count in the text.
QUERY_TERMS = """
SELECT d.ord, l.lexeme, l.qtf
FROM unnest(%s::text[]) WITH ORDINALITY AS d(body, ord),
     query_terms(%s::regconfig, d.body) AS l
"""


def query_terms(
    conn: psycopg.Connection[Any], language: str, texts: Sequence[str]
) -> list[list[str]]:
    """Each query's lexemes as Cari's keyword search weighs them, each once per occurrence:
    analysed by `language`, less that configuration's query stop words (`query_terms` in
    PostgreSQL)."""
    return _per_text(conn, QUERY_TERMS, language, texts)


def _per_text(
    conn: psycopg.Connection[Any], statement: str, language: str, texts: Sequence[str]
) -> list[list[str]]:
    """`statement`'s (ordinal, lexeme, count) rows gathered per text, 500 texts to a query."""
    tokens: list[list[str]] = [[] for _ in texts]
    for start in range(0, len(texts), _BATCH):
        batch = [text.replace("\x00", " ") for text in texts[start : start + _BATCH]]
        for ordinal, lexeme, count in conn.execute(statement, (batch, language)):
            tokens[start + ordinal - 1].extend([lexeme] * count)
    return tokens


def native_tokens(language: str, texts: Sequence[str]) -> list[list[str]]:
    """The tokens of each text by bm25s's own tokenizer: lowercased words of two or more word
    characters, bm25s's stopwords for `language` (none for Indonesian), PyStemmer's Snowball
    stemmer. `language` is 'english' or 'indonesian'."""
    if language not in _STOPWORDS:
        raise ValueError(f"no native analyzer for {language!r}: use 'english' or 'indonesian'")
    tokens: list[list[str]] = bm25s.tokenize(
        list(texts),
        stopwords=list(_STOPWORDS[language]),
        stemmer=Stemmer.Stemmer(language),
        return_ids=False,
        show_progress=False,
    )
    return tokens


class ReferenceBM25:
    """Okapi BM25 over a pre-tokenized corpus, by bm25s's "lucene" method:

        score(d, q) = Σ_t idf(t) · tf·(k1+1) / (tf + k1·(1 - b + b·|d|/avgdl))
        idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))

    bm25s (checked on 0.3.16) leaves out the constant factor (k1+1), which does not change the
    ranking; `search` puts it back so its scores are on the same scale as Cari's. avgdl counts
    every document, empty ones included. Scores are computed in float64."""

    def __init__(self, corpus: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75):
        self._scale = k1 + 1
        self._documents = len(corpus)
        self._bm25 = bm25s.BM25(method="lucene", k1=k1, b=b, dtype="float64")
        # No "" token: bm25s adds it past the end of its score matrix, and scoring it raises.
        docs = [list(doc) for doc in corpus]
        self._bm25.index(docs, create_empty_token=False, show_progress=False)

    def search(
        self, query_tokens: Sequence[str], k: int, k3: float | None = None
    ) -> list[tuple[int, float]]:
        """The `k` best (corpus index, score) pairs, best first (ties by index), only documents
        that match at least one query token.

        Tokens not in the corpus vocabulary are dropped by bm25s's lookup. A token given n times
        counts n times (bm25s adds a term's column once per occurrence in the query), or, with
        `k3`, n·(k3+1)/(k3+n) times (Okapi's query-term saturation, as Cari weighs it)."""
        if k3 is None:
            ids = self._bm25.get_tokens_ids(list(query_tokens))
            scores = self._bm25.get_scores_from_ids(ids) * self._scale
        else:
            scores = np.zeros(self._documents)
            for token, n in Counter(query_tokens).items():
                if ids := self._bm25.get_tokens_ids([token]):
                    weight = n * (k3 + 1) / (k3 + n)
                    scores += self._bm25.get_scores_from_ids(ids) * self._scale * weight
        hits = np.flatnonzero(scores > 0)
        best = hits[np.lexsort((hits, -scores[hits]))][:k]
        return [(int(i), float(scores[i])) for i in best]
