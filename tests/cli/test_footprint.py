"""A run writes its named outputs and nothing else: no files in $HOME (onnxruntime's telemetry), none left in
$TMPDIR, whatever the command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import sample


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _run(program: str, args: list, home: Path, tmp: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    code = f"import sys; from mgedump.cli import {program}_main; {program}_main(sys.argv[1:])"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], env=env, capture_output=True, text=True, timeout=120
    )


def test_pack_run_and_diff_leave_home_and_tmpdir_as_they_were(tmp_path):
    home, tmp, work = tmp_path / "home", tmp_path / "tmp", tmp_path / "work"
    for folder in (home, tmp, work):
        folder.mkdir()
    cnn = sample("cnn.onnx")
    bundle = work / "c.mgetest"
    steps = [
        ("mgedump", [cnn.path, "-d", cnn.spec, "--embed-io-dump", "-o", bundle]),
        ("mgerun", [bundle, "--iter", "2", "--report-json", work / "r.json", "--io-dump", work / "dump"]),
        ("mgediff", [cnn.path, bundle]),
    ]
    for program, args in steps:
        done = _run(program, args, home, tmp)
        assert done.returncode == 0, done.stderr
        assert _tree(home) == [] and _tree(tmp) == [], (program, _tree(home), _tree(tmp))
