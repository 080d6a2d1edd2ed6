"""The statements as the server gets them: the files' code without their comments, indented
half as deep."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH

from cari.db.queries import _QUOTED_OR_COMMENT, SQL_DIR, _code, _half_indented, fragment, query
from cari.search.bm25 import Statement, keyword_statement


def test_comments_go_and_quoted_text_stays() -> None:
    text = (
        "SELECT '-- kept', 'it''s /* kept */',  -- dropped\n"
        '       "odd--name"  /* dropped,\n   over lines */\n'
        "\n"
        "  FROM t;  -- dropped\n"
    )
    assert _code(text) == "SELECT '-- kept', 'it''s /* kept */',\n   \"odd--name\"\n FROM t;\n"


@pytest.mark.parametrize("path", sorted(SQL_DIR.glob("*.sql")), ids=lambda path: path.stem)
def test_a_statement_keeps_its_first_line_and_its_code(path: Path) -> None:
    """The first line names the statement (`pg_stat_statements`, `cari search --sql`); every
    other line of code is sent as written, its indentation halved."""
    written = path.read_text(encoding="utf-8").splitlines()
    sent = query(path.stem).splitlines()
    assert sent[0] == written[0]
    code = [line for line in written[1:] if line.strip() and not line.lstrip().startswith("--")]
    assert [_half_indented(line.split(" --")[0].rstrip()) for line in code] == sent[1:]


@pytest.mark.parametrize("path", sorted(SQL_DIR.rglob("*.sql")), ids=lambda path: path.stem)
def test_no_quoted_text_spans_lines(path: Path) -> None:
    """Halving the indentation would change quoted text over several lines."""
    quoted = (m.group(1) for m in _QUOTED_OR_COMMENT.finditer(path.read_text(encoding="utf-8")))
    assert not [text for text in quoted if text and "\n" in text]


@pytest.mark.parametrize("engine", ["sql", "cari_bm25", "chunks"])
def test_a_search_statement_is_parsed_once(engine: Statement) -> None:
    """psycopg keeps a statement's placeholders parsed only up to 4,096 bytes; beyond, it parses
    them again on every execution (~73 µs more of the client's CPU a search, measured)."""
    for statement in ("query_lexemes", "search_vector", "search_evidence", "chunks_for_results"):
        assert len(query(statement).encode()) <= MAX_CACHED_STATEMENT_LENGTH
    composed = keyword_statement(engine).as_string(None)  # type: ignore[arg-type]
    assert len(composed.encode()) <= MAX_CACHED_STATEMENT_LENGTH


def test_a_fragment_is_its_code_alone() -> None:
    sent = fragment("search_keyword_terms")
    assert "--" not in sent and sent.startswith("params AS (")
