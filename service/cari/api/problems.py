"""Every error as RFC 9457 problem details (`application/problem+json`), mapped in one place.

A problem names its kind twice: `code` (`not_found`, `invalid_input`, ...) for code that
switches on it, and `type`, the URN made from that code. `invalid_input` adds `errors`, one
entry per field. Statuses: a body that cannot be decoded is 400; a decoded body or parameter
with an unacceptable value is 422, whether the schema (Litestar) or Cari's own checks catch it.

Litestar's ProblemDetailsException renders each problem. Its plugin is not used: the plugin's
conversions see only the exception, and a database failure needs the request (the settings
that name the timeout, the route for the log line), as does `instance`.
"""

from __future__ import annotations

import logging
import math
import traceback
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import msgspec
import psycopg
from litestar import Request, Response
from litestar.exceptions import (
    ClientException,
    HTTPException,
    SerializationException,
    ValidationException,
)
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import Example
from litestar.plugins.problem_details import ProblemDetailsException
from litestar.types import ExceptionHandlersMap
from psycopg_pool import PoolTimeout

from cari.db import database as db
from cari.errors import CariError, InvalidBody, InvalidInput

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:cari:problem:"

# Each kind of error: its status and title. A CariError's kind is its `code`.
KINDS: Mapping[str, tuple[int, str]] = {
    "invalid_request": (400, "The request cannot be parsed"),
    "invalid_body": (400, "The request body cannot be decoded"),
    "unauthorized": (401, "Missing or invalid API key"),
    "forbidden": (403, "Not allowed to this API key"),
    "not_found": (404, "Not found"),
    "method_not_allowed": (405, "Method not allowed"),
    "request_timeout": (408, "Request timeout"),
    "conflict": (409, "Exists already"),
    "body_too_large": (413, "Request body too large"),
    "invalid_input": (422, "Invalid input"),
    "internal_error": (500, "Internal server error"),
    "database_unavailable": (503, "Database unavailable"),
    "database_busy": (503, "Database busy"),
    "statement_timeout": (503, "Statement timeout"),
    "embedder_unavailable": (503, "Embedder unavailable"),
    "embedder_busy": (503, "Embedder busy"),
    "llm_unavailable": (503, "Language model unavailable"),
}

# What Litestar's 500 says when a client left while its body was read (or `cari serve`'s body
# timeout closed the connection).
LEFT_MID_BODY = "client disconnected prematurely"

# The kind of each error Litestar raises itself, by status; a ValidationException (a value
# that breaks the schema) is `invalid_input`, and any other status a fault.
LITESTAR_KINDS = {
    400: "invalid_body",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
}


class FieldError(msgspec.Struct):
    field: str
    message: str


class Problem(msgspec.Struct, kw_only=True):
    """An error (RFC 9457). `code` is stable; `detail` is a sentence for people. `instance`
    is the request's path, absent when the server did not read it (a head that never came
    whole)."""

    type: str
    title: str
    status: int
    detail: str
    instance: str | msgspec.UnsetType = msgspec.UNSET
    code: str
    errors: list[FieldError] | msgspec.UnsetType = msgspec.UNSET


def problem(
    request: Request[Any, Any, Any],
    code: str,
    detail: str,
    *,
    errors: list[FieldError] | None = None,
    retry_after: float | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response[Any]:
    status, title = KINDS[code]
    extra: dict[str, Any] = {"code": code}
    if errors is not None:
        extra["errors"] = [msgspec.structs.asdict(error) for error in errors]
    all_headers = dict(headers or {})
    if retry_after is not None:
        all_headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    return ProblemDetailsException(
        detail=detail,
        status_code=status,
        headers=all_headers,
        extra=extra,
        type_=TYPE_PREFIX + code,
        title=title,
        instance=quote(request.url.path),
    ).to_response(request)


def cari_error(request: Request[Any, Any, Any], exc: CariError) -> Response[Any]:
    if exc.code not in KINDS:  # a kind with no HTTP meaning reached the edge: our fault
        return internal_error(request, exc)
    errors = [FieldError(*e) for e in exc.errors] if isinstance(exc, InvalidInput) else None
    return problem(request, exc.code, exc.message, errors=errors, retry_after=exc.retry_after)


def litestar_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    """Litestar's own errors: an unknown route or method, a bad body, a missing API key, ..."""
    if isinstance(exc, ValidationException):
        errors = [
            FieldError(_field(item), str(item.get("message", "")))
            for item in exc.extra or []
            if isinstance(item, dict)
        ]
        detail = "; ".join(f"{e.field}: {e.message}" for e in errors) or exc.detail
        return problem(request, "invalid_input", detail, errors=errors, headers=exc.headers)
    if isinstance(exc, ClientException) and isinstance(exc.__cause__, SerializationException):
        return problem(request, "invalid_body", f"the body is not valid JSON: {exc.detail}")
    if (code := LITESTAR_KINDS.get(exc.status_code)) is None:  # one we do not expect: a fault
        return internal_error(request, exc)
    detail = exc.detail or HTTPStatus(exc.status_code).phrase
    return problem(request, code, detail, headers=exc.headers)


def _field(item: dict[str, Any]) -> str:
    """The field a Litestar validation error is about. It names the whole body `data`, also
    when msgspec's message names the missing or unknown field (in backquotes)."""
    key = str(item.get("key", "data"))
    if key != "data":
        return key
    return InvalidInput.from_msgspec(str(item.get("message", "")), "body").field


def database_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """The database failed the request: which way, truthfully, without its internals."""
    error = db.failure(exc, request.app.state.settings)
    # The driver's text can name hosts and users: it goes to the log, not to the client.
    log.warning("database error on %s %s: %s", request.method, request.url.path, exc)
    return cari_error(request, error)


def bad_value(request: Request[Any, Any, Any], exc: psycopg.DataError) -> Response[Any]:
    """A value PostgreSQL refuses (a NUL in a path, say): the client's input, not a 500."""
    return cari_error(request, db.refused(exc, "request"))


def nested_too_deeply(request: Request[Any, Any, Any], exc: RecursionError) -> Response[Any]:
    """msgspec gives up on JSON nested about a thousand levels deep with a RecursionError:
    that is the client's body, a 400. Any other RecursionError is a fault of ours."""
    frames = [frame for frame, _ in traceback.walk_tb(exc.__traceback__)]
    if not frames or frames[-1].f_code.co_name != "decode_json":
        return internal_error(request, exc)
    log.info("%s %s: JSON body nested too deeply", request.method, request.url.path)
    return cari_error(
        request,
        InvalidBody("the JSON body is nested too deeply to decode (about 1,000 levels or more)"),
    )


def internal_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """A fault of ours: logged whole, answered without internals."""
    if isinstance(exc, HTTPException) and exc.detail == LEFT_MID_BODY:  # the client's doing
        log.info("%s %s: the client left before its body arrived", request.method, request.url.path)
        return problem(request, "invalid_body", "the body did not arrive whole")
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return problem(request, "internal_error", "the server failed to handle the request")


HANDLERS: ExceptionHandlersMap = {
    CariError: cari_error,
    HTTPException: litestar_error,
    psycopg.OperationalError: database_error,
    PoolTimeout: database_error,
    psycopg.DataError: bad_value,
    RecursionError: nested_too_deeply,
    500: internal_error,  # any other exception
}


# What each status means on a route, and an example of it, for the OpenAPI document.
EXAMPLES: Mapping[int, tuple[str, str, str]] = {
    400: (
        "The request line or a header cannot be parsed (`invalid_request`: a raw control "
        "character in the query string, say), or the body decoded (`invalid_body`: malformed "
        "JSON or UTF-8, or nested too deeply)",
        "invalid_body",
        "the body is not valid JSON: JSON is malformed: invalid character (byte 1)",
    ),
    401: (
        "No API key, or one that is unknown, revoked or expired (once CARI_API_KEYS is set or "
        "a key is stored)",
        "unauthorized",
        "missing or invalid API key: send 'Authorization: Bearer <key>'",
    ),
    403: (
        "The API key may not take this action, or not on this collection; `detail` names "
        "what it lacks",
        "forbidden",
        "key 'cari_3f9a1b2c' may not take the action documents:write (it may: search)",
    ),
    404: (
        "The collection, or what the path names in it, does not exist",
        "not_found",
        "collection 'faq' does not exist",
    ),
    409: ("It exists already", "conflict", "collection 'faq' exists already"),
    413: ("The body is larger than the server takes", "body_too_large", "Request Entity Too Large"),
    422: (
        "A value is unacceptable; `errors` names each field",
        "invalid_input",
        "top_k: Expected `int` <= 50",
    ),
    503: (
        "The database, embedder or language model failed or is busy; `Retry-After` (seconds) "
        "when retrying soon can help",
        "database_busy",
        "database busy: no connection came free within 10 s",
    ),
}


# Any request: a line or header `cari serve`'s HTTP server cannot parse (`cari.api.protocol`).
UNPARSED = (
    "The request line or a header cannot be parsed (a raw control character in the query "
    "string, say)",
    "invalid_request",
    "Invalid HTTP request received.",
)


def responses(*statuses: int) -> dict[int, ResponseSpec]:
    """The problems a /v1 route can answer with: `statuses`, 400 (a request the HTTP server
    cannot parse; with a body, one it cannot decode too), 401 and 403 (API keys)."""
    specs = {}
    for status in sorted({400, 401, 403, *statuses}):
        description, code, detail = (
            UNPARSED if status == 400 and 400 not in statuses else EXAMPLES[status]
        )
        title = KINDS[code][1]
        example: dict[str, Any] = {
            "type": TYPE_PREFIX + code,
            "title": title,
            "status": status,
            "detail": detail,
            "instance": "/v1/collections/faq",
            "code": code,
        }
        if code == "invalid_input":
            field, _, message = detail.partition(": ")
            example["errors"] = [{"field": field, "message": message}]
        specs[status] = ResponseSpec(
            Problem,
            description=description,
            media_type=MEDIA_TYPE,
            generate_examples=False,
            examples=[Example(summary=title, value=example)],
        )
    return specs
