"""scripts/check_ci_recipes.py: docs/ci.md's recipes pass their engines' schemas, and a recipe with a field its
engine does not know fails, naming it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support import ROOT

SCRIPT = ROOT / "scripts" / "check_ci_recipes.py"


def _check(doc: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--doc", str(doc)], capture_output=True, text=True, timeout=120)


def test_every_recipe_of_the_docs_passes_its_engines_schema():
    result = _check(ROOT / "docs" / "ci.md")
    assert result.returncode == 0, result.stdout + result.stderr
    kinds = [line.split(": ")[1] for line in result.stdout.splitlines() if line.endswith(": ok")]
    assert {"github", "gitlab", "kubernetes"} <= set(kinds), result.stdout


def test_a_field_its_engine_does_not_know_fails(tmp_path):
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    bad = tmp_path / "ci.md"
    bad.write_text(
        text.replace("runs-on:", "runs_on:", 1).replace("completionMode:", "completionMod:", 1), encoding="utf-8"
    )
    result = _check(bad)
    assert result.returncode == 1
    assert "github: FAILED" in result.stdout and "runs_on" in result.stdout
    assert "kubernetes: FAILED" in result.stdout and "completionMod" in result.stdout
