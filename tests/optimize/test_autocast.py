"""The mixed-precision search: on each sample that reproduces a float16 failure, the right nodes stay float32 (and
the output says which and why), the bundle verifies, and what cannot pass is refused without a useless hint."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mgedump.base.bounds import Bounds
from mgedump.optimize import autocast, autocast_trials
from tests.support import bundle_manifest, good_models, sample

FLAGS = ["--optimize-for-inference", "--maxerr", "1e-2"]


def _pack(mgedump, tmp_path, name, mode, *extra):
    model = sample(name)
    out = tmp_path / f"{mode}.mgetest"
    result = mgedump(model.path, "-d", model.spec, "-d", model.spec, *FLAGS, f"--enable-{mode}", *extra, "-o", out)
    return result, out


def _kept(out) -> dict[str, str]:
    return {e["node"]: e["why"] for e in bundle_manifest(out)["float16"]["kept_float32"]}


@pytest.mark.parametrize("mode", ["ioc16", "io16xc32"])
@pytest.mark.parametrize("model", good_models("float16"), ids=lambda m: m.id)
def test_every_float16_sample_packs_and_verifies(model, mode, tmp_path, mgedump, mgerun):
    result, out = _pack(mgedump, tmp_path, model.file, mode)
    assert result.code == 0, result.err
    assert bundle_manifest(out)["float16"]["mode"] == mode
    checked = mgerun(out, "--iter", "1")
    assert checked.code == 0, checked.out + checked.err


@pytest.mark.parametrize("mode", ["ioc16", "io16xc32"])
def test_a_sum_beyond_float16_stays_float32(mode, tmp_path, mgedump):
    result, out = _pack(mgedump, tmp_path, "float16/layernorm_sum.onnx", mode)
    assert result.code == 0, result.err
    kept = _kept(out)
    assert list(kept) == ["ln/sum"] and "beyond float16's 65504" in kept["ln/sum"]
    assert "node 'ln/sum' (ReduceSum): float32 values reach" in result.err


def test_an_overflowing_chain_keeps_the_nodes_beyond_range(tmp_path, mgedump):
    result, out = _pack(mgedump, tmp_path, "float16/overflow_chain.onnx", "io16xc32")
    assert result.code == 0, result.err
    assert set(_kept(out)) == {"amplify", "relu"}


def test_what_only_a_comparison_finds(tmp_path, mgedump):
    """The quiet signal's reciprocal square root: no float32 value leaves float16's range; the diff finds the node,
    and the nodes that feed it (float16 zeroes the variance upstream) stay float32 with it."""
    result, out = _pack(mgedump, tmp_path, "float16/rsqrt_quiet.onnx", "io16xc32")
    assert result.code == 0, result.err
    kept = _kept(out)
    assert "introduces err inf" in kept["norm/rsqrt"] and "float16 overflow" in kept["norm/rsqrt"]
    # the region above it, level by level: each node feeds the one below it, which amplifies its float16 rounding
    assert "feeds 'norm/rsqrt' (Reciprocal)" in kept["norm/sqrt"]
    assert "feeds 'norm/sqrt' (Sqrt)" in kept["norm/add_eps"] and "feeds 'norm/add_eps'" in kept["norm/variance"]
    assert "head" not in kept and "softmax" not in kept  # they only carry the error on


def test_an_epsilon_weight_stays_float32_in_ioc16(tmp_path, mgedump):
    result, out = _pack(mgedump, tmp_path, "float16/rsqrt_quiet.onnx", "ioc16")
    assert result.code == 0, result.err
    weights = {e["weight"]: e["why"] for e in bundle_manifest(out)["float16"]["weights_float32"]}
    assert "float16 stores them as zero" in weights["norm_eps"]


def test_fp32_nodes_forces_nodes_float32(tmp_path, mgedump):
    result, out = _pack(mgedump, tmp_path, "cnn.onnx", "io16xc32", "--fp32-nodes", "Softmax,conv*")
    assert result.code == 0, result.err
    kept = _kept(out)
    assert kept == {"softmax": "--fp32-nodes Softmax", "conv1": "--fp32-nodes conv*", "conv2": "--fp32-nodes conv*"}


def test_fp32_nodes_needs_a_float16_mode(tmp_path, mgedump):
    model = sample("cnn.onnx")
    result = mgedump(
        model.path, "-d", model.spec, "--optimize-for-inference", "--fp32-nodes", "Conv", "-o", tmp_path / "o"
    )
    assert result.code == 2 and "--fp32-nodes keeps nodes float in a float16 or int8 mode" in result.err


def test_a_maxerr_below_float16_output_rounding_is_refused_with_a_hint(tmp_path, mgedump):
    model = sample("cnn.onnx")
    result = mgedump(
        model.path,
        "-d",
        "#randn(0,1)",
        "--optimize-for-inference",
        "--enable-ioc16",
        "--maxerr",
        "1e-6",
        "-o",
        tmp_path / "o",
    )
    assert result.code == 2 and "rounding them to float16 alone gives that error" in result.err
    assert "(hint: --maxerr" in result.err  # the error is small against the outputs: a hint is useful


def test_a_search_that_fails_names_the_first_divergence_and_gives_no_hint(tmp_path, mgedump, monkeypatch):
    """No candidate passes (here: the whole model float32 is made to miss too): the refusal names the output, the
    floor, and the first divergence, whether its node was float32, and no --maxerr hint for a destroyed output."""
    monkeypatch.setattr(autocast, "MAX_RUNS", 1)
    monkeypatch.setattr(autocast, "ALL_WHY", "")
    real = autocast_trials.Search.evaluate

    def every_node_misses(self, kept, keep_io=None, label=""):
        trial = real(self, kept, keep_io, label)
        if "every node" in label and keep_io is None:
            trial.errs = [dict.fromkeys(e, float("inf")) for e in trial.errs]
        return trial

    monkeypatch.setattr(autocast_trials.Search, "evaluate", every_node_misses)
    result, out = _pack(mgedump, tmp_path, "float16/rsqrt_quiet.onnx", "io16xc32")
    assert result.code == 2 and not out.exists()
    assert "output 'prob' misses --maxerr 0.01 (err inf, test case 0)" in result.err
    assert "even with every node float32: the floor is float16 storage at the model's inputs and outputs" in result.err
    assert "first divergence on test case 0: node 'norm/rsqrt' (Reciprocal) (float32 already)" in result.err
    assert "float16 overflow" in result.err
    assert "--maxerr" not in result.err.split("hint:")[1].split("--keep-io-types")[0]
    assert "--keep-io-types would" in result.err


def test_fp32_nodes_match_inside_subgraphs(tmp_path, mgedump):
    result, out = _pack(mgedump, tmp_path, "float16/if_float.onnx", "io16xc32", "--fp32-nodes", "then/*")
    assert result.code == 0, result.err
    assert _kept(out) == {"then/matmul": "--fp32-nodes then/*", "then/tanh": "--fp32-nodes then/*"}


def test_a_fp32_nodes_pattern_that_matches_nothing_is_refused(tmp_path, mgedump):
    result, out = _pack(mgedump, tmp_path, "cnn.onnx", "ioc16", "--fp32-nodes", "Softmax,cnov*")
    assert result.code == 2 and not out.exists()
    assert "--fp32-nodes 'cnov*' matches no node" in result.err and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1


@pytest.mark.parametrize("mode", ["ioc16", "io16xc32"])
def test_a_quantized_model_is_refused_by_float16(mode, tmp_path, mgedump):
    import numpy as np
    import onnxruntime as ort

    from mgedump.optimize.quantize import quantize_int8

    model = sample("int8/mild_outlier.onnx")
    session = ort.InferenceSession(str(model.path), providers=["CPUExecutionProvider"])
    cases = [{"x": np.random.default_rng(0).random((1, 32), dtype=np.float32)}]
    quantized = tmp_path / "dynamic.onnx"
    quantize_int8(
        str(model.path),
        str(quantized),
        test_inputs=cases,
        expected=[session.run(None, c) for c in cases],
        bounds=Bounds(maxerr=1.0),
        mode="dynamic",
        scratch=str(tmp_path),
    )
    out = tmp_path / "o.mgetest"
    result = mgedump(quantized, "-d", model.spec, *FLAGS, f"--enable-{mode}", "-o", out)
    assert result.code == 2 and not out.exists()
    assert "the model is quantized already (DynamicQuantizeLinear, MatMulInteger)" in result.err


@pytest.mark.parametrize("mode", ["ioc16", "io16xc32"])
def test_a_candidate_that_crashes_onnxruntime_is_a_refusal(mode, tmp_path, mgedump, monkeypatch):
    """The child that opens each candidate dies by SIGSEGV (as onnxruntime can): mgedump survives and refuses."""
    from mgedump.optimize import isolate

    line = "    job = json.loads(line)\n"  # every plain run: not the reference, which runs with every tensor exposed
    crash = line + "    if 'call' not in job:\n        os.kill(os.getpid(), signal.SIGSEGV)\n"
    monkeypatch.setattr(isolate, "_CHILD", "import os, signal\n" + isolate._CHILD.replace(line, crash))
    result, out = _pack(mgedump, tmp_path, "cnn.onnx", mode)
    assert result.code == 2 and not out.exists()
    assert (
        f"--enable-{mode}, candidate 1 (" in result.err
        and "onnxruntime crashes (SIGSEGV) creating a session" in result.err
    )
    assert "never bundled" in result.err and "Traceback" not in result.err


def test_the_search_converges_in_few_runs_and_says_each(tmp_path, mgedump):
    """The culprit first, with the whole region above it, then the depth of that region bisected: a handful of
    candidate runs, each one line with -v."""
    result, out = _pack(mgedump, tmp_path, "float16/rsqrt_quiet.onnx", "io16xc32", "-v")
    assert result.code == 0, result.err
    runs = [line for line in result.err.splitlines() if "io16xc32 search run" in line]
    assert 2 <= len(runs) <= autocast.MAX_RUNS
    assert "search run 1 (the nodes the data decides on kept float32): 0 node(s) kept float32; worst err inf" in runs[0]
    assert "1 of 1 culprit(s), whole regions" in runs[1]
    assert bundle_manifest(out)["float16"]["search_rounds"] == len(runs)


@pytest.mark.parametrize("mode", ["ioc16", "io16xc32"])
def test_keep_io_types_removes_the_output_rounding_floor(mode, tmp_path, mgedump, mgerun):
    model = sample("cnn.onnx")
    base = ["-d", "#randn(0,1)", "--optimize-for-inference", f"--enable-{mode}", "--maxerr", "2e-5"]
    floor = mgedump(model.path, *base, "-o", tmp_path / "f.mgetest")
    assert floor.code == 2 and "rounding them to float16 alone gives that error" in floor.err
    assert "where float16 values are" in floor.err and "--keep-io-types would pass (err " in floor.err
    out = tmp_path / "k.mgetest"
    kept = mgedump(model.path, *base[:-1], "1e-3", "--keep-io-types", "-o", out)
    assert kept.code == 0, kept.err
    manifest = bundle_manifest(out)
    assert "keep-io-types" in manifest["optimizations"]
    assert manifest["inputs"][0]["dtype"] == "float32" and manifest["outputs"][0]["dtype"] == "float32"
    assert mgerun(out, "--iter", "1").code == 0


def test_keep_io_types_needs_a_float16_mode(tmp_path, mgedump):
    model = sample("cnn.onnx")
    result = mgedump(model.path, "-d", model.spec, "--keep-io-types", "-o", tmp_path / "o")
    assert result.code == 2 and "--keep-io-types keeps a float16 model's inputs and outputs float32" in result.err


def test_the_pack_says_what_the_user_sees_and_what_it_costs(tmp_path, mgedump):
    """Beside the certified error: the end-to-end error on the inputs as given, the aim below --maxerr, the Casts;
    and for io16xc32 its latency against float32 on this CPU, so nobody picks it for speed by mistake."""
    result, _ = _pack(mgedump, tmp_path, "cnn.onnx", "io16xc32")
    assert result.code == 0, result.err
    assert "io16xc32: aimed at 0.005 (--maxerr 0.01 less the 50% --float16-margin" in result.err
    assert re.search(r"io16xc32: \d+ Cast\(s\) in the model, 0 of them on weights", result.err)
    assert re.search(r"io16xc32: \d+\.\d\dx the float32 model's latency on this CPU", result.err)
    end = re.search(
        r"end to end: err ([0-9.e+-]+) \(output 'prob', test case \d\) against the model as given", result.err
    )
    certified = re.search(r"self-check worst err=([0-9.e+-]+)", result.err)
    assert end and certified and f"the bundle certifies {float(certified.group(1)):.3g}" in result.err
    assert float(end.group(1)) < 1e-2


@pytest.mark.parametrize("margin, ok", [("0", True), ("0.9", True), ("1", False), ("-0.1", False)])
def test_the_margin_is_a_fraction_for_a_float16_mode(margin, ok, tmp_path, mgedump):
    result, _ = _pack(mgedump, tmp_path, "cnn.onnx", "ioc16", "--float16-margin", margin)
    assert (result.code == 0) == ok, result.err
    if ok and margin != "0":
        assert f"aimed at {1e-2 * (1 - float(margin)):.3g}" in result.err
    elif ok:
        assert "aimed at" not in result.err
    model = sample("cnn.onnx")
    plain = mgedump(model.path, "-d", model.spec, "--float16-margin", "0.4", "-o", tmp_path / "p.mgetest")
    assert plain.code == 2 and "--float16-margin applies to the float16 search" in plain.err


WIDE = ["-d", "#rand(0,1)"] * 4  # four test cases: one of them has a logit near zero, where float16 shows


def test_a_wide_reduction_keeps_its_producer_float32(tmp_path, mgedump, mgerun):
    """A Gemm sums 1024 float16-stored features into logits near 35 (each a small difference of large sums): keeping
    the Gemm float32 is not enough; its producer's output stays float32 too, and nothing more."""
    model = sample("float16/wide_logits.onnx")
    out = tmp_path / "w.mgetest"
    result = mgedump(model.path, *WIDE, *FLAGS, "--enable-io16xc32", "-o", out)
    assert result.code == 0, result.err
    kept = _kept(out)
    assert {"fc", "act"} <= set(kept) <= {"fc", "act", "embed"}  # the region above the Gemm, as deep as the aim needs
    assert kept["fc"].startswith("introduces err") and "feeds 'fc' (Gemm), which amplifies" in kept["act"]
    narrow = mgedump(model.path, *WIDE, *FLAGS, "--enable-io16xc32", "--float16-margin", "0.3", "-o", out)
    assert narrow.code == 0 and set(_kept(out)) == {"fc", "act"}  # at 0.007, the producer alone does
    assert mgerun(out, "--iter", "1").code == 0


def test_the_float16_floor_is_named_with_the_io_choice_that_passes(tmp_path, mgedump):
    """Below the outputs' own float16 rounding: refused at once, naming the output's largest value and float16's
    spacing there, the wide reduction's float16 inputs, and --keep-io-types measured to pass; which then packs."""
    model = sample("float16/wide_logits.onnx")
    base = [model.path, *WIDE, "--optimize-for-inference", "--enable-io16xc32", "--maxerr", "1e-4"]
    refused = mgedump(*base, "-o", tmp_path / "r.mgetest")
    assert refused.code == 2 and len(refused.err.strip().splitlines()) == 1
    floor = re.search(r"the output reaches (\d+\.\d+), where float16 values are ([\d.]+) apart", refused.err)
    assert floor, refused.err
    assert float(floor[1]) > 16 and float(floor[2]) == float(np.spacing(np.float16(float(floor[1]))))
    assert "and its Gemm 'fc' sums 1024 inputs stored float16: their rounding alone gives err" in refused.err
    assert "--keep-io-types would pass (err 0 with every node float32)" in refused.err
    packed = mgedump(*base, "--keep-io-types", "-o", tmp_path / "k.mgetest")
    assert packed.code == 0, packed.err


def test_on_a_terminal_every_search_run_shows(tmp_path):
    """A float16 search is never silent on a terminal: one line per candidate run, without -v."""
    from tests.cli.test_status import _run_in_terminal

    model = sample("float16/rsqrt_quiet.onnx")
    args = [str(model.path), "-d", model.spec, *FLAGS, "--enable-io16xc32", "-o", str(tmp_path / "o.mgetest")]
    code, text = _run_in_terminal(args)
    assert code == 0, text
    runs = [line for line in text.splitlines() if "io16xc32 search run" in line]
    assert len(runs) >= 2 and all("node(s) kept float32; worst err" in line for line in runs)


def test_the_float16_search_is_complete_every_node_float32_is_its_last_candidate(tmp_path, mgedump, monkeypatch):
    """With no run left for the culprits (the budget spent by the first candidate), the search still ends on every
    node float32, which meets any bound float16 storage at the inputs and outputs allows: it packs, never "no set
    of nodes helps"."""
    monkeypatch.setattr(autocast, "MAX_RUNS", 1)
    runs = []
    real = autocast_trials.Search.evaluate

    def counted(self, kept, keep_io=None, label=""):
        trial = real(self, kept, keep_io, label)
        runs.append(label)
        return trial

    monkeypatch.setattr(autocast_trials.Search, "evaluate", counted)
    model, out = sample("float16/wide_logits.onnx"), tmp_path / "w16.mgetest"
    data = [arg for _ in range(4) for arg in ("-d", model.spec)]  # the docs' example: the first candidate misses
    result = mgedump(model.path, *data, *FLAGS, "--enable-io16xc32", "-o", out)
    assert result.code == 0, result.err
    assert len(runs) == 2 and runs[-1] == "every node float32"
    import onnx

    nodes = {n.name for n in onnx.load(str(model.path)).graph.node}
    assert set(_kept(out)) >= nodes & {"fc", "act", "embed"} and len(_kept(out)) >= 3


def test_values_beyond_float16_are_named_as_overflow_in_one_line(tmp_path, mgedump):
    """Activations beyond 65504 inside the model, and inputs beyond it: one error line each, naming the overflow,
    and no numpy warning on stderr."""
    inner = mgedump(sample("wide_mlp.onnx").path, "-d", "#rand(30000,60000)", "--optimize-for-inference",
                    "--enable-ioc16", "--maxerr", "1e-4", "-o", tmp_path / "a.mgetest")  # fmt: skip
    assert inner.code == 2 and len(inner.err.strip().splitlines()) == 1, inner.err
    assert "its MatMul 'fc2' reads values up to " in inner.err
    assert "beyond 65504, the largest float16 value: stored float16, they overflow" in inner.err
    inputs = mgedump(sample("dynamic_batch.onnx").path, "-d", "#rand(1e5,2e5,1,3,16,16)", "--optimize-for-inference",
                     "--enable-ioc16", "-o", tmp_path / "b.mgetest")  # fmt: skip
    assert inputs.code == 2 and len(inputs.err.strip().splitlines()) == 1, inputs.err
    assert "outside its range [-65504, 65504]" in inputs.err and "RuntimeWarning" not in inputs.err


@pytest.mark.parametrize("largest, said", [(34.7, "where float16 values are 0.03125 apart"),
                                           (1e5, "beyond 65504, the largest float16 value: it overflows float16")])  # fmt: skip
def test_how_far_an_output_reaches_against_float16(largest, said):
    from mgedump.optimize.autocast_refusal import _reach

    assert said in _reach(largest)
