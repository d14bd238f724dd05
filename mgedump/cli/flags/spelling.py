"""How messages name an option while a command runs: by its flag (:mod:`mgedump.base.naming`).

The flags are read off the command's own click parameters, each named after the library keyword it sets, so
no flag is written twice: ``iters`` is ``--iter`` because ``click.option("--iter", "iters")`` says so. A
precision mode is named by the flag that chooses it (MegEngine's ``--enable-ioc16``, ``--quantize int8``).
"""

from __future__ import annotations

from typing import Any

import click

from ...base.naming import NO_VALUE, Speller
from .optimize import FLOAT16_FLAGS, QUANTIZE_MODES


def precision_flag(mode: str) -> str:
    """The flags that choose a precision mode."""
    if mode in FLOAT16_FLAGS:
        return FLOAT16_FLAGS[mode]
    quantized = {name: setting for setting, name in QUANTIZE_MODES.items()}
    if mode in quantized:
        return "--quantize int8" + ("" if quantized[mode] == "static" else f" --quantize-mode {quantized[mode]}")
    return f"precision {mode!r}"


def speller(command: click.Command) -> Speller:
    """Names options as the flags of ``command`` (the short form where a flag has one: ``-d``, ``-o``)."""
    flags: dict[str, str] = {}
    for param in command.get_params(click.Context(command, **command.context_settings)):
        if isinstance(param, click.Option) and param.name:
            short = [o for o in param.opts if not o.startswith("--")]
            flags.setdefault(param.name, (short or param.opts)[0])
    flags.setdefault("output_maxerr", flags.get("maxerr", "--maxerr"))
    flags.setdefault("output_error_stat", flags.get("error_stat", "--error-stat"))
    flags.setdefault("bounds", flags.get("maxerr", "--maxerr"))  # the options' field that --maxerr sets

    def spell(name: str, value: Any = NO_VALUE) -> str:
        if name == "precision" and value is not NO_VALUE:
            return precision_flag(value)
        flag = flags.get(name) or "--" + name.replace("_", "-")
        if value is NO_VALUE:
            return flag
        return f"{flag} {value}:" if name in ("output_maxerr", "output_error_stat") else f"{flag} {value}"

    return spell
