#!/usr/bin/env python3
"""The aarch64 build of mgerun-native, proved on this x86_64 machine (docs/native.md, "aarch64").

1. Installs what it needs from Debian's archive when missing (root): the cross compiler
   (g++-aarch64-linux-gnu, whose /usr/aarch64-linux-gnu also serves qemu as the target's C and C++ runtime) and
   qemu-user 8 or newer (qemu 7.2, bookworm's, crashes inside onnxruntime's CPU detection on aarch64: from
   bookworm-backports there).
2. Cross-builds native/ with native/cross/build-aarch64.sh (native/CMakeLists.txt as it is): Debian's GCC 12
   cross compiler, or with ``--zig`` zig's clang against glibc 2.17 (ziglang from PyPI).
3. Fetches the aarch64 onnxruntime library: ``capi/libonnxruntime.so.1.*`` of the onnxruntime wheel from PyPI
   (the newest, or ``--ort X.Y.Z``; wheels ship it from 1.19 on), or of the npm package onnxruntime-node for
   older versions.
4. Runs the conformance corpus (tests/native/corpus.py, compared by tests/native/harness.py) with the aarch64
   binary under ``qemu-aarch64 -L /usr/aarch64-linux-gnu`` and the aarch64 library, ``mgerun``, the reference,
   natively on x86_64: the same exit code, refusal class, verdict per test case and variant, and closing lines;
   ``err`` alike within 1e-6 + 1e-3 of its size (not to 6 digits: the expected outputs and mgerun's come from
   x86_64 kernels, the native's from aarch64 ones), and onnxruntime's "Unknown CPU vendor" warning, which its
   aarch64 library prints under qemu, is not counted as the program's. Then the native tests that take a binary
   (tests/native/test_fuzz.py, test_ort_versions.py) with ``MGERUN_NATIVE``, ``MGERUN_NATIVE_PREFIX`` and
   ``MGERUN_ORT_LIB`` set so. Exits 1 when a bundle differs or a test fails.

Usage::

    python scripts/native_aarch64.py                       # install, build, run the corpus
    python scripts/native_aarch64.py --ort 1.19.2 --build build/aarch64 --cache ~/.cache/mgedump-native
    python scripts/native_aarch64.py -- -k sequences       # arguments after -- go to pytest

The functions that fetch onnxruntime libraries (:func:`ort_library`) serve tests/native/test_ort_versions.py too.
"""

from __future__ import annotations

import argparse
import glob
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SYSROOT = "/usr/aarch64-linux-gnu"  # Debian's cross runtime (libc6-arm64-cross, libstdc++6-arm64-cross)
QEMU_MIN = 8
TESTS = ["tests/native/test_fuzz.py", "tests/native/test_ort_versions.py"]
EMULATION_NOISE = re.compile(r"^onnxruntime cpuid_info warning: .*\n?", re.M)


def say(text: str) -> None:
    print(f"native_aarch64: {text}", flush=True)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


# ---------------------------------------------------------------- onnxruntime libraries


def _wheel_platforms(machine: str) -> list[str]:
    return [f"manylinux_2_28_{machine}", f"manylinux_2_27_{machine}", f"manylinux2014_{machine}"]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def ort_library(version: str | None, machine: str, cache: Path) -> tuple[str, Path]:
    """(version, path) of onnxruntime's shared library for ``machine`` (``x86_64``, ``aarch64``), fetched once
    into ``cache``: the PyPI wheel's ``capi/libonnxruntime.so.1.*`` (``version`` None: the newest wheel), or for
    a version before 1.19, whose wheels do not ship it, npm's onnxruntime-node's."""
    if version and _version_key(version) < (1, 19):
        return version, _npm_library(version, machine, cache)
    folder = cache / f"wheel-{machine}-{version or 'newest'}"
    found = sorted(folder.glob("libonnxruntime.so.1.*"))
    if not found:
        download = Path(tempfile.mkdtemp(prefix="ort-wheel-", dir=cache))
        try:
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                   "--python-version", "3.11", "--implementation", "cp", "-d", str(download),
                   f"onnxruntime=={version}" if version else "onnxruntime"]  # fmt: skip
            for platform in _wheel_platforms(machine):
                cmd[4:4] = ["--platform", platform]
            run(cmd, stdout=subprocess.DEVNULL)
            (wheel,) = download.glob("onnxruntime-*.whl")
            folder.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(wheel) as zf:
                names = [n for n in zf.namelist() if re.fullmatch(r"onnxruntime/capi/libonnxruntime\.so\.1\.[\d.]+", n)]
                if not names:
                    raise SystemExit(f"native_aarch64: {wheel.name} holds no capi/libonnxruntime.so.1.*")
                (folder / Path(names[0]).name).write_bytes(zf.read(names[0]))
        finally:
            shutil.rmtree(download, ignore_errors=True)
        found = sorted(folder.glob("libonnxruntime.so.1.*"))
    path = found[0]
    return path.name.removeprefix("libonnxruntime.so."), path


def _npm_library(version: str, machine: str, cache: Path) -> Path:
    arch = {"x86_64": "x64", "aarch64": "arm64"}[machine]
    folder = cache / f"npm-{machine}-{version}"
    path = folder / f"libonnxruntime.so.{version}"
    if path.exists():
        return path
    npm = shutil.which("npm")
    if not npm:
        raise SystemExit("native_aarch64: npm is not installed (apt-get install npm)")
    download = Path(tempfile.mkdtemp(prefix="ort-npm-", dir=cache))
    try:
        run([npm, "pack", f"onnxruntime-node@{version}", "--silent", "--pack-destination", str(download)],
            stdout=subprocess.DEVNULL, cwd=download)  # fmt: skip
        (tgz,) = download.glob("onnxruntime-node-*.tgz")
        member = f"package/bin/napi-v3/linux/{arch}/libonnxruntime.so.{version}"
        with tarfile.open(tgz) as tar:
            data = tar.extractfile(member)
            if data is None:
                raise SystemExit(f"native_aarch64: {tgz.name} holds no {member}")
            folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data.read())
        path.chmod(0o755)
    finally:
        shutil.rmtree(download, ignore_errors=True)
    return path


# ---------------------------------------------------------------- tools


def _codename() -> str:
    text = Path("/etc/os-release").read_text(encoding="utf-8")
    m = re.search(r"^VERSION_CODENAME=(\S+)", text, re.M)
    return m.group(1) if m else "bookworm"


def qemu_major() -> int:
    qemu = shutil.which("qemu-aarch64")
    if not qemu:
        return 0
    out = subprocess.run([qemu, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version (\d+)\.", out)
    return int(m.group(1)) if m else 0


def _apt_install(packages: list[str], *extra: str) -> None:
    if os.geteuid() != 0:
        raise SystemExit(f"native_aarch64: needs {' '.join(packages)} (apt-get install, as root)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "install", "-y", "-q", *extra, *packages], env=env, stdout=subprocess.DEVNULL)


def ensure_tools() -> None:
    """The cross compiler, its runtime and qemu-user >= 8, installed from Debian's archive when missing."""
    updated = False

    def update() -> None:
        nonlocal updated
        if not updated:
            run(["apt-get", "update", "-q"], stdout=subprocess.DEVNULL)
            updated = True

    missing = [pkg for tool, pkg in [("aarch64-linux-gnu-g++", "g++-aarch64-linux-gnu"), ("cmake", "cmake"),
               ("npm", "npm")] if not shutil.which(tool)]  # fmt: skip
    if not Path(SYSROOT, "lib", "libstdc++.so.6").exists():
        missing.append("libstdc++6-arm64-cross")
    if missing:
        say(f"installing {' '.join(missing)}")
        update()
        _apt_install(missing)
    if qemu_major() >= QEMU_MIN:
        return
    update()
    _apt_install(["qemu-user"])
    if qemu_major() >= QEMU_MIN:
        return
    # bookworm's qemu is 7.2: take the backports' (10.x)
    backports = f"{_codename()}-backports"
    sources = " ".join(Path(p).read_text(errors="replace") for p in glob.glob("/etc/apt/sources.list*") +
                       glob.glob("/etc/apt/sources.list.d/*") if os.path.isfile(p))  # fmt: skip
    if backports not in sources:
        say(f"adding {backports} to apt's sources (qemu-user {QEMU_MIN} or newer)")
        Path(f"/etc/apt/sources.list.d/{backports}.sources").write_text(
            f"Types: deb\nURIs: http://deb.debian.org/debian\nSuites: {backports}\nComponents: main\n"
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n",
            encoding="utf-8",
        )
        updated = False
        update()
    say(f"installing qemu-user from {backports}")
    _apt_install(["qemu-user"], "-t", backports)
    if qemu_major() < QEMU_MIN:
        raise SystemExit(f"native_aarch64: qemu-aarch64 {qemu_major()} is older than {QEMU_MIN}")


def cross_build(build: Path, zig: bool = False) -> Path:
    say(f"cross-building into {build}" + (" with zig (glibc 2.17, libc++ static)" if zig else ""))
    start = time.perf_counter()
    log = build.parent / f"{build.name}.log"
    build.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        script = [str(ROOT / "native" / "cross" / "build-aarch64.sh"), *(["--zig"] if zig else []), str(build)]
        done = subprocess.run(script, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.stdout.write("".join(log.read_text(errors="replace").splitlines(True)[-30:]))
        raise SystemExit(f"native_aarch64: the cross build failed (log: {log})")
    binary = build / "mgerun-native"
    say(f"built {binary} in {time.perf_counter() - start:.0f} s: {_file_type(binary)}")
    return binary


def _file_type(path: Path) -> str:
    head = path.read_bytes()[:20]
    machine = int.from_bytes(head[18:20], "little")
    return {183: "ELF aarch64", 62: "ELF x86_64"}.get(machine, f"ELF machine {machine}")


# ---------------------------------------------------------------- the corpus across architectures


def _close(a: str, b: str) -> bool:
    """Two printed err values alike across architectures (inf, nan and n/a exactly)."""
    try:
        x, y = float(a), float(b)
    except ValueError:
        return a == b
    if not (math.isfinite(x) and math.isfinite(y)):
        return str(x) == str(y)
    return abs(x - y) <= 1e-6 + 1e-3 * max(abs(x), abs(y))


def across_differences(harness, reference, native) -> list[str]:
    """harness.differences, with err compared by :func:`_close` and the emulator's warning dropped."""
    native = harness.Outcome(native.code, native.out, EMULATION_NOISE.sub("", native.err))
    problems = [p for p in harness.differences(reference, native) if not p.startswith("verdict lines differ")]
    if reference.code == 2 or native.code == 2:
        return problems
    want, got = harness.verdicts(reference.out), harness.verdicts(native.out)
    alike = len(want) == len(got) and all(
        (w[:2] + w[3:] == g[:2] + g[3:] and _close(w[2], g[2])) if w[0] == g[0] == "assert" else w == g
        for w, g in zip(want, got, strict=False)
    )
    if not alike:
        problems.append(f"verdict lines differ: mgerun {want}, mgerun-native {got}")
    return problems


def run_corpus(binary: Path, env: dict[str, str], folder: Path, jobs: int) -> int:
    """Every corpus bundle by mgerun (natively) and by the binary (under the prefix in env); prints each
    difference and the figures; returns how many bundles differ."""
    import concurrent.futures
    import json

    sys.path.insert(0, str(ROOT))
    from tests.native import corpus, harness

    index_file = folder / "index.json"
    if not index_file.exists():
        say(f"building the conformance corpus into {folder}")
        folder.mkdir(parents=True, exist_ok=True)
        corpus.build(folder)
    index = json.loads(index_file.read_text(encoding="utf-8"))
    os.environ.update(env)  # harness.run_native reads the prefix and the library from the environment

    def one(entry_id: str):
        args = harness.bundle_args(index[entry_id])
        ref = harness.run_mgerun(args)
        reference = harness.Outcome(ref.code, ref.out, ref.err)
        native = harness.run_native(str(binary), args, timeout=600)
        exact = harness.verdicts(reference.out) == harness.verdicts(native.out)
        return entry_id, across_differences(harness, reference, native), exact

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(one, sorted(index)))
    differing = [(i, d) for i, d, _ in results if d]
    for entry_id, problems in differing:
        print(f"DIFFERS {entry_id}: " + " / ".join(problems), flush=True)
    exact = sum(e for _, _, e in results)
    say(f"corpus: {len(results)} bundles in {time.perf_counter() - start:.0f} s, {len(differing)} differ; "
        f"{exact} with identical verdict lines (err to 6 digits), the rest err alike")  # fmt: skip
    return len(differing)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if "--" in argv:
        pytest_args = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=str(ROOT / "build" / "aarch64"), help="the cross build's folder")
    parser.add_argument("--cache", default=None, help="where fetched libraries are kept (default: BUILD/ort)")
    parser.add_argument("--ort", default=None, help="onnxruntime version for the run (default: the newest wheel)")
    parser.add_argument("--no-install", action="store_true", help="install nothing; fail when a tool is missing")
    parser.add_argument("--no-build", action="store_true", help="use the binary already in BUILD")
    parser.add_argument("--zig", action="store_true", help="build with zig (glibc 2.17, libc++ linked statically)")
    parser.add_argument("--tests", nargs="*", default=TESTS, help="test files to run (default: %(default)s)")
    parser.add_argument("--no-corpus", action="store_true", help="skip the conformance corpus")
    parser.add_argument("--jobs", type=int, default=2, help="corpus bundles checked at a time")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    if not args.no_install:
        ensure_tools()
    say(f"qemu-aarch64 {qemu_major()}, cross runtime {SYSROOT}")
    build = Path(args.build).resolve()
    binary = build / "mgerun-native" if args.no_build else cross_build(build, args.zig)
    cache = Path(args.cache).resolve() if args.cache else build / "ort"
    cache.mkdir(parents=True, exist_ok=True)
    version, library = ort_library(args.ort, "aarch64", cache)
    say(f"onnxruntime {version} for aarch64: {library}")

    prefix = f"qemu-aarch64 -L {SYSROOT}"
    env = {**os.environ, "MGERUN_NATIVE": str(binary), "MGERUN_NATIVE_PREFIX": prefix,
           "MGERUN_ORT_LIB": str(library), "MGEDUMP_REQUIRE_NATIVE": "1", "ORT_DISABLE_TELEMETRY": "1"}  # fmt: skip
    smoke = subprocess.run([*prefix.split(), str(binary), "--version"], capture_output=True, text=True, env=env)
    say(f"{prefix} {binary.name} --version: exit {smoke.returncode}: {(smoke.stdout + smoke.stderr).strip()}")
    if smoke.returncode != 0:
        return 1
    differing = 0 if args.no_corpus else run_corpus(binary, env, build / "corpus", args.jobs)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *args.tests, *pytest_args]
    say(" ".join(cmd))
    done = subprocess.run(cmd, cwd=ROOT, env=env)
    code = 1 if differing or done.returncode else 0
    say(
        f"exit {code} after {time.perf_counter() - start:.0f} s ({differing} corpus bundle(s) differ, pytest {done.returncode})"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
