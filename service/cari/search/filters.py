"""Search filters compiled to a parameterized SQL fragment on the chunks table, alias `c`.

    {"metadata": {"lang": "id",                      equality: JSON containment
                  "brand": {"in": ["honda", "bmw"]},  any of the values
                  "year": {"gte": 2020, "lte": 2024}}, range: numbers numerically, strings
     "document_ids": ["doc-1", "doc-2"]}             lexicographically (ISO dates work)

No user text is ever part of the SQL: values, keys and jsonpath expressions are all bound
parameters named `f0`, `f1`, ... so they cannot collide with the caller's.

`TENANT` is the metadata filter of the API key a request came with (`cari.api.auth` sets it):
every fragment compiled here for searches and document reads ANDs it in, inside the statement,
so a tenant's top k is exact within its own documents.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, LiteralString

from psycopg import sql
from psycopg.types.json import Jsonb

from cari.errors import InvalidInput
from cari.limits import refuse_nul

MAX_KEY_LENGTH = 200
MAX_VALUES = 1000
MAX_KEYS = 64
RANGE_OPERATORS = {"gte": ">=", "lte": "<="}
# Any of these keys makes an object an operator object rather than a nested value to match, so
# a misspelt or unsupported operator is reported instead of silently matching nothing.
OPERATOR_NAMES = frozenset(
    {"in", "gte", "lte", "eq", "ne", "neq", "gt", "lt", "nin", "not", "exists", "like", "regex"}
)
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TENANT: ContextVar[Mapping[str, Any] | None] = ContextVar("cari_tenant", default=None)


def compile_filters(filters: Mapping[str, Any] | None) -> tuple[sql.Composable, dict[str, Any]]:
    """A fragment to append to a WHERE clause (empty, or starting with " AND "), and its params."""
    compiler = _Compiler()
    compiler.tenant()
    if filters is None:
        return compiler.fragment()
    if not isinstance(filters, Mapping):
        raise InvalidInput("filters", "must be an object")
    for name, value in filters.items():
        if name == "metadata":
            compiler.metadata(value)
        elif name == "document_ids":
            compiler.document_ids(value)
        else:
            raise InvalidInput(f"filters.{name}", "unknown filter; use metadata or document_ids")
    return compiler.fragment()


def compile_metadata(metadata: Any, field: str) -> tuple[sql.Composable, dict[str, Any]]:
    """The metadata part of the grammar alone, its errors naming `field` (as the document
    listing's query parameter does)."""
    compiler = _Compiler()
    compiler.metadata(metadata, field)
    return compiler.fragment()


def compile_documents(metadata: Any, field: str) -> tuple[sql.Composable, dict[str, Any]]:
    """The documents a read may see: those matching `metadata` (None: all) and the tenant's
    filter, as a fragment on the documents table, alias `c`."""
    compiler = _Compiler()
    compiler.tenant()
    if metadata is not None:
        compiler.metadata(metadata, field)
    return compiler.fragment()


class _Compiler:
    def __init__(self) -> None:
        self.conditions: list[sql.Composable] = []
        self.params: dict[str, Any] = {}

    def add(self, condition: LiteralString, *values: Any) -> None:
        placeholders = []
        for value in values:
            name = f"f{len(self.params)}"
            self.params[name] = value
            placeholders.append(sql.Placeholder(name))
        self.conditions.append(sql.SQL(condition).format(*placeholders))

    def fragment(self) -> tuple[sql.Composable, dict[str, Any]]:
        if not self.conditions:
            return sql.SQL(""), {}
        return sql.SQL(" AND ") + sql.SQL(" AND ").join(self.conditions), self.params

    def tenant(self) -> None:
        if (tenant := TENANT.get()) is not None:
            self.metadata(tenant, "key filter")

    def metadata(self, metadata: Any, name: str = "filters.metadata") -> None:
        if not isinstance(metadata, Mapping):
            raise InvalidInput(name, "must be an object")
        if len(metadata) > MAX_KEYS:  # each key may take parameters; PostgreSQL allows 65,535
            raise InvalidInput(name, f"at most {MAX_KEYS} keys")
        # All equalities go into one containment, which a GIN index on metadata could serve.
        equal: dict[str, Any] = {}
        for key, value in metadata.items():
            field = _field(key, name)
            if isinstance(value, Mapping) and any(k in OPERATOR_NAMES for k in value):
                self.operators(key, value, field)
            else:
                _check_json(value, field)
                equal[key] = value
        if equal:
            self.add("c.metadata @> {}", Jsonb(equal))

    def operators(self, key: str, operators: Mapping[str, Any], field: str) -> None:
        for operator in operators:
            if operator != "in" and operator not in RANGE_OPERATORS:
                raise InvalidInput(field, f"unknown operator {operator!r}; use in, gte or lte")
        if "in" in operators:
            if len(operators) > 1:
                raise InvalidInput(field, "in cannot be combined with other operators")
            values = operators["in"]
            if not isinstance(values, list) or not 1 <= len(values) <= MAX_VALUES:
                raise InvalidInput(f"{field}.in", f"must be a list of 1 to {MAX_VALUES} values")
            _check_json(values, f"{field}.in")
            self.add("c.metadata @> ANY({}::jsonb[])", [Jsonb({key: v}) for v in values])
            return
        bounds = {op: _bound(value, f"{field}.{op}") for op, value in operators.items()}
        if len({isinstance(b, str) for b in bounds.values()}) > 1:
            raise InvalidInput(field, "gte and lte must both be numbers or both be strings")
        # The key is a quoted jsonpath string (JSON escapes are valid there) and the bounds are
        # jsonpath variables; comparing values of different types is false in jsonpath, not an
        # error, and `silent` guards against anything else a stored value could raise.
        path = f"$.{json.dumps(key, ensure_ascii=False)} ? ("
        path += " && ".join(f"@ {RANGE_OPERATORS[op]} ${op}" for op in bounds) + ")"
        self.add(
            "jsonb_path_exists(c.metadata, {}::jsonpath, {}::jsonb, true)", path, Jsonb(bounds)
        )

    def document_ids(self, ids: Any) -> None:
        field = "filters.document_ids"
        if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
            raise InvalidInput(field, "must be a list of non-empty strings")
        if not 1 <= len(ids) <= MAX_VALUES:
            raise InvalidInput(field, f"must list 1 to {MAX_VALUES} document ids")
        _check_json(ids, field)
        self.add(
            "EXISTS (SELECT 1 FROM documents AS fd WHERE fd.id = c.document_id"
            " AND fd.collection_id = c.collection_id AND fd.external_id = ANY({}::text[]))",
            ids,
        )


def _field(key: Any, name: str) -> str:
    """The path naming a metadata key in error messages, under `name`."""
    if not isinstance(key, str) or not key:
        raise InvalidInput(name, "keys must be non-empty strings")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidInput(name, f"keys must be at most {MAX_KEY_LENGTH} characters")
    _check_json(key, name)
    if _PLAIN_KEY.fullmatch(key):
        return f"{name}.{key}"
    return f"{name}[{json.dumps(key)}]"


def _bound(value: Any, field: str) -> Any:
    if isinstance(value, bool):
        raise InvalidInput(field, "must be a number or a string, not a boolean")
    if not isinstance(value, int | float | str):
        raise InvalidInput(field, "must be a number or a string")
    _check_json(value, field)
    return value


def _check_json(value: Any, field: str) -> None:
    """Reject what PostgreSQL cannot store as jsonb or text, so it is bad input, not a SQL error."""
    if isinstance(value, str):
        refuse_nul(field, value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(field, "numbers must be finite")
    elif isinstance(value, list):
        for item in value:
            _check_json(item, field)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(field, "object keys must be strings")
            _check_json(key, field)
            _check_json(item, field)
    elif value is not None and not isinstance(value, int):
        raise InvalidInput(field, f"{type(value).__name__} is not a JSON value")
