"""The fusion sweep on the tiny BEIR set: its offline fusion is the engine's, and it chooses
only among configurations that lose nowhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.fusion import BASELINE, Config, compare, fused, grid, interval, load_set, sweep
from bench.plots import draw
from bench.quality import save

from cari.schema.collections import CollectionCreate
from tests.conftest import settings_for
from tests.fake_openai import FakeOpenAI
from tests.test_quality import TINY, tiny_runs

BOOSTS = (2.0, 0.5)


@pytest.mark.anyio
async def test_sweep_fuses_like_the_engine(dsn: str, fake: FakeOpenAI, tmp_path: Path) -> None:
    settings = settings_for(dsn, **fake.settings(reembed_interval_s=0))
    (result,) = [r async for r in tiny_runs(dsn, settings, tmp_path / "e.sqlite", ["quality"])]
    save(result, tmp_path / "quality.json", tmp_path / "runs")
    queries = load_set("beir-tiny/test", tmp_path / "runs", TINY.parent)
    assert set(queries.qrels) == {"q1", "q2", "q3"} and not queries.boosted

    # The engine's hybrid (the defaults) and equal-weight RRF, rebuilt
    # offline from the saved lists, give the rankings the harness measured.
    spec = CollectionCreate(name="x")
    share = spec.vector_weight / (spec.vector_weight + spec.keyword_weight)
    default = Config(spec.fusion, share, spec.rrf_k, settings.search_candidates)
    assert fused(queries, default, BOOSTS) == result["rankings"]["hybrid"]
    assert fused(queries, BASELINE, BOOSTS) == result["rankings"]["rrf equal"]

    tuned = sweep([queries], BOOSTS)
    assert len(tuned["rows"]) == len(list(grid())) == 9 * 3 * 7
    best = tuned["best_single"]["beir-tiny/test"]
    assert best == max(v["nDCG@10"] for v in tuned["singles"]["beir-tiny/test"].values())
    choice = tuned["choice"]
    safe = [row for row in tuned["rows"] if row["min_gain"] >= 0]
    assert choice in safe  # the default fusion itself loses nowhere here, so one exists
    assert choice["mean_gain"] == max(row["mean_gain"] for row in safe)
    table = compare([queries], Config(**choice["config"]), BOOSTS)["beir-tiny/test"]
    assert table["chosen"]["nDCG@10"] == pytest.approx(choice["sets"]["beir-tiny/test"]["nDCG@10"])
    assert table["keyword"] == tuned["singles"]["beir-tiny/test"]["keyword"]
    # The oracle is the better retriever per query, as the harness itself scored each query.
    per_query = result["per_query"]
    better = [
        max(per_query[r][q]["nDCG@10"] for r in ("keyword", "vector")) for q in per_query["keyword"]
    ]
    assert table["oracle"]["nDCG@10"] == pytest.approx(sum(better) / 3)
    # The per-set ceiling is the chosen fusion at whichever swept share scores best here.
    at_share = {
        row["config"]["vector_share"]: row["sets"]["beir-tiny/test"]["nDCG@10"]
        for row in tuned["rows"]
        if {**row["config"], "vector_share": 0} == {**choice["config"], "vector_share": 0}
    }
    assert len(at_share) == 9
    ceiling = table["best share"]
    assert ceiling["nDCG@10"] == pytest.approx(max(at_share.values()))
    assert at_share[ceiling["vector_share"]] == pytest.approx(ceiling["nDCG@10"])
    # The gain per query is a fusion's nDCG@10 less the better single retriever's, as the
    # harness scored them (its hybrid run is the default fusion).
    better = max(("keyword", "vector"), key=lambda r: result["runs"][r]["nDCG@10"])
    own = compare([queries], default, BOOSTS)["beir-tiny/test"]
    assert own["gain"]["differences"] == pytest.approx(
        [
            per_query["hybrid"][q]["nDCG@10"] - per_query[better][q]["nDCG@10"]
            for q in per_query["hybrid"]
        ]
    )
    assert table["gain"]["mean"] == pytest.approx(table["chosen"]["nDCG@10"] - best)
    assert choice["gain"]["beir-tiny/test"]["differences"] == table["gain"]["differences"]

    # The quality and fusion plots draw from exactly what the two benchmarks write.
    results = tmp_path / "results"
    save(result, results / "quality.json", tmp_path / "runs")
    (results / "fusion.json").write_text(json.dumps({"tuning": tuned, "reporting": {}}))
    written = draw(results, tmp_path / "img")
    assert [p.name for p in written] == ["quality.png", "fusion.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)


def test_interval_resamples_each_set_on_its_own() -> None:
    # A set that always gains 0.5 has no spread, whatever its queries are drawn as.
    assert interval([[0.5] * 7]) == pytest.approx((0.5, 0.5))
    # Two sets that always gain +1 and -1 average 0 exactly, however unequal their sizes; had the
    # queries been pooled, the share drawn from each would vary and so would the mean.
    assert interval([[1.0] * 3, [-1.0] * 40]) == pytest.approx((0.0, 0.0))
    # Half wins and half losses: an interval around 0 that is neither empty nor the whole range.
    low, high = interval([[1.0, -1.0] * 20])
    assert -0.5 < low < -0.1 and 0.1 < high < 0.5
    assert interval([[1.0, -1.0] * 20]) == (low, high)  # the same figures every run
