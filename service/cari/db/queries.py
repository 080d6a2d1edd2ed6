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
    blank lines. The comments are for readers; sent, they would double the longest statements,
    and psycopg re-parses a statement over 4,096 bytes for its placeholders on every execution
    (`psycopg._queries.MAX_CACHED_STATEMENT_LENGTH`) instead of once."""
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
    return "\n".join(filter(None, (line.rstrip() for line in code.splitlines()))) + "\n"
