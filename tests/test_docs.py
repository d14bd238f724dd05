"""The documentation's Python examples run: every fenced ```python block of README.md and docs/trace.md.

Each file's blocks run in order in one namespace, in a temporary working
directory holding ``model.onnx`` (a copy of ``samples/cnn.onnx``) for the
examples that need a model file.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from tests.support import ROOT, SAMPLES

DOCS = ["README.md", "docs/trace.md"]
_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


def python_blocks(path: str) -> list[tuple[int, str]]:
    """The fenced ```python blocks of a Markdown file, with the line each starts on."""
    text = (ROOT / path).read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in _BLOCK.finditer(text)]


def test_blocks_are_found():
    text = "a\n```python\nx = 1\n```\n```\nnot python\n```\n```python\ny = 2\n```\n"
    blocks = [m.group(1) for m in _BLOCK.finditer(text)]
    assert blocks == ["x = 1\n", "y = 2\n"]


@pytest.mark.parametrize("path", DOCS)
def test_python_examples_run(path, tmp_path, monkeypatch):
    blocks = python_blocks(path)
    assert blocks, f"{path} has no ```python block"
    shutil.copy(SAMPLES / "cnn.onnx", tmp_path / "model.onnx")
    monkeypatch.chdir(tmp_path)
    np.random.seed(0)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for line, code in blocks:
        exec(compile(code, f"{path}:{line}", "exec"), namespace)  # the project's own documentation
