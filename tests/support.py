"""Helpers the tests share: where the samples are, and how to run the installed console scripts."""

from __future__ import annotations

import ast
import glob
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.shared import copy_of, made_once

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


def light_models() -> list[str]:
    """The reference models that the onnx package ships (weights listed as graph inputs)."""
    import onnx

    folder = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    return sorted(glob.glob(os.path.join(folder, "*.onnx")))


@dataclass
class Result:
    """What a command run in-process returned and printed."""

    code: int
    out: str
    err: str


def script(name: str) -> str:
    """The installed console script, next to this interpreter."""
    found = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    if not found:
        pytest.fail(f"console script {name} is not installed")
    return found


def run_script(name: str, *args, cwd=None, timeout=300) -> subprocess.CompletedProcess:
    """Run an installed console script in a subprocess."""
    return subprocess.run([script(name), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout)


@dataclass(frozen=True)
class SampleModel:
    """One entry of the sample registry (``samples/models.json``, written by ``scripts/make_samples.py``)."""

    file: str
    spec: str
    about: str
    kind: str
    error: str | None
    files: tuple[str, ...]
    tags: tuple[str, ...]

    @property
    def path(self) -> Path:
        return SAMPLES / self.file

    @property
    def id(self) -> str:
        return self.file.removesuffix(".onnx")


def _registry() -> dict[str, SampleModel]:
    import json

    entries = json.loads((SAMPLES / "models.json").read_text(encoding="utf-8"))["models"]
    return {
        e["file"]: SampleModel(
            e["file"], e["spec"], e["about"], e["kind"], e["error"], tuple(e["files"]), tuple(e["tags"])
        )
        for e in entries
    }


MODELS = _registry()


def sample(file: str) -> SampleModel:
    """A registry entry by its file name under ``samples/`` (``cnn.onnx``, ``bad/ir_too_new.onnx``)."""
    return MODELS[file]


def good_models(tag: str | None = None) -> list[SampleModel]:
    """The sample models that pack and verify with their spec (those with a tag, if given)."""
    return [m for m in MODELS.values() if m.kind == "good" and (tag is None or tag in m.tags)]


def bad_models() -> list[SampleModel]:
    """The deliberately bad sample models (or bad specs), each with the error mgedump must report."""
    return [m for m in MODELS.values() if m.kind == "bad"]


def loaded_by(prog: str, argv: list[str], modules: tuple[str, ...]) -> tuple[list[str], subprocess.CompletedProcess]:
    """Run ``prog``'s entry point (``mgedump``, ``mgerun``, ...) with ``argv`` in a fresh interpreter, as its console
    script does, and say which of ``modules`` it imported (it must exit 0), with the finished process."""
    code = (
        "import sys\n"
        f"from mgedump.cli import {prog}_main\n"
        "try:\n"
        f"    {prog}_main({argv!r})\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        f"print('LOADED', sorted(m for m in {modules!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("LOADED "))
    return ast.literal_eval(line.removeprefix("LOADED ")), done


def bundle_member(bundle: Path, name: str) -> bytes:
    """One member's bytes, read with the standard library's zipfile."""
    import zipfile

    with zipfile.ZipFile(bundle) as zf:
        return zf.read(name)


def bundle_manifest(bundle: Path) -> dict:
    """A bundle's manifest, read with the standard library."""
    import json

    return json.loads(bundle_member(bundle, "mgedump.json"))


def bundled_model(bundle: Path):
    """The bundle's model as an onnx ModelProto."""
    import onnx

    return onnx.load_from_string(bundle_member(bundle, "model.onnx"))


def rewrite_bundle(src: Path, dst: Path, edit=None, *, fix_hashes: bool = False, compress: bool = False) -> Path:
    """Copy a bundle member by member with the standard library, letting ``edit`` change anything on the way.

    Args:
        edit: ``edit(names, manifest, members)``: may change the member names (return the new list), the manifest
            dict and the ``members`` dict (name -> bytes) in place.
        fix_hashes: rewrite every listed member's size and sha256 to match, and each model's sha256 to its
            member's (a valid bundle with other contents).
        compress: deflate the members (bundles must store them).
    """
    import hashlib
    import json
    import zipfile

    with zipfile.ZipFile(src) as zf:
        names = zf.namelist()
        members = {n: zf.read(n) for n in names}
    manifest = json.loads(members["mgedump.json"])
    if edit is not None:
        names = edit(names, manifest, members) or names
    if fix_hashes:
        for entry in manifest["members"]:
            data = members[entry["name"]]
            entry["sha256"], entry["size"] = hashlib.sha256(data).hexdigest(), len(data)
        hashes = {entry["name"]: entry["sha256"] for entry in manifest["members"]}
        for model in [manifest["model"], *(v["model"] for v in manifest.get("variants", ()))]:
            if model.get("member") in hashes:  # the model's record names the hash of the member it runs
                model["sha256"] = hashes[model["member"]]
    members["mgedump.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(dst, "w") as zf:
        for name in names:
            zf.writestr(zipfile.ZipInfo(name), members[name], zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED)
    return dst


def run_ok(program: str, *args) -> None:
    """Run mgedump, mgerun or mgediff in-process for a test's setup (a bundle, a dump); it must exit 0."""
    import mgedump.cli as cli

    main = getattr(cli, f"{program}_main")
    try:
        main([str(a) for a in args])
    except SystemExit as exc:
        assert exc.code == 0, f"{program} {args} exited {exc.code}"


def packed_once(model: str, *args: str) -> Path:
    """The bundle ``mgedump samples/MODEL ARGS -o MODEL.mgetest`` writes (``cnn.mgetest`` for ``cnn.onnx``), packed
    once per test run (tests/shared.py): read it, or copy it to change it."""
    name = Path(model).with_suffix(".mgetest").name
    made = made_once(
        " ".join(("mgedump", f"samples/{model}", *map(str, args))),
        lambda folder: run_ok("mgedump", SAMPLES / model, *args, "-o", folder / name, "-q"),
    )
    return made / name


def pack_two_variants(out) -> None:
    """The sample CNN as a bundle of two variants (fp32, ioc16; format version 2), copied to ``out``."""
    copy_of(packed_once("cnn.onnx", "-d", "#rand(0,1)", "--variants", "fp32,ioc16", "--maxerr", "0.01"), Path(out))


def one_report(path: Path) -> dict:
    """The one bundle's report in an ``mgerun --report-json`` file (report version 2: a list of bundles)."""
    import json

    document = json.loads(Path(path).read_text(encoding="utf-8"))
    assert document["report_version"] == 2 and len(document["bundles"]) == 1, document.keys()
    return document["bundles"][0]


def with_changed_weight(bundle: Path, target: Path, name="conv2_W", where=(3, 2, 1, 1), by=0.8) -> Path:
    """A bundle of cnn.onnx whose model has one weight changed (its hashes fixed): it fails at conv2."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(SAMPLES / "cnn.onnx"))
    init = next(i for i in model.graph.initializer if i.name == name)
    array = numpy_helper.to_array(init).copy()
    array[where] += by
    init.CopyFrom(numpy_helper.from_array(array, name))
    rewrite_bundle(
        bundle, target, lambda n, m, members: members.update({"model.onnx": model.SerializeToString()}), fix_hashes=True
    )
    return target


def external_chain(folder, locations, dim=4):
    """A MatMul chain on one input row, one weight per location (in that file, at the offset of the weights before
    it in that same file), saved as ``folder/m.onnx``; returns its path."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    nodes, inits, last, ends = [], [], "x", {}
    for k, location in enumerate(locations):
        w = rng.standard_normal((dim, dim)).astype(np.float32)
        name = os.path.normpath(location)
        with open(folder / name, "ab") as f:
            f.write(w.tobytes())
        offset = ends.get(name, 0)
        ends[name] = offset + w.nbytes
        tensor = TensorProto(name=f"w{k}", data_type=TensorProto.FLOAT, dims=[dim, dim])
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", str(offset)), ("length", str(w.nbytes))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        inits.append(tensor)
        nodes.append(helper.make_node("MatMul", [last, f"w{k}"], [f"m{k}"]))
        last = f"m{k}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, dim])],
        [helper.make_tensor_value_info(last, TensorProto.FLOAT, [1, dim])], inits,
    )  # fmt: skip
    path = folder / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path
