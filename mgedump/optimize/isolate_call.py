"""What crosses between a search and its child, on disk: the test cases, a run's settings, and the result of a
function of ``mgedump`` the child calls (:meth:`~mgedump.optimize.isolate.Opener.call`).

The runs with every tensor exposed (a reference dumped for the float16 search, a candidate's diagnosis) are calls:
the child imports the function named, calls it on the test cases and writes what it returns into the search's
scratch folder as JSON (:func:`save_result`: dataclasses by name, tuples, numpy's scalars and arrays by dtype); the
parent reads that file back building only the dataclasses the caller names (the diagnosis's own records), so the
file can build nothing else, and no pickle crosses. :func:`answer` is the child's side and never
raises: any error becomes the reply's ``error``, its kind kept.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Mapping, Sequence
from contextlib import redirect_stdout
from typing import Any

import numpy as np

from ..diagnose.exposed import ModelDumper
from ..model.session import SessionSettings


def save_cases(cases: Sequence[Mapping[str, np.ndarray]], path: str) -> dict[str, Any]:
    """Write the test cases into one ``.npz`` file (``c{case}_i{input}``); the job's description of them: the file,
    the input names in order, and how many of them each case gives.

    Raises:
        ValueError: the cases give different inputs, or in another order.
    """
    names: list[str] = []
    for feeds in cases:
        names += [n for n in feeds if n not in names]
    arrays = {}
    counts = []
    for k, feeds in enumerate(cases):
        order = [n for n in names if n in feeds]
        if order != names[: len(order)]:  # every case gives the same inputs, in one order
            raise ValueError("test cases give different inputs")
        counts.append(len(order))
        arrays.update({f"c{k}_i{j}": np.asarray(feeds[n]) for j, n in enumerate(order)})
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return {"file": path, "names": names, "counts": counts}


def load_cases(spec: Mapping[str, Any]) -> list[dict[str, np.ndarray]]:
    """The test cases :func:`save_cases` wrote."""
    names = spec["names"]
    with np.load(spec["file"]) as data:
        return [
            {name: data[f"c{k}_i{j}"] for j, name in enumerate(names[:count])} for k, count in enumerate(spec["counts"])
        ]


def settings_json(settings: SessionSettings | None) -> dict[str, Any] | None:
    """A run's session settings as the child gets them."""
    return None if settings is None else settings.to_json()


def run_settings(value: Mapping[str, Any] | None) -> SessionSettings | None:
    """The settings :func:`settings_json` wrote."""
    return None if value is None else SessionSettings.from_json(value)


def dump_exposed(
    cases: Sequence[Mapping[str, np.ndarray]],
    numbers: Sequence[int],
    path: str,
    sha256: str,
    folder: str,
    settings: Mapping[str, Any] | None,
    label: str,
) -> None:
    """Run a model with every tensor exposed on the test cases (numbered ``numbers``) and dump it into ``folder``
    (the io dump format): a call for the child, whose dump the parent reads."""
    with ModelDumper(path, sha256, run_settings(settings), label=label) as dumper:
        dumper.dump(folder, zip(numbers, cases, strict=True))


def answer(job: Mapping[str, Any]) -> dict[str, Any]:
    """The child's side of a call: ``job["call"]`` (``module:function``, a module of mgedump) called with the test
    cases (``cases=``) and ``job["args"]``, its result written into ``job["result"]`` (:func:`save_result`); the reply
    to send back."""
    from ..base import errors

    try:
        module_name, _, function_name = str(job["call"]).partition(":")
        if module_name.split(".")[0] != "mgedump":
            raise ValueError(f"not a function of mgedump: {job['call']!r}")
        import importlib

        function = getattr(importlib.import_module(module_name), function_name)
        cases = load_cases(job["cases"])
        with redirect_stdout(io.StringIO()):  # the replies own the child's stdout
            result = function(cases=cases, **job["args"])
        save_result(result, job["result"])
        return {"ok": True}
    except errors.MgeError as exc:
        return {"ok": False, "error": exc.message, "hint": exc.hint, "kind": type(exc).__name__}
    except Exception as exc:
        detail = " ".join(str(exc).split())[:300]
        return {"ok": False, "error": f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__}


def reply_error(reply: Mapping[str, Any], what: str) -> Exception:
    """The error a call's failed reply stands for: an error of mgedump's own kind as raised in the child, any other
    an :class:`~mgedump.base.errors.OptimizeError` that names the call."""
    from ..base import errors

    kind = getattr(errors, str(reply.get("kind")), None)
    message = str(reply.get("error") or "it failed")
    hint = reply.get("hint")
    hint = hint if isinstance(hint, str) else None
    if isinstance(kind, type) and issubclass(kind, errors.MgeError) and kind.__module__ == errors.__name__:
        return kind(message, hint=hint)
    return errors.OptimizeError(f"{what}: {message}", hint=hint)


def _encode(value: Any) -> Any:
    """A result as JSON values: each dataclass, tuple, mapping and numpy value tagged with what to build back."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kind = type(value)
        fields = {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"$class": f"{kind.__module__}:{kind.__qualname__}", "fields": fields}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, tuple):
        return {"$tuple": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return {"$map": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, (np.generic, np.ndarray)) and value.dtype.kind in "biufc":
        array = np.asarray(value)
        values = array.tolist()
        if array.dtype.kind == "c":
            values = [[z.real, z.imag] for z in array.ravel().tolist()]
        return {"$numpy": array.dtype.str, "shape": list(array.shape), "scalar": np.isscalar(value), "values": values}
    raise TypeError(f"a {type(value).__name__} cannot cross from the child")


def _decode(value: Any, allowed: Mapping[str, type]) -> Any:
    if isinstance(value, list):
        return [_decode(v, allowed) for v in value]
    if not isinstance(value, dict):
        return value
    if "$class" in value:
        kind = allowed.get(value["$class"])
        if kind is None:
            raise TypeError(f"{value['$class']} is not part of the result")
        return kind(**{name: _decode(v, allowed) for name, v in value["fields"].items()})
    if "$tuple" in value:
        return tuple(_decode(v, allowed) for v in value["$tuple"])
    if "$map" in value:
        return {_decode(k, allowed): _decode(v, allowed) for k, v in value["$map"]}
    if "$numpy" in value:
        dtype = np.dtype(value["$numpy"])
        if dtype.kind not in "biufc":
            raise TypeError(f"numpy dtype {dtype} is not part of the result")
        values = value["values"]
        if dtype.kind == "c":
            values = [complex(re, im) for re, im in values]
        array = np.array(values, dtype=dtype).reshape(value["shape"])
        return array[()] if value["scalar"] else array
    raise TypeError(f"an object with keys {sorted(value)[:3]} is not part of the result")


def save_result(result: Any, path: str) -> None:
    """Write a call's result as JSON (see :func:`load_result`).

    Raises:
        TypeError: it holds a value that cannot cross (a class of its own that is not a dataclass, bytes, ...).
    """
    with open(path, "w", encoding="utf-8") as f:
        json.dump(_encode(result), f)


def load_result(path: str, allowed: Sequence[type], what: str) -> Any:
    """The result a call wrote, built of these dataclasses (besides JSON's plain values, tuples, mappings and
    numpy's numbers) and no other.

    Raises:
        OptimizeError: the file is missing, or holds anything else.
    """
    from ..base.errors import OptimizeError

    classes = {f"{c.__module__}:{c.__qualname__}": c for c in allowed}
    try:
        with open(path, encoding="utf-8") as f:
            return _decode(json.load(f), classes)
    except Exception as exc:  # a file that is missing, cut short or holds another class
        raise OptimizeError(f"{what}: its result cannot be read back ({type(exc).__name__}: {exc})") from None
