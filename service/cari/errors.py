"""Errors meant for users. The HTTP edge maps them to status codes, the CLI to one-line messages.

CariError
├── ConfigError          settings or environment unusable; the service cannot start
├── DatabaseUnavailable  the database cannot be reached or is not migrated
├── NotFound             a named thing does not exist                          (HTTP 404)
├── Conflict             the thing exists already                               (HTTP 409)
└── InvalidInput         a field's value is unacceptable                        (HTTP 422)
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


class NotFound(CariError):
    """A named thing does not exist."""


class Conflict(CariError):
    """The thing to create exists already."""


class InvalidInput(CariError):
    """A field's value is unacceptable; `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
