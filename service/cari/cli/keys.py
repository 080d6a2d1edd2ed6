"""`cari keys`: API keys stored in the database, created, listed, shown and revoked while Cari
serves (docs/keys.md). A new key's secret is printed once, alone on stdout, for a script to keep.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from cari.cli.common import choice, print_table, run, user_errors
from cari.schema.keys import Action

if TYPE_CHECKING:
    from cari.keys import StoredKey
    from cari.runtime import Runtime

KEY_ID = click.argument("key_id", metavar="KEY")


@click.group(help="API keys: what each may do, on which collections, on which documents.")
def keys() -> None:
    pass


@keys.command(
    help="Create a key named NAME and print its secret, which is shown this once (Cari keeps "
    "only its hash); what it may do and where goes to stderr. Once any key is stored, every "
    "request to /v1 and /mcp needs one.",
)
@click.argument("name")
@click.option(
    "-a",
    "--action",
    "actions",
    multiple=True,
    required=True,
    type=choice(Action),
    help="What it may do (repeat for several): search (search, answer, explain), "
    "documents:read, documents:write, collections:manage (create, change, delete; synonyms, "
    "catalog, rates), keys:manage.",
)
@click.option(
    "-c",
    "--collection",
    "collections",
    multiple=True,
    required=True,
    help="A collection it reaches, or a pattern ('shop-*'; '*': all); repeat for several.",
)
@click.option(
    "--filter",
    "filter_json",
    help='The documents it sees, as a search filter\'s metadata object (\'{"tenant": "acme"}\'); '
    "a key that writes stamps it on each document.",
)
@click.option(
    "--expires",
    help="When it stops working, ISO 8601 (2027-01-31 or 2027-01-31T12:00:00+07:00; UTC "
    "without a zone).",
)
@user_errors
def create(
    name: str,
    actions: tuple[str, ...],
    collections: tuple[str, ...],
    filter_json: str | None,
    expires: str | None,
) -> None:
    from cari import keys as stored

    filter = _filter(filter_json)
    expires_at = _expiry(expires)

    async def work(rt: Runtime) -> tuple[StoredKey, str]:
        async with rt.pool.connection() as conn:
            return await stored.create(
                conn, name, actions, collections, filter, expires_at, datetime.now(UTC)
            )

    key, secret = run(work)
    click.echo(secret)
    click.echo(f"{key.prefix} ({key.name}): {_scope(key)}", err=True)


@keys.command(name="list", help="Every key, revoked ones too: id, name, scope, times.")
@user_errors
def list_keys() -> None:
    from cari import keys as stored

    async def work(rt: Runtime) -> list[StoredKey]:
        async with rt.pool.connection() as conn:
            return await stored.list_all(conn)

    print_table(
        ["id", "name", "scope", "status", "last used"],
        [
            [k.prefix, k.name, _scope(k), _status(k), _time(k.last_used_at) or "never"]
            for k in run(work)
        ],
    )


@keys.command(help="One key as JSON, by its id (cari_3f9a1b2c); never its secret.")
@KEY_ID
@user_errors
def show(key_id: str) -> None:
    from cari import keys as stored

    async def work(rt: Runtime) -> StoredKey:
        async with rt.pool.connection() as conn:
            return await stored.get(conn, key_id)

    click.echo(_json(run(work)))


@keys.command(
    help="Revoke a key by its id (cari_3f9a1b2c): every Cari process sharing the database "
    "refuses it within CARI_KEY_CACHE_TTL_S seconds (5), without a restart.",
)
@KEY_ID
@user_errors
def revoke(key_id: str) -> None:
    from cari import keys as stored

    async def work(rt: Runtime) -> StoredKey:
        async with rt.pool.connection() as conn:
            return await stored.revoke(conn, key_id)

    key = run(work)
    click.echo(f"{key.prefix} ({key.name}): revoked {_time(key.revoked_at)}")


def _filter(text: str | None) -> dict[str, Any] | None:
    from cari.errors import InvalidInput

    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        raise InvalidInput("--filter", "is not JSON") from None
    if not isinstance(value, dict):
        raise InvalidInput("--filter", "must be a JSON object")
    return value


def _expiry(text: str | None) -> datetime | None:
    from cari.errors import InvalidInput

    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput("--expires", f"{text!r} is not an ISO 8601 date or time") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _scope(key: StoredKey) -> str:
    scope = f"{', '.join(key.actions)} on {', '.join(key.collections)}"
    if key.filter is not None:
        scope += f" where {json.dumps(key.filter, ensure_ascii=False)}"
    return scope


def _status(key: StoredKey) -> str:
    if key.revoked_at is not None:
        return f"revoked {_time(key.revoked_at)}"
    if key.expires_at is not None:
        past = key.expires_at <= datetime.now(UTC)
        return f"{'expired' if past else 'expires'} {_time(key.expires_at)}"
    return "active"


def _time(when: datetime | None) -> str:
    return "" if when is None else when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _json(key: StoredKey) -> str:
    import msgspec

    return msgspec.json.format(msgspec.json.encode(key.wire())).decode()
