"""Render an mgerun HTML report in a real browser (headless Chromium) and save a screenshot.

    python scripts/check_report.py                          # the sweep report: docs/report.png
    python scripts/check_report.py --scenario many          # 200 test cases: docs/report-200.png
    python scripts/check_report.py --scenario failing       # one failing bundle: docs/report-failing.png
    python scripts/check_report.py --html report.html --out shot.png --height 2200

Scenarios (without --html, each makes its report from the samples):

- ``sweep``: samples/dynamic_batch.onnx (two test cases, a free batch) run with
  ``--repeat-sweep 1,2,4,8 --profile``: every kind of plot, folded as passing
  test cases are (the screenshot opens them: ``--open``);
- ``many``: the same model with 200 test cases, all passing: the page must stay
  short to read and under 1 MB;
- ``failing``: samples/cnn.onnx packed with ``--embed-io-dump``, one weight
  changed afterwards and the manifest saying it was packed with another
  onnxruntime: the failure, the first divergence and the environment that
  differs, beside the verdict.

The script prints the page's size, checks that the screenshot is not blank (a
page that failed to render is white) and exits 1 if it is, or if a ``many``
page is 1 MB or more; 2 if Chromium is missing. Chromium is Debian's
``chromium`` package (``apt-get install chromium``); the script looks for
``chromium``, ``chromium-browser``, ``google-chrome`` or $CHROMIUM.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
OUT = {"sweep": "report.png", "many": "report-200.png", "failing": "report-failing.png"}
MB = 1 << 20


def find_browser() -> str | None:
    named = os.environ.get("CHROMIUM")
    if named:
        return named
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


def _run(command: str, *args: object, cwd: Path, check: bool = True) -> None:
    tool = Path(sys.executable).parent / command
    done = subprocess.run([tool, *map(str, args)], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if check and done.returncode != 0:
        raise SystemExit(f"check_report: {command} exited {done.returncode}: {done.stderr.decode()[-400:]}")


def _rewrite(bundle: Path, edit) -> None:
    """Change a bundle's members and manifest in place, with its member hashes fixed."""
    with zipfile.ZipFile(bundle) as zf:
        names = zf.namelist()
        members = {name: zf.read(name) for name in names}
    manifest = json.loads(members["mgedump.json"])
    edit(manifest, members)
    for entry in manifest["members"]:
        data = members[entry["name"]]
        entry["sha256"], entry["size"] = hashlib.sha256(data).hexdigest(), len(data)
    members["mgedump.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(bundle, "w") as zf:
        for name in names:
            zf.writestr(zipfile.ZipInfo(name), members[name], zipfile.ZIP_STORED)


def _break(bundle: Path) -> None:
    """One weight of conv2 changed (the check fails there), and the manifest packed with another onnxruntime."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    def edit(manifest: dict, members: dict) -> None:
        model = onnx.load_from_string(members["model.onnx"])
        init = next(i for i in model.graph.initializer if i.name == "conv2_W")
        array = numpy_helper.to_array(init).copy()
        array[3, 2, 1, 1] += np.float32(0.8)
        init.CopyFrom(numpy_helper.from_array(array, "conv2_W"))
        members["model.onnx"] = model.SerializeToString()
        from mgedump.model.environment import pack_environment

        packed = manifest.get("environment") or pack_environment()
        manifest["environment"] = dict(packed, onnxruntime="1.17.0")

    _rewrite(bundle, edit)


def make_report(folder: Path, scenario: str) -> Path:
    """Pack samples and run mgerun on them: the report page the scenario asks for."""
    samples = ROOT / "samples"
    if scenario == "sweep":
        _run("mgedump", samples / "dynamic_batch.onnx", "-d", "x:#rand(0,1,1,...)", "-d", "x:#rand(0,1,4,...)",
             "-o", "dynamic_batch.mgetest", "-q", cwd=folder)  # fmt: skip
        _run("mgerun", "dynamic_batch.mgetest", "--iter", "200", "--warmup-iter", "3", "--repeat-sweep", "1,2,4,8",
             "--profile", "profile.json", "--report-html", "report.html", "--thread", "1", cwd=folder)  # fmt: skip
    elif scenario == "many":
        (folder / "cases.txt").write_text("x:#rand(0,1,1,...)\n" * 200, encoding="utf-8")
        _run("mgedump", samples / "dynamic_batch.onnx", "-d", "@cases.txt", "-o", "many.mgetest", "-q", cwd=folder)
        _run("mgerun", "many.mgetest", "--report-html", "report.html", "--thread", "1", cwd=folder)
    else:
        _run("mgedump", samples / "cnn.onnx", "-d", "#rand(0,1)", "-d", "#rand(0,1)", "--embed-io-dump", "-o",
             "cnn.mgetest", "-q", cwd=folder)  # fmt: skip
        _break(folder / "cnn.mgetest")
        _run("mgerun", "cnn.mgetest", "--iter", "50", "--warmup-iter", "2", "--report-html", "report.html",
             cwd=folder, check=False)  # fmt: skip
    return folder / "report.html"


def opened(html: Path, folder: Path) -> Path:
    """A copy of the page with every folded test case open, for a screenshot that shows them."""
    page = re.sub(r'<details class="case">', '<details class="case" open>', html.read_text(encoding="utf-8"))
    copy = folder / "opened.html"
    copy.write_text(page, encoding="utf-8")
    return copy


def screenshot(browser: str, html: Path, out: Path, width: int, height: int) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}",
             f"--window-size={width},{height}", f"--screenshot={out}", html.resolve().as_uri()],
            check=True,
            capture_output=True,
            timeout=120,
        )  # fmt: skip


def ink(png: Path) -> float:
    """The share of pixels that are not (near) white: a blank page is 0."""
    from PIL import Image

    with Image.open(png) as image:
        gray = image.convert("L")
        histogram = gray.histogram()
    return 1 - sum(histogram[245:]) / max(sum(histogram), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=sorted(OUT), default="sweep", help="the report to make (no --html)")
    parser.add_argument("--html", type=Path, help="a report to screenshot (default: make the scenario's)")
    parser.add_argument("--out", type=Path, help="the PNG to write (default: docs/ and the scenario's name)")
    parser.add_argument("--open", action="store_true", help="open the folded (passing) test cases first")
    parser.add_argument("--width", type=int, default=1100)
    parser.add_argument("--height", type=int, default=1900)
    args = parser.parse_args(argv)
    out = args.out or ROOT / "docs" / OUT[args.scenario]
    browser = find_browser()
    if browser is None:
        print("check_report: no Chromium found; install Debian's: apt-get install chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        html = args.html or make_report(Path(folder), args.scenario)
        size = html.stat().st_size
        shown = opened(html, Path(folder)) if args.open or (args.html is None and args.scenario == "sweep") else html
        screenshot(browser, shown, out, args.width, args.height)
    share = ink(out)
    print(f"check_report: {html.name}: {size / MB:.2f} MB; {out} ({args.width}x{args.height}), {share:.1%} drawn")
    if share < 0.02:
        print("check_report: the screenshot is blank: the page did not render", file=sys.stderr)
        return 1
    if args.html is None and args.scenario == "many" and size >= MB:
        print(f"check_report: a page of 200 test cases is {size / MB:.2f} MB, not under 1 MB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
