"""How a model's session runs: :class:`SessionSettings`, the one value every command, fitting, diagnosis, the
pytest plugin and the reports carry, and the registry of the settings it is made of.

A setting is one entry of the registry (:class:`Setting`): its name (the keyword the library takes, and what the
command line's flag is named after), what it is, how a flag's text is read, and where it goes:

- ``"field"``: a field of :class:`SessionSettings` (the execution provider, intra-op threads, the graph
  optimisation level, the execution mode), applied by :meth:`SessionSettings.session_options`;
- ``"provider"``: an option of the execution provider (onnxruntime's ``provider_options``: CUDA's ``device_id``,
  TensorRT's ``trt_engine_cache_path``), kept in :attr:`SessionSettings.provider_options`;
- ``"config"``: an entry of onnxruntime's session configuration (``add_session_config_entry``:
  ``session.intra_op.allow_spinning``), kept in :attr:`SessionSettings.session_config`.

A setting of the last two kinds is one :func:`register` call: ``mgerun``'s flags, the pytest plugin's options, the
runner and the reports take it from the registry (docs/architecture.md, "Adding a session setting or a runner").

This module imports nothing heavy: the options (:mod:`mgedump.options`) hold a :class:`SessionSettings`, and the
command line reads the registry to print ``--help``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from ..base.deps import require
from ..base.errors import UsageError
from ..base.naming import option_name

GRAPH_OPT_LEVELS = ("disable", "basic", "extended", "all")
EXECUTION_MODES = ("sequential", "parallel")  # onnxruntime's execution of the graph's independent branches
MAX_THREADS = max(64, 4 * (os.cpu_count() or 1))  # intra-op threads beyond the cores only wait; beyond this, refused
CPU = "CPUExecutionProvider"
_SILENT = 4  # onnxruntime's severity levels: 0 verbose .. 3 error, 4 fatal


def check_threads(value: int | None, name: str) -> None:
    """A count of threads: at least 1, at most :data:`MAX_THREADS` (none: the runtime's choice)."""
    if value is None:
        return
    if value < 1:
        raise UsageError(f"{option_name(name)} must be >= 1, got {value}")
    if value > MAX_THREADS:
        raise UsageError(f"{option_name(name)} must be at most {MAX_THREADS} (four per core, 64 at least), got {value}")


@dataclass(frozen=True)
class Setting:
    """One session setting.

    Attributes:
        name: the keyword (``SessionSettings.given(threads=2)``); the command line's flag is named after it
            (``--device-id`` for ``device_id``) unless ``flag`` says otherwise.
        about: what it is, one sentence (``--help`` shows it).
        kind: how a flag's text is read: ``int``, ``float`` or ``str``.
        choices: the values it may take (none: any of its kind).
        metavar: what ``--help`` calls its value (none: click's name of the kind).
        where: ``"field"``, ``"provider"`` or ``"config"`` (the module's docstring).
        key: onnxruntime's name of a provider option or a config entry (none: ``name``).
        check: refuses a bad value with a :class:`~mgedump.base.errors.UsageError` (called with the value and the
            name); ``choices`` are checked without it.
        flag: ``mgerun``'s flag when it is not named after the setting (a plugin's setting may say; the built-in
            ones are spelled in the command line, :func:`mgedump.cli.plugin_options.setting_flag`); the pytest
            plugin's option is ``--mgetest-`` and the flag's words.
    """

    name: str
    about: str
    kind: type[int] | type[float] | type[str] = str
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    where: Literal["field", "provider", "config"] = "field"
    key: str | None = None
    check: Callable[[Any, str], None] | None = None
    flag: str | None = None

    @property
    def onnxruntime_key(self) -> str:
        return self.key or self.name

    def checked(self, value: Any) -> Any:
        """The value, checked (none passes: not given)."""
        if value is None:
            return None
        if self.choices and value not in self.choices:
            raise UsageError(f"{option_name(self.name)} must be one of {', '.join(self.choices)}, got {value!r}")
        if self.check is not None:
            self.check(value, self.name)
        return value


_SETTINGS: dict[str, Setting] = {}


def register(setting: Setting) -> Setting:
    """Add a setting (a plugin, a test); its name must be new and a field only if :class:`SessionSettings` has it.

    Raises:
        ValueError: the name is taken, or a ``"field"`` that is not a field of :class:`SessionSettings`.
    """
    if setting.name in _SETTINGS:
        raise ValueError(f"session setting {setting.name!r} is registered already")
    if setting.where == "field" and setting.name not in {f.name for f in fields(SessionSettings)}:
        raise ValueError(f"session setting {setting.name!r}: SessionSettings has no such field")
    _SETTINGS[setting.name] = setting
    return setting


def unregister(name: str) -> None:
    """Remove a setting :func:`register` added."""
    _SETTINGS.pop(name, None)


def settings() -> list[Setting]:
    """Every session setting, built-in ones first, in the order ``--help`` lists them."""
    return list(_SETTINGS.values())


def setting(name: str) -> Setting:
    """The setting of that name.

    Raises:
        UsageError: no such setting.
    """
    if name not in _SETTINGS:
        raise UsageError(f"no session setting {name!r}: the settings are {', '.join(_SETTINGS)}")
    return _SETTINGS[name]


Pairs = tuple[tuple[str, str], ...]


def _pairs(value: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> Pairs:
    """Keys and values as sorted (str, str) pairs: onnxruntime's options are text."""
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(k), str(v)) for k, v in items))


@dataclass(frozen=True)
class SessionSettings:
    """How a session runs a model: what ``mgerun`` takes from its flags, fitting searches over, ``--config``
    reproduces and the reports record.

    Attributes:
        provider: the execution provider, ``CPU`` or ``CUDAExecutionProvider``, ... (none: the CPU provider).
        provider_options: options of that provider, as onnxruntime takes them (text keys and values).
        threads: intra-op threads (none: the runtime's choice).
        graph_opt: the graph optimisation level, one of :data:`GRAPH_OPT_LEVELS` (none: onnxruntime's, ``all``).
        execution_mode: ``sequential`` or ``parallel`` execution of the graph (none: sequential).
        session_config: onnxruntime's session configuration entries (text keys and values).

    Made as it is given; :meth:`check` (which :class:`~mgedump.options.VerifyOptions` calls) refuses bad values, so
    that a report written on another machine reads back whatever it says.
    """

    provider: str | None = None
    provider_options: Pairs = ()
    threads: int | None = None
    graph_opt: str | None = None
    execution_mode: str | None = None
    session_config: Pairs = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "provider_options", _pairs(self.provider_options))
        object.__setattr__(self, "session_config", _pairs(self.session_config))

    @classmethod
    def given(cls, values: Mapping[str, Any] | None = None, /, **more: Any) -> SessionSettings:
        """The settings from registered settings' values by name (a value of None: not given), each checked.

        Raises:
            UsageError: a name no setting has, or a bad value.
        """
        return cls().with_values({**(values or {}), **more})

    def with_values(self, values: Mapping[str, Any]) -> SessionSettings:
        """These settings with registered settings' values replaced (None: left as they are), each checked."""
        changes: dict[str, Any] = {}
        provider_options, session_config = dict(self.provider_options), dict(self.session_config)
        for name, value in values.items():
            entry = setting(name)
            if entry.checked(value) is None:
                continue
            if entry.where == "field":
                changes[name] = value
            else:
                (provider_options if entry.where == "provider" else session_config)[entry.onnxruntime_key] = value
        return replace(
            self, provider_options=_pairs(provider_options), session_config=_pairs(session_config), **changes
        )

    def value(self, name: str) -> Any:
        """A registered setting's value (None: not given)."""
        entry = setting(name)
        if entry.where == "field":
            return getattr(self, name)
        given = dict(self.provider_options if entry.where == "provider" else self.session_config)
        return given.get(entry.onnxruntime_key)

    def check(self) -> SessionSettings:
        """Refuse a bad value (every field a setting is registered for); returns the settings.

        Raises:
            UsageError: naming the option as the surface in use does.
        """
        for entry in settings():
            if entry.where == "field":
                entry.checked(getattr(self, entry.name))
        return self

    # -- onnxruntime's (imported only when a session is made: :func:`mgedump.model.runtime.open_runner`)

    def providers(self) -> list[str]:
        """The execution providers, in onnxruntime's names: the one asked for (``CUDA`` or
        ``CUDAExecutionProvider``), then the CPU provider.

        Raises:
            UsageError: onnxruntime here has no such provider; the message lists those it has.
        """
        if self.provider is None:
            return [CPU]
        ort = require("onnxruntime", purpose="running a model")

        available = ort.get_available_providers()
        wanted = self.provider.strip().lower()
        for provider in available:
            if wanted in (provider.lower(), provider.lower().removesuffix("executionprovider")):
                return [provider] if provider == CPU else [provider, CPU]
        raise UsageError(
            f"unknown execution provider {self.provider!r}; this onnxruntime offers: {', '.join(available)}"
        )

    def provider_list(self) -> list[str | tuple[str, dict[str, str]]]:
        """What ``InferenceSession(providers=...)`` takes: the providers, the first with its options if any."""
        names: list[str | tuple[str, dict[str, str]]] = list(self.providers())
        if self.provider_options:
            names[0] = (str(names[0]), dict(self.provider_options))
        return names

    def session_options(self, *, profile: str | None = None, data_folder: str | None = None, arena: bool = True) -> Any:
        """onnxruntime's ``SessionOptions`` for these settings.

        ``profile`` turns on onnxruntime's profiler, writing to files with that prefix. ``data_folder`` is where a
        model opened from bytes finds its external data (a model opened from a file finds it beside the file).
        ``arena=False`` turns off onnxruntime's CPU memory arena, for short-lived sessions whose memory should go
        back as soon as they end.

        The session logs nothing itself (``log_severity_level`` 4, fatal only): mgedump reports every failure in
        one line. onnxruntime's process-wide default logger is left as the application set it.
        """
        ort = require("onnxruntime", purpose="running a model")

        opts = ort.SessionOptions()
        opts.log_severity_level = _SILENT
        if self.threads:
            opts.intra_op_num_threads = self.threads
        if self.graph_opt is not None:
            levels = {
                "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
                "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            }
            opts.graph_optimization_level = levels[self.graph_opt]
        if profile is not None:
            opts.enable_profiling = True
            opts.profile_file_prefix = profile
        if data_folder is not None:
            opts.add_session_config_entry("session.model_external_initializers_file_folder_path", data_folder)
        if self.execution_mode is not None:
            parallel = self.execution_mode == "parallel"
            opts.execution_mode = ort.ExecutionMode.ORT_PARALLEL if parallel else ort.ExecutionMode.ORT_SEQUENTIAL
        for key, value in self.session_config:
            opts.add_session_config_entry(key, value)
        if not arena:  # memory goes back at once instead of staying in the session's arena
            opts.enable_cpu_mem_arena = False
        return opts

    # -- how it is shown and saved

    def text(self) -> str:
        """One line, as fitting shows a candidate: ``CPU, 1 thread(s), all, sequential``."""
        provider = (self.provider or CPU).removesuffix("ExecutionProvider")
        line = f"{provider}, {self.threads or 'default'} thread(s), {self.graph_opt or 'all'}, "
        return line + (self.execution_mode or "sequential") + "".join(f", {part}" for part in self.extra_text())

    def extra_text(self) -> list[str]:
        """The provider options and configuration entries, as a report's line ends with them."""
        parts = []
        if self.provider_options:
            parts.append("provider options " + " ".join(f"{k}={v}" for k, v in self.provider_options))
        if self.session_config:
            parts.append("session config " + " ".join(f"{k}={v}" for k, v in self.session_config))
        return parts

    def to_json(self) -> dict[str, Any]:
        """As ``--fitting-out`` and a fitting's rows write it: every field (the CPU provider by its name);
        the provider options and configuration entries when there are any."""
        document: dict[str, Any] = {
            "provider": self.provider or CPU,
            "threads": self.threads,
            "graph_opt": self.graph_opt,
            "execution_mode": self.execution_mode,
        }
        return document | self._extra_json()

    def report_json(self) -> dict[str, Any]:
        """As a report's ``session`` holds it beside the providers that ran (docs/reports.md): ``threads`` (null:
        the runtime's choice), ``graph_opt`` (``all`` when not given), ``execution_mode`` when given, the provider
        options and configuration entries when there are any."""
        document: dict[str, Any] = {"threads": self.threads, "graph_opt": self.graph_opt or "all"}
        if self.execution_mode is not None:
            document["execution_mode"] = self.execution_mode
        return document | self._extra_json()

    def _extra_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {}
        if self.provider_options:
            document["provider_options"] = dict(self.provider_options)
        if self.session_config:
            document["session_config"] = dict(self.session_config)
        return document

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionSettings:
        """From :meth:`to_json`'s or :meth:`report_json`'s shape (keys it does not know are left out; the
        provider, when there is one, as it was written)."""
        optional = lambda key: None if data.get(key) is None else str(data[key])  # noqa: E731
        threads = data.get("threads")
        return cls(
            provider=optional("provider"),
            provider_options=_pairs(data.get("provider_options") or {}),
            threads=None if threads is None else int(threads),
            graph_opt=optional("graph_opt"),
            execution_mode=optional("execution_mode"),
            session_config=_pairs(data.get("session_config") or {}),
        )


for _builtin in (
    Setting("provider", "Execution provider, e.g. CPU or CUDAExecutionProvider (default CPU).", metavar="NAME"),
    Setting(
        "threads",
        "onnxruntime intra-op threads (default: onnxruntime's choice).",
        int,
        check=check_threads,
    ),
    Setting(
        "graph_opt", "onnxruntime graph optimisation level (default: onnxruntime's, all).", choices=GRAPH_OPT_LEVELS
    ),
    Setting(
        "execution_mode",
        "onnxruntime's execution of the graph: sequential (its default) or parallel branches.",
        choices=EXECUTION_MODES,
    ),
):
    register(_builtin)
