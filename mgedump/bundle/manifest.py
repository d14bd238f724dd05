"""The manifest (``mgedump.json``) as typed records: what :func:`~mgedump.commands.pack` writes and readers read.

Its keys, one by one, are docs/bundle.md; :func:`~mgedump.bundle.format.validate_manifest`
checks a manifest read from a file before :meth:`Manifest.from_json` builds these records from it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .. import __version__
from .format import FORMAT, FORMAT_VERSION, MODEL_MEMBER


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
    """Whether expected outputs are checked, within which error (``output_maxerr``: the outputs with a bound of
    their own), and whether passing checks are printed."""

    enabled: bool
    maxerr: float
    verbose: bool
    output_maxerr: dict[str, float] = field(default_factory=dict)

    def maxerr_of(self, output: str) -> float:
        """The bound of one output: its own, else the bundle's."""
        return self.output_maxerr.get(output, self.maxerr)

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"enabled": self.enabled, "maxerr": self.maxerr, "verbose": self.verbose}
        if self.output_maxerr:
            document["output_maxerr"] = dict(self.output_maxerr)
        return document


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


@dataclass
class Manifest:
    """A bundle's manifest, format version 1 (docs/bundle.md).

    ``environment`` records the packing machine (versions, CPU and its instruction sets, OS; no host name and no
    clock time, so the same command on the same machine gives the same bytes); bundles of older versions of
    mgedump have none. ``members`` is filled by the writer (:func:`~mgedump.bundle.write_bundle`), which lists and hashes every
    member after the manifest. The optional parts (``float16``, ``int8``, ``io_dump``) are kept as the JSON objects
    they are; their keys are docs/bundle.md's.
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
    float16: dict[str, Any] | None = None
    int8: dict[str, Any] | None = None
    io_dump: dict[str, Any] | None = None
    environment: dict[str, Any] | None = None  # where it was packed (mgedump.model.environment.pack_environment)
    members: list[dict[str, Any]] = field(default_factory=list)
    generator: dict[str, Any] = field(default_factory=lambda: {"name": "mgedump", "version": __version__})

    def to_json(self) -> dict[str, Any]:
        """The manifest as written (``members`` last; optional keys only when present)."""
        document: dict[str, Any] = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "generator": dict(self.generator),
            "model": self.model.to_json(),
            "optimizations": list(self.optimizations),
            **({"float16": self.float16} if self.float16 else {}),
            **({"int8": self.int8} if self.int8 else {}),
            "requirements": list(self.requirements),
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "assertion": self.assertion.to_json(),
            "seed": self.seed,
            "data_options": dict(self.data_options),
            "test_cases": [case.to_json() for case in self.test_cases],
            **({"io_dump": self.io_dump} if self.io_dump else {}),
            **({"environment": self.environment} if self.environment else {}),
        }
        if self.members:
            document["members"] = list(self.members)
        return document

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Manifest:
        """The records of a manifest that :func:`~mgedump.bundle.format.validate_manifest` accepted."""
        model = document["model"]
        assertion = document["assertion"]
        return cls(
            model=ModelEntry(
                sha256=model["sha256"],
                source_sha256=model.get("source_sha256", ""),
                member=model["member"],
                external_data=model.get("external_data"),
            ),
            inputs=list(document["inputs"]),
            outputs=list(document["outputs"]),
            assertion=AssertionEntry(
                enabled=bool(assertion["enabled"]),
                maxerr=float(assertion["maxerr"]),
                verbose=bool(assertion["verbose"]),
                output_maxerr={name: float(bound) for name, bound in (assertion.get("output_maxerr") or {}).items()},
            ),
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
            optimizations=list(document["optimizations"]),
            requirements=list(document["requirements"]),
            seed=int(document.get("seed", 0)),
            data_options=dict(document.get("data_options") or {}),
            float16=document.get("float16"),
            int8=document.get("int8"),
            io_dump=document.get("io_dump"),
            environment=document.get("environment"),
            members=list(document.get("members", [])),
            generator=dict(document.get("generator") or {}),
        )
