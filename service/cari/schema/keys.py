"""API keys (`/v1/keys`): what a key may do, the collections it reaches, the documents it sees."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

Action = Literal["search", "documents:read", "documents:write", "collections:manage", "keys:manage"]
# A collection's name, or a glob pattern of names (`shop-*`, `faq-?`, `[ab]-docs`; `*`: all).
CollectionPattern = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_\-*?\[\]]+$",
        description="A collection's name, or a pattern of names: '*' any characters, '?' one, "
        "'[ab]' one of these.",
    ),
]
# A key's visible id, the start of its secret.
KeyId = Annotated[str, msgspec.Meta(pattern="^cari_[0-9a-f]{8}$", examples=["cari_3f9a1b2c"])]


class KeyCreate(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A new key. `filter`: a search filter's `metadata` object ({"tenant": "acme"}) ANDed into
    everything the key does; a key that writes stamps it on each document, so its values must
    be plain."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"\S")]
    actions: Annotated[list[Action], msgspec.Meta(min_length=1, max_length=5)]
    collections: Annotated[list[CollectionPattern], msgspec.Meta(min_length=1, max_length=100)]
    filter: dict[str, Any] | None = None
    expires_at: Annotated[datetime, msgspec.Meta(tz=True)] | None = None


class Key(msgspec.Struct, kw_only=True):
    """A stored key, without its secret: `id` is the secret's visible start."""

    id: KeyId
    name: str
    actions: list[Action]
    collections: list[str]
    filter: dict[str, Any] | None
    expires_at: datetime | None
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class KeyCreated(msgspec.Struct, kw_only=True):
    """A new key and its secret, shown this once: Cari keeps only its hash."""

    key: Key
    secret: str


class KeyAccess(msgspec.Struct, kw_only=True):
    """What the key a request came with may do. `key`: a stored key's id; null for one of
    CARI_API_KEYS, or for an open API (no key stored nor configured), as `name` says."""

    key: KeyId | None
    name: str
    actions: list[Action]
    collections: list[str]
    filter: dict[str, Any] | None
