"""The installs the README gives, for real: what each extra resolves to, a lean target, the wheel and the sdist.

Marked ``full`` (``.ci/run`` runs them as its packaging step): they build the
sdist and the wheel with ``python -m build``, ask pip what each install would
bring (``pip install --dry-run --report``: metadata only, nothing installed),
install the CI recipe of docs/ci.md into a fresh venv, and run tests from the
unpacked sdist. They need the package index, nothing else.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mgedump import __version__
from tests.support import ROOT, SAMPLES, run_ok

pytestmark = pytest.mark.full

WHEEL = f"mgedump-{__version__}-py3-none-any.whl"
SDIST = f"mgedump-{__version__}.tar.gz"
# what pip would install into an empty venv, as JSON on stdout: it reads metadata, downloads no wheel it can avoid
DRY_RUN = ["--dry-run", "--ignore-installed", "--quiet", "--report", "-"]
PACK = {"onnx", "opencv-python-headless", "pillow"}
# extra -> (distributions it must bring, distributions it must not)
RESOLUTIONS = {
    "": ({"mgedump", "numpy", "click"}, {"onnxruntime", "onnxruntime-gpu", *PACK}),
    "cpu": ({"mgedump", "numpy", "click", "onnxruntime"}, {"onnxruntime-gpu", *PACK}),
    "verify": ({"mgedump", "numpy", "click", "onnxruntime"}, {"onnxruntime-gpu", *PACK}),  # cpu by another name
    "gpu": ({"mgedump", "numpy", "click", "onnxruntime-gpu"}, {"onnxruntime", *PACK}),
    "pack,gpu": ({"onnxruntime-gpu", *PACK}, {"onnxruntime"}),
    "all": ({"onnxruntime", *PACK}, {"onnxruntime-gpu"}),
}
# the quick tests run from the unpacked sdist: they read the README, docs/, samples/ and run scripts/
SDIST_TESTS = [
    "tests/test_docs.py",
    "tests/scripts/test_make_samples.py",
    "tests/bundle/test_reader.py",
    "tests/model/test_environment.py",
]


def _env() -> dict[str, str]:
    """The environment for a child process: nothing that would put this checkout on its import path."""
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "PYTEST_ADDOPTS"}}


def _run(*args, cwd=None, timeout=600) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=_env(), timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist and, built from it, the wheel (as a release builds them), from a copy of the checkout: the build
    writes its staging folders beside the sources, and test workers running at once must not share them."""
    out = tmp_path_factory.mktemp("dist")
    source = tmp_path_factory.mktemp("source") / "mgedump"
    skip = (".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis")
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*skip), symlinks=True)
    _run(sys.executable, "-m", "build", "--outdir", out, source)
    assert sorted(p.name for p in out.iterdir()) == sorted([SDIST, WHEEL])
    return out


@pytest.fixture(scope="module")
def resolved(dist) -> dict[str, set[str]]:
    """extra -> the distributions ``pip install WHEEL[extra]`` would install into an empty venv."""

    def resolve(extra: str) -> set[str]:
        target = f"{dist / WHEEL}[{extra}]" if extra else str(dist / WHEEL)
        done = _run(sys.executable, "-m", "pip", "install", *DRY_RUN, target)
        return {_normal(item["metadata"]["name"]) for item in json.loads(done.stdout)["install"]}

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(RESOLUTIONS, pool.map(resolve, RESOLUTIONS), strict=True))


@pytest.mark.parametrize("extra", RESOLUTIONS)
def test_each_install_brings_what_it_says(extra, resolved):
    brings, excludes = RESOLUTIONS[extra]
    got = resolved[extra]
    assert brings <= got, f"[{extra}] lacks {brings - got}"
    assert not excludes & got, f"[{extra}] brings {excludes & got}"


def test_the_core_is_numpy_and_click_only(resolved):
    assert resolved[""] == {"mgedump", "numpy", "click"}


def _recipe_lines(prefix: str) -> list[list[str]]:
    """The CI recipe lines of docs/ci.md that start with ``prefix`` (``pip install``, ``mgerun``), comments removed,
    each once, in their order."""
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8").split("\n## Many machines")[0]  # one machine's
    found = re.findall(rf"^\s*- (?:run: )?({re.escape(prefix)} .*?)(?:\s+#.*)?$", text, re.MULTILINE)
    assert len(found) >= 2, f"the GitHub and GitLab recipes of docs/ci.md should each run {prefix!r}"
    return [shlex.split(line) for line in dict.fromkeys(found)]


def _recipe_commands(prefix: str) -> list[str]:
    """The one way the recipes of docs/ci.md run ``prefix``."""
    lines = _recipe_lines(prefix)
    assert len(lines) == 1, f"the recipes of docs/ci.md run {prefix!r} differently: {lines}"
    return lines[0]


def test_the_ci_recipe_installs_a_lean_target_that_verifies(dist, tmp_path):
    install = _recipe_commands("pip install")
    wheels = [a for a in install if ".whl" in a]
    assert len(wheels) == 1 and Path(wheels[0].split("[")[0]).name == WHEEL, (
        f"docs/ci.md installs {wheels}, the build gives {WHEEL}"
    )
    where = Path(wheels[0].split("[")[0])
    (tmp_path / where.parent).mkdir(parents=True)
    shutil.copy(dist / WHEEL, tmp_path / where)
    _run(sys.executable, "-m", "venv", tmp_path / "venv")
    bin_dir = tmp_path / "venv" / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / "python"
    _run(python, "-m", *install, "--quiet", cwd=tmp_path)
    _run(python, "-m", "pip", "check")

    version = _run(bin_dir / "mgerun", "--version", cwd=tmp_path)
    assert f"mgerun {__version__} (onnxruntime " in version.stdout and "onnx not installed" in version.stdout
    assert "Usage: mgedump" in _run(bin_dir / "mgedump", "--help", cwd=tmp_path).stdout
    lacking = _run(
        python, "-c", "import importlib.util as u; print([m for m in ('onnx', 'cv2', 'PIL') if u.find_spec(m)])"
    )
    assert lacking.stdout.strip() == "[]"

    (tmp_path / "models").mkdir()
    run_ok(
        "mgedump", SAMPLES / "cnn.onnx", "-d", f"@{SAMPLES / 'testcases.txt'}", "-o", tmp_path / "models/cnn.mgetest"
    )
    for gate in _recipe_lines("mgerun"):  # each engine's gate (a latency limit, a baseline)
        if "--baseline" in gate:  # the earlier run's report, as the recipe keeps it
            baseline = tmp_path / gate[gate.index("--baseline") + 1]
            baseline.parent.mkdir(parents=True, exist_ok=True)
            _run(bin_dir / "mgerun", "models/", "--report-json", baseline, cwd=tmp_path)
        checked = subprocess.run(
            [str(bin_dir / gate[0]), *gate[1:]], capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=600
        )
        # a baseline timed moments before on a shared machine may differ by more than the noise the gate allows:
        # its verdict is measured by the gates section of scripts/bench.py (docs/benchmarks.md); here it must run and say it
        assert checked.returncode in ((0, 3) if "--baseline" in gate else (0,)), checked.stdout + checked.stderr
        assert "all 4 test case(s) passed" in checked.stdout
        assert ("latency gate" in checked.stdout) == ("--baseline" in gate or "--max-latency" in gate)
        assert json.loads((tmp_path / "report.json").read_text())["report_version"] == 2
        assert (tmp_path / "junit.xml").stat().st_size and (tmp_path / "report.html").stat().st_size

    missing = subprocess.run(
        [python, "-c", "from mgedump.base.deps import require; require('onnx', purpose='packing')"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
        check=False,
    )
    assert missing.returncode == 1
    assert "mgedump.base.errors.UsageError: onnx is not installed: packing needs pip install 'mgedump[pack]'" in (
        missing.stderr
    )


def _tracked() -> set[str]:
    """The checkout's files that the sdist must hold: git's list where there is one, else the folders as they are."""
    folders = ("tests", "samples", "docs", "scripts")
    top = {"README.md", "LICENSE", "pyproject.toml", "MANIFEST.in"}
    if (ROOT / ".git").exists() and shutil.which("git"):
        listed = _run("git", "ls-files", "--", *folders, cwd=ROOT).stdout.splitlines()
        return top | {p for p in listed if (ROOT / p).is_file()}
    found = {
        p.relative_to(ROOT).as_posix()
        for folder in folders
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    return top | found


def test_the_sdist_holds_its_tests_and_runs_them(dist, tmp_path):
    with tarfile.open(dist / SDIST) as archive:
        prefix = f"mgedump-{__version__}/"
        members = {m.name.removeprefix(prefix) for m in archive.getmembers() if m.isfile()}
        missing = _tracked() - members
        assert not missing, f"the sdist lacks {sorted(missing)}"
        if hasattr(tarfile, "data_filter"):  # Python 3.10.12 and later
            archive.extractall(tmp_path, filter="data")
        else:
            archive.extractall(tmp_path)  # noqa: S202  # our own archive, just built
    unpacked = tmp_path / prefix
    where = _run(
        sys.executable, "-c", "import mgedump, tests.support as s; print(mgedump.__file__); print(s.ROOT)", cwd=unpacked
    )
    assert all(Path(line).resolve().is_relative_to(unpacked.resolve()) for line in where.stdout.splitlines())
    done = _run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SDIST_TESTS, cwd=unpacked)
    assert re.search(r"^\d+ passed", done.stdout.strip().splitlines()[-1]), done.stdout[-2000:]
