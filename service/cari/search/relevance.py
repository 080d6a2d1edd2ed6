"""The relevance scale: 0 to 1, from absolute evidence, so that one threshold fits every query.

Fused scores rank a query's candidates against each other: every query gets a "best" chunk even
when nothing in the collection is about it. Relevance therefore reads evidence that does not
depend on the other candidates (`sql/search_evidence.sql`), each piece through a smooth curve,
never a rule that zeroes it:

- dense: the cosine similarity of chunk and query on the embedder's scale, a logistic curve
  through relevance 0.25 at `floor + width / 4` and 0.5 at `floor + width / 2` (so 0.1 at the
  floor, 0.9 at the ceiling). Embedders differ in where unrelated and related texts fall
  (multilingual-e5 puts unrelated text near 0.75), so floor and ceiling are settings,
  calibrated by `bench.threshold` and fitted to each collection (`cari.search.fit`, which
  places relevance 0.25 at `floor + width / 4`, where this curve puts it). The curve reads the
  cosine with the word coverage beside it: raised by `COVERAGE_LIFT` of the scale's width per
  unit of coverage above `COVERAGE_CENTRE`, lowered below it. A short record that holds the
  question's words sits further from a long question than a passage does, and an off-topic
  chunk close to the question's wording seldom holds its rare words: read together, answers
  refused 1.9 % of the reporting sets' on-topic questions instead of 3.9 %, and 97.0 % of
  off-topic questions in small collections instead of 93.6 % (docs/benchmarks.md, "The cosine
  read with the word coverage"). At `COVERAGE_CENTRE` the cosine is read as it is: placed so
  that the tuning sets refuse as many off-topic questions as with the cosine alone, so the
  configured floors and the fit, which places a scale from its probes' cosines, keep their
  meaning;
- lexical: the query's term coverage, the idf-weighted share of its words the chunk holds (the
  keyword evidence), a logistic curve through 0.25 at coverage 0.7 and 0.5 at 0.8. Sharing a
  few subject words is common between unrelated texts (measured: it let off-topic questions
  through), holding nearly all of the query's rare words is not; an exact identifier the
  embedder has never seen (a SKU) is relevant wherever it occurs. A chunk holding most of the
  question's words is never relevance 0 (coverage 0.59: 0.09; it was cut to 0 below 0.6).
  Coverage is a share, blind to how common the words are: every chunk of a handbook holding
  "back" and "database" read strong for "how do I back up the database?". So coverage counts
  only as far as the words are specific (`specific`), in both curves: how unlikely it is that
  the chunk holds them by chance, their summed idf over the chunks other than one holding
  each, less the log of the collection's size (-ln of the other chunks expected to hold them
  all, were words independent). A word only this chunk holds reads 0.52; words most chunks
  hold, weak, and they no longer lift the cosine.

A chunk's relevance is the larger of the two (`COMBINE`; `bench.threshold` measured it
against their probabilistic sum). Its band (`band`): 0.5 and above, strong; 0.3 and above,
moderate; below, weak (an answer's threshold, 0.25 by default, most likely drops it).

Search ranks: it returns the top k whatever their relevance, unless the request (or the
collection's `search_threshold`) asks for a threshold. Answers refuse: they ask for the
collection's `threshold`. A threshold applies to a question as a whole, then to its chunks
(`keep`): when no chunk reaches it, the collection does not hold the answer and nothing is
returned; when one does, a search's chunks reaching half of it come back with it (a single cut
at the threshold dropped on-topic chunks that the strong one vouches for: Recall@10 fell 3.4x
more for the same off-topic rejection; docs/benchmarks.md, "Relevance threshold"), and an
answer's sources must reach it themselves (`ANSWER_SUPPORT`: of an answer's 5 sources, the
half-threshold companions were irrelevant more often than not, and off-topic questions that
passed took 4.9 of them instead of 2.4, while the relevant ones kept stayed the same;
docs/benchmarks.md, "What reaches an answer beside its best source").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import psycopg

from cari.db.queries import query
from cari.limits import Band
from cari.search.lexemes import Lexemes

Combine = Literal["max", "either"]

STRONG = 0.5  # relevance from which a result is a strong match
MODERATE = 0.3  # ... a moderate one; below, weak
COVERAGE_QUARTER = 0.7  # term coverage at relevance 0.25 (the default threshold)
COVERAGE_HALF = 0.8  # term coverage at relevance 0.5
# How much of its coverage counts (`specific`): relevance 0.25 where ~20 other chunks would hold
# the chunk's words by chance (specificity -3), 0.5 where ~0.6 would (a word only the chunk
# holds reads 0.52). The steepest curve with which the tuning sets' answers refuse no more
# on-topic and no fewer off-topic questions, in the same run (docs/benchmarks.md, "Specificity:
# words that many chunks hold"): of chunks holding 80 % or more of a question's words, 17 % are
# relevant where more than one other chunk would hold them (below 0), 50-67 % from 4 up.
SPECIFICITY_QUARTER = -3.0
SPECIFICITY_HALF = 0.5
# Chosen by `python -m bench.relevance_frontier --joint --fitted` on the tuning sets, in full and
# in small collections at once (docs/benchmarks.md, "The cosine read with the word coverage").
COVERAGE_LIFT = 0.5  # share of the scale's width the cosine is read higher per unit of coverage
COVERAGE_CENTRE = 0.155  # the coverage at which the cosine is read as it is
COMBINE: Combine = "max"  # how dense and lexical evidence make one relevance
SUPPORT = 0.5  # a search's chunks beside one that reaches the threshold need this share of it
ANSWER_SUPPORT = 1.0  # an answer's: chosen by `bench.search_ranks --companions`


@dataclass(frozen=True, slots=True)
class Evidence:
    cosine: float | None  # None when the query was not embedded (keyword mode)
    coverage: float
    # How unlikely the chunk holds the words it holds by chance: their summed idf over the other
    # chunks less ln(chunks), -ln(other chunks expected to hold them all, were words independent).
    specificity: float


@dataclass(frozen=True, slots=True)
class Scale:
    cosine_floor: float  # relevance 0.1
    cosine_ceiling: float  # relevance 0.9

    def dense(
        self, evidence: Evidence, lift: float = COVERAGE_LIFT, centre: float = COVERAGE_CENTRE
    ) -> float:
        """Relevance from the cosine, read with the word coverage beside it (as far as the
        words are specific)."""
        if evidence.cosine is None:
            return 0.0
        width = self.cosine_ceiling - self.cosine_floor
        counted = min(evidence.coverage, specific(evidence))
        read = evidence.cosine + lift * width * (counted - centre)
        return curve(read, self.cosine_floor + width / 4, self.cosine_floor + width / 2)

    def relevance(
        self,
        evidence: Evidence,
        combine: Combine = COMBINE,
        lift: float = COVERAGE_LIFT,
        centre: float = COVERAGE_CENTRE,
    ) -> float:
        dense = self.dense(evidence, lift, centre)
        words = lexical(evidence)
        if combine == "either":  # the probability that either says relevant
            return 1 - (1 - dense) * (1 - words)
        return max(dense, words)


def lexical(evidence: Evidence) -> float:
    """Relevance from the words alone: the coverage's curve, as far as the words are specific."""
    return min(curve(evidence.coverage, COVERAGE_QUARTER, COVERAGE_HALF), specific(evidence))


def specific(evidence: Evidence) -> float:
    """How far the chunk's words are evidence at all: 0 to 1, low where many other chunks would
    hold them by chance."""
    return curve(evidence.specificity, SPECIFICITY_QUARTER, SPECIFICITY_HALF)


def curve(value: float, quarter: float, half: float) -> float:
    """The logistic curve through 0.25 at `quarter` and 0.5 at `half` (0.75 as far above):
    smooth, above 0 and below 1 everywhere."""
    exponent = math.log(3) * (value - half) / (half - quarter)
    if exponent < -700:  # exp would overflow: as good as 0, but not 0
        return math.ulp(0.0)
    return 1 / (1 + math.exp(-exponent))


def band(relevance: float) -> Band:
    """strong (0.5 and above), moderate (0.3 and above) or weak: the console's green, yellow
    and red."""
    if relevance >= STRONG:
        return "strong"
    if relevance >= MODERATE:
        return "moderate"
    return "weak"


def keep(relevances: Sequence[float], threshold: float, support: float = SUPPORT) -> list[bool]:
    """Which of a question's chunks a threshold keeps: none unless one reaches `threshold`,
    else those reaching `support` of it."""
    if not relevances or max(relevances) < threshold:
        return [False] * len(relevances)
    return [score >= threshold * support for score in relevances]


async def evidence(
    conn: psycopg.AsyncConnection[Any],
    collection_id: int,
    asked: Lexemes,
    vector: np.ndarray | None,
    chunk_ids: Sequence[int],
) -> dict[int, Evidence]:
    """Each chunk's evidence of answering the question whose lexemes are `asked` and whose
    vector is `vector` (chunks deleted meanwhile are absent)."""
    if not chunk_ids:
        return {}
    cur = await conn.execute(
        query("search_evidence"),
        {
            **asked.params(),
            "collection_id": collection_id,
            "vector": vector,
            "ids": list(chunk_ids),
        },
    )
    return {
        int(chunk_id): Evidence(
            None if cosine is None else float(cosine), float(coverage), float(specificity)
        )
        for chunk_id, cosine, coverage, specificity in await cur.fetchall()
    }
