"""The ``rss`` section: peak resident memory of those same pack runs (they are not run twice), as
a ratio to the model's size on disk (model file plus external data).
Target: 1 GiB model, A <= 1.3x.
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from typing import Any

from .common import Check, Context, Table, at_most, fmt_ratio, median, mib, ok_values, ratio, run_worker
from .models import Model
from .pack import measure_pack


def prepack_worker(model: str, disable_prepacking: bool, out: str) -> dict[str, float]:
    """Peak RSS of one onnxruntime session + run, with or without weight prepacking; the output is saved to out."""
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if disable_prepacking:
        opts.add_session_config_entry("session.disable_prepacking", "1")
    session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    arg = session.get_inputs()[0]
    x = np.random.default_rng(0).uniform(0, 255, [d if isinstance(d, int) else 1 for d in arg.shape]).astype(np.float32)
    np.save(out, session.run(None, {arg.name: x})[0])
    return {"maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0}


def assert_err_worker(a: str, b: str) -> float:
    """The AssertEqual error between two saved arrays."""
    import numpy as np

    from mgedump.measure.assertion import assert_equal

    check = assert_equal("y", np.load(a), np.load(b), 0.0)
    return float(check.err if check.err is not None else "nan")


def rss_notes(ctx: Context, model: Model) -> list[str]:
    """What onnxruntime alone needs: a session with and without weight prepacking, and how far their outputs differ."""
    notes = []
    with_pack = run_worker(
        "prepack", ctx.tmp, model=str(model.path), disable_prepacking=False, out=str(ctx.tmp / "pp1.npy")
    )
    without = run_worker(
        "prepack", ctx.tmp, model=str(model.path), disable_prepacking=True, out=str(ctx.tmp / "pp0.npy")
    )
    err = run_worker("assert_err", ctx.tmp, a=str(ctx.tmp / "pp1.npy"), b=str(ctx.tmp / "pp0.npy"))
    size = model.disk_bytes
    notes.append(
        f"Profile of the {mib(size)} model's memory: one onnxruntime session and run peaks at "
        f"{with_pack['maxrss_bytes'] / size:.3f}x the model size with its default weight prepacking (a packed second "
        f"copy of the MatMul weights), {without['maxrss_bytes'] / size:.3f}x with `session.disable_prepacking`. "
        f"Without prepacking the outputs differ by AssertEqual err={err:.3g} from a default session's (another "
        "summation order, drifting further as reductions get wider), so expected outputs packed that way would not "
        "be what `mgerun` computes: mgedump keeps onnxruntime's default session, and the 1.3x target sits below what "
        "onnxruntime itself needs on this machine."
    )
    return notes


def section(ctx: Context) -> Table:
    table = Table(
        "Pack peak memory",
        "Peak RSS (`ru_maxrss` from `os.wait4`) of the same pack runs as above (not run again), median over runs, as a "
        "ratio to the model's size on disk (model file plus external data). Target: 1 GiB model, A <= 1.3x.",
        ["model", "size on disk", "A mgedump", "B polygraphy", "C floor", "A / size", "B / size", "C / size", "A / C"],
    )
    for model, results, _ in ctx.once("pack", lambda: measure_pack(ctx)):
        rss = {name: median(ok_values(results.get(name, []), lambda r: r.maxrss_kib * 1024.0)) for name in "ABC"}
        size = model.disk_bytes
        peaks = ["skipped" if n not in results else "n/a" if rss[n] is None else mib(rss[n]) for n in "ABC"]
        ratios = [fmt_ratio(ratio(rss[n], size)) for n in "ABC"] + [fmt_ratio(ratio(rss["A"], rss["C"]))]
        table.rows.append([model.label, mib(size), *peaks, *ratios])
        if model.max_rss_a is not None:
            a_size = ratio(rss["A"], size)
            table.checks.append(
                Check(
                    f"rss {model.label.split(' (')[0]}: A / size on disk",
                    f"<= {model.max_rss_a}",
                    fmt_ratio(a_size),
                    at_most(a_size, model.max_rss_a),
                )
            )
            if a_size is not None and a_size > model.max_rss_a:
                table.notes += rss_notes(ctx, model)
    table.notes.append(
        "ResNet-50 here makes its weights at run time (`ConstantOfShape`), so its file is small and its ratios to "
        "size on disk are large by construction; it has no memory target."
    )
    return table


# the functions of this file that run in a worker process (python scripts/bench.py --worker NAME ...)
WORKERS: dict[str, Callable[..., Any]] = {
    "prepack": prepack_worker,
    "assert_err": assert_err_worker,
}
