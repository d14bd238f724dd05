"""Type checks for values read from JSON: a bool is no whole number, fields checked by type."""

from __future__ import annotations

from mgedump.base.jsontypes import has_fields, is_int, is_number, is_str_list


def test_a_bool_is_neither_a_whole_number_nor_a_number():
    assert is_int(3) and not is_int(True) and not is_int(3.0) and not is_int("3")
    assert is_number(3) and is_number(2.5) and not is_number(False) and not is_number(None)


def test_lists_of_strings_and_fields_by_type():
    assert is_str_list([]) and is_str_list(["a", "b"]) and not is_str_list(["a", 1]) and not is_str_list("ab")
    entry = {"name": "x", "size": 3, "sha256": "00"}
    assert has_fields(entry, name=str, size=int, sha256=str)
    assert not has_fields(entry, name=str, file=str) and not has_fields(["name"], name=str)
