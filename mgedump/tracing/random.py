"""Random numbers (MegEngine's ``megengine.random``): ``uniform``, ``normal`` and ``seed``.

Eagerly they come from numpy's generator (``seed`` makes them repeatable);
in a trace they are ONNX ``RandomUniform``/``RandomNormal`` nodes, which draw
new values on every call. Users import it as ``mgedump.random``.
"""

from __future__ import annotations

from .functional import normal, seed, uniform

__all__ = ["normal", "seed", "uniform"]
