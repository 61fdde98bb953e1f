"""JSON Schema builders for the OpenAPI document: each returns a plain dict of the
JSON Schema 2020-12 dialect OpenAPI 3.1 uses, with a description where a reader needs one."""

from __future__ import annotations

from typing import Any

from embrasure.web.params import Cursor

Schema = dict[str, Any]

REF_PREFIX = "#/components/schemas/"
TIME = "UTC RFC 3339 time, keeping the source's sub-second precision"


def ref(name: str) -> Schema:
    return {"$ref": REF_PREFIX + name}


def nullable(schema: Schema) -> Schema:
    """``schema`` or JSON null: a type list where the schema has one type (OpenAPI 3.1
    dropped ``nullable``), else ``anyOf`` (a ``$ref``)."""
    if isinstance(schema.get("type"), str):
        out = {**schema, "type": [schema["type"], "null"]}
        if "enum" in schema:
            out["enum"] = [*schema["enum"], None]
        return out
    return {"anyOf": [schema, {"type": "null"}]}


def string(description: str = "", **extra: Any) -> Schema:
    return {"type": "string", **({"description": description} if description else {}), **extra}


def integer(description: str = "", **extra: Any) -> Schema:
    return {"type": "integer", **({"description": description} if description else {}), **extra}


def time(description: str = TIME) -> Schema:
    return string(description, format="date-time")


def boolean(description: str = "") -> Schema:
    return {"type": "boolean", **({"description": description} if description else {})}


def enum(values: tuple[str, ...], description: str = "") -> Schema:
    return string(description, enum=list(values))


def array(items: Schema, description: str = "", **extra: Any) -> Schema:
    return {
        "type": "array",
        "items": items,
        **({"description": description} if description else {}),
        **extra,
    }


def obj(
    description: str, required: dict[str, Schema], optional: dict[str, Schema] | None = None
) -> Schema:
    """An object whose ``required`` keys are always present and ``optional`` ones may be."""
    return {
        "type": "object",
        "description": description,
        "required": list(required),
        "properties": {**required, **(optional or {})},
    }


def free_object(description: str) -> Schema:
    """JSON the server passes through as it was sent (facets, raw events)."""
    return {"type": "object", "description": description, "additionalProperties": True}


def page(key: str, item: Schema, description: str, cursor: Cursor) -> Schema:
    """A cursor-paginated listing (docs/queries.md#conventions): the items and the next
    page's cursor, of the shape the listing's ``cursor`` parameter takes back."""
    return obj(
        description,
        {
            key: array(item),
            "next_cursor": nullable(
                string(
                    "Pass as `cursor` for the next page; null on the last page.",
                    pattern=cursor.pattern,
                )
            ),
        },
    )
