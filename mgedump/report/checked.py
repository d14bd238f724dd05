"""A JSON report read back (``mgerun --merge``, ``--shard-durations``): every field the records read, checked by
type before they read it, so a damaged or crafted report is one line naming the file and the field.

The records' ``from_json`` (:mod:`.schema`) convert what they are given; :func:`check_report` makes sure that is
what they expect: a whole number where they take one (never a bool), a number or a named non-finite number
(``"inf"``) where they take a float, text where they take text, lists and objects where they iterate. Keys the
records do not read are left alone (a newer report may hold more). The rules below follow the records' readers
field by field; ``tests/report/test_checked.py`` damages every field of a real report and expects this error.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..base.bounds import ERROR_STATS
from ..base.errors import UsageError
from ..base.fileio import read_regular
from ..base.jsontypes import is_int, is_number
from .schema import REPORT_VERSION, RunReport

MAX_REPORT_BYTES = 1 << 30  # a report of ten thousand bundles is tens of MB; beyond this, not one of ours

# A rule is a kind ("int", "num", "str", "bool", "any", "null" joined by "|"), an object rule (a dict: key -> rule;
# a key ending in "?" may be missing), or a list rule: ["list", rule].
_NUM = "num"  # a number, or "inf", "-inf", "nan" (a check's error and statistics)
_FIN = "fin"  # a finite number (times, bounds, memory)
_ENVIRONMENT: dict[str, Any] = {  # what the renderers read of an environment (environment.summary)
    "host?": "any",
    "timestamp?": "any",
    "mgedump?": "str|null",
    "onnxruntime?": "str|null",
    "os?": {"system?": "str|null", "release?": "str|null", "": "null"},
    "cpu?": {"model?": "str|null", "arch?": "str|null", "flags?": ["list", "str"], "": "null"},
    "": "null",
}
_SHARD: dict[str, Any] = {
    "index": "int",
    "total": "int",
    "from": "str",
    "by": "str",
    "bundles": "int",
    "of": "int",
    "list?": "str",
    "": "null",
}
_JOBS: dict[str, Any] = {"workers": "int", "timing": "str", "": "null"}
_TIMING: dict[str, Any] = {
    "batch?": "int",
    "concurrency?": "int",
    "latency_ms?": {
        "count?": "int|null",
        **{f"{stat}?": "fin|null" for stat in ("min", "median", "mean", "p90", "p99", "max", "stddev")},
    },
    "latencies_ms?": ["list", _FIN],
    "warmup_ms?": ["list", _FIN],
    "wall_s?": "fin|null",
    "inferences_per_s?": "fin|null",
    "samples_per_s?": "fin|null",
}
_OUTPUT: dict[str, Any] = {
    "name": "str",
    "passed": "bool",
    "err?": "num|null",
    "maxerr": _FIN,
    "reason?": "str|null",
    "worst_index?": ["list", "int"],
    "expect?": "any",
    "get?": "any",
    "stats?": "stats",
    "failure?": ["list", "str"],
    "worst_path?": "str|null",
    "error_stat?": "stat",
    "max_err?": "num|null",
}
_DIAGNOSIS: dict[str, Any] = {
    "maxerr": _FIN,
    "first_divergence?": "object|null",
    "matched?": "int|null",
    "text?": "str|null",
    "top?": ["list", "any"],
    "error?": "str|null",
    "reference?": "str",
}
_CASE: dict[str, Any] = {
    "index": "int",
    "spec?": "str",
    "origin?": "str",
    "passed?": "bool|null",
    "error?": "str|null",
    "outputs?": ["list", _OUTPUT],
    **_TIMING,
    "seconds?": "fin|null",
    "sweep?": ["list", _TIMING],
    "diagnosis?": {**_DIAGNOSIS, "": "null"},
}
_BUNDLE: dict[str, Any] = {
    "source": "str",
    "name?": "str|null",
    "kind?": "str",
    "exit_code": "exit",
    "seconds?": "fin|null",
    "started?": "str|null",
    "error?": "str|null",
    "peak_rss_mib?": "fin|null",
    "variant?": "str|null",
    "part?": "int|null",
    "not_run?": "str|null",
    "assertion?": {"enabled": "bool", "maxerr": _FIN, "": "null"},
    "session?": {
        "providers?": ["list", "str"],
        "threads?": "int|null",
        "graph_opt?": "str|null",
        "iters?": "int",
        "warmup?": "int",
        "duration_s?": "fin|null",
        "concurrency?": "int",
        "execution_mode?": "str|null",
        "provider_options?": "object",
        "session_config?": "object",
        "": "null",
    },
    "cold_start?": {"session_create_ms?": "fin|null", "first_run_ms?": "fin|null", "": "null"},
    "inputs?": ["list", {"name": "str", "dtype": "str", "shape?": ["list", "int|str|null"]}],
    "outputs?": ["list", {"name": "str", "dtype": "str", "shape?": ["list", "int|str|null"]}],
    "profile?": "str|null",
    "op_profile?": [
        "list",
        {
            "op_type": "str",
            "nodes?": "fin|null",
            "calls": "int",
            "total_ms": _FIN,
            "ms_per_run?": "fin|null",
            "share": _FIN,
        },
    ],  # fmt: skip
    "test_cases?": ["list", _CASE],
    "packed_environment?": _ENVIRONMENT,
    "environment_differences?": ["list", "str"],
}
_REPORT: dict[str, Any] = {
    "report_version": "int",
    "exit_code": "run_exit",
    "latency_gate?": "object|null",
    "peak_rss_mib?": "fin|null",
    "environment?": _ENVIRONMENT,
    "bundles?": ["list", _BUNDLE],
    "run?": {"id": "str", "from": "str"},
    "shard?": _SHARD,
    "jobs?": _JOBS,
    "parts?": [
        "list",
        {
            "report": "str",
            "bundles": "int",
            "exit_code": "run_exit",
            "peak_rss_mib?": "fin|null",
            "run?": {"id": "str", "from": "str"},
            "shard?": _SHARD,
            "jobs?": _JOBS,
            "environment?": _ENVIRONMENT,
        },
    ],  # fmt: skip
}


class ReportError(UsageError):
    """A JSON report that is not one ``mgerun`` wrote (exit code 2)."""


def read_report(path: str, what: str = "report") -> tuple[RunReport, dict[str, Any]]:
    """A JSON report from a file: its records and its document, every field checked.

    Raises:
        ReportError: the file cannot be read, is not strict JSON, or is not a report of this version.
    """
    try:
        data = read_regular(path, MAX_REPORT_BYTES)
    except OSError as exc:
        raise ReportError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        document = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ReportError(f"{what} {path} is not a JSON report ({_short(exc)})") from None
    return check_report(document, f"{what} {path}"), document


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def check_report(document: Any, where: str) -> RunReport:
    """The records of a report document, after every field they read is checked.

    Raises:
        ReportError: a field missing or of the wrong type (naming the file and the field), or another version.
    """
    if not isinstance(document, dict) or "report_version" not in document:
        raise ReportError(f"{where} is not an mgerun JSON report (no report_version)")
    version = document["report_version"]
    if version != REPORT_VERSION or not is_int(version):
        raise ReportError(
            f"{where} is report version {json.dumps(version)[:20]}; this mgerun reads version {REPORT_VERSION}"
        )
    try:
        _check(document, _REPORT, "")
        return RunReport.from_json(document)
    except _FieldError as exc:
        raise ReportError(f"{where}: {exc.message}") from None
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:  # a rule missed: still one line
        raise ReportError(
            f"{where} is not a report this mgerun can read ({type(exc).__name__}: {_short(exc)})"
        ) from None


def _check(value: Any, rule: Any, field: str) -> None:
    if isinstance(rule, dict):
        if value is None and rule.get("") == "null":
            return
        if not isinstance(value, dict):
            raise _FieldError(field, "an object", value)
        for key, inner in rule.items():
            if not key:
                continue
            name, optional = key.removesuffix("?"), key.endswith("?")
            if name not in value:
                if optional:
                    continue
                raise _FieldError(f"{field}.{name}".lstrip("."), "present", None, missing=True)
            _check(value[name], inner, f"{field}.{name}".lstrip("."))
    elif isinstance(rule, list):
        if value is None:
            return  # the readers take a missing list and null alike
        if not isinstance(value, list):
            raise _FieldError(field, "a list", value)
        for index, item in enumerate(value):
            _check(item, rule[1], f"{field}[{index}]")
    elif not _is(value, rule):
        raise _FieldError(field, " or ".join(_WORDS[kind] for kind in rule.split("|")), value)


_WORDS = {
    "int": "a whole number",
    "num": "a number",
    "fin": "a finite number",
    "str": "text",
    "bool": "true or false",
    "null": "null",
    "object": "an object",
    "any": "a value",
    "exit": "an exit code (0, 1 or 2)",
    "run_exit": "an exit code (0, 1, 2 or 3)",
    "stats": "an object of statistics",
    "stat": f"one of {', '.join(ERROR_STATS)}",
}


_TYPES: dict[str, type | tuple[type, ...]] = {"str": str, "bool": bool, "object": dict, "null": type(None)}


def _is(value: Any, kind: str) -> bool:
    if kind == "any":
        return True
    if kind == "int":
        return is_int(value)
    if kind == "fin":
        return is_number(value) and math.isfinite(value)
    if kind == "num":
        return (is_number(value) and math.isfinite(value)) or value in ("inf", "-inf", "nan")
    if kind == "exit":
        return is_int(value) and value in (0, 1, 2)
    if kind == "run_exit":
        return is_int(value) and value in (0, 1, 2, 3)
    if kind == "stat":
        return value in ERROR_STATS and isinstance(value, str)
    if kind == "stats":
        return isinstance(value, dict) and all(k in ("shape", "dtype") or _is(v, "num|null") for k, v in value.items())
    if "|" in kind:
        return any(_is(value, part) for part in kind.split("|"))
    return isinstance(value, _TYPES[kind])


class _FieldError(ReportError):
    def __init__(self, field: str, expected: str, got: Any, *, missing: bool = False) -> None:
        self.field = field
        shown = json.dumps(got)[:60]
        super().__init__(
            f"{field} is missing" if missing else f"{field or 'the document'}: expected {expected}, got {shown}"
        )
