"""A damaged block of the keyword index, kind by kind: found, named, contained and repaired.

For each kind of damage to one row of `bm25_blocks` (its counts, its key, its payload cut, grown,
swapped with its neighbour's, of an unknown format, or holding a posting above its bound): `cari
bm25 check` names the row and what is wrong; keyword, hybrid and answer requests for its word
answer 200 with what they answered before the damage, and say why in a warning; /readyz says the
collection is degraded and the metric counts it; a fold says so and leaves its delta; `repair`
brings back the blocks and results equal to the SQL statement's (the oracle); and no backend
crashed. A new storage format must pass the same kinds.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from litestar.testing import TestClient

from cari import collection
from cari.ingest.store import collection_ref, compact_statistics
from cari.search import bm25
from cari.settings import LOCAL_EMBEDDING_DIMENSION
from tests.conftest import app_client
from tests.fake_openai import FakeOpenAI
from tests.test_bm25 import WORDS, connect, corpus

Conn = psycopg.Connection[tuple[Any, ...]]
NAME = "fz"
WORD = WORDS[0]  # the commonest word of the corpus: its postings take several blocks


def _first_point(data: bytes) -> int:
    """The offset of the first sub-block's first bound point's tf_title in a payload."""

    def varint(at: int) -> int:
        while data[at] & 0x80:
            at += 1
        return at + 1

    at = varint(2) + 1  # version, flags, n, nsub
    at = varint(varint(at))  # the first sub-block's last id and length
    return at + 2  # its posting count and point count


def _understated(data: bytes) -> bytes:
    """The payload with its first sub-block's first bound point's tfs lowered by one (where
    they are one byte): a posting it bounded now lies above every point."""
    at = _first_point(data)
    changed = bytearray(data)
    for field in (at, at + 1):
        if 0 < changed[field] < 0x80:
            changed[field] -= 1
    return bytes(changed)


# Each kind: the SQL that damages the row (collection_id, lexeme, last_chunk) = %(c)s, %(w)s,
# %(l)s (%(next)s: the word's next row's last_chunk), or a function of its payload.
DAMAGES: dict[str, str | Callable[[bytes], bytes]] = {
    "n one more": "UPDATE bm25_blocks SET n = n + 1"
    " WHERE collection_id = %(c)s AND lexeme = %(w)s AND last_chunk = %(l)s",
    "n one less": "UPDATE bm25_blocks SET n = n - 1"
    " WHERE collection_id = %(c)s AND lexeme = %(w)s AND last_chunk = %(l)s",
    "last chunk one less": "UPDATE bm25_blocks SET last_chunk = last_chunk - 1"
    " WHERE collection_id = %(c)s AND lexeme = %(w)s AND last_chunk = %(l)s",
    "payload cut in half": "UPDATE bm25_blocks SET data = substring(data from 1 for"
    " length(data) / 2)"
    " WHERE collection_id = %(c)s AND lexeme = %(w)s AND last_chunk = %(l)s",
    "payload's last byte cut": "UPDATE bm25_blocks SET data = substring(data from 1 for"
    " length(data) - 1)"
    " WHERE collection_id = %(c)s AND lexeme = %(w)s AND last_chunk = %(l)s",
    "a byte appended": "UPDATE bm25_blocks SET data = data || '\\x00'::bytea"
    " WHERE collection_id = %(c)s AND lexeme = %(w)s AND last_chunk = %(l)s",
    "unknown format": "UPDATE bm25_blocks SET data = set_byte(data, 0, 9)"
    " WHERE collection_id = %(c)s AND lexeme = %(w)s AND last_chunk = %(l)s",
    "payloads swapped with the next row's": """
        UPDATE bm25_blocks AS b SET data = o.data
        FROM bm25_blocks AS o
        WHERE b.collection_id = o.collection_id AND b.lexeme = o.lexeme
          AND ((b.last_chunk = %(l)s AND o.last_chunk = %(next)s)
               OR (b.last_chunk = %(next)s AND o.last_chunk = %(l)s))
          AND b.collection_id = %(c)s AND b.lexeme = %(w)s""",
    "a posting above its bound": _understated,
}
READ_ROW = (
    "SELECT data FROM bm25_blocks"
    " WHERE collection_id = %(c)s AND lexeme = %(w)s AND last_chunk = %(l)s"
)
WRITE_ROW = (
    "UPDATE bm25_blocks SET data = %(data)s"
    " WHERE collection_id = %(c)s AND lexeme = %(w)s AND last_chunk = %(l)s"
)


@pytest.fixture(scope="module")
def served(ext_dsn_module: str) -> Iterator[tuple[TestClient[Any], str]]:
    """The app on a collection of 1,500 documents, folded into blocks, its word in several."""
    with (
        FakeOpenAI(dimension=LOCAL_EMBEDDING_DIMENSION) as fake,
        app_client(ext_dsn_module, fake) as client,
    ):
        created = client.post("/v1/collections", json={"name": NAME, "language": "simple"})
        assert created.status_code == 201, created.text
        documents = [{"id": i, "title": title, "text": text} for i, title, text in corpus(7, 1500)]
        for start in range(0, len(documents), 100):
            added = client.post(
                f"/v1/collections/{NAME}/documents",
                json={"documents": documents[start : start + 100]},
            )
            assert added.status_code == 200 and added.json()["rejected"] == [], added.text
        asyncio.run(_fold(ext_dsn_module))
        yield client, ext_dsn_module


@pytest.fixture(scope="module")
def ext_dsn_module(module_dsn: str) -> str:
    with psycopg.connect(module_dsn) as conn:
        if conn.execute("SELECT FROM pg_extension WHERE extname = 'cari_bm25'").fetchone() is None:
            pytest.skip("the server has no cari_bm25 extension (no C compiler?)")
    return module_dsn


async def _fold(dsn: str) -> None:
    async with await connect(dsn) as conn:
        await compact_statistics(conn, await collection_ref(conn, NAME), fold_postings=1)


def _rows(conn: Conn) -> list[tuple[int, int]]:
    """The word's blocks: (last_chunk, n), in order."""
    return [
        (int(r[0]), int(r[1]))
        for r in conn.execute(
            "SELECT b.last_chunk, b.n FROM bm25_blocks AS b JOIN collections AS c"
            " ON c.id = b.collection_id WHERE c.name = %s AND b.lexeme = %s ORDER BY 1",
            (NAME, WORD),
        )
    ]


def _collection_id(conn: Conn) -> int:
    row = conn.execute("SELECT id FROM collections WHERE name = %s", (NAME,)).fetchone()
    assert row is not None
    return int(row[0])


def _damage(conn: Conn, kind: str, row: int = 0) -> None:
    """Damage the word's `row`-th block (its first; -1: its last, which a fold packs onto)."""
    collection_id = _collection_id(conn)
    rows = _rows(conn)
    assert len(rows) >= 2, "the word should take several blocks"
    params = {"c": collection_id, "w": WORD, "l": rows[row][0], "next": rows[1][0]}
    damage = DAMAGES[kind]
    if isinstance(damage, str):
        assert conn.execute(damage, params).rowcount >= 1
        return
    row = conn.execute(READ_ROW, params).fetchone()
    assert row is not None
    params["data"] = damage(bytes(row[0]))
    conn.execute(WRITE_ROW, params)


def _search(
    client: TestClient[Any], mode: str, query: str = f"{WORD} {WORDS[5]}"
) -> dict[str, Any]:
    response = client.post(
        f"/v1/collections/{NAME}/search",
        json={"query": query, "mode": mode, "top_k": 20, "explain": True},
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _ranked(result: dict[str, Any]) -> list[tuple[str, float]]:
    return [(r["id"], round(r["score"], 9)) for r in result["results"]]


def _check(dsn: str) -> collection.KeywordIndexCheck:
    async def work() -> collection.KeywordIndexCheck:
        async with await connect(dsn) as conn:
            return await collection.check_keyword_index(conn, NAME)

    return asyncio.run(work())


def _repair(dsn: str) -> None:
    async def work() -> None:
        async with await connect(dsn) as conn:
            await collection.rebuild_keyword_index(conn, NAME)

    asyncio.run(work())


def _oracle_equal(dsn: str) -> None:
    """The walk over the repaired blocks equals the SQL statement over the chunks' postings."""

    async def work() -> None:
        async with await connect(dsn) as conn:
            ref = await collection_ref(conn, NAME)
            args: dict[str, Any] = {"candidates": 50, "filters": bm25.NO_FILTERS, "params": {}}
            walked = await bm25.search(conn, ref.id, WORD, engine="cari_bm25", **args)
            counted = await bm25.search(conn, ref.id, WORD, engine="chunks", **args)
            assert walked.damaged == ()
            assert [(c.chunk_id, round(c.score, 9)) for c in walked.candidates] == [
                (c.chunk_id, round(c.score, 9)) for c in counted.candidates
            ]

    asyncio.run(work())


@pytest.mark.parametrize("kind", DAMAGES)
def test_a_damaged_block_is_named_contained_and_repaired(
    served: tuple[TestClient[Any], str], kind: str
) -> None:
    client, dsn = served
    before = {mode: _ranked(_search(client, mode)) for mode in ("keyword", "hybrid")}
    answered = client.post(f"/v1/collections/{NAME}/answer", json={"query": WORD})
    assert answered.status_code == 200
    with psycopg.connect(dsn, autocommit=True) as conn:
        started = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
        _damage(conn, kind)
        try:
            checked = _check(dsn)
            assert checked.status == "damaged", checked
            assert [b.lexeme for b in checked.damaged] in ([WORD], [WORD, WORD]), checked

            for mode in ("keyword", "hybrid"):
                result = _search(client, mode)
                assert _ranked(result) == before[mode], mode
                assert any("damaged block" in w for w in result["warnings"]), result["warnings"]
                (sub_query,) = result["explain"]["sub_queries"]
                assert WORD in sub_query["keyword_damaged_blocks"][0]
            answer = client.post(f"/v1/collections/{NAME}/answer", json={"query": WORD})
            assert answer.status_code == 200, answer.text
            assert answer.json()["answer"] == answered.json()["answer"]

            ready = client.get("/readyz").json()
            assert ready["status"] == "degraded", ready
            assert ready["damaged"][0]["collection"] == NAME
            assert WORD in ready["damaged"][0]["blocks"][0]
            metrics = client.get("/metrics").text
            assert 'cari_keyword_index_damage_total{operation="search"}' in metrics
        finally:
            _repair(dsn)
        assert _check(dsn).status == "exact"
        _oracle_equal(dsn)
        assert _ranked(_search(client, "keyword")) == before["keyword"]
        assert client.get("/readyz").json()["status"] == "ready"
        # No backend crashed: a crash reinitialises the server, and ends this connection.
        assert conn.execute("SELECT pg_postmaster_start_time()").fetchone() == started


def test_a_fold_over_a_damaged_block_says_so_and_keeps_its_delta(
    served: tuple[TestClient[Any], str], caplog: pytest.LogCaptureFixture
) -> None:
    client, dsn = served
    with psycopg.connect(dsn, autocommit=True) as conn:
        _damage(conn, "payload cut in half", row=-1)
        try:
            added = client.post(
                f"/v1/collections/{NAME}/documents",
                json={"id": "late", "text": f"{WORD} zyzzyva"},
            )
            assert added.status_code == 200, added.text
            caplog.clear()
            asyncio.run(_fold(dsn))
            assert "cannot fold its new postings into blocks, one is damaged" in caplog.text
            delta = conn.execute(
                "SELECT count(*) FROM bm25_delta WHERE collection_id = %s", (_collection_id(conn),)
            ).fetchone()
            assert delta is not None and delta[0] >= 1
            found = _search(client, "keyword", f"{WORD} zyzzyva")  # the walk fails on WORD
            assert found["results"][0]["document_id"] == "late"  # read from the delta's chunk
        finally:
            _repair(dsn)
            client.delete(f"/v1/collections/{NAME}/documents/late")
        assert _check(dsn).status == "exact"


# Damage every block reads well through, that only a recount from the chunks finds: the
# chunk delta and the dead list disagreeing with the blocks, the statistics with the chunks.
RECOUNTED = {
    "a dead chunk forgotten (its old postings come back)": (
        "DELETE FROM bm25_dead WHERE collection_id = %(c)s"
        " AND chunk_id = (SELECT min(chunk_id) FROM bm25_dead WHERE collection_id = %(c)s)",
        "postings",
    ),
    "a written chunk's delta row lost (its postings vanish)": (
        "DELETE FROM bm25_delta WHERE collection_id = %(c)s"
        " AND chunk_id = (SELECT min(chunk_id) FROM bm25_delta WHERE collection_id = %(c)s)",
        "postings",
    ),
    "a document frequency off by one": (
        "UPDATE bm25_terms SET df = df + 1 WHERE collection_id = %(c)s AND lexeme = %(w)s",
        "document frequencies",
    ),
}


@pytest.mark.parametrize("kind", RECOUNTED)
def test_check_recounts_what_reads_well_but_disagrees(
    served: tuple[TestClient[Any], str], kind: str
) -> None:
    client, dsn = served
    damage, differs = RECOUNTED[kind]
    # A folded chunk replaced (dead in its block, its new postings in the delta) and one new.
    replaced = client.put(f"/v1/collections/{NAME}/documents/d1", json={"text": f"{WORD} anew"})
    assert replaced.status_code == 200, replaced.text
    added = client.post(f"/v1/collections/{NAME}/documents", json={"id": "new", "text": WORD})
    assert added.status_code == 200, added.text
    assert _check(dsn).status == "exact"
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute(damage, {"c": _collection_id(conn), "w": WORD}).rowcount == 1
    try:
        checked = _check(dsn)
        assert checked.status == "differs" and checked.differences[differs] > 0, checked
        assert not checked.damaged  # every block still reads
        assert _search(client, "keyword")["results"]  # and searches still answer
    finally:
        _repair(dsn)
        client.delete(f"/v1/collections/{NAME}/documents/new")
    assert _check(dsn).status == "exact"
    _oracle_equal(dsn)


def test_check_names_every_damaged_block_and_goes_on(
    served: tuple[TestClient[Any], str], tmp_path: Any
) -> None:
    client, dsn = served
    assert client.post("/v1/collections", json={"name": "whole"}).status_code == 201
    client.post("/v1/collections/whole/documents", json={"id": "w", "text": "quite whole"})
    env = {"CARI_DATABASE_URL": dsn, "DATABASE_URL": dsn, "PATH": "/usr/bin:/bin"}
    env["HOME"] = str(tmp_path)

    def check(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cari.cli", "bm25", "check", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    with psycopg.connect(dsn, autocommit=True) as conn:
        _damage(conn, "n one more")
        _damage(conn, "payload cut in half")  # the same row, now also cut: still one row
        try:
            text = check()
            assert text.returncode == 1, text.stderr
            assert f"{NAME}: damaged: 1 block(s) do not read" in text.stdout
            assert f"lexeme '{WORD}'" in text.stdout and "follow the directory" in text.stdout
            assert f"cari bm25 repair -c {NAME}" in text.stdout
            assert "whole: exact" in text.stdout  # went on past the damaged collection
            assert "Traceback" not in text.stderr
            assert "1 damaged" in text.stderr and "1 exact" in text.stderr

            report = json.loads(check("--json").stdout)
            by_name = {c["collection"]: c for c in report["collections"]}
            assert by_name["whole"]["status"] == "exact"
            (block,) = by_name[NAME]["damaged_blocks"]
            assert block["lexeme"] == WORD and "follow the directory" in block["problem"]
            assert report["summary"] == {"damaged": 1, "exact": 1}
        finally:
            _repair(dsn)
            client.delete("/v1/collections/whole")
    assert check("-c", NAME).returncode == 0


def test_the_walk_refuses_a_posting_above_its_bound_whatever_the_boost(
    served: tuple[TestClient[Any], str],
) -> None:
    """Checked by its structure, not by its score: a boost of 1,000 made the score check pass."""
    _, dsn = served
    with psycopg.connect(dsn, autocommit=True) as conn:
        _damage(conn, "a posting above its bound")
        try:
            collection_id = _collection_id(conn)
            for boost in (1.0, 3.0, 1000.0):
                with pytest.raises(psycopg.errors.DataCorrupted, match="above its sub-block"):
                    conn.execute(
                        "SELECT * FROM bm25_topk(%s, ARRAY[%s], ARRAY[NULL::int4],"
                        " ARRAY[NULL::int4], ARRAY[1.0::float8], 10, 1.2, 0.75, %s, 100000,"
                        " NULL, NULL)",
                        (collection_id, WORD, boost),
                    )
        finally:
            _repair(dsn)
