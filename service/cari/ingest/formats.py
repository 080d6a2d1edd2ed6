"""Uploaded bytes turned into documents: plain text, Markdown, HTML, JSON Lines and PDF."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import PurePath
from typing import Any

from pypdf import PdfReader

from cari.errors import InvalidInput
from cari.limits import LANGUAGE_NAME_PATTERN

FORMATS: tuple[str, ...] = ("text", "markdown", "html", "jsonl", "pdf")
_MAX_ID_LENGTH = 512

_EXTENSIONS = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".pdf": "pdf",
}


@dataclass(frozen=True, slots=True)
class Section:
    """A stretch of text chunked on its own, such as one PDF page."""

    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    id: str | None  # None unless a JSON Lines record names it: the caller derives one
    title: str  # "" when the content has none: the caller may use the file name
    sections: list[Section]
    metadata: dict[str, Any]
    source: str | None  # parse()'s name; for JSON Lines the record's own "source", if any
    language: str | None = None  # a JSON Lines record's own text-search configuration


@dataclass(frozen=True, slots=True)
class Rejected:
    """A JSON Lines record that cannot become a document; the others still do."""

    where: str
    id: str | None
    reason: str


def detect_format(name: str) -> str:
    """The format of a file, from its extension."""
    extension = PurePath(name).suffix.lower()
    if extension not in _EXTENSIONS:
        supported = ", ".join(_EXTENSIONS)
        raise InvalidInput(
            "format", f"cannot tell the format of '{name}'; supported extensions: {supported}"
        )
    return _EXTENSIONS[extension]


def parse(data: bytes, fmt: str, *, name: str) -> Iterator[ParsedDocument | Rejected]:
    """The documents in `data`, which came from the file or upload called `name`.

    Problems with the whole input (encoding, no text, unreadable PDF) raise InvalidInput at
    once; a bad JSON Lines record comes out as Rejected and the records after it still parse.
    """
    if fmt not in FORMATS:
        raise InvalidInput("format", f"must be one of {', '.join(FORMATS)}")
    if fmt == "pdf":
        return iter([_pdf(data, name)])
    if fmt == "jsonl":
        return parse_jsonl(io.BytesIO(data))
    text = _decode(data)
    if fmt == "markdown":
        body = _HTML_COMMENT.sub("", text)
        title = _markdown_title(body)
    elif fmt == "html":
        title, body = _html(text)
    else:
        title, body = "", text
    body = _clean(body)
    if not body:
        raise InvalidInput("content", "is empty")
    return iter([ParsedDocument(None, title, [Section(body)], {}, name)])


def _decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            "content", f"not valid UTF-8 ({exc.reason} at byte {exc.start})"
        ) from exc
    return text.removeprefix("\ufeff")


def _clean(text: str) -> str:
    # PostgreSQL text cannot hold NUL; one line ending keeps later splitting simple.
    return text.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n").strip()


def _one_line(text: str) -> str:
    return " ".join(text.replace("\x00", "").split())


# -- Markdown ----------------------------------------------------------------------------------

_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_FENCE = re.compile(r" {0,3}(?:```|~~~)")
_H1 = re.compile(r" {0,3}#[ \t]+(\S.*?)(?:[ \t]+#+)?[ \t]*$")


def _markdown_title(text: str) -> str:
    in_fence = False  # a '# comment' in a shell example is not a heading
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (heading := _H1.match(line)):
            return _one_line(heading[1])
    return ""


# -- HTML --------------------------------------------------------------------------------------

_INVISIBLE = frozenset({"script", "style", "noscript", "template"})
_BLOCKS = frozenset(
    {
        *(f"h{level}" for level in range(1, 7)),
        *("address", "article", "aside", "blockquote", "details", "div", "dl", "fieldset"),
        *("figcaption", "figure", "footer", "form", "header", "hr", "main", "nav", "ol", "p"),
        *("pre", "section", "summary", "table", "ul"),
    }
)
# What an element puts before its content; a block also closes its paragraph at the end.
_BREAKS = {
    **dict.fromkeys(_BLOCKS, "\n\n"),
    **dict.fromkeys(("br", "dd", "dt", "li", "tr"), "\n"),
    **dict.fromkeys(("td", "th"), " "),
}


class _HtmlText(HTMLParser):
    """The visible text of a page, blocks as paragraphs; entities unescaped by the base class."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.body: list[str] = []
        self.title: list[str] = []
        self.h1: list[str] = []
        self._hidden = 0  # depth inside elements whose content is not text
        self._pre = 0
        self._in: str | None = None  # "title" or "h1" while collecting one

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _INVISIBLE:
            self._hidden += 1
        elif tag == "pre":
            self._pre += 1
        if tag == "title" or (tag == "h1" and not self.h1):
            self._in = tag
        if tag in _BREAKS:
            self.body.append(_BREAKS[tag])

    def handle_endtag(self, tag: str) -> None:
        if tag in _INVISIBLE:
            self._hidden = max(0, self._hidden - 1)
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
        if tag == self._in:
            self._in = None
        if tag in _BLOCKS:
            self.body.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._hidden:
            return
        if self._in == "title":
            self.title.append(data)
            return
        if self._in == "h1":
            self.h1.append(data)
        # Outside <pre>, a newline in the source is just a space.
        self.body.append(data if self._pre else re.sub(r"\s+", " ", data))


def _html(text: str) -> tuple[str, str]:
    """The title (from <title>, else the first <h1>) and the text of a page."""
    parser = _HtmlText()
    parser.feed(text)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.body).split("\n"))
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines))
    return _one_line("".join(parser.title)) or _one_line("".join(parser.h1)), body


# -- JSON Lines --------------------------------------------------------------------------------


def parse_jsonl(lines: Iterable[bytes]) -> Iterator[ParsedDocument | Rejected]:
    """JSON Lines one line at a time (a file or a pipe of any size streams through); a line
    that is not valid UTF-8 is rejected like any other bad record."""
    # Binary lines split on b"\n" only: U+2028 inside a JSON string is not a line end.
    for number, raw in enumerate(lines, 1):
        where = f"line {number}"
        try:
            line = (raw.removeprefix(b"\xef\xbb\xbf") if number == 1 else raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            yield Rejected(
                where, None, f"content: not valid UTF-8 ({exc.reason} at byte {exc.start})"
            )
            continue
        if line.strip():
            yield _record(line, where)


def _record(line: str, where: str) -> ParsedDocument | Rejected:
    document_id = None
    try:
        record = _json_object(line)
        document_id = _record_id(record)
        return ParsedDocument(
            id=document_id,
            title=_one_line(_optional_string(record, "title")),
            sections=[Section(_record_text(record))],
            metadata=_record_metadata(record),
            source=_optional_string(record, "source") or None,
            language=_record_language(record),
        )
    except InvalidInput as exc:
        return Rejected(where, document_id, exc.message)


def _json_object(line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        # Some of Python's messages end in "at" ("Invalid control character at").
        reason = f"{exc.msg.removesuffix(' at')} at column {exc.colno}"
        if exc.msg.startswith("Invalid control character"):
            reason += r": write a tab or line break inside a string as \t or \n"
        raise InvalidInput("record", f"not valid JSON ({reason})") from exc
    except RecursionError as exc:
        raise InvalidInput("record", "nested too deeply") from exc
    if not isinstance(record, dict):
        raise InvalidInput("record", "must be a JSON object")
    try:  # json.loads accepts both; PostgreSQL stores neither
        json.dumps(record, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except ValueError as exc:
        raise InvalidInput(
            "record", "holds NaN, Infinity or invalid Unicode (a lone surrogate)"
        ) from exc
    return record


def _record_id(record: dict[str, Any]) -> str:
    value = record.get("id")
    if value is None:
        raise InvalidInput("id", "is required")
    # bool is an int to Python, but `true` is no identifier.
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidInput("id", "must be a string or an integer")
    document_id = str(value)
    if not document_id.strip():
        raise InvalidInput("id", "must not be empty")
    if len(document_id) > _MAX_ID_LENGTH:
        raise InvalidInput("id", f"must be at most {_MAX_ID_LENGTH} characters")
    return document_id


def _optional_string(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(key, "must be a string")
    return value


def _record_text(record: dict[str, Any]) -> str:
    key = "text" if record.get("text") is not None else "content"
    if record.get(key) is None:
        raise InvalidInput("text", "is required (or content)")
    text = _clean(_optional_string(record, key))
    if not text:
        raise InvalidInput(key, "must not be empty")
    return text


LANGUAGE_NAME = re.compile(LANGUAGE_NAME_PATTERN)


def _record_language(record: dict[str, Any]) -> str | None:
    language = _optional_string(record, "language")
    if not language:
        return None
    if not LANGUAGE_NAME.fullmatch(language):
        raise InvalidInput("language", "must name a text-search configuration, e.g. english")
    return language


def _record_metadata(record: dict[str, Any]) -> dict[str, Any]:
    value = record.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput("metadata", "must be a JSON object")
    return value


# -- PDF ---------------------------------------------------------------------------------------


def _pdf(data: bytes, name: str) -> ParsedDocument:
    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() for page in reader.pages]
        info = reader.metadata
        title = _one_line(info.title or "") if info is not None else ""
    except Exception as exc:  # pypdf reports damaged files with many exception types
        raise InvalidInput("content", f"not a readable PDF: {exc}") from exc
    sections = [
        Section(text, {"page": number})
        for number, page in enumerate(pages, 1)
        if (text := _clean(page))
    ]
    if not sections:
        raise InvalidInput(
            "content", "no text could be extracted from the PDF (scanned pages need OCR first)"
        )
    return ParsedDocument(None, title, sections, {}, name)
