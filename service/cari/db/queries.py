"""Named SQL statements from the project's `sql/` folder, one statement per file.

A file `sql/collection_get.sql` is the statement `collection_get`. Parameters are psycopg named
placeholders (`%(name)s`); no statement text is ever built from user input.
"""

from __future__ import annotations

import re
from functools import cache
from typing import LiteralString

from cari.db.resources import folder

SQL_DIR = folder("sql")

# A quoted literal or identifier (kept whole), else a comment (dropped).
_QUOTED_OR_COMMENT = re.compile(r"""('(?:[^']|'')*'|"(?:[^"]|"")*")|--[^\n]*|/\*.*?\*/""", re.S)


@cache
def query(name: str) -> LiteralString:
    """The statement as the server gets it: the file's first line, which names the statement
    (`cari.db.statements.named`, `pg_stat_statements`), then its code without comments or
    blank lines, indented half as deep. The comments are for readers; sent, they would double
    the longest statements, and psycopg re-parses a statement over 4,096 bytes for its
    placeholders on every execution (`psycopg._queries.MAX_CACHED_STATEMENT_LENGTH`) instead of
    once: psycopg's conversion of the keyword walker's statement, composed, took 143 µs of the
    client's CPU a search at 4,158 bytes, 70 µs at 3,822 with the indentation halved
    (`tests/test_queries.py` keeps the statements a search runs under the limit)."""
    first, _, rest = _read(name).partition("\n")
    return first + "\n" + _code(rest)


@cache
def fragment(name: str) -> LiteralString:
    """A fragment of statements (`sql/fragments/`): its code without comments or blank lines."""
    return _code(_read(f"fragments/{name}")).rstrip()


def _read(name: str) -> LiteralString:
    # The files are part of the code base, not input: they are literal statements.
    return (SQL_DIR / f"{name}.sql").read_text(encoding="utf-8")


def _code(text: LiteralString) -> LiteralString:
    code = _QUOTED_OR_COMMENT.sub(lambda m: m.group(1) or "", text)
    lines = filter(None, (line.rstrip() for line in code.splitlines()))
    return "\n".join(_half_indented(line) for line in lines) + "\n"


def _half_indented(line: str) -> str:
    # Half the indentation keeps a statement's shape for `cari search --sql` and cuts the
    # keyword walker's by 8 %; no statement holds quoted text over lines that it would change.
    code = line.lstrip(" ")
    return " " * ((len(line) - len(code)) // 2) + code
