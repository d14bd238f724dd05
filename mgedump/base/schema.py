"""A small validator for the part of JSON Schema (draft 2020-12) that mgedump's published schemas use: files read
from outside (a bundle's manifest) are checked against the schema the docs publish, with no run-time dependency.

:func:`first_problem` walks the schema, never the document alone, so its depth is the schema's whatever the
document holds (a value nested a thousand deep is one wrong type), and names the first value that does not fit
by its path (``variants[0].certified.prob``), with what was expected.

The keywords it knows are :data:`KEYWORDS` (annotations such as ``description`` are ignored); a schema that uses
any other keyword is refused (:func:`unknown_keywords`), so a keyword added to a schema cannot be silently
skipped. It is stricter than JSON Schema in two ways, both on values JSON itself does not have or that a
writer never gives: an ``integer`` is a number written without a fraction (``1``, not ``1.0``), and a
``number`` is finite (Python's JSON reader accepts ``NaN`` and ``Infinity``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["KEYWORDS", "Problem", "first_problem", "path_text", "unknown_keywords"]

ANNOTATIONS = frozenset(("$schema", "$id", "$comment", "$defs", "title", "description", "default", "examples"))
KEYWORDS = frozenset(
    (
        "$ref", "type", "const", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "minLength", "maxLength", "pattern", "items", "minItems", "maxItems", "uniqueItems", "properties",
        "required", "dependentRequired", "additionalProperties", "minProperties", "maxProperties", "anyOf", "oneOf",
        "allOf", "if",
        "then", "else",
    )
)  # fmt: skip
_TYPE_NAMES = {
    "object": "an object",
    "array": "a list",
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """The first value of a document that does not fit its schema: where it is, and what was expected."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{path_text(self.path)}: {self.reason}"


def path_text(path: Path) -> str:
    """A path into a document as one reads it: ``variants[0].model.member``; ``(top)`` for the document itself.
    Keys that are not identifiers are quoted (``assertion.output_maxerr['y:0']``), long ones cut."""
    text = ""
    for key in path:
        if isinstance(key, int):
            text += f"[{key}]"
        elif _IDENTIFIER.match(key) and len(key) <= 64:
            text += f".{key}" if text else key
        else:
            text += f"[{(key[:40] + '...') if len(key) > 40 else key!r}]"
    return text or "(top)"


def kind_of(value: Any) -> str:
    """A JSON value's kind, as a message says it: ``a list``, ``null``, ``a string``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "an infinity"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is(kind: str, value: Any) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and math.isfinite(value)
        )
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    raise ValueError(f"unknown JSON Schema type {kind!r}")


def equal(a: Any, b: Any) -> bool:
    """JSON's equality: true and 1 differ, 1 and 1.0 do not, objects compare by keys."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _unique_key(value: Any) -> Any:
    """A key equal for values JSON calls equal (for ``uniqueItems``, in one pass)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, (int, float)):
        return ("number", value)
    try:
        return ("json", json.dumps(value, sort_keys=True, allow_nan=True))
    except (RecursionError, TypeError, ValueError):
        return ("id", id(value))


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True) if isinstance(value, (str, int, float, bool, type(None))) else "..."
    return text if len(text) <= 60 else text[:57] + "..."


class _Walk:
    """One validation: the root schema (for ``$ref``) and the walk."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.plans: dict[int, list[_Check]] = {}  # by the id of each schema object met: the walk holds them all
        self.refs: dict[str, Any] = {}

    def resolve(self, ref: str) -> Any:
        found = self.refs.get(ref)
        if found is None:
            found = self.refs[ref] = self._resolve(ref)
        return found

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            raise ValueError(f"only local references are supported, not {ref!r}")
        node = self.root
        for part in filter(None, ref[1:].split("/")):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def describe(self, schema: Any) -> str:
        """What a schema accepts, in a few words (for a value that fits none of several forms)."""
        if schema is True:
            return "anything"
        if schema is False or not isinstance(schema, dict):
            return "nothing"
        if "$ref" in schema:
            return self.describe(self.resolve(schema["$ref"]))
        if "const" in schema:
            return _show(schema["const"])
        if "enum" in schema:
            return (
                "one of "
                + ", ".join(_show(v) for v in schema["enum"][:8])
                + (", ..." if len(schema["enum"]) > 8 else "")
            )
        kinds = schema.get("type")
        if kinds is not None:
            kinds = [kinds] if isinstance(kinds, str) else kinds
            text = " or ".join(_TYPE_NAMES.get(k, k) for k in kinds)
            if "minimum" in schema and any(k in ("integer", "number") for k in kinds):
                text += f" >= {schema['minimum']}"
            return text
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return " or ".join(self.describe(s) for s in schema[key])
        return "another value"

    def types(self, schema: Any) -> list[str] | None:
        """The JSON types a schema accepts at its top, if it says (through ``$ref``, ``const`` and ``enum``)."""
        if not isinstance(schema, dict):
            return None
        if "$ref" in schema:
            return self.types(self.resolve(schema["$ref"]))
        if "type" in schema:
            return [schema["type"]] if isinstance(schema["type"], str) else list(schema["type"])
        values = [schema["const"]] if "const" in schema else schema.get("enum")
        if values is not None:
            return sorted({t for v in values for t in _TYPE_NAMES if _is(t, v)})
        return None

    def check(self, schema: Any, value: Any, path: Path) -> Problem | None:
        if schema is True:
            return None
        if schema is False:
            return Problem(path, "not allowed here")
        plan = self.plans.get(id(schema))
        if plan is None:
            plan = self.plans[id(schema)] = _plan(schema)
        for checker in plan:
            found = checker(self, schema, value, path)
            if found is not None:
                return found
        return None

    def valid(self, schema: Any, value: Any, path: Path) -> bool:
        return self.check(schema, value, path) is None

    def one_of(self, schemas: list[Any], value: Any, path: Path, exactly_one: bool) -> Problem | None:
        problems = []
        matched = 0
        for schema in schemas:
            found = self.check(schema, value, path)
            if found is None:
                matched += 1
                if not exactly_one:
                    return None
            problems.append(found)
        if matched == 1 or (matched and not exactly_one):
            return None
        if matched > 1:
            return Problem(path, "fits more than one of the forms allowed here")
        fitting = [p for schema, p in zip(schemas, problems, strict=True) if _fits_type(self, schema, value)]
        if len(fitting) == 1 and fitting[0] is not None:
            return fitting[0]  # the one form of this value's type: say what in it is wrong
        return Problem(path, f"expected {' or '.join(self.describe(s) for s in schemas)}, got {kind_of(value)}")


def _fits_type(walk: _Walk, schema: Any, value: Any) -> bool:
    kinds = walk.types(schema)
    return kinds is not None and any(_is(kind, value) for kind in kinds)


def _ref(walk: _Walk, schema: dict[str, Any], value: Any, path: Path) -> Problem | None:
    return walk.check(walk.resolve(schema["$ref"]), value, path)


def _type(walk: _Walk, schema: dict[str, Any], value: Any, path: Path) -> Problem | None:
    kinds = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
    for kind in kinds:
        if _is(kind, value):
            return None
    return Problem(path, f"expected {' or '.join(_TYPE_NAMES[k] for k in kinds)}, got {kind_of(value)}")


def _const(walk: _Walk, schema: dict[str, Any], value: Any, path: Path) -> Problem | None:
    return None if equal(value, schema["const"]) else Problem(path, f"expected {_show(schema['const'])}")


def _enum(walk: _Walk, schema: dict[str, Any], value: Any, path: Path) -> Problem | None:
    if any(equal(value, allowed) for allowed in schema["enum"]):
        return None
    return Problem(path, f"expected {walk.describe({'enum': schema['enum']})}")


def _bounds(walk: _Walk, schema: dict[str, Any], value: Any, path: Path) -> Problem | None:
    if not _is("number", value):
        return None
    for keyword, fails, words in (
        ("minimum", lambda v, b: v < b, ">="),
        ("maximum", lambda v, b: v > b, "<="),
        ("exclusiveMinimum", lambda v, b: v <= b, ">"),
        ("exclusiveMaximum", lambda v, b: v >= b, "<"),
    ):
        if keyword in schema and fails(value, schema[keyword]):
            return Problem(path, f"expected a number {words} {schema[keyword]}, got {_show(value)}")
    return None


def _string(walk: _Walk, schema: dict[str, Any], value: Any, path: Path) -> Problem | None:
    if not isinstance(value, str):
        return None
    if len(value) < schema.get("minLength", 0):
        return Problem(path, "expected a string that is not empty" if schema["minLength"] == 1 else "too short")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return Problem(path, f"longer than {schema['maxLength']} characters")
    if "pattern" in schema and not _regex(schema["pattern"]).search(value):
        return Problem(path, f"{_show(value)} is not of the form this field takes")
    return None


def _array(walk: _Walk, schema: dict[str, Any], value: Any, path: Path) -> Problem | None:
    if not isinstance(value, list):
        return None
    if len(value) < schema.get("minItems", 0):
        return Problem(path, "expected a list that is not empty" if schema["minItems"] == 1 else "too few items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        return Problem(path, f"more than {schema['maxItems']} items")
    if "items" in schema:
        for index, item in enumerate(value):
            found = walk.check(schema["items"], item, (*path, index))
            if found is not None:
                return found
    if schema.get("uniqueItems"):
        seen: set[Any] = set()
        for index, item in enumerate(value):
            key = _unique_key(item)
            if key in seen:
                return Problem((*path, index), "listed twice")
            seen.add(key)
    return None


def _object(walk: _Walk, schema: dict[str, Any], value: Any, path: Path) -> Problem | None:
    if not isinstance(value, dict):
        return None
    for key in schema.get("required", ()):
        if key not in value:
            return Problem((*path, key), "missing")
    for key, needed in schema.get("dependentRequired", {}).items():
        for other in needed if key in value else ():
            if other not in value:
                return Problem((*path, other), f"missing (it goes with {key!r})")
    if len(value) < schema.get("minProperties", 0):
        return Problem(path, "expected an object that is not empty")
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        return Problem(path, f"more than {schema['maxProperties']} keys")
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            found = walk.check(properties[key], item, (*path, key))
        elif extra is False:
            found = Problem((*path, key), "not a key this object has")
        else:
            found = walk.check(extra, item, (*path, key))
        if found is not None:
            return found
    return None


def _any_of(walk: _Walk, schema: dict[str, Any], value: Any, path: Path) -> Problem | None:
    return walk.one_of(schema["anyOf"], value, path, exactly_one=False)


def _one_of(walk: _Walk, schema: dict[str, Any], value: Any, path: Path) -> Problem | None:
    return walk.one_of(schema["oneOf"], value, path, exactly_one=True)


def _all_of(walk: _Walk, schema: dict[str, Any], value: Any, path: Path) -> Problem | None:
    for part in schema["allOf"]:
        found = walk.check(part, value, path)
        if found is not None:
            return found
    return None


def _if(walk: _Walk, schema: dict[str, Any], value: Any, path: Path) -> Problem | None:
    branch = "then" if walk.valid(schema["if"], value, path) else "else"
    return walk.check(schema[branch], value, path) if branch in schema else None


_Check = Callable[[_Walk, dict[str, Any], Any, Path], "Problem | None"]
# in this order: what a value is, before what it holds (a list's items before their uniqueness, a string's
# length before its pattern), so the first problem is the plainest and no check meets a value of another type
_CHECKS: tuple[tuple[str, _Check], ...] = (
    ("$ref", _ref),
    ("type", _type),
    ("const", _const),
    ("enum", _enum),
    ("minimum", _bounds),
    ("maximum", _bounds),
    ("exclusiveMinimum", _bounds),
    ("exclusiveMaximum", _bounds),
    ("minLength", _string),
    ("maxLength", _string),
    ("pattern", _string),
    ("minItems", _array),
    ("maxItems", _array),
    ("items", _array),
    ("uniqueItems", _array),
    ("required", _object),
    ("dependentRequired", _object),
    ("minProperties", _object),
    ("maxProperties", _object),
    ("properties", _object),
    ("additionalProperties", _object),
    ("anyOf", _any_of),
    ("oneOf", _one_of),
    ("allOf", _all_of),
    ("if", _if),
)


def _plan(schema: dict[str, Any]) -> list[_Check]:
    """The checkers a schema needs, in :data:`_CHECKS` order, each once even when several of its keywords are
    present."""
    found: list[_Check] = []
    for keyword, checker in _CHECKS:
        if keyword in schema and checker not in found:
            found.append(checker)
    return found


def first_problem(schema: Any, document: Any) -> Problem | None:
    """The first value of the document that does not fit the schema (None: the document is valid).

    Args:
        schema: a JSON Schema using only :data:`KEYWORDS` (and annotations).
        document: a value as :func:`json.loads` gives it.
    """
    return _Walk(schema).check(schema, document, ())


def unknown_keywords(schema: Any) -> set[str]:
    """The keywords of a schema this validator does not know (none: it checks every rule the schema states)."""
    found: set[str] = set()
    for node in _subschemas(schema):
        found |= {key for key in node if key not in KEYWORDS and key not in ANNOTATIONS}
    return found


def _subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(schema, dict):
        return
    yield schema
    for key, value in schema.items():
        if key in ("properties", "$defs"):
            for sub in value.values():
                yield from _subschemas(sub)
        elif key in ("anyOf", "oneOf", "allOf"):
            for sub in value:
                yield from _subschemas(sub)
        elif key in ("items", "additionalProperties", "if", "then", "else"):
            yield from _subschemas(value)
