"""Every request limit and choice, in one place: the HTTP structs use these types, and the CLI's
options and the search tool's schema are derived from them, so the three cannot disagree."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

import msgspec

from cari.errors import InvalidInput

Mode = Literal["hybrid", "vector", "keyword"]
Method = Literal["rrf", "minmax", "zscore"]  # how hybrid search fuses its two lists
# A result's relevance band: strong (0.5 and above), moderate (0.3 and above), weak.
Band = Literal["strong", "moderate", "weak"]

QUERY_LENGTH = 4000
QueryText = Annotated[str, msgspec.Meta(max_length=QUERY_LENGTH)]
TopK = Annotated[int, msgspec.Meta(ge=1, le=50)]
Threshold = Annotated[float, msgspec.Meta(ge=0, le=1)]
Weight = Annotated[float, msgspec.Meta(ge=0, le=100)]
RrfK = Annotated[int, msgspec.Meta(ge=1, le=10_000)]
Candidates = Annotated[int, msgspec.Meta(ge=1, le=1000)]
EfSearch = Annotated[int, msgspec.Meta(ge=1, le=1000)]
DocumentId = Annotated[str, msgspec.Meta(min_length=1, max_length=512)]

# An evaluation (`cari eval`, `POST …/eval`): the modes it measures ("default": the
# collection's own, no mode set); its Recall@k's k, the chunks each of its searches returns
# (they run in process, so are not held to TopK, but to what one retriever returns at most:
# Candidates); its questions per request and documents judged per question; a relevant
# document's grade (higher: more relevant; a request names only relevant documents).
EvalMode = Literal["keyword", "vector", "hybrid", "default"]
RecallDepth = Annotated[int, msgspec.Meta(ge=1, le=1000)]
MAX_EVAL_QUESTIONS = 1000
MAX_JUDGED = 1000
Grade = Annotated[int, msgspec.Meta(ge=1, le=1000)]

# Names: an embedder's (in CARI_EMBEDDERS and a collection's `embedder`), a text-search
# configuration's (a document's `language`; unanchored, as msgspec matches a pattern).
EMBEDDER_NAME_PATTERN = "^[a-z0-9][a-z0-9_-]{0,62}$"
LANGUAGE_NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]{0,62}"

MAX_SYNONYM_RULES = 1000  # per collection
MAX_SYNONYM_TERMS = 32  # per rule
MAX_TENOR_MONTHS = 600  # a financing rate's, and a tenor a question names

# PostgreSQL text cannot hold U+0000, so no string the server stores or matches on may hold one:
# one rule and one message wherever a request meets it (the OpenAPI document states it on each
# such string). A question's, and a document's text's, NULs are dropped instead.
NUL_FREE = r"^[^\x00]*$"
NUL_REFUSED = "must not hold a NUL character (U+0000)"

# A listing's page (`?limit=`: documents, catalog items): its size by default and at most.
PAGE_LIMIT = 100
MAX_PAGE_LIMIT = 1000
MAX_OFFSET = 2**63 - 1  # `?offset=` (catalog items): PostgreSQL's OFFSET is a bigint


def refuse_nul(field: str, value: object) -> None:
    """Refuse `value`, a string or any JSON value (its keys and strings at every depth), if it
    holds U+0000: InvalidInput naming `field`."""
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidInput(field, NUL_REFUSED)
    elif isinstance(value, dict):
        for key, item in value.items():
            refuse_nul(field, key)
            refuse_nul(field, item)
    elif isinstance(value, list | tuple):
        for item in value:
            refuse_nul(field, item)


def choices(literal: Any) -> tuple[str, ...]:
    """The values a `Literal` type allows, in order."""
    return tuple(str(value) for value in get_args(literal))


def bounds(annotated: Any) -> tuple[Any, Any]:
    """The (least, greatest) value an `Annotated[number, msgspec.Meta(ge=…, le=…)]` allows."""
    for meta in get_args(annotated)[1:]:
        if isinstance(meta, msgspec.Meta):
            return meta.ge, meta.le
    raise TypeError(f"{annotated!r} carries no msgspec.Meta bounds")
