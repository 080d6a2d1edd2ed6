"""The events of a streamed answer (`POST …/answer` with `Accept: text/event-stream`), typed.

The server sends them in order: `search_complete` (the numbered sources), `llm_chunk` (text as
it is written, any number of times), `citations`, `metadata`, `done`; or `error` if the language
model fails midway, which ends the stream.
"""

from __future__ import annotations

from typing import Any

import msgspec
from httpx_sse import ServerSentEvent

from cari.answer.citations import Citation
from cari.answer.service import Source


class SearchComplete(msgspec.Struct):
    sources: list[Source]


class LLMChunk(msgspec.Struct):
    text: str


class Citations(msgspec.Struct):
    citations: dict[str, Citation]  # by source number, as the answer cites them: "1", "2", …


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


AnswerEvent = SearchComplete | LLMChunk | Citations | Metadata | Done | Failed

# Each event's name on the wire.
EVENTS: dict[str, type[AnswerEvent]] = {
    "search_complete": SearchComplete,
    "llm_chunk": LLMChunk,
    "citations": Citations,
    "metadata": Metadata,
    "done": Done,
    "error": Failed,
}


def decode(event: ServerSentEvent) -> AnswerEvent | None:
    """The event, or None for one this client does not know (a newer server's): skipped, as
    SSE clients do."""
    kind: Any = EVENTS.get(event.event)
    if kind is None:
        return None
    return msgspec.json.decode(event.data, type=kind)  # type: ignore[no-any-return]
