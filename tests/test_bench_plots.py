"""The benchmark plots: each is drawn from JSON shaped as its benchmark writes it."""

from __future__ import annotations

import json
from pathlib import Path

from bench.plots import draw

PNG = b"\x89PNG\r\n\x1a\n"


def cell(concurrency: int, p95: float | None) -> dict[str, object]:
    return {
        "concurrency": concurrency,
        "requests": 10,
        "errors": 0,
        "seconds": 1.0,
        "throughput_rps": 10.0 * concurrency,
        "p50_ms": None if p95 is None else p95 / 2,
        "p95_ms": p95,
        "p99_ms": p95,
    }


def test_load_and_scale_plots_and_missing_inputs(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    load = {
        "runs": [
            {
                "chunks": 10_000,
                "baseline": {"collection": [cell(1, 1.0)]},
                "modes": {
                    "keyword": {"computed": [cell(1, 5.0), cell(4, 9.0)]},
                    "vector": {
                        "computed": [cell(1, 40.0), cell(4, None)],
                        "cached": [cell(1, 6.0)],
                    },
                },
            }
        ]
    }
    ef = [
        {"ef_search": ef, "recall_at_10": r, "p50_ms": ms, "p95_ms": 2 * ms}
        for ef, r, ms in ((40, 0.9, 2.0), (100, 0.97, 3.5), (200, 0.99, 6.0))
    ]
    scale = {"results": [{"rows": 100_000, "ef": ef}, {"rows": 1_000_000, "ef": ef}]}
    (results / "load.json").write_text(json.dumps(load))
    (results / "scale.json").write_text(json.dumps(scale))
    written = draw(results, tmp_path / "img")
    assert [p.name for p in written] == ["load.png", "scale.png"]  # no quality or fusion JSON
    for path in written:
        assert path.read_bytes().startswith(PNG)
        assert path.stat().st_size > 10_000
