"""What a bundle holds: its members (models, test cases, an io dump) and its manifest (docs/bundle.md).

One model is a version-1 bundle: the model at the top, the test cases stored in its dtypes. Several variants
are a version-2 bundle: each variant's model under ``variants/NAME/``, the test cases once, in the dtypes of the
model as given, with its outputs as the reference.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.fileio import CHUNK, FileDigest, atomic_output, hash_files
from ..bundle import (
    DATA_MEMBER,
    IO_DUMP_FOLDER,
    MODEL_MEMBER,
    AssertionEntry,
    CaseEntry,
    Manifest,
    Member,
    ModelEntry,
    VariantEntry,
    case_folder,
    tensor_bytes,
)
from ..bundle.format import VARIANTS_FOLDER
from ..bundle.valueproto import encode_value
from ..model.modelfile import ModelSource, model_source
from ..model.runtime import TensorInfo
from ..options import PackOptions
from .pack_proof import Opened, Proof, StoredCase

if TYPE_CHECKING:  # a plain pack imports none of the optimiser
    from ..optimize import OptimizeResult


@dataclass
class Variant:
    """One variant made by a pack: its name, its model (none: the model as given), its proof and notes."""

    name: str
    opened: Opened
    result: OptimizeResult | None = None
    proof: Proof | None = None
    notes: list[str] = field(default_factory=list)
    target: dict[str, Any] | None = None  # written for the target's onnxruntime: the manifest's entry

    @property
    def path(self) -> str:
        return self.opened.path


@dataclass(frozen=True)
class Source:
    """The model as given: its file, how its bytes are copied, and their hash."""

    path: str
    copy: ModelSource
    digest: FileDigest

    @property
    def sha256(self) -> str:
        """The hash of the model file itself (not of its external data)."""
        return self.digest.sha256 if self.copy.model_bytes is None else hash_files([self.path]).sha256


def model_members(source: Source, variant: Variant, prefix: str = "") -> tuple[list[Member], ModelEntry]:
    """A model's member (the file as it is, or rewritten for external data), its data member, and its entry."""
    if variant.result is None:  # the model as given: its bytes were hashed while it ran
        copy, digest, path = source.copy, source.digest, source.path
    else:
        path = variant.result.path
        copy, digest = model_source(path, DATA_MEMBER), None
    model, data = prefix + MODEL_MEMBER, prefix + DATA_MEMBER
    if copy.model_bytes is None:
        member = Member(model, paths=(path,), digest=digest)
        return [member], ModelEntry(member.hashed().sha256, source.sha256, model)
    data_digest = digest if digest is not None else hash_files(copy.data_paths)
    members = [Member(model, copy.model_bytes), Member(data, paths=copy.data_paths, digest=data_digest)]
    return members, ModelEntry(members[0].hashed().sha256, source.sha256, model, data)


def manifest_of(
    source: Source,
    variants: Sequence[Variant],
    stored: Sequence[StoredCase],
    stored_io: Opened,
    members: list[Member],
    options: PackOptions,
    environment: dict[str, Any],
    left_out: Sequence[dict[str, str]] = (),
    target: dict[str, Any] | None = None,
    several: bool = False,
) -> Manifest:
    """The bundle's manifest, its models' members first, then the test cases' tensors: version 1 for the one model
    of a pack, version 2 when several variants were asked for (even if one alone passed); ``environment`` is where
    it was packed (:func:`~mgedump.model.environment.pack_environment`)."""
    if not several:
        (variant,) = variants
        found, model = model_members(source, variant)
        members += found
        result = variant.result
        entries: list[VariantEntry] = []
        optimizations = list(result.optimizations) if result else []
        records, requirements = (result.records, list(result.requirements)) if result else ({}, [])
    else:
        entries = [_variant_entry(source, v, members) for v in variants]
        model, optimizations, records, requirements = entries[0].model, [], {}, []
    return Manifest(
        model=model,
        optimizations=optimizations,
        records=records,
        requirements=requirements,
        inputs=[info.to_json() for info in stored_io.inputs],
        outputs=[info.to_json() for info in stored_io.outputs],
        assertion=assertion_entry(options),
        seed=options.data.seed,
        data_options={
            "repeat": options.data.repeat,
            "resize_input": options.data.resize_input,
            "input_transform": options.data.input_transform,
        },
        test_cases=_case_members(stored, stored_io, members, options.no_assert),
        environment=environment,
        target_runtime=target,
        variants=entries,
        left_out=list(left_out),
    )


def assertion_entry(options: PackOptions) -> AssertionEntry:
    return AssertionEntry(enabled=not options.no_assert, bounds=options.bounds, verbose=not options.silent)


def _variant_entry(source: Source, variant: Variant, members: list[Member]) -> VariantEntry:
    found, model = model_members(source, variant, f"{VARIANTS_FOLDER}/{variant.name}/")
    members += found
    result = variant.result
    optimize = dataclasses.asdict(result.options) if result is not None and result.options is not None else {}
    return VariantEntry(
        name=variant.name,
        model=model,
        optimizations=list(result.optimizations) if result else [],
        requirements=list(result.requirements) if result else [],
        inputs=[info.to_json() for info in variant.opened.inputs],
        outputs=[info.to_json() for info in variant.opened.outputs],
        certified=variant.proof.certified if variant.proof else {},
        options={k: (list(v) if isinstance(v, tuple) else v) for k, v in optimize.items()},
        records=result.records if result else {},
    )


def _case_members(stored: Sequence[StoredCase], io: Opened, members: list[Member], no_assert: bool) -> list[CaseEntry]:
    """Add every test case's tensors (and sequences, maps, optionals) to members; return the manifest's test
    cases."""
    types = {info.name: info for info in io.inputs}
    manifest_cases = []
    for index, case in enumerate(stored):
        folder = case_folder(index)
        input_members = []
        for k, (name, array) in enumerate(case.inputs):
            input_members.append(f"{folder}/input_{k}.pb")
            members.append(Member(input_members[-1], _value_bytes(array, types.get(name, name))))
        output_members = []
        if not no_assert:
            for k, (info, array) in enumerate(zip(io.outputs, case.expected, strict=True)):
                output_members.append(f"{folder}/output_{k}.pb")
                members.append(Member(output_members[-1], _value_bytes(array, info)))
        spec = case.case.spec
        manifest_cases.append(CaseEntry(folder, spec.text, spec.origin, input_members, output_members))
    return manifest_cases


def _value_bytes(value: Any, info: TensorInfo | str) -> bytes:
    """A test-data member: a TensorProto, or for a sequence, a map or an optional its ONNX message."""
    if isinstance(info, str) or info.is_tensor:
        return tensor_bytes(value, info if isinstance(info, str) else info.name)
    return encode_value(value, info.value_type, info.name)


def embed_io_dump(
    source: Source, given: Opened, stored: Sequence[StoredCase], count: int, members: list[Member], scratch: str
) -> tuple[dict[str, Any], int]:
    """Dump the model as given on the first ``count`` test cases; add the dump as members; return the manifest's
    entry and its size in bytes."""
    from ..diagnose.exposed import ModelDumper

    stored = stored[:count]
    folder = os.path.join(scratch, IO_DUMP_FOLDER)
    dtypes = {info.name: info.np_dtype for info in given.inputs if info.is_tensor}
    cases = [
        (
            k,
            {
                name: (a.astype(dtypes[name]) if name in dtypes and a.dtype != dtypes[name] else a)
                for name, a in case.inputs
            },
        )
        for k, case in enumerate(stored)
    ]
    with ModelDumper(source.path, source.sha256, label=source.path) as dumper:
        dumper.dump(folder, cases)
    for k in range(len(stored)):
        case_dir = os.path.join(folder, case_folder(k))
        for name in ["index.json", *sorted(f for f in os.listdir(case_dir) if f != "index.json")]:
            members.append(Member(f"{IO_DUMP_FOLDER}/{case_folder(k)}/{name}", paths=(os.path.join(case_dir, name),)))
    size = sum(os.path.getsize(p) for m in members if m.name.startswith(IO_DUMP_FOLDER) for p in m.paths)
    entry = {"folder": IO_DUMP_FOLDER, "test_cases": list(range(len(stored))), "model_sha256": source.sha256}
    return entry, size


def write_model_out(target: str, members: Sequence[Member], inputs: Sequence[str]) -> None:
    """The bundled model as a plain ONNX file (``model_out``): the model member's bytes, and its external data
    member beside it under the name the model reads it by (model.onnx.data)."""
    for member in members:
        if member.name not in (MODEL_MEMBER, DATA_MEMBER):
            continue
        path = target if member.name == MODEL_MEMBER else os.path.join(os.path.dirname(target), DATA_MEMBER)
        with atomic_output(path, inputs) as out:
            if member.data is not None:
                out.write(member.data)
            for source in member.paths:
                with open(source, "rb") as f:
                    shutil.copyfileobj(f, out, CHUNK)
