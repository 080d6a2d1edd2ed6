"""What the OpenAPI document says beyond what Litestar derives from the handlers' types."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from litestar.openapi.spec import (
    Example,
    OpenAPIMediaType,
    OpenAPIResponse,
    Operation,
    Schema,
)
from litestar.openapi.spec.enums import OpenAPIType
from litestar.params import Parameter
from litestar.plugins import OpenAPISchemaPlugin
from litestar.typing import FieldDefinition

from cari.answer.service import EVENTS
from cari.api import problems

if TYPE_CHECKING:
    from litestar._openapi.schema_generation import SchemaCreator

CollectionName = Annotated[
    str,
    Parameter(description="The collection's name", examples=[Example(value="faq")]),
]


class DocumentedAs:
    """Marks a body Litestar takes as it is typed (`list[Any]`, say) for Cari to check item by
    item (a batch keeps its valid documents; an error names `items[i].field`), and that the
    OpenAPI document describes as any of `shapes`:
    `Annotated[list[Any], DocumentedAs(list[CatalogItemIn])]`."""

    def __init__(self, *shapes: Any) -> None:
        self.shapes = shapes


class DocumentedAsPlugin(OpenAPISchemaPlugin):
    def is_plugin_supported_field(self, field_definition: FieldDefinition) -> bool:
        return field_definition.has_metadata(DocumentedAs)

    def to_openapi_schema(
        self, field_definition: FieldDefinition, schema_creator: SchemaCreator
    ) -> Schema:
        documented = next(m for m in field_definition.metadata if isinstance(m, DocumentedAs))
        schemas = [
            schema_creator.for_field_definition(FieldDefinition.from_annotation(shape))
            for shape in documented.shapes
        ]
        # anyOf, not oneOf: a batch is also an object a lone document could be.
        return Schema(any_of=schemas) if len(schemas) > 1 else Schema(all_of=schemas)


# A bound of the request structs (msgspec.Meta) and the OpenAPI keyword stating it.
_BOUNDS = {"ge": "minimum", "gt": "exclusive_minimum", "le": "maximum", "lt": "exclusive_maximum"}


class ZeroBoundsPlugin(OpenAPISchemaPlugin):
    """States a bound of 0 that Litestar leaves out. On an optional field it copies a field's
    bounds only if they are true, so `threshold: Threshold | None` (0 to 1) was documented
    with its maximum alone, though the server refuses a negative one."""

    def is_plugin_supported_field(self, field_definition: FieldDefinition) -> bool:
        return bool(_zero_bounds(field_definition))

    def to_openapi_schema(
        self, field_definition: FieldDefinition, schema_creator: SchemaCreator
    ) -> Schema:
        zeros = _zero_bounds(field_definition)
        kwargs = field_definition.kwarg_definition
        # The field as Litestar documents it, without the zero bounds (nor this plugin)...
        without = dataclasses.replace(kwargs, **dict.fromkeys(zeros))  # type: ignore[type-var]
        schema = schema_creator.for_field_definition(
            dataclasses.replace(field_definition, kwarg_definition=without)
        )
        assert isinstance(schema, Schema)
        for bound in zeros:  # ...and with them
            setattr(schema, _BOUNDS[bound], 0.0)
        return schema


def _zero_bounds(field_definition: FieldDefinition) -> list[str]:
    kwargs = field_definition.kwarg_definition
    return [bound for bound in _BOUNDS if getattr(kwargs, bound, None) == 0]


@dataclass
class V1Operation(Operation):
    """An operation under /v1, listing the problems its route gives (`problems.responses`).
    Litestar adds a 400 of its own error shape to every route with parameters (for its
    ValidationException, which Cari answers as a 422): only a 400 problem stays. A 401 stays
    only when API keys are required (then the router sets `security`)."""

    def __post_init__(self) -> None:
        responses = self.responses or {}
        bad_request = responses.get("400")
        if isinstance(bad_request, OpenAPIResponse) and not _is_problem(bad_request):
            del responses["400"]
        if not self.security:
            responses.pop("401", None)
        self.responses = responses


def _is_problem(response: OpenAPIResponse) -> bool:
    return problems.MEDIA_TYPE in (response.content or {})


@dataclass
class AnswerOperation(V1Operation):
    """The answer, which is also a server-sent event stream."""

    def __post_init__(self) -> None:
        super().__post_init__()
        assert self.responses is not None
        answered = self.responses["200"]
        assert isinstance(answered, OpenAPIResponse) and answered.content is not None
        answered.content["text/event-stream"] = OpenAPIMediaType(
            schema=Schema(
                type=OpenAPIType.OBJECT,
                description="One event of the stream (its `data` is a JSON object)",
                required=["event", "data"],
                properties={
                    "event": Schema(type=OpenAPIType.STRING, enum=list(EVENTS)),
                    "data": Schema(type=OpenAPIType.STRING, content_media_type="application/json"),
                },
            ),
            example=(
                'event: search_complete\ndata: {"sources": [...]}\n\n'
                'event: llm_chunk\ndata: {"text": "Cicilan Civic RS 36 bulan [1] "}\n\n'
                'event: citations\ndata: {"citations": {"1": {...}}}\n\n'
                'event: metadata\ndata: {"model": "...", "timings_ms": {...}}\n\n'
                "event: done\ndata: {}\n\n"
            ),
        )
