"""What crosses between a search and its child, on disk: the test cases, a run's settings, and the result of a
function of ``mgedump`` the child calls (:meth:`~mgedump.optimize.isolate.Opener.call`).

The runs with every tensor exposed (a reference dumped for the float16 search, a candidate's diagnosis) are calls:
the child imports the function named, calls it on the test cases and pickles what it returns into the search's
scratch folder; the parent reads that file back allowing only the classes the caller names (the diagnosis's own
records and numpy's scalars), so the file can build nothing else. :func:`answer` is the child's side and never
raises: any error becomes the reply's ``error``, its kind kept.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Mapping, Sequence
from contextlib import redirect_stdout
from typing import Any

import numpy as np

from ..diagnose.exposed import ModelDumper, RunSettings

_NUMPY = frozenset(
    {
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy._core.multiarray", "_reconstruct"),
    }
)


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


def settings_json(settings: RunSettings | None) -> dict[str, Any] | None:
    """A run's settings as the child gets them."""
    if settings is None:
        return None
    providers = None if settings.providers is None else list(settings.providers)
    return {
        "providers": providers,
        "threads": settings.threads,
        "graph_opt": settings.graph_opt,
        "budget": settings.budget,
    }


def run_settings(value: Mapping[str, Any] | None) -> RunSettings | None:
    """The settings :func:`settings_json` wrote."""
    if value is None:
        return None
    providers = value["providers"]
    return RunSettings(
        None if providers is None else tuple(providers), value["threads"], value["graph_opt"], value["budget"]
    )


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
    cases (``cases=``) and ``job["args"]``, its result pickled into ``job["result"]``; the reply to send back."""
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
        with open(job["result"], "wb") as f:
            pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
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


class _Allowed(pickle.Unpickler):
    def __init__(self, data: bytes, allowed: Sequence[type]) -> None:
        super().__init__(io.BytesIO(data))
        self._allowed = {(c.__module__, c.__qualname__): c for c in allowed}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._allowed:
            return self._allowed[module, name]
        if (module, name) in _NUMPY:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not part of the result")


def load_result(path: str, allowed: Sequence[type], what: str) -> Any:
    """The result a call pickled, built of these classes (besides Python's plain values and numpy's scalars) and no
    other.

    Raises:
        OptimizeError: the file is missing, or holds anything else.
    """
    from ..base.errors import OptimizeError

    try:
        with open(path, "rb") as f:
            data = f.read()
        return _Allowed(data, allowed).load()
    except Exception as exc:  # a file that is missing, cut short or holds another class
        raise OptimizeError(f"{what}: its result cannot be read back ({type(exc).__name__}: {exc})") from None
