"""The command line's flags, in groups (as Polygraphy's ``tools/args``): each group adds its click options to a
command and turns what the user gave into the library's plain values (:mod:`mgedump.options`).

- :mod:`.data`: ``-d`` and how test data is made (every command);
- :mod:`.optimize`: ``--optimize-for-inference``, the precision modes and MegEngine's ``--enable-*`` flags;
- :mod:`.pack`, :mod:`.verify`, :mod:`.diff`: each command's own flags;
- :mod:`.spelling`: how messages name an option while a command runs (its flag).

A click parameter is named after the library keyword it sets (``--iter`` sets ``iters``) and defaults to ``None``,
"not given": the dataclass's own default then applies, and ``--help`` states it from there. The group that
declared a parameter takes it out of the command's keyword arguments, so a flag can be followed by reading code:
``--maxerr`` is ``parse_bounds(values.pop("maxerr"), ...)`` in :func:`.pack.pack_options`, which makes
``PackOptions(bounds=...)`` for :func:`mgedump.pack`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import MISSING, fields
from typing import Any

import click

from ...base.errors import UsageError
from ...base.numbers import MAX_DIGITS, parse_float, parse_int, shown

FILE = click.Path()  # a path the shell completes; what it may be is the command's own check, with its message


class _Output(click.Path):
    """A path to write, which the shell completes: an empty one names nothing, so what was asked for would be
    lost; it is refused (what else it may be is the command's own check)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value:
            self.fail("is empty: give a path to write", param, ctx)
        return super().convert(value, param, ctx)


class _Int(click.types.IntParamType):
    """A whole number in ASCII digits, at most 20 of them (``base/numbers.py``): click's own takes ``'１７'`` (17)
    and fails late on thousands of digits."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            try:
                return parse_int(value, "it")
            except UsageError:
                self.fail(f"{shown(value)} is not a valid integer (ASCII digits, at most {MAX_DIGITS})", param, ctx)
        return super().convert(value, param, ctx)


class _Float(click.types.FloatParamType):
    """A number in ASCII digits (``base/numbers.py``), as :class:`_Int` is."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            try:
                return parse_float(value, "it")
            except UsageError:
                self.fail(f"{shown(value)} is not a valid number (ASCII digits, e.g. 0.5 or 1e-3)", param, ctx)
        return super().convert(value, param, ctx)


INT = _Int()  # every integer flag
FLOAT = _Float()  # every number flag
OUTPUT = _Output()  # a file to write
DIR = _Output(file_okay=False)  # a folder to write

Decorator = Callable[[Any], Any]


def default(cls: type, name: str) -> Any:
    """The default of a field of an options dataclass."""
    f = next(f for f in fields(cls) if f.name == name)
    if f.default is not MISSING:
        return f.default
    factory: Any = f.default_factory
    return factory()


def stating(help: str, cls: type, name: str) -> str:
    """A help text that states the dataclass's default."""
    return f"{help}  [default: {default(cls, name)}]"


def stated_number(flag: str, name: str, help: str, cls: type, kind: Any = None) -> Decorator:
    """A flag that takes a number (whole, unless ``kind`` says) and states the dataclass's default in ``--help``."""
    return click.option(flag, name, type=kind or INT, default=None, help=stating(help, cls, name))


def given(values: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """Take these parameters out of a command's keyword arguments; return the ones the user gave."""
    taken = {name: values.pop(name, None) for name in names}
    return {name: value for name, value in taken.items() if value is not None and value != ()}


def path_option(flag: str, name: str, help: str, metavar: str = "FILE", output: bool = False) -> Decorator:
    """A flag that takes a path (``FILE`` or a folder, ``DIR``): the shell completes it; a folder or an ``output``
    to write may not be empty."""
    kind = DIR if metavar == "DIR" else OUTPUT if output else FILE
    return click.option(flag, name, metavar=metavar, type=kind, default=None, help=help)


def choice_option(flag: str, name: str, choices: Sequence[str], help: str) -> Decorator:
    """A flag that takes one of ``choices``."""
    return click.option(flag, name, type=click.Choice(tuple(choices)), default=None, help=help)


def value_option(flag: str, name: str, metavar: str, help: str) -> Decorator:
    """A flag that takes a word (a provider, a variant's name)."""
    return click.option(flag, name, metavar=metavar, default=None, help=help)


def switch(flag: str, name: str, help: str) -> Decorator:
    """An on/off flag (``None`` when not given)."""
    return click.option(flag, name, is_flag=True, default=None, help=help)


def comma_list(flag: str, text: str, example: str) -> tuple[str, ...]:
    """A comma list given to a flag (``--variants fp32,int8``), its items stripped.

    Raises:
        UsageError: no item in it.
    """
    items = tuple(part.strip() for part in text.split(",") if part.strip())
    if not items:
        raise UsageError(f"{flag} {text!r} names nothing, e.g. {example}")
    return items


def apply(decorators: Sequence[Decorator]) -> Decorator:
    """One decorator adding the options of ``decorators`` in the order written (click lists them so)."""

    def decorate(command: Any) -> Any:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return decorate
