"""The statements as the server gets them: the files' code without their comments."""

from __future__ import annotations

from pathlib import Path

import pytest

from cari.db.queries import SQL_DIR, _code, fragment, query


def test_comments_go_and_quoted_text_stays() -> None:
    text = (
        "SELECT '-- kept', 'it''s /* kept */',  -- dropped\n"
        '       "odd--name"  /* dropped,\n   over lines */\n'
        "\n"
        "  FROM t;  -- dropped\n"
    )
    assert _code(text) == "SELECT '-- kept', 'it''s /* kept */',\n       \"odd--name\"\n  FROM t;\n"


@pytest.mark.parametrize("path", sorted(SQL_DIR.glob("*.sql")), ids=lambda path: path.stem)
def test_a_statement_keeps_its_first_line_and_its_code(path: Path) -> None:
    """The first line names the statement (`pg_stat_statements`, `cari search --sql`); every
    other line of code is sent as written."""
    written = path.read_text(encoding="utf-8").splitlines()
    sent = query(path.stem).splitlines()
    assert sent[0] == written[0]
    code = [line for line in written[1:] if line.strip() and not line.lstrip().startswith("--")]
    assert [line.split(" --")[0].rstrip() for line in code] == sent[1:]


def test_a_fragment_is_its_code_alone() -> None:
    sent = fragment("search_keyword_terms")
    assert "--" not in sent and sent.startswith("params AS (")
