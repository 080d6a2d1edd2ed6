"""Query decomposition: a multi-topic query becomes sub-queries searched independently.

"harga honda veloz vs toyota avanza" asks about two cars; searched whole, one car's chunks can
crowd out the other's. `propose` finds the split from the words alone; `decompose` keeps it only
when the collection agrees.

Syntax (`propose`, English and Indonesian, case-insensitive, trailing ?/!/. ignored):

- Separators: `vs`/`vs.`/`versus`, `and`/`dan`/`&`, `or`/`atau`, and lists `A, B dan C`
  (`A, B, and C`). After a comparison cue `with`/`to`/`dengan`/`sama` separate too.
- Comparison cues: difference(s) between, compare, comparison of/between, perbedaan (antara),
  beda (antara), bedanya, perbandingan (antara), bandingkan, membandingkan. The cue and question
  filler at the ends of the words before it ("what is the", "apa") are dropped from the parts;
  the other words before it stay in the shared head.
- Shared head and tail: the separators cut the query into segments. The shortest segment sets
  the item length n in words; the first item is the last n words of the first segment (the rest
  is the shared head), the last item is the first n words of the last segment (the rest is the
  shared tail), and a middle segment is an item whole. So "harga honda veloz vs toyota avanza"
  gives items "honda veloz" and "toyota avanza" with head "harga", and "Civic vs Corolla price"
  gives "Civic" and "Corolla" with tail "price".
- Bare conjunctions (and/dan/or/atau/& without a cue) usually join clauses or one concept in a
  natural question, so they split only short queries (at most 7 words) into short items (at
  most 3 words) that hold no question word and neither start nor end with a function word, and
  never before a question word ("... and what affects it"). Comparison markers (vs, cues) allow
  queries of up to 12 words and items of up to 6.
- One kind of separator per query; one sentence (no inner . ? ! ; :); 2 to 5 distinct items.
- A bare disjunction (or/atau) after a preposition is one question: "electron microscopy of
  lung or bronchi" asks of one topic in either place, and searched whole it finds both.

Vocabulary (`decompose`), from the collection's own text:

- A bare conjunction joins one concept when the words around it ("syarat dan ketentuan") form a
  phrase in the collection: among at most 100 chunks holding both words, at least 2 and at least
  half hold the phrase. When fewer than 2 chunks hold both words the collection has no say, and
  a short built-in list of such phrases decides.
- Every item needs one of its own words (not the shared head or tail) in the collection: a
  lexeme of some chunk, or a word of some catalog item's SKU or name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg

from cari.db.queries import query as named_query

MAX_PARTS = 5
_BARE_MAX_QUERY_WORDS = 7
_BARE_MAX_ITEM_WORDS = 3
_MARKED_MAX_QUERY_WORDS = 12
_MARKED_MAX_ITEM_WORDS = 6
# A phrase is one concept when it is in at least this many, and this share, of the sampled
# chunks that hold both of its words.
_PHRASE_MIN_CHUNKS = 2
_PHRASE_MIN_SHARE = 0.5


_BARE = {"and": "and", "dan": "dan", "&": "&", "or": "or", "atau": "atau"}
_VS = {"vs": "vs", "vs.": "vs", "versus": "vs"}
_AFTER_CUE = {"with", "to", "dengan", "sama"}
# Longest first, so "perbedaan antara" wins over "perbedaan".
_CUES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("difference", "between"), "difference between"),
    (("differences", "between"), "difference between"),
    (("comparison", "between"), "compare"),
    (("comparison", "of"), "compare"),
    (("compare",), "compare"),
    (("perbedaan", "antara"), "perbedaan"),
    (("perbedaan",), "perbedaan"),
    (("beda", "antara"), "beda"),
    (("bedanya",), "beda"),
    (("beda",), "beda"),
    (("perbandingan", "antara"), "perbandingan"),
    (("perbandingan",), "perbandingan"),
    (("bandingkan",), "bandingkan"),
    (("membandingkan",), "bandingkan"),
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_FILLER = _words(
    "what what's whats is are was the a an please tell me explain "
    "apa apakah sih itu ya tolong jelaskan sebutkan"
)
_FUNCTION_WORDS = _words(
    "of the a an in on at for to with by from about as into than that which whose its their "
    "this these those is are was were be been being has have had do does did can could will "
    "would should may might must not no "
    "di ke dari yang untuk pada dengan dalam oleh itu ini adalah akan bagi tentang sebagai "
    "atas antara terhadap para sang si tidak bukan"
)
# A head ending in one of these makes the items of a disjunction the objects of one topic.
_PREPOSITIONS = _words(
    "of in on at for to with by from about into over under within without between "
    "di ke dari untuk pada dengan dalam oleh bagi tentang atas terhadap"
)
_QUESTION_WORDS = _words(
    "what which who whom whose why how when where "
    "apa apakah siapa siapakah mengapa kenapa bagaimana kapan kapankah dimana dimanakah mana "
    "manakah berapa berapakah"
)
# Used only when the collection has no evidence either way (e.g. a new, empty collection).
_ONE_CONCEPT = frozenset(
    {
        ("terms", "conditions"),
        ("black", "white"),
        ("research", "development"),
        ("supply", "demand"),
        ("pros", "cons"),
        ("trial", "error"),
        ("rock", "roll"),
        ("profit", "loss"),
        ("questions", "answers"),
        ("mergers", "acquisitions"),
        ("more", "less"),
        ("sooner", "later"),
        ("syarat", "ketentuan"),
        ("penelitian", "pengembangan"),
        ("hak", "kewajiban"),
        ("sebab", "akibat"),
        ("untung", "rugi"),
        ("tanya", "jawab"),
        ("cepat", "lambat"),
    }
)
_TRAILING = re.compile(r"[\s?!.]+$")
_SENTENCE_END = re.compile(r"[.?!;:]$")


@dataclass(frozen=True, slots=True)
class Junction:
    left: str
    phrase: str
    right: str


@dataclass(frozen=True, slots=True)
class Proposal:
    """A syntactic split, before the collection is asked."""

    pattern: str
    head: str
    items: tuple[str, ...]
    tail: str
    # Each bare conjunction's phrase with the words either side of it, e.g.
    # Junction("syarat", "syarat dan ketentuan", "ketentuan"); none for comparison markers.
    junctions: tuple[Junction, ...]

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(" ".join(w for w in (self.head, i, self.tail) if w) for i in self.items)


@dataclass(frozen=True, slots=True)
class Decomposition:
    parts: tuple[str, ...]  # the sub-queries; (query,) when not split
    pattern: str | None  # e.g. "vs", "atau", "list", "difference between"; None if not split
    reason: str | None  # why a proposed split was refused, else None


@dataclass(frozen=True, slots=True)
class PhraseCounts:
    both: int  # sampled chunks (at most 100) holding both words of a junction
    phrase: int  # of those, the chunks holding its phrase


class Vocabulary(Protocol):
    async def phrase_counts(self, junctions: Sequence[Junction]) -> list[PhraseCounts]:
        """Per junction: how often its two words appear, and appear joined as its phrase."""
        ...

    async def known(self, words: Sequence[str]) -> list[bool]:
        """Per word: does it occur in the collection (chunks, catalog SKUs and names)?"""
        ...


class CollectionVocabulary:
    """A collection's vocabulary in PostgreSQL, analysed by its text-search configuration."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], collection_id: int) -> None:
        self._conn = conn
        self._collection_id = collection_id

    async def phrase_counts(self, junctions: Sequence[Junction]) -> list[PhraseCounts]:
        cur = await self._conn.execute(
            named_query("vocabulary_phrases"),
            {
                "collection_id": self._collection_id,
                "lefts": [j.left for j in junctions],
                "phrases": [j.phrase for j in junctions],
                "rights": [j.right for j in junctions],
            },
        )
        return [PhraseCounts(int(row[0]), int(row[1])) for row in await cur.fetchall()]

    async def known(self, words: Sequence[str]) -> list[bool]:
        cur = await self._conn.execute(
            named_query("vocabulary_known"),
            {"collection_id": self._collection_id, "words": list(words)},
        )
        return [bool(row[0]) for row in await cur.fetchall()]


def propose(query: str) -> Proposal | None:
    """The split the query's wording suggests, or None."""
    tokens = _tokens(_TRAILING.sub("", query))
    words = sum(t != "," for t in tokens)
    if any(t.lower() != "vs." and _SENTENCE_END.search(t) for t in tokens):
        return None
    lowered = [t.lower() for t in tokens]
    cue = _find_cue(lowered)
    prefix: list[str] = []
    separators = {**_BARE, **_VS}
    if cue is not None:
        start, length, _ = cue
        prefix = _strip_filler(tokens[:start])
        tokens, lowered = tokens[start + length :], lowered[start + length :]
        separators.update((w, w) for w in _AFTER_CUE)
    kinds = {separators[t] for t in lowered if t in separators}
    if len(kinds) != 1:
        return None
    (kind,) = kinds
    segments = _segments(tokens, lowered, separators)
    if segments is None:
        return None
    marked = cue is not None or kind == "vs"
    if words > (_MARKED_MAX_QUERY_WORDS if marked else _BARE_MAX_QUERY_WORDS):
        return None
    n = min(len(s) for s in segments)
    first, middle, last = segments[0], segments[1:-1], segments[-1]
    items = [first[len(first) - n :], *middle, last[:n]]
    limit = _MARKED_MAX_ITEM_WORDS if marked else _BARE_MAX_ITEM_WORDS
    if any(len(i) > limit for i in items):
        return None
    if not marked and not _bare_items_fit(items, segments):
        return None
    head = prefix + first[: len(first) - n]
    if kind in ("or", "atau") and not marked and head and head[-1].lower() in _PREPOSITIONS:
        return None
    distinct = _distinct([" ".join(i) for i in items])
    if not 2 <= len(distinct) <= MAX_PARTS:
        return None
    listed = "," in lowered
    pattern = cue[2] if cue is not None else "list" if listed else kind
    return Proposal(
        pattern=pattern,
        head=" ".join(head),
        items=tuple(distinct),
        tail=" ".join(last[n:]),
        junctions=() if marked else _junctions(tokens, lowered),
    )


async def decompose(query: str, vocabulary: Vocabulary) -> Decomposition:
    """The sub-queries to search for `query`: its proposed split if the collection agrees."""
    proposal = propose(query)
    if proposal is None:
        return Decomposition((query,), None, None)
    if proposal.junctions:
        counts = await vocabulary.phrase_counts(proposal.junctions)
        for junction, count in zip(proposal.junctions, counts, strict=True):
            if reason := _one_concept(junction, count):
                return Decomposition((query,), None, reason)
    words = [item.split() for item in proposal.items]
    found = await vocabulary.known([w for item in words for w in item])
    offset = 0
    for item, item_words in zip(proposal.items, words, strict=True):
        if not any(found[offset : offset + len(item_words)]):
            return Decomposition((query,), None, f"'{item}' matches nothing in this collection")
        offset += len(item_words)
    return Decomposition(proposal.parts, proposal.pattern, None)


def _one_concept(junction: Junction, count: PhraseCounts) -> str | None:
    """Why the junction's phrase is one concept, or None when it joins two items."""
    if count.both >= _PHRASE_MIN_CHUNKS:
        if count.phrase >= max(_PHRASE_MIN_CHUNKS, _PHRASE_MIN_SHARE * count.both):
            return (
                f"'{junction.phrase}' is one phrase in this collection "
                f"({count.phrase} of {count.both} chunks holding both words)"
            )
        return None
    if (junction.left.lower(), junction.right.lower()) in _ONE_CONCEPT:
        return f"'{junction.phrase}' is one phrase (built-in list; no evidence in this collection)"
    return None


def _tokens(text: str) -> list[str]:
    """Words, with a comma after a word as a token of its own ("1,5" stays one word)."""
    tokens: list[str] = []
    for word in text.split():
        if word == ",":
            tokens.append(word)
        elif word.endswith(","):
            tokens.extend((word.rstrip(","), ","))
        else:
            tokens.append(word)
    return tokens


def _find_cue(lowered: list[str]) -> tuple[int, int, str] | None:
    """The first comparison cue: where it starts, its length in words, its pattern name."""
    for start in range(len(lowered)):
        for words, pattern in _CUES:
            if tuple(lowered[start : start + len(words)]) == words:
                return start, len(words), pattern
    return None


def _strip_filler(words: list[str]) -> list[str]:
    start, end = 0, len(words)
    while start < end and words[start].lower() in _FILLER:
        start += 1
    while end > start and words[end - 1].lower() in _FILLER:
        end -= 1
    return words[start:end]


def _segments(
    tokens: list[str], lowered: list[str], separators: dict[str, str]
) -> list[list[str]] | None:
    """The words between separators; None unless a list's commas all precede its one
    conjunction (an Oxford comma is allowed) and no segment is empty."""
    segments: list[list[str]] = [[]]
    conjunctions = 0
    for token, low in zip(tokens, lowered, strict=True):
        if low == "," or low in separators:
            if low != "," and segments[-1] == [] and len(segments) > 1 and conjunctions == 0:
                segments.pop()  # "A, B, and C": the comma and "and" are one separator
            if low != ",":
                conjunctions += 1
            elif conjunctions:
                return None  # a comma after the conjunction
            segments.append([])
        else:
            segments[-1].append(token)
    if "," in lowered and conjunctions != 1:
        return None
    if any(not s for s in segments):
        return None
    return segments


def _junctions(tokens: list[str], lowered: list[str]) -> tuple[Junction, ...]:
    """Each conjunction with its neighbouring words (validated segments: never at an edge;
    an Oxford comma may stand between)."""
    found = []
    for i, low in enumerate(lowered):
        if low in _BARE:
            left, right = tokens[i - 2 if lowered[i - 1] == "," else i - 1], tokens[i + 1]
            found.append(Junction(left, f"{left} {tokens[i]} {right}", right))
    return tuple(found)


def _bare_items_fit(items: list[list[str]], segments: list[list[str]]) -> bool:
    """Items of a bare conjunction are noun phrases: no function word at their edges, no
    question word in them, and no segment after the first opens with a question word (that is
    a new clause)."""
    if any(s[0].lower() in _QUESTION_WORDS for s in segments[1:]):
        return False
    if any(w.lower() in _QUESTION_WORDS for i in items for w in i):
        return False
    return not any(
        i[0].lower() in _FUNCTION_WORDS or i[-1].lower() in _FUNCTION_WORDS for i in items
    )


def _distinct(items: list[str]) -> list[str]:
    seen: set[str] = set()
    kept = []
    for item in items:
        if item.lower() not in seen:
            seen.add(item.lower())
            kept.append(item)
    return kept
