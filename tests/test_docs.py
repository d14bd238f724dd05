"""The documentation holds true: its commands and Python examples run, its links lead somewhere, and every page the
code cites exists.

- Every fenced ```sh block of README.md and of the pages in :data:`SHELL_DOCS` runs, command by command, in one
  temporary folder per page that holds a copy of ``samples/`` (the examples run on the samples), with this
  interpreter's console scripts first on the PATH. A command exits 0 unless its comment says ``# exits N``. Two
  commands of the README's top are not run, and the test says why: the install (it makes a venv and installs into
  it; the ``mgedump ... && mgerun ...`` that follows it is run) and the test command (it is what runs this test).
  The README's run at every run; the other pages' are slow checks (``-m full``, which .ci/run runs too).
- Every fenced ```python block of the pages in :data:`PYTHON_DOCS` runs; each page's blocks in order in one
  namespace, in a temporary folder holding ``samples/`` and ``model.onnx`` (a copy of ``samples/cnn.onnx``).
- Every relative link of README.md and docs/ names a file that exists, and an anchor a heading of that page makes;
  the index, docs/README.md, links every page of docs/.
- Every ``docs/PAGE.md`` the package cites exists, with the anchor or the heading (``docs/x.md, "A heading"``) the
  citation names.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support import ROOT, SAMPLES

PYTHON_DOCS = ["README.md", "docs/trace.md", "docs/optimize.md", "docs/library.md", "docs/fitting.md"]
SHELL_DOCS = [
    "README.md",
    "docs/pack.md",
    "docs/verify.md",
    "docs/optimize.md",
    "docs/float16.md",
    "docs/int8.md",
    "docs/fitting.md",
    "docs/ci.md",
]
# The README's two commands at its top, byte for byte: what a newcomer copies, and what .ci/run runs.
INSTALL = 'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" && '
TEST_COMMAND = "python -m pytest -q"
# Commands that are not run, and why (the rest of each line still is, where the reason says so).
NOT_RUN = {
    INSTALL: "it makes a venv and installs into it: the test runs in the one it was installed into",
    TEST_COMMAND: "it is the command that runs this test (.ci/run runs it)",
}

_BLOCK = re.compile(r"^```(python|sh)[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
_EXITS = re.compile(r"#\s*exits (\d+)")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_CITATION = re.compile(r'docs/([\w-]+\.md)(?:#([\w-]+)|, "([^"]+)")?')


def blocks(path: str, language: str) -> list[tuple[int, str]]:
    """The fenced blocks of one language of a Markdown file, with the line each starts on."""
    text = (ROOT / path).read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(2)) + 1, m.group(2)) for m in _BLOCK.finditer(text) if m.group(1) == language]


def python_blocks(path: str) -> list[tuple[int, str]]:
    return blocks(path, "python")


def commands(block: str) -> list[str]:
    """The commands of a shell block: one a line (a line ending in ``\\`` goes on), comment lines left out."""
    found, pending = [], ""
    for line in block.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.strip()[:-1].strip() + " "
            continue
        line = pending + line.strip()
        pending = ""
        if line and not line.startswith("#"):
            found.append(line)
    return found


def expected_exit(command: str) -> int:
    """``# exits N`` in the command's comment, else 0."""
    found = _EXITS.search(command)
    return int(found.group(1)) if found else 0


def slug(heading: str) -> str:
    """The anchor GitHub makes of a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces as ``-``."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown page's headings (a repeated one gets ``-1``, ``-2``, ... as on GitHub)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def headings(path: Path) -> set[str]:
    return {h.strip().lower() for h in re.findall(r"^#{1,6} (.+)$", path.read_text(encoding="utf-8"), re.MULTILINE)}


def _docs_pages() -> list[str]:
    return ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]


def _workspace(tmp_path: Path) -> Path:
    shutil.copytree(SAMPLES, tmp_path / "samples")
    shutil.copy(SAMPLES / "cnn.onnx", tmp_path / "model.onnx")
    return tmp_path


# ---------------------------------------------------------------------------------------------------------------------
# The parsers


def test_blocks_commands_and_anchors_are_found():
    text = "a\n```python\nx = 1\n```\n```sh\n# a comment\nmgerun a \\\n  b   # exits 1\n\n```\n```python\ny = 2\n```\n"
    found = [(m.group(1), m.group(2)) for m in _BLOCK.finditer(text)]
    assert found == [
        ("python", "x = 1\n"),
        ("sh", "# a comment\nmgerun a \\\n  b   # exits 1\n\n"),
        ("python", "y = 2\n"),
    ]
    assert commands(found[1][1]) == ["mgerun a b   # exits 1"]
    assert expected_exit("mgerun a b   # exits 1") == 1 and expected_exit("mgerun a") == 0
    assert slug("Free dims: `--input-shape`") == "free-dims---input-shape"
    assert slug("int8, quantized and proved: `--quantize int8`") == "int8-quantized-and-proved---quantize-int8"


# ---------------------------------------------------------------------------------------------------------------------
# The README's top


def test_the_readme_opens_with_the_install_and_the_test_command():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    shell = [block for _, block in blocks("README.md", "sh")]
    assert shell[0].startswith(INSTALL) and shell[0].count("\n") == 1, "the first command installs and runs a sample"
    assert shell[1] == TEST_COMMAND + "\n", "the second command runs the tests"
    assert text.index("```sh") < text.index("\n## "), "both come before the first section"
    ci = ROOT / ".ci" / "run"  # not in the sdist, whose tests this file is among
    if ci.exists():
        assert f"\n{TEST_COMMAND}\n" in ci.read_text(encoding="utf-8"), ".ci/run runs the README's test command"


# ---------------------------------------------------------------------------------------------------------------------
# Commands and examples run


def _run_shell(command: str, cwd: Path, where: str) -> None:
    bin_dir = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    want = expected_exit(command)
    assert done.returncode == want, (
        f"{where}: `{command}` exited {done.returncode}, the page says {want}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )


@pytest.mark.parametrize(
    "path", [pytest.param(path, marks=() if path == "README.md" else pytest.mark.full) for path in SHELL_DOCS]
)
def test_shell_examples_run(path, tmp_path):
    found = blocks(path, "sh")
    assert found, f"{path} has no ```sh block"
    cwd = _workspace(tmp_path)
    ran = 0
    for line, block in found:
        for command in commands(block):
            skipped = next((text for text in NOT_RUN if command.startswith(text)), None)
            if skipped is not None:
                print(f"{path}:{line}: not run: {skipped.strip()!r}: {NOT_RUN[skipped]}")
                command = command[len(skipped) :]
                if not command:
                    continue
            _run_shell(command, cwd, f"{path}:{line}")
            ran += 1
    assert ran, f"{path}: no command ran"


@pytest.mark.parametrize("path", PYTHON_DOCS)
def test_python_examples_run(path, tmp_path, monkeypatch):
    found = python_blocks(path)
    assert found, f"{path} has no ```python block"
    monkeypatch.chdir(_workspace(tmp_path))
    np.random.seed(0)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for line, code in found:
        exec(compile(code, f"{path}:{line}", "exec"), namespace)  # the project's own documentation


# ---------------------------------------------------------------------------------------------------------------------
# Links and citations


@pytest.mark.parametrize("page", _docs_pages())
def test_links_lead_somewhere(page):
    source = ROOT / page
    text = re.sub(r"^```.*?^```", "", source.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        where = (source.parent / file).resolve() if file else source
        if not where.exists():
            broken.append(f"{target}: no such file")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(f"{target}: no heading makes #{anchor}")
    assert not broken, f"{page}: {broken}"


def test_every_page_the_code_cites_exists():
    missing = []
    for module in sorted((ROOT / "mgedump").rglob("*.py")):
        for page, anchor, heading in _CITATION.findall(module.read_text(encoding="utf-8")):
            path = ROOT / "docs" / page
            where = f"{module.relative_to(ROOT)} cites docs/{page}"
            if not path.exists():
                missing.append(f"{where}: no such page")
            elif anchor and anchor not in anchors(path):
                missing.append(f"{where}#{anchor}: no such heading")
            elif heading and heading.lower() not in headings(path):
                missing.append(f'{where}, "{heading}": no such heading')
    assert not missing, "\n".join(missing)


def test_the_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    listed = {target.partition("#")[0] for target in _LINK.findall(index)}
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert not pages - listed, f"docs/README.md does not list {sorted(pages - listed)}"
