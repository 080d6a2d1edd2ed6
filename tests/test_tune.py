"""`cari tune ef-search` and its route on real PostgreSQL and the real HNSW index: a collection
of random-like vectors (the embedding fake's), where a small ef_search measurably loses recall."""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import psycopg
import pytest
from litestar.testing import TestClient

from cari.settings import LOCAL_EMBEDDING_DIMENSION as DIMENSION
from tests.conftest import app_client, cli_env
from tests.fake_openai import FakeOpenAI

CHUNKS = 1500
BATCH = 100
VALUES = [10, 20, 40, 100, 400]
CARI = [sys.executable, "-m", "cari.cli"]


@pytest.fixture(scope="module")
def embedder() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dimension=DIMENSION) as server:
        yield server


@pytest.fixture(scope="module")
def client(module_dsn: str, embedder: FakeOpenAI) -> Iterator[TestClient[Any]]:
    """`notes`: one-chunk documents whose vectors are the fake's hashes of their text, spread
    like random points, the hardest case for a graph index; `empty`: no document."""
    with app_client(module_dsn, embedder) as client:
        for name in ("notes", "empty"):
            created = client.post("/v1/collections", json={"name": name})
            assert created.status_code == 201, created.text
        for start in range(0, CHUNKS, BATCH):
            documents = [
                {"id": f"n{i}", "text": f"note {i} about subject {i * 7919 % 1013}: {words(i)}"}
                for i in range(start, start + BATCH)
            ]
            added = client.post("/v1/collections/notes/documents", json={"documents": documents})
            assert added.status_code == 200, added.text
        # 30 copies of one text: one vector, which ties 30 ways.
        copies = [{"id": f"copy{i}", "text": "the same note"} for i in range(30)]
        added = client.post("/v1/collections/notes/documents", json={"documents": copies})
        assert added.status_code == 200, added.text
        with psycopg.connect(module_dsn, autocommit=True) as conn:
            conn.execute("ANALYZE chunks")  # as autovacuum leaves it: the planner then uses HNSW
        yield client


def words(i: int) -> str:
    """Three made-up words of note `i`, for the key-phrase questions drawn from its text."""
    draw = random.Random(i)
    return " ".join("".join(draw.choices(string.ascii_lowercase, k=6)) for _ in range(3))


def tune(client: TestClient[Any], **body: Any) -> dict[str, Any]:
    response = client.post("/v1/collections/notes/tune/ef-search", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_recall_grows_with_ef_search_and_the_recommendation_follows_the_target(
    client: TestClient[Any],
) -> None:
    result = tune(client, sample=60, values=VALUES, recall=0.99)
    # A question per drawn chunk with words to ask of (the copies' three short words are not)
    assert 50 <= result["questions"] <= 60 and result["questions_from"] == "sample"
    recalls = {p["ef_search"]: p["recall"] for p in result["points"]}
    assert list(recalls) == VALUES
    # A small ef_search loses part of the exact top 10 (~3 % here); a large one finds (nearly)
    # all of it.
    assert recalls[10] < recalls[400] and recalls[400] >= 0.99, recalls
    # The planner walks the index at a small ef_search; at a large one it may find reading the
    # collection's 1,500 vectors cheaper (pgvector's cost grows with ef_search), then exactly.
    assert result["points"][0]["index_used"]
    for point in result["points"]:
        assert point["recall_low"] <= point["recall"] <= point["recall_high"]
        assert 0 < point["p50_ms"] <= point["p95_ms"]
    # The smallest value searched through the index that reaches the target, whatever the
    # target: an exact scan's recall of 1 says nothing of that ef_search on a larger collection.
    walked = {p["ef_search"] for p in result["points"] if p["index_used"]}
    for target in (0.99, recalls[10] - 0.01, 1.0):
        wanted = min((ef for ef in walked if recalls[ef] >= target), default=None)
        again = tune(client, sample=60, values=VALUES, recall=target)
        assert {p["ef_search"]: p["recall"] for p in again["points"]} == recalls  # same draw
        assert again["recommended"] == wanted
    assert tune(client, sample=60, values=VALUES, recall=recalls[10] - 0.01)["recommended"] == 10
    assert result["current"] == 100 and result["current_source"] == "settings"
    assert not result["applied"]


def test_another_seed_draws_other_questions(client: TestClient[Any]) -> None:
    first = tune(client, sample=30, values=[10])
    other = tune(client, sample=30, values=[10], seed=1)
    assert 25 <= first["questions"] <= 30 and 25 <= other["questions"] <= 30
    assert first["points"][0]["recall"] != other["points"][0]["recall"] or (
        first["points"][0]["recall_low"] != other["points"][0]["recall_low"]
    )


def test_apply_stores_it_and_searches_use_it_unless_the_request_says(
    client: TestClient[Any], module_dsn: str
) -> None:
    try:
        result = tune(client, sample=40, values=[20, 40, 400], recall=0.5, apply=True)
        assert result["applied"] and result["recommended"] == 20
        assert client.get("/v1/collections/notes").json()["ef_search"] == 20
        explained = client.post(
            "/v1/collections/notes/search",
            json={"query": "note 5", "mode": "vector", "explain": True},
        ).json()["explain"]["ef_search"]
        assert explained == {"requested": 20, "applied": "20", "source": "collection"}
        asked = client.post(
            "/v1/collections/notes/search",
            json={"query": "note 5", "mode": "vector", "ef_search": 60, "explain": True},
        ).json()["explain"]["ef_search"]
        assert asked == {"requested": 60, "applied": "60", "source": "request"}
        again = tune(client, sample=40, values=[20])
        assert (again["current"], again["current_source"]) == (20, "collection")
        # A target nothing reaches applies nothing.
        unreached = tune(client, sample=40, values=[10], recall=1.0, apply=True)
        if unreached["recommended"] is None:
            assert not unreached["applied"]
    finally:
        reset = client.patch("/v1/collections/notes", json={"ef_search": None})
        assert reset.status_code == 200 and reset.json()["ef_search"] is None
    explained = client.post(
        "/v1/collections/notes/search", json={"query": "note 5", "mode": "vector", "explain": True}
    ).json()["explain"]["ef_search"]
    assert explained["source"] == "settings"


def test_given_questions_and_filters(client: TestClient[Any]) -> None:
    result = tune(client, questions=["note 3", "subject 17", "a question"], values=[10, 400], k=5)
    assert (result["questions"], result["questions_from"], result["k"]) == (3, "given", 5)
    assert result["points"][-1]["recall"] == 1.0
    # The question's 10 nearest are 10 of 30 equal vectors: whichever 10 the index returns, it
    # found the exact top 10.
    tied = tune(client, questions=["the same note"], values=[10, 400])
    assert [p["recall"] for p in tied["points"]] == [1.0, 1.0]
    # Within what a filter allows: here 20 documents, so every ef_search finds all of them.
    only = {"document_ids": [f"n{i}" for i in range(20)]}
    filtered = tune(client, sample=10, values=[10], filters=only)
    assert filtered["filters"] == only and filtered["points"][0]["recall"] == 1.0


@pytest.mark.parametrize(
    ("collection", "body", "status"),
    [
        ("notes", {"values": [0]}, 422),
        ("notes", {"recall": 0}, 422),
        ("notes", {"sample": 0}, 422),
        ("notes", {"questions": []}, 422),
        ("notes", {"filters": {"colour": "red"}}, 422),
        ("notes", {"bogus": 1}, 422),
        ("missing", {}, 404),
    ],
)
def test_bad_requests_are_told(
    client: TestClient[Any], collection: str, body: dict[str, Any], status: int
) -> None:
    response = client.post(f"/v1/collections/{collection}/tune/ef-search", json=body)
    assert response.status_code == status, response.text
    assert response.json()["detail"]


def test_nothing_to_find_is_nothing_measured(client: TestClient[Any]) -> None:
    """No embedded chunk, or none within the filters: no question has an exact top k."""
    empty = client.post("/v1/collections/empty/tune/ef-search", json={}).json()
    assert (empty["questions"], empty["points"], empty["recommended"]) == (0, [], None)
    none = tune(client, questions=["note 3"], filters={"document_ids": ["no-such-id"]})
    assert (none["questions"], none["points"], none["recommended"]) == (1, [], None)


def test_the_command_prints_the_table_and_applies(
    client: TestClient[Any],
    module_dsn: str,
    embedder: FakeOpenAI,
    clean_env: dict[str, str],
    tmp_path: Path,
) -> None:
    env = cli_env(clean_env, module_dsn, embedder)
    questions = tmp_path / "questions.txt"
    questions.write_text("note 3\n\nsubject 17\n")
    base = [*CARI, "tune", "ef-search", "-c", "notes", "--values", "40,400"]
    plot = str(tmp_path / "curve.svg")
    printed = subprocess.run(
        [*base, "--questions", str(questions)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert printed.returncode == 0, printed.stderr
    assert "2 questions given" in printed.stdout and "HNSW index" in printed.stdout
    try:
        applied = subprocess.run(
            [*base, "--sample", "20", "--recall", "0.5", "--apply", "--json", "--plot", plot],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert applied.returncode == 0, applied.stderr
        result = json.loads(applied.stdout)
        assert result["applied"] and result["recommended"] == 40  # ~1.0 at 40 here
        drawn = ElementTree.parse(plot).getroot()  # well-formed: a point and label per value
        labels = [t.text for t in drawn.iter("{http://www.w3.org/2000/svg}text")]
        assert {"40", "400"} <= set(labels)
        with psycopg.connect(module_dsn) as conn:
            stored = conn.execute("SELECT ef_search FROM collections WHERE name = 'notes'")
            assert stored.fetchone() == (40,)
    finally:
        client.patch("/v1/collections/notes", json={"ef_search": None})
    bad = subprocess.run(
        [*base, "--values", "ten"], env=env, capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1, bad.stderr
    assert "--values" in bad.stderr


# -- fusion ---------------------------------------------------------------------------------


def subjects(count: int) -> list[dict[str, Any]]:
    """Judged questions of `notes`: "subject S" is answered by the notes about S. Its words are
    the keyword retriever's to find; the fake's vectors carry no meaning, so vector search ranks
    at random."""
    about: dict[int, list[str]] = {}
    for i in range(CHUNKS):
        about.setdefault(i * 7919 % 1013, []).append(f"n{i}")
    return [{"query": f"subject {s}", "relevant": about[s]} for s in sorted(about)[:count]]


def test_fusion_tuning_finds_the_better_weights_and_applies_only_a_real_gain(
    client: TestClient[Any],
) -> None:
    questions = subjects(20)
    try:
        vector_heavy = {"fusion": "zscore", "vector_weight": 9.0, "keyword_weight": 1.0}
        assert client.patch("/v1/collections/notes", json=vector_heavy).status_code == 200
        response = client.post(
            "/v1/collections/notes/tune/fusion", json={"questions": questions, "apply": True}
        )
        assert response.status_code == 200, response.text
        result = response.json()
        assert result["questions"] == 20 and result["folds"] == 5
        assert result["gain_low"] > 0 and result["gain"] > 0, result
        best = result["best"][0]
        assert best["config"] == result["recommended"]
        assert best["ndcg_at_10"] > result["defaults"]["ndcg_at_10"]
        assert result["recommended"]["vector_share"] < 0.5  # words decide here
        assert result["applied"]
        stored = client.get("/v1/collections/notes").json()
        share = stored["vector_weight"] / (stored["vector_weight"] + stored["keyword_weight"])
        assert stored["fusion"] == result["recommended"]["method"]
        assert round(share, 1) == result["recommended"]["vector_share"]
        # Tuned already: what is left is noise, and nothing changes.
        again = client.post(
            "/v1/collections/notes/tune/fusion", json={"questions": questions, "apply": True}
        ).json()
        assert again["gain_low"] <= 0 and not again["applied"]
        assert client.get("/v1/collections/notes").json() == stored | {
            "updated_at": stored["updated_at"]
        }
    finally:
        defaults = {"fusion": "zscore", "vector_weight": 1.0, "keyword_weight": 1.0}
        assert client.patch("/v1/collections/notes", json=defaults).status_code == 200


def test_fusion_tuning_from_the_command_line(
    client: TestClient[Any],
    module_dsn: str,
    embedder: FakeOpenAI,
    clean_env: dict[str, str],
    tmp_path: Path,
) -> None:
    questions = tmp_path / "judged.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in subjects(8)))
    printed = subprocess.run(
        [*CARI, "tune", "fusion", "-c", "notes", "--questions", str(questions), "--folds", "2"],
        env=cli_env(clean_env, module_dsn, embedder),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert printed.returncode == 0, printed.stderr
    assert "nDCG@10 on 8 judged questions" in printed.stdout
    assert "the collection's defaults" in printed.stdout
    assert "gain of tuning (2-fold cross-validated)" in printed.stdout


def test_fusion_tuning_folds_at_most_one_a_question(client: TestClient[Any]) -> None:
    response = client.post(
        "/v1/collections/notes/tune/fusion", json={"questions": subjects(3), "folds": 4}
    )
    assert response.status_code == 200, response.text
    assert response.json()["folds"] == 3


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("ef-search", {"apply": 0}),  # Litestar's own conversion would take 0 for false
        ("ef-search", {"k": "10"}),
        ("ef-search", {"questions": ["a\u0000b"]}),
        ("fusion", {"questions": [{"query": "q", "relevant": ["n1"]}] * 2, "apply": 1}),
    ],
)
def test_bodies_are_read_strictly(client: TestClient[Any], path: str, body: dict[str, Any]) -> None:
    response = client.post(f"/v1/collections/notes/tune/{path}", json=body)
    assert response.status_code == 422, response.text
