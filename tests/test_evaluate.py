"""`cari eval` and `POST …/eval`: the question files, the metrics against pytrec_eval on real
judgements, and the command and the route on a small collection (the embedding fake)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
import pytrec_eval
from litestar.testing import TestClient

from cari.errors import QuestionFileError
from cari.schema.evaluate import EvalReport
from cari.settings import LOCAL_EMBEDDING_DIMENSION
from cari.tune.evaluate import hybrid_losses
from cari.tune.metrics import ndcg_at, recall_at, reciprocal_rank_at
from cari.tune.questions import Judged, read_judged, read_questions
from tests.conftest import app_client, cli_env
from tests.fake_openai import FakeOpenAI
from tests.test_cli import run

TINY = Path(__file__).parent / "fixtures" / "beir-tiny"
DATASETS = Path(__file__).resolve().parents[2] / "shared" / "eval" / "datasets"
FIGURES = ("ndcg_at_10", "recall_at_k", "mrr_at_10")


def dataset(name: str) -> Path:
    """An evaluation set beside the clone: skipped where absent, unless CARI_REQUIRE_DATASETS."""
    if not (DATASETS / name).is_dir():
        reason = f"no {name} evaluation set at {DATASETS}"
        if os.environ.get("CARI_REQUIRE_DATASETS"):
            pytest.fail(f"{reason}, and CARI_REQUIRE_DATASETS is set")
        pytest.skip(reason)
    return DATASETS / name


# -- the files ----------------------------------------------------------------------------------


def test_a_beir_set_is_read_with_its_judgements() -> None:
    judged = read_judged(TINY / "queries.jsonl", TINY / "qrels" / "test.tsv")
    assert [(q.id, q.relevant) for q in judged] == [
        ("q1", {"zep": 2}),
        ("q2", {"glide": 2, "balloon": 1}),
        ("q3", {"jet": 1, "blank": 1}),
    ]  # q4 has no judgement
    assert [q.id for q in read_questions(TINY / "queries.jsonl")] == ["q1", "q2", "q3", "q4"]


def test_json_lines_judge_themselves_and_text_is_one_question_a_line(tmp_path: Path) -> None:
    lines = tmp_path / "judged.jsonl"
    lines.write_text(
        '{"query": "a", "relevant": ["x", "y"]}\n\n'
        '{"id": "b", "query": "b", "relevant": {"x": 2, "z": 0}}\n'
        '{"query": "c", "relevant": []}\n'
    )
    assert read_judged(lines, None) == [
        Judged("1", "a", {"x": 1, "y": 1}),  # no id: the line's number
        Judged("b", "b", {"x": 2}),  # grade 0 is not relevant; "c" judges nothing
    ]
    text = tmp_path / "questions.txt"
    text.write_text("first question\n\n  second  \n")
    assert [(q.id, q.text) for q in read_questions(text)] == [
        ("1", "first question"),
        ("3", "second"),
    ]


BEIR = '{"_id": "q1", "text": "a"}\n{"_id": "q2", "text": "b"}\n'
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\n"


@pytest.mark.parametrize(
    ("questions", "qrels", "error"),
    [
        (
            '{"_id": "q1", "text": "a"}\n{"_id": "q2", "text": "b"\n',
            QRELS,
            "q.jsonl, line 2: not JSON",
        ),
        ('{"_id": "q1", "text": "a"}\n\n{"text": "b"}\n', QRELS, 'q.jsonl, line 3: no "_id"'),
        ('{"_id": "q1"}\n', QRELS, 'q.jsonl, line 1: "text" must be'),
        ('{"id": "q1", "text": "a"}\n', QRELS, 'line 1: no "_id"'),
        ('{"what": "a"}\n', QRELS, 'q.jsonl, line 1: no "query"'),
        ('["a"]\n', QRELS, "q.jsonl, line 1: not a JSON object"),
        (
            '{"_id": "q1", "text": "a"}\n{"_id": "q1", "text": "b"}\n',
            QRELS,
            "line 2: id 'q1' again",
        ),
        ('{"query": "a", "relevant": "d1"}\n', None, 'line 1: "relevant" must be'),
        ("\n\n", QRELS, "q.jsonl: the file holds no question"),
        (BEIR, "query-id\tcorpus-id\tscore\nq1\td1\n", "qrels.tsv, line 2: 2 tab-separated"),
        (BEIR, "q1\td1\t1\nq2\td2\thigh\n", "qrels.tsv, line 2: the score 'high'"),
        (BEIR, "query-id\tcorpus-id\tscore\nq9\td1\t1\n", "names none of the questions"),
        (BEIR, "", "qrels.tsv: the file holds no judgement"),
        (BEIR, "q1\td1\t0\nq2\td2\t0\n", "no question has a relevant document"),
        (BEIR, None, "q.jsonl: no line says what is relevant"),
    ],
)
def test_a_bad_file_is_an_error_naming_its_line(
    tmp_path: Path, questions: str, qrels: str | None, error: str
) -> None:
    (tmp_path / "q.jsonl").write_text(questions)
    if qrels is not None:
        (tmp_path / "qrels.tsv").write_text(qrels)
    judgements = tmp_path / "qrels.tsv" if qrels is not None else None
    with pytest.raises(QuestionFileError) as raised:
        read_judged(tmp_path / "q.jsonl", judgements)
    assert error in str(raised.value)
    assert isinstance(raised.value, ValueError)


# -- the metrics --------------------------------------------------------------------------------


def _pytrec_run(rankings: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Rankings as pytrec_eval scores: strictly decreasing, so its sort keeps the order."""
    return {
        q: {doc: float(len(docs) - i) for i, doc in enumerate(docs)} for q, docs in rankings.items()
    }


def test_the_metrics_equal_pytrec_eval_on_a_beir_set() -> None:
    """Cranfield's graded judgements (1-4), each question's relevant documents shuffled among
    others at random depths (none found, some, all, past 100)."""
    cranfield = dataset("cranfield")
    judged = read_judged(cranfield / "queries.jsonl", cranfield / "qrels" / "test.tsv")
    assert len(judged) > 200
    rng = np.random.default_rng(7)
    corpus = [str(n) for n in range(1, 1401)]
    rankings = {}
    for q in judged:
        pool = list(dict.fromkeys([*q.relevant, *rng.choice(corpus, 150, replace=False)]))
        rankings[q.id] = [str(d) for d in rng.permutation(pool)[: rng.integers(0, 140)]]
    qrels = {q.id: q.relevant for q in judged}
    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"})
    reference = full.evaluate(_pytrec_run(rankings))
    first_ten = {q: docs[:10] for q, docs in rankings.items()}
    reciprocal = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(
        _pytrec_run(first_ten)
    )
    for q in judged:
        ranking, expected = rankings[q.id], reference.get(q.id, {})
        assert ndcg_at(ranking, q.relevant, 10) == pytest.approx(
            expected.get("ndcg_cut_10", 0.0), abs=5e-5
        )
        assert recall_at(ranking, q.relevant, 100) == pytest.approx(
            expected.get("recall_100", 0.0), abs=5e-5
        )
        assert reciprocal_rank_at(ranking, q.relevant, 10) == pytest.approx(
            reciprocal.get(q.id, {}).get("recip_rank", 0.0), abs=5e-5
        )
    assert any(0 < ndcg_at(rankings[q.id], q.relevant, 10) < 1 for q in judged)


def test_hybrid_losses_are_the_worst_first() -> None:
    questions = [Judged(str(n), f"q{n}", {"d": 1}) for n in range(3)]
    ndcg: dict[Any, list[float]] = {
        "hybrid": [0.5, 0.2, 0.9],
        "keyword": [0.6, 0.1, 0.3],
        "vector": [0.4, 0.9, 0.9],
    }
    assert [loss.id for loss in hybrid_losses(questions, ndcg)] == ["1", "0"]
    assert hybrid_losses(questions, {"hybrid": ndcg["hybrid"]}) == []


# -- the command and the route ------------------------------------------------------------------


def _corpus() -> list[dict[str, str]]:
    records = [json.loads(line) for line in (TINY / "corpus.jsonl").read_text().splitlines()]
    return [{"id": r["_id"], "title": r["title"], "text": r["text"]} for r in records if r["text"]]


@pytest.fixture(scope="module")
def tiny(module_dsn: str) -> Iterator[tuple[TestClient[Any], FakeOpenAI]]:
    """beir-tiny's documents in a collection, embedded by the fake, for the module's tests."""
    with (
        FakeOpenAI(dimension=LOCAL_EMBEDDING_DIMENSION) as fake,
        app_client(module_dsn, fake) as client,
    ):
        created = client.post("/v1/collections", json={"name": "tiny", "language": "english"})
        assert created.status_code == 201, created.text
        added = client.post("/v1/collections/tiny/documents", json={"documents": _corpus()})
        assert added.status_code == 200 and added.json()["rejected"] == [], added.text
        yield client, fake


@pytest.fixture
def env(
    tiny: tuple[TestClient[Any], FakeOpenAI], module_dsn: str, clean_env: dict[str, str]
) -> dict[str, str]:
    return cli_env(clean_env, module_dsn, tiny[1])


def _rankings(client: TestClient[Any], mode: str | None) -> dict[str, list[str]]:
    """Each beir-tiny question's documents, best first, as a search request finds them."""
    rankings = {}
    for question in read_questions(TINY / "queries.jsonl"):
        body = {"query": question.text, "top_k": 50, "threshold": 0}
        body |= {"mode": mode} if mode else {}
        found = client.post("/v1/collections/tiny/search", json=body)
        assert found.status_code == 200, found.text
        documents = [r["document_id"] for r in found.json()["results"]]
        rankings[question.id] = list(dict.fromkeys(documents))
    return rankings


def test_the_command_measures_each_mode_as_pytrec_eval_does(
    tiny: tuple[TestClient[Any], FakeOpenAI], env: dict[str, str]
) -> None:
    """On beir-tiny: each mode's means equal pytrec_eval's on the rankings searches give."""
    args = ["eval", "-c", "tiny", "--questions", str(TINY / "queries.jsonl")]
    args += ["--qrels", str(TINY / "qrels" / "test.tsv")]
    done = run([*args, "--json"], env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["questions"], report["k"], report["warnings"]) == (3, 100, [])
    assert [m["mode"] for m in report["modes"]] == ["keyword", "vector", "hybrid", "default"]
    qrels = {
        q.id: q.relevant for q in read_judged(TINY / "queries.jsonl", TINY / "qrels" / "test.tsv")
    }
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"})
    for figures in report["modes"]:
        mode = None if figures["mode"] == "default" else figures["mode"]
        reference = evaluator.evaluate(_pytrec_run(_rankings(tiny[0], mode)))
        expected = np.mean([reference.get(q, {}).get("ndcg_cut_10", 0.0) for q in qrels])
        assert figures["ndcg_at_10"]["mean"] == pytest.approx(expected, abs=5e-5)
        recall = np.mean([reference.get(q, {}).get("recall_100", 0.0) for q in qrels])
        assert figures["recall_at_k"]["mean"] == pytest.approx(recall, abs=5e-5)
        for name in FIGURES:
            figure = figures[name]
            assert figure["low"] <= figure["mean"] <= figure["high"], (name, figure)
    # "zeppelin" is one exact word: keyword search finds the one document that has it.
    assert report["modes"][0]["mrr_at_10"]["mean"] > 0

    table = run([*args, "--modes", "keyword,hybrid"], env)
    assert table.returncode == 0, table.stderr
    assert "tiny: 3 judged questions" in table.stdout
    assert "keyword" in table.stdout and "hybrid" in table.stdout
    assert "vector" not in table.stdout.split("means", 1)[1]
    assert "3/3" in table.stderr  # the progress: questions done


def test_the_route_gives_the_command_s_figures(
    tiny: tuple[TestClient[Any], FakeOpenAI], env: dict[str, str], tmp_path: Path
) -> None:
    """The same questions, as JSON Lines to the command and as a body to the route."""
    judged = read_judged(TINY / "queries.jsonl", TINY / "qrels" / "test.tsv")
    questions = [{"id": q.id, "query": q.text, "relevant": q.relevant} for q in judged]
    lines = tmp_path / "judged.jsonl"
    lines.write_text("".join(json.dumps(q) + "\n" for q in questions))
    done = run(["eval", "-c", "tiny", "--questions", str(lines), "--k", "3", "--json"], env)
    assert done.returncode == 0, done.stderr
    answered = tiny[0].post("/v1/collections/tiny/eval", json={"questions": questions, "k": 3})
    assert answered.status_code == 200, answered.text
    assert msgspec.json.decode(answered.content, type=EvalReport).k == 3  # as the client reads it
    by_route, by_command = answered.json(), json.loads(done.stdout)
    for report in (by_route, by_command):
        for figures in report["modes"]:
            del figures["latency"]
    assert by_route == by_command
    # Each question twice: searched once, each copy scored; the same means.
    twice = tiny[0].post("/v1/collections/tiny/eval", json={"questions": questions * 2, "k": 3})
    assert twice.status_code == 200, twice.text
    assert twice.json()["questions"] == 6
    for again, once in zip(twice.json()["modes"], by_route["modes"], strict=True):
        assert [again[n]["mean"] for n in FIGURES] == pytest.approx(
            [once[n]["mean"] for n in FIGURES]
        )


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({}, 422, "questions"),
        ({"questions": []}, 422, "questions"),
        ({"questions": [{"query": "a", "relevant": []}]}, 422, "questions[0].relevant"),
        ({"questions": [{"query": "a", "relevant": {"d": 0}}]}, 422, "questions[0].relevant"),
        ({"questions": [{"query": " \u0000 ", "relevant": ["d"]}]}, 422, "questions[0].query"),
        (
            {"questions": [{"id": "a\u0000", "query": "a", "relevant": ["d"]}]},
            422,
            "questions[0].id",
        ),
        ({"questions": [{"query": "a", "relevant": ["d"]}], "modes": ["bm25"]}, 422, "modes[0]"),
        ({"questions": [{"query": "a", "relevant": ["d"]}], "k": 0}, 422, "k"),
        ({"questions": [{"query": "a", "relevant": ["d"]}] * 1001}, 422, "questions"),
        ("not json", 400, None),
    ],
)
def test_a_bad_body_is_a_4xx_naming_its_field(
    tiny: tuple[TestClient[Any], FakeOpenAI], body: Any, status: int, field: str | None
) -> None:
    sent = {"content": body} if isinstance(body, str) else {"json": body}
    answered = tiny[0].post("/v1/collections/tiny/eval", **sent)
    assert answered.status_code == status, answered.text
    if field is not None:
        fields = [error["field"] for error in answered.json()["errors"]]
        assert any(named.startswith(field) for named in fields), answered.text


def test_a_collection_that_does_not_exist(
    tiny: tuple[TestClient[Any], FakeOpenAI], env: dict[str, str], tmp_path: Path
) -> None:
    body = {"questions": [{"query": "a", "relevant": ["d"]}]}
    answered = tiny[0].post("/v1/collections/nope/eval", json=body)
    assert answered.status_code == 404, answered.text
    lines = tmp_path / "judged.jsonl"
    lines.write_text('{"query": "a", "relevant": ["d"]}\n{"query": "b"\n')
    bad = run(["eval", "-c", "nope", "--questions", str(lines)], env)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        f"Error: {lines}, line 2: not JSON (Expecting ',' delimiter)"
    ]
    lines.write_text('{"query": "a", "relevant": ["d"]}\n')
    missing = run(["eval", "-c", "nope", "--questions", str(lines)], env)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1] == "Error: collection 'nope' does not exist"
