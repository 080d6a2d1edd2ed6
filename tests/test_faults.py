"""Faults a running service must survive, through the real processes: its embedded PostgreSQL
killed while it takes writes and searches, a `--bulk` load beside live writes to another
collection, and a `--bulk` load killed mid-load. (A killed `cari ingest` without `--bulk` is
tests/test_ingest_cli.py's test_killed_ingest_leaves_no_partial_document; a frozen embedder is
tests/test_serving.py's.)"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from cari.db import embedded
from cari.db.vector_space import space
from cari.settings import load_settings
from tests.conftest import cli_env
from tests.fake_openai import FakeOpenAI
from tests.test_cli import CARI, http, run, serving
from tests.test_embedding_widths import pad, plan, profiles

# A write that waited for a lock held by a bulk load's index build, not merely a slow one: the
# speed of writes is a benchmark's figure (bench.faults), this only tells a wait from none.
LOCK_WAIT_S = 10.0


@dataclass(frozen=True, slots=True)
class Call:
    started: float
    elapsed: float
    status: int
    body: dict[str, object]


def call(method: str, url: str, body: object = None) -> Call:
    """One HTTP request, timed; a generous timeout so that a wait is measured, not cut."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("content-type", "application/json")
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    return Call(started, time.monotonic() - started, status, json.loads(raw or b"{}"))


class Load:
    """Threads sending writes (PUT of a new document each) and vector searches to a collection
    until stopped; every call is recorded."""

    def __init__(self, base: str, collection: str, writers: int, searchers: int) -> None:
        self.base = f"{base}/v1/collections/{collection}"
        self.stop = threading.Event()
        self.writes: list[tuple[str, Call]] = []
        self.searches: list[Call] = []
        self.threads = [threading.Thread(target=self._write, args=(w,)) for w in range(writers)] + [
            threading.Thread(target=self._search) for _ in range(searchers)
        ]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def _write(self, writer: int) -> None:
        n = 0
        while not self.stop.is_set():
            key = f"w{writer}-{n}"
            text = f"Note {n} from writer {writer} about harbour {n % 7} and tide {n % 5}."
            self.writes.append((key, call("PUT", f"{self.base}/documents/{key}", {"text": text})))
            n += 1

    def _search(self) -> None:
        while not self.stop.is_set():
            body = {"query": "harbour tide", "mode": "vector", "top_k": 3}
            self.searches.append(call("POST", f"{self.base}/search", body))
            time.sleep(0.02)


def test_postmaster_killed_under_load_loses_no_acknowledged_write(
    tmp_path: Path, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    data_dir = tmp_path / "data"
    env = {**clean_env, "CARI_DATA_DIR": str(data_dir), "CARI_EMBEDDING_MAX_RETRIES": "0"}
    env.update({f"CARI_{k.upper()}": str(v) for k, v in fake.settings().items()})
    with serving(env) as base:
        assert http("POST", f"{base}/v1/collections", {"name": "live"})[0] == 201
        pid_file = embedded.pgdata_path(data_dir) / "postmaster.pid"
        postmaster = int(pid_file.read_text().split()[0])
        with Load(base, "live", writers=3, searchers=1) as load:
            while sum(c.status < 300 for _, c in load.writes) < 20:
                time.sleep(0.05)
            os.kill(postmaster, signal.SIGKILL)
            killed = time.monotonic()
            while True:
                # A bound for a busy machine; the time it takes is bench.faults's figure.
                assert time.monotonic() - killed < 60, "not back within 60 s"
                status, _ = http("GET", f"{base}/readyz")
                if status == 200 and int(pid_file.read_text().split()[0]) != postmaster:
                    break
                time.sleep(0.1)
            back = time.monotonic()
            while sum(c.started > back and c.status < 300 for _, c in load.writes) < 20:
                assert time.monotonic() - back < 60, "no writes succeed after the restart"
                time.sleep(0.05)

        # Meanwhile only a truthful 503 (database unavailable), never a 500; once the service
        # is ready again, no error at all.
        calls = [c for _, c in load.writes] + load.searches
        assert {c.status for c in calls} <= {200, 201, 503}, sorted({c.status for c in calls})
        assert all(c.status == 503 for c in calls if c.status >= 300)
        after = [c for c in calls if c.started > back]
        assert after and all(c.status < 300 for c in after), [c.body for c in after]

        # Every acknowledged write is stored whole, and the BM25 statistics agree.
        acknowledged = {
            key: c.body["results"][0]["chunks"]  # type: ignore[index]
            for key, c in load.writes
            if c.status < 300
        }
        dsn = embedded.running_dsn(data_dir)
        assert dsn is not None
        with psycopg.connect(dsn) as conn:
            stored: dict[str, int] = dict(
                conn.execute(
                    "SELECT d.external_id, count(c.id) FROM documents d "
                    "LEFT JOIN chunks c ON c.document_id = d.id GROUP BY 1"
                ).fetchall()
            )
        assert {k: stored.get(k) for k in acknowledged} == acknowledged
        check = run(["bm25", "check"], env)
        assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("bulk_embedder", [None, "large"], ids=["same-width", "own-width"])
def test_a_bulk_load_leaves_other_collections_alone(
    tmp_path: Path,
    dsn: str,
    fake: FakeOpenAI,
    clean_env: dict[str, str],
    bulk_embedder: str | None,
) -> None:
    """Into a collection of the live one's width the load keeps the shared index; into a width
    of its own it drops and rebuilds that width's index, concurrently. Either way the live
    collection's writes never wait for it and its searches keep their index."""
    env = {**cli_env(clean_env, dsn, fake), "CARI_EMBEDDERS": json.dumps(profiles(fake))}
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(120):
        words = " ".join(f"term{i}x{j}" for j in range(30))
        (corpus / f"doc{i:03}.txt").write_text(f"Bulk document {i} about lighthouses.\n\n{words}.")
    narrow = space(384, load_settings())
    with serving(env) as base:
        assert http("POST", f"{base}/v1/collections", {"name": "live"})[0] == 201
        pad(dsn, "live", 384, 2000)  # enough rows that the planner prefers the index
        assert narrow.index_name("chunks") in plan(dsn, "live", narrow)
        create = ["--create"] + (["--embedder", bulk_embedder] if bulk_embedder else [])
        args = ["ingest", str(corpus), "-c", "bulk", *create, "--bulk", "--batch-size", "4"]
        fake.delay = 0.05  # each batch waits a little on the embedder: the load lasts seconds
        with Load(base, "live", writers=2, searchers=0) as load:
            bulk = subprocess.Popen(
                [*CARI, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            plans = []
            while bulk.poll() is None:
                # As autovacuum would, at a time of its choosing: with two collections in
                # the statistics a generic plan would sort the collection (Space.statement).
                # Like autovacuum it gives way to the index build rather than deadlock it.
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute("SET lock_timeout = '50ms'")
                    with contextlib.suppress(psycopg.errors.LockNotAvailable):
                        conn.execute("ANALYZE chunks")
                plans.append(plan(dsn, "live", narrow))
                time.sleep(0.2)
            ended = time.monotonic()
        output = bulk.communicate()[0]
        assert bulk.returncode == 0, output

        during = [c for _, c in load.writes if c.started < ended]
        assert len(during) >= 5 and len(plans) >= 3
        assert all(c.status in (200, 201) for _, c in load.writes), [
            c.body for _, c in load.writes if c.status >= 300
        ]
        assert max(c.elapsed for c in during) < LOCK_WAIT_S
        assert all(narrow.index_name("chunks") in p for p in plans), [
            p for p in plans if narrow.index_name("chunks") not in p
        ][:1]

        # The bulk collection's index is back and valid, and the live writes are stored.
        width = space(3072 if bulk_embedder else 384, load_settings())
        with psycopg.connect(dsn) as conn:
            row = conn.execute(
                "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)",
                (width.index_name("chunks"),),
            ).fetchone()
            (documents,) = conn.execute(
                "SELECT count(*) FROM documents d JOIN collections k ON k.id = d.collection_id "
                "WHERE k.name = 'bulk'"
            ).fetchone() or (0,)
        assert row == (True,) and documents == 120
        pad(dsn, "bulk", width.dimension, 300 if bulk_embedder else 2000)
        assert width.index_name("chunks") in plan(dsn, "bulk", width)
        assert narrow.index_name("chunks") in plan(dsn, "live", narrow)
        for key, _ in load.writes[-3:]:
            assert http("GET", f"{base}/v1/collections/live/documents/{key}")[0] == 200


def test_a_killed_bulk_load_is_resumed_and_its_index_restored(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    """SIGKILL mid-load, with the width's index dropped: the run again stores the rest, skips
    what was stored, and builds the index."""
    env = cli_env(clean_env, dsn, fake)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(40):
        (corpus / f"doc{i:02}.txt").write_text(f"Bulk document {i} about lighthouse {i}.")
    args = ["ingest", str(corpus), "-c", "bulk", "--create", "--bulk", "--batch-size", "2"]
    index = space(384, load_settings()).index_name("chunks")

    def stored() -> tuple[int, bool | None]:
        with psycopg.connect(dsn) as conn:
            (documents,) = conn.execute("SELECT count(*) FROM documents").fetchone() or (0,)
            valid = conn.execute(
                "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (index,)
            ).fetchone()
        return int(documents), valid[0] if valid else None

    fake.delay = 0.3  # each batch waits on the embedder: the kill lands mid-load
    process = subprocess.Popen([*CARI, *args], env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while stored()[0] < 4:
        assert process.poll() is None, "the load finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    documents, valid = stored()
    assert 4 <= documents < 40 and valid is None  # dropped for the load, not rebuilt

    fake.delay = 0
    resumed = subprocess.run(
        [*CARI, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"({40 - documents} new, 0 updated, {documents} unchanged)" in resumed.stderr
    assert stored() == (40, True)
