"""`explain`: how a search found its results, from what the search kept of its work (the plan,
the sub-queries' parts, the structured sources' figures, the timings)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cari.schema.search import (
    CandidatesExplain,
    DecompositionExplain,
    DroppedChunk,
    EfSearchExplain,
    ExactTokens,
    Explain,
    ScaleExplain,
    SearchRequest,
    SubQueryExplain,
    WeighedChunk,
)
from cari.search import relevance
from cari.search.decompose import Decomposition
from cari.search.fusion import Fused
from cari.search.plan import Part, Plan
from cari.search.signals import Signal


def explain(
    *,
    served_by: str,
    request: SearchRequest,
    plan: Plan,
    exact: Signal,
    decomposition: Decomposition,
    parts: Sequence[Part],
    routes: dict[str, list[str]],
    structured: dict[str, Any],
    timings: dict[str, float],
    keyword_engine: str,
    default_scale: relevance.Scale,
) -> Explain:
    """`default_scale`: the default embedder's, for a search that weighed nothing."""
    first = parts[0]
    embedded = [p for p in parts if p.vector is not None]
    scale = first.scale or default_scale
    signal = ExactTokens(name=exact.name, exact_tokens=list(exact.exact_tokens))
    return Explain(
        served_by=served_by,  # primary, or the replica (cari.db.replicas)
        mode=plan.mode,
        signal=signal,
        decomposition=DecompositionExplain(
            sub_queries=list(decomposition.parts),
            pattern=decomposition.pattern,
            kept_whole_because=decomposition.reason,
        ),
        routes=routes,
        fusion=plan.method,
        weights=plan.weights,
        rrf_k=plan.rrf_k,
        top_k=plan.top_k,
        threshold=plan.threshold,
        relevance_scale=ScaleExplain(scale.cosine_floor, scale.cosine_ceiling, first.scale_source),
        candidates=CandidatesExplain(requested=plan.candidates),
        keyword_engine=keyword_engine,
        ef_search=EfSearchExplain(
            requested=plan.ef_search, applied=first.applied_ef, source=plan.ef_search_source
        ),
        query_vector_cached=bool(embedded) and all(p.cached for p in embedded),
        filters=request.filters or {},
        sub_queries=[_part(p, plan, default_scale) for p in parts],
        structured=structured,
        timings_ms={k: round(v, 3) for k, v in timings.items()},
    )


def _part(part: Part, plan: Plan, default_scale: relevance.Scale) -> SubQueryExplain:
    scale = part.scale or default_scale

    def weighed(fused: Fused) -> dict[str, Any]:
        found = part.evidence[fused.chunk_id]
        score = round(part.scored[fused.chunk_id], 4)
        return {
            "id": f"chunk:{fused.chunk_id}",
            "relevance": score,
            "band": relevance.band(score),
            "cosine": None if found.cosine is None else round(found.cosine, 4),
            "dense": round(scale.dense(found), 4),
            "coverage": round(found.coverage, 4),
            "specificity": round(found.specificity, 4),
            "lexical": round(relevance.lexical(found), 4),
        }

    threshold = plan.threshold or 0.0  # no threshold drops nothing
    if part.kept:
        share = "the threshold" if plan.support >= 1 else f"{plan.support:g} of the threshold"
        reason = f"relevance below {threshold * plan.support:g}, {share}"
    else:
        reason = f"no chunk reaches the threshold {threshold:g}: off-topic here"
    routes = {} if part.routing is None else part.routing.evidence
    return SubQueryExplain(
        query=part.text,
        candidates={name: len(found) for name, found in part.lists.items()},
        keyword_postings_read=part.postings_read,
        query_vector_cached=part.cached,
        routes=routes,
        kept=[WeighedChunk(**weighed(f)) for f in part.kept],
        dropped=[DroppedChunk(**weighed(f), reason=reason) for f in part.dropped],
        timings_ms={k: round(v, 3) for k, v in part.timings.items()},
        embedded_query=part.embedded,
        keyword_damaged_blocks=[str(block) for block in part.damaged] or None,
        weights=None if part.weights is None else {k: round(v, 4) for k, v in part.weights.items()},
    )
