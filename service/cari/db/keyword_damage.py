"""Damaged rows of the keyword index's packed blocks: named, and remembered until repaired.

The extension's readers check every byte they decode; a row of `bm25_blocks` that does not
decode, or that disagrees with its payload (its `n`, its `last_chunk`), is an ERROR with
SQLSTATE data_corrupted, never a crashed backend. `find` names such rows with what is wrong
(`bm25_block_problems`, migration 0025), for `cari bm25 check` and for a search that met one:
that search is answered from the chunks' own tsvectors (`cari.search.bm25`), and the rows it
found are kept in a runtime's `Damage`, which /readyz reports until they read well again
(`cari bm25 repair -c NAME` rewrites a collection's blocks from its chunks).

Why a search is answered rather than refused: the tsvectors the blocks were packed from are
still there and exact, and a damaged row touches only the questions holding its lexeme.
Why not repaired on the spot: a repair rewrites the whole collection's index and holds its
writers meanwhile, which the operator should choose to do.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from cari.db.queries import query

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, order=True)
class DamagedBlock:
    """One row of `bm25_blocks` a reader cannot trust."""

    lexeme: str
    last_chunk: int
    problem: str

    def __str__(self) -> str:
        return f"lexeme '{self.lexeme}', last chunk {self.last_chunk}: {self.problem}"


async def find(
    conn: psycopg.AsyncConnection[Any], collection_id: int, lexemes: Sequence[str] | None = None
) -> list[DamagedBlock]:
    """The damaged rows of the collection's blocks (of `lexemes` only, when given)."""
    cur = await conn.execute(
        query("bm25_block_problems"),
        {"collection_id": collection_id, "lexemes": None if lexemes is None else list(lexemes)},
    )
    return [DamagedBlock(str(r[0]), int(r[1]), str(r[2])) for r in await cur.fetchall()]


@dataclass(frozen=True, slots=True)
class Damaged:
    """A collection's damaged rows, as last found."""

    collection_id: int
    collection: str
    blocks: tuple[DamagedBlock, ...]


class Damage:
    """The damaged rows a runtime's searches have met, per collection, until they read well."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # searches on other event loops (the CLI's) record too
        self._known: dict[int, Damaged] = {}

    def record(self, found: Damaged) -> None:
        with self._lock:
            known = self._known.get(found.collection_id)
            blocks = set(found.blocks) | set(known.blocks if known else ())
            self._known[found.collection_id] = Damaged(
                found.collection_id, found.collection, tuple(sorted(blocks))
            )

    async def current(self, conn: psycopg.AsyncConnection[Any]) -> list[Damaged]:
        """The known damage, each row read again: those that now read well (repaired, or the
        collection deleted) are forgotten."""
        with self._lock:
            known = list(self._known.values())
        now: list[Damaged] = []
        for damaged in known:
            lexemes = sorted({b.lexeme for b in damaged.blocks})
            still = await find(conn, damaged.collection_id, lexemes)
            with self._lock:
                if still:
                    self._known[damaged.collection_id] = Damaged(
                        damaged.collection_id, damaged.collection, tuple(sorted(still))
                    )
                    now.append(self._known[damaged.collection_id])
                else:
                    self._known.pop(damaged.collection_id, None)
                    log.info("the keyword index of '%s' reads well again", damaged.collection)
        return now
