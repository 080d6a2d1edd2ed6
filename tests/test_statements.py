"""`cari search --sql`: the statements a search ran, parameters filled in, run as a DBA would
paste them into psql."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg

from cari.db import embedded
from tests.conftest import cli_env
from tests.fake_openai import FakeOpenAI
from tests.test_ingest_cli import cari

ROOT = Path(__file__).resolve().parents[1]


def test_search_prints_the_statements_it_ran_ready_for_psql(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    env = cli_env(clean_env, dsn, fake)
    (tmp_path / "knots.txt").write_text("A bowline makes a fixed loop at the end of a rope.")
    assert cari(["ingest", str(tmp_path), "-c", "harbour", "--create"], env).returncode == 0
    question = ["search", "bowline loop", "-c", "harbour", "--mode", "hybrid"]
    explained = cari([*question, "--json", "--explain"], env)
    assert explained.returncode == 0, explained.stderr
    engine = json.loads(explained.stdout)["explain"]["keyword_engine"]
    keyword = "search_keyword" if engine.startswith("sql") else "search_keyword_blocks"

    printed = cari([*question, "--sql"], env)
    assert printed.returncode == 0, printed.stderr
    blocks = printed.stdout.strip().split("\n\n")
    names = [block.splitlines()[0] for block in blocks]
    assert names == [  # the question's lexemes read once, for every statement that weighs them
        "-- query_lexemes (sql/query_lexemes.sql)",
        f"-- {keyword} (sql/{keyword}.sql)",
        "-- search_vector (sql/search_vector.sql)",
    ]
    with psycopg.connect(dsn, autocommit=True) as conn:
        for block in blocks:
            assert "%(" not in block, block  # every parameter filled in
            *settings, statement = [s for s in block.split(";\n") if s.strip()]
            for setting in settings:
                conn.execute(setting.encode())
            rows = conn.execute(statement.encode()).fetchall()
            assert rows, block  # the chunk the search found
            plan = conn.execute(b"EXPLAIN (ANALYZE, BUFFERS) " + statement.encode()).fetchall()
            assert plan

    # Without keyword search the lexemes are still read once: the evidence and highlights.
    vector = cari([*question[:-1], "vector", "--sql"], env)
    assert vector.returncode == 0, vector.stderr
    assert [block.splitlines()[0] for block in vector.stdout.strip().split("\n\n")] == [
        "-- query_lexemes (sql/query_lexemes.sql)",
        "-- search_vector (sql/search_vector.sql)",
    ]

    # A misspelled question: the same one analysis gives the vector side its respelled words.
    misspelled = ["search", "bowline fixde", "-c", "harbour", "--mode", "hybrid"]
    respelled = cari([*misspelled, "--json", "--explain"], env)
    assert respelled.returncode == 0, respelled.stderr
    part = json.loads(respelled.stdout)["explain"]["sub_queries"][0]
    assert part["embedded_query"] == "bowline fixed"
    printed = cari([*misspelled, "--sql"], env)
    assert printed.returncode == 0, printed.stderr
    assert [block.splitlines()[0] for block in printed.stdout.strip().split("\n\n")] == names


def test_the_tuning_page_explains_a_search_in_psql(
    tmp_path: Path, dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    """docs/tuning.md's commands, run in a shell as written: psql prints the plan of the vector
    statement the search ran, under the settings Cari's connections run it with."""
    page = (ROOT / "docs" / "tuning.md").read_text()
    found = re.search(r"```sh\n(cari search .*? --sql > search\.sql\n.*?)```", page, re.S)
    assert found, "docs/tuning.md shows no `cari search --sql` commands"
    env = cli_env(clean_env, dsn, fake)
    # `cari` as installed, and the psql that ships with the embedded server.
    path = [str(Path(sys.executable).parent), str(embedded.client_tool("psql").parent)]
    env["PATH"] = os.pathsep.join([*path, env.get("PATH", "")])
    (tmp_path / "civic.txt").write_text("Cicilan Honda Civic mulai 5 juta rupiah per bulan.")
    assert cari(["ingest", str(tmp_path), "-c", "faq", "--create"], env).returncode == 0
    shell = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", found.group(1)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert shell.returncode == 0, shell.stderr
    assert "ERROR" not in shell.stderr, shell.stderr
    assert shell.stdout.count("SET") == 2, shell.stdout
    assert "Execution Time" in shell.stdout and "Buffers" in shell.stdout, shell.stdout
