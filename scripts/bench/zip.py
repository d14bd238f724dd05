"""The ``zip`` section: the bundle's own stored-ZIP writer against the standard library's
``zipfile`` on the generated ~1 GiB weights as one member, both hashing the
bytes with sha256 as a bundle needs: mgedump's writer reuses the CRC-32 of
that hashing read and copies with ``copy_file_range``; ``zipfile`` (fixed
``date_time``, ``force_zip64``) reads and CRCs the bytes again as it writes
them. Target: < 0.9, or the project carries ``zipfile`` alone.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from typing import Any

from .common import Check, Context, Table, alternate, at_most, fmt, fmt_ratio, median, mib, ratio, run_worker
from .models import big_model_files


def zip_worker(files: list[str], folder: str, rounds: int) -> list[dict[str, float]]:
    """Bundle the weights as one stored member, alternating mgedump's writer and the standard library's zipfile.

    Both do all a bundle needs of a member: a sha256 of its bytes and a stored ZIP member with a CRC-32,
    fsynced. mgedump's writer (A): one read for sha256 and CRC-32 (`hash_files`), then a kernel copy
    (`copy_file_range`). zipfile (B): one read for sha256, then `ZipFile.open(ZipInfo(date_time=1980-01-01),
    "w", force_zip64=True)` fed by `shutil.copyfileobj` in 8 MiB chunks, which computes the CRC-32 as it writes.
    """
    import hashlib
    import zipfile

    from mgedump.base.fileio import CHUNK, hash_files
    from mgedump.bundle.zipwrite import StoredZipWriter

    target = os.path.join(folder, "zip-bench.zip")

    def ours() -> float:
        start = time.perf_counter()
        digest = hash_files(files)
        with open(target, "wb") as f:
            writer = StoredZipWriter(f)
            writer.add_files("model.onnx.data", files, digest.size, digest.crc32)
            writer.close()
            f.flush()
            os.fsync(f.fileno())
        return time.perf_counter() - start

    def stdlib() -> float:
        start = time.perf_counter()
        sha = hashlib.sha256()
        for path in files:
            with open(path, "rb", buffering=0) as src:
                while chunk := src.read(CHUNK):
                    sha.update(chunk)
        with open(target, "wb") as f:
            with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
                info = zipfile.ZipInfo("model.onnx.data", date_time=(1980, 1, 1, 0, 0, 0))
                with zf.open(info, "w", force_zip64=True) as member:
                    for path in files:
                        with open(path, "rb") as src:
                            shutil.copyfileobj(src, member, CHUNK)
            f.flush()
            os.fsync(f.fileno())
        return time.perf_counter() - start

    ours(), stdlib()  # warm the page cache for both
    results: dict[int, dict[str, float]] = {}
    for run, name in alternate(["ours", "stdlib"], rounds):
        results.setdefault(run, {"round": run})[f"{name}_s"] = ours() if name == "ours" else stdlib()
    os.unlink(target)
    return [results[run] for run in sorted(results)]


def section(ctx: Context) -> Table:
    dim, files = big_model_files(ctx)
    size = sum(f.stat().st_size for f in files)
    rounds = ctx.runs
    measured = run_worker("zip", ctx.tmp, files=[str(f) for f in files], folder=str(ctx.tmp), rounds=rounds)
    table = Table(
        f"Bundle ZIP writer vs the standard library (`zip`): the {mib(size)} weights as one member",
        "Both sides hash the bytes (sha256, as every bundle member needs) and write one stored member with its "
        "CRC-32, fsynced; A is mgedump's writer (CRC from the hashing read, then a kernel copy), B is zipfile "
        "(fixed date_time, force_zip64), which reads and CRCs the bytes again as it writes them. Alternated, "
        f"{rounds} rounds, after one untimed run of each.",
        ["round", "A: mgedump writer (s)", "B: zipfile (s)", "A / B"],
    )
    for row in measured:
        table.rows.append(
            [
                str(row["round"] + 1),
                fmt(row.get("ours_s")),
                fmt(row.get("stdlib_s")),
                fmt_ratio(ratio(row.get("ours_s"), row.get("stdlib_s"))),
            ]
        )
    a = median([r["ours_s"] for r in measured if "ours_s" in r])
    b = median([r["stdlib_s"] for r in measured if "stdlib_s" in r])
    table.rows.append(["**median**", fmt(a), fmt(b), fmt_ratio(ratio(a, b))])
    table.checks.append(
        Check(
            "zip: mgedump writer / zipfile",
            "< 0.9 (keep the own writer only if measurably faster)",
            fmt_ratio(ratio(a, b)),
            at_most(ratio(a, b), 0.9),
        )
    )
    return table


# the functions of this file that run in a worker process (python scripts/bench.py --worker NAME ...)
WORKERS: dict[str, Callable[..., Any]] = {
    "zip": zip_worker,
}
