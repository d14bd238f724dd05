"""Every option of the library, its flag, its default and its check, declared once.

Each field of an options dataclass carries its command-line flag in its
metadata (:func:`option`): the flag's names, help text, how the command line's
text becomes the field's value, and the check of a value. The commands
generate their click options from these declarations
(:mod:`mgedump.cli.declared`), so a new option is one field here; the defaults
written below are the only ones. A field holding another options dataclass
(:func:`group`) brings that class's flags along. Each dataclass checks its
values when it is made, so a bad value fails with one
:class:`~mgedump.errors.UsageError` before any work starts, whether it came
from the command line or from library code.

This module imports nothing heavy: the command line reads these declarations
to print ``--help`` without loading numpy, onnx or onnxruntime.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any

from .errors import UsageError

DEFAULT_MAXERR = 1e-4  # AssertEqual's threshold when none is given (docs/assertion.md)
FLOAT16_MAXERR = 1e-2  # mgediff's default when either side holds float16: float16's own precision
FLOAT16_MARGIN = 0.5  # the float16 search aims this fraction below --maxerr (measured on held-out data: README)
IO_DUMP_BUDGET_MB = 1024  # MiB of exposed tensors one run may hold (docs/io-dump.md)
GRAPH_OPT_LEVELS = ("disable", "basic", "extended", "all")
QUANTIZE_TYPES = ("int8",)  # --quantize
QUANTIZE_MODES = ("static", "dynamic")  # --quantize-mode: QDQ calibrated ahead, or MatMul weights only
CALIBRATE_METHODS = ("minmax", "entropy", "percentile")  # onnxruntime's calibrators; minmax measured best (docs)
INT8_WEIGHTS = ("per-channel", "per-tensor")
MAX_THREADS = max(64, 4 * (os.cpu_count() or 1))  # intra-op threads beyond the cores only wait; beyond this, refused
MAX_DURATION_S = 86400


# ---------------------------------------------------------------------------------------------------------------------
# Declarations


@dataclass(frozen=True)
class Flag:
    """How one field appears on the command line.

    Attributes:
        names: the flag's spellings, e.g. ``("-d", "--data")``; the first long one names it in messages.
        help: the help text; ``[default: X]`` is added from the field's default when ``show_default``.
        metavar: the value's placeholder in ``--help``.
        kind: the click type of one value (``int``, ``float``, ``str``), or ``bool`` for an on/off flag.
        multiple: the flag may be given several times; the field gets every value.
        choices: the values allowed (a ``click.Choice``).
        parse: turns what the command line gave into the field's value (e.g. split at commas).
        check: refuses a bad value of the field with a :class:`UsageError`; called for library
            callers too (``check(value)``).
        flag_value: the value of a flag given without its optional value (``--embed-io-dump`` alone is 1).
        show_default: state the default in ``--help``.
        fills: a second field this flag sets (``--maxerr NAME:X`` fills ``output_maxerr``); ``parse`` then returns
            (this field's value or :data:`NOT_GIVEN`, the other field's value). That field is declared with
            :func:`filled_by`.
    """

    names: tuple[str, ...]
    help: str
    metavar: str | None = None
    kind: type = str
    multiple: bool = False
    choices: tuple[str, ...] | None = None
    parse: Callable[[Any], Any] | None = None
    check: Callable[[Any], None] | None = None
    flag_value: Any = None
    show_default: bool = False
    fills: str | None = None

    @property
    def name(self) -> str:
        """The flag as messages name it (``--warmup-iter``)."""
        return next((n for n in self.names if n.startswith("--")), self.names[0])


def option(
    default: Any = MISSING,
    *names: str,
    help: str,
    default_factory: Callable[[], Any] | Any = MISSING,
    **flag: Any,
) -> Any:
    """A dataclass field with its command-line flag (see :class:`Flag` for the keywords)."""
    declared = Flag(names=names, help=help, **flag)
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata={"flag": declared})
    return field(default=default, metadata={"flag": declared})


NOT_GIVEN: Any = object()  # what a flag's parse returns for its own field when only its companion was given


def filled_by(default_factory: Callable[[], Any], flag: str) -> Any:
    """A field that another field's flag sets (see :attr:`Flag.fills`): it has no flag of its own."""
    return field(default_factory=default_factory, metadata={"filled_by": flag})


def group(cls: type) -> Any:
    """A field holding another options dataclass, whose flags the command line shows alongside."""
    return field(default_factory=cls, metadata={"group": cls})


def declared_flags(cls: type) -> Iterator[tuple[tuple[str, ...], Any, Flag]]:
    """Every (field path, field, flag) of an options dataclass, groups included, in declaration order."""
    for f in fields(cls):
        if "group" in f.metadata:
            for path, inner, flag in declared_flags(f.metadata["group"]):
                yield (f.name, *path), inner, flag
        elif "flag" in f.metadata:
            yield (f.name,), f, f.metadata["flag"]


def default_of(f: Any) -> Any:
    """A field's default value."""
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    raise KeyError(f.name)


def changed(options: Any) -> list[str]:
    """The flags of ``options`` whose values differ from their defaults."""
    return [flag.name for path, f, flag in declared_flags(type(options)) if _get(options, path) != default_of(f)]


def is_default(value: Any, default: Any) -> bool:
    """Whether a value is its field's default (an array given where a list belongs is not: no elementwise ==)."""
    if value is default:
        return True
    if type(value) is not type(default):
        return False
    try:
        return bool(value == default)
    except (TypeError, ValueError):
        return False


def _get(options: Any, path: Sequence[str]) -> Any:
    for name in path:
        options = getattr(options, name)
    return options


class Options:
    """The base of every options dataclass: each declared check runs when an instance is made."""

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            flag = f.metadata.get("flag")
            value = getattr(self, f.name)
            if flag is not None and flag.check is not None and not is_default(value, default_of(f)):
                flag.check(value)
        self._check_together()

    def _check_together(self) -> None:
        """Checks of several fields at once (none by default)."""


# ---------------------------------------------------------------------------------------------------------------------
# Checks and parsers


def check_maxerr(maxerr: Any, flag: str = "--maxerr") -> float:
    """A ``--maxerr`` as a float.

    Raises:
        UsageError: negative, NaN, infinite or not a number.
    """
    if isinstance(maxerr, bool) or not isinstance(maxerr, (int, float)) or not math.isfinite(maxerr) or maxerr < 0:
        raise UsageError(f"{flag} must be a finite number >= 0, got {maxerr}")
    return float(maxerr)


def _one_of(value: Any, choices: Sequence[str], flag: str) -> None:
    if value not in choices:
        raise UsageError(f"{flag} must be one of {', '.join(choices)}, got {value!r}")


def _maxerr(value: Any) -> None:
    if value is not None:
        check_maxerr(value)


def parse_maxerr(values: Sequence[str]) -> tuple[Any, tuple[tuple[str, float], ...]]:
    """``--maxerr X`` and ``--maxerr NAME:X`` (repeatable) as (the bound of every output, or :data:`NOT_GIVEN`;
    the bounds of named outputs). The name is everything before the last ``:``.

    Raises:
        UsageError: a value that is neither a number nor NAME:number.
    """
    every: Any = NOT_GIVEN
    named: dict[str, float] = {}
    for text in values:
        try:
            every = check_maxerr(float(text))
            continue
        except ValueError:
            pass
        name, sep, number = text.rpartition(":")
        try:
            value = float(number)
        except ValueError:
            value = None
        if not sep or not name or value is None:
            raise UsageError(f"--maxerr {text!r}: give a number (e.g. 1e-4) or OUTPUT:number (e.g. prob:1e-3)")
        named[name] = check_maxerr(value, f"--maxerr {name}:")
    return every, tuple(named.items())


def _output_maxerr(value: Any) -> tuple[tuple[str, float], ...]:
    """Per-output bounds as (name, bound) pairs, from pairs or a mapping; each bound checked."""
    pairs = value.items() if isinstance(value, Mapping) else value
    checked = []
    for item in pairs:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str)):
            raise UsageError(f"output_maxerr takes output names and bounds, got {item!r}")
        checked.append((item[0], check_maxerr(item[1], f"--maxerr {item[0]}:")))
    return tuple(checked)


def at_least(low: int, flag: str, unit: str = "") -> Callable[[Any], None]:
    """A check: a whole number >= ``low``."""

    def check(value: Any) -> None:
        if value < low:
            raise UsageError(f"{flag} must be >= {low}{unit}, got {value}")

    return check


def _bounded(flag: str) -> Callable[[Any], None]:
    """A count of threads: at least 1, at most :data:`MAX_THREADS`."""

    def check(value: Any) -> None:
        if value is None:
            return
        if value < 1:
            raise UsageError(f"{flag} must be >= 1, got {value}")
        if value > MAX_THREADS:
            raise UsageError(f"{flag} must be at most {MAX_THREADS} (four per core, 64 at least), got {value}")

    return check


def _fraction(flag: str) -> Callable[[Any], None]:
    """A check: a number in [0, 1)."""

    def check(value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise UsageError(f"{flag} must be a fraction in [0, 1), got {value}")

    return check


def _seed(value: Any) -> None:
    if not 0 <= value < 2**63:
        raise UsageError(f"--seed must be in [0, 2**63), got {value}")


def _transform(value: Any) -> None:
    if value is None:
        return
    try:
        compile(value, "<--input-transform>", "eval")
    except SyntaxError as exc:
        raise UsageError(f"--input-transform {value!r} is not a Python expression: {exc.msg}") from None


def _graph_opt(value: Any) -> None:
    if value is not None and value not in GRAPH_OPT_LEVELS:
        raise UsageError(f"--graph-opt must be one of {', '.join(GRAPH_OPT_LEVELS)}, got {value!r}")


def _duration(value: Any) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise UsageError(f"--duration must be a finite number of seconds >= 0, got {value}")
    if value > MAX_DURATION_S:
        raise UsageError(f"--duration must be at most {MAX_DURATION_S} seconds (a day), got {value:g}")


def _sweep(value: Any) -> None:
    if any(n < 1 for n in value):
        raise UsageError(f"--repeat-sweep batch sizes must be >= 1, got {list(value)}")


def _embed(value: Any) -> None:
    if value < 0:
        raise UsageError(f"--embed-io-dump takes a count of test cases >= 1, got {value}")


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


def _input_shapes(values: Sequence[str]) -> tuple[tuple[str | None, tuple[int, ...]], ...]:
    return tuple(parse_input_shape(text) for text in values)


def parse_sweep(value: str) -> tuple[int, ...]:
    """``--repeat-sweep 1,2,4,8`` as batch sizes.

    Raises:
        UsageError: not a comma-separated list of whole numbers.
    """
    try:
        return tuple(int(part) for part in value.split(","))
    except ValueError:
        raise UsageError(
            f"--repeat-sweep {value!r} is not a comma-separated list of batch sizes, e.g. 1,2,4,8"
        ) from None


def parse_patterns(value: str) -> tuple[str, ...]:
    """``--fp32-nodes 'Softmax,*/ln/*'`` as glob patterns.

    Raises:
        UsageError: no pattern in it.
    """
    patterns = tuple(p.strip() for p in value.split(",") if p.strip())
    if not patterns:
        raise UsageError(f"--fp32-nodes {value!r} names no node pattern (e.g. 'Softmax,*/ln/*')")
    return patterns


def _refuse(target: str) -> Callable[[Any], None]:
    """The check of a MegEngine layout or fusion flag: ONNX has no equivalent, so it is refused when on."""

    def check(value: Any) -> None:
        if value:
            flag = next(f for f in ENABLE_FLAGS if f.refused_for == target)
            raise UsageError(
                f"{flag.option} is a layout/fusion for {target}; "
                "ONNX and onnxruntime have no equivalent, so mgedump refuses it rather than do nothing"
            )

    return check


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value)


# ---------------------------------------------------------------------------------------------------------------------
# The options


DATA_HELP = (
    "Test case: '#rand(MIN,MAX[,dims][,...])', '#randn(MEAN,STD)', '#const(V)', an image, .npy, .npz or .pb file, "
    "'NAME:SOURCE;NAME:SOURCE', or @LIST (one test case per line). Repeatable."
)


def _cases_option() -> Any:
    """``-d/--data SPEC``: the field of the test cases, in every command."""
    return option((), "-d", "--data", metavar="SPEC", multiple=True, parse=_as_tuple, check=_cases, help=DATA_HELP)


def _io_dump_budget(help: str) -> Any:
    """``--io-dump-budget MB``: how much of a run's tensors one run may expose, for the commands that expose them."""
    return option(
        IO_DUMP_BUDGET_MB,
        "--io-dump-budget",
        kind=int,
        metavar="MB",
        show_default=True,
        check=at_least(1, "--io-dump-budget", " (MiB)"),
        help=help,
    )


@dataclass(frozen=True)
class DataOptions(Options):
    """How test data is made from ``-d`` specs (docs/data-specs.md).

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

    seed: int = option(0, "--seed", kind=int, show_default=True, check=_seed, help="Seed of the random generators.")
    repeat: int = option(
        1,
        "--repeat",
        kind=int,
        show_default=True,
        check=at_least(1, "--repeat"),
        help="Repeat file data N times along axis 0 (batch).",
    )
    resize_input: bool = option(False, "--resize-input", kind=bool, help="Resize images to the model's H and W.")
    input_transform: str | None = option(
        None,
        "--input-transform",
        metavar="EXPR",
        check=_transform,
        help="Python expression of 'data' and 'np' applied to file data, e.g. 'data/255'.",
    )
    input_shapes: tuple[tuple[str | None, tuple[int, ...]], ...] = option(
        (),
        "--input-shape",
        metavar="NAME:d0,d1,...",
        multiple=True,
        parse=_input_shapes,
        help="Fix an input's shape for every source (symbolic dims); the name may be left out for a one-input "
        "model. Repeatable.",
    )


@dataclass(frozen=True)
class EnableFlag:
    """One ``--enable-*`` flag of ``mgedump`` (docs: README, "Optimising for inference").

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


def _enable(name: str) -> Any:
    """The field of one ``--enable-*`` flag, from its entry in :data:`ENABLE_FLAGS`."""
    flag = _FLAGS_BY_NAME[name]
    names = (flag.option, *("--" + alias.replace("_", "-") for alias in flag.aliases))
    check = _refuse(flag.refused_for) if flag.refused_for else None
    return option(False, *names, kind=bool, check=check, help=flag.help)


@dataclass(frozen=True)
class OptimizeOptions(Options):
    """Which rewrites ``mgedump`` applies to the bundled model. All are off by default.

    Attributes:
        optimize_for_inference: portable rewrites; required by every ``enable_*`` flag.
        enable_io16xc32: float16 tensors between operators, float32 arithmetic.
        enable_ioc16: float16 storage and arithmetic where onnxruntime has kernels.
        enable_fuse_conv_bias_nonlinearity: onnxruntime's fused Conv (onnxruntime only).
        enable_nchw88: onnxruntime's NCHWc layout (onnxruntime's CPU provider, x86 AVX2).
        enable_hwcd4, enable_nchw4, enable_nchw44, enable_nchw44_dot, enable_nchw32,
        enable_chwn4, enable_fuse_conv_bias_with_z: MegEngine's layouts and
            fusions for its own kernels; refused when on (no ONNX equivalent).
        discard_var_name: rename internal tensors, drop node names and doc strings.
        fp32_nodes: glob patterns of node names or op types that stay float32
            in a float16 mode, whatever the test data says.
    """

    optimize_for_inference: bool = option(
        False,
        "--optimize-for-inference",
        kind=bool,
        help="Portable rewrites: constant folding, Identity/Dropout removal, BatchNorm and bias folded into Conv/Gemm.",
    )
    enable_io16xc32: bool = _enable("enable_io16xc32")
    enable_ioc16: bool = _enable("enable_ioc16")
    enable_fuse_conv_bias_nonlinearity: bool = _enable("enable_fuse_conv_bias_nonlinearity")
    enable_nchw88: bool = _enable("enable_nchw88")
    enable_hwcd4: bool = _enable("enable_hwcd4")
    enable_nchw4: bool = _enable("enable_nchw4")
    enable_nchw44: bool = _enable("enable_nchw44")
    enable_nchw44_dot: bool = _enable("enable_nchw44_dot")
    enable_nchw32: bool = _enable("enable_nchw32")
    enable_chwn4: bool = _enable("enable_chwn4")
    enable_fuse_conv_bias_with_z: bool = _enable("enable_fuse_conv_bias_with_z")
    discard_var_name: bool = option(
        False,
        "--discard-var-name",
        kind=bool,
        help="Rename internal tensors and weights, drop node names and doc strings.",
    )
    fp32_nodes: tuple[str, ...] = option(
        (),
        "--fp32-nodes",
        metavar="PATTERN[,PATTERN]",
        parse=parse_patterns,
        help="With --enable-ioc16/--enable-io16xc32 or --quantize int8: keep these nodes float (globs of node names "
        "or op types, subgraphs included, e.g. 'Softmax,*/ln/*'); a pattern that matches no node is refused.",
    )

    keep_io_types: bool = option(
        False,
        "--keep-io-types",
        kind=bool,
        help="With --enable-ioc16/--enable-io16xc32: the model's float inputs and outputs stay float32 (no float16 "
        "rounding of the outputs; the bundle's test data stays float32).",
    )
    float16_margin: float = option(
        FLOAT16_MARGIN,
        "--float16-margin",
        kind=float,
        metavar="FRACTION",
        check=_fraction("--float16-margin"),
        help=f"With --enable-ioc16/--enable-io16xc32: the search aims this fraction below --maxerr (default "
        f"{FLOAT16_MARGIN:g}), so that data it has not seen has room; where nothing reaches the aim it takes "
        "--maxerr itself and says so.",
    )
    quantize: str | None = option(
        None,
        "--quantize",
        metavar="int8",
        choices=QUANTIZE_TYPES,
        check=lambda v: _one_of(v, QUANTIZE_TYPES, "--quantize"),
        help="Quantize with onnxruntime's quantizer and prove it on the test data: int8 (static QDQ calibrated on the "
        "test cases or --calibrate data; nodes whose error breaks --maxerr stay float; a model int8 destroys is "
        "refused). Runs the portable rewrites first.",
    )
    quantize_mode: str = option(
        QUANTIZE_MODES[0],
        "--quantize-mode",
        choices=QUANTIZE_MODES,
        show_default=True,
        check=lambda v: _one_of(v, QUANTIZE_MODES, "--quantize-mode"),
        help="With --quantize: static (int8 weights, uint8 activations with ranges calibrated ahead) or dynamic "
        "(int8 MatMul weights, activations quantized at run time: for transformers).",
    )
    calibrate_method: str = option(
        CALIBRATE_METHODS[0],
        "--calibrate-method",
        choices=CALIBRATE_METHODS,
        show_default=True,
        check=lambda v: _one_of(v, CALIBRATE_METHODS, "--calibrate-method"),
        help="With --quantize int8 (static): how activation ranges are calibrated.",
    )
    int8_weights: str = option(
        INT8_WEIGHTS[0],
        "--int8-weights",
        choices=INT8_WEIGHTS,
        show_default=True,
        check=lambda v: _one_of(v, INT8_WEIGHTS, "--int8-weights"),
        help="With --quantize: one scale per output channel (from opset 13) or per weight tensor.",
    )

    def _check_together(self) -> None:
        object.__setattr__(self, "fp32_nodes", tuple(p.strip() for p in self.fp32_nodes if p.strip()))
        if self.float16_margin != FLOAT16_MARGIN and not self.float16:
            raise UsageError("--float16-margin applies to the float16 search: add --enable-ioc16 or --enable-io16xc32")
        if self.keep_io_types and not self.float16:
            raise UsageError(
                "--keep-io-types keeps a float16 model's inputs and outputs float32: add --enable-ioc16 "
                "or --enable-io16xc32"
            )
        if self.quantize and self.float16:
            raise UsageError(f"--quantize {self.quantize} and --enable-{self.float16} exclude each other; pick one")
        defaults = {f.name: default_of(f) for f in fields(self)}
        for name in ("quantize_mode", "calibrate_method", "int8_weights"):
            if not self.quantize and getattr(self, name) != defaults[name]:
                raise UsageError(f"--{name.replace('_', '-')} applies to --quantize int8, which is not given")
        if self.quantize and self.quantize_mode == "dynamic" and self.calibrate_method != defaults["calibrate_method"]:
            raise UsageError("--calibrate-method applies to --quantize-mode static: dynamic mode calibrates nothing")
        chosen = [f for f in ENABLE_FLAGS if getattr(self, f.name)]
        if chosen and not self.optimize_for_inference:
            raise UsageError(f"{chosen[0].option} needs --optimize-for-inference", hint="add --optimize-for-inference")
        if self.enable_io16xc32 and self.enable_ioc16:
            raise UsageError("--enable-io16xc32 and --enable-ioc16 exclude each other; pick one")
        if self.fp32_nodes and not (self.enable_ioc16 or self.enable_io16xc32 or self.quantize):
            raise UsageError(
                "--fp32-nodes keeps nodes float in a float16 or int8 mode: add --enable-ioc16, --enable-io16xc32 "
                "or --quantize int8"
            )

    @classmethod
    def from_flags(cls, **flags: Any) -> OptimizeOptions:
        """Options from flag names (``enable_io16xc32=True``, MegEngine's ``enalbe_hwcd4``, ...), as ``trace.dump``
        takes them.

        Raises:
            UsageError: an unknown flag, or a combination the fields refuse.
        """
        known = {f.name for f in fields(cls)}
        given: dict[str, Any] = {}
        for name, value in flags.items():
            flag = _FLAGS_BY_NAME.get(name)
            if flag is None and name not in known:
                raise UsageError(f"unknown optimisation flag {name!r}")
            given[flag.name if flag is not None else name] = value
        if "fp32_nodes" in given:
            given["fp32_nodes"] = tuple(given["fp32_nodes"])
        return cls(**given)

    @property
    def any(self) -> bool:
        """Whether any rewrite is on."""
        return bool(self.names())

    @property
    def float16(self) -> str | None:
        """The float16 mode, ``"ioc16"`` or ``"io16xc32"``, if one is on."""
        return "ioc16" if self.enable_ioc16 else "io16xc32" if self.enable_io16xc32 else None

    def names(self) -> list[str]:
        """The rewrites that are on, as manifest entries (``optimize-for-inference``, ``io16xc32``, ``int8``, ...)."""
        return [
            f.name.removeprefix("enable_").replace("_", "-")
            for f in fields(self)
            if isinstance(getattr(self, f.name), bool) and getattr(self, f.name)
        ] + ([self.quantize] if self.quantize else [])


def _cases(value: Any) -> Any:
    """The test cases as given: ``-d`` texts, :class:`~mgedump.data.spec.CaseSpec` objects, arrays or dicts, or
    :class:`~mgedump.data.TestData` already parsed (which passes as it is)."""
    if hasattr(value, "list_files"):  # TestData: parsed at the edge, not parsed again
        return value
    if isinstance(value, (str, bytes)) or is_dataclass(value) or isinstance(value, Mapping) or hasattr(value, "dtype"):
        raise UsageError(
            f"cases must be a list of test cases (-d texts, arrays or dicts of input name to array), "
            f"got one {type(value).__name__}"
        )
    return tuple(value)


@dataclass(frozen=True)
class PackOptions(Options):
    """What ``mgedump`` packs besides the model.

    Attributes:
        cases: the test cases: ``-d`` texts (``@FILE`` gives several),
            :class:`~mgedump.data.spec.CaseSpec` objects, or, from code, arrays:
            an array per test case for a one-input model, or a dict of input name to array.
        data: how data is made and prepared.
        maxerr: the AssertEqual threshold recorded in the bundle.
        no_assert: store no expected outputs; ``mgerun`` then only runs and times.
        silent: record that ``mgerun`` prints failures only.
        optimize: rewrites for inference (none: the model as given).
        calibrate: with int8 (static): the calibration data, as ``cases`` takes it (none: the test cases).
        strip_info: write strip info (JSON) to this path, and onnxruntime's
            reduced-build config beside it (none: no strip info). On the
            command line, ``--output-strip-info`` writes it to ``OUT.json``.
        embed_io_dump: store the io dump of the model as given on this many
            test cases (the first ones) in the bundle, so that ``mgerun`` names
            where a failing test case first diverges (0: none).
        nonfinite_ok: expected outputs may hold NaN or infinity: a warning names the output and the count
            (``trace.dump`` sets it, as MegEngine dumps them); no flag: the command line refuses them.
    """

    cases: Any = _cases_option()
    data: DataOptions = group(DataOptions)
    maxerr: float = option(
        DEFAULT_MAXERR,
        "--maxerr",
        metavar="[OUTPUT:]X",
        multiple=True,
        parse=parse_maxerr,
        fills="output_maxerr",
        show_default=True,
        check=_maxerr,
        help="AssertEqual threshold recorded in the bundle; OUTPUT:X for one output (repeatable).",
    )
    output_maxerr: tuple[tuple[str, float], ...] = filled_by(tuple, "--maxerr")
    no_assert: bool = option(
        False, "--no-assert", kind=bool, help="Store no expected outputs: mgerun only runs and times."
    )
    silent: bool = option(False, "--silent", kind=bool, help="Record that mgerun prints failures only.")
    optimize: OptimizeOptions = group(OptimizeOptions)
    calibrate: Sequence[Any] = option(
        (),
        "--calibrate",
        metavar="SPEC",
        multiple=True,
        parse=_as_tuple,
        help="With --quantize int8 (static): calibrate the activation ranges on this data (repeatable; the -d "
        "grammar: files, images, @lists, generators) instead of the test cases.",
    )
    strip_info: str | None = option(
        None,
        "--output-strip-info",
        kind=bool,
        help="Also write OUT.json (operators, dtypes) and onnxruntime's reduced-build config.",
    )
    model_out: str | None = option(
        None,
        "--output-model",
        metavar="FILE",
        help="Also write the bundled model (optimised, converted or quantized) as a plain ONNX file; its external "
        "data, if any, beside it as model.onnx.data.",
    )
    embed_io_dump: int = option(
        0,
        "--embed-io-dump",
        kind=int,
        flag_value=1,
        metavar="[N]",
        check=_embed,
        help="Store every tensor of the model as given on the first N test cases (default 1) in the bundle: "
        "mgerun then names the node where a failing test case first diverges.",
    )
    nonfinite_ok: bool = field(default=False)

    def _check_together(self) -> None:
        object.__setattr__(self, "maxerr", check_maxerr(self.maxerr))
        object.__setattr__(self, "output_maxerr", _output_maxerr(self.output_maxerr))
        object.__setattr__(self, "cases", _cases(self.cases))
        if self.calibrate:
            object.__setattr__(self, "calibrate", _cases(self.calibrate))
            if self.optimize.quantize is None or self.optimize.quantize_mode != "static":
                raise UsageError("--calibrate gives calibration data to --quantize int8 (static), which is not given")

    def maxerr_of(self, output: str) -> float:
        """The bound of one output: its own, else the bundle's."""
        return dict(self.output_maxerr).get(output, self.maxerr)


@dataclass(frozen=True)
class VerifyOptions(Options):
    """How ``mgerun`` verifies and times.

    Attributes:
        cases: ``-d`` values (or arrays, as for :class:`PackOptions`), for a plain model only.
        data: data options, for a plain model only.
        maxerr: overrides the bundle's threshold (none: the bundle's).
        silent: print failures only (none: the bundle's setting).
        no_assert: run and time only.
        iters: timed runs per test case.
        warmup: untimed runs before timing.
        duration_s: time each test case for at least this many seconds (and
            at least ``iters`` runs); 0: exactly ``iters`` runs.
        concurrency: threads issuing runs on the one session at once; the
            latency of each run under that load, and throughput, are reported.
        threads: onnxruntime intra-op threads (none: onnxruntime's choice).
        provider: execution provider, ``CPU`` or ``CUDAExecutionProvider``, ...
            (none: the CPU provider).
        graph_opt: onnxruntime's graph optimisation level, one of
            ``GRAPH_OPT_LEVELS`` (none: onnxruntime's default, ``all``).
        profile: write onnxruntime's profile JSON to this file; the report then
            also holds the time per operator type.
        bin_out_dump: write each test case's outputs as ``.npy`` into this folder.
        repeat_sweep: batch sizes: after verifying, time every test case with
            its inputs repeated N times along axis 0, for each N.
        report_json: write the machine-readable report to this file
            (:func:`mgedump.commands.verify_all` writes it, for all bundles).
        junit_xml: write a JUnit XML report to this file (``verify_all``).
        report_html: write a self-contained HTML report with plots to this file (``verify_all``).
        io_dump: write every tensor of every test case into this folder (an io dump).
        io_dump_budget_mb: how many MiB of exposed tensors one run may hold;
            beyond it, a test case is run several times, a part of the tensors each.
    """

    cases: Any = _cases_option()
    data: DataOptions = group(DataOptions)
    maxerr: float | None = option(
        None,
        "--maxerr",
        metavar="[OUTPUT:]X",
        multiple=True,
        parse=parse_maxerr,
        fills="output_maxerr",
        check=_maxerr,
        help="Override the bundle's AssertEqual thresholds (every output's); OUTPUT:X for one output (repeatable).",
    )
    output_maxerr: tuple[tuple[str, float], ...] = filled_by(tuple, "--maxerr")
    silent: bool | None = option(None, "--silent", kind=bool, help="Print failures only.")
    no_assert: bool = option(False, "--no-assert", kind=bool, help="Run and time only; check nothing.")
    iters: int = option(
        10, "--iter", kind=int, show_default=True, check=at_least(1, "--iter"), help="Timed runs per test case."
    )
    warmup: int = option(
        1,
        "--warmup-iter",
        kind=int,
        show_default=True,
        check=at_least(0, "--warmup-iter"),
        help="Untimed runs before timing.",
    )
    duration_s: float = option(
        0.0,
        "--duration",
        kind=float,
        metavar="SECONDS",
        check=_duration,
        help="Time each test case for at least SECONDS (and at least --iter runs).",
    )
    concurrency: int = option(
        1,
        "--concurrency",
        kind=int,
        metavar="N",
        show_default=True,
        check=_bounded("--concurrency"),
        help="Threads issuing runs on the one session at once: latency and throughput under load.",
    )
    threads: int | None = option(
        None,
        "--thread",
        kind=int,
        check=_bounded("--thread"),
        help="onnxruntime intra-op threads (default: onnxruntime's choice).",
    )
    provider: str | None = option(
        None,
        "--provider",
        metavar="NAME",
        help="Execution provider, e.g. CPU or CUDAExecutionProvider (default CPU).",
    )
    graph_opt: str | None = option(
        None,
        "--graph-opt",
        choices=GRAPH_OPT_LEVELS,
        check=_graph_opt,
        help="onnxruntime graph optimisation level (default: onnxruntime's, all).",
    )
    profile: str | None = option(None, "--profile", metavar="FILE", help="Write onnxruntime's profile (JSON) to FILE.")
    bin_out_dump: str | None = option(
        None, "--bin-out-dump", metavar="DIR", help="Write every output as DIR/test_data_set_N/NAME.npy."
    )
    repeat_sweep: Sequence[int] = option(
        (),
        "--repeat-sweep",
        metavar="N,N,...",
        parse=parse_sweep,
        check=_sweep,
        help="Also time each test case with its inputs repeated N times along axis 0.",
    )
    report_json: str | None = option(
        None, "--report-json", metavar="FILE", help="Write a machine-readable report (docs/reports.md)."
    )
    junit_xml: str | None = option(
        None, "--junit-xml", metavar="FILE", help="Write a JUnit XML report (for CI test reporters)."
    )
    report_html: str | None = option(
        None,
        "--report-html",
        metavar="FILE",
        help="Write a self-contained HTML report with plots (no network needed to view it).",
    )
    io_dump: str | None = option(
        None, "--io-dump", metavar="DIR", help="Write every tensor of every test case into DIR (an io dump)."
    )
    io_dump_budget_mb: int = _io_dump_budget("MiB of tensors one run may expose; beyond it a test case runs in parts.")

    def _check_together(self) -> None:
        if self.maxerr is not None:
            object.__setattr__(self, "maxerr", check_maxerr(self.maxerr))
        object.__setattr__(self, "output_maxerr", _output_maxerr(self.output_maxerr))
        object.__setattr__(self, "cases", _cases(self.cases))
        object.__setattr__(self, "repeat_sweep", tuple(self.repeat_sweep))


@dataclass(frozen=True)
class DiffOptions(Options):
    """How ``mgediff`` compares two runs.

    Attributes:
        cases: ``-d`` values: the test data for sides that are models or bundles.
        data: data options for ``cases``.
        maxerr: the AssertEqual threshold for every tensor (none: :data:`DEFAULT_MAXERR`, or
            :data:`FLOAT16_MAXERR` when either side holds float16: float16's precision).
        provider: execution provider for the runs (none: the CPU provider).
        io_dump_budget_mb: MiB of exposed tensors one run may hold.
        report_json: write the comparison as JSON to this file.
    """

    cases: Any = _cases_option()
    data: DataOptions = group(DataOptions)
    maxerr: float | None = option(
        None,
        "--maxerr",
        kind=float,
        check=_maxerr,
        help=f"AssertEqual threshold per tensor (default: {DEFAULT_MAXERR:g}; {FLOAT16_MAXERR:g} when either side "
        "holds float16).",
    )
    provider: str | None = option(
        None, "--provider", metavar="NAME", help="Execution provider for the runs (default CPU)."
    )
    io_dump_budget_mb: int = _io_dump_budget("MiB of tensors one run may expose.")
    report_json: str | None = option(None, "--report-json", metavar="FILE", help="Write the comparison as JSON.")

    def _check_together(self) -> None:
        if self.maxerr is not None:
            object.__setattr__(self, "maxerr", check_maxerr(self.maxerr))
        object.__setattr__(self, "cases", _cases(self.cases))
