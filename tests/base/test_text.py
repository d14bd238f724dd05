"""mgedump.base.text: one cleaning per output context, and what each context's strict reader then accepts."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from xml.sax.saxutils import XMLGenerator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mgedump.base import text

NOT_UTF8 = b"\xff\xc3(.npy".decode("utf-8", "surrogateescape")  # bytes that are not UTF-8, as Python holds them
HOSTILE = [
    ("plain text, ünïcode and 中文 stay", "plain text, ünïcode and 中文 stay"),
    ("a\nb\rc\td", "a\\x0ab\\x0dc\\x09d"),
    ("\x1b[2J\x07\x9b", "\\x1b[2J\\x07\\x9b"),
    ("nul\x00here", "nul\\x00here"),
    ("ok\u202egnissap\u200b\u2066x\u2069", "ok\\u202egnissap\\u200b\\u2066x\\u2069"),
    (NOT_UTF8, "\\xff\\xc3(.npy"),
    ("\ud800 alone", "\\ud800 alone"),
    ("emoji \U0001f600 stays", "emoji \U0001f600 stays"),
]


class Strict(HTMLParser):
    """The text of an HTML fragment; fails on any element (the cleaned text must hold no live markup)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def refuse_lone_surrogates(pairs):
    for key, value in pairs:
        for s in (key, value) if isinstance(value, str) else (key,):
            assert not any(0xD800 <= ord(c) <= 0xDFFF for c in s), s
    return dict(pairs)


def strict_json(document: str):
    def no_constant(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(document, object_pairs_hook=refuse_lone_surrogates, parse_constant=no_constant)


@pytest.mark.parametrize(("raw", "shown"), HOSTILE)
def test_terminal(raw, shown):
    assert text.terminal(raw) == shown
    text.terminal(raw).encode("utf-8")


def test_bytes_keep_their_value():
    assert text.decoded(b"\xffok") == "\udcffok"
    assert text.terminal(b"\xffok") == text.html(b"\xffok") == text.xml(b"\xffok") == text.json(b"\xffok") == "\\xffok"
    assert text.escape_char("\udcff") == "\\xff" and text.escape_char("\U000e0001") == "\\U000e0001"


@pytest.mark.parametrize(("raw", "shown"), HOSTILE)
def test_html_is_text_with_no_markup_and_no_invalid_code_point(raw, shown):
    cleaned = text.html(f"<b>{raw}</b>&\"'")
    cleaned.encode("utf-8")
    parser = Strict()
    parser.feed(f'<p title="{cleaned}">{cleaned}</p>')
    assert parser.tags == ["p"]
    assert "".join(parser.text) == f"<b>{shown}</b>&\"'"


def test_html_keeps_lines_where_asked():
    assert text.html("a\nb\tc\r", lines=True) == "a\nb\tc\\x0d"
    assert text.html("a\nb") == "a\\x0ab"
    assert text.html("\ufffe\ufdd0") == "\\ufffe\\ufdd0"


@pytest.mark.parametrize(("raw", "shown"), HOSTILE)
def test_xml_holds_only_what_xml_allows(raw, shown):
    out = io.StringIO()
    writer = XMLGenerator(out, encoding="utf-8")
    writer.startElement("r", {"a": text.xml(raw)})
    writer.characters(text.xml(raw, lines=True))
    writer.endElement("r")
    document = out.getvalue()
    assert "&#" not in document.replace("&#10;", "").replace("&#13;", "").replace("&#9;", "")
    element = ET.fromstring(document.encode("utf-8"))
    assert element.get("a") == shown
    assert element.text == shown.replace("\\x0a", "\n").replace("\\x09", "\t")


@pytest.mark.parametrize(("raw", "shown"), HOSTILE)
def test_json_strict_parsers_accept(raw, shown):
    document = json.dumps({"name": text.json(raw), text.json(raw): 1})
    assert strict_json(document)["name"] == text.json(raw)
    assert text.json("ctrl \x1b stays") == "ctrl \x1b stays"  # JSON escapes it; the data stays exact
    assert text.json(NOT_UTF8) == "\\xff\\xc3(.npy"


ANYTHING = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=40)


@given(ANYTHING)
def test_any_text_is_safe_in_every_context(raw):
    for cleaned in (text.terminal(raw), text.html(raw), text.xml(raw), text.json(raw)):
        cleaned.encode("utf-8")  # never raises: no lone surrogate is left
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text.terminal(raw))
    ET.fromstring(f"<r>{text.html(raw)}</r>".encode())  # html.escape's output is XML-safe too
    strict_json(json.dumps({"k": text.json(raw)}))
