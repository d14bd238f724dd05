"""Requests that once allocated tens of GiB (or crashed) now refuse before allocating, under a 4 GiB limit.

Every case runs in one child process whose address space is limited to 4 GiB
with ``resource.setrlimit`` (one interpreter start for all of them, so the
suite stays fast): each must exit 2 with one line that says how much it needs,
and leave every file as it was. A case that really allocated would die with a
MemoryError (a traceback, exit 1) or take the child down with it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests import crafted
from tests.cli.test_hostile import snapshot
from tests.support import SAMPLES, run_ok

LIMIT = 4 << 30

_CHILD = textwrap.dedent(
    """
    import contextlib, io, json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
    from mgedump.cli import mgedump_main, mgerun_main, mgediff_main
    mains = {{"mgedump": mgedump_main, "mgerun": mgerun_main, "mgediff": mgediff_main}}
    results = {{}}
    for case_id, prog, args in json.load(open(sys.argv[1])):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                mains[prog](args)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException as exc:  # a MemoryError that escaped: the case failed, the others still run
                code, err = -1, io.StringIO(f"Traceback: {{type(exc).__name__}}: {{exc}}")
        results[case_id] = {{"code": code, "out": out.getvalue(), "err": err.getvalue()}}
    json.dump(results, open(sys.argv[2], "w"))
    """
)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    return dst


def _npy(path: Path, array: np.ndarray) -> Path:
    np.save(path, array)
    return path


def _bundle(t: Path) -> Path:
    """A bundle of dynamic_batch.onnx, made in the parent (without the limit)."""
    out = t / "b.mgetest"
    run_ok("mgedump", SAMPLES / "dynamic_batch.onnx", "-d", "x:#rand(0,1,2,...)", "-o", out, "-q")
    return out


FREE = SAMPLES / "free_dims.onnx"  # x [N,3,H,W]
BATCH = SAMPLES / "dynamic_batch.onnx"  # x [N,3,16,16]

# (id, program, args builder(t) -> list, what the line must say)
CASES = [
    ("rand-2^31-elements", "mgedump", lambda t: [FREE, "-d", "#rand(0,1,16,3,8192,8192)"], "needs 36.0 GiB of memory"),
    ("randn-huge-batch", "mgedump", lambda t: [BATCH, "-d", "x:#randn(0,1,8000000,...)"], "of memory"),
    ("const-huge", "mgedump", lambda t: [FREE, "-d", "#const(1,4,3,32768,32768)"], "of memory"),
    (
        "input-shape-huge",
        "mgedump",
        lambda t: [FREE, "-d", "#rand(0,1)", "--input-shape", "64,3,8192,8192"],
        "of memory",
    ),
    (
        "resize-to-huge",
        "mgedump",
        lambda t: [FREE, "-d", SAMPLES / "images" / "cat.png", "--resize-input", "--input-shape", "1,3,60000,60000"],
        "--resize-input to 60000x60000",
    ),
    ("npz-expands-to-5-gib", "mgedump", lambda t: [BATCH, "-d", crafted.zeros_npz(t / "z.npz", 5 << 30)], "z.npz"),
    (
        "repeat-10^12",
        "mgedump",
        lambda t: [BATCH, "-d", _npy(t / "x.npy", np.zeros((1, 3, 16, 16), np.float32)), "--repeat", str(10**12)],
        "--repeat 1000000000000",
    ),
    (
        "mgerun-repeat-10^9",
        "mgerun",
        lambda t: [BATCH, "-d", _npy(t / "x.npy", np.zeros((1, 3, 16, 16), np.float32)), "--repeat", str(10**9)],
        "--repeat 1000000000",
    ),
    ("mgerun-iter-10^12", "mgerun", lambda t: [_bundle(t), "--iter", str(10**12)], "--iter 1000000000000"),
    ("mgerun-repeat-sweep-10^10", "mgerun", lambda t: [_bundle(t), "--repeat-sweep", f"1,{10**10}"], "--repeat-sweep"),
    ("mgerun-thread-2^40", "mgerun", lambda t: [_bundle(t), "--thread", str(2**40)], "--thread"),
    ("mgerun-plain-rand-huge", "mgerun", lambda t: [FREE, "-d", "#rand(0,1,16,3,8192,8192)"], "of memory"),
    ("mgediff-rand-huge", "mgediff", lambda t: [FREE, FREE, "-d", "#rand(0,1,16,3,8192,8192)"], "of memory"),
    (
        "png-declares-huge",
        "mgedump",
        lambda t: [FREE, "-d", crafted.write(t / "x.png", crafted.png_declaring(100_000, 100_000))],
        "x.png",
    ),
    (
        "npy-declares-2^40",
        "mgedump",
        lambda t: [FREE, "-d", crafted.write(t / "x.npy", crafted.npy_bytes("<f4", (1 << 40, 3, 1, 1), b"\0" * 64))],
        "x.npy",
    ),
]


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict:
    """Every case run in the limited child: {id: (result, files before, files after)}."""
    root = tmp_path_factory.mktemp("memory")
    todo, folders = [], {}
    for case_id, prog, build, _ in CASES:
        folder = root / case_id
        folder.mkdir()
        existing = folder / "existing.out"
        existing.write_bytes(b"must survive\n")
        args = [str(a) for a in build(folder)]
        args += ["-o", str(existing)] if prog == "mgedump" else ["--report-json", str(existing)]
        folders[case_id] = (folder, snapshot(folder))
        todo.append([case_id, prog, args])
    (root / "cases.json").write_text(json.dumps(todo), encoding="utf-8")
    child = subprocess.run(
        [sys.executable, "-c", _CHILD.format(limit=LIMIT), root / "cases.json", root / "results.json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    results = json.loads((root / "results.json").read_text(encoding="utf-8"))
    return {case_id: (results[case_id], before, snapshot(folder)) for case_id, (folder, before) in folders.items()}


@pytest.mark.parametrize("case_id, prog, needle", [(c[0], c[1], c[3]) for c in CASES], ids=[c[0] for c in CASES])
def test_refused_before_allocating_under_a_4_gib_limit(ran, case_id, prog, needle):
    result, before, after = ran[case_id]
    assert "Traceback" not in result["err"] + result["out"], result["err"]
    assert result["code"] == 2, result
    lines = result["err"].strip().splitlines()
    assert len(lines) == 1, result["err"]
    assert lines[0].startswith(f"{prog}: error: ") and needle in lines[0], lines[0]
    assert after == before
