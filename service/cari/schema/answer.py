"""Answers (`POST …/answer`): the question, the cited answer, and the events of its SSE
stream (`search_complete`, `llm_chunk`, `citations`, `metadata`, `done`, or `error`)."""

from __future__ import annotations

from typing import Any

import msgspec

from cari.limits import Band, Mode, QueryText, Threshold, TopK
from cari.schema.search import SearchResult


class Citation(msgspec.Struct, frozen=True):
    """What an answer's [number] refers to."""

    number: int
    id: str  # the source's id: "chunk:12", "catalog:SKU", "financing:SKU"
    kind: str
    document_id: str | None
    chunk_id: int | None
    title: str
    source: str | None  # the document's source (e.g. its file), else metadata["source"]
    # HTML: a chunk's highlight (the passage around the question's words, the matches in
    # <mark>; cari.search.highlights); other sources' first 200 characters, escaped.
    snippet: str
    # Why the source is there: its relevance to the question (0..1, the search's calibrated
    # evidence) and band; an extractive answer cites the strongest source first.
    relevance: float | None = None
    band: Band | None = None


class AnswerRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A question; unset fields take the collection's (or the server's) defaults."""

    query: QueryText
    mode: Mode | None = None
    top_k: TopK | None = None
    threshold: Threshold | None = None
    filters: dict[str, Any] | None = None
    rerank: bool = True  # when a reranker is configured
    stream: bool = False


class NumberedSource(msgspec.Struct):
    """A search result as an answer numbers it: `[number]` in the answer cites it."""

    number: int
    result: SearchResult


class AnswerResponse(msgspec.Struct):
    query: str
    answer: str
    no_information: bool
    citations: dict[str, Citation]
    sources: list[NumberedSource]
    model: str | None  # None: no answer was written (no information)
    usage: dict[str, int | None] | None
    invented_citations: list[int]
    warnings: list[str]
    timings_ms: dict[str, float]


# The events' data, as the stream sends them (JSON) and `cari.client` decodes them.


class SearchComplete(msgspec.Struct):
    sources: list[NumberedSource]


class LLMChunk(msgspec.Struct):
    text: str


class Citations(msgspec.Struct):
    citations: dict[str, Citation]  # by source number, as the answer cites them: "1", "2", ...


class Metadata(msgspec.Struct):
    model: str | None  # None: no answer was written (no information)
    usage: dict[str, int | None] | None
    no_information: bool
    invented_citations: list[int]
    warnings: list[str]
    timings_ms: dict[str, float]


class Done(msgspec.Struct):
    pass


class Failed(msgspec.Struct):
    """The language model failed midway: the answer so far is incomplete."""

    message: str


EventData = SearchComplete | LLMChunk | Citations | Metadata | Done | Failed

# Each event's name in the stream.
EVENTS: dict[str, type[EventData]] = {
    "search_complete": SearchComplete,
    "llm_chunk": LLMChunk,
    "citations": Citations,
    "metadata": Metadata,
    "done": Done,
    "error": Failed,
}
