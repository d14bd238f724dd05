#!/usr/bin/env python3
"""Check every YAML recipe of docs/ci.md against its engine's own schema, as the engine would read it.

tests/test_ci_recipes.py runs the recipes' ``mgerun`` lines; this script checks that the engines accept the files:

- a GitHub Actions workflow (a block with ``on`` and ``jobs``) against SchemaStore's ``github-workflows`` schema;
- a GitLab CI file (a block whose jobs hold ``script``) against SchemaStore's ``gitlab-ci`` schema;
- a Kubernetes manifest (``apiVersion`` and ``kind``) with ``kubernetes-validate --strict`` (unknown fields fail).

The schemas come from two packages of the registry that vendor them (no download at check time):
``check-jsonschema`` (SchemaStore's CI schemas) and ``kubernetes-validate`` (the Kubernetes OpenAPI schemas). They
are in mgedump's ``test`` extra, not its runtime dependencies::

    pip install -e ".[test]"
    python scripts/check_ci_recipes.py [--doc docs/ci.md] [--kubernetes 1.33]

Prints one line per document and exits 1 when any fails, 2 when the packages are missing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PINS = ("check-jsonschema", "kubernetes-validate")


def blocks(text: str) -> list[tuple[int, str]]:
    """Every ```yaml block of a Markdown text, with the line it starts on."""
    found = []
    for match in re.finditer(r"^```yaml\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
        found.append((text.count("\n", 0, match.start()) + 2, match.group(1)))
    return found


def kind_of(document: dict[str, Any]) -> str | None:
    """Which engine reads this document: ``github``, ``gitlab``, ``kubernetes``, or none known."""
    if "apiVersion" in document and "kind" in document:
        return "kubernetes"
    if "jobs" in document and ("on" in document or True in document):  # YAML 1.1 reads a bare `on` as true
        return "github"
    if any(isinstance(job, dict) and "script" in job for job in document.values()):
        return "gitlab"
    return None


def schema_checker(name: str) -> Callable[[Any], list[str]]:
    """A check against one of check-jsonschema's vendored SchemaStore schemas: the errors, as lines."""
    import jsonschema

    text = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath(f"{name}.json").read_text("utf-8")
    schema = json.loads(text)
    validator = jsonschema.validators.validator_for(schema)(schema)

    def check(document: Any) -> list[str]:
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
        return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:200]}" for e in errors]

    return check


def kubernetes_checker(version: str) -> Callable[[Any], list[str]]:
    import kubernetes_validate

    def check(document: Any) -> list[str]:
        try:
            kubernetes_validate.validate(document, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            return [f"{'/'.join(map(str, error.path)) or '(top)'}: {error.message[:200]}"]
        return []

    return check


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "ci.md")
    parser.add_argument("--kubernetes", default="1.33", help="the Kubernetes version to validate against")
    args = parser.parse_args(argv)
    try:
        import yaml

        checks = {
            "github": schema_checker("github-workflows"),
            "gitlab": schema_checker("gitlab-ci"),
            "kubernetes": kubernetes_checker(args.kubernetes),
        }
    except ImportError as error:
        print(f"check_ci_recipes: {error.name} is missing: pip install {' '.join(PINS)} pyyaml", file=sys.stderr)
        return 2
    failed = 0
    for line, block in blocks(args.doc.read_text(encoding="utf-8")):
        for k, document in enumerate(yaml.safe_load_all(block)):
            where = f"{args.doc.name}:{line} document {k + 1}"
            kind = kind_of(document) if isinstance(document, dict) else None
            if kind is None:
                print(f"{where}: FAILED: not a GitHub workflow, a GitLab CI file or a Kubernetes manifest")
                failed += 1
                continue
            if kind == "github" and True in document:  # GitHub reads `on` as the string it is
                document = {("on" if key is True else key): value for key, value in document.items()}
            errors = checks[kind](document)
            print(f"{where}: {kind}: {'ok' if not errors else 'FAILED'}")
            for error in errors:
                print(f"  {error}")
            failed += bool(errors)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
