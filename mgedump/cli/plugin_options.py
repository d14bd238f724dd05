"""The pytest plugin's options (:mod:`mgedump.pytest_plugin`), spelled here with every other flag of the package.

Most are an ``mgerun`` flag in a pytest session (:func:`as_mgerun`: ``--mgetest-thread`` is ``mgerun --thread``);
the rest are the plugin's own. Plain data: this module imports neither click nor pytest, so a pytest session that
does not use the plugin loads little of the package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..options import GRAPH_OPT_LEVELS

PREFIX = "--mgetest"


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


PLUGIN_OPTIONS = (
    own("", action="append", default=[], metavar="PATH", help="Check the bundles at PATH."),
    own("collect", action="store_true", help="Also check the *.mgetest bundles under the paths collected."),
    as_mgerun("--maxerr", action="append", default=[], metavar="[OUTPUT:]X"),
    as_mgerun("--provider", metavar="NAME"),
    as_mgerun("--thread", type=int, metavar="N"),
    as_mgerun("--graph-opt", choices=GRAPH_OPT_LEVELS),
    as_mgerun("--variant", metavar="NAME"),
    as_mgerun("--iter", type=int, default=1, metavar="N", help="Timed runs per test case (1)."),
    as_mgerun("--warmup-iter", type=int, default=0, metavar="N", help="Untimed runs first (0)."),
    own("in-process", action="store_true", help="Run the bundles in pytest's process, not in a worker."),
)
