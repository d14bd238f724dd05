"""One mgerun-native binary against several onnxruntime libraries (docs/native.md): it names each and verifies
with each; a library that is missing, not onnxruntime or too old is one line on stderr and exit 2.

The libraries of other versions are downloaded (``full``): onnxruntime 1.19.2's wheel (the first whose wheel
ships ``capi/libonnxruntime.so.1.*``), npm's onnxruntime-node 1.17.3 (the oldest the C API version asked for
serves) and 1.16.3 (too old), beside the newest, the installed wheel's. The rest needs no download.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.native import harness
from tests.support import ROOT, SAMPLES, run_ok

PREFIX_ENV = "MGERUN_NATIVE_PREFIX"


def _aarch64_script():
    spec = importlib.util.spec_from_file_location("native_aarch64", ROOT / "scripts" / "native_aarch64.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ort-versions") / "cnn.mgetest"
    run_ok("mgedump", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-d", "#rand(0,2)", "-o", out, "-q")
    return out


def _native(binary: str, *args, env: dict | None = None) -> subprocess.CompletedProcess:
    """The binary (behind MGERUN_NATIVE_PREFIX, e.g. qemu, when set) with onnxruntime's usage records off."""
    base = {**os.environ, "ORT_DISABLE_TELEMETRY": "1"} if env is None else env
    prefix = shlex.split(os.environ.get(PREFIX_ENV, ""))
    if prefix:  # found before PATH is changed (a test takes python3 off it)
        prefix[0] = shutil.which(prefix[0]) or prefix[0]
    return subprocess.run([*prefix, binary, *map(str, args)], capture_output=True, text=True, env=base, timeout=300)


def _one_line_refusal(done: subprocess.CompletedProcess, *words: str) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("mgerun-native: error: "), done.stderr
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]


def test_a_missing_library_is_one_line_and_exit_2(native, bundle, tmp_path):
    missing = tmp_path / "nowhere" / "libonnxruntime.so.1"
    _one_line_refusal(_native(native, bundle, "--ort-lib", missing), str(missing))
    env = {**os.environ, "MGERUN_ORT_LIB": str(missing)}
    _one_line_refusal(_native(native, bundle, env=env), str(missing))


def test_a_file_that_is_not_onnxruntime_is_one_line_and_exit_2(native, bundle, tmp_path):
    text = tmp_path / "libonnxruntime.so.1"
    text.write_text("not a library\n", encoding="utf-8")
    _one_line_refusal(_native(native, bundle, "--ort-lib", text), str(text))
    # a real shared library without onnxruntime's entry point: the C library's math library
    _one_line_refusal(_native(native, bundle, "--ort-lib", "libm.so.6"), "OrtGetApiBase")


def test_no_library_anywhere_is_one_line_and_exit_2(native, bundle, tmp_path):
    """No flag, no MGERUN_ORT_LIB, no libonnxruntime.so.1 on the library path, no python3 with the wheel."""
    env = {k: v for k, v in os.environ.items() if k not in ("MGERUN_ORT_LIB", "VIRTUAL_ENV", "LD_LIBRARY_PATH")}
    env["PATH"] = str(tmp_path)  # no python3 there
    done = _native(native, bundle, env=env)
    if done.returncode == 0:
        pytest.skip("this machine has libonnxruntime.so.1 on its library path")
    _one_line_refusal(done, "--ort-lib")


@pytest.fixture(scope="module")
def libraries(tmp_path_factory) -> dict[str, Path]:
    """version -> library of this machine's architecture: 1.17.3 and 1.16.3 (npm), 1.19.2 (PyPI), the installed."""
    script = _aarch64_script()
    cache = tmp_path_factory.mktemp("ort-libraries")
    machine = "aarch64" if os.environ.get(PREFIX_ENV, "").startswith("qemu-aarch64") else platform.machine()
    found = {}
    for version in ("1.16.3", "1.17.3", "1.19.2"):
        got, path = script.ort_library(version, machine, cache)
        assert got == version
        found[version] = path
    newest = os.environ.get("MGERUN_ORT_LIB") if os.environ.get(PREFIX_ENV) else harness.onnxruntime_library()
    assert newest, "no onnxruntime library installed"
    found["newest"] = Path(newest)
    return found


@pytest.mark.full
@pytest.mark.parametrize("version", ["1.17.3", "1.19.2", "newest"])
def test_one_binary_runs_on_each_onnxruntime_and_names_it(native, bundle, libraries, version, tmp_path):
    library = libraries[version]
    expected = library.name.removeprefix("libonnxruntime.so.") if version == "newest" else version
    report = tmp_path / "report.json"
    done = _native(native, bundle, "--ort-lib", library, "--iter", "2", "--warmup-iter", "1", "--report-json", report)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all 2 test case(s) passed" in done.stdout
    ran = [line for line in done.stdout.splitlines() if line.startswith("ran with ")]
    assert ran and ran[0].startswith(f"ran with onnxruntime {expected} on "), done.stdout
    # the library file is named too, in the report
    assert str(library) in report.read_text(encoding="utf-8"), json.loads(report.read_text(encoding="utf-8"))


@pytest.mark.full
def test_a_too_old_onnxruntime_is_one_line_and_exit_2(native, bundle, libraries):
    done = _native(native, bundle, "--ort-lib", libraries["1.16.3"])
    _one_line_refusal(done, "1.16.3", "too old")
