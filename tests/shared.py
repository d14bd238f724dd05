"""Files the tests share, each made once per test run: a bundle packed from a sample, a tree of bundles, the reports
of a run over it. The first test to ask makes it (holding a lock on its name, so that another pytest-xdist worker
asking at the same time waits for it rather than making it again), in a folder of its own that is marked complete
last: nobody reads half of one, and what a make that failed left is made again by the next test that asks.

They live under the test run's temporary folder (:func:`set_root`, from ``tests/conftest.py``): one per run, shared by
its workers, gone with it. A name must say everything that goes into what it names; what is made there is read,
never changed: a test copies it first (:func:`copy_of`) when it will write beside it or change it."""

from __future__ import annotations

import fcntl
import hashlib
import re
import shutil
from collections.abc import Callable
from pathlib import Path

_ROOT: list[Path] = []


def set_root(folder: Path) -> None:
    """Where this run keeps what is made once (its workers share it)."""
    folder.mkdir(parents=True, exist_ok=True)
    _ROOT[:] = [folder]


def made_once(name: str, make: Callable[[Path], object]) -> Path:
    """The folder ``make(folder)`` filled, made once per test run under ``name``."""
    if not _ROOT:
        raise RuntimeError("tests/conftest.py sets where shared files go: run the tests with pytest")
    root = _ROOT[0]
    slug = re.sub(r"[^\w.-]+", "_", name)[:60] + "-" + hashlib.sha256(name.encode()).hexdigest()[:12]
    folder, complete = root / slug, root / f"{slug}.complete"
    if complete.exists():
        return folder
    with open(root / f"{slug}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process ends
        if not complete.exists():  # else another worker made it while this one waited
            shutil.rmtree(folder, ignore_errors=True)  # what a make that failed left
            folder.mkdir()
            make(folder)  # in place: what it writes may record its own paths (a report names its bundles)
            complete.touch()
    return folder


def copy_of(source: Path, target: Path) -> Path:
    """A file or a folder made once, copied to ``target`` (its parents made), for a test that changes it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copyfile(source, target)
    return target
