"""Parse ``-d`` data specs (docs/data-specs.md) into items bound to model inputs.

A test case is ``item(;item)*``; an item is ``[INPUT_NAME:]SOURCE``; a source is
a generator (``#rand``, ``#randn``, ``#const``: those of :mod:`.generators`) or a file path. ``-d @FILE``
makes one test case of every non-empty line of FILE.

This module only parses and binds names: it never reads data files, so any
text can be fed to :func:`parse_case` and the only exception it raises is
:class:`~mgedump.base.errors.SpecError`.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from ..base.errors import SpecError
from ..base.numbers import MAX_DIGITS, MAX_FLOAT_CHARS
from .generators import GENERATORS, or_list

_GEN_RE = re.compile(r"^#\s*([A-Za-z_]\w*)\s*\((.*)\)\s*$", re.DOTALL)
_INT_RE = re.compile(rf"^[+-]?[0-9]{{1,{MAX_DIGITS}}}$", re.ASCII)  # base/numbers.py: ASCII, bounded
_FLOAT_RE = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$", re.ASCII)
MAX_DIM = 1 << 31
MAX_LIST_CASES = 100_000


@dataclass(frozen=True)
class Generator:
    """A ``#kind(params[,dims][,...])`` source.

    Attributes:
        kind: the generator's name in :data:`~.generators.GENERATORS` (``rand``, ``randn``, ``const``).
        params: its parameters, MIN, MAX / MEAN, STD / VALUE (ints stay ints, so large int64
            constants are exact).
        dims: the dims given, or None when the shape comes from the model.
        rest: True when the dims end with ``...``: the rest of the shape comes
            from the model.
        text: the source as written.
    """

    kind: str
    params: tuple[int | float, ...]
    dims: tuple[int, ...] | None
    rest: bool
    text: str


@dataclass(frozen=True)
class FileSource:
    """A path to an image, ``.npy``, ``.npz`` or ``.pb`` file, as written."""

    path: str


Source = Generator | FileSource


@dataclass(frozen=True)
class Item:
    """One item of a test case: a source bound to an input name.

    ``name`` is None for a lone unnamed generator that applies to every input.
    """

    name: str | None
    source: Source


@dataclass(frozen=True)
class CaseSpec:
    """One test case as written: its text and where relative paths may be.

    Attributes:
        text: the test case (a ``-d`` value or a line of a list file).
        origin: where it came from, for messages (``-d #2``, ``list.txt:3``).
        base_dir: the list file's folder, searched after the current directory.
        cwd_first: search the current directory before base_dir. Library
            callers that write their own data files into base_dir turn it off.
        list_file: the list file it was read from, if any.
    """

    text: str
    origin: str
    base_dir: str | None = None
    cwd_first: bool = True
    list_file: str | None = None


def _number(token: str, what: str, text: str) -> int | float:
    token = token.strip()
    if len(token) > MAX_FLOAT_CHARS:
        token = token[:MAX_FLOAT_CHARS] + "..."  # refused below, quoted short
    if _INT_RE.match(token):
        return int(token)
    if _FLOAT_RE.match(token):
        value = float(token)
        if math.isfinite(value):
            return value
    raise SpecError(f"bad {what} {token!r} in {text!r}: expected a finite number")


def _dim(token: str, text: str) -> int:
    token = token.strip()
    if not _INT_RE.match(token) or int(token) < 0 or int(token) >= MAX_DIM:
        raise SpecError(f"bad dim {token!r} in {text!r}: dims are whole numbers >= 0")
    return int(token)


def parse_generator(text: str) -> Generator:
    """Parse ``#rand(MIN,MAX[,d0,...][,...])``, ``#randn(...)``, ``#const(...)`` or another registered generator.

    Raises:
        SpecError: the text is not a well-formed generator.
    """
    text = text.strip()
    match = _GEN_RE.match(text)
    kinds = list(GENERATORS.values())
    if not match:
        usages = [kinds[0].usage(), kinds[0].usage(dims=True), *(k.usage() for k in kinds[1:])]
        raise SpecError(f"bad generator {text!r}", hint=f"write {or_list(usages)}")
    name, body = match.group(1), match.group(2)
    kind = GENERATORS.get(name)
    if kind is None:
        raise SpecError(f"unknown generator #{name} in {text!r}", hint=f"use {or_list([f'#{k.name}' for k in kinds])}")
    required = len(kind.params)
    tokens = [t.strip() for t in body.split(",")] if body.strip() else []
    if len(tokens) < required:
        raise SpecError(f"#{name} needs {','.join(kind.params)} in {text!r}")
    params = tuple(_number(tok, "parameter", text) for tok in tokens[:required])
    rest_tokens = tokens[required:]
    rest = bool(rest_tokens) and rest_tokens[-1] == "..."
    if rest:
        rest_tokens = rest_tokens[:-1]
    if "..." in rest_tokens:
        raise SpecError(f"'...' may only end the dims in {text!r}")
    dims = tuple(_dim(tok, text) for tok in rest_tokens)
    if kind.check is not None:
        kind.check(params, text)
    return Generator(name, params, dims if len(tokens) > required else None, rest, text)


def parse_source(text: str) -> Source:
    """Parse one source: a generator when it starts with ``#``, else a path."""
    text = text.strip()
    if not text:
        raise SpecError("empty data source", hint="give a #generator or a file path")
    if text.startswith("#"):
        return parse_generator(text)
    return FileSource(text)


def _inputs_text(names: Sequence[str]) -> str:
    return ", ".join(repr(n) for n in names) if names else "(none)"


def _source_text(source: Source) -> str:
    return source.text if isinstance(source, Generator) else source.path


def bind_item(item: str, input_names: Sequence[str]) -> Item:
    """Bind one item to the longest input name ``N`` such that it starts with ``N:``."""
    bound = [n for n in input_names if item.startswith(n + ":")]
    if bound:
        name = max(bound, key=len)
        return Item(name, parse_source(item[len(name) + 1 :]))
    head, sep, tail = item.partition(":")
    named_generator = bool(sep) and tail.strip().startswith("#")
    if len(input_names) == 1 and not named_generator:
        return Item(input_names[0], parse_source(item))
    if item.startswith("#") or (not sep and item.lower().endswith(".npz")):
        return Item(None, parse_source(item))
    if sep and (named_generator or len(input_names) != 1):
        raise SpecError(f"unknown input name {head!r} in {item!r}; the model's inputs are: {_inputs_text(input_names)}")
    raise SpecError(
        f"{item!r} names no input, and the model has {len(input_names)} inputs: {_inputs_text(input_names)}",
        hint="write NAME:SOURCE items joined by ';'",
    )


def parse_case(text: str, input_names: Sequence[str]) -> list[Item]:
    """Parse a test case ``item(;item)*`` and check that it gives every input once.

    A lone unnamed generator, or a lone unnamed ``.npz`` file, applies to every
    input (a ``.npz`` gives each input the array of its name).

    Args:
        text: the test case as written.
        input_names: the model's inputs, in order.

    Returns:
        The items, one per input in model order, or a single item with name
        None for a generator that applies to every input.

    Raises:
        SpecError: the text is malformed, names an unknown input, gives an input
            twice or leaves one out.
    """
    if not isinstance(text, str):
        raise SpecError(f"a test case must be text, not {type(text).__name__}")
    if "\x00" in text:
        raise SpecError("a test case must not contain NUL characters")
    raw_items = [part.strip() for part in text.split(";")]
    if not any(raw_items):
        raise SpecError("empty test case", hint="give a -d spec such as '#rand(0,255)'")
    if not all(raw_items):
        raise SpecError(f"empty item in test case {text!r}", hint="items are joined by single ';'")
    items = [bind_item(raw, input_names) for raw in raw_items]
    if len(items) == 1 and items[0].name is None:
        return items  # a generator or .npz file for every input
    by_name: dict[str, Item] = {}
    for item in items:
        if item.name is None:
            raise SpecError(
                f"item {_source_text(item.source)!r} has no input name, in a test case with several items; "
                f"the model's inputs are: {_inputs_text(input_names)}"
            )
        if item.name in by_name:
            raise SpecError(f"input {item.name!r} is given twice in {text!r}")
        by_name[item.name] = item
    missing = [n for n in input_names if n not in by_name]
    if missing:
        raise SpecError(
            f"test case {text!r} gives no data for input(s) {_inputs_text(missing)}",
            hint="every model input needs NAME:SOURCE once per test case",
        )
    return [by_name[n] for n in input_names]


MAX_LIST_BYTES = 64 << 20


def is_comment(line: str) -> bool:
    """A list file's comment line: ``#`` followed by whitespace or the end of the line (``#rand(...)`` is a spec)."""
    return line.startswith("#") and (len(line) == 1 or line[1].isspace())


def _read_list_file(path: str) -> bytes:
    """A list file's bytes: a regular file of at most MAX_LIST_BYTES (a FIFO would block; a cut-off file would lose
    test cases silently).

    Raises:
        SpecError: missing, unreadable, not a regular file, or too large.
    """
    try:
        if os.path.exists(path) and not os.path.isfile(path):  # a folder or a socket cannot even be opened
            raise SpecError(f"list file {path!r} is not a regular file")
        with open(path, "rb", opener=_nonblocking) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise SpecError(f"list file {path!r} is not a regular file")
            raw = f.read(MAX_LIST_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"cannot read list file {path!r}: {exc.strerror or exc}") from None
    if len(raw) > MAX_LIST_BYTES:
        raise SpecError(
            f"list file {path!r} is larger than {MAX_LIST_BYTES >> 20} MiB", hint="split it into several lists"
        )
    return raw


def _nonblocking(path: str, flags: int) -> int:
    """Open without waiting for a writer (a FIFO given as a file is then refused, not waited on)."""
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def expand_specs(specs: Sequence[str | CaseSpec]) -> list[CaseSpec]:
    """Turn ``-d`` values into test cases, reading ``@FILE`` list files; CaseSpecs pass through.

    Raises:
        SpecError: no spec, or a list file that is missing, unreadable or empty.
    """
    cases: list[CaseSpec] = []
    for index, spec in enumerate(specs):
        if isinstance(spec, CaseSpec):
            cases.append(spec)
            continue
        if not spec.startswith("@"):
            cases.append(CaseSpec(spec, f"-d #{index + 1}"))
            continue
        list_path = spec[1:]
        raw = _read_list_file(list_path)
        if b"\x00" in raw:
            raise SpecError(f"list file {list_path!r} is not a text file")
        try:
            content = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise SpecError(f"list file {list_path!r} is not UTF-8 text") from None
        base_dir = os.path.dirname(os.path.abspath(list_path))
        found = 0
        for line_no, line in enumerate(content.splitlines(), 1):
            line = line.strip()
            if not line or is_comment(line):
                continue
            if line.startswith("@"):
                raise SpecError(f"{list_path}:{line_no}: list files cannot include other list files")
            cases.append(CaseSpec(line, f"{list_path}:{line_no}", base_dir, list_file=os.path.abspath(list_path)))
            found += 1
        if not found:
            raise SpecError(
                f"list file {list_path!r} has no test cases", hint="one test case per line; '# ...' lines are comments"
            )
        if len(cases) > MAX_LIST_CASES:
            raise SpecError(f"more than {MAX_LIST_CASES} test cases")
    if not cases:
        raise SpecError("no test data given", hint="pass -d '#rand(0,255)' or -d IMAGE / -d @list.txt")
    return cases
