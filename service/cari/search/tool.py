"""A collection's search as an LLM tool (an OpenAI function definition).

The arguments' schema is generated from `SearchRequest`, the struct the HTTP API validates, so
a limit or a choice changes in one place; only the descriptions are written here. The MCP tools
(`cari.mcp.tools`) take their arguments from the request structs the same way (`arguments`).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec

from cari.schema.collections import Collection
from cari.schema.search import SearchRequest


def definition(collection: Collection) -> dict[str, Any]:
    """The tool that searches `collection`, its defaults named in the descriptions."""
    name = collection.name
    descriptions = {
        "query": "The question or keywords.",
        "top_k": f"How many results (default {collection.top_k}).",
        "mode": "keyword for exact codes and names, vector for meaning; "
        f"default {collection.search_mode}.",
        "filters": 'Optional: {"metadata": {"key": value}, "document_ids": ["..."]}.',
    }
    fields, required = arguments(SearchRequest)
    return {
        "type": "function",
        "function": {
            "name": f"search_{name.replace('-', '_')}"[:64],
            "description": (
                f"Search the '{name}' knowledge base (hybrid keyword and semantic search) "
                "and return its most relevant passages, catalog items and computed installments, "
                "each with an id to cite. Call it with the user's question in their own words. "
                f"HTTP: POST /v1/collections/{name}/search with these arguments as JSON."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    field: {**fields[field], "description": text}
                    for field, text in descriptions.items()
                },
                "required": [field for field in required if field in descriptions],
                "additionalProperties": False,
            },
        },
    }


@cache
def arguments(
    request: type[msgspec.Struct],
) -> tuple[dict[str, dict[str, Any]], tuple[str, ...]]:
    """Each field of a request struct as a tool argument's JSON schema, and the required fields.

    In the request an optional field may be null (the collection's default); a tool's caller
    leaves it out instead, so the null alternative and the default are dropped.
    """
    schema = msgspec.json.schema(request)
    struct = schema["$defs"][request.__name__]
    fields: dict[str, dict[str, Any]] = {}
    for field, spec in struct["properties"].items():
        options = [o for o in spec.get("anyOf", [spec]) if o.get("type") != "null"]
        if len(options) == 1:
            option = {k: v for k, v in options[0].items() if k != "default"}
            if "enum" in option and all(isinstance(v, str) for v in option["enum"]):
                option = {"type": "string", **option}  # msgspec leaves a Literal's type implicit
            fields[field] = option
    return fields, tuple(struct["required"])
