"""The rows searches read from `collections`, kept by a serving process while it hears changes.

Every search reads its collection's row (id, mode, weights, threshold, keywords, embedder): a
pool checkout and a round trip per request. A serving process keeps the rows it has read and
forgets them all when PostgreSQL announces a change on `cari_collections` (migration 0012: a
trigger on every change to the table, whoever makes it: another server, the CLI, a DBA).

- Rows are kept only while the announcements are heard: until `listen` has its connection,
  and from the moment that connection fails until it listens again, every search reads its
  row, and what was kept is dropped (changes may have been missed meanwhile).
- A row whose read spans an announcement is not kept: a search that began before a change
  cannot keep the row from before it.
- Only rows read on the primary are kept: a standby may not have replayed a change when its
  announcement arrives, and a search there reads its row there, so what it finds (or a 404
  for a collection the standby has not replayed) matches the chunks it searches.
"""

from __future__ import annotations

import logging

import anyio
import psycopg
from psycopg.rows import kwargs_row
from psycopg_pool import AsyncConnectionPool

from cari.db.queries import query
from cari.search.plan import SearchCollection

log = logging.getLogger(__name__)

APPLICATION_NAME = "cari collection changes"  # what pg_stat_activity shows for the connection
RETRY_S = (0.5, 8.0)  # first and longest wait before listening again after a failure


class CollectionRows:
    def __init__(self, primary: AsyncConnectionPool, dsn: str) -> None:
        self._primary = primary
        self._dsn = dsn  # the primary's, for the listening connection
        self._rows: dict[str, SearchCollection] = {}
        self._listening = False
        self._changes = 0  # announcements heard and listens begun: a read spanning one is not kept

    @property
    def listening(self) -> bool:
        """Whether announcements are heard, so rows are kept."""
        return self._listening

    async def get(self, pool: AsyncConnectionPool, name: str) -> SearchCollection | None:
        """`collection_for_search`'s row for `name` on `pool`, the search's server (None: no
        such collection there)."""
        if pool is not self._primary or not self._listening:
            return await _read(pool, name)
        if (row := self._rows.get(name)) is not None:
            return row
        changes = self._changes
        row = await _read(pool, name)
        if row is not None and self._listening and changes == self._changes:
            self._rows[name] = row
        return row

    async def read(self, pool: AsyncConnectionPool, name: str) -> SearchCollection | None:
        """The row as `pool` has it now, never a kept one; what was kept is forgotten when it
        differs (the announcement of the change may still be on its way)."""
        row = await _read(pool, name)
        if row != self._rows.get(name, row):
            self.forget()
        return row

    async def listen(self) -> None:
        """Hear the announcements on a connection of its own until cancelled; after a failure,
        connect again with backoff."""
        wait = RETRY_S[0]
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._dsn, autocommit=True, application_name=APPLICATION_NAME
                ) as conn:
                    await conn.execute(query("collections_listen"))
                    self.forget()
                    self._listening = True
                    wait = RETRY_S[0]
                    async for _ in conn.notifies():
                        self.forget()
            except psycopg.Error as exc:
                if self._listening:
                    log.warning(
                        "collection changes unheard, searches read their collection until they "
                        "are heard again: %s",
                        exc,
                    )
            finally:
                self._listening = False
                self.forget()
            await anyio.sleep(wait)
            wait = min(2 * wait, RETRY_S[1])

    def forget(self) -> None:
        """Drop every kept row. Also called after this process changes a collection, so that its
        next search reads the change without waiting for the announcement."""
        self._changes += 1
        self._rows.clear()


async def _read(pool: AsyncConnectionPool, name: str) -> SearchCollection | None:
    rows = kwargs_row(SearchCollection)
    async with pool.connection() as conn, conn.cursor(row_factory=rows) as cur:
        await cur.execute(query("collection_for_search"), {"name": name})
        return await cur.fetchone()
