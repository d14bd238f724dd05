"""Where a bundle was packed and where it runs: the software and hardware that decide its numbers.

onnxruntime picks its CPU kernels by the instruction sets the CPU has (AVX2,
AVX-512, VNNI, AMX on x86; dot product, fp16, i8mm, SVE on ARM), and each
release changes kernels and fusions, so the same model on the same inputs can
give other outputs on another machine. :func:`pack_environment` records what
matters, :func:`run_environment` adds which host ran when, and
:func:`differences` names, in short sentences, what differs between the two
that can change results.

The records are JSON-ready dicts::

    {
        "mgedump": "0.1.0",
        "onnxruntime": "1.32.0",                  # None when onnxruntime is not installed
        "onnxruntime_packages": ["onnxruntime"],  # the distributions that install it (onnxruntime-gpu, ...)
        "providers": ["CPUExecutionProvider"],    # onnxruntime's available execution providers, in its order
        "onnx": "1.23.2",                         # None when onnx is not installed
        "numpy": "2.4.6",
        "python": "3.11.7",
        "os": {"system": "Linux", "release": "6.8.0-45-generic"},
        "cpu": {
            "model": "AMD EPYC 7R13 Processor",   # None when the system does not say
            "arch": "x86_64",                     # x86_64 or aarch64 whatever the system calls them
            "flags": ["avx", "avx2", "f16c", "fma"],  # of KERNEL_FLAGS, sorted; None when unknown
            "flags_from": "/proc/cpuinfo",        # or "sysctl" (macOS), or None
            "logical_cpus": 16,
        },
    }

``pack_environment()`` is the same on every call on one machine: no time, no
host name. ``run_environment()`` adds ``host`` and ``timestamp`` (ISO 8601,
UTC). Nothing heavy is imported at module level; onnxruntime is imported when
an environment is taken (for its version and providers).
"""

from __future__ import annotations

import copy
import functools
import os
import platform
from datetime import datetime, timezone
from typing import Any

# The instruction-set flags that change which kernels onnxruntime runs, in Linux's /proc/cpuinfo names,
# each with the kinds of kernel it changes.
X86_FLAGS: dict[str, tuple[str, ...]] = {
    "avx": ("float",),
    "avx2": ("int8", "float"),
    "fma": ("float",),
    "f16c": ("float16",),
    "avx512f": ("float",),
    "avx512bw": ("int8",),
    "avx512vl": ("int8", "float"),
    "avx512_vnni": ("int8",),
    "avx512_bf16": ("bfloat16",),
    "avx512_fp16": ("float16",),
    "avx_vnni": ("int8",),
    "amx_tile": ("int8", "bfloat16"),
    "amx_int8": ("int8",),
    "amx_bf16": ("bfloat16",),
}
ARM_FLAGS: dict[str, tuple[str, ...]] = {
    "neon": ("int8", "float"),  # 32-bit ARM's name for Advanced SIMD
    "asimd": ("int8", "float"),
    "asimddp": ("int8",),  # dot product (SDOT/UDOT)
    "asimdhp": ("float16",),
    "fphp": ("float16",),
    "i8mm": ("int8",),
    "bf16": ("bfloat16",),
    "sve": ("int8", "float"),
    "sve2": ("int8", "float"),
    "sme": ("int8", "float"),
    "sme2": ("int8", "float"),
}
KERNEL_FLAGS: dict[str, tuple[str, ...]] = {**X86_FLAGS, **ARM_FLAGS}
_KINDS = ("int8", "float", "float16", "bfloat16")

# ARM's CPU implementer and part numbers (MIDR), for the model name that arm64's /proc/cpuinfo does not give
_ARM_IMPLEMENTERS = {
    0x41: "ARM",
    0x42: "Broadcom",
    0x43: "Cavium",
    0x48: "HiSilicon",
    0x4E: "NVIDIA",
    0x50: "APM",
    0x51: "Qualcomm",
    0x53: "Samsung",
    0x56: "Marvell",
    0x61: "Apple",
    0x69: "Intel",
    0xC0: "Ampere",
}
_ARM_PARTS = {
    (0x41, 0xD03): "Cortex-A53",
    (0x41, 0xD05): "Cortex-A55",
    (0x41, 0xD07): "Cortex-A57",
    (0x41, 0xD08): "Cortex-A72",
    (0x41, 0xD09): "Cortex-A73",
    (0x41, 0xD0A): "Cortex-A75",
    (0x41, 0xD0B): "Cortex-A76",
    (0x41, 0xD0C): "Neoverse-N1",
    (0x41, 0xD40): "Neoverse-V1",
    (0x41, 0xD41): "Cortex-A78",
    (0x41, 0xD44): "Cortex-X1",
    (0x41, 0xD46): "Cortex-A510",
    (0x41, 0xD47): "Cortex-A710",
    (0x41, 0xD48): "Cortex-X2",
    (0x41, 0xD49): "Neoverse-N2",
    (0x41, 0xD4A): "Neoverse-E1",
    (0x41, 0xD4F): "Neoverse-V2",
}
# macOS's sysctl names -> the Linux names above
_SYSCTL_ARM = {
    "hw.optional.AdvSIMD": ("asimd",),
    "hw.optional.neon": ("asimd",),
    "hw.optional.arm.FEAT_DotProd": ("asimddp",),
    "hw.optional.arm.FEAT_FP16": ("fphp", "asimdhp"),
    "hw.optional.arm.FEAT_I8MM": ("i8mm",),
    "hw.optional.arm.FEAT_BF16": ("bf16",),
    "hw.optional.arm.FEAT_SME": ("sme",),
    "hw.optional.arm.FEAT_SME2": ("sme2",),
}
_SYSCTL_X86 = {
    "AVX1.0": "avx",
    "AVX2": "avx2",
    "FMA": "fma",
    "F16C": "f16c",
    "AVX512F": "avx512f",
    "AVX512BW": "avx512bw",
    "AVX512VL": "avx512vl",
    "AVX512VNNI": "avx512_vnni",
}
_ARCHES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}
# the distributions that install the `onnxruntime` package (one at a time, or it is broken)
_ORT_DISTRIBUTIONS = (
    "onnxruntime",
    "onnxruntime-gpu",
    "onnxruntime-directml",
    "onnxruntime-openvino",
    "onnxruntime-qnn",
    "onnxruntime-rocm",
    "onnxruntime-migraphx",
    "onnxruntime-cann",
    "onnxruntime-training",
    "onnxruntime-silicon",
)


def pack_environment() -> dict[str, Any]:
    """The software and hardware of this machine that decide a model's numbers: deterministic, JSON-ready."""
    env: dict[str, Any] = {"mgedump": _mgedump_version()}
    env.update(copy.deepcopy(_runtime()))
    env["onnx"] = _version("onnx")
    env["numpy"] = _version("numpy")
    env["python"] = platform.python_version()
    env["os"] = {"system": platform.system(), "release": platform.release()}
    env["cpu"] = copy.deepcopy(_cpu())
    return env


def run_environment() -> dict[str, Any]:
    """:func:`pack_environment` plus the ``host`` that runs and the ``timestamp`` (ISO 8601, UTC) of now."""
    env = pack_environment()
    env["host"] = platform.node()
    env["timestamp"] = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return env


def differences(packed: dict[str, Any] | None, ran: dict[str, Any]) -> list[str]:
    """What differs between where a bundle was packed and where it ran that can change results, one sentence each.

    Compared: onnxruntime's version, the CPU's architecture, instruction sets (:data:`KERNEL_FLAGS`) and model,
    the operating system and numpy's major version. Not compared: the host, the time, the execution providers
    available (the run chooses its own), onnx's version (it does not run the model), Python's version and the
    OS release. A bundle that records no packing environment (packed before bundles recorded it) gives one
    sentence saying so.
    """
    if not packed:
        return ["packing environment unknown: the bundle does not record where it was packed"]
    found: list[str] = []
    p_ort, r_ort = packed.get("onnxruntime"), ran.get("onnxruntime")
    if p_ort and r_ort and p_ort != r_ort:
        found.append(f"packed with onnxruntime {p_ort}, run with {r_ort}")
    p_cpu, r_cpu = packed.get("cpu") or {}, ran.get("cpu") or {}
    p_arch, r_arch = p_cpu.get("arch"), r_cpu.get("arch")
    if p_arch and r_arch and p_arch != r_arch:
        found.append(f"packed on {p_arch}, run on {r_arch}: every kernel differs")
    else:
        flags = _flag_difference(p_arch or r_arch, p_cpu.get("flags"), r_cpu.get("flags"))
        if flags:
            found.append(flags)
        p_model, r_model = p_cpu.get("model"), r_cpu.get("model")
        if p_model and r_model and p_model != r_model:
            found.append(f"packed on CPU '{p_model}', run on '{r_model}'")
    p_os, r_os = (packed.get("os") or {}).get("system"), (ran.get("os") or {}).get("system")
    if p_os and r_os and p_os != r_os:
        found.append(f"packed on {p_os}, run on {r_os}")
    p_np, r_np = packed.get("numpy"), ran.get("numpy")
    if p_np and r_np and p_np.split(".")[0] != r_np.split(".")[0]:
        found.append(f"packed with numpy {p_np}, run with {r_np}")
    return found


def summary(env: dict[str, Any]) -> str:
    """One line naming the machine, e.g. ``onnxruntime 1.32.0 on AMD EPYC 7R13 (x86_64, AVX2), Linux 6.8.0``."""
    cpu = env.get("cpu") or {}
    arch = cpu.get("arch") or "unknown arch"
    flags = cpu.get("flags")
    where = f"{arch}, {kernel_label(arch, flags)}" if flags is not None else arch
    system = env.get("os") or {}
    return (
        f"onnxruntime {env.get('onnxruntime') or 'not installed'} on {cpu.get('model') or 'an unknown CPU'} "
        f"({where}), {system.get('system', '?')} {system.get('release', '')}".rstrip()
    )


def kernel_label(arch: str | None, flags: list[str] | None) -> str:
    """The family of kernels these flags give, e.g. ``AVX-512 VNNI`` or ``NEON + dot product + fp16``."""
    have = set(flags or ())
    if arch == "x86_64" or have & set(X86_FLAGS):
        if have & {"amx_tile", "amx_int8", "amx_bf16"}:
            return "AMX"
        for flag, label in (("avx512_vnni", "AVX-512 VNNI"), ("avx512f", "AVX-512"), ("avx_vnni", "AVX-VNNI")):
            if flag in have:
                return label
        return "AVX2" if "avx2" in have else "AVX" if "avx" in have else "no AVX"
    parts = ["NEON" if have & {"asimd", "neon"} else "no NEON"]
    extras = (("asimddp", "dot product"), ("asimdhp", "fp16"), ("i8mm", "i8mm"), ("bf16", "bf16"))
    parts += [label for flag, label in extras if flag in have]
    parts += [flag.upper() for flag in ("sve", "sve2", "sme", "sme2") if flag in have]
    return " + ".join(parts)


def _flag_difference(arch: str | None, packed: list[str] | None, ran: list[str] | None) -> str | None:
    """One sentence on the instruction sets that differ, with the kinds of kernel they change; None if none do."""
    if packed is None or ran is None:
        return None
    lost, gained = set(packed) - set(ran), set(ran) - set(packed)
    if not lost and not gained:
        return None
    changed = {kind for flag in lost | gained for kind in KERNEL_FLAGS.get(flag, ())}
    kinds = [kind for kind in _KINDS if kind in changed]
    what = f"{_and(kinds)} kernels differ" if kinds else "kernels may differ"
    p_label, r_label = kernel_label(arch, packed), kernel_label(arch, ran)
    if p_label != r_label:
        return f"packed on {p_label}, run on {r_label}{'' if gained else ' only'}: {what}"
    parts = [
        f"the run {verb} {', '.join(sorted(flags))}" for verb, flags in (("lacks", lost), ("adds", gained)) if flags
    ]
    return f"CPU features differ ({'; '.join(parts)}): {what}"


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """Linux's /proc/cpuinfo: ``{"model": str | None, "flags": sorted list of KERNEL_FLAGS | None}``.

    The model is ``model name`` (x86, 32-bit ARM), else arm64's CPU implementer and part, named where known;
    CPUs of several models (big.LITTLE) are joined with `` + ``. The flags are those every processor has
    (x86's ``flags``, ARM's ``Features``).
    """
    blocks = [_fields(block) for block in text.split("\n\n")]
    processors = [b for b in blocks if "processor" in b] or [b for b in blocks if b]
    models: list[str] = []
    common: set[str] | None = None
    for block in processors:
        model = block.get("model name") or _arm_model(block)
        if model and model not in models:
            models.append(model)
        line = block.get("flags", block.get("Features"))
        if line is not None:
            tokens = set(line.split())
            common = tokens if common is None else common & tokens
    if not models:
        models = [m for b in blocks for m in [b.get("Hardware") or b.get("Model")] if m][:1]
    return {
        "model": " + ".join(models) or None,
        "flags": None if common is None else sorted(common & set(KERNEL_FLAGS)),
    }


def parse_sysctl(text: str) -> dict[str, Any]:
    """macOS's ``sysctl machdep.cpu hw.optional``, in the shape and flag names of :func:`parse_cpuinfo`."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip()] = value.strip()
    flags: set[str] = set()
    for key, names in _SYSCTL_ARM.items():
        if values.get(key) == "1":
            flags.update(names)
    words = f"{values.get('machdep.cpu.features', '')} {values.get('machdep.cpu.leaf7_features', '')}".split()
    flags.update(_SYSCTL_X86[w] for w in words if w in _SYSCTL_X86)
    known = any(k.startswith(("hw.optional.", "machdep.cpu.features")) for k in values)
    return {
        "model": values.get("machdep.cpu.brand_string") or None,
        "flags": sorted(flags) if known else None,
    }


def _fields(block: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in block.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def _arm_model(block: dict[str, str]) -> str | None:
    try:
        implementer = int(block["CPU implementer"], 16)
        part = int(block["CPU part"], 16)
    except (KeyError, ValueError):
        return None
    vendor = _ARM_IMPLEMENTERS.get(implementer, f"implementer {implementer:#x}")
    return f"{vendor} {_ARM_PARTS.get((implementer, part), f'part {part:#x}')}"


@functools.cache
def _cpu() -> dict[str, Any]:
    arch = platform.machine()
    info: dict[str, Any] = {"model": None, "flags": None}
    source = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            info, source = parse_cpuinfo(f.read()), "/proc/cpuinfo"
    except OSError:
        if platform.system() == "Darwin":
            import subprocess  # here only: the command line prints environments and runs no process

            try:
                done = subprocess.run(
                    ["sysctl", "machdep.cpu", "hw.optional"], capture_output=True, text=True, timeout=5, check=False
                )
                info, source = parse_sysctl(done.stdout), "sysctl"
            except (OSError, subprocess.SubprocessError):
                pass
    if source is not None and info["flags"] is None:
        source = None
    return {
        "model": info["model"] or platform.processor() or None,
        "arch": _ARCHES.get(arch.lower(), arch) or None,
        "flags": info["flags"],
        "flags_from": source,
        "logical_cpus": os.cpu_count(),
    }


@functools.cache
def _runtime() -> dict[str, Any]:
    packages = [name for name in _ORT_DISTRIBUTIONS if _version(name) is not None]
    try:
        import onnxruntime as ort  # type: ignore[import-untyped]
    except ImportError:
        return {"onnxruntime": None, "onnxruntime_packages": packages, "providers": None}
    return {
        "onnxruntime": ort.__version__,
        "onnxruntime_packages": packages,
        "providers": list(ort.get_available_providers()),
    }


def _version(distribution: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _mgedump_version() -> str:
    from .. import __version__

    return __version__
