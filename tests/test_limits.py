"""Request limits and choices come from one place: the HTTP structs, the CLI's options and the
search tool's schema all say the same."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import click
import msgspec
import pytest

import cari
from cari.cli import main
from cari.limits import Method, Mode, Threshold, TopK, bounds, choices
from cari.schema.answer import AnswerRequest
from cari.schema.collections import Collection
from cari.schema.search import SearchRequest
from cari.search import tool


def _option(command: str, name: str) -> click.Parameter:
    found = main.commands[command]
    return next(p for p in found.params if p.name == name)


def test_cli_options_take_the_request_types_limits() -> None:
    assert choices(Mode) == ("hybrid", "vector", "keyword")
    assert choices(Method) == ("rrf", "minmax", "zscore")
    for command in ("search", "ask"):
        top_k = _option(command, "top_k").type
        assert isinstance(top_k, click.IntRange)
        assert (top_k.min, top_k.max) == bounds(TopK) == (1, 50)
        threshold = _option(command, "threshold").type
        assert isinstance(threshold, click.FloatRange)
        assert (threshold.min, threshold.max) == bounds(Threshold) == (0, 1)
    mode, fusion = _option("search", "mode").type, _option("search", "fusion").type
    assert isinstance(mode, click.Choice) and tuple(mode.choices) == choices(Mode)
    assert isinstance(fusion, click.Choice) and tuple(fusion.choices) == choices(Method)


@pytest.mark.parametrize("request_type", [SearchRequest, AnswerRequest])
def test_the_structs_enforce_the_same_limits(request_type: type[msgspec.Struct]) -> None:
    least, greatest = bounds(TopK)
    for value in (least, greatest):
        assert msgspec.convert({"query": "q", "top_k": value}, request_type)
    for value in (least - 1, greatest + 1):
        with pytest.raises(msgspec.ValidationError, match="top_k"):
            msgspec.convert({"query": "q", "top_k": value}, request_type)
    for mode in choices(Mode):
        assert msgspec.convert({"query": "q", "mode": mode}, request_type)
    with pytest.raises(msgspec.ValidationError, match="mode"):
        msgspec.convert({"query": "q", "mode": "semantic"}, request_type)


def test_the_tool_schema_is_the_request_structs() -> None:
    now = datetime.datetime.now(datetime.UTC)
    collection = Collection(
        name="car-faq", language="simple", search_mode="keyword", fusion="zscore",
        vector_weight=1.0, keyword_weight=1.0, rrf_k=60, threshold=0.25, top_k=7, bm25_k1=1.2,
        bm25_b=0.75, bm25_k3=1000.0, typo_weight=0.6, title_boost=3.0, pricing_keywords=[],
        financing_keywords=[],
        no_information=None, embedder=None, dimensions=384, next_embedder=None,
        created_at=now, updated_at=now,
    )  # fmt: skip
    function = tool.definition(collection)["function"]
    parameters = function["parameters"]
    properties = parameters["properties"]
    assert function["name"] == "search_car_faq"
    assert set(properties) == {"query", "top_k", "mode", "filters"}
    assert parameters["required"] == ["query"] and parameters["additionalProperties"] is False
    assert (properties["top_k"]["minimum"], properties["top_k"]["maximum"]) == bounds(TopK)
    assert (
        properties["top_k"]["type"] == "integer"
        and "default 7" in properties["top_k"]["description"]
    )
    assert properties["mode"]["type"] == "string"
    assert sorted(properties["mode"]["enum"]) == sorted(choices(Mode))
    assert "default keyword" in properties["mode"]["description"]
    assert properties["query"]["maxLength"] == 4000 and properties["filters"]["type"] == "object"
    # Whatever the tool allows, the search endpoint accepts.
    arguments = {"query": "q", "top_k": bounds(TopK)[1], "mode": "vector", "filters": {}}
    assert msgspec.convert(arguments, SearchRequest).top_k == bounds(TopK)[1]


def test_bounds_needs_a_constrained_type() -> None:
    with pytest.raises(TypeError):
        bounds(int)


def test_the_console_takes_the_request_types_limits() -> None:
    """Each number the search console asks for (top k, weights, threshold, ...) has the range
    SearchRequest accepts: the page states it, this holds it to `cari.limits`."""
    page = (Path(cari.__file__).parent / "console" / "index.html").read_text(encoding="utf-8")
    inputs = re.findall(
        r'<input data-setting="(\w+)" type="number" min="([\d.]+)" max="([\d.]+)"', page
    )
    assert {name for name, _, _ in inputs} >= {"top_k", "threshold", "vector_weight"}
    schema = msgspec.json.schema(SearchRequest)["$defs"]["SearchRequest"]["properties"]
    for name, least, greatest in inputs:
        (field,) = [kind for kind in schema[name]["anyOf"] if kind.get("type") != "null"]
        assert (float(least), float(greatest)) == (field["minimum"], field["maximum"]), name
