"""The registry of report formats: one entry each, which ``mgerun`` (its flags, its table of outputs, the reports
it writes) and ``mgerun --merge`` loop over.

A format is a :class:`ReportFormat`: the option that names its target (the library keyword; the command line
makes its flag of it, ``report_json`` is ``--report-json``), the help its flag shows, how it renders from the
report's records, and whether standard output (``-``) may take it. The built-in formats are the entries of
:data:`_BUILT_IN`, each rendered by its module (:mod:`.junit`, :mod:`.html`); :func:`register` adds one at run time
(a plugin, a test). Adding a format is its renderer module and one line here (docs/architecture.md).

This module imports no renderer: ``--help`` lists the formats without loading them (the HTML page draws its plots
with numpy).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..base.errors import UsageError

if TYPE_CHECKING:
    from ..options import VerifyOptions
    from .schema import RunReport

Render = Callable[["RunReport"], "str | bytes"]


@dataclass(frozen=True)
class ReportFormat:
    """One report format.

    Attributes:
        option: the option that names where it goes, by its keyword (``junit_xml``): a field of
            :class:`~mgedump.options.VerifyOptions` for the built-in formats, else a key of its ``reports``; the
            command line's flag is made of it (``--junit-xml``), and messages name it so.
        help: what its flag's ``--help`` line says.
        render: the report's records (:class:`~mgedump.report.schema.RunReport`) as the file's text (UTF-8) or bytes.
        stdout: standard output (``-``) may take it.
    """

    option: str
    help: str
    render: Render
    stdout: bool = True

    def bytes_of(self, report: RunReport) -> bytes:
        """The file this format writes for ``report``."""
        data = self.render(report)
        return data.encode() if isinstance(data, str) else data


def renderer(module: str, function: str) -> Render:
    """A render function imported when it first renders (``module`` relative to this package)."""

    def render(report: RunReport) -> str | bytes:
        found: Render = getattr(importlib.import_module(module, __package__), function)
        return found(report)

    return render


def _json(report: RunReport) -> bytes:
    from .schema import dumps

    return dumps(report.to_json()).encode()


_BUILT_IN = (
    ReportFormat("report_json", "Write a machine-readable report (docs/reports.md).", _json),
    ReportFormat("junit_xml", "Write a JUnit XML report (for CI test reporters).", renderer(".junit", "render_junit")),
    ReportFormat(
        "report_html",
        "Write a self-contained HTML report with plots (no network needed to view it).",
        renderer(".html", "render_html"),
    ),
)

_REGISTRY: dict[str, ReportFormat] = {f.option: f for f in _BUILT_IN}


def formats() -> list[ReportFormat]:
    """Every report format, the built-in ones first, in the order they were registered."""
    return list(_REGISTRY.values())


def register(entry: ReportFormat) -> None:
    """Add a report format.

    Raises:
        ValueError: a format of that option is registered already.
    """
    if entry.option in _REGISTRY:
        raise ValueError(f"report format {entry.option!r} is registered already")
    _REGISTRY[entry.option] = entry


def unregister(option: str) -> None:
    """Remove a report format :func:`register` added."""
    if any(entry.option == option for entry in _BUILT_IN):
        raise ValueError(f"report format {option!r} is built in")
    _REGISTRY.pop(option, None)


def check_known(options: VerifyOptions) -> None:
    """Refuse a target in ``options.reports`` for a format nobody registered.

    Raises:
        UsageError: naming the first such format, and the registered ones.
    """
    unknown = [name for name in options.reports if name not in _REGISTRY]
    if unknown:
        raise UsageError(
            f"no report format {unknown[0]!r} (the formats: {', '.join(_REGISTRY)})",
            hint="register it first (mgedump.report.formats.register)",
        )


def asked(options: VerifyOptions) -> list[tuple[ReportFormat, str]]:
    """The registered formats the options ask for, each with its target, in the registry's order."""
    found = [(entry, options.report_target(entry.option)) for entry in _REGISTRY.values()]
    return [(entry, target) for entry, target in found if target]
