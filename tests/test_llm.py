"""The chat client against a real local OpenAI-compatible server (tests/fake_llm.py)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio
import pytest

from cari.answer.llm import ChatClient, Usage
from cari.errors import LLMUnavailable
from tests.fake_llm import FakeLLM

MESSAGES = [
    {"role": "system", "content": "Answer from the sources, citing them as [n]."},
    {"role": "user", "content": "Berapa harga Civic RS?"},
]
LONG_REPLY = " ".join(f"kata{i}" for i in range(200))


@contextlib.asynccontextmanager
async def client(base_url: str, **overrides: Any) -> AsyncIterator[ChatClient]:
    values: dict[str, Any] = {
        "base_url": base_url,
        "model": "fake-chat-model",
        "api_key": "test-key",
        "temperature": 0.1,
        "max_tokens": 300,
        "timeout_s": 5.0,
    }
    values.update(overrides)
    chat = ChatClient(**values)
    try:
        yield chat
    finally:
        await chat.aclose()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.anyio
async def test_complete(llm: FakeLLM) -> None:
    async with client(llm.url) as chat:
        text, usage = await chat.complete(MESSAGES)
    assert text == llm.reply
    assert usage == Usage(prompt_tokens=12, completion_tokens=len(llm.pieces))
    [body] = llm.requests
    assert body["model"] == "fake-chat-model"
    assert body["messages"] == MESSAGES
    assert body["temperature"] == 0.1
    assert body["max_tokens"] == 300
    assert not body.get("stream")
    assert llm.authorizations == ["Bearer test-key"]


@pytest.mark.anyio
async def test_stream_yields_pieces_in_order_then_usage(llm: FakeLLM) -> None:
    llm.delay = 0.01
    async with client(llm.url) as chat:
        *pieces, usage = [piece async for piece in chat.stream(MESSAGES)]
    assert usage == Usage(prompt_tokens=12, completion_tokens=len(pieces))
    assert len(pieces) > 3
    assert pieces == llm.pieces  # text pieces, the reply in order
    [body] = llm.requests
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert not llm.disconnected.is_set()


@pytest.mark.anyio
async def test_stream_without_usage(llm: FakeLLM) -> None:
    llm.send_usage = False
    async with client(llm.url) as chat:
        pieces = [piece async for piece in chat.stream(MESSAGES)]
    assert pieces == llm.pieces  # text only: no usage at the end


@pytest.mark.anyio
async def test_error_status(llm: FakeLLM, caplog: pytest.LogCaptureFixture) -> None:
    llm.status = 400
    async with client(llm.url) as chat:
        with pytest.raises(LLMUnavailable, match=r"^language model \S+ failed: HTTP 400"):
            await chat.complete(MESSAGES)
        # The message reaches API clients: the endpoint is for the operator's log only.
        assert any(f"at {llm.url}" in record.getMessage() for record in caplog.records)
        with pytest.raises(LLMUnavailable, match="HTTP 400: Bad Request"):
            [piece async for piece in chat.stream(MESSAGES)]
    assert len(llm.requests) == 2  # a refusal is not retried


@pytest.mark.anyio
async def test_complete_retries_a_server_error_once(llm: FakeLLM) -> None:
    llm.retry_after = "0"
    llm.queue_status(503)
    async with client(llm.url) as chat:
        text, _ = await chat.complete(MESSAGES)
        assert text == llm.reply
        assert len(llm.requests) == 2

        llm.status = 500
        with pytest.raises(LLMUnavailable, match="HTTP 500"):
            await chat.complete(MESSAGES)
        assert len(llm.requests) == 4


@pytest.mark.anyio
async def test_stream_is_not_retried(llm: FakeLLM) -> None:
    llm.queue_status(503)
    async with client(llm.url) as chat:
        with pytest.raises(LLMUnavailable, match="HTTP 503"):
            [piece async for piece in chat.stream(MESSAGES)]
    assert len(llm.requests) == 1


@pytest.mark.anyio
async def test_connection_refused(caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://user:secret@127.0.0.1:{closed_port()}/v1"
    async with client(url) as chat:
        with pytest.raises(LLMUnavailable, match="connection failed") as info:
            await chat.complete(MESSAGES)
        assert "127.0.0.1" not in info.value.message
        logged = " ".join(record.getMessage() for record in caplog.records)
        assert f"at http://127.0.0.1:{url.rsplit(':', 1)[1]}" in logged
        assert "secret" not in logged
        with pytest.raises(LLMUnavailable, match="connection failed"):
            [piece async for piece in chat.stream(MESSAGES)]


@pytest.mark.anyio
async def test_timeout(llm: FakeLLM) -> None:
    llm.delay = 2.0
    async with client(llm.url, timeout_s=0.2) as chat:
        with pytest.raises(LLMUnavailable, match=r"no answer within 0\.2 s"):
            await chat.complete(MESSAGES)
        with pytest.raises(LLMUnavailable, match=r"no answer within 0\.2 s"):
            [piece async for piece in chat.stream(MESSAGES)]


@pytest.mark.anyio
async def test_stream_broken_midway(llm: FakeLLM) -> None:
    llm.fail_after = 2
    received: list[str | Usage] = []
    async with client(llm.url) as chat:
        with pytest.raises(LLMUnavailable, match="connection failed"):
            async for piece in chat.stream(MESSAGES):
                received.append(piece)
    assert received == llm.pieces[:2]


@pytest.mark.anyio
async def test_stream_cut_without_framing_is_incomplete(llm: FakeLLM) -> None:
    llm.chunked = False  # the body just ends when the connection closes
    llm.fail_after = 2
    received: list[str | Usage] = []
    async with client(llm.url) as chat:
        with pytest.raises(LLMUnavailable, match="ended before the answer was complete"):
            async for piece in chat.stream(MESSAGES):
                received.append(piece)
    assert received == llm.pieces[:2]


@pytest.mark.anyio
async def test_closing_the_stream_early_disconnects(llm: FakeLLM) -> None:
    llm.reply = LONG_REPLY
    llm.delay = 0.05  # the whole reply would take 10 s
    async with client(llm.url) as chat:
        pieces = chat.stream(MESSAGES)
        assert isinstance(pieces, AsyncGenerator)
        assert await anext(pieces) == "kata0 "
        assert await anext(pieces) == "kata1 "
        await pieces.aclose()
        with anyio.fail_after(2):
            while not llm.disconnected.is_set():
                await anyio.sleep(0.02)


@pytest.mark.anyio
async def test_cancelling_the_consumer_disconnects(llm: FakeLLM) -> None:
    llm.reply = LONG_REPLY
    llm.delay = 0.05
    received: list[str | Usage] = []
    async with client(llm.url) as chat:
        with anyio.move_on_after(0.3):
            async for piece in chat.stream(MESSAGES):
                received.append(piece)
        assert 0 < len(received) < len(llm.pieces)
        with anyio.fail_after(2):
            while not llm.disconnected.is_set():
                await anyio.sleep(0.02)
