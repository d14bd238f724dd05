"""The ``mgedump`` and ``mgerun`` commands: a thin click layer over the library.

Each command parses its options, builds one options object, calls the library
and maps the outcome to an exit code (0 passed, 1 assertion or run failure,
2 bad usage or input). Heavy modules (numpy, onnx, onnxruntime, OpenCV) are
imported only inside the commands, so ``--help`` stays fast.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any, Callable, Sequence

import click

from . import __version__
from .errors import EXIT_USAGE, MgeError

_state = {"verbose": 0}


def _data_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options that make test data from -d specs (shared by both commands)."""
    options = [
        click.option("-d", "--data", "specs", multiple=True, metavar="SPEC",
                     help="Test case: '#rand(MIN,MAX[,dims][,...])', '#randn(MEAN,STD)', '#const(V)', an image, "
                          ".npy, .npz or .pb file, 'NAME:SOURCE;NAME:SOURCE', or @LIST (one test case per line). Repeatable."),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random generators."),
        click.option("--repeat", type=int, default=1, show_default=True, help="Repeat file data N times along axis 0 (batch)."),
        click.option("--resize-input", is_flag=True, help="Resize images to the model's H and W."),
        click.option("--input-transform", metavar="EXPR", help="Python expression of 'data' and 'np' applied to file data, e.g. 'data/255'."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


_ENABLE_FLAGS = [
    ("--enable-io16xc32", (), "float16 tensors between operators and at inputs/outputs; float32 arithmetic."),
    ("--enable-ioc16", (), "float16 storage and arithmetic (ops without float16 kernels stay float32)."),
    ("--enable-fuse-conv-bias-nonlinearity", (), "Fuse Conv+bias+activation (onnxruntime's FusedConv; onnxruntime only)."),
    ("--enable-nchw88", (), "onnxruntime's NCHWc layout for x86 AVX2 (onnxruntime's CPU provider only)."),
    ("--enable-hwcd4", ("--enalbe-hwcd4",), "MegEngine OpenCL layout: refused (no ONNX equivalent)."),
    ("--enable-nchw4", (), "MegEngine CUDA layout: refused (no ONNX equivalent)."),
    ("--enable-nchw44", (), "MegEngine ARM layout: refused (no ONNX equivalent)."),
    ("--enable-nchw44-dot", (), "MegEngine ARM dot-product layout: refused (no ONNX equivalent)."),
    ("--enable-nchw32", (), "MegEngine CUDA layout: refused (no ONNX equivalent)."),
    ("--enable-chwn4", (), "MegEngine CUDA layout: refused (no ONNX equivalent)."),
    ("--enable-fuse-conv-bias-with-z", (), "MegEngine CUDA fusion: refused (no ONNX equivalent)."),
]


def _optimize_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--optimize-for-inference and the --enable-* flags (DESIGN section 5)."""
    for flag, aliases, text in reversed(_ENABLE_FLAGS):
        dest = flag.removeprefix("--").replace("-", "_")
        f = click.option(flag, *aliases, dest, is_flag=True, help=text)(f)
    return click.option("--optimize-for-inference", is_flag=True,
                        help="Portable rewrites: constant folding, Identity/Dropout removal, BatchNorm and bias folded into Conv/Gemm.")(f)


def _common(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("-q", "--quiet", is_flag=True, help="Print no warnings.")(f)
    f = click.option("-v", "--verbose", count=True, help="More detail; tracebacks on errors.")(f)
    return click.version_option(__version__, prog_name="mgedump")(f)


def _setup(verbose: int, quiet: bool, prog: str) -> None:
    from .log import setup

    _state["verbose"] = verbose
    setup(-1 if quiet else verbose, prog=prog)


def _make_data_options(seed: int, repeat: int, resize_input: bool, input_transform: str | None):
    from .data import DataOptions

    return DataOptions(seed=seed, repeat=repeat, resize_input=resize_input, input_transform=input_transform)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model", metavar="MODEL")
@click.option("-o", "--output", required=True, metavar="OUT", help="The bundle to write (e.g. model.mgetest).")
@_data_options
@click.option("--maxerr", type=float, default=1e-4, show_default=True, help="AssertEqual threshold recorded in the bundle.")
@click.option("--no-assert", is_flag=True, help="Store no expected outputs: mgerun only runs and times.")
@click.option("--silent", is_flag=True, help="Record that mgerun prints failures only.")
@_optimize_options
@click.option("--discard-var-name", is_flag=True, help="Rename internal tensors and weights, drop node names and doc strings.")
@click.option("--output-strip-info", is_flag=True, help="Also write OUT.json (operators, dtypes) and onnxruntime's reduced-build config.")
@_common
def mgedump_command(model: str, output: str, specs: Sequence[str], seed: int, repeat: int, resize_input: bool,
                    input_transform: str | None, maxerr: float, no_assert: bool, silent: bool, optimize_for_inference: bool,
                    discard_var_name: bool, output_strip_info: bool, verbose: int, quiet: bool, **enable_flags: bool) -> int:
    """Pack MODEL (ONNX) with test cases from -d into one bundle OUT.

    \b
    Examples:
      mgedump model.onnx -d "#rand(0,255)" -o model.mgetest
      mgedump model.onnx -d cat.jpg -d dog.jpg --resize-input --input-transform "data/255" -o model.mgetest
      mgedump model.onnx -d "input:0:#rand(0,1);len:#const(7)" -o model.mgetest
      mgedump model.onnx -d @testcases.txt -o model.mgetest
    """
    _setup(verbose, quiet, "mgedump")
    from .pack import PackOptions, pack

    from .optimize import OptimizeOptions

    optimize = OptimizeOptions.from_flags(optimize_for_inference=optimize_for_inference, discard_var_name=discard_var_name,
                                          **enable_flags)
    options = PackOptions(specs=specs, data=_make_data_options(seed, repeat, resize_input, input_transform),
                          maxerr=maxerr, no_assert=no_assert, silent=silent, optimize=optimize,
                          strip_info=f"{output}.json" if output_strip_info else None)
    result = pack(model, output, options)
    manifest = result.manifest
    if not quiet:
        click.echo(
            f"mgedump: wrote {output}: {result.test_cases} test case(s), "
            f"{len(manifest['inputs'])} input(s), {len(manifest['outputs'])} output(s), "
            + (f"maxerr {manifest['assertion']['maxerr']:g}" if manifest["assertion"]["enabled"] else "no assertions"),
            err=True,
        )
        if manifest["optimizations"]:
            worst = max((c["err"] for c in result.self_check if c["err"] is not None), default=0.0)
            needs = f"; needs {', '.join(manifest['requirements'])}" if manifest["requirements"] else ""
            click.echo(f"mgedump: optimised ({', '.join(manifest['optimizations'])}); self-check worst err={worst:.3g}{needs}", err=True)
    return 0


def _print_case(case: Any, report: Any) -> None:
    """Print one test case: verbose prints every output, silent only failures."""
    lines = []
    for check in case.checks:
        if not check.passed:
            err = "n/a" if check.err is None else f"{check.err:g}"
            lines.append(f"AssertEqual: err={err} (name={check.name}) FAILED (maxerr={check.maxerr:g})"
                         + (f": {check.reason}" if check.reason else ""))
            if check.worst_index is not None:
                lines.append(f"  worst element at {list(check.worst_index)}: expect={check.expect_value!r}, get={check.got_value!r}")
            stats = check.stats
            if "abs_err_max" in stats:
                lines.append(
                    f"  {stats['dtype']}{stats['shape']}: abs err max={stats['abs_err_max']:g} mean={stats['abs_err_mean']:g}; "
                    f"expect min={stats['expect_min']:g} max={stats['expect_max']:g} mean={stats['expect_mean']:g}; "
                    f"get min={stats['get_min']:g} max={stats['get_max']:g} mean={stats['get_mean']:g}"
                )
        elif report.verbose:
            lines.append(f"AssertEqual: err={check.err:g} (name={check.name})")
    head = f"test case {case.index} ({case.origin}: {case.spec})"
    if case.error:
        lines.insert(0, f"{head}: FAILED: {case.error}")
    elif lines or report.verbose:
        lines.insert(0, head)
    if _state["verbose"] > 0 and case.timing.latencies_ms:
        lines.append("  iterations (ms): " + " ".join(f"{ms:.3f}" for ms in case.timing.latencies_ms))
    for line in lines:
        click.echo(line)


_STAT_COLUMNS = ("min", "median", "mean", "p90", "p99", "max", "stddev")


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.rjust(width) if i else cell.ljust(width) for i, (cell, width) in enumerate(zip(row, widths))).rstrip()
            for row in rows]


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _print_timing(report: Any) -> None:
    """The latency table (ms) of every test case, then the batch sweep if any."""
    rows = [["latency (ms)", "batch", "iters", *_STAT_COLUMNS, "inf/s", "samples/s"]]
    for case in report.cases:
        stats = case.timing.stats()
        if not stats.get("count"):
            continue
        rate = case.timing.throughput()
        rows.append([f"test case {case.index}", str(case.timing.batch), str(stats["count"]),
                     *(f"{stats[c]:.3f}" for c in _STAT_COLUMNS), _rate(rate["inferences_per_s"]), _rate(rate["samples_per_s"])])
    if len(rows) > 1:
        for line in _table(rows):
            click.echo(line)
    sweep = [["batch sweep (ms)", "batch", "median", "min", "p90", "ms/sample", "inf/s", "samples/s"]]
    for case in report.cases:
        for timing in case.sweep:
            stats, rate = timing.stats(), timing.throughput()
            sweep.append([f"test case {case.index}", str(timing.batch), f"{stats['median']:.3f}", f"{stats['min']:.3f}",
                          f"{stats['p90']:.3f}", f"{stats['median'] / timing.batch:.3f}",
                          _rate(rate["inferences_per_s"]), _rate(rate["inferences_per_s"] * timing.batch)])
    if len(sweep) > 1:
        for line in _table(sweep):
            click.echo(line)


class _ProgressBar:
    """A one-line progress bar on a terminal's stderr; nothing elsewhere (CI logs get the result lines)."""

    def __init__(self) -> None:
        self.active = False

    def __call__(self, label: str, done: int, total: int) -> None:
        width = 30
        filled = width * done // max(total, 1)
        sys.stderr.write(f"\r{label}: [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\r" + " " * (len(label) + width + 2 * len(str(total)) + 8) + "\r")
        sys.stderr.flush()


def _parse_sweep(value: str | None) -> tuple[int, ...]:
    if not value:
        return ()
    try:
        sizes = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of batch sizes, e.g. 1,2,4,8", param_hint="'--repeat-sweep'") from None
    if not sizes:
        raise click.BadParameter("give at least one batch size", param_hint="'--repeat-sweep'")
    return sizes


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("path", metavar="BUNDLE_OR_MODEL")
@_data_options
@click.option("--maxerr", type=float, default=None, help="Override the bundle's AssertEqual threshold.")
@click.option("--silent", is_flag=True, default=None, help="Print failures only.")
@click.option("--no-assert", is_flag=True, help="Run and time only; check nothing.")
@click.option("--iter", "iters", type=int, default=10, show_default=True, help="Timed runs per test case.")
@click.option("--warmup-iter", "warmup", type=int, default=1, show_default=True, help="Untimed runs before timing.")
@click.option("--thread", "threads", type=int, default=None, help="onnxruntime intra-op threads (default: onnxruntime's choice).")
@click.option("--provider", metavar="NAME", help="Execution provider, e.g. CPU or CUDAExecutionProvider (default CPU).")
@click.option("--graph-opt", type=click.Choice(["disable", "basic", "extended", "all"]), default=None,
              help="onnxruntime graph optimisation level (default all).")
@click.option("--profile", metavar="FILE", help="Write onnxruntime's profile (JSON) to FILE.")
@click.option("--bin-out-dump", metavar="DIR", help="Write every output as DIR/test_data_set_N/NAME.npy.")
@click.option("--repeat-sweep", metavar="N,N,...", help="Also time each test case with its inputs repeated N times along axis 0.")
@click.option("--report-json", metavar="FILE", help="Write a machine-readable report (schema in the README).")
@_common
def mgerun_command(path: str, specs: Sequence[str], seed: int, repeat: int, resize_input: bool, input_transform: str | None,
                   maxerr: float | None, silent: bool | None, no_assert: bool, iters: int, warmup: int,
                   threads: int | None, provider: str | None, graph_opt: str | None, profile: str | None,
                   bin_out_dump: str | None, repeat_sweep: str | None, report_json: str | None, verbose: int, quiet: bool) -> int:
    """Verify every test case of BUNDLE and time it; exit 1 on any mismatch.

    With -d, BUNDLE_OR_MODEL is a plain ONNX model: run and time it on that data.

    \b
    Examples:
      mgerun model.mgetest
      mgerun model.mgetest --iter 100 --warmup-iter 5 --report-json report.json
      mgerun model.onnx -d "#rand(0,255)" --thread 1
      mgerun --repeat-sweep 1,2,4,8 model.onnx -d cat.jpg
    """
    _setup(verbose, quiet, "mgerun")
    from .fileio import check_target, write_bytes_atomic
    from .verify import VerifyOptions, is_plain_model, verify

    options = VerifyOptions(maxerr=maxerr, silent=silent or None, no_assert=no_assert, iters=iters, warmup=warmup,
                            threads=threads, provider=provider, graph_opt=graph_opt, profile=profile,
                            bin_out_dump=bin_out_dump, repeat_sweep=_parse_sweep(repeat_sweep),
                            specs=specs, data=_make_data_options(seed, repeat, resize_input, input_transform))
    if not is_plain_model(path, options) and (seed != 0 or repeat != 1 or resize_input or input_transform):
        raise _usage("--seed, --repeat, --resize-input and --input-transform apply to a plain model with -d, not a bundle")
    if report_json:
        check_target(report_json)
    progress = _ProgressBar() if sys.stderr.isatty() and not quiet else None
    report = verify(path, options, on_case=_print_case, progress=progress)
    if report.verbose:
        _print_timing(report)
    if report_json:
        write_bytes_atomic(report_json, (json.dumps(report.to_json(), indent=1, sort_keys=True) + "\n").encode())
    failed = [case for case in report.cases if not case.passed]
    if failed:
        click.echo(f"FAILED: {len(failed)} of {len(report.cases)} test case(s) failed", err=False)
    elif report.verbose:
        what = "passed" if report.assertion else "ran (no assertions)"
        click.echo(f"all {len(report.cases)} test case(s) {what}")
    return report.exit_code


def _usage(message: str) -> MgeError:
    from .errors import SpecError

    return SpecError(message)


def _run(command: click.Command, prog: str, argv: Sequence[str] | None) -> int:
    _state["verbose"] = 0
    try:
        code = command.main(args=list(argv) if argv is not None else None, prog_name=prog, standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:
        message = " ".join(exc.format_message().split())
        click.echo(f"{prog}: error: {message} (see '{prog} --help')", err=True)
        return EXIT_USAGE
    except click.Abort:
        click.echo(f"{prog}: aborted", err=True)
        return 130
    except KeyboardInterrupt:
        click.echo(f"{prog}: interrupted", err=True)
        return 130
    except MgeError as exc:
        if _state["verbose"]:
            traceback.print_exc()
        click.echo(f"{prog}: error: {exc.one_line()}", err=True)
        return exc.exit_code
    return code if isinstance(code, int) else 0


def mgedump_main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``mgedump`` console script."""
    sys.exit(_run(mgedump_command, "mgedump", argv))


def mgerun_main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``mgerun`` console script."""
    sys.exit(_run(mgerun_command, "mgerun", argv))
