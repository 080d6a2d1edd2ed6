"""The serving path's scenario targets (issue 21), each next to a baseline from the same run.

    python -m bench.serving [--chunks 10000] [--queries 400] [--duration 15] [--clients 16]
                            [--ingest-documents 3000] [--rounds 4] [--frozen-searches 8]
                            [--cold-starts 3]
                            [--scenarios ingest clients frozen cold]
                            [--out bench/results/serving.json]

The corpus is `bench.search`'s (real passages, synthetic vectors around 400 real e5
embeddings; collection `bench`, language `simple`), built once in a fresh database
`cari_bench_serving` by `bench.search.load_corpus`. Every server is the real `cari serve` in a
subprocess (`bench.load.served`), driven over loopback by `bench.load.drive`; everything shares
the machine's cores, whose load average is printed before and after each scenario. The
environment is this process's (so `OMP_NUM_THREADS` and `CARI_*` apply; the run prints the
OpenMP setting it ran with).

Fresh questions: `bench.search.load_queries(--queries)` taken in turn, on servers with
`CARI_QUERY_CACHE_SIZE=0`, so every request embeds its question (as a never-seen one does).

1. **ingest** — fresh questions at 1 client, vector and hybrid, on the local embedder, beside a
   `cari ingest` (a real subprocess in a session of its own, as one started from another
   terminal; the local model; JSON Lines of `--ingest-documents` real passages) that loads
   another collection on the same database: once with the defaults (every core), once into a
   third collection with `CARI_EMBEDDING_THREADS=1`. Each ingestion is waited for until its
   first batch is stored; then `--rounds` rounds alternate its two states, in turn first:
   **alone** (the ingestion stopped, SIGSTOP to its session) and **during** (running),
   `--duration` / `--rounds` s per mode and state, so that both are measured under the same
   drift of the shared machine. The answers of each state are pooled; the p95 ratio during /
   alone carries a 95 % bootstrap interval (2,000 resamples of each pool). Documents stored are
   counted at the start and end (it must have run throughout). Targets: p95 during <= 1.2x
   alone (issue 37) and <= 100 ms (issue 21).
2. **clients** — fresh questions at 1 and at `--clients` clients, vector and hybrid, on the
   local embedder with its default backlog (`CARI_EMBEDDING_MAX_WAITING_QUERIES`, 64, unless
   set). Per cell: the answered requests' p50/p95/max, the count of each error code, how fast
   the 503s came (p50/max) and whether each carried `Retry-After`. A client sends its next
   request as soon as it has an answer: a refused one asks again at once, without waiting the
   `Retry-After` (the harshest client). Target: no answered request waits more than 2 s; the
   excess gets 503 promptly.
3. **frozen** — an OpenAI-compatible embedder (`bench.fast_embedder`, a process of its own)
   that answers at once (the baseline), then one that accepts every request and never answers
   (`--frozen`), each behind its own server with the embedder's default timeout and retries:
   `--frozen-searches` fresh hybrid questions one after another (each timed, the first
   included: the circuit breaker opens after the first failures), two vector ones, then one
   `PUT` of a document (its status, time and whether its chunks got vectors). Target: hybrid
   answers (degraded) within 2 s; a write fails or stores within its budget
   (`CARI_WRITE_EMBEDDING_BUDGET_S`, 30 s).
4. **cold** — `cari search -c bench "<fresh question>"` in a new process, on the local model and
   the stored corpus, `--cold-starts` times, against the floor of `python -c "import cari"` and
   `cari --help` in the same run; then one more under `-X importtime` and with `--explain`,
   whose import tree and the search's own stage timings say where the time goes. Target: an
   answer within 3 s.

JSON to `--out`: per scenario its cells, the targets, whether each is met, and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec
import numpy as np
import psycopg

from bench import harness
from bench.harness import RESULTS, dsn_of, fresh_runtime, shown
from bench.ingest_path import fast_embedder
from bench.load import (
    JSON_HEADERS,
    REQUEST_TIMEOUT_S,
    SEARCH,
    STOP_TIMEOUT_S,
    drive,
    gained,
    save,
    scrape,
    search_target,
    served,
)
from bench.search import (
    COLLECTION,
    TOP_K,
    Passage,
    build_corpus,
    load_passages,
    load_queries,
)
from cari.settings import Settings, load_settings

DATABASE = "cari_bench_serving"
OUT = RESULTS / "serving.json"
# Scenario 1's ingestions: each `cari ingest` loads a collection of its own, with the local
# model's defaults (every core), then with one thread (CARI_EMBEDDING_THREADS=1).
INGESTIONS = {
    "during ingestion": ("ingesting", {}),
    "during ingestion, 1 thread": ("ingesting-1-thread", {"CARI_EMBEDDING_THREADS": "1"}),
}
SCENARIOS = ("ingest", "clients", "frozen", "cold")
FRESH = {"CARI_QUERY_CACHE_SIZE": "0"}
INGEST_READY_S = 180  # the ingestion's first batch: process start, model load, 32 passages
STATES = ("alone", "during")
RATIO_TARGET = 1.2
BOOTSTRAP_RESAMPLES = 2000
TARGETS = {
    "ingest": f"fresh questions at 1 client during `cari ingest`: p95 <= {RATIO_TARGET}x alone "
    "and <= 100 ms",
    "clients": "16 clients of fresh questions: no answered request over 2 s; 503s prompt",
    "frozen": "embedder frozen: hybrid answers (degraded) within 2 s; a write fails or stores "
    "within its budget",
    "cold": "a new `cari search` process answers within 3 s",
}
PROMPT_503_MS = 100
WARM_UP_S = 3.0
# A write held by a hung embedder: the default timeout (60 s) x 6 attempts, and backoff.
PUT_TIMEOUT_S = 420.0  # a 503 that took longer than this was not "at once"


@dataclass(frozen=True, slots=True)
class Answer:
    """One request as the client saw it: status (None: no answer), milliseconds, the problem's
    `code` (errors), its Retry-After header, and whether a search said it was degraded."""

    status: int | None
    ms: float
    code: str | None = None
    retry_after: str | None = None
    degraded: bool = False


def answer_of(response: httpx.Response | None, ms: float) -> Answer:
    if response is None:
        return Answer(None, ms)
    body: Any = None
    with contextlib.suppress(ValueError):
        body = response.json()
    body = body if isinstance(body, dict) else {}
    return Answer(
        response.status_code,
        ms,
        body.get("code") if response.status_code != 200 else None,
        response.headers.get("retry-after"),
        bool(body.get("degraded")),
    )


def _ms(values: Sequence[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


def summarize(answers: Sequence[Answer], seconds: float | None = None) -> dict[str, Any]:
    """The answered (200) requests' p50/p95/max, how many were degraded; each error code's
    count; the 503s' p50/max and how many carried Retry-After."""
    ok = [a.ms for a in answers if a.status == 200]
    refused = [a for a in answers if a.status == 503]
    codes = Counter(
        a.code or ("no answer" if a.status is None else str(a.status))
        for a in answers
        if a.status != 200
    )
    figures: dict[str, Any] = {
        "requests": len(answers),
        "answered": len(ok),
        "degraded": sum(a.degraded for a in answers if a.status == 200),
        "p50_ms": _ms(ok, 50),
        "p95_ms": _ms(ok, 95),
        "max_ms": round(max(ok), 1) if ok else None,
        "errors": dict(sorted(codes.items())),
        "refused_503": len(refused),
        "refused_p50_ms": _ms([a.ms for a in refused], 50),
        "refused_max_ms": round(max(a.ms for a in refused), 1) if refused else None,
        "refused_with_retry_after": sum(a.retry_after is not None for a in refused),
    }
    if seconds is not None:
        figures["seconds"] = round(seconds, 2)
        figures["answered_per_s"] = round(len(ok) / seconds, 2) if seconds else None
    return figures


async def fresh_answers(
    url: str, queries: Sequence[str], mode: str, clients: int, duration: float
) -> tuple[list[Answer], float]:
    """`clients` clients sending fresh `mode` questions for `duration` s: every answer, and the
    seconds they took."""
    answers: list[Answer] = []

    def record(response: httpx.Response | None, ms: float) -> None:
        answers.append(answer_of(response, ms))

    cell = await drive(url, search_target(queries, mode), clients, duration, 1_000_000, record)
    return answers, cell["seconds"]


async def fresh_cell(
    url: str, queries: Sequence[str], mode: str, clients: int, duration: float
) -> dict[str, Any]:
    answers, seconds = await fresh_answers(url, queries, mode, clients, duration)
    return {"mode": mode, "clients": clients, **summarize(answers, seconds)}


# -- 1. fresh questions while `cari ingest` runs --------------------------------------------


def write_records(passages: Sequence[Passage], count: int, path: Path) -> int:
    """JSON Lines of up to `count` real passages, as `cari ingest` reads them."""
    with path.open("w") as out:
        for passage in passages[:count]:
            record = {"id": passage.external_id, "title": passage.title, "text": passage.text}
            out.write(json.dumps(record) + "\n")
    return min(count, len(passages))


@contextlib.contextmanager
def ingesting(
    dsn: str, env: Mapping[str, str], records: Path, collection: str
) -> Iterator[subprocess.Popen[bytes]]:
    """`cari ingest <records> -c <collection> --create` running in a session of its own;
    terminated when the block ends (each batch is a transaction: nothing is left half done)."""
    command = [
        sys.executable,
        "-m",
        "cari.cli",
        "ingest",
        str(records),
        "-c",
        collection,
        "--create",
    ]
    environment = {**env, "DATABASE_URL": dsn, "CARI_DATABASE_URL": dsn}
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            command, env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            yield process
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


async def stored(dsn: str, collection: str) -> int:
    """Documents an ingestion has stored so far in `collection`."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM documents d JOIN collections c ON c.id = d.collection_id "
            "WHERE c.name = %s",
            (collection,),
        )
        row = await cur.fetchone()
    return int(row[0]) if row else 0


@contextlib.contextmanager
def stopped(process: subprocess.Popen[bytes]) -> Iterator[None]:
    """The process's session stopped (SIGSTOP: it keeps its memory and connections, and takes
    no CPU) until the block ends."""
    os.killpg(process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(process.pid, signal.SIGCONT)


def p95_ratio(
    during: Sequence[float], alone: Sequence[float], rng: np.random.Generator
) -> dict[str, Any]:
    """p95(during) / p95(alone), and its 95 % bootstrap interval (each pool resampled)."""
    d, a = np.asarray(during), np.asarray(alone)
    if not d.size or not a.size:
        return {"p95": None, "interval": None}
    resampled = np.percentile(
        rng.choice(d, (BOOTSTRAP_RESAMPLES, d.size)), 95, axis=1
    ) / np.percentile(rng.choice(a, (BOOTSTRAP_RESAMPLES, a.size)), 95, axis=1)
    low, high = np.percentile(resampled, [2.5, 97.5])
    return {
        "p95": round(float(np.percentile(d, 95) / np.percentile(a, 95)), 3),
        "interval": [round(float(low), 3), round(float(high), 3)],
    }


async def beside_ingestion(
    dsn: str,
    env: Mapping[str, str],
    queries: Sequence[str],
    passages: Sequence[Passage],
    documents: int,
    duration: float,
    rounds: int,
) -> dict[str, Any]:
    results: dict[str, dict[str, Any]] = {}
    rng = np.random.default_rng(0)
    modes = ("vector", "hybrid")
    async with served(dsn, {**env, **FRESH}) as server:
        # Unmeasured: the model's pages and the statements' plans, warm for the first cell.
        await drive(server.url, search_target(queries, "hybrid"), 1, WARM_UP_S, 1_000_000)
        with tempfile.TemporaryDirectory() as folder:
            records = Path(folder) / "passages.jsonl"
            written = write_records(passages, documents, records)
            for label, (collection, tuning) in INGESTIONS.items():
                pooled: dict[tuple[str, str], list[Answer]] = {
                    (state, mode): [] for state in STATES for mode in modes
                }
                seconds = dict.fromkeys(pooled, 0.0)
                with ingesting(dsn, {**env, **tuning}, records, collection) as process:
                    waited = time.perf_counter()
                    while (first := await stored(dsn, collection)) == 0:
                        late = time.perf_counter() - waited > INGEST_READY_S
                        if process.poll() is not None or late:
                            raise RuntimeError(f"cari ingest stored nothing ({process.poll()})")
                        await asyncio.sleep(0.5)
                    for turn in range(rounds):
                        for state in STATES if turn % 2 == 0 else STATES[::-1]:
                            pause = (
                                stopped(process) if state == "alone" else contextlib.nullcontext()
                            )
                            with pause:
                                for mode in modes:
                                    answers, took = await fresh_answers(
                                        server.url, queries, mode, 1, duration / rounds
                                    )
                                    pooled[state, mode] += answers
                                    seconds[state, mode] += took
                    last = await stored(dsn, collection)
                    running = sum(seconds["during", mode] for mode in modes)
                    results[label] = {
                        **{
                            state: [
                                {
                                    "mode": mode,
                                    "clients": 1,
                                    **summarize(pooled[state, mode], seconds[state, mode]),
                                }
                                for mode in modes
                            ]
                            for state in STATES
                        },
                        "p95_during_over_alone": {
                            mode: p95_ratio(
                                [a.ms for a in pooled["during", mode] if a.status == 200],
                                [a.ms for a in pooled["alone", mode] if a.status == 200],
                                rng,
                            )
                            for mode in modes
                        },
                        "ingestion": {
                            "environment": tuning,
                            "records": written,
                            "stored_at_start": first,
                            "stored_at_end": last,
                            "documents_per_s_running": round((last - first) / running, 2),
                            "ran_throughout": process.poll() is None,
                        },
                    }
    return {"rounds": rounds, "ingestions": results}


# -- 2. many clients of fresh questions -----------------------------------------------------


async def many_clients(
    dsn: str, env: Mapping[str, str], queries: Sequence[str], clients: int, duration: float
) -> dict[str, Any]:
    cells = []
    async with served(dsn, {**env, **FRESH}) as server:
        before = await scrape(server.url)
        for mode in ("vector", "hybrid"):
            for count in (1, clients):
                cells.append(await fresh_cell(server.url, queries, mode, count, duration))
        moved = gained(before, await scrape(server.url))
    failures = {k: v for k, v in moved.items() if k.startswith("cari_embedder_failures")}
    return {"cells": cells, "embedder_failures": failures}


# -- 3. a frozen embedder ---------------------------------------------------------------------


async def timed(http: httpx.AsyncClient, method: str, path: str, body: object) -> Answer:
    started = time.perf_counter()
    try:
        response = await http.request(
            method, path, content=msgspec.json.encode(body), headers=JSON_HEADERS
        )
    except httpx.HTTPError:
        return answer_of(None, (time.perf_counter() - started) * 1000)
    return answer_of(response, (time.perf_counter() - started) * 1000)


async def one_embedder(
    dsn: str,
    env: Mapping[str, str],
    queries: Iterator[str],
    passage: Passage,
    searches: int,
    document_id: str,
) -> dict[str, Any]:
    """Fresh hybrid then vector questions one at a time, then a PUT of a new document, each
    timed."""
    async with (
        served(dsn, {**env, **FRESH}) as server,
        httpx.AsyncClient(base_url=server.url, timeout=REQUEST_TIMEOUT_S) as http,
    ):
        modes = ["hybrid"] * searches + ["vector"] * 2
        answers: dict[str, list[Answer]] = {"hybrid": [], "vector": []}
        for mode in modes:
            body = {"query": next(queries), "mode": mode, "top_k": TOP_K}
            answers[mode].append(await timed(http, "POST", SEARCH, body))
        document = {"title": passage.title, "text": passage.text}
        path = f"{SEARCH.rsplit('/', 1)[0]}/documents/{document_id}"
        started = time.perf_counter()
        response: httpx.Response | None = None
        with contextlib.suppress(httpx.HTTPError):  # no answer within PUT_TIMEOUT_S
            response = await http.put(path, json=document, timeout=PUT_TIMEOUT_S)
        put = answer_of(response, (time.perf_counter() - started) * 1000)
    stored_as: dict[str, Any] = (
        response.json() if response is not None and response.status_code == 200 else {}
    )
    results = stored_as.get("results")
    return {
        "hybrid": {
            "each_ms": [round(a.ms, 1) for a in answers["hybrid"]],
            **summarize(answers["hybrid"]),
        },
        "vector": {
            "each_ms": [round(a.ms, 1) for a in answers["vector"]],
            **summarize(answers["vector"]),
        },
        "put": {
            "status": put.status,
            "ms": round(put.ms, 1),
            "code": put.code,
            "embedded": results[0].get("embedded") if results else None,
            "warnings": stored_as.get("warnings"),
        },
    }


async def frozen_embedder(
    dsn: str,
    env: Mapping[str, str],
    queries: Sequence[str],
    passages: Sequence[Passage],
    searches: int,
) -> dict[str, Any]:
    fresh = itertools.cycle(queries)
    found: dict[str, Any] = {}
    for i, (name, frozen) in enumerate((("healthy", False), ("frozen", True))):
        with fast_embedder(frozen=frozen) as embedder:
            # The embedder's default timeout and retries, as a deployment has them.
            embedder.pop("CARI_EMBEDDING_MAX_RETRIES", None)
            environment = {
                k: v for k, v in env.items() if k != "CARI_EMBEDDING_MAX_RETRIES"
            } | embedder
            found[name] = await one_embedder(
                dsn, environment, fresh, passages[i], searches, f"serving-put-{name}"
            )
    default = Settings.model_fields["write_embedding_budget_s"].default
    found["write_budget_s"] = float(env.get("CARI_WRITE_EMBEDDING_BUDGET_S", default))
    return found


# -- 4. a new `cari search` process -----------------------------------------------------------


def run_timed(
    command: Sequence[str], env: Mapping[str, str]
) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    return (time.perf_counter() - started) * 1000, done


def import_tree(stderr: str, top: int = 12) -> list[dict[str, Any]]:
    """The slowest imports of a `-X importtime` trace at the first two levels (cumulative ms;
    a second-level one is named `parent > module`, and counted in its parent's time too)."""
    pattern = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)")
    found: list[tuple[float, str]] = []
    children: list[tuple[float, str]] = []  # printed before their parent
    for line in stderr.splitlines():
        if (match := pattern.match(line)) is None:
            continue
        ms, level, module = int(match.group(2)) / 1000, len(match.group(3)) // 2, match.group(4)
        if level == 1:
            children.append((ms, module))
        elif level == 0:
            found.append((ms, module))
            found += [(child_ms, f"{module} > {child}") for child_ms, child in children]
            children = []
    found.sort(reverse=True)
    return [{"module": module, "cumulative_ms": ms} for ms, module in found[:top]]


def cold_start(
    dsn: str, env: Mapping[str, str], queries: Sequence[str], rounds: int
) -> dict[str, Any]:
    environment = {**env, "DATABASE_URL": dsn, "CARI_DATABASE_URL": dsn}
    python = sys.executable
    commands = {
        "python -c 'import cari'": [python, "-c", "import cari"],
        "cari --help": [python, "-m", "cari.cli", "--help"],
    }
    times: dict[str, list[float]] = {name: [] for name in [*commands, "cari search"]}
    fresh = itertools.cycle(queries)
    for _ in range(rounds):
        for name, command in commands.items():
            ms, done = run_timed(command, environment)
            done.check_returncode()
            times[name].append(round(ms, 1))
        search = [python, "-m", "cari.cli", "search", "-c", COLLECTION, next(fresh)]
        ms, done = run_timed(search, environment)
        if done.returncode != 0:
            raise RuntimeError(f"cari search failed: {done.stderr.strip()[-2000:]}")
        times["cari search"].append(round(ms, 1))
    # Where the time goes: the import tree, and the search's own stages.
    question = next(fresh)
    traced = [python, "-X", "importtime", "-m", "cari.cli", "search", "-c", COLLECTION]
    ms, done = run_timed([*traced, "--explain", "--json", question], environment)
    done.check_returncode()
    explain = json.loads(done.stdout).get("explain") or {}
    return {
        "wall_ms": times,
        "median_ms": {name: round(float(np.median(v)), 1) for name, v in times.items()},
        "traced": {
            "wall_ms": round(ms, 1),
            "imports": import_tree(done.stderr),
            "search_timings_ms": explain.get("timings_ms"),
        },
    }


# -- the run --------------------------------------------------------------------------------


def met(scenario: str, result: Mapping[str, Any], clients: int) -> dict[str, bool]:
    """Each target of the scenario, met or not."""
    if scenario == "ingest":
        found = {}
        for label, ingestion in result["ingestions"].items():
            for mode, ratio in ingestion["p95_during_over_alone"].items():
                found[f"{label}: {mode} p95 <= {RATIO_TARGET}x alone"] = (
                    ratio["p95"] or 1e9
                ) <= RATIO_TARGET
            for cell in ingestion["during"]:
                found[f"{label}: {cell['mode']} p95 <= 100 ms"] = (cell["p95_ms"] or 1e9) <= 100
        return found
    if scenario == "clients":
        found = {}
        for c in result["cells"]:
            if c["clients"] != clients:
                continue
            found[f"{c['mode']}: max answered <= 2 s"] = (c["max_ms"] or 0) <= 2000
            if c["refused_503"]:
                prompt = (c["refused_p50_ms"] or 0) <= PROMPT_503_MS
                found[f"{c['mode']}: 503s prompt (p50 <= {PROMPT_503_MS} ms)"] = prompt
                found[f"{c['mode']}: every 503 has Retry-After"] = (
                    c["refused_with_retry_after"] == c["refused_503"]
                )
        return found
    if scenario == "frozen":
        hybrid = result["frozen"]["hybrid"]
        put = result["frozen"]["put"]
        budget_ms = result["write_budget_s"] * 1000
        return {
            "hybrid answered within 2 s, each": hybrid["answered"] == hybrid["requests"]
            and max(hybrid["each_ms"]) <= 2000,
            "hybrid degraded": hybrid["degraded"] == hybrid["answered"],
            "PUT failed or stored within its budget": put["status"] is not None
            and put["ms"] <= budget_ms + 1000,
        }
    return {"cari search <= 3 s (median)": result["median_ms"]["cari search"] <= 3000}


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def format_cells(cells: Sequence[Mapping[str, Any]], label: str = "") -> list[str]:
    lines = []
    for c in cells:
        errors = ", ".join(f"{k} {v}" for k, v in c["errors"].items()) or "none"
        refused = (
            f"; 503 p50/max {_f(c['refused_p50_ms'])}/{_f(c['refused_max_ms'])} ms, "
            f"Retry-After on {c['refused_with_retry_after']}/{c['refused_503']}"
            if c["refused_503"]
            else ""
        )
        lines.append(
            f"  {label:<17} {c['mode']:<7} {c['clients']:>3} clients: {c['answered']:>5} answered "
            f"({c['answered_per_s']}/s, {c['degraded']} degraded), p50 {_f(c['p50_ms'])} "
            f"p95 {_f(c['p95_ms'])} max {_f(c['max_ms'])} ms; errors: {errors}{refused}"
        )
    return lines


def format_scenario(name: str, result: Mapping[str, Any]) -> list[str]:
    lines = [f"\n== {name}: target {TARGETS[name]}"]
    if name == "ingest":
        lines.append(f"  {result['rounds']} rounds, alone (ingestion stopped) and during, in turn")
        for label, ingestion in result["ingestions"].items():
            lines.append(f"  -- {label}")
            for state in STATES:
                lines += format_cells(ingestion[state], state)
            for mode, ratio in ingestion["p95_during_over_alone"].items():
                if ratio["p95"] is not None:
                    low, high = ratio["interval"]
                    lines.append(
                        f"  {mode}: p95 during / alone {ratio['p95']:.2f} [{low:.2f}, {high:.2f}]"
                    )
            progress = ingestion["ingestion"]
            lines.append(
                f"  cari ingest {progress['environment'] or '(defaults)'}: "
                f"{progress['stored_at_start']} -> {progress['stored_at_end']} documents stored "
                f"({progress['documents_per_s_running']}/s while running), still running at the "
                f"end: {progress['ran_throughout']}"
            )
    elif name == "clients":
        lines += format_cells(result["cells"])
        lines.append(
            f"  embedder failures (server /metrics): {result['embedder_failures'] or 'none'}"
        )
    elif name == "frozen":
        for embedder in ("healthy", "frozen"):
            for mode in ("hybrid", "vector"):
                r = result[embedder][mode]
                errors = ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "none"
                lines.append(
                    f"  {embedder:<8} {mode:<7} each ms {r['each_ms']}; answered {r['answered']}, "
                    f"degraded {r['degraded']}; errors: {errors}"
                )
            put = result[embedder]["put"]
            lines.append(
                f"  {embedder:<8} PUT     {put['ms']:,.1f} ms, status {put['status']} "
                f"{put['code'] or ''}, embedded: {put['embedded']}, warnings: {put['warnings']}"
            )
    else:
        for what, ms in result["wall_ms"].items():
            lines.append(f"  {what:<26} median {result['median_ms'][what]:>8,.1f} ms  (each {ms})")
        traced = result["traced"]
        lines.append(
            f"  traced (-X importtime, --explain): {traced['wall_ms']:,.1f} ms; slowest imports:"
        )
        lines += [
            f"    {row['module']:<28} {row['cumulative_ms']:>8,.1f} ms" for row in traced["imports"]
        ]
        lines.append(f"  the search's own stages (ms): {traced['search_timings_ms']}")
    lines += [f"  target {'MET' if ok else 'MISSED'}: {what}" for what, ok in result["met"].items()]
    load = result["load_average"]
    lines.append(
        f"  load average (1, 5, 15 min) before {' '.join(f'{x:.2f}' for x in load['before'])}, "
        f"after {' '.join(f'{x:.2f}' for x in load['after'])}; {result['seconds']} s"
    )
    return lines


async def scenarios(
    dsn: str,
    env: Mapping[str, str],
    args: argparse.Namespace,
    passages: Sequence[Passage],
    queries: Sequence[str],
) -> dict[str, Any]:
    """Each scenario asked for, on the corpus in `dsn`; its result, targets and load."""
    # Scenarios 3 and 4 take the questions from the end (their servers and processes cache
    # none anyway).
    once = queries[::-1]
    results: dict[str, Any] = {}
    for name in args.scenarios:
        before = os.getloadavg()
        started = time.perf_counter()
        result: dict[str, Any]
        if name == "ingest":
            result = await beside_ingestion(
                dsn, env, queries, passages, args.ingest_documents, args.duration, args.rounds
            )
        elif name == "clients":
            result = await many_clients(dsn, env, queries, args.clients, args.duration)
        elif name == "frozen":
            result = await frozen_embedder(dsn, env, once, passages, args.frozen_searches)
        else:
            result = await asyncio.to_thread(cold_start, dsn, env, once, args.cold_starts)
        result["met"] = met(name, result, args.clients)
        result["load_average"] = {"before": before, "after": os.getloadavg()}
        result["seconds"] = round(time.perf_counter() - started, 1)
        results[name] = result
        print("\n".join(format_scenario(name, result)), flush=True)
    return results


async def run(args: argparse.Namespace) -> None:
    began = time.perf_counter()
    settings = load_settings(reembed_interval_s=0, statement_timeout_ms=0, embedder="local")
    passages = load_passages()
    omp = harness.omp_threads()
    note = f"{os.cpu_count()} cores; OMP_NUM_THREADS {'unset' if omp is None else omp}"
    print(f"{note}; GOMP_SPINCOUNT {os.environ.get('GOMP_SPINCOUNT', 'unset (Cari: 10000)')}")
    async with fresh_runtime(DATABASE, settings) as rt:
        await build_corpus(rt, args.chunks, passages=passages)
        dsn = dsn_of(rt.pool)
    env = {**os.environ, "CARI_EMBEDDER": "local"}
    report = {
        "machine": {"cores": os.cpu_count(), "omp_num_threads": omp},
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "targets": TARGETS,
        "scenarios": await scenarios(dsn, env, args, passages, load_queries(args.queries)),
    }
    save(report, args.out)
    print(f"\nJSON: {shown(args.out)}; total runtime {time.perf_counter() - began:.0f} s")


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per cell")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--ingest-documents", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=4, help="scenario 1's alternations")
    parser.add_argument("--frozen-searches", type=int, default=8)
    parser.add_argument("--cold-starts", type=int, default=3)
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
