"""The ``int8`` section: ``--quantize int8`` on the conv models of ``scripts/check_real_models.py``:
pack time over a plain pack (target: at most 10x), the int8 bundle's
latency over the plain bundle's with ``mgerun --thread 1`` (target: at
most 0.6 on a CPU with VNNI or AVX-512; the CPU's flags are given beside
it, and it is not judged on other CPUs), and the top-1 agreement the int8
manifest records.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .common import (
    SCRIPTS,
    Check,
    Context,
    ProcResult,
    Table,
    alternate,
    at_most,
    console_script,
    failure_notes,
    fmt,
    fmt_ratio,
    median,
    ok_values,
    ratio,
    run_fresh,
    run_worker,
)


def section(ctx: Context) -> Table:
    """--quantize int8 on the conv models of check_real_models.py: latency and pack time over plain, top-1 held."""
    sys.path.insert(0, str(SCRIPTS))
    import check_real_models as real

    wanted = [m for m in real.MODELS if m.int8 and (not ctx.quick or m.name == "ppocr_cls")]
    paths = {name: Path(path) for name, path in run_worker("fetch_real", ctx.tmp).items()}
    mgedump = console_script("mgedump")
    cpu = real.cpu_flags()
    fast_int8 = any(flag in cpu for flag in ("vnni", "avx512f", "amx_int8"))
    table = Table(
        "int8",
        "Per conv model of `scripts/check_real_models.py`, with its two test cases: (A) a plain pack; (B) "
        "`--quantize int8 --maxerr M` (M per model, as the script sets it), pack times alternated, "
        f"{ctx.runs} runs each; then `mgerun --thread 1 --iter 20` on both bundles, alternated, 3 rounds: int8 "
        "latency over float32 latency; top-1 agreement from the int8 manifest (score outputs only). "
        f"CPU: {cpu}. Targets: B / A <= 10 per model; int8 / float32 latency <= 0.6 on a CPU with VNNI or AVX-512 "
        "(not judged on others).",
        ["model", "maxerr", "A plain (s)", "B int8 (s)", "B / A", "int8 / float32 latency", "top-1 agreement"],
    )
    out = ctx.tmp / "int8-bench"
    keep = ctx.tmp / "int8-bundles"
    keep.mkdir(exist_ok=True)
    for model in wanted:
        specs = [a for s in model.specs for a in ("-d", s)]
        flags = ["--quantize", "int8", "--maxerr", model.int8_maxerr]
        commands = {
            "A": [*mgedump, paths[model.name], *specs, "-q", "-o", "o.mgetest"],
            "B": [*mgedump, paths[model.name], *specs, "-q", *flags, "-o", "o.mgetest"],
        }
        results: dict[str, list[ProcResult]] = {"A": [], "B": []}
        for _, name in alternate(list(commands), ctx.runs):
            results[name].append(run_fresh(commands[name], out))
        wall = {n: median(ok_values(r, lambda p: p.wall_s)) for n, r in results.items()}
        r = ratio(wall["B"], wall["A"])
        plain = real.attempt(paths[model.name], model.specs, [], keep)
        int8 = real.attempt(paths[model.name], model.specs, flags, keep)
        latency = real.latency_ratio(plain.bundle, int8.bundle) if plain.bundle and int8.bundle else None
        top1 = ", ".join(
            f"{o['top1_agreement']:.0%}" for o in int8.int8.get("outputs", []) if o.get("top1_agreement") is not None
        )
        table.rows.append(
            [
                model.name,
                model.int8_maxerr,
                fmt(wall["A"]),
                fmt(wall["B"]),
                fmt_ratio(r),
                fmt_ratio(latency),
                top1 or "-",
            ]
        )
        table.checks.append(Check(f"int8: {model.name} pack / plain pack", "<= 10", fmt_ratio(r), at_most(r, 10.0)))
        table.checks.append(
            Check(
                f"int8: {model.name} latency / float32 ({'VNNI or AVX-512' if fast_int8 else 'no VNNI, no AVX-512'})",
                "<= 0.6",
                fmt_ratio(latency),
                at_most(latency, 0.6) if fast_int8 else None,
            )
        )
        if not int8.ok:
            table.notes.append(f"{model.name}: the int8 pack was refused: {int8.message}")
        table.notes += failure_notes(model.name, results)
    return table
