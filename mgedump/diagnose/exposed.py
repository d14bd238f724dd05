"""Running a model with every tensor exposed, into an io dump: what ``mgerun --io-dump``, ``mgediff``, embedded
dumps and the float16 search share."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager

import numpy as np

from ..base.errors import ModelError
from ..model.runtime import OrtRunner, check_io_names, open_runner
from ..model.session import SessionSettings
from .in_parts import DEFAULT_BUDGET, ExposedRunner, load_for_exposure
from .iodump import IoDump, MemoryDump, write_case


class ModelDumper(AbstractContextManager["ModelDumper"]):
    """One model, ready to be run with every tensor exposed on any number of test cases.

    Use as a context manager: a large model's weights may be moved to a
    temporary folder for the time of the runs.

    Args:
        settings: the caller's session settings (none: the CPU provider with onnxruntime's defaults).
        budget: bytes of exposed tensors one run may hold at once.
        data_folder: where the model's external data lies, when not beside it.
    """

    def __init__(
        self,
        path: str,
        sha256: str,
        settings: SessionSettings | None = None,
        *,
        budget: int = DEFAULT_BUDGET,
        label: str | None = None,
        data_folder: str | None = None,
    ) -> None:
        self.path = path
        self.sha256 = sha256
        self.settings = settings or SessionSettings()
        self.label = label or path
        self._scratch = tempfile.TemporaryDirectory(prefix="mgedump-expose-")
        model, data_folder = load_for_exposure(path, self._scratch.name, data_folder)
        try:  # an output it cannot name would go unexposed and a comparison pass without it: refused as a run is
            check_io_names(model)
        except ModelError as exc:
            self._scratch.cleanup()
            raise ModelError(f"{self.label}: {exc.message}", hint=exc.hint) from None
        settings = self.settings
        label = f"{self.label} (every tensor exposed)"

        def open_exposed(model_bytes: bytes) -> OrtRunner:
            return open_runner(model_bytes, settings, label=label, data_folder=data_folder, arena=False)

        self.runner = ExposedRunner(model, open_exposed, budget)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._scratch.cleanup()

    def estimate(self, cases: Iterable[tuple[int, Mapping[str, np.ndarray]]]) -> int:
        """Bytes that every tensor of these test cases takes (tensors of unknown size count as the largest)."""
        total = 0
        for _, feeds in cases:
            sizes = self.runner.sizes(feeds)
            largest = max(sizes.values(), default=0)
            total += sum(sizes.get(name, largest) for name in self.runner.plan.tensors)
        return total

    def collect(self, cases: Iterable[tuple[int, Mapping[str, np.ndarray]]]) -> MemoryDump:
        """Run every test case and keep every tensor in memory (for what fits: see :meth:`estimate`)."""
        return MemoryDump.collect(
            self.runner.plan, self.sha256, ((number, self.runner.tensors(feeds)) for number, feeds in cases)
        )

    def dump(self, folder: str, cases: Iterable[tuple[int, Mapping[str, np.ndarray]]]) -> None:
        """Run every (number, feeds) test case and write its dump into ``folder/test_data_set_N``.

        Raises:
            RunError: the model failed to run on a test case.
            OutputError: the folder cannot be written or holds another model's dump.
        """
        for number, feeds in cases:
            write_case(folder, number, self.runner.plan, self.sha256, self.runner.tensors(feeds))


def dump_to_scratch(dumper: ModelDumper, cases: Iterable[tuple[int, Mapping[str, np.ndarray]]], scratch: str) -> IoDump:
    """Dump test cases into a new folder under ``scratch`` and open it."""
    folder = tempfile.mkdtemp(prefix="dump-", dir=scratch)
    os.rmdir(folder)
    dumper.dump(folder, cases)
    return IoDump(folder)


def reference_dump(
    path: str,
    sha256: str,
    cases: Sequence[tuple[int, Mapping[str, np.ndarray]]],
    settings: SessionSettings | None,
    scratch: str,
    *,
    label: str,
    budget: int = DEFAULT_BUDGET,
) -> IoDump | MemoryDump:
    """Every tensor of a model on these test cases, for candidates to be compared with: held in memory when it fits
    the memory budget, else dumped into a new folder under ``scratch``."""
    with ModelDumper(path, sha256, settings, budget=budget, label=label) as dumper:
        return dumper.collect(cases) if dumper.estimate(cases) <= budget else dump_to_scratch(dumper, cases, scratch)
