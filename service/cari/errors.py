"""Every exception type Cari raises. The HTTP edge maps the user-facing ones to status codes,
the CLI to one-line messages.

CariError                  a message written for the user
├── ConfigError            settings or environment unusable; the service cannot start
├── DatabaseUnavailable    the database cannot be reached or is not migrated    (HTTP 503)
├── EmbedderUnavailable    the embedding service failed or refused              (HTTP 503)
├── LLMUnavailable         the language model failed or refused                 (HTTP 503)
├── RerankUnavailable      the reranker failed; callers keep the fused order
├── NotFound               a named thing does not exist                         (HTTP 404)
├── Conflict               the thing exists already                             (HTTP 409)
└── InvalidInput           a field's value is unacceptable                      (HTTP 422)

Retryable                  internal: one attempt at a remote service failed in a way worth
                           another try; never reaches a user (the last one becomes a CariError)
"""

from __future__ import annotations


class CariError(Exception):
    """Base of every error whose message is written for the user."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(CariError):
    """Settings or environment unusable; the service cannot start."""


class DatabaseUnavailable(CariError):
    """The database cannot be reached, or its schema is not at the expected revision."""


class EmbedderUnavailable(CariError):
    """The embedding service failed or refused the request; chunks wait for `cari reembed`."""


class LLMUnavailable(CariError):
    """The language model failed or refused the request."""


class RerankUnavailable(CariError):
    """The reranker failed, refused the request or gave an unusable answer."""


class NotFound(CariError):
    """A named thing does not exist."""


class Conflict(CariError):
    """The thing to create exists already."""


class InvalidInput(CariError):
    """A field's value is unacceptable; `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class Retryable(Exception):
    """An attempt at a remote service failed in a way worth another try (after `wait` seconds,
    if the service said how long)."""

    def __init__(self, reason: str, wait: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait
