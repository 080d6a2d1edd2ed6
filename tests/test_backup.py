"""`cari db dump` and `cari db restore`: a real round trip through pg_dump and pg_restore on a
real database, driven as an operator would from the command line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import psycopg

from cari.db import embedded
from tests.conftest import cli_env
from tests.fake_openai import FakeOpenAI
from tests.test_ingest_cli import cari


def state(dsn: str) -> tuple[list[str], list[str], int, str]:
    """Collections, documents, postings and the BM25 statistics, as a restore must bring back."""
    with psycopg.connect(dsn) as conn:
        collections = [r[0] for r in conn.execute("SELECT name FROM collections ORDER BY 1")]
        documents = [r[0] for r in conn.execute("SELECT external_id FROM documents ORDER BY 1")]
        postings = conn.execute(  # posting rows, delta chunks and packed postings
            "SELECT (SELECT count(*) FROM postings) + (SELECT count(*) FROM bm25_delta)"
            " + (SELECT coalesce(sum(n), 0) FROM bm25_blocks)"
        ).fetchone()
        stats = [
            conn.execute("SELECT to_jsonb(s)::text FROM bm25_sizes s ORDER BY 1").fetchall(),
            conn.execute("SELECT to_jsonb(t)::text FROM bm25_terms t ORDER BY 1").fetchall(),
        ]
    assert postings is not None
    return collections, documents, int(postings[0]), json.dumps(stats)


def _keyword_extension(dsn: str) -> tuple[object, ...] | None:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'cari_bm25'"
        ).fetchone()


def test_a_restore_brings_back_exactly_what_was_dumped(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    env = cli_env(clean_env, dsn, fake)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, text in [
        ("tides.txt", "Tide tables for the northern harbour, spring and neap."),
        ("knots.txt", "A bowline makes a fixed loop at the end of a line."),
        ("fuel.txt", "Diesel fuel is sold at the harbour office until six."),
    ]:
        (corpus / name).write_text(text)
    assert cari(["ingest", str(corpus), "-c", "harbour", "--create"], env).returncode == 0
    before = state(dsn)
    backup = tmp_path / "cari.dump"
    dumped = cari(["db", "dump", str(backup)], env)
    assert dumped.returncode == 0, dumped.stderr
    assert backup.stat().st_size > 0
    # Cari's keyword extension (functions, no data) stays out: the backup restores on a server
    # without it, and Cari creates it after the restore where the server has it.
    listing = subprocess.run(
        [embedded.client_tool("pg_restore"), "--list", backup], capture_output=True, text=True
    )
    assert "EXTENSION" in listing.stdout and "cari_bm25" not in listing.stdout
    engine_before = _keyword_extension(dsn)

    # Changes after the backup: a restore undoes them.
    with psycopg.connect(dsn) as conn:
        conn.execute("DELETE FROM documents WHERE external_id LIKE %s", ("%knots.txt",))
    assert cari(["ingest", str(corpus), "-c", "other", "--create"], env).returncode == 0
    assert state(dsn) != before

    restored = cari(["db", "restore", str(backup)], env)
    assert restored.returncode == 0, restored.stderr
    assert state(dsn) == before
    assert _keyword_extension(dsn) == engine_before
    check = cari(["bm25", "check", "-c", "harbour"], env)
    assert check.returncode == 0, check.stdout + check.stderr
    found = cari(["search", "bowline loop", "-c", "harbour", "--mode", "keyword", "--json"], env)
    assert found.returncode == 0, found.stderr
    results = json.loads(found.stdout)["results"]
    assert results and results[0]["document_id"].endswith("knots.txt")


def test_a_bad_backup_is_refused_and_changes_nothing(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    env = cli_env(clean_env, dsn, fake)
    (tmp_path / "a.txt").write_text("Anchors hold in sand and mud.")
    assert cari(["ingest", str(tmp_path / "a.txt"), "-c", "c", "--create"], env).returncode == 0
    before = state(dsn)
    garbage = tmp_path / "garbage.dump"
    garbage.write_bytes(b"PGDMP" + bytes(range(256)) * 4)
    refused = cari(["db", "restore", str(garbage)], env)
    assert refused.returncode == 1
    assert refused.stderr.startswith("Error: pg_restore failed:"), refused.stderr
    missing = cari(["db", "restore", str(tmp_path / "nowhere.dump")], env)
    assert missing.returncode == 1 and "no backup at" in missing.stderr
    assert state(dsn) == before
