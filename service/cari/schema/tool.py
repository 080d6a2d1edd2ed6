"""`GET …/tool`: a collection's search as an LLM tool."""

from __future__ import annotations

from typing import Any, Literal

import msgspec


class ToolFunction(msgspec.Struct):
    name: str
    description: str
    parameters: dict[str, Any]  # the JSON schema of the search's arguments


class Tool(msgspec.Struct):
    """An OpenAI function tool."""

    type: Literal["function"]
    function: ToolFunction
