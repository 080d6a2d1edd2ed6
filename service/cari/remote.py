"""What every client of a remote HTTP service needs (the OpenAI-compatible embedder and LLM,
the Cohere-compatible reranker): which failures deserve another try, how long the server asked
to wait, and messages that fit on one line and never show a password."""

from __future__ import annotations

import email.utils
import random
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:  # a client's retries need no OpenAI SDK
    import openai

# Statuses worth another try: request timeout, rate limit, and every server-side failure.
_RETRYABLE = frozenset({408, 429})


def retryable(status: int) -> bool:
    return status in _RETRYABLE or status >= 500


def one_line(text: str, limit: int = 300) -> str:
    """`text` with its whitespace collapsed, cut to `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def server_message(exc: openai.APIStatusError) -> str:
    """The reason the server gave, from an OpenAI-style error body or its plain text."""
    body = exc.body
    if isinstance(body, dict):
        for key in ("message", "detail", "error"):
            value = body.get(key)
            if isinstance(value, str) and value.strip():
                return one_line(value)
        return one_line(str(body))
    if isinstance(body, str) and body.strip():
        return one_line(body)
    return exc.response.reason_phrase or "no reason given"


def backoff(attempt: int, base_s: float, cap_s: float, asked: float | None) -> float:
    """Seconds before retry `attempt` (0 first): what the server asked for, up to `cap_s`, else
    an exponential backoff with jitter (half fixed, half random, so clients spread out)."""
    if asked is not None:
        return min(asked, cap_s)
    ceiling = min(cap_s, base_s * 2.0**attempt)
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def retry_after(headers: Any) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, or `Retry-After` in seconds or
    as an HTTP date), if it did."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


def redacted(url: str) -> str:
    """`url` without any user:password part, for messages."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url.rstrip("/")
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc)).rstrip("/")
