"""API keys stored in PostgreSQL: what a key may do, where, and on which documents.

A key's secret is `cari_<8 hex>_<43 base64url>`: the first part, its `prefix`, is the key's
visible id (lists, logs, `cari keys revoke`); the rest is 256 random bits. Only the SHA-256 of
the whole secret is stored. A fast, unsalted hash is the standard for API keys (GitHub's,
Stripe's): salts and slow hashes (bcrypt, argon2) make guessing a low-entropy password costly,
but nobody can guess 256 random bits however fast the hash, and a slow hash would cost every
request milliseconds. A dump of the table holds no usable secret.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from cari.db.queries import query
from cari.errors import Forbidden, InvalidInput, NotFound
from cari.schema.keys import Action, Key
from cari.search.filters import OPERATOR_NAMES, compile_metadata

# What a key may do (`cari.schema.keys.Action`); each /v1 route names the actions that let a
# request through (cari.api.auth): search (search, answer, explain, the search tool),
# documents:read (documents, catalog items and rates: list, get), documents:write (documents:
# add, replace, delete), collections:manage (create, change, delete; synonyms, catalog, rates),
# keys:manage (/v1/keys).
ACTIONS: tuple[str, ...] = get_args(Action)
EVERY_COLLECTION = "*"
PREFIX_LENGTH = len("cari_") + 8
_PREFIX = re.compile(r"cari_[0-9a-f]{8}")
_COLLECTION_PATTERN = re.compile(r"[A-Za-z0-9_\-*?\[\]]{1,128}")
# How often a process notes a key's use (`api_key_touch`): a write per request would make
# every search a write, its WAL and a dead row on one hot row; when a key was last used to
# the minute is what an operator needs to find the keys nobody uses.
TOUCH_EVERY = timedelta(minutes=1)
# The actions a key with a document filter may not hold: they act on a whole collection, or
# on keys, beyond what the filter lets it see.
BEYOND_A_FILTER = ("collections:manage", "keys:manage")
# Lookups a process remembers; past this it forgets them all (unknown secrets sent in bulk
# would otherwise grow it without end).
MAX_REMEMBERED = 10_000

Conn = psycopg.AsyncConnection[Any]


@dataclass(frozen=True, slots=True)
class Access:
    """What a request may do: a stored key's scope, or every action for a CARI_API_KEYS key
    and for an open API. `prefix` names the key in logs (never its secret)."""

    name: str
    prefix: str | None
    actions: frozenset[str]
    collections: tuple[str, ...]
    filter: Mapping[str, Any] | None = None

    def reaches(self, collection: str) -> bool:
        return any(fnmatch.fnmatchcase(collection, p) for p in self.collections)

    @property
    def who(self) -> str:
        """The key as a refusal names it."""
        return f"key '{self.prefix}'" if self.prefix else "this key"

    def check_action(self, needed: frozenset[str]) -> None:
        """Forbidden unless the key may take one of the actions `needed`."""
        if not self.actions & needed:
            raise Forbidden(
                f"{self.who} may not take the action {' or '.join(sorted(needed))} "
                f"(it may: {', '.join(sorted(self.actions))})"
            )

    def check_reaches(self, collection: str) -> None:
        """Forbidden unless the key reaches `collection`."""
        if not self.reaches(collection):
            raise Forbidden(
                f"{self.who} may not reach the collection '{collection}' "
                f"(it reaches: {', '.join(self.collections)})"
            )


EVERYTHING = frozenset(ACTIONS)
# Where a request's Access travels in its ASGI scope: the guard (`cari.api.auth`) puts it there
# for the handlers, and for /mcp's tools (`cari.mcp.server`).
SCOPE_KEY = "cari_access"


@dataclass(frozen=True, slots=True)
class StoredKey:
    id: int
    name: str
    prefix: str
    actions: list[str]
    collections: list[str]
    filter: dict[str, Any] | None
    expires_at: datetime | None
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    def wire(self) -> Key:
        return Key(
            id=self.prefix,
            name=self.name,
            actions=self.actions,  # type: ignore[arg-type]  # checked when it was stored
            collections=self.collections,
            filter=self.filter,
            expires_at=self.expires_at,
            created_at=self.created_at,
            last_used_at=self.last_used_at,
            revoked_at=self.revoked_at,
        )

    def access(self) -> Access:
        return Access(
            self.name, self.prefix, frozenset(self.actions), tuple(self.collections), self.filter
        )


def hashed(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def new_secret() -> str:
    return f"cari_{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}"


def check_scope(
    actions: Sequence[str],
    collections: Sequence[str],
    filter: Mapping[str, Any] | None,
    expires_at: datetime | None,
    now: datetime,
) -> None:
    """Refuse a scope that is no scope: unknown actions, collections that are no name or
    pattern, a filter that is not the search filters' `metadata` grammar, an expiry past."""
    if not actions:
        raise InvalidInput("actions", f"name at least one of {', '.join(ACTIONS)}")
    for action in actions:
        if action not in ACTIONS:
            raise InvalidInput("actions", f"unknown action {action!r}; use {', '.join(ACTIONS)}")
    if not collections:
        raise InvalidInput("collections", "name at least one collection, or '*' for all")
    for pattern in collections:
        if not _COLLECTION_PATTERN.fullmatch(pattern):
            raise InvalidInput(
                "collections",
                f"{pattern!r} is neither a collection's name nor a pattern (letters, digits, "
                "'-', '_', and '*', '?', '[…]')",
            )
    if filter is not None:
        compile_metadata(filter, "filter")  # raises InvalidInput naming the bad part
        if not filter:
            raise InvalidInput("filter", "is empty: leave it out for a key that sees everything")
        if beyond := [a for a in actions if a in BEYOND_A_FILTER]:
            raise InvalidInput(
                "actions",
                f"a key with a filter cannot hold {', '.join(beyond)}: they act beyond the "
                "documents its filter lets it see",
            )
        if "documents:write" in actions and (ops := _operator_keys(filter)):
            raise InvalidInput(
                "filter",
                f"a key that writes stamps its filter on each document, so each value must be "
                f"plain, not an operator ({', '.join(ops)})",
            )
    if expires_at is not None and expires_at <= now:
        raise InvalidInput("expires_at", "is in the past")


def check_within(access: Access, actions: Sequence[str], collections: Sequence[str]) -> None:
    """A key creates keys within its own scope only: its actions, and collections its own
    patterns match (as text: `shop-*` covers `shop-eu-*`), else a key could mint a stronger
    one."""
    if beyond := [a for a in actions if a not in access.actions]:
        raise Forbidden(f"a key cannot give actions it lacks: {', '.join(beyond)}")
    if beyond := [c for c in collections if not access.reaches(c)]:
        raise Forbidden(f"a key cannot give collections it does not reach: {', '.join(beyond)}")


def _operator_keys(filter: Mapping[str, Any]) -> list[str]:
    return [
        key
        for key, value in filter.items()
        if isinstance(value, Mapping) and any(k in OPERATOR_NAMES for k in value)
    ]


def stamp(access: Access, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A document's metadata as a key with a filter writes it: the filter's values set on it
    (each a plain value: `check_scope`). A value of the document's own that differs is
    refused, not overwritten: the writer meant another tenant."""
    stamped = dict(metadata)
    for key, value in (access.filter or {}).items():
        if key in stamped and stamped[key] != value:
            raise Forbidden(
                f"metadata.{key}: this key writes only documents with {key} = "
                f"{_json(value)}, not {_json(stamped[key])}"
            )
        stamped[key] = value
    return stamped


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


async def create(
    conn: Conn,
    name: str,
    actions: Sequence[str],
    collections: Sequence[str],
    filter: Mapping[str, Any] | None,
    expires_at: datetime | None,
    now: datetime,
) -> tuple[StoredKey, str]:
    """A new key and its secret, which is never seen again."""
    if not name.strip() or len(name) > 200:
        raise InvalidInput("name", "must be 1 to 200 characters, not only spaces")
    check_scope(actions, collections, filter, expires_at, now)
    secret = new_secret()
    params = {
        "name": name,
        "prefix": secret[:PREFIX_LENGTH],
        "secret_hash": hashed(secret),
        "actions": sorted(set(actions), key=ACTIONS.index),
        "collections": list(dict.fromkeys(collections)),
        "filter": None if filter is None else Jsonb(filter),
        "expires_at": expires_at,
    }
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("api_key_create"), params)
        row = await cur.fetchone()
    assert row is not None
    return StoredKey(**row), secret


async def list_all(conn: Conn) -> list[StoredKey]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("api_keys_list"))
        return [StoredKey(**row) for row in await cur.fetchall()]


async def get(conn: Conn, prefix: str) -> StoredKey:
    return await _one(conn, "api_key_get", prefix)


def manages(access: Access, key: StoredKey) -> bool:
    """Whether `access` sees and revokes `key`: a key within its own scope, as it may create
    (`check_within`). Any other does not exist for it: a key that manages the keys of some
    collections learns nothing of the others' keys, nor can it revoke an administrator's."""
    return set(key.actions) <= access.actions and all(access.reaches(c) for c in key.collections)


async def get_managed(conn: Conn, prefix: str, access: Access) -> StoredKey:
    """The key `prefix` if `access` manages it, else NotFound, as for a key nobody stored."""
    key = await get(conn, prefix)
    if not manages(access, key):
        raise NotFound(f"key '{prefix}' does not exist")
    return key


async def revoke(conn: Conn, prefix: str) -> StoredKey:
    return await _one(conn, "api_key_revoke", prefix)


async def _one(conn: Conn, statement: str, prefix: str) -> StoredKey:
    if not _PREFIX.fullmatch(prefix):
        raise NotFound(f"key '{prefix}' does not exist (a key's id looks like cari_3f9a1b2c)")
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query(statement), {"prefix": prefix})
        row = await cur.fetchone()
    if row is None:
        raise NotFound(f"key '{prefix}' does not exist")
    return StoredKey(**row)


async def find(conn: Conn, secret: str) -> StoredKey | None:
    """The usable key whose secret this is (not revoked, not expired), else None."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("api_key_find"), {"secret_hash": hashed(secret)})
        row = await cur.fetchone()
    return None if row is None else StoredKey(**row)


async def touch(conn: Conn, key: StoredKey) -> None:
    await conn.execute(query("api_key_touch"), {"id": key.id, "every": TOUCH_EVERY})


async def any_stored(conn: Conn) -> bool:
    cur = await conn.execute(query("api_keys_exist"))
    row = await cur.fetchone()
    return bool(row and row[0])


@dataclass
class _Remembered:
    at: float
    key: StoredKey | None


class StoredKeys:
    """What this process read of the stored keys, each at most `ttl` seconds ago. Looked up by
    the hash of the secret, so no secret is kept."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._found: dict[bytes, _Remembered] = {}
        self._any_at: float | None = None  # when none were stored, last looked
        self._any = False  # keys are revoked, never deleted: once true, true for good

    async def any(self, pool: AsyncConnectionPool[Any]) -> bool:
        now = time.monotonic()
        if self._any or (self._any_at is not None and now - self._any_at < self.ttl):
            return self._any
        async with pool.connection() as conn:
            self._any = await any_stored(conn)
        self._any_at = now
        return self._any

    async def find(self, pool: AsyncConnectionPool[Any], secret: str) -> StoredKey | None:
        digest = hashed(secret)
        now = time.monotonic()
        remembered = self._found.get(digest)
        if remembered is not None and now - remembered.at < self.ttl:
            key = remembered.key
        else:
            async with pool.connection() as conn:
                key = await find(conn, secret)
                if key is not None:
                    await touch(conn, key)
            if len(self._found) >= MAX_REMEMBERED:
                self._found.clear()
            self._found[digest] = _Remembered(now, key)
        # An expiry passing while the lookup is remembered holds at once.
        if (
            key is not None
            and key.expires_at is not None
            and key.expires_at.timestamp() <= time.time()
        ):
            return None
        return key


def _utc_now() -> datetime:
    return datetime.now(UTC)
