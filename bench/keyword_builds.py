"""Two builds of the keyword extension on one database: the keyword statement's time with each.

    python -m bench.keyword_builds --base REV [--database cari_bench_load] [--questions search]
                                   [--queries 200] [--candidates 100] [--rounds 3]
                                   [--language english] [--chunks 100000] [--seed 1] [--peer]

A change to `cari_bm25`'s walk is measured against its base in one run, on one corpus, with the
same questions alternated between the two builds, so the machine's drift falls on both.

- **builds**: `ext/cari_bm25` at git revision `--base` (`git archive`) and in the working tree,
  each built with PGXS against the embedded server's `pg_config` (`cari.db.extension`) into a
  temporary folder, removed at the end. Both must be the same extension version: the database's
  SQL functions are the installed version's.
- **database**: one a benchmark left on DATABASE_URL's server (run that benchmark with the same
  DATABASE_URL: without one it uses a throwaway server), reached as a superuser, who may set
  `dynamic_library_path` for a session: one session per build sets it to that build's folder
  before its first search, so its backend loads that build.
- **questions** (`--questions`): `search`, `bench.search.load_queries(--queries)` on the
  collection `bench` of `cari_bench_load` (which `bench.load` leaves), as written and
  misspelled as `bench.typos` misspells them (typo corrections in the walk); `zipf`, the typical and
  common-word queries of `bench.keyword --corpus zipf --keep` (database
  `cari_bench_keyword_zipf_<--language>`), made again from `--chunks` and `--seed` as
  `bench.keyword` makes them.
- **measure**: the service's keyword statement (`bm25.keyword_statement("cari_bm25")`) at
  `--candidates`, each question on both builds in a random order, `--rounds` times, timed by
  the client around executing and fetching (the question's lexemes, `query_lexemes.sql`, read
  once beforehand: the same for both builds, not timed); every answer of one build is
  compared with the other's (the same rows, scores included: a change to the walk must not
  change a double).
  Then one untimed pass per build at DEBUG1, whose notices give the walk's counters.
- **peer** (`--peer`, zipf questions): the bm25s peer of `bench.keyword --peer`
  (`bench/keyword_peer.py`) on the same questions, in this process after the builds, against
  the working tree's last round: its times and its top 10, compared with the peer's.

Prints, per kind of question and build, p50/p95/p99/mean, the working tree's over the base's,
the walk's counters summed over the questions, and the calls whose answers differed.
"""

from __future__ import annotations

import asyncio
import io
import random
import re
import shutil
import statistics
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench import harness, keyword
from bench import search as synthetic
from bench.typos import misspell
from cari.db import embedded, extension
from cari.db.queries import query
from cari.search import bm25, lexemes
from cari.settings import load_settings

# What bm25_topk reports at DEBUG1, summed per build.
COUNTERS = re.compile(
    r"(\d+) rows, (\d+) windows \((\d+) skipped\), (\d+) sub-blocks decoded, "
    r"(\d+) candidates \((\d+) pruned\)"
)
COUNTER_NAMES = ("rows", "windows", "skipped", "sub-blocks decoded", "candidates", "pruned")

Conn = psycopg.Connection[Any]
Top = list[tuple[int, float]]


def build(root: Path, base: str | None) -> Path:
    """The folder of the library built from revision `base`'s sources, or the working tree's,
    under `root`, which the server's user may then enter (a root's embedded server runs as a
    user of its own)."""
    root.chmod(0o755)
    src = None
    if base is not None:
        archive = subprocess.run(
            ["git", "-C", str(harness.ROOT), "archive", base, f"ext/{extension.NAME}"],
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(root / "base", filter="data")
        src = root / "base" / "ext" / extension.NAME
    built = extension.build_in(root / "builds", embedded.client_tool("pg_config"), src)
    return built.folder / "lib"


def session(dsn: str, lib: Path) -> Conn:
    """An autocommit session whose backend loads `cari_bm25` from `lib`."""
    conn = psycopg.connect(dsn, autocommit=True)
    path = sql.Literal(f"{lib}:$libdir")
    conn.execute(sql.SQL("SET dynamic_library_path = {}").format(path))
    return conn


def collection(conn: Conn) -> int:
    """The id of the collection `bench`, which both `bench.search` and `bench.keyword` load."""
    row = conn.execute("SELECT id FROM collections WHERE name = %s", (keyword.COLLECTION,))
    found = row.fetchone()
    if found is None:
        raise SystemExit(f"no collection {keyword.COLLECTION!r}: run the benchmark that loads it")
    return int(found[0])


async def zipf_questions(
    dsn: str, corpus: keyword.Corpus, collection_id: int, language: str, count: int, seed: int
) -> dict[str, list[str]]:
    """bench.keyword's typical and common-word queries for its zipf `corpus`."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        worst = await keyword.worst_queries(conn, corpus, collection_id, language, count, seed)
    return {"typical": corpus.typical[:count], "common-word": worst}


async def peer_lines(
    dsn: str,
    corpus: keyword.Corpus,
    language: str,
    cari: dict[str, tuple[list[str], list[Top], list[float]]],
) -> list[str]:
    """The bm25s peer on each kind's questions against the working tree's times and tops."""
    from bench import keyword_peer

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        return await keyword_peer.compare(conn, corpus, language, cari)


def measure(
    sessions: dict[str, Conn],
    params: dict[str, Any],
    questions: Sequence[str],
    rounds: int,
    rng: random.Random,
) -> tuple[dict[str, list[float]], int, dict[str, list[Top]]]:
    """Each build's milliseconds per call, how many questions' answers differed, and each
    build's top 10 per question (its last round's)."""
    statement = bm25.keyword_statement("cari_bm25")
    asked = lexemes_of(next(iter(sessions.values())), params, questions)
    times: dict[str, list[float]] = {name: [] for name in sessions}
    tops: dict[str, list[Top]] = {}
    differing = 0
    for _ in range(rounds):
        tops = {name: [] for name in sessions}
        for question in questions:
            order = list(sessions)
            rng.shuffle(order)
            answers: dict[str, list[Any]] = {}
            for name in order:
                started = time.perf_counter()
                cur = sessions[name].execute(statement, {**params, **asked[question]})
                answers[name] = cur.fetchall()
                times[name].append(harness.since_ms(started))
            first = answers[order[0]]
            differing += any(answer != first for answer in answers.values())
            for name, answer in answers.items():
                tops[name].append([(int(r[0]), float(r[1])) for r in answer[: keyword.TOP]])
    return times, differing, tops


def lexemes_of(
    conn: Conn, params: dict[str, Any], questions: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Each question's lexemes as the keyword statement takes them, read once: the analysis is
    the same for every build, so the builds are timed on their walk alone."""
    analysis = query("query_lexemes")
    return {
        question: lexemes.from_rows(
            conn.execute(
                analysis, {"collection_id": params["collection_id"], "query": question}
            ).fetchall()
        ).params()
        for question in questions
    }


def counters(conn: Conn, params: dict[str, Any], questions: Sequence[str]) -> list[int]:
    """The walk's counters summed over one pass of `questions`."""
    notes: list[str] = []

    def keep(diagnostic: psycopg.errors.Diagnostic) -> None:
        notes.append(diagnostic.message_primary or "")

    statement = bm25.keyword_statement("cari_bm25")
    asked = lexemes_of(conn, params, questions)
    conn.add_notice_handler(keep)
    conn.execute("SET client_min_messages = debug1")
    try:
        for question in questions:
            conn.execute(statement, {**params, **asked[question]}).fetchall()
    finally:
        conn.execute("RESET client_min_messages")
        conn.remove_notice_handler(keep)
    totals = [0] * len(COUNTER_NAMES)
    for note in notes:
        if found := COUNTERS.search(note):
            totals = [t + int(v) for t, v in zip(totals, found.groups(), strict=True)]
    return totals


def report(
    kind: str, times: dict[str, list[float]], walks: dict[str, list[int]], differing: int
) -> list[str]:
    """The lines of one kind of question: each build's figures, then the second's over the
    first's (the working tree's over the base's)."""
    points = {name: harness.percentiles(values) for name, values in times.items()}
    lines = [f"  {'build':<14} {'p50':>7} {'p95':>7} {'p99':>7} {'mean':>7} ms   walk, summed"]
    for name, values in times.items():
        p50, p95, p99 = points[name]
        walk = ", ".join(f"{v:,} {n}" for n, v in zip(COUNTER_NAMES, walks[name], strict=True))
        lines.append(
            f"  {name:<14} {p50:7.2f} {p95:7.2f} {p99:7.2f} {statistics.fmean(values):7.2f}"
            f"      {walk}"
        )
    base, tree = times
    ratios = ", ".join(
        f"{label} {a / b:.2f}x"
        for label, a, b in zip(("p50", "p95", "p99"), points[tree], points[base], strict=True)
    )
    calls = len(times[base])
    lines.append(f"  {tree} / {base}: {ratios}; answers differing: {differing} of {calls}")
    return [f"{kind}:", *lines]


def run(args: Any) -> None:
    settings = load_settings()
    if not settings.database_url:
        # Without it the benchmarks ran on a throwaway server, gone with its databases.
        raise SystemExit("set DATABASE_URL to the server the benchmark left its database on")
    dsn = psycopg.conninfo.make_conninfo(settings.database_url, dbname=args.database)
    root = Path(tempfile.mkdtemp(prefix="cari-keyword-builds-"))
    try:
        libs = {f"base {args.base}": build(root, args.base), "working tree": build(root, None)}
        sessions = {name: session(dsn, lib) for name, lib in libs.items()}
        collection_id = collection(next(iter(sessions.values())))
        corpus = None
        if args.questions == "search":
            written = synthetic.load_queries(args.queries)
            kinds = {
                "bench.search": written,
                "bench.search, misspelled": [misspell(str(i), t) for i, t in enumerate(written)],
            }
        else:
            corpus = keyword.build_corpus("zipf", args.chunks, args.queries, args.seed)
            kinds = asyncio.run(
                zipf_questions(dsn, corpus, collection_id, args.language, args.queries, args.seed)
            )
        params = {"collection_id": collection_id, "candidates": args.candidates}
        print(
            f"{args.database}, collection {collection_id}: {args.rounds} rounds, "
            f"{args.candidates} candidates; load average {harness.load_average()}",
            flush=True,
        )
        rng = random.Random(args.seed)
        cari: dict[str, tuple[list[str], list[Top], list[float]]] = {}
        for kind, questions in kinds.items():
            times, differing, tops = measure(sessions, params, questions, args.rounds, rng)
            walks = {name: counters(conn, params, questions) for name, conn in sessions.items()}
            print("\n".join(report(f"{kind}, {len(questions)} questions", times, walks, differing)))
            cari[kind] = (questions, tops["working tree"], times["working tree"][-len(questions) :])
        print(f"load average {harness.load_average()}", flush=True)
        if args.peer and corpus is not None:
            print("\n".join(asyncio.run(peer_lines(dsn, corpus, args.language, cari))))
        for conn in sessions.values():
            conn.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--base", required=True, help="the git revision to measure against")
    parser.add_argument("--database", default="cari_bench_load")
    parser.add_argument("--questions", choices=("search", "zipf"), default="search")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--language", choices=keyword.LANGUAGES, default="english")
    parser.add_argument("--chunks", type=int, default=100_000, help="zipf: the corpus's size")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--peer", action="store_true", help="zipf: the bm25s peer, same questions")
    args = parser.parse_args()
    if args.peer and args.questions != "zipf":
        parser.error("--peer needs --questions zipf")
    run(args)


if __name__ == "__main__":
    main()
