"""`cari ingest` and `cari reembed` as a batch job runs them: real subprocesses, real PostgreSQL,
a real local HTTP embedding service (the OpenAI-compatible fake)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from cari.ingest import files
from cari.ingest.bulk import _next_batch, failure_reason
from cari.ingest.formats import Section
from cari.ingest.pipeline import chunk
from cari.ingest.store import NewDocument
from cari.runtime import make_embedder
from tests.conftest import cli_env, settings_for
from tests.fake_openai import FakeOpenAI, Reply
from tests.test_formats import make_pdf

CARI = [sys.executable, "-m", "cari.cli"]


def cari(
    args: list[str], env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CARI, *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def counts(dsn: str) -> tuple[int, int, int]:
    """Documents, chunks, chunks without a vector."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks), "
            "(SELECT count(*) FROM chunks WHERE embedding IS NULL)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def write_corpus(folder: Path) -> None:
    (folder / "notes").mkdir(parents=True)
    (folder / "notes" / "plain.txt").write_text("Plain text about tide tables and harbours.")
    (folder / "guide.md").write_text("# Sailing guide\n\nReef early.\n\n## Knots\n\nBowline.\n")
    (folder / "page.html").write_text(
        "<html><head><title>Harbour page</title><script>var x = 'secretcode';</script></head>"
        "<body><h1>Harbour</h1><p>Moorings &amp; fuel.</p></body></html>"
    )
    records = [
        {"id": "r1", "title": "Record one", "text": "Anchors hold in sand.", "metadata": {"n": 1}},
        {"id": "r2", "content": "Chains rust in salt water."},
        {"id": "r3", "text": "bad metadata", "metadata": "nope"},
    ]
    (folder / "records.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    (folder / "broken.txt").write_bytes(b"valid start \xff\xfe invalid utf-8")
    (folder / "manual.pdf").write_bytes(
        make_pdf(["Page one tells about anchors.", "Page two tells about sails."], "Manual")
    )
    (folder / "ignored.bin").write_bytes(b"\x00\x01")


def test_ingest_folder_reports_failures_and_resumes(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    write_corpus(tmp_path / "corpus")
    env = cli_env(clean_env, dsn, fake)
    first = cari(["ingest", str(tmp_path / "corpus"), "-c", "docs", "--create"], env)
    assert first.returncode == 1, first.stderr  # two bad inputs
    assert "2 failed" in first.stderr
    assert "broken.txt: content: not valid UTF-8" in first.stderr
    assert "records.jsonl line 3: metadata: " in first.stderr
    assert "Traceback" not in first.stderr
    assert "6 documents (6 new, 0 updated, 0 unchanged)" in first.stderr

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT external_id, title, source FROM documents ORDER BY external_id"
        ).fetchall()
        html = conn.execute(
            "SELECT string_agg(content, ' ') FROM chunks c JOIN documents d "
            "ON d.id = c.document_id WHERE d.external_id = 'page.html'"
        ).fetchone()
    assert [r[0] for r in rows] == [
        "guide.md",
        "manual.pdf",
        "notes/plain.txt",
        "page.html",
        "r1",
        "r2",
    ]
    titles = {r[0]: r[1] for r in rows}
    assert titles["guide.md"] == "Sailing guide"
    assert titles["notes/plain.txt"] == "plain"
    assert titles["page.html"] == "Harbour page"
    assert html is not None and "secretcode" not in html[0] and "Moorings & fuel." in html[0]
    assert counts(dsn)[2] == 0
    with psycopg.connect(dsn) as conn:
        pages = conn.execute(
            "SELECT c.metadata->>'page', c.content FROM chunks c JOIN documents d "
            "ON d.id = c.document_id WHERE d.external_id = 'manual.pdf' ORDER BY c.ordinal"
        ).fetchall()
    assert pages == [
        ("1", "Page one tells about anchors."),
        ("2", "Page two tells about sails."),
    ]

    # Running the same command again skips everything stored unchanged.
    requests = len(fake.requests)
    again = cari(["ingest", str(tmp_path / "corpus"), "-c", "docs"], env)
    assert "6 documents (0 new, 0 updated, 6 unchanged)" in again.stderr
    assert len(fake.requests) == requests


def test_ingest_jsonl_from_stdin_and_globs(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    env = cli_env(clean_env, dsn, fake)
    lines = "\n".join(json.dumps({"id": f"s{i}", "text": f"Line {i} of stdin."}) for i in range(5))
    result = cari(["ingest", "-", "-c", "s", "--create", "--language", "english"], env, lines)
    assert result.returncode == 0, result.stderr
    assert counts(dsn)[0] == 5

    (tmp_path / "a.md").write_text("# A\n\nalpha")
    (tmp_path / "b.md").write_text("# B\n\nbravo")
    result = cari(["ingest", str(tmp_path / "*.md"), "-c", "s"], env)
    assert result.returncode == 0, result.stderr
    assert counts(dsn)[0] == 7

    missing = cari(["ingest", str(tmp_path / "nothing-*.txt"), "-c", "s"], env)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1].startswith("Error: PATH: ")
    unknown = cari(["ingest", str(tmp_path / "a.md"), "-c", "nope"], env)
    assert unknown.returncode == 1
    assert "collection 'nope' does not exist" in unknown.stderr


def test_create_names_the_collections_embedder(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    env = {**cli_env(clean_env, dsn, fake), "OMP_NUM_THREADS": "1"}
    (tmp_path / "a.md").write_text("# Tides\n\nSpring tides follow the full moon.")
    unknown = cari(["ingest", str(tmp_path), "-c", "t", "--create", "--embedder", "nope"], env)
    assert unknown.returncode == 1
    assert "embedder 'nope' is not configured (CARI_EMBEDDERS" in unknown.stderr
    assert counts(dsn) == (0, 0, 0)

    # The server's default is the embedding service; this collection names the bundled model.
    local = cari(["ingest", str(tmp_path), "-c", "t", "--create", "--embedder", "local"], env)
    assert local.returncode == 0, local.stderr
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT embedder FROM collections WHERE name = 't'").fetchone()
    assert row == ("local",)
    assert counts(dsn) == (1, 1, 0) and fake.requests == []  # embedded by the local model


def test_killed_ingest_leaves_no_partial_document(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(30):
        words = " ".join(f"word{i}x{j}" for j in range(40 + 7 * i))
        (corpus / f"doc{i:02}.txt").write_text(f"Document {i}.\n\n{words}.")
    fake.delay = 0.3  # each batch waits on the embedder: the kill lands mid-load
    env = cli_env(clean_env, dsn, fake)
    args = ["ingest", str(corpus), "-c", "k", "--create", "--batch-size", "2", "--workers", "1"]
    process = subprocess.Popen(
        [*CARI, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while counts(dsn)[0] < 4:
        assert process.poll() is None, "ingest finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()

    settings = settings_for(dsn, **fake.settings())
    embedder = make_embedder(settings)
    with psycopg.connect(dsn) as conn:
        stored = conn.execute(
            "SELECT d.external_id, array_agg(c.ordinal ORDER BY c.ordinal) "
            "FROM documents d LEFT JOIN chunks c ON c.document_id = d.id GROUP BY 1"
        ).fetchall()
    assert 4 <= len(stored) < 30
    for external_id, ordinals in stored:
        (document,) = list(files.read(files.InputFile(corpus / external_id, external_id), 10**7))
        assert not isinstance(document, files.Failure)
        expected = chunk(document, embedder.count_tokens, settings)
        assert ordinals == list(range(len(expected))), external_id
    assert counts(dsn)[2] == 0

    fake.delay = 0
    resumed = cari(args, env)
    assert resumed.returncode == 0, resumed.stderr
    assert f"30 documents ({30 - len(stored)} new, 0 updated, {len(stored)} unchanged)" in (
        resumed.stderr
    )


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_ingest_keeps_what_it_stored_and_says_so(
    signum: int, tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    """Ctrl-C (or a kill's SIGTERM) mid-load: the batches stored stay, the one in flight is
    stored whole or not at all, the summary says what was stored and how to go on, and the
    exit status is a shell's for that signal (130, 143). The rerun stores the rest."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(30):
        (corpus / f"doc{i:02}.txt").write_text(f"Document {i} about harbour number {i}.")
    fake.delay = 0.3  # each batch waits on the embedder: the signal lands mid-load
    env = cli_env(clean_env, dsn, fake)
    args = ["ingest", str(corpus), "-c", "s", "--create", "--batch-size", "2", "--workers", "1"]
    process = subprocess.Popen(
        [*CARI, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while counts(dsn)[0] < 4:
        assert process.poll() is None, "ingest finished before it could be stopped"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signum, stderr
    stored, chunks, unembedded = counts(dsn)
    assert 4 <= stored < 30 and chunks == stored and unembedded == 0
    assert f"stopped: {stored} documents ({stored} new, 0 updated, 0 unchanged)" in stderr
    assert "run the same command again to go on" in stderr
    assert "Aborted" not in stderr and "Traceback" not in stderr

    fake.delay = 0
    resumed = cari(args, env)
    assert resumed.returncode == 0, resumed.stderr
    assert f"30 documents ({30 - stored} new, 0 updated, {stored} unchanged)" in resumed.stderr
    assert counts(dsn) == (30, 30, 0)


@pytest.mark.parametrize("niceness", ["0", None])  # None: the default, in a session of its own
def test_a_missing_collection_is_one_line(
    niceness: str | None, tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    (tmp_path / "a.txt").write_text("Anchors hold in sand.")
    env = cli_env(clean_env, dsn, fake)
    if niceness is None:
        del env["CARI_BATCH_NICENESS"]
    refused = cari(["ingest", str(tmp_path / "a.txt"), "-c", "nowhere"], env)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        "Error: collection 'nowhere' does not exist: add --create (and --language) or create "
        "it with POST /v1/collections"
    ), refused.stderr
    assert "Traceback" not in refused.stderr


def test_embedder_down_then_reembed(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    (tmp_path / "a.txt").write_text("Nothing is lost when the embedder is down.")
    (tmp_path / "b.txt").write_text("Keyword search works at once.")
    env = cli_env(clean_env, dsn, fake)
    fake.fail(503, "maintenance", times=None)
    down = cari(["ingest", str(tmp_path), "-c", "r", "--create"], env)
    assert down.returncode == 0, down.stderr
    assert "stored without vectors: run `cari reembed`" in down.stderr
    assert counts(dsn) == (2, 2, 2)

    still_down = cari(["reembed"], env)
    assert still_down.returncode == 1
    assert "maintenance" in still_down.stderr and "Traceback" not in still_down.stderr

    fake.reset()
    result = cari(["reembed"], env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "embedded 2 chunks"
    assert counts(dsn) == (2, 2, 0)

    everything = cari(["reembed", "--all", "-c", "r"], env)
    assert everything.stdout.strip() == "embedded 2 chunks"
    assert cari(["reembed", "--all"], env).returncode == 2  # usage: --all needs --collection


def test_model_change_resizes_and_reembeds(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    (tmp_path / "a.txt").write_text("A chunk embedded by the first model.")
    first = cari(["ingest", str(tmp_path), "-c", "m", "--create"], cli_env(clean_env, dsn, fake))
    assert first.returncode == 0, first.stderr
    with FakeOpenAI(dimension=8) as small:
        env = cli_env(clean_env, dsn, small)
        refused = cari(["serve"], env)
        assert refused.returncode == 1
        (line,) = refused.stderr.strip().splitlines()
        assert "stores 384-dimensional embeddings" in line and "makes 8" in line
        assert "cari migrate --resize-embeddings" in line

        resized = cari(["migrate", "--resize-embeddings"], env)
        assert resized.returncode == 0, resized.stderr
        assert counts(dsn) == (1, 1, 1)
        assert cari(["reembed"], env).stdout.strip() == "embedded 1 chunks"
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT vector_dims(embedding) FROM chunks").fetchone()
    assert row == (8,)


def vector_index(dsn: str) -> tuple[int, bool] | None:
    """The 384-d HNSW index's oid and whether it is valid; None when it is missing."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT indexrelid::int, indisvalid FROM pg_index "
            "WHERE indexrelid = to_regclass('chunks_embedding_vector_384_idx')"
        ).fetchone()
    return (int(row[0]), bool(row[1])) if row else None


def test_bulk_load_rebuilds_the_vector_index(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    for i in range(5):
        (tmp_path / f"{i}.txt").write_text(f"Bulk document {i} about lighthouses.")
    env = cli_env(clean_env, dsn, fake)
    before = vector_index(dsn)
    result = cari(["ingest", str(tmp_path), "-c", "b", "--create", "--bulk"], env)
    assert result.returncode == 0, result.stderr
    assert counts(dsn) == (5, 5, 0)
    # The only collection of its width: the index was dropped and built again.
    after = vector_index(dsn)
    assert before and after and after[1] and after[0] != before[0]

    # Into a second collection of that width the load keeps the index the first one searches.
    # The requests' statement timeout does not bound a bulk load's statements (1 ms cancels
    # even the first statements of a pool's connections).
    short = {**env, "CARI_STATEMENT_TIMEOUT_MS": "1"}
    result = cari(["ingest", str(tmp_path), "-c", "b2", "--create", "--bulk"], short)
    assert result.returncode == 0, result.stderr
    assert counts(dsn) == (10, 10, 0) and vector_index(dsn) == after

    # A bulk load killed before its rebuild leaves no index, or, killed during it, an INVALID
    # one (which queries ignore): the next command builds it again.
    with psycopg.connect(dsn) as conn:
        conn.execute("DROP INDEX chunks_embedding_vector_384_idx")
    assert vector_index(dsn) is None
    assert cari(["reembed"], env).returncode == 0
    rebuilt = vector_index(dsn)
    assert rebuilt and rebuilt[1]
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "UPDATE pg_index SET indisvalid = false "
            "WHERE indexrelid = 'chunks_embedding_vector_384_idx'::regclass"
        )
    assert vector_index(dsn) == (rebuilt[0], False)
    assert cari(["reembed"], env).returncode == 0
    repaired = vector_index(dsn)
    assert repaired and repaired[1] and repaired[0] != rebuilt[0]


def test_a_batch_ends_at_its_size_or_once_it_holds_enough_text() -> None:
    limit = 3_000
    third = limit // 3 + 1
    sizes = [third, third, third, third, 10, 10]
    documents = iter(
        (NewDocument(f"d{i}", "", [Section("x" * size)], {}, None), 100 * (i + 1))
        for i, size in enumerate(sizes)
    )
    batches = [_next_batch(documents, 5, limit) for _ in range(3)]
    assert [[d.external_id for d in b.documents] for b in batches if b] == [
        ["d0", "d1", "d2"],
        ["d3", "d4", "d5"],
    ]
    assert batches[2] is None
    # Each says how far into the sources the load is once it is done, and what text it holds.
    done = [(b.reaches, b.characters) for b in batches if b]
    assert done == [(300, 3 * third), (600, third + 20)]
    documents = iter((NewDocument(f"d{i}", "", [Section("x")], {}, None), i) for i in range(3))
    two = _next_batch(documents, 2, limit)
    assert two and [d.external_id for d in two.documents] == ["d0", "d1"]


def test_a_load_leaves_its_bm25_statistics_folded(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    """Batches leave statistics deltas; the load folds them (now and then, and at its end)."""
    records = [{"id": f"d{i}", "text": f"Sailing boat number {i}."} for i in range(5)]
    (tmp_path / "boats.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    args = ["ingest", str(tmp_path / "boats.jsonl"), "-c", "b", "--create", "--batch-size", "1"]
    result = cari(args, cli_env(clean_env, dsn, fake))
    assert result.returncode == 0, result.stderr
    with psycopg.connect(dsn) as conn:
        pending = conn.execute(
            "SELECT (SELECT count(*) FROM bm25_pending_terms),"
            " (SELECT count(*) FROM bm25_pending_sizes)"
        ).fetchone()
        sizes = conn.execute("SELECT sum(chunks) FROM bm25_sizes").fetchone()
        df = conn.execute("SELECT df FROM bm25_terms WHERE lexeme = 'boat'").fetchone()
    assert pending == (0, 0)
    assert sizes == (5,)
    assert df == (5,)


def test_a_document_the_database_refuses_fails_alone(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    """A batch that fails for one document's sake is retried a document at a time: only that
    document is reported, its batch-mates are stored."""
    records = [{"id": f"d{i}", "text": f"Document number {i}."} for i in range(5)]
    records[2]["language"] = "klingon"
    (tmp_path / "batch.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    args = ["ingest", str(tmp_path / "batch.jsonl"), "-c", "b", "--create", "--batch-size", "10"]
    result = cari(args, cli_env(clean_env, dsn, fake))
    assert result.returncode == 1, result.stderr
    assert "4 documents (4 new, 0 updated, 0 unchanged)" in result.stderr
    assert "1 failed:" in result.stderr
    assert "id d2: language: unknown text-search configuration 'klingon'" in result.stderr
    with psycopg.connect(dsn) as conn:
        stored = conn.execute("SELECT external_id FROM documents ORDER BY 1").fetchall()
    assert [row[0] for row in stored] == ["d0", "d1", "d3", "d4"]


def test_the_same_id_twice_in_one_run_is_reported(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    for folder, text in (("f1", "First readme."), ("f2", "Second readme.")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "README.md").write_text(text)
    env = cli_env(clean_env, dsn, fake)
    result = cari(
        ["ingest", str(tmp_path / "f1"), str(tmp_path / "f2"), "-c", "d", "--create"], env
    )
    assert result.returncode == 1
    assert "id 'README.md' was already read from" in result.stderr
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT content FROM chunks").fetchall()
    assert rows == [("First readme.",)]


def test_reembed_skips_a_chunk_the_embedder_refuses(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    for i in range(3):
        (tmp_path / f"{i}.txt").write_text(f"Chunk number {i}.")
    env = cli_env(clean_env, dsn, fake)
    fake.fail(503, times=None)
    assert cari(["ingest", str(tmp_path), "-c", "r", "--create"], env).returncode == 0
    fake.reset()
    # The batch is refused, then the first chunk alone; the two others go through.
    fake.queue(Reply(400, "input rejected"), Reply(400, "input rejected"))
    result = cari(["reembed"], env)
    assert result.stdout.strip() == "embedded 2 chunks", result.stderr
    assert counts(dsn) == (3, 3, 1)
    assert cari(["reembed"], env).stdout.strip() == "embedded 1 chunks"


def test_paths_typed_any_way_name_the_same_documents(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str], tmp_path: Path
) -> None:
    """A rerun with the folder or a file typed absolute, relative or with `./` and `..` stores
    nothing again: a document's id and source do not depend on how its path was typed."""
    write_corpus(tmp_path / "corpus")  # clean_env made tmp_path the working directory
    env = cli_env(clean_env, dsn, fake)
    first = cari(["ingest", "corpus", "-c", "paths", "--create"], env)
    assert "(6 new, 0 updated, 0 unchanged)" in first.stderr, first.stderr  # 2 files are bad
    single = cari(["ingest", "corpus/guide.md", "-c", "single", "--create"], env)
    assert single.returncode == 0, single.stderr
    for folder, file in (
        (str(tmp_path / "corpus"), str(tmp_path / "corpus" / "guide.md")),
        ("./corpus/", "./corpus/notes/../guide.md"),
    ):
        again = cari(["ingest", folder, "-c", "paths"], env)
        assert "(0 new, 0 updated, 6 unchanged)" in again.stderr, again.stderr
        one = cari(["ingest", file, "-c", "single"], env)
        assert "(0 new, 0 updated, 1 unchanged)" in one.stderr, one.stderr
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT d.external_id, d.source FROM documents d JOIN collections c "
            "ON c.id = d.collection_id WHERE c.name = 'single'"
        ).fetchall()
    assert rows == [("corpus/guide.md", "corpus/guide.md")]


def test_canonical_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    assert files.canonical("a/b.md") == files.canonical(tmp_path / "a" / "b.md") == "a/b.md"
    assert files.canonical("./a/../a/b.md") == "a/b.md"
    outside = tmp_path.parent / "elsewhere.md"
    assert files.canonical(outside) == files.canonical("../elsewhere.md") == outside.as_posix()


def test_a_failed_batch_is_reported_without_the_driver_text(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    """A statement timeout reads as the API says it (the driver's text carries the statement
    and its trigger's SQL); a value the database refused, by its one-line message."""
    settings = settings_for("postgresql:///unused", statement_timeout_ms=1234)
    canceled = psycopg.errors.QueryCanceled(
        'canceling statement due to statement timeout\nCONTEXT: SQL statement "INSERT ..."'
    )
    assert failure_reason(canceled, settings) == (
        "the database cancelled a statement that ran longer than 1234 ms "
        "(CARI_STATEMENT_TIMEOUT_MS)"
    )
    with pytest.raises(psycopg.DataError) as refused:
        conn.execute("SELECT 'x'::integer")
    assert failure_reason(refused.value, settings) == 'invalid input syntax for type integer: "x"'
