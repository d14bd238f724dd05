"""The manifest (``mgedump.json``) as typed records: what :func:`~mgedump.commands.pack` writes and readers read.

Its keys, one by one, are docs/bundle.md; :func:`~mgedump.bundle.format.validate_manifest`
checks a manifest read from a file before :meth:`Manifest.from_json` builds these records from it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .. import __version__
from ..base.bounds import Bounds
from .format import FORMAT, FORMAT_VERSION, MODEL_MEMBER, SINGLE_VERSION


@dataclass(frozen=True)
class ModelEntry:
    """The bundled model: its member, its hash, the hash of the file it was made from, its external data member."""

    sha256: str
    source_sha256: str
    member: str = MODEL_MEMBER
    external_data: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class AssertionEntry:
    """Whether expected outputs are checked, within which bounds (:class:`~mgedump.base.bounds.Bounds`: every
    output's, outputs' own, and the statistic of the element errors each applies to), and whether passing checks
    are printed."""

    enabled: bool
    bounds: Bounds
    verbose: bool

    def to_json(self) -> dict[str, Any]:
        return {"enabled": self.enabled, **self.bounds.to_json(), "verbose": self.verbose}

    @classmethod
    def from_json(cls, assertion: dict[str, Any]) -> AssertionEntry:
        return cls(
            enabled=bool(assertion["enabled"]), bounds=Bounds.from_json(assertion), verbose=bool(assertion["verbose"])
        )


@dataclass(frozen=True)
class VariantEntry:
    """One variant of a version-2 bundle: its model, how it was made, and its proof.

    Attributes:
        name: ``fp32``, ``ioc16``, ``int8``, ...: what ``mgerun --variant`` takes.
        model: its model member (``source_sha256`` is the bundle's).
        inputs, outputs: its model's inputs and outputs (dtypes may differ from the stored tensors').
        certified: the worst error per output over the test cases, measured when packing.
        options: the options that made it.
        records: its precision mode's record, by key (``float16``, ``int8``).
    """

    name: str
    model: ModelEntry
    optimizations: list[str]
    requirements: list[str]
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    certified: dict[str, float | None] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        model = self.model.to_json()
        del model["source_sha256"]
        return {
            "name": self.name,
            "model": model,
            "optimizations": list(self.optimizations),
            "requirements": list(self.requirements),
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "certified": dict(self.certified),
            "options": dict(self.options),
            **{key: record for key, record in self.records.items() if record},
        }

    @classmethod
    def from_json(cls, entry: dict[str, Any], source_sha256: str) -> VariantEntry:
        model = entry["model"]
        return cls(
            name=entry["name"],
            model=ModelEntry(model["sha256"], source_sha256, model["member"], model.get("external_data")),
            optimizations=list(entry["optimizations"]),
            requirements=list(entry["requirements"]),
            inputs=list(entry["inputs"]),
            outputs=list(entry["outputs"]),
            certified=dict(entry["certified"]),
            options=dict(entry.get("options") or {}),
            records={k: v for k, v in entry.items() if k not in VARIANT_KEYS and isinstance(v, dict)},
        )


VARIANT_KEYS = frozenset(
    ("name", "model", "optimizations", "requirements", "inputs", "outputs", "certified", "options")
)


@dataclass(frozen=True)
class CaseEntry:
    """One test case: its folder, how it was given, and its input and expected output members."""

    dir: str
    spec: str
    origin: str
    inputs: list[str]
    outputs: list[str]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


CORE_KEYS = frozenset(
    (
        "format", "format_version", "generator", "model", "optimizations", "requirements", "inputs", "outputs",
        "assertion", "seed", "data_options", "test_cases", "io_dump", "environment", "members", "variants",
        "left_out",
    )
)  # fmt: skip
"""The manifest's own keys; any other key that holds an object is a precision mode's record."""


@dataclass
class Manifest:
    """A bundle's manifest, format version 1 (docs/bundle.md).

    ``environment`` records the packing machine (versions, CPU and its instruction sets, OS; no host name and no
    clock time, so the same command on the same machine gives the same bytes); bundles of older versions of
    mgedump have none. ``members`` is filled by the writer (:func:`~mgedump.bundle.write_bundle`), which lists and hashes every
    member after the manifest. The optional parts are kept as the JSON objects they are; their keys are
    docs/bundle.md's. ``records`` holds the precision mode's record under its key (``float16``, ``int8``: the
    mode's :attr:`~mgedump.optimize.precisions.Precision.manifest_key`), written after ``optimizations``.
    """

    model: ModelEntry
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    assertion: AssertionEntry
    test_cases: list[CaseEntry]
    optimizations: list[str] = field(default_factory=list)
    requirements: list[str] = field(default_factory=list)
    seed: int = 0
    data_options: dict[str, Any] = field(default_factory=dict)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    io_dump: dict[str, Any] | None = None
    environment: dict[str, Any] | None = None  # where it was packed (mgedump.model.environment.pack_environment)
    target_runtime: dict[str, Any] | None = None  # --target-runtime: the onnxruntime the model was written for
    members: list[dict[str, Any]] = field(default_factory=list)
    generator: dict[str, Any] = field(default_factory=lambda: {"name": "mgedump", "version": __version__})
    variants: list[VariantEntry] = field(default_factory=list)
    left_out: list[dict[str, str]] = field(default_factory=list)

    @property
    def format_version(self) -> int:
        """1 for one model, 2 for several variants."""
        return FORMAT_VERSION if self.variants else SINGLE_VERSION

    def to_json(self) -> dict[str, Any]:
        """The manifest as written (``members`` last; optional keys only when present)."""
        document: dict[str, Any] = {
            "format": FORMAT,
            "format_version": self.format_version,
            "generator": dict(self.generator),
            "model": self.model.to_json() if not self.variants else {"source_sha256": self.model.source_sha256},
            **self._single_or_variants(),
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "assertion": self.assertion.to_json(),
            "seed": self.seed,
            "data_options": dict(self.data_options),
            "test_cases": [case.to_json() for case in self.test_cases],
            **({"io_dump": self.io_dump} if self.io_dump else {}),
            **({"environment": self.environment} if self.environment else {}),
            **({"target_runtime": self.target_runtime} if self.target_runtime else {}),
        }
        if self.members:
            document["members"] = list(self.members)
        return document

    def _single_or_variants(self) -> dict[str, Any]:
        """Version 1's rewrites of its one model, or version 2's variants."""
        if not self.variants:
            return {
                "optimizations": list(self.optimizations),
                **{key: record for key, record in self.records.items() if record},
                "requirements": list(self.requirements),
            }
        return {
            "variants": [v.to_json() for v in self.variants],
            **({"left_out": [dict(e) for e in self.left_out]} if self.left_out else {}),
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Manifest:
        """The records of a manifest that :func:`~mgedump.bundle.format.validate_manifest` accepted."""
        model = document["model"]
        source = model.get("source_sha256", "")
        variants = [VariantEntry.from_json(v, source) for v in document.get("variants", [])]
        return cls(
            model=variants[0].model
            if variants
            else ModelEntry(
                sha256=model["sha256"],
                source_sha256=source,
                member=model["member"],
                external_data=model.get("external_data"),
            ),
            inputs=list(document["inputs"]),
            outputs=list(document["outputs"]),
            assertion=AssertionEntry.from_json(document["assertion"]),
            test_cases=[
                CaseEntry(
                    dir=case.get("dir", ""),
                    spec=case["spec"],
                    origin=case.get("origin", ""),
                    inputs=list(case["inputs"]),
                    outputs=list(case["outputs"]),
                )
                for case in document["test_cases"]
            ],
            optimizations=list(document.get("optimizations", [])),
            requirements=list(document.get("requirements", [])),
            seed=int(document.get("seed", 0)),
            data_options=dict(document.get("data_options") or {}),
            records={key: value for key, value in document.items() if key not in CORE_KEYS and isinstance(value, dict)},
            io_dump=document.get("io_dump"),
            environment=document.get("environment"),
            target_runtime=document.get("target_runtime"),
            members=list(document.get("members", [])),
            generator=dict(document.get("generator") or {}),
            variants=variants,
            left_out=[dict(e) for e in document.get("left_out", [])],
        )
