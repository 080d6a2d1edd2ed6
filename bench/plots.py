"""The plots of docs/benchmarks.md, drawn from the JSON the benchmarks write.

    python -m bench.plots [--results bench/results] [--out docs/img]

- `quality.png` from `quality.json` (`bench.quality --out`): nDCG@10 of every run per dataset.
- `fusion.png` from `fusion.json` (`bench.fusion --out`): nDCG@10 against the vector share per
  fusion method on each tuning set, at the chosen candidate depth (RRF at its best k).
- `load.png` from `load.json` (`bench.load`): p95 latency and throughput against concurrency.
- `scale.png` from `scale.json` (`bench.scale`): HNSW recall@10 against latency per ef_search.

A missing JSON file skips its plot (and says so).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # after choosing the backend

RESULTS = Path(__file__).resolve().parent / "results"
OUT = Path(__file__).resolve().parents[1] / "docs" / "img"
DPI = 110


def quality(figures: dict[str, Any], out: Path) -> None:
    entries = [e for key, e in figures.items() if key.endswith("/test")]
    runs = list(entries[0]["runs"])
    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for i, run in enumerate(runs):
        xs = [n + (i - (len(runs) - 1) / 2) * width for n in range(len(entries))]
        ax.bar(xs, [e["runs"][run]["nDCG@10"] for e in entries], width, label=run)
    ax.set_xticks(range(len(entries)), [e["dataset"] for e in entries])
    ax.set_ylabel("nDCG@10")
    ax.set_title("Retrieval quality per run (test split; bench.quality)")
    ax.legend(ncol=3, fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    _save(fig, out / "quality.png")


def fusion(sweep: dict[str, Any], out: Path) -> None:
    tuning = sweep["tuning"]
    chosen = tuning["choice"]["config"]
    sets = list(tuning["best_single"])
    fig, axes = plt.subplots(1, len(sets), figsize=(4.2 * len(sets), 3.8), squeeze=False)
    for ax, name in zip(axes[0], sets, strict=True):
        rows = [r for r in tuning["rows"] if r["config"]["depth"] == chosen["depth"]]
        for method in ("rrf", "minmax", "zscore"):
            by_share: dict[float, float] = {}
            for row in rows:
                if row["config"]["method"] == method:
                    share = row["config"]["vector_share"]
                    value = row["sets"][name]["nDCG@10"]
                    by_share[share] = max(by_share.get(share, 0.0), value)
            shares = sorted(by_share)
            ax.plot(shares, [by_share[s] for s in shares], marker="o", ms=3, label=method)
        for retriever, style in (("keyword", ":"), ("vector", "--")):
            ax.axhline(tuning["singles"][name][retriever]["nDCG@10"], ls=style, c="grey")
            ax.annotate(
                retriever,
                (0.1, tuning["singles"][name][retriever]["nDCG@10"]),
                fontsize=7,
                color="grey",
            )
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("vector share = vector_weight / (vector + keyword)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"nDCG@10 (candidates {chosen['depth']})")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Fusion on the tuning sets (bench.fusion)", fontsize=10)
    _save(fig, out / "fusion.png")


def load(report: dict[str, Any], out: Path) -> None:
    runs = report["runs"]
    fig, axes = plt.subplots(2, len(runs), figsize=(5.5 * len(runs), 7), squeeze=False)
    for column, run in enumerate(runs):
        latency, throughput = axes[0][column], axes[1][column]
        for mode, phases in run["modes"].items():
            for phase, cells in phases.items():
                done = [c for c in cells if c["p95_ms"] is not None]
                label = f"{mode} ({phase})"
                xs = [c["concurrency"] for c in done]
                latency.plot(xs, [c["p95_ms"] for c in done], marker="o", ms=3, label=label)
                throughput.plot(
                    xs, [c["throughput_rps"] for c in done], marker="o", ms=3, label=label
                )
        latency.set_title(f"{run['chunks']:,} chunks", fontsize=9)
        latency.set_ylabel("p95 latency, ms")
        latency.set_yscale("log")
        throughput.set_ylabel("requests / s")
        throughput.set_xlabel("concurrent clients")
        for ax in (latency, throughput):
            ax.set_xscale("log", base=2)
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("HTTP search under load (bench.load; 2 cores shared by all)", fontsize=10)
    _save(fig, out / "load.png")


def scale(report: dict[str, Any], out: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for result in report["results"]:
        points = sorted(result["ef"], key=lambda e: e["ef_search"])
        ax.plot(
            [e["p50_ms"] for e in points],
            [e["recall_at_10"] for e in points],
            marker="o",
            label=f"{result['rows']:,} vectors",
        )
        for e in points:
            ax.annotate(f"ef {e['ef_search']}", (e["p50_ms"], e["recall_at_10"]), fontsize=7)
    ax.set_xlabel("p50 latency, ms")
    ax.set_ylabel("recall@10 against exact search")
    ax.set_title("HNSW recall vs latency per ef_search (bench.scale)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, out / "scale.png")


PLOTS = {"quality": quality, "fusion": fusion, "load": load, "scale": scale}


def draw(results: Path, out: Path) -> list[Path]:
    """Every plot whose JSON exists; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, plot in PLOTS.items():
        source = results / f"{name}.json"
        if not source.exists():
            print(f"{source} missing: {name}.png skipped")
            continue
        plot(json.loads(source.read_text()), out)
        written.append(out / f"{name}.png")
    return written


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    # No timestamp in the file, so an unchanged figure is an unchanged file.
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the JSON files")
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the PNG files")
    args = parser.parse_args()
    for path in draw(args.results, args.out):
        print(path)


if __name__ == "__main__":
    main()
