"""Synonym rules per collection, applied when a query is analysed (migration 0009).

A rule is one line: an equivalence `CRV, CR-V` (every term stands for the others) or a one-way
rule `angsuran, cicil => cicilan` (a query for a left term also looks for the right ones; a
query for a right term is unchanged). Saving a collection's rules replaces them all; each term
is analysed by every text-search configuration, so rules act on lexemes, in every language.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from cari.db.queries import query
from cari.errors import InvalidInput, NotFound
from cari.limits import MAX_SYNONYM_TERMS, NUL_REFUSED
from cari.schema.collections import Synonyms

Conn = psycopg.AsyncConnection[Any]


@dataclass(frozen=True, slots=True)
class Term:
    text: str
    source: bool  # a query holding it fires the rule
    target: bool  # a fired rule adds it


def parse(rule: str) -> list[Term]:
    """A rule's terms; `InvalidInput` naming the rule when it is malformed."""
    if "\x00" in rule:  # PostgreSQL text cannot hold it
        raise _bad(rule.replace("\x00", "\\x00"), NUL_REFUSED)
    if rule.count("=>") > 1:
        raise _bad(rule, "has more than one '=>'")
    left, arrow, right = rule.partition("=>")
    sources = _terms(rule, left)
    if not arrow:
        if len(sources) < 2:
            raise _bad(rule, "an equivalence needs at least two terms separated by ','")
        return [Term(t, source=True, target=True) for t in sources]
    targets = _terms(rule, right)
    if not sources or not targets:
        raise _bad(rule, "a one-way rule needs terms on both sides of '=>'")
    return [Term(t, source=True, target=False) for t in sources] + [
        Term(t, source=False, target=True) for t in targets
    ]


async def get(conn: Conn, collection: str) -> Synonyms:
    cur = await conn.execute(query("collection_ref"), {"name": collection})
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"collection '{collection}' does not exist")
    cur = await conn.execute(query("synonyms_list"), {"collection_id": row[0]})
    return Synonyms(rules=[str(row[0]) for row in await cur.fetchall()])


async def replace(conn: Conn, collection: str, synonyms: Synonyms) -> Synonyms:
    """Replace the collection's rules; none is saved when one is bad."""
    rules = [" ".join(rule.split()) for rule in synonyms.rules]
    parsed = [parse(rule) for rule in rules]
    async with conn.transaction():
        collection_id, language = await _collection(conn, collection)
        # A term must say something in the collection's own language, or it could never fire.
        terms = [t.text for terms in parsed for t in terms]
        cur = await conn.execute(
            query("synonyms_empty_terms"), {"language": language, "terms": terms}
        )
        empty = {str(row[0]) for row in await cur.fetchall()}
        for rule, terms_of in zip(rules, parsed, strict=True):
            for term in terms_of:
                if term.text in empty:
                    raise _bad(rule, f"'{term.text}' has no searchable word in {language}")
        await conn.execute(query("synonyms_clear"), {"collection_id": collection_id})
        await conn.execute(
            query("synonyms_insert"),
            {
                "collection_id": collection_id,
                "rules": rules,
                "positions": [p for p, terms_of in enumerate(parsed) for _ in terms_of],
                "terms": [n for terms_of in parsed for n in range(len(terms_of))],
                "texts": terms,
                "sources": [t.source for terms_of in parsed for t in terms_of],
                "targets": [t.target for terms_of in parsed for t in terms_of],
            },
        )
    return Synonyms(rules=rules)


async def fired(conn: Conn, collection_id: int, text: str) -> list[dict[str, Any]]:
    """The rules a query fires, per language of the collection: the lexemes of the query
    that fired each and those it adds (for `explain`)."""
    cur = await conn.execute(
        query("synonyms_fired"), {"collection_id": collection_id, "query": text}
    )
    return [
        {"rule": rule, "language": language, "matched": matched, "added": added or []}
        for rule, language, matched, added in await cur.fetchall()
    ]


async def _collection(conn: Conn, name: str) -> tuple[int, str]:
    cur = await conn.execute(query("synonyms_collection"), {"name": name})
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"collection '{name}' does not exist")
    return int(row[0]), str(row[1])


def _terms(rule: str, side: str) -> list[str]:
    terms = [" ".join(t.split()) for t in side.split(",")]
    if any(not t for t in terms) and side.strip():
        raise _bad(rule, "has an empty term")
    terms = [t for t in terms if t]
    if len(terms) > MAX_SYNONYM_TERMS:
        raise _bad(rule, f"has more than {MAX_SYNONYM_TERMS} terms")
    if len(set(terms)) < len(terms):
        raise _bad(rule, "names a term twice")
    return terms


def _bad(rule: str, reason: str) -> InvalidInput:
    return InvalidInput("rules", f"rule '{rule}' {reason}")
