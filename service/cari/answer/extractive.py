"""The answer without an LLM: the source sentences that best answer the question, cited.

Sources are numbered 1..n in the order given. Documents are prose: cut into sentences as the
chunker cuts them (`cari.sentences`: at . ! ? … not after an abbreviation such as "Rp.", "No.",
"Dr." or an initial; a decimal such as "Rp 1.500.000" stays whole). Blank lines, list items
and headings end a sentence too. Structured sources (catalog items, installments) are lines,
each one a sentence that also holds the words of the source's title (the product a
"Price: ..." line is the price of).

A sentence scores the weights of the question's words it holds, each word once, times its
source's relevance (the search's calibrated evidence that the source answers the question):
words are lower-cased, the function words of both languages ignored, "-nya" and a plural "s"
taken off, and the labels structured sources write in English matched by their Indonesian
words ("harga" is "price"). A word weighs more the fewer sentences hold it. The best sentences
(ties to the earlier source, then the earlier sentence) that score at least half the best
one's score are shown strongest source first (a source's sentences in their order), each
followed by " [n]", a sentence that several sources hold once; the strongest source's first
sentence when none scores. So a moderate source's sentence holding the question's words goes
before a weak source's holding the same words."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cari.answer.citations import FUNCTION_WORDS, MARKER
from cari.schema.search import SearchResult
from cari.sentences import split as split_sentences

_STOP = FUNCTION_WORDS["id"] | FUNCTION_WORDS["en"]
# The labels of structured sources, by their normalised form (cari.search.structured).
_LABELS = {"harga": "price", "cicilan": "installment", "angsuran": "installment", "bulan": "month"}
_BLOCK = re.compile(r"\n[ \t]*(?:\n\s*|(?=[-*•#]|[0-9]{1,2}[.)][ \t]))")
_BULLET = re.compile(r"^(?:[-*•]+|#+)\s+")
_TOKEN = re.compile(r"[^\W_]+(?:[.,][0-9]+)*")
_STRUCTURED = frozenset({"catalog", "financing"})
RELATIVE_SCORE = 0.5  # of the best sentence's score, for another sentence to be shown


@dataclass(frozen=True, slots=True)
class _Sentence:
    source: int  # 0-based
    position: int
    text: str
    words: frozenset[str]
    line: bool  # a structured source's line: shown on a line of its own


def extractive_answer(
    question: str, sources: Sequence[SearchResult], *, max_sentences: int = 3
) -> str:
    """The best `max_sentences` sentences of the sources, each cited; "" when no source has
    text. When none holds a word of the question, the first sentence."""
    sentences: list[_Sentence] = []
    for index, result in enumerate(sources):
        line = result.kind in _STRUCTURED
        # A structured source's lines are about what its title names ("Price: ..." of it).
        context = frozenset(_words(result.title)) if line else frozenset()
        sentences += (
            _Sentence(index, position, text, context | frozenset(_words(text)), line)
            for position, text in enumerate(_split(result))
        )
    if not sentences:
        return ""
    asked = set(_words(question))
    held: dict[str, int] = {}
    for sentence in sentences:
        for word in asked & sentence.words:
            held[word] = held.get(word, 0) + 1
    weight = {word: math.log(1 + len(sentences) / count) for word, count in held.items()}

    def score(sentence: _Sentence) -> float:
        held_weight = sum(weight[word] for word in asked & sentence.words)
        return held_weight * sources[sentence.source].relevance

    def strongest_first(sentence: _Sentence) -> tuple[float, int, int]:
        return -sources[sentence.source].relevance, sentence.source, sentence.position

    ranked = sorted(sentences, key=lambda s: (-score(s), s.source, s.position))
    # A sentence with one common word of the question is no answer beside one with them all.
    enough = score(ranked[0]) * RELATIVE_SCORE
    # A sentence two sources hold (neighbouring chunks overlap) is said once, cited to the
    # first of them in this order.
    seen: set[str] = set()
    distinct = []
    for sentence in ranked:
        if (said := sentence.text.casefold()) not in seen:
            seen.add(said)
            distinct.append(sentence)
    chosen = [s for s in distinct[:max_sentences] if score(s) > 0 and score(s) >= enough]
    chosen = chosen or sorted(sentences, key=strongest_first)[:1]
    chosen.sort(key=strongest_first)
    parts: list[str] = []
    for i, sentence in enumerate(chosen):
        if i:
            parts.append("\n" if sentence.line or chosen[i - 1].line else " ")
        parts.append(f"{sentence.text} [{sentence.source + 1}]")
    return "".join(parts)


def _split(result: SearchResult) -> list[str]:
    # Markers the source text carries itself ("[12]") would read as citations of the answer.
    content = MARKER.sub("", result.content)
    if result.kind in _STRUCTURED:
        return [line for line in (" ".join(raw.split()) for raw in content.splitlines()) if line]
    sentences = []
    for block in _BLOCK.split(content):
        text = _BULLET.sub("", " ".join(block.split()))
        sentences += split_sentences(text)
    return sentences


def _words(text: str) -> list[str]:
    words = []
    for token in _TOKEN.findall(text.lower()):
        if token in _STOP:
            continue
        if len(token) > 5 and token.endswith("nya"):
            token = token[:-3]
        elif len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
            token = token[:-1]
        words.append(_LABELS.get(token, token))
    return words
