"""`GET /healthz` and `GET /readyz`."""

from __future__ import annotations

from typing import Literal

import msgspec


class Health(msgspec.Struct):
    status: Literal["ok"]


class DamagedCollection(msgspec.Struct):
    """A collection whose keyword index has damaged blocks, each named with what is wrong: its
    keyword searches read the chunks' own words instead (the same results, slower) until
    `cari bm25 repair -c NAME`."""

    collection: str
    blocks: list[str]


class Readiness(msgspec.Struct, omit_defaults=True):
    """Ready: the schema's revision and the engine serving keyword search (`cari_bm25`, Cari's
    C extension, at `keyword_engine_version`; or `sql`, the SQL statement). Degraded (still
    200: every request is answered): ready, with damaged keyword index blocks that searches
    met (`damaged`). Not ready (503): the reason."""

    status: Literal["ready", "degraded", "unavailable"]
    schema: str | None = None
    keyword_engine: Literal["cari_bm25", "sql"] | None = None
    keyword_engine_version: str | None = None
    damaged: list[DamagedCollection] | None = None
    reason: str | None = None
