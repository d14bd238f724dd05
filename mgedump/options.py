"""Every option of the library, and its default, in one place.

Each command-line option maps onto one field here. The command line passes
only the options the user gave; everything else takes the default written
below, and nowhere else. Each dataclass checks its own values when it is made,
so a bad value fails with one :class:`~mgedump.errors.UsageError` before any
work starts.

This module imports nothing heavy: the command line reads these defaults to
print ``--help`` without loading numpy, onnx or onnxruntime.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import UsageError

GRAPH_OPT_LEVELS = ("disable", "basic", "extended", "all")
MAX_THREADS = max(64, 4 * (os.cpu_count() or 1))  # intra-op threads beyond the cores only wait; beyond this, refused
IO_DUMP_BUDGET_MB = 1024  # the default of every io_dump_budget_mb below


MAX_DURATION_S = 86400


def check_maxerr(maxerr: Any, flag: str = "--maxerr") -> float:
    """A ``--maxerr`` as a float.

    Raises:
        UsageError: negative, NaN, infinite or not a number.
    """
    if isinstance(maxerr, bool) or not isinstance(maxerr, (int, float)) or not math.isfinite(maxerr) or maxerr < 0:
        raise UsageError(f"{flag} must be a finite number >= 0, got {maxerr}")
    return float(maxerr)


def parse_input_shape(text: str) -> tuple[str | None, tuple[int, ...]]:
    """``--input-shape NAME:d0,d1,...`` (or ``d0,d1,...`` for a one-input model) as (name, dims).

    The name is everything before the last ``:``, so names that hold ``:``
    (``input:0:1,3,224,224``) work.

    Raises:
        UsageError: the dims are not whole numbers >= 0.
    """
    name, sep, dims = text.rpartition(":")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not shape or any(d < 0 or d >= 1 << 31 for d in shape):
        raise UsageError(f"--input-shape {text!r}: give NAME:d0,d1,... with whole numbers >= 0, e.g. x:1,3,224,224")
    return (name if sep else None), shape


@dataclass(frozen=True)
class DataOptions:
    """How test data is made from ``-d`` specs.

    Attributes:
        seed: seeds every generator; the same seed gives the same data.
        repeat: repeat file data this many times along axis 0 (batch).
        resize_input: resize images to the model's H and W.
        input_transform: a Python expression of ``data`` and ``np`` applied to
            file data after ``repeat``. It is the user's own code from the
            command line; it is never read from a bundle or a list file.
        input_shapes: (input name or None for a one-input model, dims): fixes
            an input's shape for every source, as ``--input-shape`` does
            (generators use it, ``resize_input`` resizes images to its H and W,
            file data that contradicts it is an error).
    """

    seed: int = 0
    repeat: int = 1
    resize_input: bool = False
    input_transform: str | None = None
    input_shapes: tuple[tuple[str | None, tuple[int, ...]], ...] = ()

    def __post_init__(self) -> None:
        if self.repeat < 1:
            raise UsageError(f"--repeat must be >= 1, got {self.repeat}")
        if not 0 <= self.seed < 2**63:
            raise UsageError(f"--seed must be in [0, 2**63), got {self.seed}")
        if self.input_transform is not None:
            try:
                compile(self.input_transform, "<--input-transform>", "eval")
            except SyntaxError as exc:
                raise UsageError(
                    f"--input-transform {self.input_transform!r} is not a Python expression: {exc.msg}"
                ) from None


@dataclass(frozen=True)
class EnableFlag:
    """One ``--enable-*`` flag of ``mgedump`` (DESIGN section 5).

    Attributes:
        name: the option's field name (``enable_io16xc32``).
        help: what it does, for ``--help``.
        aliases: other spellings accepted (MegEngine's own misspelling).
        refused_for: for MegEngine's layouts and fusions that ONNX has no
            equivalent of: the kernels they were for. The flag is refused.
    """

    name: str
    help: str
    aliases: tuple[str, ...] = ()
    refused_for: str | None = None

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")


ENABLE_FLAGS = (
    EnableFlag("enable_io16xc32", "float16 tensors between operators and at inputs/outputs; float32 arithmetic."),
    EnableFlag("enable_ioc16", "float16 storage and arithmetic (ops without float16 kernels stay float32)."),
    EnableFlag(
        "enable_fuse_conv_bias_nonlinearity", "Fuse Conv+bias+activation (onnxruntime's FusedConv; onnxruntime only)."
    ),
    EnableFlag("enable_nchw88", "onnxruntime's NCHWc layout for x86 AVX2 (onnxruntime's CPU provider only)."),
    EnableFlag(
        "enable_hwcd4",
        "Refused: a MegEngine OpenCL layout (no ONNX equivalent).",
        aliases=("enalbe_hwcd4",),
        refused_for="MegEngine's OpenCL kernels on mobile GPUs (image2d layout)",
    ),
    EnableFlag(
        "enable_nchw4",
        "Refused: a MegEngine CUDA layout (no ONNX equivalent).",
        refused_for="MegEngine's CUDA int8 kernels (NCHW4 layout)",
    ),
    EnableFlag(
        "enable_nchw44",
        "Refused: a MegEngine ARM layout (no ONNX equivalent).",
        refused_for="MegEngine's ARM kernels (NCHW44 layout)",
    ),
    EnableFlag(
        "enable_nchw44_dot",
        "Refused: a MegEngine ARM dot-product layout (no ONNX equivalent).",
        refused_for="MegEngine's ARMv8.2 dot-product int8 kernels (NCHW44-dot layout)",
    ),
    EnableFlag(
        "enable_nchw32",
        "Refused: a MegEngine CUDA layout (no ONNX equivalent).",
        refused_for="MegEngine's CUDA tensor-core int8 kernels (NCHW32 layout)",
    ),
    EnableFlag(
        "enable_chwn4",
        "Refused: a MegEngine CUDA layout (no ONNX equivalent).",
        refused_for="MegEngine's CUDA int8 kernels (CHWN4 layout)",
    ),
    EnableFlag(
        "enable_fuse_conv_bias_with_z",
        "Refused: a MegEngine CUDA fusion (no ONNX equivalent).",
        refused_for="MegEngine's ConvBias-with-residual (z) kernels on CUDA",
    ),
)
_FLAGS_BY_NAME = {name: flag for flag in ENABLE_FLAGS for name in (flag.name, *flag.aliases)}


@dataclass(frozen=True)
class OptimizeOptions:
    """Which rewrites ``mgedump`` applies to the bundled model. All are off by default.

    Build it with :meth:`from_flags` to get the command line's checks.

    Attributes:
        optimize_for_inference: portable rewrites; required by every ``enable_*`` flag.
        enable_io16xc32: float16 tensors between operators, float32 arithmetic.
        enable_ioc16: float16 storage and arithmetic where onnxruntime has kernels.
        enable_fuse_conv_bias_nonlinearity: onnxruntime's fused Conv (onnxruntime only).
        enable_nchw88: onnxruntime's NCHWc layout (onnxruntime's CPU provider, x86 AVX2).
        discard_var_name: rename internal tensors, drop node names and doc strings.
        fp32_nodes: glob patterns of node names or op types that stay float32
            in a float16 mode, whatever the test data says.
    """

    optimize_for_inference: bool = False
    enable_io16xc32: bool = False
    enable_ioc16: bool = False
    enable_fuse_conv_bias_nonlinearity: bool = False
    enable_nchw88: bool = False
    discard_var_name: bool = False
    fp32_nodes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.fp32_nodes and not (self.enable_ioc16 or self.enable_io16xc32):
            raise UsageError(
                "--fp32-nodes keeps nodes float32 in a float16 mode: add --enable-ioc16 or --enable-io16xc32"
            )

    @classmethod
    def from_flags(
        cls,
        optimize_for_inference: bool = False,
        discard_var_name: bool = False,
        fp32_nodes: Sequence[str] = (),
        **enable_flags: bool,
    ) -> OptimizeOptions:
        """Options from flag names (``enable_io16xc32=True``, ...), as the command line and ``trace.dump`` give them.

        Raises:
            UsageError: an unknown flag, a flag for MegEngine's own kernels, an
                ``enable_*`` flag without ``optimize_for_inference``, or
                ``enable_io16xc32`` with ``enable_ioc16``.
        """
        chosen: dict[str, bool] = {}
        for name, value in enable_flags.items():
            flag = _FLAGS_BY_NAME.get(name)
            if flag is None:
                raise UsageError(f"unknown optimisation flag {name!r}")
            if not value:
                continue
            if flag.refused_for:
                raise UsageError(
                    f"{flag.option} is a layout/fusion for {flag.refused_for}; "
                    "ONNX and onnxruntime have no equivalent, so mgedump refuses it rather than do nothing"
                )
            chosen[flag.name] = True
        if chosen and not optimize_for_inference:
            first = next(f for f in ENABLE_FLAGS if f.name in chosen)
            raise UsageError(f"{first.option} needs --optimize-for-inference", hint="add --optimize-for-inference")
        if chosen.get("enable_io16xc32") and chosen.get("enable_ioc16"):
            raise UsageError("--enable-io16xc32 and --enable-ioc16 exclude each other; pick one")
        return cls(
            optimize_for_inference=bool(optimize_for_inference),
            discard_var_name=bool(discard_var_name),
            fp32_nodes=tuple(p.strip() for p in fp32_nodes if p.strip()),
            **chosen,
        )

    @property
    def any(self) -> bool:
        """Whether any rewrite is on."""
        return bool(self.names())

    @property
    def float16(self) -> str | None:
        """The float16 mode, ``"ioc16"`` or ``"io16xc32"``, if one is on."""
        return "ioc16" if self.enable_ioc16 else "io16xc32" if self.enable_io16xc32 else None

    def names(self) -> list[str]:
        """The rewrites that are on, as manifest entries (``optimize-for-inference``, ``io16xc32``, ...)."""
        return [
            f.name.removeprefix("enable_").replace("_", "-")
            for f in fields(self)
            if isinstance(getattr(self, f.name), bool) and getattr(self, f.name)
        ]


@dataclass(frozen=True)
class PackOptions:
    """What ``mgedump`` packs besides the model.

    Attributes:
        specs: the ``-d`` values, one test case each (``@FILE`` gives several),
            or :class:`~mgedump.spec.CaseSpec` objects.
        data: how data is made and prepared.
        maxerr: the AssertEqual threshold recorded in the bundle.
        no_assert: store no expected outputs; ``mgerun`` then only runs and times.
        silent: record that ``mgerun`` prints failures only.
        optimize: rewrites for inference (none: the model as given).
        strip_info: write strip info (JSON) to this path, and onnxruntime's
            reduced-build config beside it (none: no strip info).
        embed_io_dump: store the io dump of the model as given on this many
            test cases (the first ones) in the bundle, so that ``mgerun`` names
            where a failing test case first diverges (0: none).
    """

    specs: Sequence[Any] = ()
    data: DataOptions = field(default_factory=DataOptions)
    maxerr: float = 1e-4
    no_assert: bool = False
    silent: bool = False
    optimize: OptimizeOptions = field(default_factory=OptimizeOptions)
    strip_info: str | None = None
    embed_io_dump: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "maxerr", check_maxerr(self.maxerr))
        if self.embed_io_dump < 0:
            raise UsageError(f"--embed-io-dump takes a count of test cases >= 1, got {self.embed_io_dump}")


@dataclass(frozen=True)
class VerifyOptions:
    """How ``mgerun`` verifies and times.

    Attributes:
        maxerr: overrides the bundle's threshold (none: the bundle's).
        silent: print failures only (none: the bundle's setting).
        no_assert: run and time only.
        iters: timed runs per test case.
        warmup: untimed runs before timing.
        threads: onnxruntime intra-op threads (none: onnxruntime's choice).
        provider: execution provider, ``CPU`` or ``CUDAExecutionProvider``, ...
            (none: the CPU provider).
        graph_opt: onnxruntime's graph optimisation level, one of
            ``GRAPH_OPT_LEVELS`` (none: onnxruntime's default, ``all``).
        duration_s: time each test case for at least this many seconds (and
            at least ``iters`` runs); 0: exactly ``iters`` runs.
        concurrency: threads issuing runs on the one session at once; the
            latency of each run under that load, and throughput, are reported.
        profile: write onnxruntime's profile JSON to this file; the report then
            also holds the time per operator type.
        bin_out_dump: write each test case's outputs as ``.npy`` into this folder.
        report_json: write the machine-readable report to this file
            (:func:`mgedump.runs.verify_all` writes it, for all bundles).
        junit_xml: write a JUnit XML report to this file (``verify_all``).
        report_html: write a self-contained HTML report with plots to this file (``verify_all``).
        io_dump: write every tensor of every test case into this folder (an io dump).
        io_dump_budget_mb: how many MiB of exposed tensors one run may hold;
            beyond it, a test case is run several times, a part of the tensors each.
        repeat_sweep: batch sizes: after verifying, time every test case with
            its inputs repeated N times along axis 0, for each N.
        specs: ``-d`` values, for a plain model only.
        data: data options, for a plain model only.
    """

    maxerr: float | None = None
    silent: bool | None = None
    no_assert: bool = False
    iters: int = 10
    warmup: int = 1
    threads: int | None = None
    provider: str | None = None
    graph_opt: str | None = None
    duration_s: float = 0.0
    concurrency: int = 1
    profile: str | None = None
    bin_out_dump: str | None = None
    report_json: str | None = None
    junit_xml: str | None = None
    report_html: str | None = None
    io_dump: str | None = None
    io_dump_budget_mb: int = IO_DUMP_BUDGET_MB
    repeat_sweep: Sequence[int] = ()
    specs: Sequence[Any] = ()
    data: DataOptions = field(default_factory=DataOptions)

    def __post_init__(self) -> None:
        if self.maxerr is not None:
            object.__setattr__(self, "maxerr", check_maxerr(self.maxerr))
        if self.iters < 1:
            raise UsageError(f"--iter must be >= 1, got {self.iters}")
        if self.warmup < 0:
            raise UsageError(f"--warmup-iter must be >= 0, got {self.warmup}")
        if self.threads is not None and not 1 <= self.threads <= MAX_THREADS:
            raise UsageError(
                f"--thread must be >= 1, got {self.threads}"
                if self.threads < 1
                else f"--thread must be at most {MAX_THREADS} (four per core, 64 at least), got {self.threads}"
            )
        if self.graph_opt is not None and self.graph_opt not in GRAPH_OPT_LEVELS:
            raise UsageError(f"--graph-opt must be one of {', '.join(GRAPH_OPT_LEVELS)}, got {self.graph_opt!r}")
        if any(n < 1 for n in self.repeat_sweep):
            raise UsageError(f"--repeat-sweep batch sizes must be >= 1, got {list(self.repeat_sweep)}")
        if self.io_dump_budget_mb < 1:
            raise UsageError(f"--io-dump-budget must be >= 1 (MiB), got {self.io_dump_budget_mb}")
        if not 1 <= self.concurrency <= MAX_THREADS:
            raise UsageError(
                f"--concurrency must be >= 1, got {self.concurrency}"
                if self.concurrency < 1
                else f"--concurrency must be at most {MAX_THREADS} (four per core, 64 at least), got {self.concurrency}"
            )
        if not (isinstance(self.duration_s, (int, float)) and math.isfinite(self.duration_s) and self.duration_s >= 0):
            raise UsageError(f"--duration must be a finite number of seconds >= 0, got {self.duration_s}")
        if self.duration_s > MAX_DURATION_S:
            raise UsageError(f"--duration must be at most {MAX_DURATION_S} seconds (a day), got {self.duration_s:g}")


@dataclass(frozen=True)
class DiffOptions:
    """How ``mgediff`` compares two runs.

    Attributes:
        maxerr: the AssertEqual threshold for every tensor (none: 1e-4, or
            1e-2 when either side holds float16: float16's precision).
        specs: ``-d`` values: the test data for sides that are models or bundles.
        data: data options for ``specs``.
        provider: execution provider for the runs (none: the CPU provider).
        io_dump_budget_mb: MiB of exposed tensors one run may hold.
        report_json: write the comparison as JSON to this file.
    """

    maxerr: float | None = None
    specs: Sequence[Any] = ()
    data: DataOptions = field(default_factory=DataOptions)
    provider: str | None = None
    io_dump_budget_mb: int = IO_DUMP_BUDGET_MB
    report_json: str | None = None

    def __post_init__(self) -> None:
        if self.maxerr is not None:
            object.__setattr__(self, "maxerr", check_maxerr(self.maxerr))
        if self.io_dump_budget_mb < 1:
            raise UsageError(f"--io-dump-budget must be >= 1 (MiB), got {self.io_dump_budget_mb}")
