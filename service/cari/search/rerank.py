"""Reordering passages with a cross-encoder behind a Cohere-compatible `/rerank` endpoint.

Cohere, Jina, vLLM, Infinity and llama.cpp's server all take
`{"model", "query", "documents", "top_n"}` and answer `{"results": [{"index",
"relevance_score"}, ...]}`. Any failure, including an answer that does not fit, is a
`RerankUnavailable`: the caller keeps its own order.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, TypeGuard

import httpx

from cari.errors import RerankUnavailable
from cari.remote import one_line, redacted

log = logging.getLogger(__name__)


class Reranker:
    """One rerank model at `{base_url}/rerank`."""

    def __init__(self, *, base_url: str, model: str, api_key: str | None, timeout_s: float) -> None:
        self.model = model
        self.timeout_s = timeout_s
        self.url = base_url.rstrip("/") + "/rerank"
        self.endpoint = redacted(self.url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout_s)

    async def rerank(
        self, query: str, documents: Sequence[str], top_n: int
    ) -> list[tuple[int, float]]:
        """(index into `documents`, relevance score) of the best `top_n`, best first."""
        if top_n < 1:
            raise ValueError("top_n must be at least 1")
        if not documents:
            return []
        payload = {
            "model": self.model,
            "query": query,
            "documents": list(documents),
            "top_n": min(top_n, len(documents)),
        }
        try:
            response = await self._client.post(self.url, json=payload)
        except httpx.TimeoutException:
            raise self._failed(f"no answer within {self.timeout_s:g} s") from None
        except httpx.HTTPError as exc:
            raise self._failed(f"connection failed: {one_line(str(exc) or repr(exc))}") from None
        if response.status_code != 200:
            raise self._failed(f"HTTP {response.status_code}: {_reason(response)}")
        try:
            body = response.json()
        except ValueError:
            raise self._failed("the answer is not JSON") from None
        return self._ranking(body, len(documents))[:top_n]

    async def aclose(self) -> None:
        await self._client.aclose()

    def _ranking(self, body: Any, count: int) -> list[tuple[int, float]]:
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list):
            raise self._failed("the answer has no list of results")
        ranking: list[tuple[int, float]] = []
        seen: set[int] = set()
        for result in results:
            if not isinstance(result, dict):
                raise self._failed(f"invalid result {one_line(repr(result), 80)}")
            index, score = result.get("index"), result.get("relevance_score")
            if not _index(index, count) or index in seen:
                raise self._failed(f"invalid document index {index!r} for {count} documents")
            if not _number(score):
                raise self._failed(f"invalid relevance score {score!r}")
            seen.add(index)
            ranking.append((index, float(score)))
        # The best first, whatever order the server listed them in.
        ranking.sort(key=lambda item: item[1], reverse=True)
        return ranking

    def _failed(self, reason: str) -> RerankUnavailable:
        """The error names no endpoint (it reaches API clients); the log line does."""
        log.warning("reranker %s at %s failed: %s", self.model, self.endpoint, reason)
        return RerankUnavailable(f"reranker {self.model} failed: {reason}")


def _index(value: object, count: int) -> TypeGuard[int]:
    """An index into `count` documents (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < count


def _number(value: object) -> TypeGuard[int | float]:
    """A finite JSON number (not a boolean)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _reason(response: httpx.Response) -> str:
    """The reason the server gave: an OpenAI- or Cohere-style error body, or its text."""
    try:
        body = response.json()
    except ValueError:
        return one_line(response.text) or response.reason_phrase or "no reason given"
    if isinstance(body, dict):
        error = body.get("error")
        for value in (
            error.get("message") if isinstance(error, dict) else error,
            body.get("message"),
            body.get("detail"),
        ):
            if isinstance(value, str) and value.strip():
                return one_line(value)
    return one_line(str(body))
