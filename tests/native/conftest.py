"""The conformance corpus, built once per test session and shared by pytest-xdist's workers (docs/native.md)."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest

from tests.native import corpus, harness


@pytest.fixture(scope="session")
def corpus_index(tmp_path_factory) -> dict[str, dict]:
    """id -> {path, args, kind} of every corpus bundle. Under pytest-xdist the workers share one folder of the
    session's (the parent of each worker's own); the first to take the lock builds it, the others read it."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    root = harness.corpus_root(base)
    with open(base / "native-corpus.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        index = root / "index.json"
        if not index.exists():
            root.mkdir(exist_ok=True)
            corpus.build(root)
        return json.loads(index.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def native() -> str:
    """The mgerun-native binary; the test skips without one, unless MGEDUMP_REQUIRE_NATIVE=1 (CI) fails it."""
    binary = harness.native_binary()
    if binary and Path(binary).is_file() and os.access(binary, os.X_OK):
        return binary
    reason = f"mgerun-native is not installed (pip install ./native, or set {harness.NATIVE_ENV})"
    if os.environ.get(harness.REQUIRE_ENV) == "1":
        pytest.fail(f"{reason}, and {harness.REQUIRE_ENV}=1 requires it")
    pytest.skip(reason)
