"""What the commands share: common options, the options given, and turning outcomes into exit codes.

Every click option defaults to ``None`` ("not given"); :func:`given` collects
the options the user gave, and the library's options dataclasses
(:mod:`mgedump.options`) supply every default. ``--help`` shows those defaults
by reading the dataclasses, which import nothing heavy.
"""

from __future__ import annotations

import contextlib
import signal
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import MISSING, fields
from typing import Any

import click

from .. import __version__
from ..errors import EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_USAGE, MgeError, Terminated
from ..log import printable
from ..options import DataOptions

CONTEXT = {"help_option_names": ["-h", "--help"]}
_state = {"verbose": 0}


def default_of(options: type, name: str) -> Any:
    """The default of one field of an options dataclass."""
    for f in fields(options):
        if f.name == name:
            if f.default is not MISSING:
                return f.default
            if f.default_factory is not MISSING:
                return f.default_factory()
    raise KeyError(name)


def with_default(text: str, options: type, name: str) -> str:
    """Help text ending in ``[default: X]``, X read from the options dataclass."""
    return f"{text}  [default: {default_of(options, name)}]"


def given(ctx: click.Context, values: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """The options among ``names`` that the user gave on the command line (not left to their default)."""
    return {
        name: values[name]
        for name in names
        if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)
    }


DATA_FIELDS = ("seed", "repeat", "resize_input", "input_transform", "input_shapes")


def data_options_from(ctx: click.Context, values: dict[str, Any]) -> DataOptions:
    """The data options the user gave (``--input-shape`` parsed)."""
    from ..options import parse_input_shape

    chosen = given(ctx, values, DATA_FIELDS)
    if "input_shapes" in chosen:
        chosen["input_shapes"] = tuple(parse_input_shape(text) for text in chosen["input_shapes"])
    return DataOptions(**chosen)


def data_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options that make test data from ``-d`` specs (both commands)."""
    options = [
        click.option(
            "-d",
            "--data",
            "specs",
            multiple=True,
            metavar="SPEC",
            help="Test case: '#rand(MIN,MAX[,dims][,...])', '#randn(MEAN,STD)', '#const(V)', an image, "
            ".npy, .npz or .pb file, 'NAME:SOURCE;NAME:SOURCE', or @LIST (one test case per line). Repeatable.",
        ),
        click.option(
            "--seed", type=int, default=None, help=with_default("Seed of the random generators.", DataOptions, "seed")
        ),
        click.option(
            "--repeat",
            type=int,
            default=None,
            help=with_default("Repeat file data N times along axis 0 (batch).", DataOptions, "repeat"),
        ),
        click.option("--resize-input", is_flag=True, default=None, help="Resize images to the model's H and W."),
        click.option(
            "--input-transform",
            metavar="EXPR",
            default=None,
            help="Python expression of 'data' and 'np' applied to file data, e.g. 'data/255'.",
        ),
        click.option(
            "--input-shape",
            "input_shapes",
            multiple=True,
            default=None,
            metavar="NAME:d0,d1,...",
            help="Fix an input's shape for every source (symbolic dims); the name may be left out for a one-input "
            "model. Repeatable.",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def common_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``-q``, ``-v`` and ``--version``."""
    f = click.option("-q", "--quiet", is_flag=True, default=None, help="Print no warnings.")(f)
    f = click.option("-v", "--verbose", count=True, help="More detail; tracebacks on errors.")(f)
    return click.version_option(__version__, prog_name="mgedump")(f)


def setup(verbose: int, quiet: bool | None, prog: str) -> None:
    """Route the library's logger to stderr at the level the user asked for."""
    from ..log import setup as setup_log

    _state["verbose"] = verbose
    setup_log(-1 if quiet else verbose, prog=prog)


def verbosity() -> int:
    """How many ``-v`` the running command was given."""
    return _state["verbose"]


@contextlib.contextmanager
def _terminate_as_exception() -> Iterator[None]:
    """While a command runs, SIGTERM raises :class:`~mgedump.errors.Terminated` (so temporary files are removed on
    the way out) instead of ending the process where it stands."""

    def handler(signum: int, frame: object) -> None:
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(command: click.Command, prog: str, argv: Sequence[str] | None) -> int:
    """Run a command and turn its outcome into an exit code (DESIGN section 8).

    A user error (:class:`~mgedump.errors.MgeError`) prints one line on stderr,
    with the traceback only under ``-v``. Any other exception is a bug and
    propagates with its traceback.
    """
    _state["verbose"] = 0
    try:
        with _terminate_as_exception():
            code = command.main(args=list(argv) if argv is not None else None, prog_name=prog, standalone_mode=False)
    except Terminated:
        click.echo(f"{prog}: terminated", err=True)
        return EXIT_TERMINATED
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:
        message = " ".join(exc.format_message().split())
        click.echo(f"{prog}: error: {printable(message)} (see '{prog} --help')", err=True)
        return EXIT_USAGE
    except click.Abort as exc:
        # click turns KeyboardInterrupt and EOFError into Abort; only the first is the user stopping us
        if exc.__context__ is not None and not isinstance(exc.__context__, KeyboardInterrupt):
            raise exc.__context__ from None
        click.echo(f"{prog}: interrupted", err=True)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        click.echo(f"{prog}: interrupted", err=True)
        return EXIT_INTERRUPTED
    except MgeError as exc:
        if _state["verbose"]:
            traceback.print_exc()
        click.echo(f"{prog}: error: {printable(exc.one_line())}", err=True)
        return exc.exit_code
    return code if isinstance(code, int) else 0
