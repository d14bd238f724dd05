"""Hostile input, fifth round: numbers, files that are not files, outputs onto inputs, workers started from a
folder holding Python files. Each test replays one break, in its own temporary folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mgedump.base.errors import UsageError
from mgedump.base.numbers import MAX_DIGITS, parse_float, parse_int, parse_version
from tests.support import SAMPLES, pack_two_variants, rewrite_bundle, run_ok

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("five") / "cnn.mgetest"
    run_ok("mgedump", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", out, "-q")
    return out


def one_line(result, needle: str) -> str:
    assert result.code == 2, (result.out, result.err)
    assert "Traceback" not in result.err + result.out
    [line] = result.err.strip().splitlines()
    assert needle in line, line
    return line


# ---------------------------------------------------------------- one number parser


@pytest.mark.parametrize(
    "text", ["１７", "²", "1" * (MAX_DIGITS + 1), "9" * 5000, "0x10", "1_000", "", " ", "+", "1.5", "٣"]
)
def test_a_number_is_ascii_digits_of_bounded_length(text):
    with pytest.raises(UsageError, match="--iter takes a whole number in ASCII digits"):
        parse_int(text, "--iter")


def test_numbers_that_are_numbers_are_read():
    assert parse_int(" 17\n", "n") == 17 and parse_int("-3", "n") == -3
    assert parse_int("9" * MAX_DIGITS, "n") == int("9" * MAX_DIGITS)
    assert parse_float("1e-3", "x") == 1e-3 and parse_float(".5", "x") == 0.5 and parse_float("inf", "x") > 1e308
    assert parse_version("1.17.3", "v") == (1, 17, 3) and parse_version("1.17", "v") == (1, 17)
    with pytest.raises(UsageError, match="at most 4"):
        parse_int("5", "n", highest=4)
    for bad in ("１.５", "1e" + "9" * 60, "0x1p3", "1,5"):
        with pytest.raises(UsageError):
            parse_float(bad, "x")
    for bad in ("１.１７", "1", "1.17.3.4", "1.x", "1." + "7" * 30):
        with pytest.raises(UsageError):
            parse_version(bad, "v")


def test_full_width_digits_in_a_flag_are_refused_not_read(bundle, mgerun):
    # click's own int type reads '５' as 5
    one_line(mgerun(bundle, "--iter", "５"), "'５' is not a valid integer (ASCII digits")
    one_line(mgerun(bundle, "--iter", "9" * 5000), "is not a valid integer")


def test_a_target_runtime_in_full_width_digits_is_refused_at_pack_time(tmp_path, mgedump):
    # it was packed (exit 0), and mgerun then refused the bundle as malformed
    out = tmp_path / "t.mgetest"
    one_line(
        mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--target-runtime", "１.１７", "-o", out),
        "give onnxruntime's version as MAJOR.MINOR in ASCII digits",
    )
    assert not out.exists()


def test_a_target_runtime_with_a_patch_says_what_it_packs_for(tmp_path, mgedump):
    out = tmp_path / "t.mgetest"
    result = mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--target-runtime", "1.17.3", "-o", out)
    assert result.code == 0, result.err
    assert "--target-runtime 1.17.3: packing for onnxruntime 1.17" in result.err


def test_a_spec_number_of_thousands_of_digits_is_one_line(tmp_path, mgedump):
    one_line(mgedump(SAMPLES / "cnn.onnx", "-d", f"#rand(0,{'9' * 5000})", "-o", tmp_path / "o"), "bad parameter")


# ---------------------------------------------------------------- files a command reads that are not files


def _node(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.mknod(path, 0o600 | 0o020000, os.makedev(1, 5))  # the numbers of /dev/zero, made in the test's folder
    return path


@pytest.mark.parametrize("kind", ["fifo", "zero"])
@pytest.mark.parametrize(
    "flags", [["--config"], ["--shard", "1/2", "--shard-durations"], ["--merge"]], ids=["config", "durations", "merge"]
)
def test_a_fifo_or_device_given_as_a_json_input_is_refused_without_reading(flags, kind, bundle, tmp_path):
    if kind == "zero" and os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    node = _node(tmp_path, kind)
    args = [*flags, node] if flags != ["--merge"] else ["--merge", node]
    if flags != ["--merge"]:
        args = [bundle, *args]
    result = subprocess.run(
        [BIN / "mgerun", *map(str, args)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )  # a hang fails here, by the timeout
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert ("a FIFO, not a regular file" if kind == "fifo" else "a character device, not a regular file") in line


# ---------------------------------------------------------------- outputs onto inputs


def test_the_durations_report_is_never_the_report_written(bundle, tmp_path, mgerun):
    durations = tmp_path / "dur.json"
    run_ok("mgerun", bundle, "--iter", "1", "-q", "--report-json", durations)
    before = durations.read_bytes()
    result = mgerun(bundle, "--shard", "1/1", "--shard-durations", durations, "--report-json", durations)
    one_line(result, "is the input")
    assert durations.read_bytes() == before


def test_a_fitting_choice_on_stdout_is_alone_there(tmp_path, mgerun):
    variants = tmp_path / "v.mgetest"
    pack_two_variants(variants)
    result = mgerun(variants, "--fitting", "--fitting-budget", "1", "--iter", "1", "--fitting-out", "-")
    assert result.code == 0, result.err
    choice = json.loads(result.out)  # nothing but the choice: --config reads it back
    assert choice["format"] and "fitting: chose" in result.err
    config = tmp_path / "c.json"
    config.write_text(result.out, encoding="utf-8")
    assert mgerun(variants, "--config", config, "--iter", "1").code == 0


# ---------------------------------------------------------------- workers start isolated


@pytest.mark.skipif(sys.version_info < (3, 11), reason="PYTHONSAFEPATH came with Python 3.11")
def test_workers_do_not_run_python_files_of_the_current_folder(bundle, tmp_path):
    for name in ("a", "b"):
        (tmp_path / f"{name}.mgetest").write_bytes(bundle.read_bytes())
    ran = tmp_path / "ran.txt"
    for module in ("selectors", "struct", "signal"):  # what a spawned worker and the resource tracker import first
        (tmp_path / f"{module}.py").write_text(f"open({str(ran)!r}, 'a').write('{module}\\n')\n", encoding="utf-8")
    result = subprocess.run(
        [BIN / "mgerun", "a.mgetest", "b.mgetest", "-j", "2", "--silent"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert not ran.exists(), ran.read_text()


# ---------------------------------------------------------------- claims tied to what the bundle holds


def test_a_model_hash_that_is_not_its_members_is_refused(bundle, tmp_path, mgerun):
    def zero(names, manifest, members):
        manifest["model"]["sha256"] = "0" * 64  # an io dump would record it as the model that ran

    lying = rewrite_bundle(bundle, tmp_path / "zero.mgetest", zero)
    one_line(mgerun(lying), "model.sha256 is not the sha256 the members list gives 'model.onnx'")


def test_a_variant_runs_only_its_own_members(tmp_path, mgerun):
    variants = tmp_path / "v.mgetest"
    pack_two_variants(variants)

    def swap(names, manifest, members):
        fp32, ioc16 = manifest["variants"]
        fp32["model"], ioc16["model"] = ioc16["model"], fp32["model"]  # fp32 would run ioc16's model

    swapped = rewrite_bundle(variants, tmp_path / "swapped.mgetest", swap)
    one_line(
        mgerun(swapped), "variants[0].model.member: 'variants/ioc16/model.onnx', expected 'variants/fp32/model.onnx'"
    )


# ---------------------------------------------------------------- every way out: no worker left, no file left


def _worker_pids(parent: int) -> list[int]:
    """The parent's worker processes (not multiprocessing's resource tracker, which ends when the parent does)."""
    children = Path(f"/proc/{parent}/task/{parent}/children")
    pids = [int(p) for p in children.read_text().split()] if children.exists() else []
    return [p for p in pids if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]


@pytest.mark.parametrize("signum, code", [(15, 143), (2, 130), (1, 129)], ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_during_jobs_leaves_no_worker_and_no_file(signum, code, bundle, tmp_path):
    zoo, scratch = tmp_path / "zoo", tmp_path / "tmp"
    zoo.mkdir(), scratch.mkdir()
    for k in range(60):
        (zoo / f"b{k}.mgetest").write_bytes(bundle.read_bytes())
    env = {**os.environ, "TMPDIR": str(scratch)}
    child = subprocess.Popen(
        [BIN / "mgerun", zoo, "-j", "2", "--silent"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    try:
        deadline = time.monotonic() + 120
        while not list(scratch.glob("mgerun-jobs-*/worker-*.tmp/mgerun-*")):  # a worker is inside a bundle
            assert child.poll() is None and time.monotonic() < deadline, "the run ended before a worker started"
            time.sleep(0.02)
        workers = _worker_pids(child.pid)
        assert workers
        os.kill(workers[0], 19)  # SIGSTOP: a stopped worker must not keep its parent, nor outlive it
        child.send_signal(signum)
        _, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == code, err
    assert list(scratch.iterdir()) == []  # the workers' model copies went with the parent's folder
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


# ---------------------------------------------------------------- the merge gate takes its verdicts from the verdicts


@pytest.fixture(scope="module")
def two_shards(tmp_path_factory, bundle) -> tuple[Path, Path]:
    """A zoo of 6 bundles and the reports of its 2 shards by the hash."""
    root = tmp_path_factory.mktemp("zoo6")
    for k in range(6):
        (root / f"b{k}.mgetest").write_bytes(bundle.read_bytes())
    reports = tmp_path_factory.mktemp("shards")
    for index in (1, 2):
        run_ok("mgerun", root, "--shard", f"{index}/2", "--iter", "1", "-q", "--report-json", reports / f"{index}.json")
    return reports / "1.json", reports / "2.json"


def _edited(path: Path, out: Path, edit) -> Path:
    document = json.loads(path.read_text(encoding="utf-8"))
    edit(document)
    out.write_text(json.dumps(document), encoding="utf-8")
    return out


def test_shards_that_do_not_add_up_to_their_count_are_refused(two_shards, tmp_path, mgerun):
    one, two = two_shards

    def lose_one(document):  # balanced by another durations report: this shard checked one bundle fewer
        document["bundles"].pop()
        document["shard"]["bundles"] -= 1

    short = _edited(two, tmp_path / "short.json", lose_one)
    result = mgerun("--merge", one, short, "--junit-xml", tmp_path / "m.xml")
    one_line(result, "the shards checked 5 bundle(s) of the 6 their paths hold")
    assert not (tmp_path / "m.xml").exists()

    def lie(document):
        document["bundles"].pop()

    one_line(mgerun("--merge", one, _edited(two, tmp_path / "lie.json", lie)), "says its shard checked")


def test_a_bundle_that_says_failed_fails_the_merge(two_shards, tmp_path, mgerun):
    one, two = two_shards

    def failed(document):  # the bundle says 1, the report says 0
        document["bundles"][0]["exit_code"], document["bundles"][0]["passed"] = 1, False

    result = mgerun("--merge", one, _edited(two, tmp_path / "f.json", failed))
    assert result.code == 1 and "1 failed" in result.out, result.out


def test_a_failed_test_case_fails_its_bundle_whatever_the_bundle_says(two_shards, tmp_path, mgerun):
    one, two = two_shards

    def case_failed(document):  # the bundle and the report say 0; one of its test cases failed
        document["bundles"][0]["test_cases"][0]["passed"] = False

    junit = tmp_path / "m.xml"
    result = mgerun("--merge", one, _edited(two, tmp_path / "c.json", case_failed), "--junit-xml", junit)
    assert result.code == 1, result.out
    assert "<failure" in junit.read_text(encoding="utf-8")


# ---------------------------------------------------------------- fitting proves before it chooses


@pytest.fixture(scope="module")
def variants(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("variants") / "v.mgetest"
    pack_two_variants(out)
    return out


def test_fitting_with_no_assert_is_refused(variants, mgerun, tmp_path):
    result = mgerun(variants, "--fitting", "--no-assert", "--fitting-out", tmp_path / "c.json")
    one_line(result, "--fitting chooses among variants proven on the test cases; --no-assert checks none")
    assert not (tmp_path / "c.json").exists()


def test_fitting_a_bundle_without_expected_outputs_is_refused(variants, mgerun, tmp_path):
    def unasserted(names, manifest, members):  # as if packed with --no-assert, which --variants refuses
        manifest["assertion"]["enabled"] = False
        outputs = {m for case in manifest["test_cases"] for m in case["outputs"]}
        for case in manifest["test_cases"]:
            case["outputs"] = []
        manifest["members"] = [entry for entry in manifest["members"] if entry["name"] not in outputs]
        return [name for name in names if name not in outputs]

    bare = rewrite_bundle(variants, tmp_path / "bare.mgetest", unasserted)
    result = mgerun(bare, "--fitting", "--fitting-budget", "1", "--fitting-out", tmp_path / "c.json")
    one_line(result, "holds no expected outputs")
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize("dtype", ["float64", "seq(tensor(float))"])  # fitting fed float64; a TypeError
def test_a_variant_whose_record_is_not_its_model_is_refused(dtype, variants, mgerun, tmp_path):
    def lie(names, manifest, members):
        for variant in manifest["variants"]:
            for info in variant["inputs"]:
                info["dtype"], info["shape"] = dtype, info["shape"] if dtype == "float64" else None

    lying = rewrite_bundle(variants, tmp_path / "lie.mgetest", lie)
    for args in (["--variant", "fp32"], ["--fitting", "--fitting-budget", "1"]):
        one_line(mgerun(lying, *args), f"the manifest says input 'data' is {dtype}; the model's is 'data', float32")


# ---------------------------------------------------------------- mgediff runs the variant it is told to


def test_mgediff_on_a_bundle_of_variants_needs_one_named(variants, mgediff):
    # it compared the first variant, saying nothing
    one_line(mgediff(variants, variants), "holds the variants fp32, ioc16: name one (--variant)")
    one_line(mgediff(variants, variants, "--variant", "int8"), "has no variant 'int8': it holds fp32, ioc16")
    one_line(
        mgediff(SAMPLES / "cnn.onnx", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--variant", "fp32"),
        "neither A nor B is a bundle of several",
    )
    result = mgediff(SAMPLES / "cnn.onnx", variants, "--variant", "ioc16")
    assert result.code == 0, result.err
    assert "float16 on one side" in result.out + result.err  # the float16 variant ran, not the first
    assert "2 in B only" in result.out + result.err  # its Casts


# ---------------------------------------------------------------- --variants' refusals name what works with --variants


@pytest.mark.parametrize(
    "variants_given, flags, says",
    [
        (
            "fp32,ioc16",
            ["--fp32-nodes", "conv1"],
            "--fp32-nodes keeps nodes float in a float16 or int8 mode, not to the fp32 variant: leave fp32 out of "
            "--variants (it applies to ioc16, io16xc32, int8 or int8-dynamic), or leave --fp32-nodes out",
        ),
        (
            "fp32,ioc16",
            ["--calibrate", "#rand(0,1)"],
            "--calibrate gives calibration data to int8's static calibration, not to the fp32 variant: name int8 in "
            "--variants",
        ),
        (
            "ioc16,int8",
            ["--float16-margin", "0.3"],
            "not to the int8 variant: leave int8 out of --variants (it applies to ioc16 or io16xc32)",
        ),
    ],
    ids=["fp32-nodes", "calibrate", "float16-margin"],
)
def test_a_mode_option_refused_under_variants_names_what_works_with_them(
    variants_given, flags, says, tmp_path, mgedump
):
    # the hints said "add --enable-ioc16" or "add --quantize int8", which --variants then refuses
    out = tmp_path / "v.mgetest"
    line = one_line(
        mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--variants", variants_given, *flags, "-o", out), says
    )
    assert "--enable-" not in line and "--quantize" not in line
    assert not out.exists()


# ---------------------------------------------------------------- a --config choice is checked as the choice it is


def _choice(tmp_path: Path, **fields) -> Path:
    choice = {
        "format": "mgedump-fitting",
        "version": 1,
        "bundle": "v.mgetest",
        "variant": "fp32",
        "provider": "CPUExecutionProvider",
        "threads": 1,
        "graph_opt": "extended",
        "execution_mode": "sequential",
        **fields,
    }
    path = tmp_path / "choice.json"
    path.write_text(json.dumps(choice), encoding="utf-8")
    return path


def test_a_config_of_too_many_threads_names_its_field_not_a_flag(variants, tmp_path, mgerun):
    # it said "--thread must be at most 64", a flag the user never gave
    line = one_line(mgerun(variants, "--config", _choice(tmp_path, threads=4096)), "choice.json: threads 4096 is above")
    assert line.startswith("mgerun: error: --config ") and "--thread" not in line


def test_a_config_chosen_for_another_bundle_says_so(variants, tmp_path, mgerun):
    # it ran silently; a renamed copy is the same bundle, so it warns and runs (docs/fitting.md)
    result = mgerun(variants, "--config", _choice(tmp_path, bundle="other.mgetest"), "--iter", "1")
    assert result.code == 0, result.err
    [line] = [line for line in result.err.splitlines() if "warning" in line]
    assert "was chosen for bundle 'other.mgetest', not 'v.mgetest': running its variant and settings anyway" in line
    result = mgerun(variants, "--config", _choice(tmp_path), "--iter", "1")
    assert result.code == 0 and "chosen for bundle" not in result.err, result.err
    one_line(mgerun(variants, "--config", _choice(tmp_path, bundle=7)), "its 'bundle' is not valid")


# ---------------------------------------------------------------- names that are not text, in mgediff


def _model_with_output_name(path: Path, raw: bytes) -> Path:
    """A Relu model whose output's name is ``raw`` (bytes onnx.helper cannot write: patched into the protobuf)."""
    from onnx import TensorProto, helper

    placeholder = b"q" * len(raw)  # the same length: no protobuf length changes
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], [placeholder.decode()], name="relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(placeholder.decode(), TensorProto.FLOAT, [2])],
    )
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    assert data.count(placeholder) == 2  # the node's output and the graph's
    path.write_bytes(data.replace(placeholder, raw))
    return path


@pytest.mark.parametrize("raw", [b"y\xffy", b"\xed\xa0\x80"], ids=["0xff", "surrogate"])
def test_mgediff_on_a_model_whose_output_name_is_not_utf8_is_one_line(raw, tmp_path, mgediff, mgerun):
    # a UnicodeDecodeError traceback; run beside an io dump, the output went uncompared and the diff passed
    bad = _model_with_output_name(tmp_path / "bad.onnx", raw)
    good = _model_with_output_name(tmp_path / "good.onnx", b"y")
    says = "output 0 of the model has a name that is not UTF-8 text"
    one_line(mgediff(bad, bad, "-d", "#rand(0,1)"), says)
    one_line(mgediff(good, bad, "-d", "#rand(0,1)"), says)
    assert mgerun(good, "-d", "#rand(0,1)", "--iter", "1", "--io-dump", tmp_path / "dump").code == 0
    line = one_line(mgediff(tmp_path / "dump", bad), says)
    assert line.startswith(f"mgediff: error: {bad} (model): ")


def _dump_with_node_names(bundle: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Two io dumps of the bundle whose index names every node with lone surrogates; B's output moved by 0.5."""
    import hashlib

    from onnx import TensorProto, numpy_helper

    a, b = tmp_path / "a", tmp_path / "b"
    run_ok("mgerun", bundle, "--iter", "1", "-q", "--io-dump", a)
    index = a / "test_data_set_0" / "index.json"
    document = json.loads(index.read_text(encoding="utf-8"))
    for node in document["nodes"]:
        node["name"] += "\udcff\ud800"
        node["op_type"] += "\udcfe"
    index.write_text(json.dumps(document), encoding="utf-8")  # ensure_ascii: "\udcff" escapes, as a crafter writes
    import shutil

    shutil.copytree(a, b)
    index = b / "test_data_set_0" / "index.json"
    document = json.loads(index.read_text(encoding="utf-8"))
    entry = document["tensors"][-1]
    proto = TensorProto()
    proto.ParseFromString((b / "test_data_set_0" / entry["file"]).read_bytes())
    data = numpy_helper.from_array(numpy_helper.to_array(proto) + 0.5, entry["name"]).SerializeToString()
    (b / "test_data_set_0" / entry["file"]).write_bytes(data)
    entry.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    index.write_text(json.dumps(document), encoding="utf-8")
    return a, b


def test_mgediff_report_of_dumps_whose_names_hold_lone_surrogates_is_strict_json(bundle, tmp_path, mgediff):
    from tests.report.test_records import strict_json

    a, b = _dump_with_node_names(bundle, tmp_path)
    report = tmp_path / "d.json"
    result = mgediff(a, b, "--report-json", report)
    assert result.code == 1, result.err  # B diverges, at the node whose name holds them
    document = strict_json(report.read_bytes())  # no "\udcff" escape a strict parser rejects
    text = json.dumps(document)
    assert "softmax\\\\xff\\\\ud800" in text, text  # named, its bytes recoverable
    result = mgediff(a, b, "--report-json", "-")
    assert result.code == 1 and strict_json(result.out)["exit_code"] == 1


@pytest.mark.parametrize("value", ["１e-3", "prob:１", "1e" + "9" * 60])
def test_a_bound_in_full_width_digits_is_refused(value, bundle, mgerun):
    one_line(mgerun(bundle, "--maxerr", value), "give a number (e.g. 1e-4) or OUTPUT:number")


def test_a_stopped_worker_fails_its_bundle_and_the_run_goes_on(bundle, tmp_path):
    zoo, scratch = tmp_path / "zoo", tmp_path / "tmp"
    zoo.mkdir(), scratch.mkdir()
    for k in range(60):
        (zoo / f"b{k}.mgetest").write_bytes(bundle.read_bytes())
    env = {**os.environ, "TMPDIR": str(scratch)}
    child = subprocess.Popen(
        [BIN / "mgerun", zoo, "-j", "2", "--silent"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not list(scratch.glob("mgerun-jobs-*/worker-*.tmp/mgerun-*")):  # a worker is inside a bundle
            assert child.poll() is None and time.monotonic() < deadline, "the run ended before a worker started"
            time.sleep(0.02)
        [worker, *_] = _worker_pids(child.pid)
        os.kill(worker, 19)  # SIGSTOP: the parent waited on it forever
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 1, out + err
    assert "its worker process was stopped (SIGSTOP)" in out + err
    assert "60 bundle(s): 59 passed" in out + err


def test_a_report_of_a_bundle_whose_spec_holds_lone_surrogates_is_strict_json(bundle, tmp_path, mgerun):
    def surrogates(names, manifest, members):
        manifest["test_cases"][0]["spec"] = "#rand(0,1)\ud800x"
        manifest["test_cases"][0]["origin"] = "-d \udcff"

    odd = rewrite_bundle(bundle, tmp_path / "odd.mgetest", surrogates)
    report = tmp_path / "r.json"
    assert mgerun(odd, "--iter", "1", "--report-json", report, "--junit-xml", tmp_path / "j.xml").code == 0
    text = report.read_text(encoding="utf-8")  # strict UTF-8: a lone surrogate cannot be encoded
    case = json.loads(text)["bundles"][0]["test_cases"][0]
    assert case["spec"] == "#rand(0,1)\\ud800x" and case["origin"] == "-d \\xff"  # shown as text, not as escapes


def test_a_bundle_name_with_an_escape_sequence_reaches_the_progress_bar_as_text(monkeypatch):
    import io

    from mgedump.cli.output import ProgressBar

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    bar = ProgressBar()
    for done in range(1, 11):
        bar("evil\x1b[2J\x1b]0;title\x07.mgetest", done, 10)  # --duration on a terminal, a crafted file name
    shown = screen.getvalue()
    assert "evil" in shown and "\\x1b[2J" in shown
    assert "\x1b[2J" not in shown and "\x07" not in shown
