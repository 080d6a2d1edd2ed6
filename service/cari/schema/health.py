"""`GET /healthz` and `GET /readyz`."""

from __future__ import annotations

from typing import Literal

import msgspec


class Health(msgspec.Struct):
    status: Literal["ok"]


class Readiness(msgspec.Struct, omit_defaults=True):
    """Ready: the schema's revision and the engine serving keyword search (`cari_bm25`, Cari's
    C extension, at `keyword_engine_version`; or `sql`, the SQL statement). Not ready (503):
    the reason."""

    status: Literal["ready", "unavailable"]
    schema: str | None = None
    keyword_engine: Literal["cari_bm25", "sql"] | None = None
    keyword_engine_version: str | None = None
    reason: str | None = None
