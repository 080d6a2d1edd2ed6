"""bench.keyword_builds on a small Zipf corpus: two builds of the extension, each session running
its own, the same answers from both, and the walk's counters."""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest
from bench import keyword, keyword_builds
from pgvector.psycopg import register_vector_async

from cari.db import extension
from cari.db.embedded import client_tool
from cari.db.queries import query

CHUNKS = 2_000
QUERIES = 8


def _load(dsn: str, corpus: keyword.Corpus) -> None:
    async def run() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await register_vector_async(conn)
            collection_id, _, _ = await keyword.load(
                conn, corpus, "english", load_baseline=False, fold_every=0
            )
            await keyword.fold(conn, collection_id)

    asyncio.run(run())


def _local_server(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """Whether the server runs on this machine (its data folder is here), so it can load a
    library built here."""
    row = conn.execute("SELECT current_setting('data_directory')").fetchone()
    return row is not None and Path(str(row[0]), "PG_VERSION").is_file()


def test_each_session_runs_its_own_build_and_both_answer_alike(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        if conn.execute(query("keyword_engine")).fetchone() is None:
            pytest.skip("the server has no cari_bm25 extension (no C compiler?)")
        if not _local_server(conn):
            pytest.skip("the server runs elsewhere: it cannot load a library built here")
    corpus = keyword.zipf_corpus(CHUNKS, QUERIES, seed=1)
    _load(dsn, corpus)
    # Not pytest's tmp_path: the embedded server may run as a user of its own, who must read it.
    root = Path(tempfile.mkdtemp(prefix="cari-test-builds-"))
    try:
        # The working tree's sources with one comment more: a build of its own, in a folder of
        # its own, so each session's library can be told apart.
        root.chmod(0o755)
        variant = root / "variant"
        shutil.copytree(extension.sources(), variant)
        with (variant / "bm25topk.c").open("a") as source:
            source.write("/* a variant */\n")
        libs = {
            "base": keyword_builds.build(root, "HEAD"),
            "tree": extension.build_in(root / "builds", client_tool("pg_config"), variant).folder
            / "lib",
        }
        assert libs["base"] != libs["tree"]
        sessions = {name: keyword_builds.session(dsn, lib) for name, lib in libs.items()}
        collection_id = keyword_builds.collection(sessions["base"])
        kinds = asyncio.run(
            keyword_builds.zipf_questions(dsn, corpus, collection_id, "english", QUERIES, 1)
        )
        assert set(kinds) == {"typical", "common-word"}
        params = {"collection_id": collection_id, "candidates": 10}
        for kind, questions in kinds.items():
            assert len(questions) == QUERIES
            times, differing, tops = keyword_builds.measure(
                sessions, params, questions, 2, random.Random(1)
            )
            assert differing == 0
            assert tops["base"] == tops["tree"] and len(tops["tree"]) == QUERIES
            assert {name: len(t) for name, t in times.items()} == {"base": 16, "tree": 16}
            walks = {
                name: keyword_builds.counters(conn, params, questions)
                for name, conn in sessions.items()
            }
            for walk in walks.values():
                rows, windows, _, _, candidates, _ = walk
                assert rows > 0 and windows > 0 and candidates > 0
            lines = keyword_builds.report(kind, times, walks, differing)
            assert lines[0] == f"{kind}:" and "answers differing: 0 of 16" in lines[-1]
        for name, conn in sessions.items():
            # The backend mapped the library of its session's build, and no other.
            pid = conn.info.backend_pid
            maps = Path(f"/proc/{pid}/maps").read_text()
            loaded = {line.split()[-1] for line in maps.splitlines() if "cari_bm25" in line}
            assert loaded == {str(libs[name] / "cari_bm25.so")}
            conn.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
