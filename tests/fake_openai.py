"""A real, local OpenAI-compatible embeddings server for tests.

It listens on 127.0.0.1 at an ephemeral port in a background thread and answers
`POST /v1/embeddings` with deterministic unit vectors (see `vector_for`), or with whatever
failures a test scripts. Every request body is recorded, and so is the highest number of
requests it was answering at once.

    with FakeOpenAI(dimension=8) as fake:
        fake.fail(429, times=2, retry_after="0")     # the next two requests are rate-limited
        settings = Settings(_env_file=None, **fake.settings(embedding_max_retries=3))
        ...
        assert [len(body["input"]) for body in fake.requests] == [...]

Scripting: `fail` and `queue` decide the next requests' answers in order; once the queue is
empty every request gets `fake.default` (a normal answer unless `fail(..., times=None)` or
assigning `fake.default` changed it). `fake.delay` holds every answer back that long, so
concurrent requests overlap. `close()` (or leaving the `with`) stops the server; its port then
refuses connections, which is how a test makes the embedder unreachable.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import threading
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import numpy.typing as npt

from tests.local_server import LocalServer

DEFAULT_MODEL = "fake-embedding-model"


def vector_for(text: str, dimension: int) -> npt.NDArray[np.float32]:
    """The unit vector the fake answers for `text`: seeded by a hash of the text."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8])
    vector = np.random.default_rng(seed).standard_normal(dimension)
    return (vector / np.linalg.norm(vector)).astype(np.float32)


@dataclass(frozen=True)
class Reply:
    """How the fake answers one request.

    `status` 200 answers with vectors (`dimension` overrides their width); any other status
    answers an OpenAI-style error `{"error": {"message", "type", "code"}}`. `retry_after` sets
    the Retry-After header; `delay` holds the answer back, in seconds, on top of `fake.delay`.
    `numbers` answers JSON numbers even when base64 was asked, as servers that ignore
    `encoding_format` do; `embedding` replaces every embedding with that value as it is.
    """

    status: int = 200
    message: str | None = None
    error_type: str | None = None
    retry_after: str | None = None
    dimension: int | None = None
    delay: float = 0.0
    numbers: bool = False
    embedding: object = None


OK = Reply()


class FakeOpenAI(LocalServer):
    """An OpenAI-compatible embeddings server on 127.0.0.1; see the module docstring."""

    def __init__(self, dimension: int = 8, *, model: str = DEFAULT_MODEL) -> None:
        self.dimension = dimension
        self.model = model
        self.default = OK
        self.delay = 0.0
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._script: collections.deque[Reply] = collections.deque()
        self._lock = threading.Lock()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        super().__init__(server)

    def settings(self, **overrides: object) -> dict[str, object]:
        """Keyword arguments for `Settings` that point the openai embedder at this server."""
        values: dict[str, object] = {
            "embedder": "openai",
            "embedding_base_url": self.url,
            "embedding_api_key": "test-key",
            "embedding_model": self.model,
            "embedding_dimensions": self.dimension,
        }
        values.update(overrides)
        return values

    # -- scripting ----------------------------------------------------------------------------

    def queue(self, *replies: Reply) -> None:
        """Answer the next requests with `replies`, in order, then go back to `default`."""
        with self._lock:
            self._script.extend(replies)

    def fail(
        self,
        status: int,
        message: str | None = None,
        *,
        times: int | None = 1,
        retry_after: str | None = None,
        error_type: str | None = None,
    ) -> None:
        """Answer the next `times` requests with an error; `times=None` means every request."""
        reply = Reply(status, message, error_type, retry_after)
        if times is None:
            self.default = reply
        else:
            self.queue(*[reply] * times)

    def reset(self) -> None:
        """Forget the script, the recorded requests and the delay; answer normally again."""
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.authorizations.clear()
            self.max_in_flight = 0
        self.default = OK
        self.delay = 0.0

    @property
    def inputs(self) -> list[list[str]]:
        """The `input` of every request received, each as a list."""
        return [_as_list(body.get("input")) for body in self.requests]

    # -- serving (called from the request threads) --------------------------------------------

    def _receive(self, body: dict[str, Any], authorization: str | None) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.authorizations.append(authorization)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            return self._script.popleft() if self._script else self.default

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._closing.wait(seconds)


def _as_list(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return []


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True  # server_close() waits for the request threads
    fake: FakeOpenAI


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection: nothing lingers after close()
    timeout = 10

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/embeddings":
            self._error(404, f"Unknown path {self.path}", "invalid_request_error")
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError:
            self._error(400, "We could not parse the JSON body of your request.", "invalid_json")
            return
        if not isinstance(body, dict):
            self._error(400, "The request body must be a JSON object.", "invalid_request_error")
            return
        fake = self.server.fake
        reply = fake._receive(body, self.headers.get("Authorization"))
        try:
            fake._wait(fake.delay + reply.delay)
            if reply.status != 200:
                message = reply.message or HTTPStatus(reply.status).phrase
                self._error(reply.status, message, reply.error_type, reply.retry_after)
                return
            self._embed(body, reply)
        finally:
            fake._done()

    def _embed(self, body: dict[str, Any], reply: Reply) -> None:
        fake = self.server.fake
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            self._error(400, "'input' must be a string or an array of strings.", None)
            return
        if any(text == "" for text in texts):
            self._error(400, "'$.input' is invalid: input cannot be an empty string.", None)
            return
        requested = body.get("dimensions")
        dimension = reply.dimension or (requested if isinstance(requested, int) else None)
        dimension = dimension or fake.dimension
        # As OpenAI: little-endian float32 in base64 when asked, else JSON numbers.
        encode = (
            (lambda v: base64.b64encode(v.astype("<f4").tobytes()).decode())
            if body.get("encoding_format") == "base64" and not reply.numbers
            else (lambda v: v.tolist())
        )
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": encode(vector_for(text, dimension))
                if reply.embedding is None
                else reply.embedding,
            }
            for i, text in enumerate(texts)
        ]
        data.reverse()  # clients must order by `index`, not by position
        tokens = sum(len(text.split()) + 1 for text in texts)
        self._json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model", fake.model),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _error(
        self,
        status: int,
        message: str,
        error_type: str | None,
        retry_after: str | None = None,
    ) -> None:
        if error_type is None:
            error_type = "invalid_request_error" if status < 500 else "server_error"
        payload = {"error": {"message": message, "type": error_type, "param": None, "code": None}}
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        self._json(status, payload, headers)

    def _json(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout); nothing to answer
