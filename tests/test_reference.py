"""The reference BM25 the benchmarks compare Cari with: PostgreSQL's analysis on a real server,
bm25s's scores against the textbook formula computed by hand, and bm25s's own analyzer."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import pytest
from bench.reference import ReferenceBM25, analyzed_tokens, native_tokens, query_terms

CORPUS = [
    ["cat", "sat", "mat"],
    ["cat", "cat", "cat", "dog"],
    ["dog", "bark", "loud", "loud", "night", "long", "walk"],
    ["bird", "sing"],
    [],
    ["cat", "dog", "bird", "fish", "mat", "mat"],
]


@pytest.fixture(scope="module")
def conn(module_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(module_dsn, autocommit=True) as connection:
        yield connection


def hand_bm25(
    corpus: Sequence[Sequence[str]], query: set[str], k1: float, b: float
) -> dict[int, float]:
    """Okapi BM25 with Lucene's idf, term by term, for every document matching the query."""
    avglen = sum(map(len, corpus)) / len(corpus)
    df = Counter(term for doc in corpus for term in set(doc))
    scores = {}
    for i, doc in enumerate(corpus):
        tf = Counter(doc)
        if matched := query & tf.keys():
            norm = k1 * (1 - b + b * len(doc) / avglen)
            scores[i] = sum(
                math.log(1 + (len(corpus) - df[t] + 0.5) / (df[t] + 0.5))
                * tf[t]
                * (k1 + 1)
                / (tf[t] + norm)
                for t in matched
            )
    return scores


# -- PostgreSQL's analysis ------------------------------------------------------------------------


def test_english_is_stemmed_without_stopwords(conn: psycopg.Connection[Any]) -> None:
    [tokens] = analyzed_tokens(conn, "english", ["The cats were running"])
    assert sorted(tokens) == ["cat", "run"]


def test_lexeme_repeats_once_per_position(conn: psycopg.Connection[Any]) -> None:
    [tokens] = analyzed_tokens(conn, "english", ["cats chase cats; a cat"])
    assert Counter(tokens) == {"cat": 3, "chase": 1}


def test_indonesian_is_stemmed(conn: psycopg.Connection[Any]) -> None:
    [tokens] = analyzed_tokens(conn, "indonesian", ["pembelian mobil"])
    assert "beli" in tokens


def test_empty_text_and_nul(conn: psycopg.Connection[Any]) -> None:
    tokens = analyzed_tokens(conn, "english", ["", "cats\x00dogs", "the"])
    assert [sorted(t) for t in tokens] == [[], ["cat", "dog"], []]


def test_batches_keep_each_text_in_its_place(conn: psycopg.Connection[Any]) -> None:
    texts = [f"w{i} shared" for i in range(1203)]
    tokens = analyzed_tokens(conn, "simple", texts)
    assert [sorted(t) for t in tokens] == [sorted([f"w{i}", "shared"]) for i in range(1203)]


# -- scores -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("k1", "b"), [(1.2, 0.75), (0.9, 0.4), (2.0, 1.0)])
@pytest.mark.parametrize(
    "query", [["cat"], ["cat", "dog"], ["mat", "bird", "loud"], ["fish", "walk", "cat", "dog"]]
)
def test_scores_equal_the_formula(k1: float, b: float, query: list[str]) -> None:
    expected = hand_bm25(CORPUS, set(query), k1, b)
    results = ReferenceBM25(CORPUS, k1=k1, b=b).search(query, k=len(CORPUS))
    assert dict(results).keys() == expected.keys()
    for i, score in results:
        assert score == pytest.approx(expected[i], rel=1e-5)
    assert [score for _, score in results] == pytest.approx(
        sorted(expected.values(), reverse=True), rel=1e-5
    )


def test_default_parameters_are_lucene_defaults() -> None:
    [(_, score)] = ReferenceBM25(CORPUS).search(["sing"], k=10)
    assert score == pytest.approx(hand_bm25(CORPUS, {"sing"}, 1.2, 0.75)[3], rel=1e-5)


def test_unknown_tokens_are_ignored() -> None:
    bm25 = ReferenceBM25(CORPUS)
    assert bm25.search(["cat", "unicorn", ""], k=10) == bm25.search(["cat"], k=10)
    assert bm25.search(["unicorn"], k=10) == []
    assert bm25.search([], k=10) == []


def test_k_is_honoured() -> None:
    bm25 = ReferenceBM25(CORPUS)
    everything = bm25.search(["cat", "dog"], k=len(CORPUS))
    assert len(everything) == 4
    assert bm25.search(["cat", "dog"], k=2) == everything[:2]


def test_a_repeated_query_token_counts_twice() -> None:
    bm25 = ReferenceBM25(CORPUS)
    once = bm25.search(["cat"], k=10)
    twice = bm25.search(["cat", "cat"], k=10)
    assert [i for i, _ in twice] == [i for i, _ in once]
    assert [s for _, s in twice] == pytest.approx([2 * s for _, s in once], rel=1e-9)


def test_k3_saturates_a_repeated_query_token() -> None:
    bm25 = ReferenceBM25(CORPUS)
    once = bm25.search(["cat", "dog"], k=10)
    # k3 0: each token once, however often given; k3 2: a token given twice weighs 2·3/4.
    counted_once = bm25.search(["cat", "cat", "dog"], k=10, k3=0)
    assert [i for i, _ in counted_once] == [i for i, _ in once]
    assert [s for _, s in counted_once] == pytest.approx([s for _, s in once], rel=1e-9)
    cat = dict(bm25.search(["cat"], k=10))
    dog = dict(bm25.search(["dog"], k=10))
    saturated = dict(bm25.search(["cat", "cat", "dog"], k=10, k3=2))
    for i, score in saturated.items():
        assert score == pytest.approx(1.5 * cat.get(i, 0) + dog.get(i, 0), rel=1e-9)


# -- bm25s's own analyzer -----------------------------------------------------------------------


def test_native_english_drops_stopwords_and_stems() -> None:
    # bm25s's short English list has "the" but not "were"
    assert native_tokens("english", ["The cats were running", ""]) == [["cat", "were", "run"], []]


def test_native_indonesian_stems() -> None:
    assert native_tokens("indonesian", ["Pembelian mobil"]) == [["beli", "mobil"]]


def test_native_other_language_is_refused() -> None:
    with pytest.raises(ValueError, match="german"):
        native_tokens("german", ["Katzen"])


def test_query_terms_count_repeats_and_drop_stop_words(conn: psycopg.Connection[Any]) -> None:
    texts = ["Berapakah harga mobil, mobil baru?", "siapa", "The cats"]
    assert [sorted(t) for t in query_terms(conn, "indonesian", texts)] == [
        ["baru", "harga", "mobil", "mobil"],
        [],
        ["cats", "the"],  # English words, analysed as Indonesian: kept
    ]
