"""Click options generated from the options dataclasses' declarations (:func:`mgedump.options.option`).

Every generated click option defaults to ``None``, "not given": :func:`build`
passes only what the user gave to the dataclass, whose own defaults (stated in
``--help`` from the same declaration) fill in the rest. A flag's text is
turned into its field's value by the declaration's ``parse``, and checked by
the dataclass when it is made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..options import NOT_GIVEN, Flag, declared_flags, default_of

# values that are paths, by their placeholder: the shell completes them (file and folder names). The checks of
# what they may be (an existing regular file, a folder that can be made) are the commands' own, with their messages.
_PATHS = {"FILE": click.Path(), "SPEC": click.Path(), "DIR": click.Path(file_okay=False)}


def _param_name(path: tuple[str, ...]) -> str:
    return "__".join(path)


def _click_option(path: tuple[str, ...], f: Any, flag: Flag) -> Callable[[Any], Any]:
    text = flag.help
    if flag.show_default:
        text = f"{text}  [default: {default_of(f)}]"
    kwargs: dict[str, Any] = {"default": None, "help": text}
    if flag.kind is bool:
        kwargs["is_flag"] = True
    elif flag.choices is not None:
        kwargs["type"] = click.Choice(flag.choices)
    elif flag.metavar in _PATHS:
        kwargs["type"] = _PATHS[flag.metavar]
    else:
        kwargs["type"] = flag.kind
    if flag.metavar:
        kwargs["metavar"] = flag.metavar
    if flag.multiple:
        kwargs["multiple"] = True
    if flag.flag_value is not None:
        kwargs.update(is_flag=False, flag_value=flag.flag_value)
    return click.option(*flag.names, _param_name(path), **kwargs)


def declared_options(cls: type) -> Callable[[Any], Any]:
    """A decorator adding a click option for every flag declared on ``cls`` (groups included)."""

    def decorate(command: Any) -> Any:
        for path, f, flag in reversed(list(declared_flags(cls))):
            command = _click_option(path, f, flag)(command)
        return command

    return decorate


def build(cls: type, ctx: click.Context, values: dict[str, Any]) -> Any:
    """An instance of ``cls`` from the flags the user gave (parsed), every other field at its default.

    ``values`` holds the command's keyword arguments; the ones consumed are removed.
    """
    return _build(cls, (), ctx, values)


def _build(cls: type, prefix: tuple[str, ...], ctx: click.Context, values: dict[str, Any]) -> Any:
    from dataclasses import fields

    given: dict[str, Any] = {}
    for f in fields(cls):
        path = (*prefix, f.name)
        if "group" in f.metadata:
            given[f.name] = _build(f.metadata["group"], path, ctx, values)
            continue
        flag = f.metadata.get("flag")
        if flag is None:
            continue
        name = _param_name(path)
        value = values.pop(name, None)
        source = ctx.get_parameter_source(name)
        if source in (None, click.core.ParameterSource.DEFAULT):
            continue
        parsed = flag.parse(value) if flag.parse is not None else value
        if flag.fills is not None:
            parsed, given[flag.fills] = parsed
            if parsed is NOT_GIVEN:
                continue
        given[f.name] = parsed
    return cls(**given)


def given_flags(cls: type, ctx: click.Context, group: str) -> list[str]:
    """The flags of one group of ``cls`` the user gave, even with their default value (``--seed 0``)."""
    return [
        flag.name
        for path, _, flag in declared_flags(cls)
        if path[0] == group
        and ctx.get_parameter_source(_param_name(path)) not in (None, click.core.ParameterSource.DEFAULT)
    ]
