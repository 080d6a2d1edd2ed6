"""What the OpenAPI document says beyond what Litestar derives from the handlers' types."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any

from litestar.openapi.spec import (
    Example,
    Link,
    OpenAPI,
    OpenAPIMediaType,
    OpenAPIResponse,
    Operation,
    Reference,
    RequestBody,
    Schema,
)
from litestar.openapi.spec import Parameter as Parameter_
from litestar.openapi.spec.enums import OpenAPIType
from litestar.params import Parameter
from litestar.plugins import OpenAPISchemaPlugin
from litestar.typing import FieldDefinition

from cari.api import problems
from cari.limits import MAX_JUDGED, MAX_OFFSET, NUL_FREE, QUERY_LENGTH, EfSearch, Grade, bounds
from cari.schema.answer import EVENTS
from cari.schema.catalog import FRACTION_BELOW, FRACTION_TEXT, PRICE_BELOW, PRICE_TEXT
from cari.schema.consistency import HEADER, TOKEN_DESCRIPTION, TOKEN_PATTERN
from cari.search.filters import (
    MAX_KEY_LENGTH,
    MAX_KEYS,
    MAX_VALUES,
    OPERATOR_NAMES,
    RANGE_OPERATORS,
)

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
    ValidationException, which Cari answers as a 422): only a 400 problem stays. 401 and 403
    stay: keys can be stored while the server runs, and from the first one on every request
    needs one (the router's `security` says whether a key is optional until then)."""

    def __post_init__(self) -> None:
        responses = self.responses or {}
        bad_request = responses.get("400")
        if isinstance(bad_request, OpenAPIResponse) and not _is_problem(bad_request):
            del responses["400"]
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


# Patterns of values the server refuses that their types do not say (JSON Schema patterns are
# searches: anchored where the whole value must match).
# Some character other than whitespace or NUL: the server strips (a question and a document's text
# drop their NULs first), then checks. Any other string must hold no NUL at all. Whitespace is
# what Python's str.strip() removes, listed: a pattern's `\s` leaves out the separators
# U+001C-U+001F and U+0085, which strip() removes (a query of one U+001C passed the schema and
# was refused as empty), and holds U+FEFF, which strip() keeps.
_BLANK = r"\t\n\x0b\x0c\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NOT_BLANK = rf"[^{_BLANK}\x00]"
NOT_BLANK_NUL_FREE = rf"^[^\x00]*[^{_BLANK}\x00][^\x00]*$"
# The strings whose NULs the server drops rather than refuses.
_NUL_DROPPED = ("query", "text", "content")
CURRENCY = r"^[A-Z]{3}"  # ISO 4217, with a length of 3 (no `$`: tools let it end in "\n")
CURSOR = r"^(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{2,3})?$"  # unpadded base64url, 2+ characters
SCALE_ORDER = " `cosine_floor` must be below `cosine_ceiling` (a 422 otherwise)."
# A synonym rule: a term, then ',' or '=>', then another term (the rest of its grammar is in
# words: RULE_GRAMMAR). A term's character is none of whitespace, NUL and ','.
_TERM = rf"[^{_BLANK}\x00,]"
RULE = rf"^[^\x00]*{_TERM}[^\x00]*(?:,|=>)[^\x00]*{_TERM}[^\x00]*$"
RULE_GRAMMAR = (
    " A rule holds at least two terms (`a, b`) or terms on both sides of one `=>`; no term is "
    "empty or named twice, and each has a searchable word in the collection's language (a 422 "
    "names the rule otherwise)."
)


# The request bodies that refuse a field they do not name.
_CLOSED = (
    "AnswerRequest",
    "CatalogItemIn",
    "CollectionCreate",
    "CollectionUpdate",
    "DocumentBatch",
    "DocumentIn",
    "EfSearchTuneRequest",
    "EvalQuestion",
    "EvalRequest",
    "FinancingRateIn",
    "FusionTuneRequest",
    "RelevanceScale",
    "SearchRequest",
    "Synonyms",
)


def state_rules(openapi: OpenAPI, embedders: list[str]) -> None:
    """States in `openapi` the rules the server enforces that Litestar does not derive from the
    types: non-empty bodies and strings, the id a new document needs, text or content, the
    formats of the cursor and the consistency token, and the embedders this server knows
    (`embedders`, from its settings). The rule JSON Schema cannot state (a relevance scale's
    floor below its ceiling) is in the description."""
    assert openapi.components is not None and openapi.components.schemas is not None
    schemas = openapi.components.schemas
    for name in _CLOSED:  # msgspec's forbid_unknown_fields
        schemas[name].additional_properties = False
    _property(schemas["CollectionCreate"], "embedder").enum = [*embedders, None]
    scale = _property(schemas["CollectionUpdate"], "relevance_scale")
    scale.description = (scale.description or "") + SCALE_ORDER
    schemas["RelevanceScale"].description = (schemas["RelevanceScale"].description or "") + (
        SCALE_ORDER
    )
    for name in ("CollectionCreate", "CollectionUpdate"):
        for field in ("pricing_keywords", "financing_keywords"):
            words = _property(schemas[name], field)
            for array in [words, *(words.one_of or [])]:
                if isinstance(array, Schema) and isinstance(array.items, Schema):
                    array.items.min_length, array.items.max_length = 1, 64
    for name in ("SearchRequest", "AnswerRequest", "EvalQuestion"):
        _property(schemas[name], "query").pattern = NOT_BLANK
    _judged(_property(schemas["EvalQuestion"], "relevant"))
    _tuning(schemas["EfSearchTuneRequest"])
    for name in ("SearchRequest", "AnswerRequest", "EfSearchTuneRequest"):
        filters = _property(schemas[name], "filters")
        for shape in filters.one_of or []:
            if isinstance(shape, Schema) and shape.type == OpenAPIType.OBJECT:
                shape.additional_properties = False
                shape.properties = {
                    "metadata": _ref("MetadataFilter"),
                    "document_ids": Schema(
                        type=OpenAPIType.ARRAY,
                        items=Schema(type=OpenAPIType.STRING, min_length=1),
                        min_items=1,
                        max_items=1000,
                    ),
                }
    _amount(schemas["CatalogItemIn"], "price", PRICE_TEXT, PRICE_BELOW, nullable=True)
    for field in ("rate", "min_down_payment"):
        _amount(schemas["FinancingRateIn"], field, FRACTION_TEXT, FRACTION_BELOW)
    currency = _property(schemas["CatalogItemIn"], "currency")
    currency.pattern, currency.min_length, currency.max_length = CURRENCY, 3, 3
    put_id = _property(schemas["DocumentIn"], "id")
    put_id.description = "The document's id; on PUT, the path's (if given, the same)."
    rules = _property(schemas["Synonyms"], "rules")
    assert isinstance(rules.items, Schema)
    rules.items.min_length, rules.items.pattern = 3, RULE
    rules.description = (rules.description or "Synonym rules, in order.") + RULE_GRAMMAR
    for name, fields in (
        ("CatalogItemIn", ("sku", "name")),
        ("FinancingRateIn", ("provider",)),
    ):
        for field in fields:
            _property(schemas[name], field).pattern = NOT_BLANK
    document = schemas["DocumentIn"]
    # Text or content (either, not both), with something other than whitespace.
    document.any_of = [
        Schema(
            required=[given],
            properties={
                given: Schema(type=OpenAPIType.STRING, pattern=NOT_BLANK),
                other: Schema(type=OpenAPIType.NULL),
            },
        )
        for given, other in (("text", "content"), ("content", "text"))
    ]
    # A new document (POST, alone or in a batch) names its id; PUT takes it from the path.
    added = dataclasses.replace(document, required=["id"], title="NewDocument")
    added.properties = {**(document.properties or {}), "id": _not_null(document, "id")}
    schemas["NewDocument"] = added
    batch = _property(schemas["DocumentBatch"], "documents")
    batch.items, batch.min_items = Reference("#/components/schemas/NewDocument"), 1
    for path, item in (openapi.paths or {}).items():
        if path.startswith("/v1/") and item.get is not None:
            _read_token(item.get)
        for operation in (item.get, item.post, item.put, item.patch, item.delete):
            if operation is not None:
                _state_operation(operation)
                _link(operation)
    for name in (*_CLOSED, "NewDocument"):
        _nul_free(schemas[name])
    # Free-form JSON (a document's metadata, an item's attributes): no NUL in a key or a string.
    schemas["JsonValue"] = JSON_VALUE
    schemas["MetadataFilter"] = METADATA_FILTER
    for name, field in (
        ("DocumentIn", "metadata"),
        ("NewDocument", "metadata"),
        ("CatalogItemIn", "attributes"),
    ):
        free = _property(schemas[name], field)
        free.property_names, free.additional_properties = _NUL_FREE, _ref("JsonValue")


def _tuning(request: Schema) -> None:
    """The bounds of an ef_search tuning's values and questions, which Litestar leaves out of
    a list's items (and of a union)."""
    least, greatest = bounds(EfSearch)
    _property(request, "values").items = Schema(
        type=OpenAPIType.INTEGER, minimum=least, maximum=greatest
    )
    questions = _property(request, "questions")
    for shape in questions.one_of or []:
        if isinstance(shape, Schema) and shape.type == OpenAPIType.ARRAY:
            assert isinstance(shape.items, Schema)
            shape.items.max_length = QUERY_LENGTH
            shape.min_items, shape.max_items = questions.min_items, questions.max_items


def _judged(relevant: Schema) -> None:
    """A question's relevant documents, ids or ids and grades: the bounds of each shape, which
    Litestar leaves out of a union."""
    document_id = Schema(type=OpenAPIType.STRING, min_length=1, max_length=512)
    for shape in relevant.one_of or []:
        assert isinstance(shape, Schema)
        if shape.type == OpenAPIType.ARRAY:
            shape.items, shape.min_items, shape.max_items = document_id, 1, MAX_JUDGED
        else:
            shape.property_names = dataclasses.replace(document_id, pattern=NUL_FREE)
            shape.min_properties, shape.max_properties = 1, MAX_JUDGED
            least, greatest = bounds(Grade)
            shape.additional_properties = Schema(
                type=OpenAPIType.INTEGER, minimum=least, maximum=greatest
            )


def _ref(name: str) -> Reference:
    return Reference(f"#/components/schemas/{name}")


_NUL_FREE = Schema(type=OpenAPIType.STRING, pattern=NUL_FREE)
JSON_VALUE = Schema(
    description="Any JSON value with no NUL (U+0000) in a string or a key, which PostgreSQL "
    "cannot store.",
    any_of=[
        _NUL_FREE,
        Schema(type=[OpenAPIType.NUMBER, OpenAPIType.BOOLEAN, OpenAPIType.NULL]),
        Schema(type=OpenAPIType.ARRAY, items=_ref("JsonValue")),
        Schema(
            type=OpenAPIType.OBJECT,
            property_names=_NUL_FREE,
            additional_properties=_ref("JsonValue"),
        ),
    ],
)
# The metadata filter's grammar (`cari.search.filters`): up to 64 keys, each matching a value
# (containment), any of a list of values (`in`), or a range (`gte`, `lte`: both numbers or both
# strings). An object holding an operator's name is an operator object, so a misspelt operator
# is refused rather than matched as a value.
_BOUND = {
    "number": Schema(type=OpenAPIType.NUMBER),
    "string": _NUL_FREE,
}
METADATA_FILTER = Schema(
    type=OpenAPIType.OBJECT,
    description='Each key (a metadata key) to a value it equals, `{"in": [values]}` or a '
    'range `{"gte": low, "lte": high}` (either bound or both, both numbers or both '
    "strings: numbers compare numerically, strings lexicographically).",
    max_properties=MAX_KEYS,
    property_names=Schema(
        type=OpenAPIType.STRING, min_length=1, max_length=MAX_KEY_LENGTH, pattern=NUL_FREE
    ),
    additional_properties=Schema(
        any_of=[
            Schema(
                all_of=[_ref("JsonValue")],
                schema_not=Schema(
                    type=OpenAPIType.OBJECT,
                    any_of=[Schema(required=[name]) for name in sorted(OPERATOR_NAMES)],
                ),
            ),
            Schema(
                type=OpenAPIType.OBJECT,
                required=["in"],
                properties={
                    "in": Schema(
                        type=OpenAPIType.ARRAY,
                        items=_ref("JsonValue"),
                        min_items=1,
                        max_items=MAX_VALUES,
                    )
                },
                additional_properties=False,
            ),
            Schema(
                type=OpenAPIType.OBJECT,
                min_properties=1,
                properties=dict.fromkeys(RANGE_OPERATORS, Schema()),
                additional_properties=False,
                any_of=[
                    Schema(properties=dict.fromkeys(RANGE_OPERATORS, bound))
                    for bound in _BOUND.values()
                ],
            ),
        ]
    ),
)


def _nul_free(schema: Schema | Reference, name: str = "") -> None:
    """States on every string of a request's `schema` (`name` the property it is) that it holds
    no NUL, which the server refuses (`cari.limits.refuse_nul`), but on those that drop it."""
    if not isinstance(schema, Schema):
        return
    if schema.type == OpenAPIType.STRING and schema.enum is None and name not in _NUL_DROPPED:
        if schema.pattern is None:
            schema.pattern = NUL_FREE
        elif schema.pattern == NOT_BLANK:
            schema.pattern = NOT_BLANK_NUL_FREE
    for key, value in (schema.properties or {}).items():
        _nul_free(value, key)
    for shape in (*(schema.one_of or []), *(schema.any_of or []), *(schema.all_of or [])):
        _nul_free(shape, name)
    if isinstance(schema.items, Schema):
        _nul_free(schema.items, name)


def _amount(
    schema: Schema, field: str, pattern: str, below: Decimal, *, nullable: bool = False
) -> None:
    """An amount: a number from 0 to `below` (rounded to its column's step), or a decimal
    string matching `pattern` (exact); the server's `cari.catalog.store._amount`."""
    amount = _property(schema, field)
    amount.one_of = [
        Schema(type=OpenAPIType.NUMBER, minimum=0.0, exclusive_maximum=float(below)),
        Schema(type=OpenAPIType.STRING, pattern=pattern),
        *([Schema(type=OpenAPIType.NULL)] if nullable else []),
    ]


def _read_token(operation: Operation) -> None:
    """A GET under /v1 takes the consistency token as a search does (`provide_conn` reads it),
    though its handler does not name it."""
    parameters = operation.parameters = list(operation.parameters or [])
    if not any(isinstance(p, Parameter_) and p.name == HEADER for p in parameters):
        parameters.append(
            Parameter_(
                name=HEADER,
                param_in="header",
                required=False,
                description=TOKEN_DESCRIPTION,
                schema=Schema(type=OpenAPIType.STRING, max_length=17),
            )
        )


def _state_operation(operation: Operation) -> None:
    for parameter in operation.parameters or []:
        if isinstance(parameter, Parameter_) and isinstance(parameter.schema, Schema):
            if parameter.name == "cursor":
                parameter.schema.pattern = CURSOR
                parameter.schema.min_length = 2
            elif parameter.name == "offset":  # exact: Litestar states it as a float (2**63)
                parameter.schema.maximum = MAX_OFFSET
            elif parameter.name == "source" or parameter.param_in == "path":
                parameter.schema.pattern = NUL_FREE
            elif parameter.name == "metadata":  # a JSON text: its grammar is the filter's
                parameter.description = (
                    "A metadata filter, as search filters take it, JSON-encoded in at most "
                    f"{parameter.schema.max_length:,} characters"
                )
                parameter.content = {
                    "application/json": OpenAPIMediaType(schema=_ref("MetadataFilter"))
                }
                parameter.schema = None
                for example in (parameter.examples or {}).values():
                    if isinstance(example, Example) and isinstance(example.value, str):
                        example.value = json.loads(example.value)  # the filter, not its text
            elif parameter.name == HEADER:  # a header is a string when sent: never null
                parameter.schema.pattern = TOKEN_PATTERN
                parameter.schema.one_of, parameter.schema.type = None, OpenAPIType.STRING
    body = operation.request_body
    if not isinstance(body, RequestBody):
        return
    schema = body.content["application/json"].schema
    if not isinstance(schema, Schema):
        return
    if operation.operation_id in ("addCatalogItems", "addFinancingRates"):
        [array] = schema.all_of or []
        assert isinstance(array, Schema)
        # Unique: the server refuses an item twice (a SKU, a rate's provider, tenor and type).
        array.min_items, array.unique_items = 1, True
    elif operation.operation_id == "addDocuments":
        schema.any_of = [
            Reference("#/components/schemas/NewDocument") if shape == _DOCUMENT else shape
            for shape in schema.any_of or []
        ]


_DOCUMENT = Reference("#/components/schemas/DocumentIn")

# OpenAPI links: where a response's values lead (a client, or a stateful test, follows them from
# a new collection to its documents and to their deletion).
_COLLECTION = {"collection": "$response.body#/name"}
_STORED = {"collection": "$request.path.collection", "document_id": "$response.body#/results/0/id"}
_READ = {"collection": "$request.path.collection", "document_id": "$response.body#/id"}
_LINKS = {
    ("createCollection", "201"): {
        op: _COLLECTION
        for op in (
            "getCollection",
            "addDocuments",
            "listDocuments",
            "searchCollection",
            "deleteCollection",
        )
    },
    ("addDocuments", "200"): dict.fromkeys(
        ("getDocument", "putDocument", "deleteDocument"), _STORED
    ),
    ("putDocument", "200"): dict.fromkeys(("getDocument", "deleteDocument"), _STORED),
    ("getDocument", "200"): dict.fromkeys(("deleteDocument",), _READ),
}


def _link(operation: Operation) -> None:
    for (source, status), targets in _LINKS.items():
        if operation.operation_id != source:
            continue
        response = (operation.responses or {})[status]
        assert isinstance(response, OpenAPIResponse), (source, status)
        response.links = {
            target: Link(operation_id=target, parameters=parameters)
            for target, parameters in targets.items()
        }


def _property(schema: Schema | Reference, name: str) -> Schema:
    assert isinstance(schema, Schema) and schema.properties is not None
    found = schema.properties[name]
    assert isinstance(found, Schema), name
    return found


def _not_null(schema: Schema, name: str) -> Schema:
    """The property without its `null` alternative."""
    nullable = _property(schema, name)
    return dataclasses.replace(nullable, one_of=None, type=OpenAPIType.STRING)
