"""JSON values as types, and type checks for values read from JSON (a bundle's manifest, an io dump's index):
JSON's numbers arrive as ``int``, ``float`` or ``bool`` (a ``bool`` is an ``int`` to Python), so a whole number is
checked not to be a bool."""

from __future__ import annotations

from typing import Any, TypeAlias, TypeGuard

# A value JSON holds: what json.loads returns and json.dumps writes (a record's field that is JSON as it is: a
# report's environment, a manifest's records). A reader narrows it (isinstance, the checks below) before use.
JsonValue: TypeAlias = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject: TypeAlias = dict[str, JsonValue]


def is_int(value: Any) -> TypeGuard[int]:
    """A whole number, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> TypeGuard[int | float]:
    """A whole or decimal number, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_str_list(value: Any) -> TypeGuard[list[str]]:
    """A list of strings."""
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def has_fields(value: Any, **types: type) -> bool:
    """A JSON object whose fields hold values of these types: ``has_fields(entry, name=str, size=int)`` (as
    ``isinstance`` sees them: check a whole number with :func:`is_int` where a bool must be refused)."""
    return isinstance(value, dict) and all(isinstance(value.get(key), kind) for key, kind in types.items())
