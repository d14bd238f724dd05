"""Render an mgerun HTML report in a real browser (headless Chromium) and save a screenshot.

    python scripts/check_report.py                       # make a report from the samples, screenshot it
    python scripts/check_report.py --html report.html    # screenshot a report you have
    python scripts/check_report.py --out docs/report.png --height 2200

Without --html, it packs samples/dynamic_batch.onnx (two test cases, a free
batch) and runs ``mgerun --repeat-sweep 1,2,4,8 --profile --report-html`` on
it, so the page holds every kind of plot: the latency histogram, the per-run
timeline with the warm-up run, the batch-sweep curves and the operator time.

Chromium is Debian's ``chromium`` package (``apt-get install chromium``); the
script looks for ``chromium``, ``chromium-browser``, ``google-chrome`` or
$CHROMIUM. It checks that the screenshot is not blank (a page that failed to
render is white) and exits 1 if it is, 2 if Chromium is missing.
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
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    named = os.environ.get("CHROMIUM")
    if named:
        return named
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


def make_report(folder: Path) -> Path:
    """Pack a sample with a free batch and run mgerun with a sweep and the profiler: the report it writes."""
    scripts = Path(sys.executable).parent
    subprocess.run(
        [scripts / "mgedump", ROOT / "samples" / "dynamic_batch.onnx", "-d", "x:#rand(0,1,1,...)",
         "-d", "x:#rand(0,1,4,...)", "-o", "dynamic_batch.mgetest", "-q"],
        check=True,
        cwd=folder,
    )  # fmt: skip
    subprocess.run(
        [scripts / "mgerun", "dynamic_batch.mgetest", "--iter", "200", "--warmup-iter", "3", "--repeat-sweep",
         "1,2,4,8", "--profile", "profile.json", "--report-html", "report.html", "--thread", "1"],
        check=True,
        stdout=subprocess.DEVNULL,
        cwd=folder,
    )  # fmt: skip
    return folder / "report.html"


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
    parser.add_argument("--html", type=Path, help="a report to screenshot (default: make one from the samples)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "report.png", help="the PNG to write")
    parser.add_argument("--width", type=int, default=1100)
    parser.add_argument("--height", type=int, default=1900)
    args = parser.parse_args(argv)
    browser = find_browser()
    if browser is None:
        print("check_report: no Chromium found; install Debian's: apt-get install chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        html = args.html or make_report(Path(folder))
        screenshot(browser, html, args.out, args.width, args.height)
    share = ink(args.out)
    print(f"check_report: {args.out} ({args.width}x{args.height}), {share:.1%} of it drawn")
    if share < 0.02:
        print("check_report: the screenshot is blank: the page did not render", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
