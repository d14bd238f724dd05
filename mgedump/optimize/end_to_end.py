"""The error a user sees end to end, beside the error a bundle certifies (a mode that rounds the inputs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def end_to_end_note(
    given: Any,
    bundled: Any,
    cases: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
    outputs: Sequence[str],
    certified: float,
) -> str:
    """The error the user sees: the model as given on the inputs as given, against the bundled model on the inputs
    as the bundle stores them (float16 for a float16 model), both read as float32; beside the error the bundle
    certifies (its expected outputs: the model as given on the stored inputs, in the outputs' stored dtype).

    Args:
        given, bundled: onnxruntime sessions.
        cases: per test case, (the inputs as given, the inputs as stored).
        outputs: the bundled model's output names.
        certified: the self-check's worst error.
    """
    import numpy as np

    from ..measure.assertion import measure

    worst, where = 0.0, ""
    for k, (original, stored) in enumerate(cases):
        want = given.run(list(outputs), dict(original))
        have = bundled.run(list(outputs), dict(stored))
        for name, a, b in zip(outputs, want, have, strict=True):
            a, b = np.asarray(a), np.asarray(b)
            if a.dtype.kind != "f" or b.dtype.kind != "f":
                continue
            err = measure(a.astype(np.float32), b.astype(np.float32)).err
            if err > worst or not where:
                worst, where = err, f"output {name!r}, test case {k}"
    return (
        f"end to end: err {worst:.3g} ({where}) against the model as given on the inputs as given; the bundle "
        f"certifies {certified:.3g}: its expected outputs come from the model as given on the inputs as stored "
        "(rounded to float16), stored in the outputs' dtype"
    )
