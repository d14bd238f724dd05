"""Run ``mgerun`` and ``mgerun-native`` on one bundle and compare what they say (docs/native.md, Conformance).

What is compared, in this order:

- the exit code;
- exit 0 or 1: the verdict lines of stdout, parsed: per variant (``== PATH [NAME]``) and test case
  (``test case N``), every ``AssertEqual[ STAT]: err=...[ (max ...)] (name=...)`` line (the output, the statistic
  and the largest error beside it when it is not max, ``err`` to 6 significant
  digits, passed or FAILED, the reason after ``FAILED (maxerr=...)``, the bound), where the worst element is, a
  test case whose model failed to run, and each closing line (``all N test case(s) passed``, ``FAILED: ...``);
- exit 2: the class of each refusal (the lines on stderr, and ``ERROR (exit 2): ...`` lines on stdout), decided
  by :data:`CLASSES` from ``mgerun``'s own messages, and that stderr holds them one line each.

Timings, memory, where it ran and the statistics line are not compared: they are the machine's, not the verdict.
"""

from __future__ import annotations

import glob
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

NATIVE_ENV = "MGERUN_NATIVE"
PREFIX_ENV = "MGERUN_NATIVE_PREFIX"  # a runner put before the binary: ``qemu-aarch64 -L /usr/aarch64-linux-gnu``
REQUIRE_ENV = "MGEDUMP_REQUIRE_NATIVE"


@dataclass
class Outcome:
    """What one verifier did with one bundle."""

    code: int
    out: str
    err: str


# ---------------------------------------------------------------- the two verifiers


def native_binary() -> str | None:
    """``mgerun-native``: env MGERUN_NATIVE, else beside this interpreter (an installed wheel), else on PATH."""
    given = os.environ.get(NATIVE_ENV)
    if given:
        return given
    return shutil.which("mgerun-native", path=os.path.dirname(sys.executable)) or shutil.which("mgerun-native")


def onnxruntime_library() -> str | None:
    """The shared library of the onnxruntime wheel ``mgerun`` imports, so both verifiers run the same kernels."""
    import onnxruntime

    found = sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), "capi", "libonnxruntime.so*")))
    return found[-1] if found else None


def native_env() -> dict[str, str]:
    env = dict(os.environ)
    if "MGERUN_ORT_LIB" not in env:
        library = onnxruntime_library()
        if library:
            env["MGERUN_ORT_LIB"] = library
    return env


def run_native(binary: str, args: list[str], timeout: float = 120) -> Outcome:
    command = [*shlex.split(os.environ.get(PREFIX_ENV, "")), binary, *args]
    done = subprocess.run(command, capture_output=True, text=True, env=native_env(), timeout=timeout)
    return Outcome(done.returncode, done.stdout, done.stderr)


def run_mgerun(args: list[str], timeout: float = 120) -> Outcome:
    """The installed ``mgerun`` console script, in a process of its own."""
    from tests.support import script

    done = subprocess.run([script("mgerun"), *args], capture_output=True, text=True, timeout=timeout)
    return Outcome(done.returncode, done.stdout, done.stderr)


# ---------------------------------------------------------------- refusal classes

# (class, pattern): the first pattern found in a refusal's message names its class. The patterns are the fixed
# words of mgerun's messages (mgedump/bundle/reader.py, format.py, commands/verify_prepare.py, model/runtime.py);
# names, sizes and paths around them do not count.
CLASSES: list[tuple[str, str]] = [
    ("not-a-zip", r"not a bundle \(corrupt or not a zip archive"),
    ("unsafe-name", r"is not a safe relative path"),
    ("duplicate", r"appears twice in the archive"),
    ("file-and-folder", r"is a file and also the folder of"),
    ("differ-in-case", r"differ only in case"),
    ("manifest-not-first", r"the first member is not mgedump\.json"),
    ("compressed", r"is compressed; bundle members are stored"),
    ("manifest-too-large", r"manifest is larger than \d+ bytes"),
    ("manifest-not-json", r"manifest is not valid JSON"),
    ("format", r"manifest format is .*, expected 'mgedump-bundle'"),
    ("format-version-invalid", r"has no valid format_version"),
    ("format-version-newer", r"bundle format version \d+ is newer than"),
    ("format-version-unknown", r"unknown bundle format version"),
    ("refers-unlisted", r"refers to member .*, which it does not list"),
    ("refers-twice", r"refers to member .* more than once"),
    ("not-listed", r"is not listed in the manifest"),
    ("missing", r"is listed in the manifest but missing"),
    ("order", r"members are not in the manifest's order"),
    ("past-end", r"runs past the end of the file"),
    ("size", r"is \d+ bytes, manifest says \d+"),
    ("tampered", r"does not match its sha256|is corrupt or tampered with"),
    ("cannot-read", r"cannot read member|is encrypted"),
    ("tensor-invalid", r"is not a valid (TensorProto|seq|map|optional)"),
    ("tensor-name", r"holds tensor .*, expected"),
    ("input-dtype", r"holds \S+, but the model's input .* takes"),
    ("input-shape", r"fixes dim \d+ to|has rank \d+ \(shape"),
    ("model-ir", r"IR version \d+ is newer than this onnxruntime"),
    ("model-invalid", r"not a valid ONNX model|onnxruntime cannot load the model|does not support the model's opset"),
    ("model-io", r"the model's inputs/outputs do not match the manifest"),
    ("external-data", r"the model reads external data from"),
    ("requirement-unknown", r"needs .*, which this \S+ does not know"),
    ("requirement-unmet", r"the bundle's (int8 )?model (uses|needs)"),
    ("variant-unknown", r"has no variant"),
    ("variant-of-one-model", r"holds one model, the \S+ variant"),
    ("variant-unnamed", r"holds the variants .*: name one"),
    ("not-supported", r"does not do|is mgerun's|use mgerun"),
]
_MALFORMED = re.compile(r"manifest is malformed: (?:([^:]*): )?")
_OPTION = re.compile(r"^(--[a-z-]+) must be|Invalid value for '(--[a-z-]+)'")
_PREFIX = re.compile(r"^[\w.-]+: error: ")


def refusal_class(line: str) -> str:
    """The class of one refusal line: ``malformed:PATH`` for a schema violation (the first path it names),
    ``option:--FLAG`` for a bad option value, else a class of :data:`CLASSES`; ``unclassified: LINE`` when none
    fits (the table then needs a row)."""
    message = _PREFIX.sub("", line.strip())
    option = _OPTION.search(message)
    if option:
        return f"option:{option.group(1) or option.group(2)}"
    malformed = _MALFORMED.search(message)
    if malformed:
        return f"malformed:{malformed.group(1) or ''}"
    for name, pattern in CLASSES:
        if re.search(pattern, message):
            return name
    return f"unclassified: {message}"


# ---------------------------------------------------------------- verdict lines

_HEADER = re.compile(r"^== (?P<path>.*?)(?: \[(?P<variant>[^\]]+)\])?$")
_CASE = re.compile(r"^test case (?P<index>\d+) \(.*?\)(?P<failed>: FAILED: the model failed to run: .*)?$")
_ASSERT = re.compile(
    r"^AssertEqual(?: (?P<stat>p99|mean|median))?: err=(?P<err>\S+)(?: \(max (?P<largest>\S+)\))? \(name=(?P<name>.*?)\)"
    r"(?: FAILED \(maxerr=(?P<maxerr>[^)]*)\)(?:: (?P<reason>.*))?)?$"
)
_WORST = re.compile(r"^  worst element at (?P<where>.*?): expect=")
_ERROR = re.compile(r"^(?:.*: )?ERROR \(exit (?P<code>\d+)\): (?P<message>.*)$")
_CLOSING = re.compile(
    r"(?P<closing>all \d+ test case\(s\) (passed|ran \(no assertions\))|FAILED: \d+ of \d+ test case\(s\) failed)$"
)
_TOTAL = re.compile(r"^(?P<total>\d+ runs? of \d+ bundle\(s\): \d+ passed, \d+ failed, \d+ could not run)")


def six(err: str) -> str:
    """``err`` as 6 significant digits (``n/a`` and ``inf`` as they are)."""
    try:
        value = float(err)
    except ValueError:
        return err
    if math.isnan(value) or math.isinf(value):
        return str(value)
    return f"{value:.6g}"


def verdicts(out: str) -> list[tuple]:
    """The verdict lines of one run's stdout, in order, as comparable tuples."""
    found: list[tuple] = []
    for line in out.splitlines():
        if m := _HEADER.match(line):
            found.append(("variant", m["variant"]))
        elif m := _CASE.match(line):
            found.append(("case", int(m["index"]), "model failed to run" if m["failed"] else "ran"))
        elif m := _ASSERT.match(line):
            failed = m["maxerr"] is not None
            found.append(("assert", m["name"], six(m["err"]), "FAILED" if failed else "ok", m["maxerr"] or "",
                          m["reason"] or "", m["stat"] or "max", six(m["largest"] or "")))  # fmt: skip
        elif m := _WORST.match(line):
            found.append(("worst", m["where"]))
        elif m := _ERROR.match(line):
            found.append(("error", int(m["code"]), refusal_class(m["message"])))
        elif m := _TOTAL.match(line):
            found.append(("total", m["total"]))
        elif m := _CLOSING.search(line):
            found.append(("closing", m["closing"]))
    return found


def refusals(outcome: Outcome) -> list[str]:
    """The classes of a refused run's error lines (stderr, and ERROR lines of stdout), each once, in order."""
    classes = [refusal_class(line) for line in outcome.err.splitlines() if _PREFIX.match(line)]
    classes += [v[2] for v in verdicts(outcome.out) if v[0] == "error"]
    return list(dict.fromkeys(classes))


def differences(reference: Outcome, native: Outcome) -> list[str]:
    """How ``native`` differs from ``reference`` (mgerun), in words; empty when they agree."""
    problems = []
    if reference.code != native.code:
        problems.append(f"exit code: mgerun {reference.code}, mgerun-native {native.code}")
    if "Traceback" in native.err or native.code < 0:
        problems.append(f"mgerun-native crashed (exit {native.code}): {native.err[-500:]}")
    if reference.code == 2 or native.code == 2:
        want, got = refusals(reference), refusals(native)
        if want != got:
            problems.append(f"refusal class: mgerun {want}, mgerun-native {got}")
        error_lines = [line for line in native.err.splitlines() if line.strip()]
        if native.code == 2 and reference.err.count("\n") <= 1 and len(error_lines) != 1:
            problems.append(f"mgerun-native refused with {len(error_lines)} lines on stderr, not one: {native.err!r}")
        return problems
    want, got = verdicts(reference.out), verdicts(native.out)
    if want != got:
        problems.append("verdict lines differ:\n" + _side_by_side(want, got))
    return problems


def _side_by_side(want: list[tuple], got: list[tuple]) -> str:
    rows = []
    for k in range(max(len(want), len(got))):
        a = want[k] if k < len(want) else "-"
        b = got[k] if k < len(got) else "-"
        rows.append(f"  {'  ' if a == b else '!!'} mgerun {a}\n     native {b}")
    return "\n".join(rows)


def bundle_args(entry: dict) -> list[str]:
    from tests.native.corpus import RUN

    return [entry["path"], *RUN, *entry["args"]]


def corpus_root(base: Path) -> Path:
    return base / "native-corpus"
