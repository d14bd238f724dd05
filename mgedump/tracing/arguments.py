"""The checks of what users give ``trace(...)`` and ``trace.dump(...)``: a value of the wrong type is a TypeError
that names the keyword, the type expected and the type given, before anything runs or is written.

This module imports no other module of the tracing framework but the dispatch layer (for the tensor type).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .dispatch import TensorBase


def _given(value: Any) -> str:
    """How a message names a value that was given: its type, and a short repr."""
    text = " ".join(repr(value).split())  # one line
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def flag(where: str, value: Any) -> bool:
    """A switch: True or False (numpy's bools, and the ints 0 and 1, are taken too).

    Raises:
        TypeError: anything else (a string such as ``"no"`` would otherwise count as True).
    """
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and value in (0, 1)):
        return bool(value)
    raise TypeError(f"{where} takes True or False, got {_given(value)}")


def names(where: str, value: Any) -> list[str] | None:
    """Names of inputs or outputs: None, one str, or a list or tuple of str.

    Raises:
        TypeError: another type, or an item that is not a str.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{where} takes a str or a list of str, got {_given(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise TypeError(f"{where} takes a str or a list of str; item {i} is {_given(item)}")
    return list(value)


def path(where: str, value: Any) -> str | None:
    """A path to write: None, a str or an ``os.PathLike`` of str.

    Raises:
        TypeError: another type (a number, bytes, a file object).
    """
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if isinstance(text, str):
            return text
    raise TypeError(f"{where} takes a path (a str or os.PathLike), got {_given(value)}")


def test_cases(key: str, value: Any) -> list[Any] | None:
    """The test cases of a bundle (keyword ``key`` of dump): None, or a list or tuple, one item per test case.

    Raises:
        TypeError: a str (it would be read one character per test case), a dict, an array or a
            Tensor (one test case: wrap it in a list), or another type.
    """
    if value is None or isinstance(value, (list, tuple)):
        return None if value is None else list(value)
    if isinstance(value, (str, bytes)):
        hint = f"wrap the spec in a list: {key}=[{value!r}]"
    elif isinstance(value, (dict, np.ndarray, TensorBase)):
        hint = f"wrap one test case in a list: {key}=[...]"
    else:
        hint = f"e.g. {key}=['#rand(0,1)']"
    raise TypeError(f"dump({key}=...) takes a list of test cases (one item per test case), got {_given(value)}; {hint}")


def number(where: str, value: Any) -> float | None:
    """A threshold: None or a real number.

    Raises:
        TypeError: a bool, a str or another type.
    """
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where} takes a number, got {_given(value)}")
    return float(value)


def text(where: str, value: Any) -> str | None:
    """A word such as a format's name: None or a str.

    Raises:
        TypeError: another type.
    """
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"{where} takes a str, got {_given(value)}")


def level(where: str, value: Any, top: int) -> int:
    """An int from 0 to ``top``.

    Raises:
        TypeError: not an int (a bool is not taken).
        ValueError: out of range.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where} takes an int from 0 to {top}, got {_given(value)}")
    if not 0 <= value <= top:
        raise ValueError(f"{where} must be from 0 to {top}, got {value}")
    return int(value)


def target(value: Any) -> Any:
    """Where ``dump`` writes: a path, or a binary file object.

    Raises:
        TypeError: anything else.
    """
    if isinstance(value, (str, os.PathLike)) or hasattr(value, "write"):
        return value
    raise TypeError(f"dump(file=...) takes a path or a binary file object, got {_given(value)}")


# MegEngine's dump keywords for its own graph format, with their defaults: taken at the default only
MEGENGINE_ONLY = {
    "append": (False, "appending a graph to a MegEngine model file"),
    "keep_opr_priority": (False, "MegEngine's operator execution priorities"),
    "no_change_graph": (False, "MegEngine's graph rewrites for older loaders"),
    "user_info": (None, "user data stored in a MegEngine model"),
    "repeat": (1, "repeating one input image across a batch in MegEngine's test cases"),
    "resize_input": (False, "resizing input images in MegEngine's test cases"),
    "input_transform": (None, "a transform of input images in MegEngine's test cases"),
    "model_version": (2, "the version of MegEngine's model format"),
    "compat_older_version": (None, "compatibility with older MegEngine versions"),
}
IGNORED = ("enable_metadata",)  # taken and ignored: an ONNX model always carries its metadata


def megengine_only(given: dict[str, Any]) -> None:
    """Take MegEngine's format keywords out of ``given``: at their defaults they mean nothing here.

    Raises:
        NotImplementedError: one of them away from its default.
    """
    for name, (default, what) in MEGENGINE_ONLY.items():
        if name in given:
            value = given.pop(name)
            if not (value is default or (type(value) is type(default) and value == default)):
                raise NotImplementedError(
                    f"dump({name}=...) is {what}, which has no counterpart in an ONNX model; leave it out "
                    f"(or give its default, {default!r})"
                )
    for name in IGNORED:
        if name in given:
            flag(f"dump({name}=...)", given.pop(name))


@dataclass(frozen=True)
class DumpArgs:
    """The keywords of :meth:`mgedump.tracing.jit.trace.dump`, checked (see its docstring for their meaning)."""

    file: Any
    arg_names: list[str] | None
    output_names: list[str] | None
    optimize_for_inference: bool
    keep_var_name: int
    keep_opr_name: bool
    keep_param_name: bool
    strip_info_file: str | None
    append_json: bool
    input_data: list[Any] | None
    maxerr: float | None
    no_assert: bool
    silent: bool
    dump_format: str | None
    variants: list[str] | None = None
    enable_flags: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def checked(cls, file: Any, keywords: dict[str, Any], order: Sequence[str]) -> DumpArgs:
        """The keywords (every name of ``order``, then the ``enable_*`` flags), each of the type it needs.

        Raises:
            TypeError: a keyword of the wrong type, named with the type it takes.
            ValueError: ``keep_var_name`` out of 0..2.
            NotImplementedError: a MegEngine-only keyword away from its default.
        """
        given = dict(keywords)
        megengine_only(given)
        values = {name: given.pop(name) for name in order}
        switches = ("optimize_for_inference", "keep_opr_name", "keep_param_name", "append_json", "no_assert", "silent")
        for name in switches:
            values[name] = flag(f"dump({name}=...)", values[name])
        for name in ("arg_names", "output_names"):
            values[name] = names(f"dump({name}=...)", values[name])
        values["keep_var_name"] = level("dump(keep_var_name=...)", values["keep_var_name"], 2)
        values["strip_info_file"] = path("dump(strip_info_file=...)", values["strip_info_file"]) or None
        values["input_data"] = test_cases("input_data", values["input_data"])
        values["maxerr"] = number("dump(maxerr=...)", values["maxerr"])
        values["dump_format"] = text("dump(dump_format=...)", values["dump_format"])
        values["variants"] = names("dump(variants=...)", values["variants"])
        flags = {k: flag(f"dump({k}=...)", v) if k.startswith("enable_") else v for k, v in given.items()}
        return cls(file=target(file), enable_flags=flags, **values)
