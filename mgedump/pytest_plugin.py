"""A pytest plugin: every test case of every bundle a pytest item (``pytest --mgetest PATHS``).

Installed with the package (the ``pytest11`` entry point ``mgedump``), so pytest loads it and nothing else
imports it: the package itself never imports pytest. Without its options it does nothing. Its options are
declared with every other flag, in :mod:`mgedump.cli.plugin_options`.

- ``--mgetest PATH`` (repeatable): check the bundles at PATH (a bundle, or a folder of them); given alone, these
  are all pytest collects. ``--mgetest-collect``: also the ``*.mgetest`` files under the paths pytest collects.
- Each bundle is a pytest file node; each test case an item ``case_N`` (under ``VARIANT::`` for a bundle of
  several variants): ``zoo/a/model.mgetest::case_0``. So ``-k``, ``--lf``, ``-n auto`` (pytest-xdist),
  ``--junitxml``, pytest-split and pytest's own reporting apply unchanged.
- A bundle is verified once per pytest process (:func:`mgedump.commands.verify`), the first time one of its items
  runs; its items then read their test case's record. A failing item shows the lines ``mgerun`` prints for it
  (the error, the worst element, the first divergence for a bundle with an io dump, what differs from where it was
  packed). A test case whose outputs are not checked is skipped, as in ``mgerun``'s JUnit report.
- The bundles run in a worker process (:class:`mgedump.commands.jobs.Checker`): a crash in onnxruntime fails that
  bundle's items with the signal, and the session goes on (``--mgetest-in-process`` runs them in pytest's process).
- Options map to ``mgerun``'s: ``--mgetest-maxerr``, ``--mgetest-variant``, ``--mgetest-iter`` and
  ``--mgetest-warmup-iter`` (1 and 0: a test checks, it does not time), and one for each session setting
  (:mod:`mgedump.model.session`), named after ``mgerun``'s flag: ``--mgetest-provider``, ``--mgetest-thread``,
  ``--mgetest-graph-opt``, ``--mgetest-execution-mode``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_KEY = pytest.StashKey[dict[str, Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    from .cli.plugin_options import plugin_options

    group = parser.getgroup("mgetest", "mgedump bundles as tests (docs/ci.md)")
    for option in plugin_options():
        group.addoption(option.flag, dest=option.dest, **option.settings)


def _flag(dest: str) -> str:
    """How the plugin spells the option read as ``dest`` (cli/plugin_options.py spells them all)."""
    from .cli.plugin_options import plugin_options

    return next(option.flag for option in plugin_options() if option.dest == dest)


def pytest_configure(config: pytest.Config) -> None:
    timeout = config.getoption("mgetest_timeout", None)
    if timeout is not None and not 0 < timeout <= 86400:
        raise pytest.UsageError(f"{_flag('mgetest_timeout')} takes seconds over 0 and at most 86400 (a day)")
    if timeout is not None and config.getoption("mgetest_in_process", False):
        raise pytest.UsageError(
            f"{_flag('mgetest_timeout')} stops a bundle's worker: it does not apply with {_flag('mgetest_in_process')}"
        )
    paths = [str(p) for p in config.getoption("mgetest") or []]
    if not paths:
        return
    if config.args_source != pytest.Config.ArgsSource.ARGS:  # pytest --mgetest zoo/: the bundles, not testpaths
        config.args = []
    known = {os.path.normpath(arg) for arg in config.args}
    config.args += [path for path in paths if os.path.normpath(path) not in known]
    from .base.errors import MgeError

    try:  # a bad option is one line now, not an error repeated by every item
        _options(config)
        _check_outputs(config, paths)
    except MgeError as exc:
        raise pytest.UsageError(exc.one_line()) from None


def _check_outputs(config: pytest.Config, paths: list[str]) -> None:
    """pytest's own reports (``--junitxml``, ``--resultlog``-like paths) never replace a bundle being checked."""
    from .base.fileio import check_not_input
    from .bundle.format import BUNDLE_SUFFIX

    bundles = [p for p in paths if os.path.isfile(p)]
    bundles += [str(f) for p in paths if os.path.isdir(p) for f in Path(p).rglob(f"*{BUNDLE_SUFFIX}")]
    from .cli.plugin_options import PYTEST_REPORTS

    for option, flag in PYTEST_REPORTS.items():
        target = getattr(config.option, option, None)
        if isinstance(target, str) and target:
            check_not_input(target, bundles, what=flag)


def _named(config: pytest.Config) -> list[Path]:
    """The bundles and folders to collect: ``--mgetest``'s, and the ``*.mgetest`` files named on the command line
    (``pytest zoo/b.mgetest::case_0``, the id pytest printed), each without its ``::`` part."""
    given = [str(p) for p in config.getoption("mgetest") or []]
    given += [arg for arg in config.args if str(arg).split("::", 1)[0].endswith(".mgetest")]
    return [Path(str(p).split("::", 1)[0]).resolve() for p in given]


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_KEY, None)
    if state and state.get("checker") is not None:
        state["checker"].close()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    if not (config.getoption("mgetest") or config.getoption("mgetest_collect") or _named(config)):
        return None  # without its options (or a bundle named, as pytest prints its items) the plugin does nothing
    from .bundle.format import BUNDLE_SUFFIX

    if not file_path.name.endswith(BUNDLE_SUFFIX):
        return None
    given = _named(config)
    here = file_path.resolve()
    if config.getoption("mgetest_collect") or any(here == p or p in here.parents for p in given):
        return BundleFile.from_parent(parent, path=file_path)
    return None


def _state(config: pytest.Config) -> dict[str, Any]:
    """What one pytest process keeps: the options, the worker, and each bundle's outcome once verified."""
    if _KEY not in config.stash:
        config.stash[_KEY] = {"options": None, "checker": None, "done": {}}
    return config.stash[_KEY]


def _options(config: pytest.Config) -> Any:
    state = _state(config)
    if state["options"] is None:
        from .base.bounds import parse_bounds
        from .base.naming import spoken_as
        from .cli.plugin_options import plugin_speller
        from .model.session import SessionSettings, settings
        from .options import VerifyOptions

        with spoken_as(plugin_speller):  # a bad value is named by the plugin's option that gave it
            bounds = parse_bounds(tuple(config.getoption("mgetest_maxerr") or ()))
            given = {entry.name: config.getoption(f"mgetest_{entry.name}", None) for entry in settings()}
            state["options"] = VerifyOptions(
                bounds=bounds,
                session=SessionSettings.given(given),
                iters=config.getoption("mgetest_iter"),
                warmup=config.getoption("mgetest_warmup_iter"),
            )
    return state["options"]


def _outcome(config: pytest.Config, path: str, variant: str | None) -> Any:
    """The outcome of verifying one run of a bundle (:class:`mgedump.commands.jobs.Done`), verified once."""
    state = _state(config)
    key = f"{path}\0{variant}"
    if key not in state["done"]:
        options = _options(config)
        if config.getoption("mgetest_in_process"):
            from .commands.jobs import check_one

            state["done"][key] = check_one(0, path, variant, options, "")
        else:
            if state["checker"] is None:
                from .commands.jobs import Checker

                state["checker"] = Checker()
            timeout = config.getoption("mgetest_timeout")
            state["done"][key] = state["checker"].check(path, variant, options, timeout, _flag("mgetest_timeout"))
    return state["done"][key]


class BundleFailure(Exception):
    """A test case of a bundle that failed: the lines ``mgerun`` prints for it."""


class BundleFile(pytest.File):
    """A bundle: its test cases, or its variants and theirs; a bundle that cannot be read is one failing item."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        from .base.errors import MgeError
        from .commands.outline import outline

        try:
            found = outline(str(self.path))
        except MgeError as exc:
            yield CaseItem.from_parent(self, name="bundle", run=None, index=None, error=exc.one_line())
            return
        chosen = self.config.getoption("mgetest_variant")
        variants = [chosen] if chosen else list(found.variants)
        if not variants:
            for index, spec, origin in found.cases:
                yield CaseItem.from_parent(self, name=f"case_{index}", run=None, index=index, about=(spec, origin))
            return
        for variant in variants:
            yield VariantNode.from_parent(self, name=variant, cases=found.cases)


class VariantNode(pytest.Collector):
    """One variant of a bundle of several."""

    def __init__(self, *, cases: tuple[tuple[int, str, str], ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cases = cases

    def collect(self) -> Iterator[pytest.Item]:
        for index, spec, origin in self.cases:
            yield CaseItem.from_parent(self, name=f"case_{index}", run=self.name, index=index, about=(spec, origin))


class CaseItem(pytest.Item):
    """One test case of one run of a bundle."""

    def __init__(
        self,
        *,
        run: str | None,
        index: int | None,
        error: str | None = None,
        about: tuple[str, str] = ("", ""),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.run, self.index, self.error = run, index, error
        node: Any = self.parent
        self.bundle = str(node.path if isinstance(node, BundleFile) else node.parent.path)
        self.about = about  # the test case's spec and origin (-k matches them too)
        if about[0]:
            self.extra_keyword_matches.update(part for part in about if part)

    def runtest(self) -> None:
        if self.error is not None:
            raise BundleFailure(self._reason(self.error))
        done = _outcome(self.config, self.bundle, self.run)
        if done.error is not None:
            raise BundleFailure(self._reason(done.error))
        from .report.schema import BundleRecord

        record = BundleRecord.from_json(done.record)
        case = next((c for c in record.test_cases if c.index == self.index), None)
        if case is None:
            raise BundleFailure(f"{self.bundle}: test case {self.index} did not run")
        if not case.passed:
            from .cli.output import case_lines

            lines = case_lines(case, False, 0, record.packed_elsewhere)
            # pytest's short summary shows the first line, cut to the terminal: the reason first, shortest
            raise BundleFailure("\n".join([case.reason(), *lines]))
        if not record.checked:
            pytest.skip("not checked: assertions are off (run and timed only)")

    def _reason(self, error: str) -> str:
        """A bundle's error without its path in front (the item's id names the bundle), so that the summary line
        keeps the reason."""
        return error.removeprefix(f"{self.bundle}: ")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, BundleFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        run = f" [{self.run}]" if self.run else ""
        what = "bundle" if self.index is None else f"test case {self.index}"
        return self.path, None, f"{_relative(self.path, self.config)}{run}: {what}"


def _relative(path: Path, config: pytest.Config) -> str:
    """A path as pytest's ids name it: relative to the root folder (or to the folder pytest started in), else
    absolute."""
    for base in (config.rootpath, config.invocation_params.dir):
        try:
            return str(Path(path).resolve().relative_to(Path(base).resolve()))
        except ValueError:
            continue
    return str(path)
