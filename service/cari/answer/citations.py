"""Numbered sources, the answer prompt, and citation markers checked as the answer streams.

The sources of an answer are numbered [1]..[n] in the order given. A citation marker is a
bracket of source numbers: `[2]`, several numbers `[1, 3]` (`[1,3]`), a range `[1-3]` (also
with an en dash), and mixes `[1, 3-4]`; adjacent markers `[1][3]` are simply two markers.
Numbers have at most 3 digits and a marker at most 40 characters; other brackets are text.
`CitationFilter` removes the numbers that name no source: a marker left with no real number
goes, with the space before it; one left with some is rewritten with those (`[2, 9]` -> `[2]`).
"""

from __future__ import annotations

import html
import itertools
import re
from collections.abc import Sequence
from typing import Literal

from cari.schema.answer import Citation
from cari.schema.search import SearchResult

Language = Literal["id", "en"]

# A collection's text-search configuration, where it names one of the answer's languages.
COLLECTION_LANGUAGES: dict[str, Language] = {"indonesian": "id", "english": "en"}

NO_INFORMATION: dict[Language, str] = {
    "id": "Maaf, saya tidak memiliki informasi tersebut.",
    "en": "Sorry, I don't have that information.",
}

# Words frequent in one language's questions and absent from the other's; no word is in both.
INDONESIAN_WORDS = (
    "yang", "dan", "di", "ke", "dari", "apa", "apakah", "berapa", "bagaimana", "gimana", "kapan",
    "siapa", "mengapa", "kenapa", "dimana", "mana", "adalah", "ialah", "merupakan", "ini", "itu",
    "untuk", "dengan", "tidak", "tak", "bukan", "ada", "saya", "aku", "kami", "kita", "anda",
    "kamu", "bisa", "dapat", "akan", "sudah", "telah", "belum", "juga", "atau", "pada", "dalam",
    "oleh", "karena", "jika", "kalau", "bagi", "tentang", "seperti", "lebih", "harus", "boleh",
    "punya", "ya", "sih", "dong", "tolong", "mohon", "saja", "secara", "sebagai", "agar",
    "supaya", "hanya", "masih", "sangat",
)  # fmt: skip
ENGLISH_WORDS = (
    "the", "a", "an", "what", "which", "who", "whom", "whose", "when", "where", "why", "how",
    "is", "are", "was", "were", "be", "been", "am", "do", "does", "did", "can", "could", "will",
    "would", "should", "shall", "may", "might", "must", "of", "to", "in", "on", "at", "for",
    "with", "by", "from", "about", "and", "or", "not", "this", "that", "these", "those", "it",
    "its", "my", "your", "our", "their", "i", "you", "we", "they", "he", "she", "me", "us",
    "them", "have", "has", "had", "there", "much", "many", "any", "some", "please", "tell", "if",
    "than", "then", "so", "as", "into", "also", "only", "very",
)  # fmt: skip
FUNCTION_WORDS: dict[Language, frozenset[str]] = {
    "id": frozenset(INDONESIAN_WORDS),
    "en": frozenset(ENGLISH_WORDS),
}

_ITEM = r"[0-9]{1,3}(?: *[-\u2013] *[0-9]{1,3})?"  # a number or a range
MARKER = re.compile(rf"\[ *({_ITEM}(?: *, *{_ITEM})*) *\]")
_MARKER_MAX = 40
_PARTIAL = re.compile(r"\[[0-9 ,\-\u2013]*\Z")  # what a marker looks like before its "]" arrives
_CLOSING = frozenset(".,;:!?)]}…")
_LETTERS = re.compile(r"[^\W\d_]+")
_SNIPPET = 200

_LANGUAGE_NAMES: dict[Language, str] = {"id": "Indonesian (Bahasa Indonesia)", "en": "English"}
_LABELS: dict[Language, tuple[str, str, str]] = {
    "id": ("Sumber", "(tidak ada)", "Pertanyaan"),
    "en": ("Sources", "(none)", "Question"),
}


def detect_language(text: str, tie: Language = "id") -> Language:
    """Indonesian or English, by the function words each holds outside names; `tie` (the
    collection's language) when they hold as many.

    A run of two or more capitalised words is a name or a title ("The Greatest Showman",
    "Honda Civic", "The Lord of the Rings"): its words say nothing of the question's language.
    An Indonesian function word takes the particles -kah and -lah ("berapakah", "siapakah"),
    and "-nya" (harganya, spesifikasinya) marks Indonesian even in a question of content
    words."""
    words = [w.lower() for w in _outside_names(_LETTERS.findall(text))]
    indonesian = sum(
        w in FUNCTION_WORDS["id"]
        or (len(w) > 5 and w.endswith("nya"))
        or (w.endswith(("kah", "lah")) and w[:-3] in FUNCTION_WORDS["id"])
        for w in words
    )
    english = sum(w in FUNCTION_WORDS["en"] for w in words)
    if english == indonesian:
        return tie
    return "en" if english > indonesian else "id"


# Small words inside a title or a name between its capitalised ones ("The Lord of the Rings").
_NAME_JOINS = frozenset(("of", "the", "a", "an", "and", "in", "on", "at", "to", "for", "dan"))


def _outside_names(words: Sequence[str]) -> list[str]:
    """`words` less those of names: runs of two or more capitalised words, with the small words
    of `_NAME_JOINS` between them."""
    capitals = [i for i, w in enumerate(words) if w[0].isupper()]
    named: set[int] = set()
    for a, b in itertools.pairwise(capitals):
        if all(words[i].lower() in _NAME_JOINS for i in range(a + 1, b)):
            named.update(range(a, b + 1))
    return [w for i, w in enumerate(words) if i not in named]


def citation(number: int, result: SearchResult) -> Citation:
    source = result.source if result.source is not None else result.metadata.get("source")
    return Citation(
        number=number,
        id=result.id,
        kind=result.kind,
        document_id=result.document_id,
        chunk_id=result.chunk_id,
        title=result.title,
        source=None if source is None else str(source),
        snippet=result.highlight or html.escape(_snippet(result.content)),
        relevance=round(result.relevance, 4),
        band=result.band,
    )


def system_prompt(language: Language) -> str:
    return f"""You answer questions using only the numbered sources given with the question.

- Answer in {_LANGUAGE_NAMES[language]}, the language of the question.
- Use only what the sources state. Add no outside knowledge, and do not guess.
- Cite every claim with the number of its source in square brackets right after it, like [1];
  a claim from several sources gets each number, like [1][3]. Cite only numbers that exist.
- Give prices, numbers, names and units exactly as the sources write them.
- When the sources do not answer the question, reply only: {NO_INFORMATION[language]}
  When they answer part of it, answer that part and say what they do not say.
- Be concise and direct."""


def build_messages(
    question: str, sources: Sequence[SearchResult], language: Language
) -> list[dict[str, str]]:
    """The system prompt, then one user message: the numbered sources and the question."""
    heading, none, asked = _LABELS[language]
    blocks = [
        f"[{number}] {result.title}".rstrip() + f"\n{result.content.strip()}"
        for number, result in enumerate(sources, 1)
    ]
    listed = "\n\n".join(blocks) if blocks else none
    return [
        {"role": "system", "content": system_prompt(language)},
        {"role": "user", "content": f"{heading}:\n\n{listed}\n\n{asked}: {question.strip()}"},
    ]


class CitationFilter:
    """Removes citation numbers that name no source from an answer as it streams.

    `feed` takes each piece of text as it arrives and returns what can be shown; `flush` the
    rest at the end. The pieces joined are the same whatever the cuts: a marker split across
    pieces ("[1", "2]") is held until complete, and so is whitespace, which may precede a
    marker that goes. A removed marker takes the whitespace around it with it, keeping one
    space between words, none before punctuation or at the start, and line breaks as they are.
    """

    def __init__(self, valid: int) -> None:
        self.valid = valid  # sources 1..valid exist
        self._held = ""
        self._gap: tuple[str, str] | None = None  # whitespace before/after removed markers
        self._started = False  # anything but whitespace emitted yet
        self._cited: dict[int, None] = {}
        self._invented: dict[int, None] = {}

    @property
    def cited(self) -> list[int]:
        """The real source numbers cited, in first-use order, each once."""
        return list(self._cited)

    @property
    def invented(self) -> list[int]:
        """The numbers removed, in first-use order, each once."""
        return list(self._invented)

    def feed(self, piece: str) -> str:
        self._held += piece
        return self._run(final=False)

    def flush(self) -> str:
        return self._run(final=True)

    def _run(self, *, final: bool) -> str:
        text, out, i = self._held, [], 0
        while i < len(text):
            if self._gap is not None:
                before, after = self._gap
                j = _whitespace_end(text, i)
                after += text[i:j]
                self._gap, i = (before, after), j
                if i == len(text):
                    break
                if text[i] == "[":  # a marker kept is looked at again below: counted once
                    found = self._marker(text, i, final)
                    if found is None:
                        break
                    end, kept = found
                    if not kept:  # another marker that goes
                        self._gap, i = (before + after, ""), end
                        continue
                out.append(self._close_gap(text[i]))
                continue
            start = text.find("[", i)
            if start == -1:
                end = len(text) if final else _whitespace_start(text, i, len(text))
                out.append(self._emit(text[i:end]))
                i = end
                break
            space = _whitespace_start(text, i, start)
            out.append(self._emit(text[i:space]))
            found = self._marker(text, start, final)
            if found is None:
                i = space
                break
            end, kept = found
            if end == start + 1:  # not a marker: the "[" is text
                out.append(self._emit(text[space:end]))
            elif kept:
                out.append(self._emit(text[space:start] + kept))
            else:
                self._gap = text[space:start], ""
            i = end
        self._held = text[i:]  # all of it used when final: nothing waits for more
        if final and self._gap is not None:
            out.append(self._close_gap(None))
        return "".join(out)

    def _marker(self, text: str, start: int, final: bool) -> tuple[int, str] | None:
        """At a "[": where the marker ends and what remains of it ("" when it all goes), or
        None when it may be a marker not yet complete. Not a marker: (start + 1, "[")."""
        match = MARKER.match(text, start)
        if match is not None and match.end() - start <= _MARKER_MAX:
            numbers = _numbers(match)
            real = [n for n in numbers if 1 <= n <= self.valid]
            self._cited.update(dict.fromkeys(real))
            self._invented.update(dict.fromkeys(n for n in numbers if n not in real))
            if len(real) == len(numbers):
                return match.end(), match.group()
            return match.end(), f"[{', '.join(map(str, dict.fromkeys(real)))}]" if real else ""
        if not final and len(text) - start < _MARKER_MAX and _PARTIAL.match(text, start):
            return None
        return start + 1, "["

    def _close_gap(self, following: str | None) -> str:
        """The whitespace that stands in for removed markers, given the character after."""
        assert self._gap is not None
        before, after = self._gap
        self._gap = None
        if not self._started or (following is not None and following in _CLOSING):
            return ""
        if "\n" in after:
            return after[after.index("\n") :]
        if "\n" in before:
            return before[before.index("\n") :]
        return " " if following is not None and (before or after) else ""

    def _emit(self, text: str) -> str:
        if not self._started and text and not text.isspace():
            self._started = True
        return text


def _numbers(match: re.Match[str]) -> list[int]:
    numbers: list[int] = []
    for item in match.group(1).split(","):
        ends = [int(n) for n in re.split("[-\u2013]", item)]
        low, high = min(ends), max(ends)
        numbers += range(low, high + 1)
    return numbers


def _snippet(content: str) -> str:
    text = " ".join(content.split())
    if len(text) <= _SNIPPET:
        return text
    cut = text[:_SNIPPET]
    space = cut.rfind(" ")
    return (cut[:space] if space > _SNIPPET * 3 // 4 else cut) + "…"


def _whitespace_end(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _whitespace_start(text: str, low: int, i: int) -> int:
    """Where the whitespace that ends at `i` begins (not before `low`)."""
    while i > low and text[i - 1].isspace():
        i -= 1
    return i
