"""What the commands share: ``-v``, ``-q`` and ``--version``, and turning outcomes into exit codes.

Each command's options are declared by the groups of :mod:`.flags`; while a command runs, the library's
messages name options by their flags (:mod:`.flags.spelling`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import click

from .. import __version__
from ..base.errors import EXIT_INTERRUPTED, EXIT_USAGE, MgeError, Terminated
from ..base.log import printable
from ..base.naming import spoken_as
from ..base.streams import guard
from .flags.spelling import speller

CONTEXT = {"help_option_names": ["-h", "--help"]}
_state = {"verbose": 0}


def versions(prog: str) -> str:
    """``mgerun 0.1.0 (onnxruntime 1.x, onnx 1.y, numpy 2.z)``: the command and what it runs with, read from the
    installed distributions' metadata (nothing is imported)."""
    from importlib import metadata

    found = []
    for dist in ("onnxruntime", "onnx", "numpy"):
        names = ("onnxruntime", "onnxruntime-gpu") if dist == "onnxruntime" else (dist,)
        version = "not installed"
        for name in names:
            try:
                version = metadata.version(name)
                break
            except metadata.PackageNotFoundError:
                continue
        found.append(f"{dist} {version}")
    return f"{prog} {__version__} ({', '.join(found)})"


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(versions(ctx.info_name or "mgedump"))
    ctx.exit()


def common_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``-q``, ``-v`` and ``--version``."""
    f = click.option("-q", "--quiet", is_flag=True, default=None, help="Print no warnings.")(f)
    f = click.option("-v", "--verbose", count=True, help="More detail; tracebacks on errors.")(f)
    return click.option(
        "--version",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_print_version,
        help="Show the version, and the onnxruntime, onnx and numpy it runs with, and exit.",
    )(f)


def setup(verbose: int, quiet: bool | None, prog: str) -> None:
    """Route the library's logger to stderr at the level the user asked for."""
    from ..base.log import setup as setup_log

    _state["verbose"] = verbose
    setup_log(-1 if quiet else verbose, prog=prog)


@contextlib.contextmanager
def _terminate_as_exception() -> Iterator[None]:
    """While a command runs, SIGTERM and SIGHUP (its terminal or session gone) raise
    :class:`~mgedump.base.errors.Terminated` (so temporary files are removed and worker processes stopped on the way
    out) instead of ending the process where it stands, which would leave its workers behind."""

    def handler(signum: int, frame: object) -> None:
        raise Terminated(signum)

    try:
        previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGTERM, signal.SIGHUP)}
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)


# what click's completion reads from the environment, by shell: COMP_WORDS, and COMP_CWORD (a word number for bash
# and zsh, the word being typed for fish). The shells' completion scripts set them; anything else may not.
_COMPLETION_NEEDS = {"bash": ("COMP_WORDS", "COMP_CWORD"), "zsh": ("COMP_WORDS", "COMP_CWORD"), "fish": ("COMP_WORDS",)}


def completion_problem(prog: str) -> str | None:
    """Why shell completion, asked for through ``_PROG_COMPLETE``, cannot run here (None: it can, or was not asked
    for): click would stop on a missing ``COMP_CWORD`` or one that is not a number with a traceback."""
    instruction = os.environ.get(f"_{prog}_COMPLETE".replace("-", "_").upper(), "")
    shell, _, action = instruction.partition("_")
    if action != "complete" or shell not in _COMPLETION_NEEDS:
        return None  # not completing (a script asked for with *_source, or nothing: click says for an unknown shell)
    for name in _COMPLETION_NEEDS[shell]:
        if name not in os.environ:
            return f"{name} is not set"
    if shell != "fish":
        cword = os.environ["COMP_CWORD"]
        try:
            int(cword)
        except ValueError:
            shown = cword if len(cword) <= 20 else cword[:17] + "..."
            return f"COMP_CWORD is {shown!r}, not the number of the word being completed"
    return None


def invoke(command: click.Command, prog: str, argv: Sequence[str] | None) -> int:
    """Run a command and turn its outcome into an exit code (docs/exit-codes.md).

    A user error (:class:`~mgedump.base.errors.MgeError`) prints one line on stderr,
    with the traceback only under ``-v``. Any other exception is a bug and
    propagates with its traceback.
    """
    _state["verbose"] = 0
    guard()  # a standard stream closed at start (2>&-) gets the null device: no file the command opens takes its place
    problem = completion_problem(prog)
    if problem is not None:
        hint = f'eval "$(_{prog.upper()}_COMPLETE=bash_source {prog})" installs it (README)'
        click.echo(
            f"{prog}: error: shell completion: {printable(problem)} (hint: the shell's completion script sets it; {hint})",
            err=True,
        )
        return EXIT_USAGE
    try:
        with _terminate_as_exception(), spoken_as(speller(command)):
            code = command.main(args=list(argv) if argv is not None else None, prog_name=prog, standalone_mode=False)
    except Terminated as exc:
        click.echo(f"{prog}: terminated", err=True)
        return 128 + exc.signum  # as shells report a process a signal ended: 143 for SIGTERM, 129 for SIGHUP
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
        with contextlib.suppress(OSError, ValueError):  # a stderr that cannot be written keeps the exit code
            if _state["verbose"]:
                traceback.print_exc()
            click.echo(f"{prog}: error: {printable(exc.one_line())}", err=True)
        return exc.exit_code
    return code if isinstance(code, int) else 0
