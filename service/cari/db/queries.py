"""Named SQL statements from the project's `sql/` folder, one statement per file.

A file `sql/collection_get.sql` is the statement `collection_get`. Parameters are psycopg named
placeholders (`%(name)s`); no statement text is ever built from user input.
"""

from __future__ import annotations

from functools import cache
from typing import LiteralString

from cari.db.resources import folder

SQL_DIR = folder("sql")


@cache
def query(name: str) -> LiteralString:
    path = SQL_DIR / f"{name}.sql"
    # The files are part of the code base, not input: they are literal statements.
    return path.read_text(encoding="utf-8")
