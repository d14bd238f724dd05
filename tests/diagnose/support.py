"""What the io dump tests share: the sample CNN, its feeds, and a dump of it."""

from __future__ import annotations

import numpy as np

from mgedump.base.fileio import hash_files
from mgedump.diagnose.exposed import ModelDumper
from tests.support import sample

CNN = sample("cnn.onnx").path
FEEDS = {"data": np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)}


def _dump(folder, path=CNN, feeds=FEEDS, budget=1 << 30, cases=(0,)) -> ModelDumper:
    dumper = ModelDumper(str(path), hash_files([str(path)]).sha256, budget=budget)
    with dumper:
        dumper.dump(str(folder), [(k, feeds) for k in cases])
    return dumper
