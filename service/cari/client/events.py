"""The events of a streamed answer (`POST …/answer` with `Accept: text/event-stream`), decoded
into the structs the server sends them from (`cari.answer.service`).

In order: `search_complete` (the numbered sources), `llm_chunk` (text as it is written, any
number of times), `citations`, `metadata`, `done`; or `error` if the language model fails
midway, which ends the stream.
"""

from __future__ import annotations

from typing import Any

import msgspec
from httpx_sse import ServerSentEvent

from cari.schema.answer import EVENTS, EventData


def decode(event: ServerSentEvent) -> EventData | None:
    """The event, or None for one this client does not know (a newer server's): skipped, as
    SSE clients do."""
    kind: Any = EVENTS.get(event.event)
    if kind is None:
        return None
    return msgspec.json.decode(event.data, type=kind)  # type: ignore[no-any-return]
