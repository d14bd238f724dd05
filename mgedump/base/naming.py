"""How a message names an option: in the words of the surface the user is on.

The library's messages name an option by its keyword (``maxerr``, ``precision='ioc16'``): that is what a caller of
:func:`mgedump.pack` typed. The command line speaks of flags (``--maxerr``, ``--enable-ioc16``): while a command
runs it installs its own spelling (:func:`spoken_as`, from :mod:`mgedump.cli.flags.spelling`), so one message
reads right in a Python traceback and on a terminal, and the library holds no flag's text.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

Speller = Callable[[str, Any], str]
"""Names one option: (its keyword, a value or :data:`NO_VALUE`) -> the text a message shows."""

NO_VALUE: Any = object()  # the option itself, not one of its values


def keyword(name: str, value: Any = NO_VALUE) -> str:
    """The library's spelling: ``maxerr``, ``precision='ioc16'``."""
    return name if value is NO_VALUE else f"{name}={value!r}"


_speller: ContextVar[Speller] = ContextVar("mgedump_speller", default=keyword)


def option_name(name: str, value: Any = NO_VALUE) -> str:
    """An option (or one value of it) as the surface in use names it.

    Args:
        name: the option's keyword, as the options dataclasses name their field (``report_json``).
        value: a value that has a name of its own on some surface (``precision``'s ``"ioc16"`` is
            ``--enable-ioc16`` on the command line).
    """
    return _speller.get()(name, value)


@contextlib.contextmanager
def spoken_as(speller: Speller) -> Iterator[None]:
    """Name options with ``speller`` for the duration of the block (the command line's flags)."""
    token = _speller.set(speller)
    try:
        yield
    finally:
        _speller.reset(token)
