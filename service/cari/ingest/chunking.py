"""Documents cut into chunks the embedding model takes whole, at the most natural boundaries.

A section becomes a list of words, each remembering how good a place the gap before it is to
start a chunk: a heading beats a blank line, which beats a sentence end, a line break, a plain
space, and finally a cut inside an over-long word. Chunks are packed greedily up to the limit
and end at the best gap that leaves them at least `min_tokens` long.

Counting tokens is the expensive part, so each distinct word is counted once and a chunk is
estimated as the sum of its words. The tokenizer is not strictly additive (special tokens,
merges across gaps), so every chunk is counted once for real and cut shorter if it is over.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from cari import sentences
from cari.ingest.formats import Section

TokenCounter = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class NewChunk:
    """A chunk cut from a document and not yet stored (a stored one is `schema.documents.Chunk`)."""

    ordinal: int  # 0.. across the whole document
    title: str  # the document's, on every chunk
    content: str
    token_count: int  # count_tokens(content)
    metadata: dict[str, Any]  # the section's, such as {"page": 2}


def chunk_document(
    sections: Sequence[Section],
    *,
    title: str,
    count_tokens: TokenCounter,
    max_tokens: int = 512,
    min_tokens: int = 256,
    overlap_tokens: int = 64,
) -> list[NewChunk]:
    """Chunks of at most `max_tokens`, each section on its own, ordinals running throughout.

    Chunks aim for at least `min_tokens` (a section's last one may be shorter); each one after
    the first of a section starts with about `overlap_tokens` of the end of the one before.
    """
    if not 0 <= min_tokens <= max_tokens or not 0 <= overlap_tokens < max_tokens:
        raise ValueError("need 0 <= min_tokens <= max_tokens and 0 <= overlap_tokens < max_tokens")
    counter = _Counter(count_tokens, max_tokens)
    chunks: list[NewChunk] = []
    for section in sections:
        whole = _whole(section.text, counter)
        if whole is not None:
            found: Iterator[tuple[str, int]] = iter([whole])
        else:
            found = _Words(section.text, counter).chunks(min_tokens, overlap_tokens)
        for content, tokens in found:
            chunks.append(NewChunk(len(chunks), title, content, tokens, dict(section.metadata)))
    return chunks


class _Counter:
    """The caller's counter, plus cached per-word estimates."""

    def __init__(self, count_tokens: TokenCounter, max_tokens: int) -> None:
        self.count = count_tokens
        self.max_tokens = max_tokens
        # What the counter adds to any text (special tokens, a "passage: " prefix), found from
        # two words costing more alone than together.
        self.overhead = max(0, 2 * count_tokens("abc") - count_tokens("abc abc"))
        self.budget = max_tokens - self.overhead  # for the words of a chunk
        if self.budget < 1:
            raise ValueError(f"max_tokens must exceed the {self.overhead} tokens of any text")
        self._words: dict[str, int] = {}

    def word(self, word: str) -> int:
        size = self._words.get(word)
        if size is None:
            size = self._words[word] = self.size(word)
        return size

    def size(self, text: str) -> int:
        return max(0, self.count(text) - self.overhead)

    def split(self, word: str, size: int) -> Iterator[tuple[str, int]]:
        """Cut a word longer than any chunk into pieces by characters: a last resort.

        Pieces of a quarter chunk pack with the words around them and can be overlapped.
        """
        limit, start = max(1, self.budget // 4), 0
        while start < len(word):
            # Guess the piece length from the word's density, then shrink until it fits.
            length = max(1, len(word) * limit // size)
            piece_size = self.size(word[start : start + length])
            while piece_size > limit and length > 1:
                length = max(1, min(length - 1, length * limit // piece_size))
                piece_size = self.size(word[start : start + length])
            yield word[start : start + length], piece_size
            start += length


# How good a place to start a chunk the gap before a word is; higher is better.
_INSIDE_WORD, _SPACE, _LINE, _SENTENCE, _PARAGRAPH, _HEADING, _END = range(-1, 6)

_HEADING_LINE = re.compile(r" {0,3}#{1,6}(?:\s|$)")
_FENCE = re.compile(r" {0,3}(?:```|~~~)")
_LIST_MARKER = re.compile(r"\d{1,9}[.)]")


def _split(text: str) -> Iterator[tuple[str, int, str]]:
    """(separator, gap level, word) for each word; separators keep lines and paragraphs."""
    ended = blank = after_heading = in_fence = False
    for line in text.splitlines():
        words = line.split()
        if not words:
            blank = True
            continue
        heading = not in_fence and _HEADING_LINE.match(line) is not None
        if _FENCE.match(line):
            in_fence = not in_fence
        if after_heading:
            level = _SPACE  # a heading stays with the text it introduces
        elif heading:
            level = _HEADING
        elif blank:
            level = _PARAGRAPH
        else:
            level = _SENTENCE if ended else _LINE
        separator = "\n\n" if blank else "\n"
        for position, word in enumerate(words):
            if position:
                level, separator = (_SENTENCE if ended else _SPACE), " "
            yield separator, level, word
            # "1." opening a line numbers a list item; it ends no sentence.
            ended = sentences.ends_sentence(word) and not (
                position == 0 and _LIST_MARKER.fullmatch(word)
            )
        blank, after_heading = False, heading


# Only a section of at most this many characters per token of the limit is counted whole first:
# no tokenizer packs more into a token, so a longer one is not counted in vain.
_CHARACTERS_PER_TOKEN = 8


def _whole(text: str, counter: _Counter) -> tuple[str, int] | None:
    """The section as one chunk (its words with the separators `_Words` keeps) if it fits and
    has no heading after its first line (a heading may start a chunk even then).

    Most sections of short documents do: one count then replaces the word-by-word estimate,
    which cost ~0.25 ms for a 130-word record, a quarter of `cari ingest`'s own CPU time.
    """
    if len(text) > _CHARACTERS_PER_TOKEN * counter.max_tokens:
        return None
    lines: list[str] = []
    blank = False
    for line in text.splitlines():
        words = line.split()
        if not words:
            blank = True
            continue
        if lines and _HEADING_LINE.match(line):
            return None
        if lines:
            lines.append("\n\n" if blank else "\n")
        lines.append(" ".join(words))
        blank = False
    content = "".join(lines)
    if not content:
        return None
    tokens = counter.count(content)
    return (content, tokens) if tokens <= counter.max_tokens else None


class _Words:
    """A section's words with their gaps and the running sum of their estimated tokens."""

    def __init__(self, text: str, counter: _Counter) -> None:
        self.counter = counter
        self.texts: list[str] = []
        self.separators: list[str] = []
        self.levels: list[int] = []
        sizes: list[int] = []
        for separator, level, word in _split(text):
            size = counter.word(word)
            pieces = counter.split(word, size) if size > counter.budget else [(word, size)]
            for index, (piece, piece_size) in enumerate(pieces):
                self.texts.append(piece)
                self.separators.append(separator if index == 0 else "")
                self.levels.append(level if index == 0 else _INSIDE_WORD)
                sizes.append(piece_size)
        self.levels.append(_END)  # the gap after the last word
        self.tokens = list(accumulate(sizes, initial=0))  # tokens[j]: estimate of words[:j]

    def chunks(self, min_tokens: int, overlap_tokens: int) -> Iterator[tuple[str, int]]:
        counter, end = self.counter, len(self.texts)
        start = fresh = 0  # the chunk's first word, and its first word not in the overlap
        while fresh < end:
            budget = counter.budget
            while True:
                start, cut = self._cut(start, fresh, budget, min_tokens - counter.overhead)
                content = self._join(start, cut)
                tokens = counter.count(content)
                # A lone word fits by construction (or cannot be helped, if max_tokens is tiny).
                if tokens <= counter.max_tokens or cut == start + 1:
                    break
                budget -= tokens - counter.max_tokens  # the estimate was low: ask for less
            yield content, tokens
            start, fresh = self._overlap(start, cut, overlap_tokens), cut

    def _cut(self, start: int, fresh: int, budget: int, least: int) -> tuple[int, int]:
        """Where the chunk from `start` ends (exclusive), and its start if overlap had to go."""
        tokens, end = self.tokens, len(self.texts)
        while start < fresh and tokens[fresh + 1] - tokens[start] > budget:
            start += 1  # no room for the next new word: drop overlap rather than stall
        most = max(fresh + 1, bisect_right(tokens, tokens[start] + budget) - 1)
        window = range(max(fresh + 1, bisect_left(tokens, tokens[start] + least)), most + 1)

        def leaves_enough(cut: int) -> bool:
            # What follows the cut makes a chunk of its own, not a tiny tail.
            return tokens[end] - tokens[cut] >= least

        for cut in window:
            if self.levels[cut] == _HEADING and leaves_enough(cut):
                return start, cut
        if most == end:
            return start, end
        candidates = [cut for cut in window if leaves_enough(cut)] or window or [most]
        return start, max(candidates, key=lambda cut: (self.levels[cut], cut))

    def _overlap(self, start: int, cut: int, overlap_tokens: int) -> int:
        """Where the next chunk starts: the end of this one, whole sentences or lines if they
        carry at least half the overlap asked for, else as many words as fit."""
        tokens = self.tokens
        if overlap_tokens == 0:
            return cut
        words = bisect_left(tokens, tokens[cut] - overlap_tokens, start, cut)
        fair = [j for j in range(words, cut) if 2 * (tokens[cut] - tokens[j]) >= overlap_tokens]
        best = max(fair, key=lambda j: (self.levels[j], -j), default=words)
        return best if self.levels[best] >= _LINE else words

    def _join(self, start: int, cut: int) -> str:
        rest = zip(self.separators[start + 1 : cut], self.texts[start + 1 : cut], strict=True)
        return self.texts[start] + "".join(separator + text for separator, text in rest)
