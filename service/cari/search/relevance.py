"""The relevance scale: 0 to 1, from absolute evidence, so that one threshold fits every query.

Fused scores rank a query's candidates against each other: every query gets a "best" chunk even
when nothing in the collection is about it. The threshold therefore reads evidence that does not
depend on the other candidates (`sql/search_evidence.sql`):

- dense: the cosine similarity of chunk and query, rescaled from the embedder's range:
  `(cosine - floor) / (ceiling - floor)`, clipped to 0..1. Embedders differ in where unrelated
  and related texts fall (multilingual-e5 puts unrelated text near 0.75), so floor and ceiling
  are settings, calibrated by `bench.threshold`;
- lexical: the query's term coverage, the idf-weighted share of its words the chunk holds,
  counted from `COVERAGE_FLOOR` up: `(coverage - 0.6) / 0.4`. Sharing a few subject words is
  common between unrelated texts (measured: it let off-topic questions through), holding nearly
  all of the query's rare words is not; an exact identifier the embedder has never seen (a SKU)
  is relevant wherever it occurs.

A chunk's relevance is the larger of the two. The bands read as: 0.5 and above, a strong match;
0.25 to 0.5, related; below 0.25 (the default threshold), most likely not about the question.

The threshold applies to a question as a whole, then to its chunks (`keep`): when no chunk
reaches it, the collection does not hold the answer and nothing is returned; when one does, the
chunks reaching half of it come back with it. A single cut at the threshold dropped on-topic
chunks that the strong one vouches for (Recall@10 fell 3.4x more for the same off-topic
rejection; docs/benchmarks.md, "Relevance threshold").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

from cari.queries import query

COVERAGE_FLOOR = 0.6  # term coverage at which words alone start to count
SUPPORT = 0.5  # chunks beside one that reaches the threshold need this share of it


@dataclass(frozen=True, slots=True)
class Evidence:
    cosine: float | None  # None when the query was not embedded (keyword mode)
    coverage: float


@dataclass(frozen=True, slots=True)
class Scale:
    cosine_floor: float
    cosine_ceiling: float

    def dense(self, cosine: float | None) -> float:
        if cosine is None:
            return 0.0
        return _clip((cosine - self.cosine_floor) / (self.cosine_ceiling - self.cosine_floor))

    def relevance(self, evidence: Evidence) -> float:
        lexical = (evidence.coverage - COVERAGE_FLOOR) / (1 - COVERAGE_FLOOR)
        return max(self.dense(evidence.cosine), _clip(lexical))


def keep(relevances: Sequence[float], threshold: float) -> list[bool]:
    """Which of a question's chunks to return: none unless one reaches `threshold`, else those
    reaching `SUPPORT` of it."""
    if not relevances or max(relevances) < threshold:
        return [False] * len(relevances)
    return [score >= threshold * SUPPORT for score in relevances]


async def evidence(
    conn: psycopg.AsyncConnection[Any],
    collection_id: int,
    text: str,
    vector: np.ndarray | None,
    chunk_ids: Sequence[int],
) -> dict[int, Evidence]:
    """Each chunk's evidence of answering `text` (chunks deleted meanwhile are absent)."""
    if not chunk_ids:
        return {}
    cur = await conn.execute(
        query("search_evidence"),
        {"collection_id": collection_id, "query": text, "vector": vector, "ids": list(chunk_ids)},
    )
    return {
        int(chunk_id): Evidence(None if cosine is None else float(cosine), float(coverage))
        for chunk_id, cosine, coverage in await cur.fetchall()
    }


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))
