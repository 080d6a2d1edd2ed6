"""Chat completions from any OpenAI-compatible API, whole or streamed, through the `openai` SDK.

Every failure (unreachable, timeout, an HTTP error, a stream that breaks midway) is an
`LLMUnavailable` naming the model and the reason (the endpoint goes to the log only); the caller
falls back or reports it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import anyio

from cari.errors import LLMUnavailable
from cari.remote import one_line, redacted, retry_after, retryable, server_message

# The SDK is imported where a client uses it: importing it takes ~0.7 s, which every `cari`
# command paid at start though most never talk to a language model.
if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletionMessageParam

# `complete` tries a rate-limited or failing server once more, after Retry-After (capped) or:
_RETRY_WAIT_S = 1.0
_RETRY_WAIT_CAP_S = 5.0

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts the server reported, where it did."""

    prompt_tokens: int | None
    completion_tokens: int | None


class ChatClient:
    """One chat model behind an OpenAI-compatible `/chat/completions` endpoint.

    `complete` retries once on 408, 429 and 5xx; a stream is never retried, since its first
    pieces may already have reached the user.
    """

    def __init__(
        self,
        *,
        base_url: str | None,
        model: str,
        api_key: str | None,
        temperature: float,
        max_tokens: int,
        timeout_s: float,
    ) -> None:
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        import openai

        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "unused",
            timeout=timeout_s,  # for a stream: the longest wait for the next piece
            max_retries=0,  # retried here, with our policy and our errors
        )
        self.endpoint = redacted(str(self._client.base_url))

    async def complete(self, messages: list[dict[str, str]]) -> tuple[str, Usage]:
        """The whole answer and its usage."""
        import openai

        retried = False
        while True:
            try:
                response = await self._client.chat.completions.create(
                    model=self.model,
                    messages=_messages(messages),
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                )
            except openai.APIStatusError as exc:
                if retried or not retryable(exc.status_code):
                    raise self._unavailable(exc) from None
                retried = True
                asked = retry_after(exc.response.headers)
                await anyio.sleep(_RETRY_WAIT_S if asked is None else min(asked, _RETRY_WAIT_CAP_S))
                continue
            except openai.OpenAIError as exc:
                raise self._unavailable(exc) from None
            try:
                text = response.choices[0].message.content or ""
                return text, _usage(response.usage)
            except (AttributeError, IndexError, TypeError) as exc:
                raise self._failed(f"unusable answer: {one_line(str(exc))}") from None

    async def stream(self, messages: list[dict[str, str]]) -> AsyncIterator[str | Usage]:
        """The answer's text pieces as they arrive, then its `Usage` if the server sent one
        (each stream its own: one client serves concurrent requests).

        Closing the generator early (or cancelling its consumer) closes the HTTP response at
        once, so the server stops generating.
        """
        import openai

        usage: Usage | None = None
        try:
            chunks = await self._client.chat.completions.create(
                model=self.model,
                messages=_messages(messages),
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                stream=True,
                stream_options={"include_usage": True},
            )
        except openai.OpenAIError as exc:
            raise self._unavailable(exc) from None
        finished = False
        try:
            async for chunk in chunks:
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices:
                    finished = finished or choice.finish_reason is not None
                    if choice.index == 0 and choice.delta.content:
                        yield choice.delta.content
        except openai.OpenAIError as exc:
            raise self._unavailable(exc) from None
        except (AttributeError, TypeError) as exc:
            raise self._failed(f"unusable stream: {one_line(str(exc))}") from None
        finally:
            with anyio.CancelScope(shield=True):  # close even when our task is cancelled
                await chunks.close()
        # A connection closed without chunked framing (HTTP/1.0, some proxies) ends the body
        # cleanly; only the missing finish_reason tells it apart from a complete answer.
        if not finished:
            raise self._failed("the stream ended before the answer was complete")
        if usage is not None:
            yield usage

    async def aclose(self) -> None:
        await self._client.close()

    def _failed(self, reason: str) -> LLMUnavailable:
        """The error names no endpoint (it reaches API clients); the log line does."""
        log.warning("language model %s at %s failed: %s", self.model, self.endpoint, reason)
        return LLMUnavailable(f"language model {self.model} failed: {reason}")

    def _unavailable(self, exc: openai.OpenAIError) -> LLMUnavailable:
        import openai

        if isinstance(exc, openai.APIStatusError):
            return self._failed(f"HTTP {exc.status_code}: {server_message(exc)}")
        if isinstance(exc, openai.APITimeoutError):
            return self._failed(f"no answer within {self.timeout_s:g} s")
        if isinstance(exc, openai.APIConnectionError):
            detail = str(exc.__cause__ or "") or exc.message
            return self._failed(f"connection failed: {one_line(detail)}")
        return self._failed(f"unusable answer: {one_line(str(exc))}")


def _messages(messages: list[dict[str, str]]) -> list[ChatCompletionMessageParam]:
    return cast("list[ChatCompletionMessageParam]", messages)


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage(None, None)
    return Usage(
        _count(getattr(usage, "prompt_tokens", None)),
        _count(getattr(usage, "completion_tokens", None)),
    )


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
