"""A real, local OpenAI-compatible chat server and Cohere-compatible reranker for tests.

It listens on 127.0.0.1 at an ephemeral port in a background thread and answers
`POST /v1/chat/completions` (whole, or streamed as server-sent events) and `POST /v1/rerank`.

    with FakeLLM() as fake:
        fake.reply = "Civic RS harganya Rp 600 juta [1]."
        fake.delay = 0.05          # before each streamed piece (and before a whole answer)
        fake.fail_after = 2        # the stream breaks (connection closed) after 2 pieces
        settings = Settings(_env_file=None, **fake.settings())
        ...
        assert fake.requests[-1]["stream"] is True
        assert fake.disconnected.wait(2)   # the client closed the stream before its end

The reply is streamed in `fake.pieces` (a word with the spaces after it each), in OpenAI's
chunk format: a role chunk, one chunk per piece, a `finish_reason` chunk, a usage chunk when
`stream_options.include_usage` asks, then `data: [DONE]`. Streams use chunked transfer
encoding, so a broken stream is visible to the client; with `fake.chunked = False` the body
simply ends when the connection closes (as through an HTTP/1.0 proxy).

`fake.status` answers every chat request with that error status; `queue_status` answers only
the next ones. The reranker scores a document by how many of the query's words it holds,
unless `fake.rerank_order` scripts the order; `rerank_status` makes it fail and `rerank_body`
replaces its answer (JSON-encoded, or sent as it is when bytes). `close()` (or leaving the
`with`) stops the server; its port then refuses connections.
"""

from __future__ import annotations

import collections
import json
import re
import select
import socket
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.local_server import LocalServer

DEFAULT_MODEL = "fake-chat-model"
DEFAULT_RERANK_MODEL = "fake-rerank-model"


class FakeLLM(LocalServer):
    """A chat and rerank server on 127.0.0.1; see the module docstring."""

    def __init__(self, *, model: str = DEFAULT_MODEL) -> None:
        self.model = model
        self.reply = "Civic RS harganya Rp 600 juta [1]."
        self.delay = 0.0
        self.fail_after: int | None = None
        self.chunked = True
        self.send_usage = True
        self.status = 200
        self.retry_after: str | None = None
        self.rerank_order: list[int] | None = None
        self.rerank_status = 200
        self.rerank_body: object | None = None
        self.requests: list[dict[str, Any]] = []
        self.rerank_requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.disconnected = threading.Event()
        self._statuses: collections.deque[int] = collections.deque()
        self._lock = threading.Lock()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        super().__init__(server)

    def settings(self, **overrides: object) -> dict[str, object]:
        """Keyword arguments for `Settings` that point the chat model and reranker here."""
        values: dict[str, object] = {
            "llm_base_url": self.url,
            "llm_model": self.model,
            "llm_api_key": "test-key",
            "rerank_base_url": self.url,
            "rerank_model": DEFAULT_RERANK_MODEL,
            "rerank_api_key": "test-key",
        }
        values.update(overrides)
        return values

    @property
    def pieces(self) -> list[str]:
        """The reply as streamed: each word with the whitespace after it."""
        return re.findall(r"\S+\s*|\s+", self.reply)

    def queue_status(self, *statuses: int) -> None:
        """Answer the next chat requests with `statuses` (200: normally), then `status`."""
        with self._lock:
            self._statuses.extend(statuses)

    # -- serving (called from the request threads) --------------------------------------------

    def _receive(self, body: dict[str, Any], authorization: str | None) -> int:
        with self._lock:
            self.requests.append(body)
            self.authorizations.append(authorization)
            return self._statuses.popleft() if self._statuses else self.status

    def _receive_rerank(self, body: dict[str, Any], authorization: str | None) -> None:
        with self._lock:
            self.rerank_requests.append(body)
            self.authorizations.append(authorization)

    def _ranking(self, query: str, documents: list[str], top_n: int) -> list[dict[str, Any]]:
        if self.rerank_order is not None:
            order = self.rerank_order
            scores = [1.0 / (1 + rank) for rank in range(len(order))]
        else:
            words = set(query.lower().split())
            hits = [len(words & set(document.lower().split())) for document in documents]
            order = sorted(range(len(documents)), key=lambda i: (-hits[i], i))
            scores = [hits[i] / max(1, len(words)) for i in order]
        results = [
            {"index": index, "relevance_score": score}
            for index, score in zip(order, scores, strict=True)
        ]
        return results[:top_n]


def _words(messages: object) -> int:
    if not isinstance(messages, list):
        return 0
    return sum(
        len(str(message.get("content", "")).split())
        for message in messages
        if isinstance(message, dict)
    )


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True  # server_close() waits for the request threads
    fake: FakeLLM


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # for chunked streams; every answer still closes its connection
    timeout = 10

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.close_connection = True
        path = self.path.rstrip("/")
        if path not in ("/v1/chat/completions", "/v1/rerank"):
            self._error(404, f"Unknown path {self.path}")
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError:
            self._error(400, "We could not parse the JSON body of your request.")
            return
        if not isinstance(body, dict):
            self._error(400, "The request body must be a JSON object.")
            return
        if path == "/v1/rerank":
            self._rerank(body)
        else:
            self._chat(body)

    # -- chat ---------------------------------------------------------------------------------

    def _chat(self, body: dict[str, Any]) -> None:
        fake = self.server.fake
        status = fake._receive(body, self.headers.get("Authorization"))
        if status != 200:
            headers = {"Retry-After": fake.retry_after} if fake.retry_after is not None else {}
            self._error(status, HTTPStatus(status).phrase, headers)
            return
        usage = {
            "prompt_tokens": _words(body.get("messages")),
            "completion_tokens": len(fake.pieces),
            "total_tokens": _words(body.get("messages")) + len(fake.pieces),
        }
        if body.get("stream"):
            self._stream(body, usage)
            return
        if not self._pause(fake.delay):
            return
        self._json(
            200,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", fake.model),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": fake.reply},
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage,
            },
        )

    def _stream(self, body: dict[str, Any], usage: dict[str, int]) -> None:
        fake = self.server.fake
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        if fake.chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(delta: dict[str, str], finish_reason: str | None = None) -> dict[str, Any]:
            return {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": body.get("model", fake.model),
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }

        if not self._event(chunk({"role": "assistant", "content": ""})):
            return
        for sent, piece in enumerate(fake.pieces):
            if fake.fail_after is not None and sent >= fake.fail_after:
                return  # the connection closes without the rest: a broken stream
            if not self._pause(fake.delay) or not self._event(chunk({"content": piece})):
                return
        if not self._event(chunk({}, "stop")):
            return
        options = body.get("stream_options")
        if fake.send_usage and isinstance(options, dict) and options.get("include_usage"):
            final = {**chunk({}), "choices": [], "usage": usage}
            if not self._event(final):
                return
        if self._write(b"data: [DONE]\n\n") and fake.chunked:
            self._send(b"0\r\n\r\n")

    def _event(self, payload: object) -> bool:
        return self._write(b"data: " + json.dumps(payload).encode("utf-8") + b"\n\n")

    def _write(self, data: bytes) -> bool:
        if self.server.fake.chunked:
            data = f"{len(data):x}\r\n".encode() + data + b"\r\n"
        return self._send(data)

    def _send(self, data: bytes) -> bool:
        """Write `data`; False when the client has gone."""
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.server.fake.disconnected.set()
            return False
        return True

    def _pause(self, seconds: float) -> bool:
        """Wait `seconds`, watching the connection; False when the client closed it (or the
        fake is closing)."""
        fake = self.server.fake
        deadline = time.monotonic() + seconds
        while True:
            if fake._closing.is_set():
                return False
            if self._client_gone():
                fake.disconnected.set()
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            select.select([self.connection], [], [], min(left, 0.05))

    def _client_gone(self) -> bool:
        # The client sends nothing after its request, so a readable socket means EOF or reset.
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return not self.connection.recv(1, socket.MSG_PEEK)
        except ConnectionResetError:
            return True

    # -- rerank -------------------------------------------------------------------------------

    def _rerank(self, body: dict[str, Any]) -> None:
        fake = self.server.fake
        fake._receive_rerank(body, self.headers.get("Authorization"))
        if fake.rerank_status != 200:
            self._error(fake.rerank_status, HTTPStatus(fake.rerank_status).phrase)
            return
        if not self._pause(fake.delay):
            return
        if fake.rerank_body is not None:
            self._json(200, fake.rerank_body)
            return
        query, documents = body.get("query"), body.get("documents")
        if not isinstance(query, str) or not isinstance(documents, list):
            self._error(422, "'query' must be a string and 'documents' a list.")
            return
        texts = [d.get("text", "") if isinstance(d, dict) else str(d) for d in documents]
        top_n = body.get("top_n")
        limit = top_n if isinstance(top_n, int) else len(texts)
        results = fake._ranking(query, texts, limit)
        self._json(200, {"id": "rerank-fake", "results": results, "meta": {"api_version": {}}})

    # -- plain answers ------------------------------------------------------------------------

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        error_type = "invalid_request_error" if status < 500 else "server_error"
        payload = {"error": {"message": message, "type": error_type, "param": None, "code": None}}
        self._json(status, payload, headers)

    def _json(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout); nothing to answer
