"""The relevance scale fitted to a collection: where its own questions and other subjects' fall.

One cosine scale (`CARI_RELEVANCE_COSINE_FLOOR` / `_CEILING`) is calibrated on the tuning sets,
but where an off-topic question's best cosine falls depends on the collection: the more chunks,
the likelier one of them is close to anything; short records (a title) sit further from any
question than long ones. So each collection gets the scale shifted to its own content:

- off-topic probes: a bundled set of everyday questions in Indonesian and English
  (`off_topic_questions.txt`), the "other subjects" a server that holds only this collection
  knows of. Each one's best cosine here is what a question the collection cannot answer reaches.
- on-topic probes: pseudo-questions drawn from the collection's own chunks, each the rarest
  words of one chunk (in its order: a key-phrase question), whose best cosine here is what a
  question it can answer reaches.

The cut is placed at the highest off-topic cosine (setting aside bundled questions that reach
the collection as closely as its median own one: they are on its subject), no higher than the
lower quartile of the on-topic ones, and the scale is shifted (its width kept) so that relevance
`AT` falls there, by at most `MAX_SHIFT` from the configured scale. The quantiles and margin
were chosen by `bench.threshold` on the tuning sets (docs/benchmarks.md, "Relevance threshold
fitted to each collection").

Bounded time: at most `SAMPLE` chunks are read and `PSEUDO` + the bundled questions (about 200
queries) are searched once each, whatever the collection's size (from `ANALYZE_FROM` chunks,
after an ANALYZE of the chunks table, which reads a sample of fixed size too). Only the
pseudo-questions are embedded on each fit: the bundled questions' vectors for the local model
ship with the package (`off_topic_vectors.npz`, like the router's examples), and another
embedder's are embedded once per process and kept. Embedding them was two thirds of a fit's
time, which made a small `cari ingest` wait longer for its fit than for its load
(docs/benchmarks.md, "The fit's time"). The local model embeds the pseudo-questions in a few
batched computations (one computation each cost 10x more with OpenMP's threads on a busy
machine); a remote embedder gets them in document batches (one round trip each was most of a
fit after a 10k-chunk load with a fast embedder: 148 of them, ~1.5 s). A fit runs at the end of
`cari ingest`, in the server's background upkeep once the last one covers less than
`REFIT_COVERAGE` of the collection's chunks (or the collection shrank below that share of them),
and on demand (`cari refit`); never on a search.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from cari.db.queries import query
from cari.db.vector_space import space
from cari.embed import Embedder, Embedders, Vector
from cari.errors import EmbedderUnavailable, NotFound
from cari.search.relevance import Scale
from cari.settings import Settings

log = logging.getLogger(__name__)

SAMPLE = 256  # chunks read to draw pseudo-questions from (and to count their words' rarity)
PSEUDO = 96  # pseudo-questions (48 left the lower quartile's cap moving by ~0.008, sd)
PSEUDO_WORDS = 6  # rarest words of a chunk making one
MIN_CHUNKS = 5  # fewer embedded chunks: no fit, the configured scale
AT = 0.25  # the relevance the cut is placed at: the default threshold
# A fit is due once it covers less than this share of the collection's chunks (or the collection
# shrank below this share of the chunks it was fitted on): a collection loaded in batches was
# left fitted on its first half (631 of 1,083 chunks) while the fit waited for a doubling.
REFIT_COVERAGE = 0.9
# Chunks from which a fit first analyses the chunks table (sql/chunks_analyze.sql): a collection
# this large is searched by the HNSW index once the planner knows its size (measured after a
# 10k-chunk load: the probes 11 ms each by a scan of every chunk, 2.8 ms by the index). Again
# only once it has doubled since its last fit: the planner needs its size, not its every change.
ANALYZE_FROM = 1_000

# The local model's vectors of the bundled questions, shipped with the package so that no fit
# spends ~100 embeddings on them. Made, and checked against the model, by
# tests/test_relevance_fit.py (`python -m tests.test_relevance_fit` after changing them).
OFF_TOPIC_VECTORS = Path(__file__).with_name("off_topic_vectors.npz")
# Another embedder's vectors of them, embedded once per process: (model, dimension) -> vectors.
_off_topic_vectors: dict[tuple[str, int], list[Vector]] = {}


@dataclass(frozen=True, slots=True)
class Placement:
    """How the cut is placed from the probes (chosen by bench.threshold on the tuning sets)."""

    off_quantile: float = 1.0
    margin: float = 0.0
    on_quantile: float | None = 0.25  # None: the on-topic probes do not cap the cut
    max_shift: float = 0.03


PLACEMENT = Placement()


@dataclass(frozen=True, slots=True)
class Probes:
    """Each probe's best cosine in the collection."""

    on_topic: list[float]
    off_topic: list[float]
    # The pseudo-questions asked, in on_topic's order (bench.relevance_frontier weighs them).
    questions: list[str] = field(default_factory=list)


def off_topic_questions() -> list[str]:
    text = resources.files("cari.search").joinpath("off_topic_questions.txt").read_text("utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def shipped_off_topic(model_name: str) -> list[Vector] | None:
    """The shipped vectors of the bundled questions for `model_name`, if they are for exactly
    these questions; else None."""
    if not OFF_TOPIC_VECTORS.is_file():
        return None
    with np.load(OFF_TOPIC_VECTORS, allow_pickle=False) as shipped:
        if str(shipped["model"]) != model_name:
            return None
        if [str(text) for text in shipped["texts"]] != off_topic_questions():
            return None
        return list(np.asarray(shipped["vectors"], dtype=np.float32))


async def off_topic_vectors(embedder: Embedder) -> list[Vector]:
    """The bundled questions' query vectors by `embedder`: shipped, kept, or embedded now."""
    key = (embedder.model_name, embedder.dimension)
    if (known := _off_topic_vectors.get(key)) is None:
        known = shipped_off_topic(embedder.model_name)
        if known is None or len(known[0]) != embedder.dimension:
            known = await embedder.embed_queries(off_topic_questions())
        _off_topic_vectors[key] = known
    return known


_WORD = re.compile(r"[^\W\d_]{4,}")


def pseudo_questions(texts: Sequence[str], count: int = PSEUDO) -> list[str]:
    """Up to `count` key-phrase questions, one per text: its `PSEUDO_WORDS` words (letters
    only, 4 or more) rarest among `texts`, in the text's order."""
    words = [list(dict.fromkeys(w.lower() for w in _WORD.findall(text))) for text in texts]
    frequency = Counter(w for unique in words for w in unique)
    questions = []
    for unique in words:
        if len(unique) < 3:  # too little to ask about
            continue
        rarest = set(sorted(unique, key=lambda w: (frequency[w], -len(w)))[:PSEUDO_WORDS])
        questions.append(" ".join(w for w in unique if w in rarest))
        if len(questions) == count:
            break
    return questions


def place(probes: Probes, base: Scale, placement: Placement = PLACEMENT) -> Scale:
    """The configured scale shifted so that relevance `AT` falls at the fitted cut."""
    width = base.cosine_ceiling - base.cosine_floor
    off_topic = probes.off_topic
    if probes.on_topic:
        # A bundled question reaching the collection as closely as its own questions typically
        # do is on its subject (a car manual and "how do I change a flat tyre?"), not another's.
        own = float(np.median(probes.on_topic))
        off_topic = [cosine for cosine in off_topic if cosine < own] or off_topic
    cut = float(np.quantile(off_topic, placement.off_quantile)) + placement.margin
    if placement.on_quantile is not None and probes.on_topic:
        cut = min(cut, float(np.quantile(probes.on_topic, placement.on_quantile)))
    shift = cut - (base.cosine_floor + AT * width)
    shift = max(-placement.max_shift, min(placement.max_shift, shift))
    return Scale(round(base.cosine_floor + shift, 4), round(base.cosine_ceiling + shift, 4))


async def probe(
    conn: psycopg.AsyncConnection[Any],
    collection_id: int,
    embedder: Embedder,
    settings: Settings,
) -> Probes | None:
    """The probes' best cosines in the collection; None when it has too few embedded chunks."""
    cur = await conn.execute(
        query("relevance_fit_sample"),
        {"collection_id": collection_id, "dimension": embedder.dimension, "sample": SAMPLE},
    )
    rows = await cur.fetchall()
    if len(rows) < MIN_CHUNKS:
        return None
    texts = [f"{title}\n{content}" if title else str(content) for title, content in rows]
    vectors = space(embedder.dimension, settings)
    statement = vectors.statement("search_vector", filters=sql.SQL(""), alias=sql.Identifier("c"))

    async def best(vector: Vector) -> float:
        vector = np.asarray(vector, dtype=np.float32)
        cur = await conn.execute(
            statement,
            {"collection_id": collection_id, "vector": vector, "candidates": 1},
            prepare=False,  # see Space.statement
        )
        row = await cur.fetchone()
        return float(row[1]) if row is not None else -1.0

    questions = pseudo_questions(texts)
    own = await embedder.embed_queries(questions)
    other = await off_topic_vectors(embedder)
    return Probes(
        on_topic=[await best(vector) for vector in own],
        off_topic=[await best(vector) for vector in other],
        questions=questions,
    )


async def fit(
    pool: AsyncConnectionPool, name: str, embedders: Embedders, settings: Settings
) -> dict[str, Any] | None:
    """Fit the named collection's scale and store it; None (the configured scale) when it has
    too few embedded chunks."""
    async with pool.connection() as conn:
        cur = await conn.execute(query("relevance_fit_target"), {"name": name})
        row = await cur.fetchone()
        if row is None:
            raise NotFound(f"collection '{name}' does not exist")
        collection_id, embedder_name, chunks, fitted = row
        if chunks >= ANALYZE_FROM and (
            fitted is None or fitted < ANALYZE_FROM or chunks >= 2 * fitted
        ):
            await conn.execute(query("chunks_analyze"))
        embedder = embedders.get(embedder_name)
        probes = await probe(conn, collection_id, embedder, settings)
        stored: dict[str, Any] | None = None
        if probes is not None:
            base = Scale(*settings.cosine_scale(embedder_name))
            scale = place(probes, base)
            stored = {
                "cosine_floor": scale.cosine_floor,
                "cosine_ceiling": scale.cosine_ceiling,
                "embedder": embedder_name,
                "chunks": int(chunks),
                "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "probes": {
                    side: {
                        "count": len(values),
                        "median": round(float(np.median(values)), 4) if values else None,
                    }
                    for side, values in (
                        ("on_topic", probes.on_topic),
                        ("off_topic", probes.off_topic),
                    )
                },
            }
        await conn.execute(
            query("relevance_fit_store"),
            {"id": collection_id, "fit": None if stored is None else Jsonb(stored)},
        )
    return stored


async def refit_stale(
    pool: AsyncConnectionPool,
    embedders: Embedders,
    settings: Settings,
    name: str | None = None,
) -> list[str]:
    """Fit every collection (or just `name`) that has no fit yet, was fitted for another
    embedder, or whose fit covers less than `REFIT_COVERAGE` of its chunks (or of which it
    holds less than that share of the fitted chunks); those fitted."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            query("relevance_fit_stale"),
            {"factor": 1 / REFIT_COVERAGE, "min_chunks": MIN_CHUNKS, "name": name},
        )
        names = [str(row[0]) for row in await cur.fetchall()]
    for stale in names:
        found = await fit(pool, stale, embedders, settings)
        log.info("fitted the relevance scale of collection '%s': %s", stale, found)
    return names


async def keep_fitted(pool: AsyncConnectionPool, embedders: Embedders, settings: Settings) -> None:
    """The server's background task: refit collections whose fit is due, every
    CARI_REEMBED_INTERVAL_S."""
    while True:
        try:
            await refit_stale(pool, embedders, settings)
        except (EmbedderUnavailable, psycopg.Error, PoolTimeout) as exc:
            log.warning("fitting relevance scales will retry: %s", exc)
        except Exception:  # the task must outlive any failure, or the app shuts down
            log.exception("fitting relevance scales failed; it will retry")
        await anyio.sleep(settings.reembed_interval_s)
