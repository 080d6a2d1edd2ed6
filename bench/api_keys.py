"""What checking a stored API key adds to a cached search, against CARI_API_KEYS in one run.

    python -m bench.api_keys [--requests 2000]

- **database**: `cari_bench_api_keys` on DATABASE_URL's server (without one, a throwaway
  embedded server), fresh and migrated; the collection `faq` with a few documents embedded by
  the configured embedder.
- **keys**: `CARI_API_KEYS=bench`, and a stored key that may search (a lookup is remembered for
  `CARI_KEY_CACHE_TTL_S`, 5 s: what a busy key meets on all but one request in that time).
- **requests**: the same search (its query's embedding cached after the first), sent in process
  (Litestar's AsyncTestClient: no sockets) `--requests` times by each key, alternating so that
  both meet the same machine; p50, p95 and p99 of each, and what the stored key adds at p95.
- **the lookup alone**: a remembered stored key's lookup (its secret hashed, found, its expiry
  compared), timed over 10,000 calls: what the search above cannot resolve on a busy machine.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from litestar.testing import AsyncTestClient

from bench import harness
from cari.api.app import create_app
from cari.api.state import app_state
from cari.settings import load_settings

DATABASE = "cari_bench_api_keys"
CONFIGURED = "bench"
DOCUMENTS = [
    {"id": f"faq/{i}", "text": f"Question {i}: orders ship within {i + 1} days of payment."}
    for i in range(20)
]
SEARCH = {"query": "how long until my order ships?", "top_k": 5}
LOOKUPS = 10_000


async def measure(dsn: str, requests: int) -> dict[str, list[float]]:
    """Milliseconds of each request, by the key that sent it."""
    settings = load_settings(database_url=dsn, api_keys=[CONFIGURED], reembed_interval_s=0)
    configured = {"Authorization": f"Bearer {CONFIGURED}"}
    async with AsyncTestClient(create_app(settings, dsn)) as client:
        made = await client.post("/v1/collections", json={"name": "faq"}, headers=configured)
        assert made.status_code == 201, made.text
        added = await client.post(
            "/v1/collections/faq/documents", json={"documents": DOCUMENTS}, headers=configured
        )
        assert added.status_code == 200, added.text
        key = await client.post(
            "/v1/keys",
            json={"name": "bench", "actions": ["search"], "collections": ["faq"]},
            headers=configured,
        )
        assert key.status_code == 201, key.text
        stored = {"Authorization": f"Bearer {key.json()['secret']}"}
        times: dict[str, list[float]] = {"CARI_API_KEYS": [], "stored key": []}
        for headers in (configured, stored):  # warm: the query's embedding, the key's lookup
            await _search(client, headers)
        for _ in range(requests):
            for name, headers in (("CARI_API_KEYS", configured), ("stored key", stored)):
                started = time.perf_counter()
                await _search(client, headers)
                times[name].append(harness.since_ms(started))
        state = app_state(client.app)
        secret = key.json()["secret"]
        started = time.perf_counter()
        for _ in range(LOOKUPS):
            assert await state.stored_keys.find(state.runtime.pool, secret) is not None
        times["lookup"] = [harness.since_ms(started) / LOOKUPS]
    return times


async def _search(client: AsyncTestClient[Any], headers: dict[str, str]) -> None:
    found = await client.post("/v1/collections/faq/search", json=SEARCH, headers=headers)
    assert found.status_code == 200, found.text


def report(times: dict[str, list[float]]) -> None:
    print(f"a remembered stored key's lookup: {times['lookup'][0] * 1000:.1f} µs")
    for name in ("CARI_API_KEYS", "stored key"):
        values = times[name]
        p50, p95, p99 = harness.percentiles(values)
        print(f"{name:>14}: p50 {p50:6.3f} ms, p95 {p95:6.3f}, p99 {p99:6.3f} ({len(values)})")
    added = (
        harness.percentiles(times["stored key"])[1] - harness.percentiles(times["CARI_API_KEYS"])[1]
    )
    print(f"a stored key adds {added:+.3f} ms at p95 (load {harness.load_average()})")


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    dsn = harness.fresh_database(DATABASE, load_settings())
    report(asyncio.run(measure(dsn, args.requests)))


if __name__ == "__main__":
    main()
