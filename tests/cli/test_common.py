"""What the commands share: defaults shown by --help come from the options dataclasses, and outcomes map to exit codes."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import fields

import click
import click.testing
import pytest

from mgedump.base.bounds import Bounds
from mgedump.base.errors import EXIT_INTERRUPTED, EXIT_USAGE, MgeError
from mgedump.cli import mgediff_command, mgedump_command, mgerun_command
from mgedump.cli.common import invoke
from mgedump.cli.flags import default as default_of
from mgedump.cli.flags.optimize import REFUSED
from mgedump.options import (
    DataOptions,
    DiffOptions,
    GateOptions,
    PackOptions,
    SelectOptions,
    SpreadOptions,
    VerifyOptions,
)

# (command, option as written, options dataclass, field): every option whose default --help states
HELP_DEFAULTS = [
    (mgedump_command, "--seed", DataOptions, "seed"),
    (mgedump_command, "--repeat", DataOptions, "repeat"),
    (mgedump_command, "--maxerr", Bounds, "maxerr"),  # the bound of an output none is given for
    (mgerun_command, "--seed", DataOptions, "seed"),
    (mgerun_command, "--repeat", DataOptions, "repeat"),
    (mgerun_command, "--iter", VerifyOptions, "iters"),
    (mgerun_command, "--warmup-iter", VerifyOptions, "warmup"),
    (mgerun_command, "--io-dump-budget", VerifyOptions, "io_dump_budget_mb"),
    (mgerun_command, "--concurrency", VerifyOptions, "concurrency"),
    (mgerun_command, "--fitting-budget", VerifyOptions, "fitting_budget_s"),
    (mgediff_command, "--seed", DataOptions, "seed"),
    (mgediff_command, "--repeat", DataOptions, "repeat"),
    (mgediff_command, "--io-dump-budget", DiffOptions, "io_dump_budget_mb"),
]
COMMANDS = [
    (mgedump_command, PackOptions),
    (mgerun_command, (VerifyOptions, SpreadOptions, GateOptions, SelectOptions)),
    (mgediff_command, DiffOptions),
]
# the options every command has that are about the command itself, not the library's options (--merge: mgerun's
# other job, merging reports; --no-ci-output: what mgerun tells a CI engine beside the reports)
COMMAND_ONLY = {"--output", "--verbose", "--quiet", "--version", "--help", "--merge", "--no-ci-output"}


def _params(command: click.Command) -> list[click.Parameter]:
    """A command's parameters as it runs (mgerun's report flags are the registry's then)."""
    return command.get_params(click.Context(command, **command.context_settings))


def _help(command: click.Command, prog: str) -> str:
    result = click.testing.CliRunner().invoke(command, ["--help"], prog_name=prog, terminal_width=400)
    assert result.exit_code == 0, result.output
    return result.output


def _help_defaults(command: click.Command, prog: str) -> dict[str, str]:
    """Option -> the default its --help line states."""
    found = {}
    for line in _help(command, prog).splitlines():
        option = re.match(r"\s+(?:-\w, )?(--[\w-]+)", line)
        default = re.search(r"\[default: ([^\]]+)\]", line)
        if option and default:
            found[option.group(1)] = default.group(1)
    return found


@pytest.mark.parametrize(
    "command, prog", [(mgedump_command, "mgedump"), (mgerun_command, "mgerun"), (mgediff_command, "mgediff")]
)
def test_help_states_the_dataclass_defaults(command, prog):
    stated = _help_defaults(command, prog)
    expected = {
        option: str(getattr(Bounds().default, name) if cls is Bounds else default_of(cls, name))
        for cmd, option, cls, name in HELP_DEFAULTS
        if cmd is command
    }
    assert stated == expected


@pytest.mark.parametrize("command", [mgedump_command, mgerun_command, mgediff_command])
def test_click_options_default_to_not_given(command):
    """No click option carries a default of its own: the dataclasses hold every default."""
    for param in _params(command):
        if isinstance(param, click.Option) and not param.required and param.name not in ("verbose", "version"):
            if "--help" in param.opts:
                continue
            assert param.default is None or (param.multiple and param.default == ()), param.name


# fields the command line sets from flags named otherwise: the precision mode (MegEngine's --enable-* flags and
# --quantize), the bounds (--maxerr and --error-stat, [OUTPUT:]X each: one Bounds)
# fields set from code only, on purpose without a flag: trace.dump packs expected NaN/inf with a warning, the CLI refuses
# a session's provider options and configuration entries: set from code, or by the flags of settings registered as
# one (mgedump/model/session.py; tests/model/test_session.py registers two)
LIBRARY_ONLY = {"nonfinite_ok", "provider_options", "session_config", "test_cases"}  # test_cases: --rerun-failed's
COMPUTED = {
    "precision": ("enable_io16xc32", "enable_ioc16", "quantize", "quantize_mode"),
    "bounds": ("maxerr", "error_stat"),
    "maxfail": ("maxfail", "exitfirst"),  # -x is --maxfail 1
    "reports": ("report_json", "junit_xml", "report_html"),  # the report flags: a format with no field goes there
}
REFUSED_PARAMS = {refused.name for refused in REFUSED}


def _leaf_fields(cls: type | tuple[type, ...]) -> set[str]:
    """Every field of an options dataclass (or of several), the fields of its nested options included."""
    if isinstance(cls, tuple):
        return set().union(*(_leaf_fields(one) for one in cls))
    names = set()
    for f in fields(cls):
        nested = f.default_factory if callable(f.default_factory) else None  # type: ignore[misc]
        if nested is not None and dataclasses.is_dataclass(nested) and nested is not Bounds:  # options, not values
            names |= _leaf_fields(nested)
        else:
            names.add(f.name)
    return names


def _unset_fields(command: click.Command, options: type | tuple[type, ...]) -> set[str]:
    """The fields of ``options`` that no parameter of ``command`` sets (by its name, or as COMPUTED says)."""
    params = {param.name for param in _params(command) if isinstance(param, click.Option)}
    unset = {name for name in _leaf_fields(options) if name not in params and not set(COMPUTED.get(name, ())) & params}
    return unset - LIBRARY_ONLY


@pytest.mark.parametrize("command, options", COMMANDS)
def test_every_field_has_one_flag_and_every_flag_one_field(command, options):
    """Each click parameter is named after the library field it sets: every field of the command's options has
    its flag, and every flag sets a field (besides -o, -v, -q, --version, --help, the precision flags and
    MegEngine's refused ones)."""
    assert _unset_fields(command, options) == set()
    fields_ = _leaf_fields(options)
    extra = {
        param.name
        for param in _params(command)
        if isinstance(param, click.Option)
        and not any(o in COMMAND_ONLY for o in param.opts)
        and param.name not in fields_
        and param.name not in REFUSED_PARAMS
        and not any(param.name in sources for sources in COMPUTED.values())
    }
    assert extra == set()
    flags = [name for param in _params(command) if isinstance(param, click.Option) for name in param.opts]
    assert len(flags) == len(set(flags)), "a flag is declared twice"


def test_a_field_without_a_flag_fails_the_declaration_check():
    """The check above can fail: a dataclass with a field that no flag sets is caught."""

    @dataclasses.dataclass(frozen=True)
    class Broken(VerifyOptions):
        hidden: int = 3

    assert _unset_fields(mgerun_command, Broken) == {"hidden"}


def test_help_defaults_follow_the_dataclass(monkeypatch):
    """Change a dataclass default and --help follows: the number is written in one place."""
    field = next(f for f in fields(VerifyOptions) if f.name == "iters")  # noqa: F811
    monkeypatch.setattr(field, "default", 77)
    assert default_of(VerifyOptions, "iters") == 77


def _command(raises: BaseException) -> click.Command:
    @click.command()
    def command() -> None:
        raise raises

    return command


def test_user_error_is_one_line_and_its_exit_code(capsys):
    assert invoke(_command(MgeError("bad thing", hint="do this")), "prog", []) == EXIT_USAGE
    assert capsys.readouterr().err == "prog: error: bad thing (hint: do this)\n"


def test_interrupt_is_exit_130(capsys):
    assert invoke(_command(KeyboardInterrupt()), "prog", []) == EXIT_INTERRUPTED == 130
    assert capsys.readouterr().err.strip() == "prog: interrupted"  # click starts a new line first


def test_a_bug_is_not_reported_as_an_interrupt():
    """click turns EOFError into Abort; an EOFError from the library is a bug and must surface as itself."""
    with pytest.raises(EOFError):
        invoke(_command(EOFError("short read")), "prog", [])


def test_a_bug_keeps_its_traceback():
    with pytest.raises(ZeroDivisionError):
        invoke(_command(ZeroDivisionError()), "prog", [])
