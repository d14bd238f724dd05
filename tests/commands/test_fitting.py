"""Several proven variants in one bundle, and ``mgerun --fitting`` choosing among them on this machine: the bundle
round-trips, a variant that fails is never chosen, ``--config`` reproduces the choice, the budget holds, a bundle of
one model fits too, and the same command writes the same bytes."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.support import SAMPLES, bundle_manifest, packed_once

CASES = ["-d", f"@{SAMPLES / 'testcases.txt'}"]


@pytest.fixture(scope="module")
def variants():
    """samples/cnn.onnx with every variant it can have (int8 static misses 0.05 and is left out); packed once per
    test run: read only."""
    return packed_once("cnn.onnx", *CASES, "--variants", "fp32,ioc16,io16xc32", "--maxerr", "0.05")


def _report(path) -> dict:
    return json.loads(path.read_text())


def test_a_bundle_of_variants_round_trips(variants, tmp_path, mgerun):
    manifest = bundle_manifest(variants)
    assert manifest["format_version"] == 2
    assert [v["name"] for v in manifest["variants"]] == ["fp32", "ioc16", "io16xc32"]
    for variant in manifest["variants"]:
        assert variant["model"]["member"] == f"variants/{variant['name']}/model.onnx"
        assert set(variant["certified"]) == {"prob"} and 0 <= variant["certified"]["prob"] <= 0.05
    assert manifest["variants"][1]["float16"]["mode"] == "ioc16" and manifest["variants"][1]["options"]["precision"]
    assert manifest["inputs"][0]["dtype"] == "float32"  # the test cases stored once, as the model as given takes them
    ran = mgerun(variants, "--iter", "1", "--report-json", tmp_path / "r.json")
    assert ran.code == 0, ran.err
    assert "3 runs of 1 bundle(s): 3 passed, 0 failed, 0 could not run" in ran.out + ran.err
    bundles = _report(tmp_path / "r.json")["bundles"]
    assert [(b["name"], b["variant"], b["passed"]) for b in bundles] == [
        ("cnn[fp32]", "fp32", True),
        ("cnn[ioc16]", "ioc16", True),
        ("cnn[io16xc32]", "io16xc32", True),
    ]
    one = mgerun(variants, "--variant", "ioc16", "--iter", "1", "--report-json", tmp_path / "one.json")
    assert one.code == 0 and [b["variant"] for b in _report(tmp_path / "one.json")["bundles"]] == ["ioc16"]
    missing = mgerun(variants, "--variant", "int8", "--iter", "1")
    assert missing.code == 2 and "has no variant 'int8': it holds fp32, ioc16, io16xc32" in missing.err


def test_fitting_chooses_a_passing_variant_and_config_reproduces_it(variants, tmp_path, mgerun):
    choice = tmp_path / "c.json"
    fitted = mgerun(
        variants, "--fitting", "--fitting-budget", "4", "--fitting-out", choice, "--iter", "2",
        "--report-json", tmp_path / "r.json",
    )  # fmt: skip
    assert fitted.code == 0, fitted.err
    chosen = json.loads(choice.read_text())
    assert chosen["format"] == "mgedump-fitting" and chosen["variant"] in ("fp32", "ioc16", "io16xc32")
    assert chosen["provider"] == "CPUExecutionProvider" and chosen["graph_opt"] in ("basic", "extended", "all")
    fitting = _report(tmp_path / "r.json")["bundles"][0]["fitting"]
    assert fitting["chosen"] == chosen and [v["passed"] for v in fitting["variants"]] == [True, True, True]
    # the budget as given; that it bounds the search is checked on a clock that only runs move, whatever the
    # machine's load (tests/measure/test_fitting.py)
    assert fitting["budget_s"] == 4 and fitting["seconds"] > 0
    assert "fitting: chose" in fitted.out and "speed vs fp32" in fitted.out
    again = mgerun(variants, "--config", choice, "--iter", "2", "--report-json", tmp_path / "again.json")
    assert again.code == 0, again.err
    (ran,) = _report(tmp_path / "again.json")["bundles"]
    assert ran["variant"] == chosen["variant"] and ran["session"]["threads"] == chosen["threads"]
    assert ran["session"]["graph_opt"] == chosen["graph_opt"]
    assert ran["session"]["execution_mode"] == chosen["execution_mode"]


def test_a_variant_that_fails_is_never_chosen(variants, tmp_path, mgerun):
    """A tighter bound at run time fails the float16 variants: fitting chooses fp32, whatever their speed."""
    fitted = mgerun(
        variants, "--fitting", "--fitting-budget", "2", "--maxerr", "1e-7", "--fitting-out", tmp_path / "c.json"
    )
    assert fitted.code == 0, fitted.err
    assert json.loads((tmp_path / "c.json").read_text())["variant"] == "fp32"
    assert "variant ioc16: FAILED" in fitted.out and "variant fp32: passed" in fitted.out


def test_no_passing_variant_exits_1_and_writes_no_choice(tmp_path, mgedump, mgerun):
    out = tmp_path / "b.mgetest"
    assert (
        mgedump(SAMPLES / "cnn.onnx", *CASES, "--variants", "ioc16,io16xc32", "--maxerr", "0.05", "-o", out).code == 0
    )
    fitted = mgerun(out, "--fitting", "--fitting-budget", "2", "--maxerr", "1e-9", "--fitting-out", tmp_path / "c.json")
    assert fitted.code == 1 and not (tmp_path / "c.json").exists()
    assert "no variant passed its checks" in fitted.out
    lines = fitted.out.splitlines()
    failed = lines.index("variant ioc16, as it failed:")  # its failures, labelled, after the fitting's lines
    assert lines[failed - 1].startswith("fitting: no variant passed") and "FAILED" in "\n".join(lines[failed + 1 :])


def test_a_bundle_of_one_model_fits_too(tmp_path, mgedump, mgerun):
    out = tmp_path / "one.mgetest"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", out).code == 0
    assert bundle_manifest(out)["format_version"] == 1
    fitted = mgerun(out, "--fitting", "--fitting-budget", "1", "--fitting-out", tmp_path / "c.json")
    assert fitted.code == 0, fitted.err
    assert json.loads((tmp_path / "c.json").read_text())["variant"] == "fp32"


def test_the_same_command_writes_the_same_bundle(variants, tmp_path, mgedump):
    again = tmp_path / "again.mgetest"
    done = mgedump(SAMPLES / "cnn.onnx", *CASES, "--variants", "fp32,ioc16,io16xc32", "--maxerr", "0.05", "-o", again)
    assert done.code == 0 and again.read_bytes() == variants.read_bytes()


def test_a_variant_that_misses_maxerr_is_left_out_with_its_reason(tmp_path, mgedump):
    out = tmp_path / "b.mgetest"
    # io16xc32 stores the outputs float16: their rounding alone misses 1e-6
    done = mgedump(SAMPLES / "cnn.onnx", *CASES, "--variants", "fp32,io16xc32", "--maxerr", "1e-6", "-o", out)
    assert done.code == 0, done.err
    manifest = bundle_manifest(out)
    assert [v["name"] for v in manifest["variants"]] == ["fp32"]
    (left,) = manifest["left_out"]
    assert left["name"] == "io16xc32" and "misses" in left["reason"] and "variant io16xc32 left out" in done.err
    none = mgedump(
        SAMPLES / "cnn.onnx", *CASES, "--variants", "ioc16,io16xc32", "--maxerr", "1e-9", "-o", tmp_path / "n"
    )
    assert none.code == 2 and "no variant meets --maxerr" in none.err and not (tmp_path / "n").exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "cannot be read as a fitting choice"),
        ("[]", "not a fitting choice"),
        ('{"format": "mgedump-fitting", "version": 9}', "fitting choice version 9"),
        ('{"format": "mgedump-fitting", "version": 1, "variant": "fp32", "provider": "CPUExecutionProvider", '
         '"threads": 0, "graph_opt": "all", "execution_mode": "sequential"}', "its 'threads' is not valid"),
        ('{"format": "mgedump-fitting", "version": 1, "variant": ["x"], "provider": "CPUExecutionProvider", '
         '"threads": 1, "graph_opt": "all", "execution_mode": "sequential"}', "its 'variant' is not valid"),
    ],
)  # fmt: skip
def test_a_bad_config_is_one_line(text, message, variants, tmp_path, mgerun):
    config = tmp_path / "c.json"
    config.write_text(text)
    ran = mgerun(variants, "--config", config)
    assert ran.code == 2 and message in ran.err and len(ran.err.strip().splitlines()) == 1


def test_fitting_options_that_do_not_go_together(variants, tmp_path, mgerun):
    assert "--fitting-out applies to --fitting" in mgerun(variants, "--fitting-out", tmp_path / "c").err
    assert "--fitting chooses the variant" in mgerun(variants, "--fitting", "--variant", "fp32").err
    with_jobs = mgerun(variants, "--fitting", "--jobs", "2")
    assert with_jobs.code == 2 and "alone on this machine; run it without -j" in with_jobs.err


def test_from_code_pack_takes_variants_and_verify_fits(tmp_path):
    from mgedump import PackOptions, VerifyOptions, pack, verify

    out = tmp_path / "b.mgetest"
    result = pack(str(SAMPLES / "cnn.onnx"), out, PackOptions(cases=["#rand(0,1)"], maxerr=0.05, variants=["auto"]))
    names = [v.name for v in result.manifest.variants]
    assert names[:3] == ["fp32", "ioc16", "io16xc32"] and "variant fp32: certified err prob 0" in result.notes
    report = verify(str(out), VerifyOptions(fitting=True, fitting_budget_s=1, iters=1))
    assert (
        report.passed
        and report.fitting.chosen["variant"] in names
        and report.variant == report.fitting.chosen["variant"]
    )


_PEAK = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = child.stderr.read()
_, status, usage = os.wait4(child.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, err.decode(errors="replace")[-500:])
"""


def _peak_kib(*args) -> int:
    """The peak memory of ``mgerun ARGS`` in a process of its own, spawned by a small Python (a child spawned by
    this large test process would start its peak at this one's)."""
    import subprocess
    import sys

    from tests.support import script

    done = subprocess.run(
        [sys.executable, "-c", _PEAK, script("mgerun"), *map(str, args)], capture_output=True, text=True, timeout=300
    )
    code, peak, err = done.stdout.split(" ", 2)
    assert code == "0", err
    return int(peak)


def test_fittings_peak_memory_is_at_most_twice_a_plain_runs(tmp_path):
    """Every candidate's session open through screening took 2.9 GiB on an 85 MB transformer (325 MiB plain): a
    session holds the weights, so screening holds one session at a time, and the final rounds the finalists' only.
    A MatMul chain of 12 MiB of weights: about 1.3x here (1.5x with each variant's best kept open through
    screening), and 2.7x with all 13 sessions open. Its weights stay
    under the size whose hash runs beside the model's loading, so the plain run's own peak does not move with the
    machine's load (with 24 MiB it moved between 102 and 120 MiB, and the margin with it)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    dim, inits, nodes, last = 1024, [], [], "x"
    for k in range(3):
        inits.append(numpy_helper.from_array((rng.standard_normal((dim, dim)) / 32).astype(np.float32), f"w{k}"))
        nodes.append(helper.make_node("MatMul", [last, f"w{k}"], [f"m{k}"]))
        last = f"m{k}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, dim])],
        [helper.make_tensor_value_info(last, TensorProto.FLOAT, [1, dim])], inits,
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "chain.onnx"))
    from tests.support import run_ok

    bundle = tmp_path / "chain.mgetest"
    run_ok("mgedump", tmp_path / "chain.onnx", "-d", "#rand(0,1)", "-o", bundle, "-q")
    plain = _peak_kib(bundle, "--iter", "1")
    fitting = _peak_kib(bundle, "--fitting", "--fitting-budget", "4", "--iter", "1")
    assert fitting <= 2 * plain, f"fitting {fitting >> 10} MiB, plain {plain >> 10} MiB"


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_a_variant_far_slower_in_screening_takes_no_session_into_the_final_rounds(tmp_path):
    """Real sessions: a variant a hundred times slower than the fastest candidate in screening cannot win, so it
    is no finalist, and its session, closed when its screening turn ended, is not opened again; screening holds one
    session at a time, the final rounds the finalists' only (onnxruntime's defaults among them)."""
    import weakref

    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from mgedump.commands.fitting import DEFAULTS, _Runs
    from mgedump.measure.fitting import Candidate, fit, process_memory
    from mgedump.model.runtime import open_runner
    from mgedump.model.session import SessionSettings

    weight = numpy_helper.from_array(np.eye(256, dtype=np.float32) * 0.5, "w")
    for name, depth in (("fast", 1), ("slow", 100)):  # one MatMul, or a hundred in a chain on the same weights
        nodes = [helper.make_node("MatMul", ["x" if k == 0 else f"m{k - 1}", "w"], [f"m{k}"]) for k in range(depth)]
        graph = helper.make_graph(
            nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
            [helper.make_tensor_value_info(f"m{depth - 1}", TensorProto.FLOAT, [64, 256])], [weight],
        )  # fmt: skip
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / f"{name}.onnx"))
    feeds = {"x": np.ones((64, 256), np.float32)}
    runners: list[weakref.ref] = []

    def starter(name: str, settings: SessionSettings):
        def start():
            runner = open_runner(str(tmp_path / f"{name}.onnx"), settings)
            runners.append(weakref.ref(runner))
            return _Runs(runner, feeds)

        return start

    one = SessionSettings("CPUExecutionProvider", threads=1, graph_opt="all", execution_mode="sequential")
    defaults = Candidate("fp32", 0, DEFAULTS, starter("fast", DEFAULTS), defaults=True)
    fp32 = Candidate("fp32", 0, one, starter("fast", one))
    slow = Candidate("int8", 2, one, starter("slow", one))
    open_at: dict[str, list[int]] = {"screening": [], "round": []}

    def progress(label: str, done: int, total: int) -> None:
        open_at["round" if "round" in label else "screening"].append(sum(ref() is not None for ref in runners))

    result = fit([fp32, slow, defaults], 3, progress=progress, memory=process_memory())
    assert slow.samples_ms and slow.median_ms > 10 * fp32.median_ms
    assert not slow.finalist and not slow.rounds_ms and defaults.finalist and fp32.finalist
    assert result.rounds >= 1 and result.chosen in (fp32, defaults)
    assert open_at["screening"] == [0, 0, 0]  # each closed when its turn ended
    assert max(open_at["round"]) == 2 and len(runners) == 3 + 2  # the two finalists opened again, not the slow one
    assert not any(ref() is not None for ref in runners)
    if process_memory() is not None:  # measured in the turn that opened each session
        assert all(c.held_mib is not None and c.peak_mib is not None for c in (defaults, fp32, slow))


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the resident memory from /proc")
def test_a_candidate_left_open_between_its_turns_holds_no_intermediate_tensors(tmp_path):
    """A layout detector with three variants took 3.3x a plain mgerun's peak under fitting: each finalist's session
    kept the memory of its largest run (the intermediate tensors in its arena) while the others ran. A model whose
    weights are nothing and whose intermediate tensors are 32 MiB each: after a candidate's turn, its open session
    holds what its arena's first region keeps (66 MiB here), not all it took (200 MiB)."""
    import onnx
    from onnx import TensorProto, helper

    from mgedump.base.limits import release_memory
    from mgedump.commands.fitting import _candidates
    from mgedump.options import VerifyOptions
    from tests.support import run_ok

    shape = helper.make_tensor("shape", TensorProto.INT64, [3], [128, 64, 1024])
    nodes = [
        helper.make_node("Expand", ["x", "shape"], ["big"]),
        helper.make_node("Relu", ["big"], ["r"]),
        helper.make_node("Mul", ["r", "big"], ["m"]),
        helper.make_node("ReduceMean", ["m"], ["y"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])], [shape],
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "wide.onnx"))
    bundle = tmp_path / "wide.mgetest"
    run_ok("mgedump", tmp_path / "wide.onnx", "-d", "#rand(-1,1)", "-o", bundle, "-q")
    candidates = _candidates(str(bundle), ["fp32"], VerifyOptions(), str(tmp_path))
    first, candidate = candidates[0], next(c for c in candidates if c.defaults)
    first.time(1, time.perf_counter)  # onnxruntime's code and thread pools in memory: what follows is the session's
    release_memory()
    before = _rss_mib()
    candidate.time(2, time.perf_counter)
    release_memory()
    grown = _rss_mib() - before
    assert candidate.error is None and candidate.open and len(candidate.samples_ms) == 2, candidate.error
    assert grown < 128, f"the open session holds {grown:.0f} MiB after its turn"


def test_config_says_what_it_applies_and_refuses_another_models_choice(variants, tmp_path, mgedump, mgerun):
    """The choice records the sha256 of the model it timed: a renamed copy runs it, another model's bundle is
    refused in one line (exit 2); a choice an older mgerun wrote (no sha256) still runs, saying what it cannot
    check."""
    choice = tmp_path / "c.json"
    fitted = mgerun(variants, "--fitting", "--fitting-budget", "1", "--fitting-out", choice, "--iter", "1")
    assert fitted.code == 0, fitted.err
    chosen = json.loads(choice.read_text())
    manifest = bundle_manifest(variants)
    (entry,) = [v for v in manifest["variants"] if v["name"] == chosen["variant"]]
    assert chosen["model_sha256"] == entry["model"]["sha256"]
    renamed = tmp_path / "deployed.mgetest"
    renamed.write_bytes(variants.read_bytes())
    again = mgerun(renamed, "--config", choice, "--iter", "1")
    assert again.code == 0, again.err
    settings = f"{chosen['provider'].removesuffix('ExecutionProvider')}, "
    assert (
        f"mgerun: note: --config {choice}: running variant {chosen['variant']} with {settings}" in again.err
        and f"its choice for {variants.name}" in again.err
    )
    assert "warning" not in again.err  # the same model under another name
    other = tmp_path / "gray.mgetest"
    assert mgedump(SAMPLES / "gray.onnx", "-d", "#rand(0,255)", "-o", other).code == 0
    refused = mgerun(other, "--config", choice, "--iter", "1")
    assert refused.code == 2 and len(refused.err.strip().splitlines()) == 1
    assert f"--config {choice} was chosen for another model ({variants.name}'s {chosen['variant']}, sha256 " in (
        refused.err
    )
    assert f"{other}'s is sha256 {bundle_manifest(other)['model']['sha256'][:12]}" in refused.err
    older = tmp_path / "older.json"
    older.write_text(json.dumps({k: v for k, v in chosen.items() if k != "model_sha256"}))
    old = mgerun(renamed, "--config", older, "--iter", "1")
    assert old.code == 0, old.err
    assert f"--config {older} records no model sha256 (an older mgerun wrote it)" in old.err
    assert f"was chosen for bundle {variants.name!r}, not 'deployed.mgetest'" in old.err


def test_fitting_prints_its_choice_before_the_chosen_run_and_labels_it(variants, tmp_path, mgerun):
    """The chosen variant's test cases follow the choice, under a line naming the variant and its settings (they
    came first, unlabelled); the finalists are marked, the chosen row too."""
    fitted = mgerun(variants, "--fitting", "--fitting-budget", "2", "--iter", "1", "--report-json", tmp_path / "r.json")
    assert fitted.code == 0, fitted.err
    fitting = _report(tmp_path / "r.json")["bundles"][0]["fitting"]
    chosen = fitting["chosen"]
    lines = fitted.out.splitlines()
    settings = ", ".join(
        [chosen["provider"].removesuffix("ExecutionProvider"), f"{chosen['threads'] or 'default'} thread(s)",
         chosen["graph_opt"], chosen["execution_mode"]]
    )  # fmt: skip
    label = f"the chosen {chosen['variant']} ({settings}), verified and timed on every test case:"
    choice = next(k for k, line in enumerate(lines) if line.startswith("fitting: chose"))
    assert lines[choice + 1] == label and lines[choice + 2].startswith("test case 0 ")
    assert not any(line.startswith("test case ") or "AssertEqual" in line for line in lines[:choice])
    assert lines[0] == "variant fp32: passed" and "timed in" in lines[3]
    finalists = [row for row in fitting["rows"] if row["finalist"]]
    # onnxruntime's defaults, and the best settings of each variant that can still win (one far slower cannot)
    assert 2 <= len(finalists) <= 4 and sum(row["threads"] is None for row in finalists) == 1
    tuned = [row["variant"] for row in finalists if row["threads"] is not None]
    assert len(tuned) == len(set(tuned)) >= 1
    assert fitting["rows"][: len(finalists)] == finalists  # listed first
    assert sum(line.endswith("final rounds, chosen") for line in lines) == 1
    assert sum(line.endswith("  final rounds") for line in lines) == len(finalists) - 1
    if fitting["why"]:
        assert fitting["why"].startswith(("the simpler ", "onnxruntime's defaults were kept: "))
        if "final rounds (" in fitting["why"]:  # it counts the rounds the choice line counts
            assert f" of {fitting['rounds']} final rounds (" in fitting["why"]
            assert f"{fitting['rounds']} final round(s) in" in lines[choice]


def test_speed_vs_fp32_is_against_float32s_finalist_not_a_lucky_screening_turn():
    """A float32 screening turn of 5 runs that happened to be quick was the base (the chosen float32 read 0.82x):
    the base is float32's finalist, timed over the final rounds."""
    from mgedump.commands.fitting import FittingResult, VariantCheck
    from mgedump.measure.fitting import Candidate, Fitting
    from mgedump.model.session import SessionSettings
    from mgedump.report.fitting import FittingRecord

    def timed(variant, threads, ms, runs, finalist):
        settings = SessionSettings(
            "CPUExecutionProvider", threads=threads, graph_opt="all", execution_mode="sequential"
        )
        return Candidate(variant, 0 if variant == "fp32" else 2, settings, start=lambda: lambda: None,
                         samples_ms=[ms] * runs, finalist=finalist)  # fmt: skip

    fp32 = timed("fp32", 1, 10.0, 60, True)
    int8 = timed("int8", 1, 12.5, 60, True)
    lucky = timed("fp32", 2, 8.2, 5, False)
    found = Fitting([fp32, int8, lucky], fp32, rounds=11)
    result = FittingResult("m.mgetest", [VariantCheck("fp32", True), VariantCheck("int8", True)], found, {})
    record = FittingRecord.of(result)
    assert [round(r.speedup, 3) for r in record.rows] == [1.0, 0.8, round(10 / 8.2, 3)]
    assert [r.cells(k)[-1] for k, r in enumerate(record.rows, 1)] == [
        "final rounds, chosen",
        "final rounds",
        "screening",
    ]
    assert [r.cells(k)[5] for k, r in enumerate(record.rows, 1)] == ["1.00x", "0.80x", "1.22x"]
    chosen = {"variant": "fp32", **fp32.settings.to_json()}
    again = FittingRecord.from_json({**record.to_json(), "chosen": chosen})
    assert [r.finalist for r in again.rows] == [True, True, False] and [r.chosen for r in again.rows] == [
        True, False, False
    ]  # fmt: skip
