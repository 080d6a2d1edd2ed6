"""Fusion methods on hand-made lists: the arithmetic, ties, missing chunks and edge cases."""

from __future__ import annotations

import random
from typing import Any

import pytest

from cari.limits import Method
from cari.search.fusion import (
    SHORT_KEYWORD_N0,
    STRONG_KEYWORD_S0,
    Candidate,
    fuse,
    min_max,
    weighed,
    z_score,
)


def lists() -> dict[str, list[Candidate]]:
    return {
        "keyword": [Candidate(1, 12.0), Candidate(2, 6.0), Candidate(3, 3.0)],
        "vector": [Candidate(3, 0.9), Candidate(4, 0.8), Candidate(1, 0.5)],
    }


def test_rrf_sums_weighted_reciprocal_ranks() -> None:
    fused = fuse(lists(), {"keyword": 2.0, "vector": 1.0}, "rrf", 10)
    scores = {f.chunk_id: f.score for f in fused}
    assert scores[1] == pytest.approx(2 / 11 + 1 / 13)
    assert scores[3] == pytest.approx(2 / 13 + 1 / 11)
    assert scores[4] == pytest.approx(1 / 12)
    assert [f.chunk_id for f in fused] == [1, 3, 2, 4]
    assert fused[0].ranks == {"keyword": (1, 12.0), "vector": (3, 0.5)}


def test_min_max_maps_the_list_onto_zero_to_one() -> None:
    values, missing = min_max([12.0, 6.0, 3.0])
    assert values == pytest.approx([1.0, 1 / 3, 0.0]) and missing == 0.0
    assert min_max([5.0, 5.0]) == ([1.0, 1.0], 0.0)
    assert min_max([]) == ([], 0.0)


def test_z_score_keeps_an_outlier_lead_and_the_missing_rank_last() -> None:
    # Mean 2, population standard deviation 1.
    assert z_score([3.0, 1.0]) == ([1.0, -1.0], -1.0)
    values, missing = z_score([100.0] + [1.0] * 20)
    assert values[0] == pytest.approx(20**0.5)  # 4.5 deviations above the mean, not capped
    assert missing == min(values) == values[1]
    assert z_score([7.0]) == ([1.0], 0.0)
    assert z_score([2.0, 2.0]) == ([1.0, 1.0], 0.0)


@pytest.mark.parametrize(("method", "normalise"), [("minmax", min_max), ("zscore", z_score)])
def test_convex_is_the_weighted_mean_of_normalised_scores(method: Method, normalise: Any) -> None:
    fused = fuse(lists(), {"keyword": 3.0, "vector": 1.0}, method, 60)
    keyword_values, keyword_missing = normalise([12.0, 6.0, 3.0])
    vector_values, vector_missing = normalise([0.9, 0.8, 0.5])
    keyword = dict(zip([1, 2, 3], keyword_values, strict=True))
    vector = dict(zip([3, 4, 1], vector_values, strict=True))
    expected = {
        chunk: 0.75 * keyword.get(chunk, keyword_missing) + 0.25 * vector.get(chunk, vector_missing)
        for chunk in (1, 2, 3, 4)
    }
    assert {f.chunk_id: f.score for f in fused} == pytest.approx(expected)
    assert [f.score for f in fused] == sorted(expected.values(), reverse=True)


def test_convex_scale_does_not_depend_on_raw_score_units() -> None:
    scaled = {
        "keyword": [Candidate(c.chunk_id, c.score * 1000) for c in lists()["keyword"]],
        "vector": lists()["vector"],
    }
    weights = {"keyword": 1.0, "vector": 1.0}
    for method in ("minmax", "zscore"):
        before = [(f.chunk_id, round(f.score, 12)) for f in fuse(lists(), weights, method, 60)]
        after = [(f.chunk_id, round(f.score, 12)) for f in fuse(scaled, weights, method, 60)]
        assert before == after


def test_one_list_keeps_its_order_and_zero_weights_fall_back_to_ranks() -> None:
    only = {"keyword": lists()["keyword"]}
    for method in ("rrf", "minmax", "zscore"):
        assert [f.chunk_id for f in fuse(only, {"keyword": 1.0}, method, 60)] == [1, 2, 3]
        # No weight at all: every score is 0, and the best rank decides.
        tied = fuse(lists(), {}, method, 60)
        assert [f.chunk_id for f in tied] == [1, 3, 2, 4]
    assert fuse({}, {"keyword": 1.0}, "zscore", 60) == []


def test_z_score_of_scores_too_close_to_square_is_a_tie() -> None:
    """Differences whose squares underflow to 0 normalise as equal scores do, not by 0."""
    assert z_score([1e-170, 2e-170]) == ([1.0, 1.0], 0.0)
    assert z_score([0.1, 0.1, 0.1]) == ([1.0, 1.0, 1.0], 0.0)


@pytest.mark.parametrize("method", ["rrf", "minmax", "zscore"])
def test_the_head_is_the_full_order_cut(method: Method) -> None:
    """`limit` returns what the whole fused order holds first, ties (many, here) broken by the
    best rank and then the chunk id even where they straddle the cut."""
    rng = random.Random(38)
    for _ in range(300):
        lists = {
            name: [Candidate(rng.randrange(40), float(rng.choice([1, 2, 3]))) for _ in range(n)]
            for name, n in (("keyword", rng.randrange(30)), ("vector", rng.randrange(30)))
        }
        lists = {name: sorted(found, key=lambda c: -c.score) for name, found in lists.items()}
        weights = {"keyword": rng.choice([0.0, 1.0]), "vector": rng.choice([0.0, 0.5, 1.0])}
        whole = fuse(lists, weights, method, 60)
        best = {f.chunk_id: min(rank for rank, _ in f.ranks.values()) for f in whole}
        assert [f.chunk_id for f in whole] == sorted(
            best, key=lambda c: (-next(f.score for f in whole if f.chunk_id == c), best[c], c)
        )
        for limit in (1, 5, 12):
            assert fuse(lists, weights, method, 60, limit) == whole[:limit]


def test_a_short_weak_keyword_list_no_longer_outranks_a_sure_vector_hit() -> None:
    """Issue 64: in a collection of 22 chunks, two share a common word or two with the question
    (BM25 2.1 and 1.2, against a ceiling of 14), and the vector search puts the answer (chunk 1)
    clearly first. Normalised, the two-chunk list's first stood a deviation above the other and
    outranked the answer; weighed for its shortness and weakness, it no longer does."""
    vector = [Candidate(1, 0.81), Candidate(2, 0.80)]
    vector += [Candidate(i, 0.80 - 0.002 * i) for i in range(3, 23)]
    lists = {"keyword": [Candidate(2, 2.1), Candidate(3, 1.2)], "vector": vector}
    equal = {"keyword": 1.0, "vector": 1.0}
    assert [f.chunk_id for f in fuse(lists, equal, "zscore", 60, 2)] == [2, 1]
    weights = weighed(equal, lists, 100, 14.0)
    assert [f.chunk_id for f in fuse(lists, weights, "zscore", 60, 2)] == [1, 2]


def test_weighed_lowers_only_a_short_weak_keyword_list() -> None:
    weights = {"keyword": 2.0, "vector": 1.0}
    full = {"keyword": [Candidate(i, 5.0) for i in range(10)], "vector": [Candidate(1, 0.8)]}
    assert weighed(weights, full, 10, 100.0) == weights  # as many as asked: there may be more
    weak = {"keyword": [Candidate(1, 1.0), Candidate(2, 0.5)]}
    n, asked = 2, 100
    short = n * (asked + SHORT_KEYWORD_N0) / ((n + SHORT_KEYWORD_N0) * asked)
    assert weighed(weights, weak, asked, 100.0) == {"keyword": 2.0 * short, "vector": 1.0}
    # A rare word said once scores ~0.45 of its ceiling: its list keeps most of its say.
    strong = {"keyword": [Candidate(1, 45.0)]}
    kept = min(1.0, 0.45 / STRONG_KEYWORD_S0)
    assert weighed(weights, strong, asked, 100.0)["keyword"] == pytest.approx(2.0 * kept)
    assert weighed(weights, {"keyword": []}, asked, 0.0)["keyword"] == 0.0  # nothing matched
    assert weighed(weights, weak, asked, 100.0, n0=0.0) == weights  # off
    assert weighed(weights, {"vector": [Candidate(1, 0.8)]}, asked, 0.0) == weights
