"""Optimise a model for inference (docs/optimize.md): the pipeline (:mod:`.pipeline`) and its steps.

- :mod:`.offline`: onnxruntime's offline optimiser (the portable rewrites, fusions and layouts) and saving;
- :mod:`.precisions`: the registry of precision modes, one file each (float16: :mod:`.autocast` searches what
  stays float32, :mod:`.float16` converts; int8: :mod:`.quantize`, onnxruntime's quantizer proved on the data);
- :mod:`.passes`: our own small graph rewrites; :mod:`.isolate`: candidates opened and run in a child process.
"""

from __future__ import annotations

from .end_to_end import end_to_end_note
from .pipeline import OptimizeResult, check_can_make, level_of, optimization_names, optimize_file

__all__ = ["OptimizeResult", "check_can_make", "end_to_end_note", "level_of", "optimization_names", "optimize_file"]
