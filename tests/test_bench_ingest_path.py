"""The ingest-path benchmark on 40 records: every stage stores every chunk, with the vectors the
fast embedder answers, and the same rows reach the database through the writer and the CLI."""

from __future__ import annotations

import asyncio
import base64
import json
import math
from pathlib import Path

import httpx
import numpy as np
import psycopg
import pytest
from bench import fast_embedder, ingest_path

from tests.conftest import settings_for

TINY = Path(__file__).parent / "fixtures" / "beir-tiny"  # passages in the repo
RECORDS = 40
MAINTAINED = 15


def test_records_are_consecutive_windows_of_the_corpora() -> None:
    words = [
        word
        for line in (TINY / "corpus.jsonl").read_text().splitlines()
        for word in json.loads(line)["text"].split()
    ]
    assert len(words) == 102
    records = ingest_path.make_records(7, [TINY], words_per_record=20)
    assert [r["id"] for r in records] == [f"r{i}" for i in range(7)]
    assert [r["title"] for r in records] == [f"Record {i}" for i in range(7)]
    starts = [0, 20, 40, 60, 80, 18, 38]  # past the end, again from 100 mod (102 - 20)
    assert [r["text"] for r in records] == [" ".join(words[s : s + 20]) for s in starts]


def test_fast_embedder_answers_the_vectors_of_the_texts() -> None:
    texts = ["first text", "second text", "first text"]
    with ingest_path.fast_embedder() as env:
        url = env["CARI_EMBEDDING_BASE_URL"] + "/embeddings"
        for encoding in ("base64", "float"):
            body = {"input": texts, "model": "m", "encoding_format": encoding}
            data = httpx.post(url, json=body).json()["data"]
            assert [item["index"] for item in data] == [0, 1, 2]
            for item, text in zip(data, texts, strict=True):
                vector = item["embedding"]
                if encoding == "base64":
                    vector = np.frombuffer(base64.b64decode(vector), dtype="<f4")
                np.testing.assert_array_equal(
                    np.asarray(vector, dtype=np.float32), fast_embedder.vector_for(text)
                )
    first = fast_embedder.vector_for("first text")
    assert first.shape == (fast_embedder.DIMENSION,)
    assert math.isclose(float(np.linalg.norm(first)), 1.0, rel_tol=1e-6)
    assert not np.array_equal(first, fast_embedder.vector_for("second text"))
    with pytest.raises(httpx.ConnectError):  # stopped with the block
        httpx.post(url, json={"input": ["x"], "model": "m"})


def test_every_stage_stores_the_same_rows(
    server_url: str, clean_env: dict[str, str], bench_databases: None
) -> None:
    records = ingest_path.make_records(RECORDS, [TINY], words_per_record=60)
    prefix = "t_bench_ingest_path"
    with ingest_path.fast_embedder() as env:
        settings = settings_for(
            server_url,
            **{k.removeprefix("CARI_").lower(): v for k, v in env.items()},
            reembed_interval_s=0,
            statement_timeout_ms=0,
        )
        report = asyncio.run(
            ingest_path.run(
                records,
                maintained=MAINTAINED,
                batch_size=8,
                workers=2,
                language="english",
                settings=settings,
                env={**clean_env, **env},
                prefix=prefix,
            )
        )
    # 60 words fit one chunk: as many chunks as records, every one stored with its vector.
    assert (report.records, report.chunks, report.maintained_chunks) == (40, 40, 15)
    assert report.stored == {
        "writer_deferred": 40,
        "cli_bulk": 40,
        "writer_maintained": 15,
        "cli_maintained": 15,
        "http": 15,
    }
    rates = [
        report.raw_copy,
        report.raw_copy_no_postings,
        report.raw_copy_no_postings_no_gin,
        report.writer_load,
        report.writer_deferred,
        report.writer_maintained,
        report.cli_bulk,
        report.cli_bulk_own,
        report.cli_maintained,
        report.cli_maintained_own,
        report.http_batches,
    ]
    assert all(math.isfinite(rate) and rate > 0 for rate in rates)
    assert report.writer_deferred < report.writer_load  # the build's time counts
    assert report.cli_bulk < report.cli_bulk_own  # the start-up's too
    assert report.cli_maintained < report.cli_maintained_own
    # The test server lets the benchmark time the BM25 functions (its user is a superuser).
    assert set(report.functions) == {"bm25_compact", "bm25_index"}
    assert all(seconds > 0 for seconds in report.functions.values())

    def rows(stage: str) -> list[tuple[object, ...]]:
        dsn = psycopg.conninfo.make_conninfo(server_url, dbname=f"{prefix}_{stage}")
        with psycopg.connect(dsn) as conn:
            return conn.execute(
                "SELECT d.external_id, c.title, c.content, c.token_count, c.embedding::text,"
                " c.tsv FROM chunks AS c JOIN documents AS d ON d.id = c.document_id"
                " ORDER BY 1"
            ).fetchall()

    # The writer's precomputed vectors are the ones the CLI got from the embedder.
    assert rows("writer") == rows("cli_bulk")
    assert len(rows("writer")) == RECORDS
    assert rows("writer_hnsw") == rows("cli") == rows("http")
    with psycopg.connect(psycopg.conninfo.make_conninfo(server_url, dbname=f"{prefix}_cli")) as c:
        # Every chunk is indexed for keywords: in the delta, or folded into blocks.
        postings = c.execute(
            "SELECT count(DISTINCT s.chunk_id) FROM collections AS k"
            " CROSS JOIN LATERAL bm25_stored_postings(k.id) AS s"
        ).fetchone()
        index = c.execute("SELECT to_regclass('chunks_embedding_vector_384_idx')::text").fetchone()
    assert postings == (MAINTAINED,)
    assert index == ("chunks_embedding_vector_384_idx",)


def test_stages_sort_py_spy_samples_and_leave_waits_out() -> None:
    main = 'process 1:"cari ingest";thread (1): MainThread;run (cari/cli/common.py:85)'
    work = (
        f"{main};_ingest_batch (cari/ingest/bulk.py:156);Ingestor.ingest (cari/ingest/pipeline.py"
    )
    raw = "\n".join(
        [
            f"{main};_find_and_load (<frozen importlib._bootstrap>:1176) 30",
            f"{work}:72);Ingestor._chunk_all (cari/ingest/pipeline.py:102);"
            "chunk_document (cari/ingest/chunking.py:55) 50",
            # The hash computed inside the writer is the hash check's.
            f"{work}:82);write_documents (cari/ingest/store.py:150);"
            "NewDocument.content_hash (cari/ingest/store.py:60) 7",
            f"{work}:82);write_documents (cari/ingest/store.py:170);copy_to (psycopg/x.py:1) 20",
            f"{work}:111);OpenAIEmbedder.embed_documents (cari/embed.py:299);"
            "OpenAIEmbedder._vectors (cari/embed.py:400) 4",
            f"{work}:111);OpenAIEmbedder.embed_documents (cari/embed.py:299) 5",
            # A request in a task of its own: its stack starts at the task.
            "thread (1): MainThread;OpenAIEmbedder.embed_documents.<locals>.run (cari/embed.py:"
            "304);AsyncEmbeddings.create (openai/resources/embeddings.py:216) 6",
            f"{main};BaseEventLoop._run_once (asyncio/base_events.py:1922) 9",
            f"{main};BaseEventLoop._run_once (asyncio/base_events.py:1884);"
            "EpollSelector.select (selectors.py:468) 500",
            "thread (2): Thread-1;WorkerThread.run (anyio/_asyncio.py:1113);"
            "Queue.get (queue.py:171);Condition.wait (threading.py:327) 300",
        ]
    )
    seconds = ingest_path.stages(raw)
    expected = {
        "start-up (imports)": 0.3,
        "chunking + token counting": 0.5,
        "hash check": 0.07,
        "writer (upsert, COPY rows)": 0.2,
        "vector decoding": 0.04,
        "embedding requests (SDK, HTTP, JSON)": 0.11,
        "other (event loop, pool, I/O)": 0.09,
    }
    assert {k: v for k, v in seconds.items() if v} == pytest.approx(expected)
