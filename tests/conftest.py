"""Fixtures: the real commands run in-process, and the samples folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import SAMPLES, Result

# The tests that take longest (each runs the console scripts, or pytest, many times) run first, the longest first:
# pytest-xdist hands tests out one at a time in this order (--maxschedchunk 1, pyproject.toml), so the short ones
# come last and no worker is left alone with a long one at the end. Only the suite's time depends on this list.
FIRST = (
    "tests/test_docs.py::test_shell_examples_run",
    "tests/test_pytest_plugin.py",
    "tests/commands/test_jobs.py::test_a_killed_worker",
    "tests/optimize/test_pipeline.py",
    "tests/report/test_checked.py::test_every_field_damaged",
    "tests/commands/test_merge.py",
    "tests/test_schemas.py",
    "tests/scripts/test_bench.py",
    "tests/cli/test_streams.py",
    "tests/bundle/test_fuzz.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return next((k for k, prefix in enumerate(FIRST) if item.nodeid.startswith(prefix)), len(FIRST))

    items.sort(key=rank)  # stable: within a rank, the order pytest collected them in


def _invoke(main, args, capfd) -> Result:
    capfd.readouterr()
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capfd.readouterr()
    return Result(code, captured.out, captured.err)


@pytest.fixture
def mgedump(capfd):
    """Run the mgedump command in-process: mgedump(*args) -> Result."""
    from mgedump.cli import mgedump_main

    return lambda *args: _invoke(mgedump_main, args, capfd)


@pytest.fixture
def mgerun(capfd):
    """Run the mgerun command in-process: mgerun(*args) -> Result."""
    from mgedump.cli import mgerun_main

    return lambda *args: _invoke(mgerun_main, args, capfd)


@pytest.fixture
def samples() -> Path:
    return SAMPLES


@pytest.fixture
def mgediff(capfd):
    """Run the mgediff command in-process: mgediff(*args) -> Result."""
    from mgedump.cli import mgediff_main

    return lambda *args: _invoke(mgediff_main, args, capfd)


@pytest.fixture(autouse=True)
def _not_on_github(monkeypatch) -> None:
    """The commands tested write no job summary and print no annotation for the CI running the tests (a test that
    wants them sets the variables itself: docs/ci.md#what-the-ci-shows)."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)


@pytest.fixture(scope="session", autouse=True)
def _shared_files(tmp_path_factory) -> None:
    """What tests/shared.py makes once goes under this run's temporary folder: with pytest-xdist, the folder the
    workers' own folders are in (one per run, not shared with another run), else the run's own."""
    from tests.shared import set_root

    base = tmp_path_factory.getbasetemp()
    set_root((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared")
