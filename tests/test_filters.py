from collections.abc import Callable
from typing import Any, LiteralString

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from cari.errors import InvalidInput
from cari.search.filters import compile_filters

Conn = psycopg.Connection[tuple[object, ...]]
Filters = dict[str, Any]
Match = Callable[[Filters], set[str]]
HOSTILE = "'; DROP TABLE chunks; --"
WEIRD = 'weird "key".x'

# label: (document external id, metadata)
ROWS: dict[str, tuple[str, dict[str, Any]]] = {
    "civic": (
        "d1",
        {
            "lang": "id",
            "brand": "honda",
            "year": 2021,
            "published": "2024-03-01",
            "used": False,
            "specs": {"color": "red", "doors": 4},
        },
    ),
    "jazz": (
        "d1",
        {
            "lang": "id",
            "brand": "honda",
            "year": 2019.5,
            "published": "2023-12-31",
            "used": True,
            "specs": {"color": "blue"},
        },
    ),
    "camry": (
        "d2",
        {
            "lang": "en",
            "brand": "toyota",
            "year": 2024,
            "published": "2024-01-01T08:00:00Z",
            "tags": ["sedan", "hybrid"],
            "specs": {"color": "red", "doors": 4},
        },
    ),
    "mystery": (
        "d2",
        {"lang": "en", "brand": "tesla", "year": "unknown", "published": 2024, "price": None},
    ),
    "odd": ("d3", {WEIRD: 7, "a b": "spaced", HOSTILE: "x", "year": [2020, 2022]}),
    "bare": ("d3", {}),
}


def scalar(conn: Conn, statement: LiteralString, params: list[Any] | None = None) -> Any:
    row = conn.execute(statement, params).fetchone()
    assert row is not None
    return row[0]


def setup_collection(
    conn: Conn, rows: dict[str, tuple[str, dict[str, Any]]]
) -> tuple[Any, dict[Any, str]]:
    """A collection holding `rows` as chunks: its id, and each chunk id's label."""
    cid = scalar(conn, "INSERT INTO collections (name) VALUES ('c') RETURNING id")
    # A document of the same external id elsewhere must not widen a document_ids match.
    other = scalar(conn, "INSERT INTO collections (name) VALUES ('o') RETURNING id")
    conn.execute(
        "INSERT INTO documents (collection_id, external_id, content_hash) VALUES (%s, 'd1', 'h')",
        [other],
    )
    documents: dict[str, Any] = {}
    labels = {}
    for ordinal, (label, (external_id, metadata)) in enumerate(rows.items()):
        if external_id not in documents:
            documents[external_id] = scalar(
                conn,
                "INSERT INTO documents (collection_id, external_id, content_hash)"
                " VALUES (%s, %s, 'h') RETURNING id",
                [cid, external_id],
            )
        chunk_id = scalar(
            conn,
            "INSERT INTO chunks (collection_id, document_id, ordinal, content, language, metadata)"
            " VALUES (%s, %s, %s, 'text', 'simple', %s) RETURNING id",
            [cid, documents[external_id], ordinal, Jsonb(metadata)],
        )
        labels[chunk_id] = label
    return cid, labels


def select(conn: Conn, cid: Any, filters: Filters) -> list[Any]:
    fragment, params = compile_filters(filters)
    statement = sql.SQL("SELECT c.id FROM chunks c WHERE c.collection_id = %(cid)s") + fragment
    return [row[0] for row in conn.execute(statement, {**params, "cid": cid})]


@pytest.fixture
def matching(conn: Conn) -> Match:
    """Labels of the ROWS chunks that the filters select."""
    cid, labels = setup_collection(conn, ROWS)
    return lambda filters: {labels[chunk_id] for chunk_id in select(conn, cid, filters)}


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"lang": "id"}, {"civic", "jazz"}),
        ({"year": 2021}, {"civic"}),
        ({"year": 2021.0}, {"civic"}),
        ({"year": 2019.5}, {"jazz"}),
        ({"used": False}, {"civic"}),
        ({"used": True}, {"jazz"}),
        ({"price": None}, {"mystery"}),
        ({"specs": {"color": "red"}}, {"civic", "camry"}),
        ({"specs": {"color": "red", "doors": 4}}, {"civic", "camry"}),
        ({"tags": ["hybrid"]}, {"camry"}),
        ({"lang": "id", "brand": "honda", "used": True}, {"jazz"}),
        ({"lang": "xx"}, set()),
        ({WEIRD: 7}, {"odd"}),
        ({"a b": "spaced"}, {"odd"}),
        ({HOSTILE: "x"}, {"odd"}),
        ({"lang": HOSTILE}, set()),
    ],
)
def test_equality_is_containment(matching: Match, metadata: Filters, expected: set[str]) -> None:
    assert matching({"metadata": metadata}) == expected


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"in": ["honda", "toyota"]}, {"civic", "jazz", "camry"}),
        ({"in": ["tesla"]}, {"mystery"}),
        ({"in": ["bmw", HOSTILE]}, set()),
    ],
)
def test_in_matches_any_value(matching: Match, condition: Filters, expected: set[str]) -> None:
    assert matching({"metadata": {"brand": condition}}) == expected


def test_in_matches_numbers_objects_and_null(matching: Match) -> None:
    assert matching({"metadata": {"year": {"in": [2021, 2024]}}}) == {"civic", "camry"}
    assert matching({"metadata": {"specs": {"in": [{"color": "blue"}, {"doors": 4}]}}}) == {
        "civic",
        "jazz",
        "camry",
    }
    assert matching({"metadata": {"price": {"in": [None, 1]}}}) == {"mystery"}


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"gte": 2020}, {"civic", "camry", "odd"}),  # odd: any element of an array
        ({"lte": 2020}, {"jazz", "odd"}),
        ({"gte": 2020, "lte": 2022}, {"civic", "odd"}),
        ({"gte": 2019.5, "lte": 2019.5}, {"jazz"}),
        ({"gte": 2030}, set()),
        # A string bound compares strings only: "unknown" sorts after "2", numbers never match.
        ({"gte": "2"}, {"mystery"}),
    ],
)
def test_numeric_ranges_skip_values_of_other_types(
    matching: Match, condition: Filters, expected: set[str]
) -> None:
    assert matching({"metadata": {"year": condition}}) == expected


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"gte": "2024-01-01"}, {"civic", "camry"}),
        ({"lte": "2024-01-01"}, {"jazz"}),
        ({"gte": "2024-01-01", "lte": "2024-01-31"}, {"camry"}),
        ({"gte": "2023-12-31", "lte": "2023-12-31"}, {"jazz"}),
        ({"gte": 2000}, {"mystery"}),  # the one row whose `published` is a number
    ],
)
def test_iso_date_ranges_compare_strings(
    matching: Match, condition: Filters, expected: set[str]
) -> None:
    assert matching({"metadata": {"published": condition}}) == expected


def test_ranges_on_quoted_keys(matching: Match) -> None:
    assert matching({"metadata": {WEIRD: {"gte": 7, "lte": 7}}}) == {"odd"}
    assert matching({"metadata": {"a b": {"gte": "s"}}}) == {"odd"}
    assert matching({"metadata": {HOSTILE: {"gte": ""}}}) == {"odd"}
    assert matching({"metadata": {"missing": {"gte": 0}}}) == set()


def test_document_ids_match_within_the_collection(matching: Match) -> None:
    assert matching({"document_ids": ["d1"]}) == {"civic", "jazz"}
    assert matching({"document_ids": ["d2", "d3", "nope"]}) == {"camry", "mystery", "odd", "bare"}
    assert matching({"document_ids": [HOSTILE]}) == set()


def test_filters_combine_with_and(matching: Match) -> None:
    filters = {
        "metadata": {
            "brand": {"in": ["honda", "toyota"]},
            "year": {"gte": 2020, "lte": 2024},
            "published": {"gte": "2024-01-01"},
            "specs": {"color": "red"},
        },
        "document_ids": ["d1", "d2"],
    }
    assert matching(filters) == {"civic", "camry"}
    assert matching({**filters, "document_ids": ["d2"]}) == {"camry"}
    assert matching({"metadata": {"lang": "id", "year": {"gte": 2020}}}) == {"civic"}


def test_no_filters_match_everything(matching: Match) -> None:
    assert matching({}) == set(ROWS)
    assert matching({"metadata": {}}) == set(ROWS)


def test_hostile_input_is_only_ever_data(conn: Conn, matching: Match) -> None:
    filters = {
        "metadata": {
            HOSTILE: {"in": [HOSTILE]},
            f"{HOSTILE}2": {"gte": HOSTILE},
            'x" ? (true) || $."y': {"gte": 0},
            "lang": HOSTILE,
        },
        "document_ids": [HOSTILE],
    }
    fragment, _ = compile_filters(filters)
    assert "DROP" not in fragment.as_string()
    assert matching(filters) == set()
    assert scalar(conn, "SELECT count(*) FROM chunks") == len(ROWS)


@pytest.mark.parametrize(
    "key", [WEIRD, "a.b", "back\\slash", "$x", "@", "new\nline", "ünï 😀", ")] || true", "'"]
)
def test_any_key_is_quoted_in_the_jsonpath(conn: Conn, key: str) -> None:
    cid, labels = setup_collection(conn, {"hit": ("d1", {key: 5}), "miss": ("d1", {"k": 5})})
    for condition in (5, {"gte": 5}, {"lte": 5}, {"in": [5]}):
        chunk_ids = select(conn, cid, {"metadata": {key: condition}})
        assert [labels[chunk_id] for chunk_id in chunk_ids] == ["hit"]


def test_fragment_shape() -> None:
    assert compile_filters(None) == (sql.SQL(""), {})
    assert compile_filters({}) == (sql.SQL(""), {})
    assert compile_filters({"metadata": {}}) == (sql.SQL(""), {})
    fragment, params = compile_filters(
        {"metadata": {"a": 1, "b": {"in": [1]}, "c": {"gte": 1}}, "document_ids": ["d"]}
    )
    text = fragment.as_string()
    assert text.startswith(" AND ")
    assert set(params) == {"f0", "f1", "f2", "f3", "f4"}
    assert all(f"%({name})s" in text for name in params)
    assert params["f1"] == '$."c" ? (@ >= $gte)'


@pytest.mark.parametrize(
    ("filters", "field", "message"),
    [
        ([], "filters", "must be an object"),
        ({"meta": {}}, "filters.meta", "unknown filter"),
        ({"metadata": []}, "filters.metadata", "must be an object"),
        ({"metadata": {"": 1}}, "filters.metadata", "keys must be non-empty strings"),
        ({"metadata": {"k" * 201: 1}}, "filters.metadata", "at most 200 characters"),
        ({"metadata": {"year": {"gt": 1}}}, "filters.metadata.year", "unknown operator 'gt'"),
        ({"metadata": {"year": {"ne": 1}}}, "filters.metadata.year", "unknown operator 'ne'"),
        (
            {"metadata": {"year": {"gte": 1, "eq": 2}}},
            "filters.metadata.year",
            "unknown operator 'eq'",
        ),
        (
            {"metadata": {"year": {"in": [1], "gte": 1}}},
            "filters.metadata.year",
            "in cannot be combined",
        ),
        ({"metadata": {"brand": {"in": "honda"}}}, "filters.metadata.brand.in", "must be a list"),
        ({"metadata": {"brand": {"in": []}}}, "filters.metadata.brand.in", "1 to 1000 values"),
        (
            {"metadata": {"brand": {"in": list(range(1001))}}},
            "filters.metadata.brand.in",
            "1 to 1000 values",
        ),
        ({"metadata": {"year": {"gte": True}}}, "filters.metadata.year.gte", "not a boolean"),
        (
            {"metadata": {"year": {"lte": [2020]}}},
            "filters.metadata.year.lte",
            "must be a number or a string",
        ),
        ({"metadata": {"year": {"lte": None}}}, "filters.metadata.year.lte", "a number or"),
        ({"metadata": {"year": {"gte": 1, "lte": "9"}}}, "filters.metadata.year", "both"),
        ({"metadata": {"year": {"gte": float("nan")}}}, "filters.metadata.year.gte", "finite"),
        ({"metadata": {WEIRD: {"gt": 1}}}, 'filters.metadata["weird \\"key\\".x"]', "unknown"),
        ({"metadata": {"a": "x\x00"}}, "filters.metadata.a", "NUL"),
        ({"metadata": {"a\x00": 1}}, "filters.metadata", "NUL"),
        ({"metadata": {"a": {"b": {1}}}}, "filters.metadata.a", "set is not a JSON value"),
        ({"document_ids": "d1"}, "filters.document_ids", "list of non-empty strings"),
        ({"document_ids": ["d1", 2]}, "filters.document_ids", "list of non-empty strings"),
        ({"document_ids": [""]}, "filters.document_ids", "list of non-empty strings"),
        ({"document_ids": []}, "filters.document_ids", "1 to 1000"),
        ({"document_ids": ["d"] * 1001}, "filters.document_ids", "1 to 1000"),
        ({"document_ids": ["d\x00"]}, "filters.document_ids", "NUL"),
    ],
)
def test_invalid_filters_name_the_field(filters: Any, field: str, message: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        compile_filters(filters)
    assert raised.value.field == field
    assert message in raised.value.message
