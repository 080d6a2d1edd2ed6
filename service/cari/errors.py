"""Every exception type Cari raises. The HTTP edge maps the user-facing ones to status codes,
the CLI to one-line messages.

CariError                  a message written for the user
├── ConfigError            settings or environment unusable; the service cannot start
├── DatabaseUnavailable    the database cannot be reached or is not migrated    (HTTP 503)
├── DatabaseBusy           no pooled connection came free in time               (HTTP 503)
├── StatementTimeout       a statement ran past CARI_STATEMENT_TIMEOUT_MS       (HTTP 503)
├── EmbedderUnavailable    the embedding service failed, refused or was skipped (HTTP 503)
├── EmbedderBusy           too many query embeddings already wait               (HTTP 503)
├── LLMUnavailable         the language model failed or refused                 (HTTP 503)
├── RerankUnavailable      the reranker failed; callers keep the fused order
├── NotFound               a named thing does not exist                         (HTTP 404)
├── Conflict               the thing exists already                             (HTTP 409)
├── InvalidInput           a field's value is unacceptable                      (HTTP 422)
└── InvalidBody            the request body cannot be decoded at all            (HTTP 400)

Each kind has a stable `code` the HTTP edge reports beside the message (api/problems.py maps
it to a status), and `retry_after` (seconds) where retrying soon can help.

Retryable                  internal: one attempt at a remote service failed in a way worth
                           another try; never reaches a user (the last one becomes a CariError)
"""

from __future__ import annotations

from typing import ClassVar


class CariError(Exception):
    """Base of every error whose message is written for the user."""

    code: ClassVar[str] = "error"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class ConfigError(CariError):
    """Settings or environment unusable; the service cannot start."""

    code = "config_error"


class DatabaseUnavailable(CariError):
    """The database cannot be reached, or its schema is not at the expected revision."""

    code = "database_unavailable"


class DatabaseBusy(CariError):
    """Every pooled connection stayed in use for the pool's whole timeout."""

    code = "database_busy"


class StatementTimeout(CariError):
    """PostgreSQL cancelled a statement that ran past the statement timeout."""

    code = "statement_timeout"


class EmbedderUnavailable(CariError):
    """The embedding service failed or refused the request; chunks wait for `cari reembed`."""

    code = "embedder_unavailable"


class EmbedderBusy(CariError):
    """Too many query embeddings already wait for the embedder: refused at once."""

    code = "embedder_busy"


class LLMUnavailable(CariError):
    """The language model failed or refused the request."""

    code = "llm_unavailable"


class RerankUnavailable(CariError):
    """The reranker failed, refused the request or gave an unusable answer."""

    code = "rerank_unavailable"


class NotFound(CariError):
    """A named thing does not exist."""

    code = "not_found"


class Conflict(CariError):
    """The thing to create exists already."""

    code = "conflict"


class InvalidInput(CariError):
    """A field's value is unacceptable; `field` names it and `reason` says what is wrong."""

    code = "invalid_input"

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class InvalidBody(CariError):
    """The request body cannot be decoded at all (no field to name)."""

    code = "invalid_body"


class Retryable(Exception):
    """An attempt at a remote service failed in a way worth another try (after `wait` seconds,
    if the service said how long)."""

    def __init__(self, reason: str, wait: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait
