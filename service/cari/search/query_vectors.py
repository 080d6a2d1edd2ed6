"""Query embeddings for searches, with the protections a request path needs.

- An LRU of recent ones: repeated questions are common.
- Identical questions asked at once are embedded once; every asker gets that vector.
- A time budget: an embedding (its wait for the embedder included) that takes longer than
  `timeout_s` fails as EmbedderUnavailable, so a hung embedding service costs a search seconds,
  not minutes of timeouts and retries (a hybrid search then answers from keywords). A search
  gives a `deadline` (its budget less what answering takes after the wait), which bounds the
  embedding it starts; one that joins an embedding under way gives up at its own deadline
  while the embedding goes on for the others.
- A circuit breaker: after `BREAKER_FAILURES` failures in a row the embedder is not asked for
  `BREAKER_COOLDOWN_S` (every search degrades at once), then one search probes it; a success
  closes the breaker, a failure opens it again.

An EmbedderBusy (the embedder's backlog is full) says nothing about its health: it neither
counts as a failure nor is it retried.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict

import anyio
import numpy as np

from cari.embed import Embedder
from cari.errors import EmbedderBusy, EmbedderUnavailable
from cari.observability import metrics

BREAKER_FAILURES = 3  # failures in a row that open the breaker
BREAKER_COOLDOWN_S = 15.0  # how long an open breaker skips the embedder before a probe


class QueryVectors:
    def __init__(self, embedder: Embedder, size: int, timeout_s: float) -> None:
        self.embedder = embedder
        self.size = size
        self.timeout_s = timeout_s
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._pending: dict[str, asyncio.Task[np.ndarray]] = {}
        self._failures = 0
        self._last_failure = ""
        self._open_until = 0.0  # time.monotonic() before which the embedder is skipped
        self._probing = False

    @property
    def pending(self) -> int:
        """Query embeddings asked for and not answered yet."""
        return len(self._pending)

    @property
    def breaker_open(self) -> bool:
        """Whether enough failures in a row have opened the breaker (until a probe succeeds)."""
        return self._failures >= BREAKER_FAILURES

    async def get(self, text: str, deadline: float | None = None) -> tuple[np.ndarray, bool]:
        """The vector, and whether it came from the cache; EmbedderUnavailable when it is not
        there by `deadline` (a `time.monotonic()` instant) or within `timeout_s`."""
        if (vector := self._cache.get(text)) is not None:
            self._cache.move_to_end(text)
            metrics.QUERY_VECTORS.labels("cache").inc()
            return vector, True
        metrics.QUERY_VECTORS.labels("embedder").inc()
        # Shielded: one asker giving up (a client gone, its deadline) does not cancel the
        # others' embedding.
        task = self._pending.get(text)
        if task is None:
            probe = self._admit()
            until = time.monotonic() + self.timeout_s
            task = asyncio.ensure_future(
                self._embed(text, probe, until if deadline is None else min(until, deadline))
            )
            task.add_done_callback(self._settled)
            self._pending[text] = task
            # It ends by this deadline itself, its failure counted before this search answers:
            # the next search sees the breaker as this one left it (waiting apart, the search
            # could answer first and the next one start another embedding).
            return await asyncio.shield(task), False
        if deadline is None:
            return await asyncio.shield(task), False
        try:  # one who joined an embedding under way may have less time left than it has
            return await asyncio.wait_for(asyncio.shield(task), deadline - time.monotonic()), False
        except TimeoutError:
            raise self._late() from None

    def _late(self) -> EmbedderUnavailable:
        return EmbedderUnavailable(
            f"no query embedding within the search's {self.timeout_s:g} s budget "
            "(CARI_EMBEDDING_QUERY_TIMEOUT_S)",
            retry_after=self.timeout_s,
        )

    def _admit(self) -> bool:
        """Raise EmbedderUnavailable while the breaker is open (or another search probes);
        True when this embedding is the probe."""
        if self._failures < BREAKER_FAILURES:
            return False
        wait = self._open_until - time.monotonic()
        if wait > 0 or self._probing:
            raise EmbedderUnavailable(
                f"query embedding skipped after {self._failures} failures in a row "
                f"(last: {self._last_failure}); the embedder is tried again within "
                f"{max(wait, 0):.0f} s",
                retry_after=max(wait, 1.0),
            )
        self._probing = True
        return True

    async def _embed(self, text: str, probe: bool, until: float) -> np.ndarray:
        try:
            # `until` is an instant: the time this task waited to start counts against it.
            with anyio.fail_after(max(until - time.monotonic(), 0.0)):
                vector = await self.embedder.embed_query(text)
        except TimeoutError:
            # Retrying helps once the backlog that held this one is served (or the breaker
            # answers at once): a budget's time later.
            failure = self._late()
            self._failed(failure, "timeout")
            raise failure from None
        except EmbedderUnavailable as exc:
            self._failed(exc, "unavailable")
            raise
        except EmbedderBusy:
            metrics.EMBEDDER_FAILURES.labels("query", "busy").inc()
            raise
        finally:
            if probe:
                self._probing = False
            del self._pending[text]
        self._failures = 0
        self._cache[text] = vector
        if len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return vector

    def _failed(self, exc: EmbedderUnavailable, reason: str) -> None:
        metrics.EMBEDDER_FAILURES.labels("query", reason).inc()
        self._failures += 1
        self._last_failure = exc.message
        if self._failures >= BREAKER_FAILURES:
            self._open_until = time.monotonic() + BREAKER_COOLDOWN_S

    @staticmethod
    def _settled(task: asyncio.Task[np.ndarray]) -> None:
        # Every asker may have gone: the outcome is still taken, so asyncio logs nothing.
        if not task.cancelled():
            task.exception()
