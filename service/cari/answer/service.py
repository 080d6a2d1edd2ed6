"""Answers: search, optional rerank, then an LLM answer (or an extractive one) citing [n].

`prepare` runs everything that can fail on the user's input (an unknown collection, a bad
field) before a response starts, so those stay HTTP errors; `events` then produces the answer
as the SSE stream's events, and `answer` collects the same events into one response:

    search_complete  the numbered sources
    llm_chunk        answer text as it arrives, invented citation markers removed
    citations        number -> the source it cites (only sources the answer cites)
    metadata         model, token counts, per-stage timings, warnings
    done             (or `error`, when the LLM fails midway; the stream ends either way)

When no source passes the collection's threshold the answer is the collection's "no
information" sentence (by default in the question's language) and no LLM is called.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
from psycopg_pool import AsyncConnectionPool

from cari import collection, metrics
from cari.answer.citations import (
    NO_INFORMATION,
    Citation,
    CitationFilter,
    Language,
    build_messages,
    citation,
    detect_language,
)
from cari.answer.extractive import extractive_answer
from cari.answer.llm import ChatClient, Usage
from cari.answer.rerank import Reranker
from cari.errors import LLMUnavailable, RerankUnavailable
from cari.limits import Mode, QueryText, Threshold, TopK
from cari.search.engine import RetrieverHit, Searcher, SearchRequest, SearchResult

EXTRACTIVE = "extractive"


class AnswerRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A question; unset fields take the collection's (or the server's) defaults."""

    query: QueryText
    mode: Mode | None = None
    top_k: TopK | None = None
    threshold: Threshold | None = None
    filters: dict[str, Any] | None = None
    rerank: bool = True  # when a reranker is configured
    stream: bool = False


class Source(msgspec.Struct):
    number: int
    result: SearchResult


class AnswerResponse(msgspec.Struct):
    query: str
    answer: str
    no_information: bool
    citations: dict[str, Citation]
    sources: list[Source]
    model: str | None  # None: no answer was written (no information)
    usage: dict[str, int | None] | None
    invented_citations: list[int]
    warnings: list[str]
    timings_ms: dict[str, float]


@dataclass(frozen=True, slots=True)
class Event:
    name: str
    data: dict[str, Any]


@dataclass(slots=True)
class Prepared:
    """A question searched (and reranked): what the answer is written from."""

    question: str
    sources: list[SearchResult]
    language: Language
    no_information: str | None  # the collection's own sentence, if set
    warnings: list[str]
    timings: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)


class Answerer:
    """Answers questions from the searcher's results, with the chat model and reranker it is
    given (either may be None). It does not own them: the runtime closes them."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        searcher: Searcher,
        *,
        chat: ChatClient | None,
        reranker: Reranker | None,
        rerank_candidates: int,
    ) -> None:
        self.pool = pool
        self.searcher = searcher
        self.chat = chat
        self.reranker = reranker
        self.rerank_candidates = rerank_candidates

    async def prepare(self, collection_name: str, request: AnswerRequest) -> Prepared:
        started = time.perf_counter()
        async with self.pool.connection() as conn:
            settings = await collection.get(conn, collection_name)
        top_k = request.top_k or settings.top_k
        rerank = self.reranker is not None and request.rerank
        search = SearchRequest(
            query=request.query,
            mode=request.mode,
            top_k=max(top_k, self.rerank_candidates) if rerank else top_k,
            threshold=request.threshold,
            filters=request.filters,
        )
        found = await self.searcher.search(collection_name, search)
        prepared = Prepared(
            question=request.query,
            sources=[],
            language=detect_language(request.query),
            no_information=settings.no_information,
            warnings=list(found.warnings),
            started=started,
        )
        prepared.timings["search"] = (time.perf_counter() - started) * 1000
        # A source with no relevance only says why nothing was computed (structured sources).
        structured = [r for r in found.results if r.kind != "chunk" and r.relevance > 0]
        chunks = [r for r in found.results if r.kind == "chunk"]
        if rerank and chunks:
            rerank_started = time.perf_counter()
            chunks = await self._rerank(request.query, chunks, top_k, prepared.warnings)
            prepared.timings["rerank"] = (time.perf_counter() - rerank_started) * 1000
            # Reordering the search's results: one of its stages, as far as metrics go.
            metrics.STAGE_SECONDS.labels(found.mode, "rerank").observe(
                prepared.timings["rerank"] / 1000
            )
        prepared.sources = [*structured, *chunks[:top_k]]
        return prepared

    async def _rerank(
        self, question: str, chunks: list[SearchResult], top_k: int, warnings: list[str]
    ) -> list[SearchResult]:
        assert self.reranker is not None
        texts = [f"{r.title}\n{r.content}" if r.title else r.content for r in chunks]
        try:
            order = await self.reranker.rerank(question, texts, top_k)
        except RerankUnavailable as exc:
            warnings.append(f"reranker unavailable, fused order kept: {exc.message}")
            return chunks
        reranked = []
        for rank, (index, score) in enumerate(order, 1):
            result = chunks[index]
            retrievers = {**result.retrievers, "rerank": RetrieverHit(rank, score)}
            reranked.append(msgspec.structs.replace(result, retrievers=retrievers))
        return reranked

    async def events(self, prepared: Prepared) -> AsyncIterator[Event]:
        sources = prepared.sources
        yield Event(
            "search_complete",
            {"sources": [msgspec.to_builtins(Source(n, r)) for n, r in enumerate(sources, 1)]},
        )
        if not sources:
            sentence = prepared.no_information or NO_INFORMATION[prepared.language]
            yield Event("llm_chunk", {"text": sentence})
            yield Event("citations", {"citations": {}})
            yield self._metadata(prepared, None, [], no_information=True)
            yield Event("done", {})
            return
        marks = CitationFilter(len(sources))
        usage: dict[str, int | None] | None = None
        model = EXTRACTIVE if self.chat is None else self.chat.model
        writing = time.perf_counter()
        if self.chat is None:
            text = marks.feed(extractive_answer(prepared.question, sources)) + marks.flush()
            yield Event("llm_chunk", {"text": text})
        else:
            messages = build_messages(prepared.question, sources, prepared.language)
            try:
                async for piece in self.chat.stream(messages):
                    if isinstance(piece, Usage):
                        usage = {
                            "prompt_tokens": piece.prompt_tokens,
                            "completion_tokens": piece.completion_tokens,
                        }
                    elif text := marks.feed(piece):
                        yield Event("llm_chunk", {"text": text})
            except LLMUnavailable as exc:
                yield Event("error", {"message": exc.message})
                return
            if text := marks.flush():
                yield Event("llm_chunk", {"text": text})
        prepared.timings["answer"] = (time.perf_counter() - writing) * 1000
        cited = {str(n): msgspec.to_builtins(citation(n, sources[n - 1])) for n in marks.cited}
        yield Event("citations", {"citations": cited})
        yield self._metadata(prepared, usage, marks.invented, no_information=False, model=model)
        yield Event("done", {})

    async def answer(self, prepared: Prepared) -> AnswerResponse:
        """The whole answer at once; an LLM failure raises LLMUnavailable (HTTP 503)."""
        text: list[str] = []
        collected: dict[str, dict[str, Any]] = {}
        async for event in self.events(prepared):
            if event.name == "llm_chunk":
                text.append(event.data["text"])
            elif event.name == "error":
                raise LLMUnavailable(event.data["message"])
            else:
                collected[event.name] = event.data
        meta = collected["metadata"]
        return AnswerResponse(
            query=prepared.question,
            answer="".join(text),
            no_information=meta["no_information"],
            citations=msgspec.convert(collected["citations"]["citations"], dict[str, Citation]),
            sources=[Source(n, r) for n, r in enumerate(prepared.sources, 1)],
            model=meta["model"],
            usage=meta["usage"],
            invented_citations=meta["invented_citations"],
            warnings=meta["warnings"],
            timings_ms=meta["timings_ms"],
        )

    def _metadata(
        self,
        prepared: Prepared,
        usage: dict[str, int | None] | None,
        invented: list[int],
        *,
        no_information: bool,
        model: str | None = None,
    ) -> Event:
        timings = {**prepared.timings, "total": (time.perf_counter() - prepared.started) * 1000}
        return Event(
            "metadata",
            {
                "model": model,
                "usage": usage,
                "no_information": no_information,
                "invented_citations": invented,
                "warnings": prepared.warnings,
                "timings_ms": {k: round(v, 3) for k, v in timings.items()},
            },
        )
