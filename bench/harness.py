"""What every benchmark shares: the database and runtime it runs in, the BEIR datasets, timing,
percentiles and bootstrap intervals, the machine's load and thread settings, and the
`python -m bench.<name>` entry point.

A benchmark runs in a fresh database on DATABASE_URL, or on a throwaway embedded server whose
folder is removed at exit, and builds what it works with through `cari.runtime.open_runtime`
(`fresh_runtime`, `runtime_on`), which closes it at the block's end.
"""

from __future__ import annotations

import argparse
import atexit
import csv
import json
import os
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from cari.db import embedded, migrations
from cari.embed import Embedder
from cari.runtime import Runtime, open_runtime
from cari.settings import Settings

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "eval" / "datasets"
RESULTS = ROOT / "bench" / "results"

Qrels = dict[str, dict[str, int]]  # query id -> document id -> grade
Ranking = dict[str, list[str]]  # query id -> document ids, best first


# -- the database and the runtime ---------------------------------------------------------------

_embedded: list[str] = []  # the throwaway server's DSN, once started: one per process


def server_dsn(settings: Settings) -> str:
    """DATABASE_URL's server, or the throwaway embedded one (started at the first call)."""
    if settings.database_url:
        return settings.database_url
    if not _embedded:
        folder = Path(tempfile.mkdtemp(prefix="cari-bench-"))
        # Registered before the server's own exit handler, so it runs after the server stops.
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _embedded.append(
            embedded.start(folder, shared_buffers_mb=settings.embedded_shared_buffers_mb)
        )
    return _embedded[0]


def fresh_database(name: str, settings: Settings) -> str:
    """The DSN of a new, migrated database called `name` (replacing one an earlier run left)."""
    server = server_dsn(settings)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = psycopg.conninfo.make_conninfo(server, dbname=name)
    migrations.upgrade(dsn, settings)
    return dsn


@asynccontextmanager
async def runtime_on(
    dsn: str, settings: Settings, *, wrap_embedder: Callable[[Embedder], Embedder] | None = None
) -> AsyncIterator[Runtime]:
    """A runtime on the database `dsn`, closed (pools, embedders, clients) at the block's end."""
    async with open_runtime(settings, dsn=dsn, wrap_embedder=wrap_embedder) as rt:
        yield rt


@asynccontextmanager
async def fresh_runtime(
    name: str, settings: Settings, *, wrap_embedder: Callable[[Embedder], Embedder] | None = None
) -> AsyncIterator[Runtime]:
    """A runtime on a new, migrated database called `name`."""
    dsn = fresh_database(name, settings)
    async with runtime_on(dsn, settings, wrap_embedder=wrap_embedder) as rt:
        yield rt


def dsn_of(pool: AsyncConnectionPool) -> str:
    """The connection string a runtime's pool was opened on (always a string in a runtime)."""
    conninfo = pool.conninfo
    if not isinstance(conninfo, str):
        raise TypeError("the pool was opened on a connection-string callable")
    return conninfo


# -- the BEIR datasets --------------------------------------------------------------------------


def default_language(dataset: Path) -> str:
    return "indonesian" if "tydi" in dataset.name.lower() else "english"


def load_queries(dataset: Path) -> dict[str, str]:
    """Query id -> text, in file order."""
    queries: dict[str, str] = {}
    with (dataset / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                row = json.loads(line)
                queries[str(row["_id"])] = str(row["text"])
    return queries


def load_qrels(dataset: Path, split: str) -> Qrels:
    """`qrels/<split>.tsv` (header `query-id corpus-id score`) as {query: {document: grade}}."""
    qrels: Qrels = {}
    with (dataset / "qrels" / f"{split}.tsv").open(encoding="utf-8", newline="") as lines:
        rows = csv.reader(lines, delimiter="\t")
        header = next(rows, None)
        if header is None or [h.strip() for h in header[:3]] != [
            "query-id",
            "corpus-id",
            "score",
        ]:
            raise ValueError(f"qrels/{split}.tsv: expected the header 'query-id corpus-id score'")
        for row in rows:
            if row:
                qrels.setdefault(row[0].strip(), {})[row[1].strip()] = int(float(row[2]))
    return qrels


def corpus_records(dataset: Path) -> Iterator[dict[str, str]]:
    """Each record of `corpus.jsonl` as its id, title and text (empty strings where missing)."""
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                row = json.loads(line)
                yield {
                    "id": str(row["_id"]),
                    "title": str(row.get("title") or ""),
                    "text": str(row.get("text") or ""),
                }


def datasets_with(split: str, root: Path = DATASETS) -> list[Path]:
    """Every BEIR folder under `root` that has judgements for `split`, by name."""
    return sorted(d for d in root.iterdir() if (d / "qrels" / f"{split}.tsv").exists())


def judged_datasets(root: Path = DATASETS) -> list[Path]:
    """Every BEIR folder under `root` that has judgements, by name."""
    return sorted(d for d in root.iterdir() if (d / "qrels").is_dir())


# -- timing and statistics ----------------------------------------------------------------------


def since_ms(started: float) -> float:
    """Milliseconds since `started`, a `time.perf_counter()` reading."""
    return (time.perf_counter() - started) * 1000


async def timed(work: Awaitable[T]) -> tuple[float, T]:
    """Milliseconds from now until `work` (a coroutine not started yet) is done, and its value."""
    started = time.perf_counter()
    value = await work
    return since_ms(started), value


async def fetch_ms(conn: Any, statement: Any, params: dict[str, Any]) -> float:
    """Milliseconds to run `statement` on `conn` and fetch every row."""
    started = time.perf_counter()
    cur = await conn.execute(statement, params)
    await cur.fetchall()
    return since_ms(started)


def p95(values: Sequence[float]) -> float:
    """The 95th percentile by `statistics`' exclusive quantiles."""
    return statistics.quantiles(values, n=20)[-1]


def summary_ms(values: Sequence[float]) -> str:
    """Mean, median and p95 of milliseconds, in one line."""
    mean, median = statistics.fmean(values), statistics.median(values)
    return f"mean {mean:6.2f} ms, p50 {median:6.2f}, p95 {p95(values):6.2f}"


def percentiles(values: Sequence[float], points: Sequence[float] = (50, 95, 99)) -> list[float]:
    """numpy's (linearly interpolated) percentiles of `values` at `points`."""
    return [float(p) for p in np.percentile(values, list(points))]


def resampled_means(values: Sequence[float], rounds: int, rng: np.random.Generator) -> Any:
    """The means of `rounds` bootstrap resamples of `values` (an array of `rounds` floats)."""
    array = np.asarray(values, dtype=float)
    return array[rng.integers(0, len(array), (rounds, len(array)))].mean(axis=1)


# -- text ---------------------------------------------------------------------------------------

# PostgreSQL's english.stop (the 127 words `english` drops), as in the file.
_ENGLISH_STOP_TEXT = (
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself "
    "she her hers herself it its itself they them their theirs themselves what which who whom "
    "this that these those am is are was were be been being have has had having do does did "
    "doing a an the and but if or because as until while of at by for with about against between "
    "into through during before after above below to from up down in out on off over under "
    "again further then once here there when where why how all any both each few more most "
    "other some such no nor not only own same so than too very s t can will just don should now"
)
ENGLISH_STOP_WORDS = tuple(_ENGLISH_STOP_TEXT.split())


# -- the machine --------------------------------------------------------------------------------


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as `uptime` shows them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# What the local model's OpenMP runtime reads: its threads, and how long idle ones spin.
OMP_VARIABLES = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def omp_threads() -> str | None:
    """OMP_NUM_THREADS as set for the local model's OpenMP threads, None when unset."""
    return os.environ.get("OMP_NUM_THREADS")


def omp_note(unset: str = "unset") -> str:
    """OMP_NUM_THREADS as a report shows it, `unset` when it is not set."""
    threads = omp_threads()
    return unset if threads is None else threads


def without_omp(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the OpenMP variables: the model's own defaults apply."""
    return {k: v for k, v in env.items() if k not in OMP_VARIABLES}


def shown(path: Path) -> str:
    """`path` relative to the repository where it lies inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


# -- plans --------------------------------------------------------------------------------------

_VECTOR_LITERAL = re.compile(r"'\[[-0-9.e,]+\]'::vector")


async def explain(conn: Any, statement: sql.Composable, params: dict[str, Any]) -> list[str]:
    """`EXPLAIN (ANALYZE, BUFFERS)` of `statement`: the plan's lines, with a query vector's
    numbers elided."""
    cur = await conn.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + statement, params)
    return [_VECTOR_LITERAL.sub("'[...]'::vector", str(row[0])) for row in await cur.fetchall()]


# -- the command --------------------------------------------------------------------------------


def parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser described by the first line of a benchmark's docstring."""
    return argparse.ArgumentParser(description=(doc or "").splitlines()[0])


def dataset_options(parser: argparse.ArgumentParser, *, split: bool = True) -> None:
    """`--dataset DIR` (repeatable; the caller picks the default sets) and `--split`."""
    parser.add_argument(
        "--dataset", type=Path, action="append", help="a BEIR-format folder (repeatable)"
    )
    if split:
        parser.add_argument("--split", default="test", help="qrels/<split>.tsv (default: test)")
