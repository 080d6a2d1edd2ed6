"""A tuning's request read strictly, from an HTTP body or the command line's options: a JSON 0
is no `false` (Litestar's own conversion of a body would take it), and a whole float (4.0) is
an integer, as JSON Schema counts it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from cari.errors import InvalidInput

T = TypeVar("T")


def strictly(given: Mapping[str, Any], kind: type[T]) -> T:
    try:
        return msgspec.convert(_integral(given), kind)
    except msgspec.ValidationError as exc:
        raise InvalidInput.from_msgspec(str(exc), "body") from None


def _integral(value: Any) -> Any:
    """`value` with each whole float an int: msgspec's strict conversion refuses 4.0 for an int."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value
