"""Text that came from outside (file names, specs, tensor and node names, manifests, error messages), made safe for
each place it is shown: one function per output context.

- :func:`terminal`: a terminal or a log. Every control character, and every character that reorders or hides
  text (bidi marks, overrides and isolates, zero-width characters, line separators), is escaped.
- :func:`html`: HTML text or attribute values. The same characters and HTML's noncharacters escaped, then the
  markup escaped with the standard library's :func:`html.escape`.
- :func:`xml`: XML 1.0 character data, for a writer that escapes markup (:class:`xml.sax.saxutils.XMLGenerator`).
  The same characters escaped, those XML 1.0 cannot hold at all among them, as visible text: never as
  ``&#...;`` references, which XML parsers refuse for those characters.
- :func:`markdown`: GitHub-flavoured Markdown (a job summary): the characters of :func:`html` and the markup
  escaped, then the characters Markdown reads as markup (emphasis, code, links, table cells, headings) escaped with
  a backslash.
- :func:`json`: a JSON string strict parsers accept. No lone surrogate; everything else kept as it is (JSON
  escapes controls itself, and data stays exact).

Every escape is visible text: ``\\x1b``, ``\\u202e``. Text that is not clean
UTF-8 keeps its original bytes recoverable: bytes are decoded with
``surrogateescape`` (as Python decodes file names and command-line arguments),
and each byte that was not UTF-8, held as a lone surrogate U+DC80..U+DCFF, is
shown as ``\\xff``; any other lone surrogate as ``\\udXXX``. Nothing is dropped
and nothing raises. A backslash already in the text is left as it is.

With ``lines=True`` (HTML and XML), newlines and tabs are kept: for text shown
as several lines (failure lines in ``<pre>`` or a JUnit ``<failure>``).
"""

from __future__ import annotations

import re

__all__ = ["decoded", "escape_char", "html", "json", "markdown", "terminal", "xml"]

_CONTROLS = "\x00-\x1f\x7f-\x9f"  # C0, DEL and C1: escape sequences, carriage returns, newlines, NUL
_HIDDEN = "\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"  # bidi, zero-width, separators
_SURROGATES = "\ud800-\udfff"  # lone surrogates: not text, cannot be encoded as UTF-8
_NONCHARACTERS = "\ufdd0-\ufdef\ufffe\uffff"  # invalid in HTML and (the last two) in XML 1.0

_TERMINAL = re.compile(f"[{_CONTROLS}{_HIDDEN}{_SURROGATES}]")
_MARKUP = re.compile(f"[{_CONTROLS}{_HIDDEN}{_SURROGATES}{_NONCHARACTERS}]")
_MARKUP_LINES = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_HIDDEN}{_SURROGATES}{_NONCHARACTERS}]")
_JSON = re.compile(f"[{_SURROGATES}]")
_MARKDOWN = re.compile(r"([\\`*_\[\]|~])")


def escape_char(char: str) -> str:
    """One character as visible text: ``\\xff`` for a byte that was not UTF-8 (a surrogateescape surrogate) and for
    code points below 0x100, ``\\uXXXX`` above."""
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _escape(match: re.Match[str]) -> str:
    return escape_char(match.group())


def decoded(value: object) -> str:
    """Any value as text: bytes decoded as UTF-8 with ``surrogateescape`` (the bytes that are not UTF-8 stay
    recoverable), other values with ``str``."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "surrogateescape")
    return value if isinstance(value, str) else str(value)


def terminal(value: object) -> str:
    """Text as it may reach a terminal or a log: what came from a file (a spec, a tensor name, a manifest) can
    neither drive the terminal, nor fake a line, nor read as something else."""
    return _TERMINAL.sub(_escape, decoded(value))


def html(value: object, *, lines: bool = False) -> str:
    """Text for an HTML page (element text or a quoted attribute value): the characters of :func:`terminal` and
    HTML's noncharacters escaped as visible text, then ``<``, ``>``, ``&`` and quotes escaped.

    Args:
        lines: keep newlines and tabs (text shown in ``<pre>``).
    """
    import html as _html  # here: a command that writes no HTML never imports it

    cleaned = (_MARKUP_LINES if lines else _MARKUP).sub(_escape, decoded(value))
    return _html.escape(cleaned, quote=True)


def xml(value: object, *, lines: bool = False) -> str:
    """Text for an XML 1.0 document, to hand to a writer that escapes markup (``XMLGenerator`` escapes ``<``,
    ``&`` and, in attributes, quotes and newlines): the characters of :func:`terminal`, and those XML 1.0
    forbids (controls, lone surrogates, U+FFFE, U+FFFF), escaped as visible text.

    Args:
        lines: keep newlines and tabs (a ``<failure>`` body).
    """
    return (_MARKUP_LINES if lines else _MARKUP).sub(_escape, decoded(value))


def markdown(value: object) -> str:
    """Text for one line of GitHub-flavoured Markdown, a table cell too: the characters of :func:`html` escaped as
    visible text and the markup escaped (Markdown renders HTML), then every character Markdown reads as markup
    inside a line (``*``, ``_``, ``~``, backquotes, brackets, ``|``, backslashes) escaped with a backslash, so that
    it reads as written."""
    return _MARKDOWN.sub(r"\\\1", html(value).replace("&#x27;", "'"))


def json(value: object) -> str:
    """Text for a JSON string that strict parsers accept: lone surrogates (bytes that were not UTF-8) escaped as
    visible text; everything else kept (``json.dumps`` escapes controls)."""
    return _JSON.sub(_escape, decoded(value))
