"""Fixtures: the real commands run in-process, and the samples folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import SAMPLES, Result


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
