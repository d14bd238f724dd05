"""mgerun-native on mutated bundles (scripts/native_fuzz.py; docs/native.md): every run ends in a verdict or a
one-line refusal, within its time, leaving nothing behind and opening no file outside the bundle.

The suite throws a few hundred mutations at the binary; ``python scripts/native_fuzz.py`` throws 10,000. The
rules themselves are checked on stand-in programs that break each one (a signal, two lines, a file left in
TMPDIR, a file opened outside the bundle, a hang), so that the checker is known to catch what it looks for.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

SCRIPT = ROOT / "scripts" / "native_fuzz.py"


def _module():
    spec = importlib.util.spec_from_file_location("native_fuzz", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("native_fuzz", module)
    spec.loader.exec_module(module)
    return module


fuzz = _module()


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A work folder whose seed bundles are packed once for this file's tests."""
    folder = tmp_path_factory.mktemp("native-fuzz")
    fuzz.pack_seeds(folder / "seeds", ["cnn", "variants", "external", "sequences", "multi"])
    return folder


def _run(work: Path, *args: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess, dict]:
    report = work / "report.json"
    report.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--work", str(work), "--json", str(report), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert report.exists(), done.stdout + done.stderr
    return done, json.loads(report.read_text(encoding="utf-8"))


SEEDS = "cnn,variants,external,sequences,multi"


def test_mutations_end_in_a_verdict_or_one_line_refusal(native, work):
    # under an emulator (MGERUN_NATIVE_PREFIX, scripts/native_aarch64.py) a run takes seconds: fewer there
    count = 48 if os.environ.get("MGERUN_NATIVE_PREFIX") else 240
    done, report = _run(work, "--binary", native, "--count", str(count), "--jobs", "2", "--seeds", SEEDS,
                        "--strace-every", "10", "--timeout", "120")  # fmt: skip
    assert report["findings"] == [], done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["runs"] == count
    # every kind of mutation ran, and the runs did not all stop at the same first check
    assert set(report["mutations"]) == set(fuzz.MUTATORS), report["mutations"]
    assert report["exit_codes"].get("2", 0) < 240 and report["exit_codes"].get("2", 0) > 0, report["exit_codes"]
    if shutil.which("strace"):
        assert report["traced"] >= count // 10


def test_a_mutation_is_made_again_from_its_index(work, tmp_path):
    seeds = fuzz.pack_seeds(work / "seeds", SEEDS.split(","))
    for index in (0, 7, 4242):
        first, second = fuzz.make_case(seeds, 3, index), fuzz.make_case(seeds, 3, index)
        assert first == second
    made = {fuzz.make_case(seeds, 3, index)[3] for index in range(50)}
    assert len(made) >= 45  # mutations differ from each other
    assert all(data not in seeds.values() for data in made)  # and from the seeds


def test_tensor_mutations_keep_the_hashes_valid(work):
    """A mutated tensor member gets past the hash check: its size and sha256 in the manifest are fixed."""
    import hashlib

    seeds = fuzz.pack_seeds(work / "seeds", SEEDS.split(","))
    rng = fuzz.random.Random(1)
    for _ in range(20):
        data, what = fuzz.m_tensor(rng, seeds["cnn"])
        members = fuzz.read_zip(data)
        listed = {m["name"]: m for m in json.loads(members[0][1])["members"]}
        for name, body in members[1:]:
            assert listed[name]["size"] == len(body) and listed[name]["sha256"] == hashlib.sha256(body).hexdigest()


def _stand_in(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(0o755)
    return str(path)


STAND_INS = [
    ("signal", "kill -SEGV $$", "killed by signal SIGSEGV"),
    ("two-lines", 'echo "x: error: one" >&2; echo "x: error: two" >&2; exit 2', "refusal of 2 lines on stderr"),
    ("silent-refusal", "exit 2", "refused with nothing on stderr"),
    ("exit-3", "exit 3", "exit code 3"),
    ("left-behind", 'mkdir "$TMPDIR/mgerun-x"; exit 0', "left in TMPDIR"),
    ("beside", 'touch "$(dirname "$1")/out.json"; exit 1', "wrote beside the bundle"),
    ("sanitizer", 'echo "==1==ERROR: AddressSanitizer: heap-buffer-overflow" >&2; exit 1', "sanitizer report"),
    ("hang", "sleep 30", "no end within"),
]


@pytest.mark.parametrize(("name", "body", "problem"), STAND_INS, ids=[s[0] for s in STAND_INS])
def test_the_checker_catches_each_broken_rule(work, tmp_path, name, body, problem):
    binary = _stand_in(tmp_path, name, body)
    done, report = _run(work, "--binary", binary, "--prefix", "", "--count", "2", "--jobs", "2", "--seeds", "multi",
                        "--strace-every", "0", "--timeout", "2")  # fmt: skip
    assert done.returncode == 1
    assert len(report["findings"]) == 2
    assert all(any(p.startswith(problem) for p in f["problems"]) for f in report["findings"]), report["findings"]


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_the_checker_catches_a_file_opened_outside_the_bundle(work, tmp_path):
    hostname = Path("/etc/hostname")
    if not hostname.exists():
        pytest.skip("no /etc/hostname to read")
    binary = _stand_in(tmp_path, "reader", "read line < /etc/hostname; exit 0")
    done, report = _run(
        work, "--binary", binary, "--prefix", "", "--count", "2", "--seeds", "multi", "--strace-every", "1"
    )
    assert done.returncode == 1
    assert all(any("opened /etc/hostname" in p for p in f["problems"]) for f in report["findings"]), report
