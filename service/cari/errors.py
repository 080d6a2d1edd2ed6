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
├── Forbidden              the API key may not do this, or not here             (HTTP 403)
├── NotFound               a named thing does not exist                         (HTTP 404)
├── Conflict               the thing exists already                             (HTTP 409)
├── InvalidInput           a field's value is unacceptable                      (HTTP 422)
├── QuestionFileError      a file of questions or judgements cannot be read (its line)
└── InvalidBody            the request body cannot be decoded at all            (HTTP 400)

Each kind has a stable `code` the HTTP edge reports beside the message (api/problems.py maps
it to a status), and `retry_after` (seconds) where retrying soon can help.

Retryable                  internal: one attempt at a remote service failed in a way worth
                           another try; never reaches a user (the last one becomes a CariError)

Unbuildable                internal: Cari's keyword extension cannot be built here (no compiler,
                           make or server headers; a failed compile); logged once, and the SQL
                           statement serves keyword search

ModelUnusable              internal: the local model's weights or its converted copy cannot be
                           used (missing, damaged, of another version); the local embedder
                           reports it as EmbedderUnavailable, naming the file

CollectionMoved            internal: a search's collection moved to another embedder after the
                           search read it; the search starts again on its new row

ClientError                cari.client: a call to Cari's HTTP API failed
├── TransportError         no answer: the connection failed or timed out
└── APIError               Cari answered with a problem (RFC 9457): status, code, detail, errors
    ├── BadRequestError    400 invalid_body, 413 body_too_large
    ├── UnauthorizedError  401 unauthorized
    ├── ForbiddenError     403 forbidden: the key lacks an action or a collection
    ├── NotFoundError      404 not_found
    ├── ConflictError      409 conflict
    ├── InvalidInputError  422 invalid_input: `errors` names each field
    └── UnavailableError   503: worth retrying, after `retry_after` seconds when given
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar


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


class Forbidden(CariError):
    """The request's API key may not take this action, or not on this collection."""

    code = "forbidden"


class NotFound(CariError):
    """A named thing does not exist."""

    code = "not_found"


class Conflict(CariError):
    """The thing to create exists already."""

    code = "conflict"


class InvalidInput(CariError):
    """A field's value is unacceptable; `field` names it and `reason` says what is wrong
    (`errors`: each field and its reason, when they are several)."""

    code = "invalid_input"

    def __init__(self, field: str, reason: str, *, errors: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
        self.errors = list(errors) or [(field, reason)]

    @classmethod
    def from_msgspec(cls, message: str, whole: str) -> InvalidInput:
        """A msgspec validation message as the field it is about: "Expected `int` <= 50 - at
        `$.top_k`" names it after "at", "Object missing required field `query`" (or "contains
        unknown field") in backquotes; any other is about `whole`."""
        text, sep, where = message.rpartition(" - at `$.")
        if sep:
            return cls(where.rstrip("`").split(".")[0].split("[")[0], text)
        if message.startswith(NAMES_A_FIELD) and message.count("`") >= 2:
            return cls(message.split("`")[1], message)
        return cls(whole, message)


# How msgspec's messages about a missing or an unknown field begin (they have no location).
MISSING_FIELD = "Object missing required field"
UNKNOWN_FIELD = "Object contains unknown field"
NAMES_A_FIELD = (MISSING_FIELD, UNKNOWN_FIELD)


class QuestionFileError(CariError, ValueError):
    """A file of questions or of judgements (`cari eval`, `cari tune`) cannot be read: the
    message names the file, the line and what is wrong."""

    code = "invalid_input"


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


class Unbuildable(Exception):
    """Cari's keyword extension cannot be built here; the message says why and what to
    install."""


class ModelUnusable(Exception):
    """The local model's packed weights or its conversion cannot be used; the message says
    which file and why."""


class CollectionMoved(Exception):
    """The collection was moved to another embedder after the search read its row: its vectors
    are now of another width, and the search found none of the old one."""

    def __init__(self, collection: Any) -> None:  # no import of cari.search here: a cycle
        super().__init__("the collection moved to another embedder")
        self.collection = collection  # its row since the move, a SearchCollection


class ClientError(Exception):
    """A call to Cari's HTTP API failed (raised by `cari.client`)."""


class TransportError(ClientError):
    """No answer: the connection failed or timed out."""


class APIError(ClientError):
    """Cari answered with a problem: `status`, the stable `code`, the `detail` sentence, the
    `errors` of each invalid field (`{"field", "message"}`) and `retry_after` (seconds)."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        errors: list[dict[str, Any]] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"HTTP {status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.errors = errors or []
        self.retry_after = retry_after


class BadRequestError(APIError):
    """The body could not be decoded (400) or was too large (413)."""


class UnauthorizedError(APIError):
    """Missing or invalid API key (401)."""


class ForbiddenError(APIError):
    """The API key may not take this action, or not on this collection (403)."""


class NotFoundError(APIError):
    """The collection, or what the path names in it, does not exist (404)."""


class ConflictError(APIError):
    """It exists already (409)."""


class InvalidInputError(APIError):
    """A value is unacceptable (422); `errors` names each field."""


class UnavailableError(APIError):
    """The database, embedder or language model failed or is busy (503): retrying may help."""
