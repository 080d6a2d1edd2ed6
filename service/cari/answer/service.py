"""Answers: search, optional rerank, then an LLM answer (or an extractive one) citing [n].

`prepare` runs everything that can fail on the user's input (an unknown collection, a bad
field) before a response starts, so those stay HTTP errors; `events` then produces the answer
as the SSE stream's events, and `answer` collects the same events into one response:

    search_complete  the numbered sources
    llm_chunk        answer text as it arrives, invented citation markers removed
    citations        number -> the source it cites (only sources the answer cites)
    metadata         model, token counts, per-stage timings, warnings
    done             (or `error`, when the LLM fails midway; the stream ends either way)

Searches rank; answers refuse: only sources reaching the request's `threshold`, else the
collection's (0.25 by default; not its `search_threshold`), reach the LLM or the extractive
answer. When none does the answer is the collection's "no information" sentence (by default in
the question's language) and no LLM is called.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from cari import collection
from cari.answer.citations import (
    COLLECTION_LANGUAGES,
    NO_INFORMATION,
    CitationFilter,
    Language,
    build_messages,
    citation,
    detect_language,
)
from cari.answer.extractive import extractive_answer
from cari.answer.llm import ChatClient, Usage
from cari.db.replicas import Node
from cari.errors import LLMUnavailable
from cari.schema.answer import (
    AnswerRequest,
    AnswerResponse,
    Citation,
    Citations,
    Done,
    EventData,
    Failed,
    LLMChunk,
    Metadata,
    NumberedSource,
    SearchComplete,
)
from cari.schema.search import SearchRequest, SearchResult
from cari.search import relevance
from cari.search.engine import Searcher

EXTRACTIVE = "extractive"


@dataclass(frozen=True, slots=True)
class Event:
    name: str
    data: EventData


@dataclass(slots=True)
class PreparedAnswer:
    """A question searched (and reranked): what the answer is written from."""

    question: str
    sources: list[SearchResult]
    language: Language
    no_information: str | None  # the collection's own sentence, if set
    warnings: list[str]
    timings: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)


class Answerer:
    """Answers questions from the searcher's results (reranked where the searcher has a
    reranker) with the chat model it is given, or extractively without one. It does not own
    the chat client: the runtime closes it."""

    def __init__(
        self,
        searcher: Searcher,
        *,
        chat: ChatClient | None,
    ) -> None:
        self.searcher = searcher
        self.chat = chat

    async def prepare(
        self, collection_name: str, request: AnswerRequest, *, token: int | None = None
    ) -> PreparedAnswer:
        """Search for the answer's sources, on a read replica (one that has replayed `token`,
        a write's consistency token, when given) or the primary (`cari.db.replicas`)."""
        return await self.searcher.reads.run(
            token, lambda node: self._prepare(node, collection_name, request)
        )

    async def _prepare(
        self, node: Node, collection_name: str, request: AnswerRequest
    ) -> PreparedAnswer:
        started = time.perf_counter()
        async with node.pool.connection() as conn:
            settings = await collection.get(conn, collection_name)
        search = SearchRequest(
            query=request.query,
            mode=request.mode,
            top_k=request.top_k,
            # Answers refuse: what reaches the answer passes the threshold.
            threshold=settings.threshold if request.threshold is None else request.threshold,
            filters=request.filters,
            # On by default for answers, but only where a reranker is configured.
            rerank=request.rerank and self.searcher.reranker is not None,
        )
        # Every source must reach the threshold itself: no companions below it.
        found = await self.searcher.search_on(
            node, collection_name, search, support=relevance.ANSWER_SUPPORT
        )
        prepared = PreparedAnswer(
            question=request.query,
            # A source with no relevance only says why nothing was computed (structured).
            sources=[r for r in found.results if r.kind == "chunk" or r.relevance > 0],
            language=detect_language(
                request.query, tie=COLLECTION_LANGUAGES.get(settings.language, "id")
            ),
            no_information=settings.no_information,
            warnings=list(found.warnings),
            started=started,
        )
        prepared.timings["search"] = (time.perf_counter() - started) * 1000
        return prepared

    async def events(self, prepared: PreparedAnswer) -> AsyncIterator[Event]:
        sources = prepared.sources
        yield Event(
            "search_complete",
            SearchComplete([NumberedSource(n, r) for n, r in enumerate(sources, 1)]),
        )
        if not sources:
            sentence = prepared.no_information or NO_INFORMATION[prepared.language]
            yield Event("llm_chunk", LLMChunk(sentence))
            yield Event("citations", Citations({}))
            yield self._metadata(prepared, None, [], no_information=True)
            yield Event("done", Done())
            return
        marks = CitationFilter(len(sources))
        usage: dict[str, int | None] | None = None
        model = EXTRACTIVE if self.chat is None else self.chat.model
        writing = time.perf_counter()
        if self.chat is None:
            text = marks.feed(extractive_answer(prepared.question, sources)) + marks.flush()
            yield Event("llm_chunk", LLMChunk(text))
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
                        yield Event("llm_chunk", LLMChunk(text))
            except LLMUnavailable as exc:
                yield Event("error", Failed(exc.message))
                return
            if text := marks.flush():
                yield Event("llm_chunk", LLMChunk(text))
        prepared.timings["answer"] = (time.perf_counter() - writing) * 1000
        cited = {str(n): citation(n, sources[n - 1]) for n in marks.cited}
        yield Event("citations", Citations(cited))
        yield self._metadata(prepared, usage, marks.invented, no_information=False, model=model)
        yield Event("done", Done())

    async def answer(self, prepared: PreparedAnswer) -> AnswerResponse:
        """The whole answer at once; an LLM failure raises LLMUnavailable (HTTP 503)."""
        text: list[str] = []
        citations: dict[str, Citation] = {}
        meta: Metadata | None = None
        async for event in self.events(prepared):
            data = event.data
            if isinstance(data, LLMChunk):
                text.append(data.text)
            elif isinstance(data, Failed):
                raise LLMUnavailable(data.message)
            elif isinstance(data, Citations):
                citations = data.citations
            elif isinstance(data, Metadata):
                meta = data
        assert meta is not None  # every stream that does not fail sends it
        return AnswerResponse(
            query=prepared.question,
            answer="".join(text),
            no_information=meta.no_information,
            citations=citations,
            sources=[NumberedSource(n, r) for n, r in enumerate(prepared.sources, 1)],
            model=meta.model,
            usage=meta.usage,
            invented_citations=meta.invented_citations,
            warnings=meta.warnings,
            timings_ms=meta.timings_ms,
        )

    def _metadata(
        self,
        prepared: PreparedAnswer,
        usage: dict[str, int | None] | None,
        invented: list[int],
        *,
        no_information: bool,
        model: str | None = None,
    ) -> Event:
        timings = {**prepared.timings, "total": (time.perf_counter() - prepared.started) * 1000}
        return Event(
            "metadata",
            Metadata(
                model=model,
                usage=usage,
                no_information=no_information,
                invented_citations=invented,
                warnings=prepared.warnings,
                timings_ms={k: round(v, 3) for k, v in timings.items()},
            ),
        )
