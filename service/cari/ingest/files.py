"""Files, folders, globs and stdin turned into documents for bulk ingestion."""

from __future__ import annotations

import contextlib
import glob
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cari.errors import CariError, InvalidInput
from cari.ingest import formats, store
from cari.ingest.store import NewDocument

EXTENSIONS = {".txt", ".text", ".md", ".markdown", ".html", ".htm", ".jsonl", ".ndjson", ".pdf"}


@dataclass(frozen=True, slots=True)
class InputFile:
    """One input: a file (with the id its document gets) or standard input (JSON Lines)."""

    path: Path | None
    document_id: str

    @property
    def name(self) -> str:
        """The file however its path was typed: relative to the working directory when it is
        below it, else absolute, so a rerun with the path typed another way finds the same
        documents (the name is their `source`, and part of their content hash)."""
        return "-" if self.path is None else canonical(self.path)

    @property
    def size(self) -> int | None:
        return None if self.path is None else self.path.stat().st_size


@dataclass(frozen=True, slots=True)
class Failure:
    where: str
    reason: str


def canonical(path: Path | str) -> str:
    """`path` relative to the working directory if it lies below it, else absolute; `..`, `.`
    and doubled separators resolved."""
    absolute = os.path.abspath(path)
    here = os.getcwd()
    inside = os.path.commonpath([absolute, here]) == here
    return Path(os.path.relpath(absolute, here) if inside else absolute).as_posix()


def expand(arguments: Sequence[str]) -> list[InputFile]:
    """Files as given, folders recursively (known extensions), globs; '-' is stdin."""
    sources: list[InputFile] = []
    for argument in arguments:
        if argument == "-":
            sources.append(InputFile(None, "-"))
            continue
        path = Path(argument)
        if path.is_dir():
            for file in sorted(p for p in path.rglob("*") if p.is_file()):
                if file.suffix.lower() in EXTENSIONS:
                    sources.append(InputFile(file, file.relative_to(path).as_posix()))
        elif path.exists():
            sources.append(InputFile(path, canonical(path)))
        else:
            matches = sorted(glob.glob(argument, recursive=True))
            files = [Path(m) for m in matches if Path(m).is_file()]
            if not files:
                raise InvalidInput("PATH", f"'{argument}' matches no file")
            sources.extend(InputFile(f, canonical(f)) for f in files)
    return sources


def read(source: InputFile, max_bytes: int) -> Iterator[NewDocument | Failure]:
    """The documents of one source; a bad file or record becomes a Failure, not an exception."""
    try:
        with contextlib.ExitStack() as files:
            yield from _read(source, max_bytes, files)
    except CariError as exc:
        yield Failure(source.name, exc.message)
    except OSError as exc:
        yield Failure(source.name, exc.strerror or str(exc))


def _items(
    source: InputFile, max_bytes: int, files: contextlib.ExitStack
) -> tuple[str, Iterator[formats.ParsedDocument | formats.Rejected]]:
    """The format and parsed items; JSON Lines stream line by line, whatever their size."""
    if source.path is None:
        return "jsonl", formats.parse_jsonl(sys.stdin.buffer)
    fmt = formats.detect_format(source.path.name)
    if fmt == "jsonl":
        return fmt, formats.parse_jsonl(files.enter_context(source.path.open("rb")))
    if source.path.stat().st_size > max_bytes:
        raise InvalidInput("content", f"file is over the {max_bytes}-byte limit")
    return fmt, formats.parse(source.path.read_bytes(), fmt, name=source.name)


def _read(
    source: InputFile, max_bytes: int, files: contextlib.ExitStack
) -> Iterator[NewDocument | Failure]:
    fmt, items = _items(source, max_bytes, files)
    for item in items:
        if isinstance(item, formats.Rejected):
            yield Failure(f"{source.name} {item.where}", item.reason)
        elif fmt == "jsonl" and _text_size(item) > max_bytes:
            yield Failure(f"{source.name} id {item.id}", f"text: over the {max_bytes}-byte limit")
        else:
            document = _document(item, source)
            try:
                store.check_storable(document)
            except InvalidInput as exc:
                yield Failure(f"{source.name} id {item.id}", exc.message)
                continue
            yield document


def _text_size(document: formats.ParsedDocument) -> int:
    return sum(len(s.text.encode()) for s in document.sections)


def _document(parsed: formats.ParsedDocument, source: InputFile) -> NewDocument:
    fallback_title = "" if source.path is None else source.path.stem
    return NewDocument(
        external_id=parsed.id or source.document_id,
        title=parsed.title or fallback_title,
        sections=parsed.sections,
        metadata=parsed.metadata,
        source=parsed.source or (None if source.path is None else source.name),
        language=parsed.language,
    )
