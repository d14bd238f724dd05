"""The pytest plugin's options (:mod:`mgedump.pytest_plugin`) and the session settings' flags, spelled here with
every other flag of the package.

Most of the plugin's options are an ``mgerun`` flag in a pytest session (:func:`as_mgerun`: ``--mgetest-thread``
is ``mgerun --thread``), one for each session setting among them (:mod:`mgedump.model.session`); the rest are the
plugin's own. This module imports neither click nor pytest, so a pytest session that does not use the plugin loads
little of the package.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..base.errors import UsageError
from ..base.naming import NO_VALUE
from ..base.numbers import parse_int
from ..model.session import Setting, settings

PREFIX = "--mgetest"
# pytest's own options that write a file, by the name pytest keeps them under: never a bundle being checked
PYTEST_REPORTS = {"xmlpath": "--junitxml", "report_log": "--report-log"}
RENAMED = {"threads": "--thread"}  # the session settings whose flag is not named after them


@dataclass(frozen=True)
class PluginOption:
    """One option of the pytest plugin.

    Attributes:
        flag: as pytest takes it (``--mgetest-thread``).
        dest: the name the plugin reads it by (``config.getoption("mgetest_thread")``).
        settings: what argparse takes besides: ``action``, ``type``, ``default``, ``metavar``, ``choices``, ``help``.
    """

    flag: str
    dest: str
    settings: Mapping[str, Any] = field(default_factory=dict)


def own(name: str, **settings: Any) -> PluginOption:
    """An option of the plugin's own: ``--mgetest`` (``name`` empty) or ``--mgetest-NAME``."""
    flag = f"{PREFIX}-{name}" if name else PREFIX
    return PluginOption(flag, flag.removeprefix("--").replace("-", "_"), settings)


def as_mgerun(flag: str, **settings: Any) -> PluginOption:
    """``mgerun``'s ``flag`` in a pytest session: ``--mgetest-`` and the flag's name, saying so in its help unless
    ``settings`` says more."""
    return own(flag.removeprefix("--"), **{"help": f"As mgerun {flag}.", **settings})


def setting_flag(entry: Setting) -> str:
    """``mgerun``'s flag for a session setting: the one it names (a plugin's setting may), else its keyword's
    (``--graph-opt`` for ``graph_opt``) unless :data:`RENAMED` says otherwise."""
    return entry.flag or RENAMED.get(entry.name) or "--" + entry.name.replace("_", "-")


def _integer(flag: str) -> Callable[[str], int]:
    """An option's whole number, read as every number the package reads (ASCII digits, bounded: ``base/numbers.py``);
    a bad one is pytest's usage error naming the option."""

    def read(text: str) -> int:
        try:
            return parse_int(text, flag)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(exc.message) from None

    return read


def _as_setting(entry: Setting) -> PluginOption:
    """A session setting's option: read by its keyword (``mgetest_threads``)."""
    flag = f"{PREFIX}-{setting_flag(entry).removeprefix('--')}"
    kind: dict[str, Any] = (
        {"choices": entry.choices} if entry.choices else {"type": _integer(flag) if entry.kind is int else entry.kind}
    )
    if not entry.choices:
        kind["metavar"] = entry.metavar or ("N" if entry.kind is int else "VALUE")
    option = as_mgerun(setting_flag(entry), **kind)
    return PluginOption(option.flag, f"mgetest_{entry.name}", option.settings)


def plugin_options() -> list[PluginOption]:
    """The plugin's options, in the order ``pytest --help`` lists them; the session settings as registered now."""
    return [
        own("", action="append", default=[], metavar="PATH", help="Check the bundles at PATH."),
        own("collect", action="store_true", help="Also check the *.mgetest bundles under the paths collected."),
        as_mgerun("--maxerr", action="append", default=[], metavar="[OUTPUT:]X"),
        *(_as_setting(entry) for entry in settings()),
        as_mgerun("--variant", metavar="NAME"),
        as_mgerun(
            "--iter", type=_integer(f"{PREFIX}-iter"), default=1, metavar="N", help="Timed runs per test case (1)."
        ),
        as_mgerun(
            "--warmup-iter",
            type=_integer(f"{PREFIX}-warmup-iter"),
            default=0,
            metavar="N",
            help="Untimed runs first (0).",
        ),
        own("in-process", action="store_true", help="Run the bundles in pytest's process, not in a worker."),
    ]


# the options of mgerun's that the plugin has, by library keyword (VerifyOptions' and the session's fields)
_OWN_KEYWORDS = {"maxerr": "--maxerr", "variant": "--variant", "iters": "--iter",
                 "warmup": "--warmup-iter"}  # fmt: skip


def plugin_speller(name: str, value: Any = NO_VALUE) -> str:
    """How a message names an option in a pytest session: the plugin's option (``threads`` is
    ``--mgetest-thread``), the keyword for one the plugin does not have."""
    flags = {**_OWN_KEYWORDS, **{entry.name: setting_flag(entry) for entry in settings()}}
    flag = flags.get(name)
    text = f"{PREFIX}-{flag.removeprefix('--')}" if flag else name
    return text if value is NO_VALUE else f"{text} {value}"
