"""The retrieval-quality harness: its metrics on hand-made runs, the on-disk embedding cache,
and a whole run on a tiny BEIR set on real PostgreSQL with the deterministic embedding fake."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bench.embedding_cache import CachingEmbedder, cache_path
from bench.quality import (
    BASELINES,
    MODES,
    default_language,
    document_ranking,
    evaluate,
    load_qrels,
    load_queries,
    mean_metrics,
    run_quality,
    save,
    summary,
)

from cari.embed import Embedder, Vector
from cari.runtime import open_runtime
from cari.search import router
from cari.settings import Settings
from tests.conftest import settings_for
from tests.fake_openai import FakeOpenAI

TINY = Path(__file__).parent / "fixtures" / "beir-tiny"


# -- metrics ------------------------------------------------------------------------------------


def test_perfect_run_scores_one() -> None:
    qrels = {"q": {"a": 2, "b": 1}}
    metrics = evaluate(qrels, {"q": ["a", "b", "c"]}, 50)["q"]
    assert metrics == {"nDCG@10": 1.0, "Recall@10": 1.0, "MRR@10": 1.0, "Recall@50": 1.0}


def test_only_relevant_document_at_rank_two() -> None:
    metrics = evaluate({"q": {"a": 1}}, {"q": ["x", "a", "y"]}, 50)["q"]
    assert metrics["MRR@10"] == pytest.approx(0.5)
    assert metrics["nDCG@10"] == pytest.approx(1 / math.log2(3))  # 0.6309
    assert metrics["Recall@10"] == 1.0


def test_graded_ndcg_uses_linear_gains_as_trec_eval() -> None:
    # The less relevant document first: DCG = 1/log2(2) + 3/log2(3); ideal = 3 + 1/log2(3).
    metrics = evaluate({"q": {"a": 1, "b": 3}}, {"q": ["a", "b"]}, 50)["q"]
    expected = (1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3))
    assert metrics["nDCG@10"] == pytest.approx(expected)
    assert metrics["MRR@10"] == 1.0


def test_cutoffs_recall_at_depth_and_mrr_at_ten() -> None:
    ranked = [f"x{i}" for i in range(10)] + ["a"] + [f"y{i}" for i in range(50)]
    qrels = {"q": {"a": 1, "b": 1}}
    metrics = evaluate(qrels, {"q": ranked}, 50)["q"]
    assert metrics["MRR@10"] == 0.0  # rank 11 is past the cut
    assert metrics["nDCG@10"] == 0.0
    assert metrics["Recall@10"] == 0.0
    assert metrics["Recall@50"] == 0.5  # a found, b never
    # Past the depth nothing counts: "a" at rank 11 is outside a depth-10 run.
    shallow = evaluate(qrels, {"q": ranked}, 10)["q"]
    assert set(shallow) == {"nDCG@10", "Recall@10", "MRR@10"}
    assert shallow["Recall@10"] == 0.0


def test_query_without_results_counts_zero_in_the_mean() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    per_query = evaluate(qrels, {"q1": ["a"], "q2": []}, 50)  # q3 missing altogether
    assert per_query["q2"] == dict.fromkeys(per_query["q1"], 0.0)
    assert per_query["q3"] == per_query["q2"]
    assert mean_metrics(per_query)["nDCG@10"] == pytest.approx(1 / 3)
    assert mean_metrics(per_query)["MRR@10"] == pytest.approx(1 / 3)


def test_chunks_become_documents_at_their_best_rank() -> None:
    assert document_ranking(["d1", "d2", "d1", "d3", "d2"]) == ["d1", "d2", "d3"]


def test_dataset_loading() -> None:
    assert list(load_queries(TINY)) == ["q1", "q2", "q3", "q4"]
    assert load_qrels(TINY, "test") == {
        "q1": {"zep": 2},
        "q2": {"glide": 2, "balloon": 1},
        "q3": {"jet": 1, "blank": 1},
    }
    assert default_language(TINY) == "english"
    assert default_language(Path("/data/tydiqa-goldp-id")) == "indonesian"


# -- embedding cache ----------------------------------------------------------------------------


class CountingEmbedder:
    """A tiny deterministic Embedder that records what it was asked to embed."""

    model_name = "counting/model"
    dimension = 4

    def __init__(self) -> None:
        self.document_calls: list[list[str]] = []
        self.query_calls: list[str] = []
        self.closed = False

    @staticmethod
    def vector(kind: str, text: str) -> Vector:
        digest = hashlib.sha256(f"{kind}:{text}".encode()).digest()
        return np.frombuffer(digest[:16], dtype=np.float32).copy()

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        self.document_calls.append(list(texts))
        return [self.vector("passage", t) for t in texts]

    async def embed_query(self, text: str) -> Vector:
        self.query_calls.append(text)
        return self.vector("query", text)

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        return [await self.embed_query(text) for text in texts]

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.anyio
async def test_cache_embeds_only_misses(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    cache = CachingEmbedder(inner, tmp_path / "e.sqlite")
    first = await cache.embed_documents(["a", "b", "a"])
    assert inner.document_calls == [["a", "b"]]  # a repeated text is embedded once
    second = await cache.embed_documents(["b", "a", "c"])
    assert inner.document_calls == [["a", "b"], ["c"]]
    for text, vector in zip(["a", "b", "a"], first, strict=True):
        np.testing.assert_array_equal(vector, inner.vector("passage", text))
    for text, vector in zip(["b", "a", "c"], second, strict=True):
        np.testing.assert_array_equal(vector, inner.vector("passage", text))
        assert vector.dtype == np.float32
    assert (cache.stats.hits, cache.stats.misses) == (2, 4)
    assert cache.stats.hit_rate == pytest.approx(2 / 6)
    await cache.aclose()
    assert inner.closed


@pytest.mark.anyio
async def test_cache_keeps_queries_apart_from_passages(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    cache = CachingEmbedder(inner, tmp_path / "e.sqlite")
    await cache.embed_documents(["same text"])
    vector = await cache.embed_query("same text")  # another kind: a miss, through embed_query
    assert inner.query_calls == ["same text"]
    np.testing.assert_array_equal(vector, inner.vector("query", "same text"))
    np.testing.assert_array_equal(await cache.embed_query("same text"), vector)
    assert inner.query_calls == ["same text"]
    await cache.aclose()


@pytest.mark.anyio
async def test_cache_persists_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "e.sqlite"
    first = CachingEmbedder(CountingEmbedder(), path)
    vectors = await first.embed_documents(["x", "y"])
    query = await first.embed_query("q")
    await first.aclose()

    inner = CountingEmbedder()
    again = CachingEmbedder(inner, path)
    reloaded = await again.embed_documents(["y", "x"])
    np.testing.assert_array_equal(reloaded[0], vectors[1])
    np.testing.assert_array_equal(reloaded[1], vectors[0])
    np.testing.assert_array_equal(await again.embed_query("q"), query)
    assert inner.document_calls == [] and inner.query_calls == []
    assert again.stats.hit_rate == 1.0
    await again.aclose()


@pytest.mark.anyio
async def test_cache_sends_misses_in_batches(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    cache = CachingEmbedder(inner, tmp_path / "e.sqlite", batch_size=2)
    await cache.embed_documents(["a"])
    await cache.embed_documents(["a", "b", "c", "d", "e", "f"])
    assert inner.document_calls == [["a"], ["b", "c"], ["d", "e"], ["f"]]
    await cache.aclose()


@pytest.mark.anyio
async def test_cached_vector_of_another_width_is_a_miss(tmp_path: Path) -> None:
    path = tmp_path / "e.sqlite"
    narrow = CachingEmbedder(CountingEmbedder(), path)
    await narrow.embed_documents(["a"])
    await narrow.aclose()
    wider = CountingEmbedder()
    wider.dimension = 8
    cache = CachingEmbedder(wider, path)
    await cache.embed_documents(["a"])
    assert wider.document_calls == [["a"]]
    await cache.aclose()


def test_cache_file_is_named_after_the_model() -> None:
    path = cache_path("intfloat/multilingual-e5-small", Path("/c"))
    assert path == Path("/c/embeddings-intfloat_multilingual-e5-small.sqlite")


# -- the harness end to end ---------------------------------------------------------------------


async def tiny_runs(
    dsn: str, settings: Settings, cache: Path, collections: Sequence[str]
) -> AsyncIterator[dict[str, Any]]:
    """The harness on the tiny set, once per collection name, each in a runtime of its own (as
    `bench.quality` runs each set) behind the same embedding cache file."""

    def cached(embedder: Embedder) -> Embedder:
        return CachingEmbedder(embedder, cache)

    for name in collections:
        async with open_runtime(settings, dsn=dsn, wrap_embedder=cached) as rt:
            yield await run_quality(rt, TINY, collection_name=name)


@pytest.mark.anyio
async def test_harness_on_tiny_beir_set(dsn: str, fake: FakeOpenAI, tmp_path: Path) -> None:
    settings = settings_for(dsn, **fake.settings(reembed_interval_s=0))
    runs = tiny_runs(dsn, settings, tmp_path / "e.sqlite", ["quality", "again"])
    result = await anext(runs)
    requests = len(fake.requests)
    # A rerun (into another collection) embeds nothing: every vector comes from the cache.
    again = await anext(runs)
    await runs.aclose()

    assert result["language"] == "english"
    assert (result["documents"], result["chunks"]) == (5, 5)
    assert result["skipped_empty"] == 1
    assert (result["queries"], result["queries_judged"], result["queries_total"]) == (3, 3, 4)
    assert result["depth"] == 100
    assert list(result["runs"]) == [*MODES, *BASELINES]
    for name in result["runs"]:
        assert set(result["per_query"][name]) == {"q1", "q2", "q3"}
        for values in [result["runs"][name], *result["per_query"][name].values()]:
            assert set(values) == {"nDCG@10", "Recall@10", "MRR@10", "Recall@100"}
            assert all(0.0 <= v <= 1.0 for v in values.values())

    # The exact word is found by keyword search, first; fused with the vector list it stays so.
    assert result["rankings"]["keyword"]["q1"] == ["zep"]
    assert result["per_query"]["keyword"]["q1"]["nDCG@10"] == 1.0
    assert result["per_query"]["keyword"]["q1"]["MRR@10"] == 1.0
    assert result["rankings"]["hybrid"]["q1"][0] == "zep"
    assert result["per_query"]["hybrid"]["q1"]["nDCG@10"] == 1.0
    # Vector search returns every embedded document; the skipped one stays a miss.
    assert sorted(result["rankings"]["vector"]["q2"]) == ["balloon", "glide", "jet", "rotor", "zep"]
    assert result["per_query"]["vector"]["q2"]["Recall@100"] == 1.0
    assert result["per_query"]["vector"]["q3"]["Recall@100"] == 0.5
    # BM25 ranks the two documents that share q3's words: "jet" ("engine", "quiet",
    # "efficient") above "glide" ("engine" alone).
    assert result["rankings"]["keyword"]["q3"] == ["jet", "glide"]
    # The tutorial's keyword branch requires every word: "glide" holds all of q2's, none
    # holds all of q3's. nDCG@10 of q2 is 2 / (2 + 1/log2(3)): the grade-1 balloon is missed.
    assert result["rankings"]["ts_rank_cd"] == {"q1": ["zep"], "q2": ["glide"], "q3": []}
    assert result["no_results"]["ts_rank_cd"] == 1
    q2 = 2 / (2 + 1 / math.log2(3))
    assert result["runs"]["ts_rank_cd"]["nDCG@10"] == pytest.approx((1 + q2 + 0) / 3)
    # With nothing from ts_rank_cd for q3, the tutorial hybrid is the vector list there.
    assert result["rankings"]["tutorial hybrid"]["q3"] == result["rankings"]["vector"]["q3"]
    assert result["rankings"]["tutorial hybrid"]["q1"][0] == "zep"
    # Hybrid runs with the collection's defaults (tests/test_bench_fusion.py rebuilds it
    # offline); the equal-weight RRF baseline ranks "zep" first for q1 too.
    assert result["defaults"] == {
        "fusion": "zscore",
        "vector_weight": 1.0,
        "keyword_weight": 1.0,
        "rrf_k": 60,
        "candidates": settings.search_candidates,
        "ef_search": settings.hnsw_ef_search,
    }
    assert result["rankings"]["rrf equal"]["q1"][0] == "zep"
    # The lists kept for fusion studies: both retrievers, scores best first, chunks mapped.
    for lists in result["lists"].values():
        for name in ("keyword", "vector"):
            scores = [score for _, score in lists[name]]
            assert scores == sorted(scores, reverse=True)
            assert all(chunk_id in result["chunk_documents"] for chunk_id, _ in lists[name])
    assert set(result["latency_ms"]) == {*MODES, "ts_rank_cd"}

    # 5 passages, 3 query vectors (vector and hybrid share the searcher's LRU cache) and the
    # intent router's example questions, embedded once.
    examples = len(router.SPECS_EXAMPLES) + len(router.OTHER_EXAMPLES)
    assert result["cache"] == {"hits": 0, "misses": 8 + examples, "hit_rate": 0.0}
    seen = 8 + examples
    assert again["cache"] == {"hits": seen, "misses": 0, "hit_rate": 1.0}
    assert len(fake.requests) == requests
    assert again["runs"] == result["runs"]
    assert again["rankings"] == result["rankings"]

    # Saved figures merge by dataset and split; the lists go to a file of their own.
    out = tmp_path / "quality.json"
    save(result, out, tmp_path / "runs")
    save(again | {"split": "dev"}, out, tmp_path / "runs")
    figures = json.loads(out.read_text())
    assert list(figures) == ["beir-tiny/dev", "beir-tiny/test"]
    assert figures["beir-tiny/test"]["runs"] == result["runs"]
    saved = json.loads((tmp_path / "runs" / "beir-tiny-test.json").read_text())
    assert saved["lists"] == result["lists"]
    assert "nDCG@10" in summary([result, again])
