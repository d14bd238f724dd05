"""The -d spec parser: grammar, name binding, and that arbitrary text only raises SpecError."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgedump.base.errors import SpecError
from mgedump.data.spec import FileSource, Generator, expand_specs, parse_case, parse_generator


@pytest.mark.parametrize(
    "text, params, dims, rest",
    [
        ("#rand(0,255)", (0, 255), None, False),
        ("#rand(0, 255, 1, 3, 224, 224)", (0, 255), (1, 3, 224, 224), False),
        ("#rand(-1.5,2e3,4,...)", (-1.5, 2000.0), (4,), True),
        ("#randn(0,1)", (0, 1), None, False),
        ("#const(16000)", (16000,), None, False),
        ("#const(1,1,128)", (1,), (1, 128), False),
        ("#const(9223372036854775807)", (9223372036854775807,), None, False),
    ],
)
def test_generator_forms(text, params, dims, rest):
    gen = parse_generator(text)
    assert gen.params == params
    assert gen.dims == dims
    assert gen.rest is rest


@pytest.mark.parametrize(
    "text",
    [
        "#rand",
        "#rand(1)",
        "#rand(2,1)",
        "#rand(0,1,-3)",
        "#rand(0,1,...,3)",
        "#rand(0,1,2.5)",
        "#bogus(1)",
        "#randn(0,-1)",
        "#rand(nan,1)",
        "#rand(0,inf)",
        "#const()",
        "#rand(0,1",
    ],
)
def test_malformed_generators(text):
    with pytest.raises(SpecError):
        parse_generator(text)


def test_binds_longest_name_with_colons():
    items = parse_case("input:0:#rand(0,1);len:#const(7)", ["input:0", "len"])
    assert [i.name for i in items] == ["input:0", "len"]
    assert items[0].source == parse_generator("#rand(0,1)")
    # a name that is a prefix of another: the longest wins
    items = parse_case("a:b:x.npy;a:y.npy", ["a", "a:b"])
    assert [(i.name, i.source) for i in items] == [("a", FileSource("y.npy")), ("a:b", FileSource("x.npy"))]


def test_single_input_takes_whole_item_even_with_colons_in_path():
    assert parse_case("dir:with:colons/img.png", ["data"])[0] == parse_case("data:dir:with:colons/img.png", ["data"])[0]
    assert parse_case("dir:with:colons/img.png", ["data"])[0].source == FileSource("dir:with:colons/img.png")


def test_one_generator_applies_to_every_input():
    items = parse_case("#rand(0,1)", ["a", "b"])
    assert len(items) == 1 and items[0].name is None and isinstance(items[0].source, Generator)


@pytest.mark.parametrize(
    "text, names, message",
    [
        ("x:#rand(0,1)", ["data"], "unknown input name 'x'"),
        ("a:#rand(0,1)", ["a", "b"], "no data for input(s) 'b'"),
        ("a:#rand(0,1);a:#rand(0,2);b:#const(1)", ["a", "b"], "given twice"),
        ("c:#rand(0,1);a:#const(1)", ["a", "b"], "unknown input name 'c'"),
        ("x.npy", ["a", "b"], "names no input"),
        ("#rand(0,1);b:#const(1)", ["a", "b"], "has no input name"),
        ("a:#rand(0,1);;b:#const(1)", ["a", "b"], "empty item"),
        ("", ["a"], "empty test case"),
    ],
)
def test_binding_errors(text, names, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_case(text, names)


def test_list_file_cases(tmp_path):
    listing = tmp_path / "list.txt"
    listing.write_text("#rand(0,1)\n\n  img.png  \n")
    cases = expand_specs(["#const(1)", f"@{listing}"])
    assert [c.text for c in cases] == ["#const(1)", "#rand(0,1)", "img.png"]
    assert cases[2].origin.endswith("list.txt:3")
    assert cases[2].base_dir == str(tmp_path)


@pytest.mark.parametrize("content", [b"", b"\n  \n", b"\x00\x01binary", b"\xff\xfe\xfa"])
def test_bad_list_files(tmp_path, content):
    listing = tmp_path / "list.txt"
    listing.write_bytes(content)
    with pytest.raises(SpecError):
        expand_specs([f"@{listing}"])


_names = st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=3, unique=True)
_spec_text = st.one_of(
    st.text(max_size=60),
    st.text(alphabet="#rand()01,.-:;e ab", max_size=40),
    st.builds(lambda a, b: f"{a}:#rand({b})", st.text(max_size=6), st.text(alphabet="0123456789,.-e ", max_size=20)),
)


@settings(max_examples=400, deadline=None)
@given(text=_spec_text, names=_names)
def test_parser_raises_only_spec_errors(text, names):
    try:
        items = parse_case(text, names)
    except SpecError as exc:
        assert "\n" not in exc.one_line()
        return
    assert items and all(i.name is None or i.name in names for i in items)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=60))
def test_generator_parser_raises_only_spec_errors(text):
    with contextlib.suppress(SpecError):
        parse_generator("#" + text)
