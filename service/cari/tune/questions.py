"""Files of questions and of judgements, for `cari eval` and `cari tune`.

Questions come as BEIR's `queries.jsonl` (`{"_id", "text"}` a line), as JSON Lines of
`{"query", "relevant", "id"?}` (`relevant`: document ids, or an object of id: grade), or as
plain text, one question a line. A file named `*.jsonl` (or `.json`, `.ndjson`), or whose first
line that is not blank starts with `{`, is JSON Lines. Judgements come from BEIR's
`qrels/*.tsv` (`query-id corpus-id score`, tab-separated, a header line allowed) or from the
JSON Lines' own `relevant`. Any fault is a QuestionFileError naming the file and the line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cari.errors import QuestionFileError

QRELS_HEADER = ("query-id", "corpus-id", "score")
JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    text: str


@dataclass(frozen=True, slots=True)
class Judged(Question):
    """A question and its relevant documents: external id -> grade, each grade above 0."""

    relevant: dict[str, int]


@dataclass(frozen=True, slots=True)
class _Line:
    """A question as its file gives it: `relevant` None where the line judges nothing."""

    number: int
    question: Question
    relevant: dict[str, int] | None


def read_questions(path: Path) -> list[Question]:
    """The questions of `path`, in its order."""
    return [line.question for line in _read(path)]


def read_judged(questions: Path, qrels: Path | None) -> list[Judged]:
    """The questions of `questions` that have at least one relevant document, in the file's
    order, judged by `qrels` or, without it, by each line's `relevant`."""
    lines = _read(questions)
    if qrels is None:
        grades = {line.question.id: line.relevant or {} for line in lines}
        if all(line.relevant is None for line in lines):
            raise QuestionFileError(
                f"{questions}: no line says what is relevant: give the judgements (--qrels), "
                'or a "relevant" list on each line'
            )
    else:
        grades = _read_qrels(qrels, questions, {line.question.id for line in lines})
    judged = []
    for line in lines:
        relevant = {doc: g for doc, g in grades.get(line.question.id, {}).items() if g > 0}
        if relevant:
            judged.append(Judged(line.question.id, line.question.text, relevant))
    if not judged:
        raise QuestionFileError(
            f"{questions}: no question has a relevant document (a grade above 0)"
        )
    return judged


def _read(path: Path) -> list[_Line]:
    lines: list[_Line] = []
    seen: dict[str, int] = {}  # id -> its line
    rows = _text_lines(path)
    first = next((text for _, text in rows if text.strip()), None)
    if first is None:
        raise QuestionFileError(f"{path}: the file holds no question")
    as_json = path.suffix.lower() in JSON_SUFFIXES or first.lstrip().startswith("{")
    for number, text in rows:
        if not text.strip():
            continue
        line = (
            _json_line(path, number, text)
            if as_json
            else _Line(number, Question(str(number), text.strip()), None)
        )
        if (earlier := seen.setdefault(line.question.id, number)) != number:
            raise QuestionFileError(
                f"{path}, line {number}: id {line.question.id!r} again (first on line {earlier})"
            )
        lines.append(line)
    return lines


def _text_lines(path: Path) -> list[tuple[int, str]]:
    """The file's lines, numbered from 1."""
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise QuestionFileError(f"{path}: {exc.strerror or exc}") from None
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = content[: exc.start].count(b"\n") + 1
        raise QuestionFileError(f"{path}, line {line}: not UTF-8 text") from None
    return list(enumerate(text.splitlines(), 1))


def _json_line(path: Path, number: int, text: str) -> _Line:
    where = f"{path}, line {number}"
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise QuestionFileError(f"{where}: not JSON ({exc.msg})") from None
    if not isinstance(record, dict):
        raise QuestionFileError(f"{where}: not a JSON object")
    if "query" in record:  # {"query", "relevant", "id"?}
        question = Question(
            _id(where, record.get("id", str(number))), _text(where, record, "query")
        )
        return _Line(number, question, _relevant(where, record.get("relevant")))
    if "_id" in record or "text" in record:  # BEIR's queries.jsonl
        if "_id" not in record:
            raise QuestionFileError(f'{where}: no "_id"')
        return _Line(
            number, Question(_id(where, record["_id"]), _text(where, record, "text")), None
        )
    raise QuestionFileError(f'{where}: no "query" (or BEIR\'s "_id" and "text")')


def _id(where: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int) or str(value) == "":
        raise QuestionFileError(f"{where}: the id must be a string that is not empty")
    return str(value)


def _text(where: str, record: dict[str, Any], field: str) -> str:
    value = record.get(field)
    if not isinstance(value, str) or not value.strip():
        raise QuestionFileError(f'{where}: "{field}" must be a question, text that is not empty')
    return value.strip()


def _relevant(where: str, value: Any) -> dict[str, int] | None:
    """A line's judgements: a list of ids (grade 1 each) or an object of id: grade."""
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(doc, str) for doc in value):
        return dict.fromkeys(value, 1)
    if isinstance(value, dict) and all(
        isinstance(grade, int) and not isinstance(grade, bool) for grade in value.values()
    ):
        return dict(value)
    raise QuestionFileError(
        f'{where}: "relevant" must be a list of document ids or an object of id: grade (an integer)'
    )


def _read_qrels(path: Path, questions: Path, ids: set[str]) -> dict[str, dict[str, int]]:
    """BEIR's judgements of the questions in `ids`: question -> document -> grade (lines about
    other questions are skipped, as a split's qrels judge some of the queries)."""
    grades: dict[str, dict[str, int]] = {}
    lines = [(number, text) for number, text in _text_lines(path) if text.strip()]
    other: tuple[int, str] | None = None  # the first line about another question
    for number, text in lines:
        fields = text.split("\t")
        if len(fields) != 3:
            raise QuestionFileError(
                f"{path}, line {number}: {len(fields)} tab-separated fields, not 3 "
                "(query-id, corpus-id, score)"
            )
        if number == lines[0][0] and tuple(f.strip() for f in fields) == QRELS_HEADER:
            continue
        query, document, score = (f.strip() for f in fields)
        try:
            grade = int(score)
        except ValueError:
            raise QuestionFileError(
                f"{path}, line {number}: the score {score!r} is not an integer"
            ) from None
        if query not in ids:
            other = other or (number, query)
            continue
        grades.setdefault(query, {})[document] = grade
    if not grades and other is None:
        raise QuestionFileError(f"{path}: the file holds no judgement")
    if not grades:
        number, query = other or (0, "")
        raise QuestionFileError(
            f"{path}: names none of the questions of {questions} (line {number} names {query!r})"
        )
    return grades
