"""scripts/bench.py runs end to end in --quick mode and writes a report with numbers (polygraphy not needed)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support import ROOT

NUMBER = re.compile(r"^\**-?\d+(\.\d+)?\**$")


def table_rows(text: str, heading: str) -> list[list[str]]:
    """The data rows of the first Markdown table after the heading that contains `heading`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("## ") and heading in line)
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows[1:]  # without the column names


def test_quick_run_writes_report(tmp_path):
    out = tmp_path / "b.md"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench.py"),
            "--quick",
            "--sections",
            "overhead,startup",
            "--runs",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert done.stdout == text
    for key in (
        "## Machine",
        "| CPU |",
        "| cores |",
        "| RAM |",
        "| OS |",
        "| Python |",
        "| numpy / onnx / onnxruntime |",
        "| mgedump |",
    ):
        assert key in text, key
    overhead = table_rows(text, "(`overhead`)")
    assert len(overhead) == 7  # three rounds per --runs (two) and the median
    assert all(NUMBER.match(row[-1]) for row in overhead), overhead
    startup = table_rows(text, "(`startup`)")
    assert [row[0] for row in startup] == ["`mgedump --help`", "`mgerun --help`"]
    assert all(NUMBER.match(row[3]) and NUMBER.match(row[4]) for row in startup), startup
    assert "(`pack`)" not in text and "`: failed" not in text


def test_quick_needs_section_measures_a_tree_ensemble(tmp_path):
    """The `needs` section (scripts/bench/needs.py) in --quick mode: a small forest, its ratios, the targets."""
    out = tmp_path / "b.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench.py"), "--quick", "--sections", "needs", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    rows = table_rows(out.read_text(), "(`needs`)")
    assert len(rows) == 4 and rows[-1][0] == "**median**"  # three rounds at least, and the medians
    assert all(NUMBER.match(cell) for cell in rows[-1][-2:]), rows
    assert "needs: pack / session creation" in out.read_text()


def test_quick_gates_section_counts_both_gates_verdicts(tmp_path):
    """The `gates` section (scripts/bench/gates.py) with one run: 4 checks of each bundle with each gate."""
    out = tmp_path / "b.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench.py"), "--quick", "--runs", "1", "--sections", "gates",
         "--out", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = table_rows(out.read_text(), "(`gates`)")
    assert [row[0] for row in rows] == [
        "`--baseline --max-slowdown 1.1`",
        "`--max-latency` (1.15x p90)",
        "`--max-latency --latency-percentile p50` (1.15x p50)",
    ]
    assert all(re.fullmatch(r"[0-4] of 4", cell) for row in rows for cell in row[1:3]), rows
    assert all(re.fullmatch(r"[0-4], [0-4]", row[3]) for row in rows), rows
    assert "gates: max-latency false alarms" in out.read_text()


SECTIONS = "overhead, pack, rss, startup, load, jobs, report, optimize, trace, zip, iodump, float16, int8, needs, fitting, native, big, gates"


def test_one_file_a_section_and_python_m_starts_it_too():
    done = subprocess.run(
        [sys.executable, "-m", "scripts.bench", "--sections", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2 and f"choose from {SECTIONS}" in done.stderr
    shared = {"__init__", "__main__", "common", "models", "document", "runner"}
    files = {p.stem for p in (ROOT / "scripts" / "bench").glob("*.py")} - shared
    assert files == set(SECTIONS.split(", "))


def test_pack_ratios_are_taken_pair_by_pair_with_their_spread():
    """The pack section's A / C: each round's A over that round's C (a failed run drops its round), then the
    median, quartiles and extremes of those ratios; a ratio of the medians would hide how single pairs wander."""
    from scripts.bench.common import ProcResult, Spread, pair_ratios

    def runs(*walls: float, failed: int = -1) -> list[ProcResult]:
        return [ProcResult(w, 0, 1 if i == failed else 0, "") for i, w in enumerate(walls)]

    a = runs(1.2, 1.0, 3.0, 1.1, 1.3, failed=2)
    c = runs(1.0, 1.0, 1.0, 1.0, 2.0)
    ratios = pair_ratios(a, c, lambda r: r.wall_s)
    assert ratios == [1.2, 1.0, 1.1, 0.65]
    spread = Spread.of(ratios)
    assert spread is not None
    assert (spread.n, spread.low, spread.high) == (4, 0.65, 1.2)
    assert round(spread.median, 6) == 1.05 and round(spread.q1, 6) == 0.9125 and round(spread.q3, 6) == 1.125
    assert spread.text() == "1.050 (IQR 0.912-1.125, min-max 0.650-1.200, 4 pairs)"
    assert Spread.of([]) is None
    assert Spread.of([1.1]) == Spread(1, 1.1, 1.1, 1.1, 1.1, 1.1)


def test_a_part_of_a_section_runs_alone(tmp_path):
    """``--sections big:many`` runs the many-files pack against its floor and none of the GiB models; a part the
    section does not have is refused, naming those it has."""
    out = tmp_path / "b.md"
    command = [sys.executable, str(ROOT / "scripts" / "bench.py"), "--quick", "--runs", "1", "--out", str(out)]
    done = subprocess.run([*command, "--sections", "big:many"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode in (0, 1), done.stderr  # 1: a target missed on a busy machine
    rows = table_rows(out.read_text(), "(`big`)")
    assert (
        len({row[0] for row in rows}) == 1
        and rows[0][0].endswith("in 200 files: pack / floor")
        and [row[1] for row in rows]
        == [
            "wall (s)",
            "CPU, user + system (s)",
            "peak RSS",
        ]
    )
    assert all(NUMBER.match(row[-1]) for row in rows), rows
    assert "big: pack / floor" in out.read_text() and "mgerun / onnxruntime alone" not in out.read_text()
    wrong = subprocess.run([*command, "--sections", "big:nope"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert wrong.returncode == 2 and "unknown part(s) of section big: nope; choose from gib, many, float16" in (
        wrong.stderr
    )
