"""Where a sentence ends, in Indonesian and English: the one rule of the chunker (which prefers
to cut chunks there, `cari.ingest.chunking`) and of the extractive answer (which quotes whole
sentences, `cari.answer.extractive`).

A word ends a sentence when it ends in "!", "?", "…" or "。", or in a "." that closes neither an
abbreviation of either language ("Dr.", "No.", "Rp.", "Jl.", "dll.", "e.g.") nor initials
("J.", "S.H.", "U.S."); quotes, brackets and Wikipedia-style citation marks after it
("lanjut.[2]") aside. A decimal ("1.5 liter", "Rp 1.500.000") has no space after its dot, so it
is one word and ends nothing. The next word's case is not asked: lower-case text (Cranfield's
abstracts, chat messages) and a sentence begun in lower case are cut too. Measured against the
two rules it replaced and against the sentencex and pySBD libraries on sampled TyDi QA and
Cranfield paragraphs: docs/pipeline.md, "Sentences".
"""

from __future__ import annotations

import re

_INITIALS = re.compile(r"(?:[^\W\d_]\.)*[^\W\d_]")  # "e.g", "U.S", "J"
_CITATIONS = re.compile(r"(?:\[[^\]\s]{1,8}\])+$")  # "[2]", "[1][3]", "[n 1]" has a space: kept
# Words whose period does not end a sentence: English, then Indonesian. Not "etc." or "dll.":
# they end sentences as often as not.
ABBREVIATIONS = frozenset(
    {
        *("mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "no", "nos", "nr", "vs"),
        *("fig", "figs", "eq", "approx", "al", "inc", "ltd", "co", "corp", "dept", "vol", "pp"),
        *("ed", "tel", "e.g", "i.e", "cf", "resp", "ca", "jan", "feb", "mar", "apr"),
        *("jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"),
        *("rp", "bpk", "sdr", "sdri", "yth", "hlm", "jl", "jln", "kab", "kec", "kel", "prov"),
        *("tgl", "telp", "drs", "dra", "ir", "hj", "dkk", "ny", "tn", "pt", "cv", "a.n", "s.d"),
        "u.p",
    }
)
_OPENERS = "\"'([{\u00ab\u201c\u2018"  # quotes and brackets around a word
_CLOSERS = "\"')]}\u00bb\u201d\u2019"


def ends_sentence(word: str) -> bool:
    """Whether `word` (no whitespace in it) is the last of its sentence."""
    core = (_CITATIONS.sub("", word) if word.endswith("]") else word).rstrip(_CLOSERS)
    if core.endswith(("!", "?", "…", "。")):
        return True
    if not core.endswith("."):
        return False
    stem = core[:-1].lstrip(_OPENERS)
    return not (stem.lower() in ABBREVIATIONS or _INITIALS.fullmatch(stem))


def split(text: str) -> list[str]:
    """The sentences of `text`, each its words joined by single spaces."""
    sentences: list[str] = []
    words: list[str] = []
    for word in text.split():
        words.append(word)
        if ends_sentence(word):
            sentences.append(" ".join(words))
            words = []
    if words:
        sentences.append(" ".join(words))
    return sentences
