"""Log lines: to stderr, as JSON (python-json-logger) or text, each with its request's id.

`configure` is called by `cari serve` before anything logs; building the HTTP app leaves the
process's logging alone. (The other commands keep Python's default: their warnings and errors
as plain lines beside their own output.)

The id of the request being served (`request_id`, set by `cari.api.request_ids`) is put on
every log record created while it is served, whichever library logs it, by a LogRecord factory
(`add_request_ids`): a filter on our handler would miss the records that go to other handlers
(pytest's, an exporter's). So is the id of its API key (`api_key`, set by `cari.api.auth`:
`cari_3f9a1b2c`, `CARI_API_KEYS`, never a secret), in the JSON lines.
"""

from __future__ import annotations

import logging
import logging.config
import sys
from contextvars import ContextVar
from typing import Any

from pythonjsonlogger.core import RESERVED_ATTRS

from cari.settings import Settings

request_id: ContextVar[str | None] = ContextVar("request_id", default=None)
api_key: ContextVar[str | None] = ContextVar("api_key", default=None)

# A JSON line: these fields, any `extra` given to the call, and `time` (ISO 8601, UTC).
_JSON_FIELDS = ["levelname", "name", "message", "request_id", "api_key"]
_JSON_NAMES = {"levelname": "level", "name": "logger"}
_TEXT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


def configure(settings: Settings) -> None:
    """Send every log line at `CARI_LOG_LEVEL` or above to stderr, as `CARI_LOG_FORMAT` says
    (unset: text for a person at a terminal, JSON for a log collector)."""
    add_request_ids()
    formatter: dict[str, Any] = {"format": _TEXT}
    if (settings.log_format or ("text" if sys.stderr.isatty() else "json")) == "json":
        formatter = {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": _JSON_FIELDS,
            "rename_fields": _JSON_NAMES,
            "timestamp": "time",
            # uvicorn adds an ANSI-coloured copy of some messages; the message is enough.
            "reserved_attrs": [*RESERVED_ATTRS, "color_message"],
        }
    logging.config.dictConfig(
        {
            "version": 1,
            "disable_existing_loggers": False,
            "formatters": {"cari": formatter},
            "handlers": {
                "stderr": {
                    "class": "logging.StreamHandler",
                    "stream": "ext://sys.stderr",
                    "formatter": "cari",
                }
            },
            "root": {"handlers": ["stderr"], "level": settings.log_level},
            # Alembic's INFO lines repeat at every start (a migration is logged by
            # alembic/env.py); httpx's say every request to the embedder, reranker or LLM, a
            # line per call that buries the service's own (failures are logged by Cari).
            "loggers": {"alembic": {"level": "WARNING"}, "httpx": {"level": "WARNING"}},
        }
    )


def add_request_ids() -> None:
    """Give every log record created from now on a `request_id` (None outside a request)."""
    make = logging.getLogRecordFactory()
    if getattr(make, "adds_request_id", False):
        return

    def with_request_id(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        record.request_id = request_id.get()
        record.api_key = api_key.get()
        return record

    with_request_id.adds_request_id = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(with_request_id)
