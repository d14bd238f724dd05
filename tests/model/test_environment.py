"""The packing and running environment: what is recorded, how /proc/cpuinfo and sysctl are read, what differs.

The real machine is checked against independent sources (onnxruntime's and
numpy's own answers); the parsers against cpuinfo and sysctl texts of other
machines written out below; :func:`differences` against records edited one
field at a time.
"""

from __future__ import annotations

import copy
import json
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import mgedump
from mgedump.model.environment import (
    KERNEL_FLAGS,
    differences,
    kernel_label,
    pack_environment,
    parse_cpuinfo,
    parse_sysctl,
    run_environment,
    summary,
)

# Two processors of an Ice Lake server (flags abridged, but in the kernel's order and spelling).
X86_CPUINFO = """\
processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 106
model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
cpu MHz\t\t: 2899.998
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sse sse2 ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes \
xsave avx f16c rdrand hypervisor avx2 smep bmi2 erms avx512f avx512dq rdseed adx smap avx512ifma clflushopt \
avx512cd sha_ni avx512bw avx512vl xsaveopt avx512vbmi avx512_vbmi2 gfni vaes avx512_vnni avx512_bitalg
bogomips\t: 5799.99

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 106
model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
cpu MHz\t\t: 3499.401
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sse sse2 ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes \
xsave avx f16c rdrand hypervisor avx2 smep bmi2 erms avx512f avx512dq rdseed adx smap avx512ifma clflushopt \
avx512cd sha_ni avx512bw avx512vl xsaveopt avx512vbmi avx512_vbmi2 gfni vaes avx512_vnni avx512_bitalg
bogomips\t: 5799.99
"""

# A Sapphire Rapids core: AMX and AVX-512 FP16.
SPR_FLAGS = (
    "fpu sse sse2 fma avx f16c avx2 avx512f avx512bw avx512vl avx_vnni avx512_bf16 avx512_vnni avx512_fp16 "
    "amx_bf16 amx_tile amx_int8"
)

# arm64 (an AWS Graviton2, Neoverse-N1): no model name, the implementer and part instead.
ARM64_CPUINFO = "\n\n".join(
    f"processor\t: {n}\nBogoMIPS\t: 243.75\n"
    "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop "
    "asimddp ssbs\n"
    "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1"
    for n in range(4)
)

# A phone's big.LITTLE: two Cortex-A55 and two Cortex-A76 cores, the A76s with dot product the A55s lack here.
BIG_LITTLE_CPUINFO = "\n\n".join(
    f"processor\t: {n}\nFeatures\t: fp asimd fphp asimdhp{' asimddp' if part == '0xd0b' else ''}\n"
    f"CPU implementer\t: 0x41\nCPU part\t: {part}"
    for n, part in enumerate(["0xd05", "0xd05", "0xd0b", "0xd0b"])
)

# 32-bit Raspberry Pi OS: a model name per processor, NEON under its 32-bit name, and the board at the end.
ARM32_CPUINFO = """\
processor\t: 0
model name\t: ARMv7 Processor rev 3 (v7l)
BogoMIPS\t: 108.00
Features\t: half thumb fastmult vfp edsp neon vfpv3 tls vfpv4 idiva idivt vfpd32 lpae evtstrm crc32
CPU implementer\t: 0x41
CPU part\t: 0xd08

Hardware\t: BCM2711
Revision\t: c03112
Model\t\t: Raspberry Pi 4 Model B Rev 1.2
"""

APPLE_SYSCTL = """\
machdep.cpu.cores_per_package: 8
machdep.cpu.core_count: 8
machdep.cpu.brand_string: Apple M2
hw.optional.arm.FEAT_DotProd: 1
hw.optional.arm.FEAT_FP16: 1
hw.optional.arm.FEAT_BF16: 1
hw.optional.arm.FEAT_I8MM: 1
hw.optional.arm.FEAT_SME: 0
hw.optional.AdvSIMD: 1
hw.optional.neon: 1
hw.optional.floatingpoint: 1
"""

INTEL_MAC_SYSCTL = """\
machdep.cpu.brand_string: Intel(R) Core(TM) i7-8569U CPU @ 2.80GHz
machdep.cpu.features: FPU VME DE PSE TSC MSR PAE MCE CX8 APIC SEP MTRR SSE SSE2 SSE3 FMA CX16 SSE4.1 SSE4.2 \
POPCNT AES XSAVE OSXSAVE AVX1.0 RDRAND F16C
machdep.cpu.leaf7_features: RDWRFSGS BMI1 AVX2 SMEP BMI2 ERMS INVPCID
hw.optional.avx1_0: 1
hw.optional.avx2_0: 1
hw.optional.avx512f: 0
"""


# -- the real machine


def test_the_record_names_this_machine_and_its_software():
    env = pack_environment()
    assert env["mgedump"] == mgedump.__version__
    assert env["onnxruntime"] == ort.__version__
    assert env["providers"] == ort.get_available_providers()
    assert "onnxruntime" in env["onnxruntime_packages"] or "onnxruntime-gpu" in env["onnxruntime_packages"]
    assert env["onnx"] == onnx.__version__
    assert env["numpy"] == np.__version__
    assert env["python"] == platform.python_version()
    assert env["os"] == {"system": platform.system(), "release": platform.release()}
    assert env["cpu"]["arch"] in {"x86_64", "aarch64", platform.machine()}
    assert isinstance(env["cpu"]["logical_cpus"], int) and env["cpu"]["logical_cpus"] >= 1
    assert "host" not in env and "timestamp" not in env
    assert json.loads(json.dumps(env)) == env


def test_packing_records_the_same_in_every_process():
    code = (
        "import json\nfrom mgedump.model.environment import pack_environment\nprint(json.dumps(pack_environment()))\n"
    )
    runs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    assert json.loads(runs[0]) == pack_environment()


def test_a_run_adds_the_host_and_the_time_in_utc():
    env = run_environment()
    assert env.pop("host") == platform.node()
    stamp = env.pop("timestamp")
    assert len(stamp) == 20 and stamp[10] == "T" and stamp.endswith("Z"), stamp
    assert env == pack_environment()


def test_the_records_are_independent_copies():
    env = pack_environment()
    env["cpu"]["flags"] = ["edited"]
    env["providers"].append("edited")
    assert pack_environment()["cpu"]["flags"] != ["edited"]
    assert "edited" not in pack_environment()["providers"]


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="a Linux check: this system has no /proc/cpuinfo")
def test_the_real_cpuinfo_agrees_with_numpys_own_detection():
    cpu = pack_environment()["cpu"]
    assert cpu["flags_from"] == "/proc/cpuinfo"
    text = Path("/proc/cpuinfo").read_text()
    names = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")]
    if names:
        assert cpu["model"] == names[0]
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as detected
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_features__ as detected
    same = {
        "AVX": "avx",
        "AVX2": "avx2",
        "FMA3": "fma",
        "F16C": "f16c",
        "AVX512F": "avx512f",
        "AVX512BW": "avx512bw",
        "AVX512VL": "avx512vl",
        "AVX512VNNI": "avx512_vnni",
        "ASIMD": "asimd",
        "ASIMDDP": "asimddp",
        "ASIMDHP": "asimdhp",
        "SVE": "sve",
    }
    compared = {ours: bool(detected[theirs]) for theirs, ours in same.items() if theirs in detected}
    assert len(compared) == len(same), "numpy names these flags otherwise"
    assert {flag for flag, has in compared.items() if has} == set(cpu["flags"]) & set(compared)


def test_import_is_cheap():
    code = (
        "import sys, mgedump.model.environment\n"
        "print(sorted(m for m in ('numpy', 'onnx', 'onnxruntime', 'cv2') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_the_summary_is_one_line_naming_the_machine():
    env = pack_environment()
    line = summary(env)
    assert line.startswith(f"onnxruntime {ort.__version__} on ")
    assert env["cpu"]["arch"] in line and platform.system() in line and "\n" not in line
    crafted = {
        "onnxruntime": "1.23.0",
        "cpu": {"model": "AMD EPYC 7R13 Processor", "arch": "x86_64", "flags": ["avx", "avx2", "fma"]},
        "os": {"system": "Linux", "release": "6.8.0"},
    }
    assert summary(crafted) == "onnxruntime 1.23.0 on AMD EPYC 7R13 Processor (x86_64, AVX2), Linux 6.8.0"
    assert summary({}) == "onnxruntime not installed on an unknown CPU (unknown arch), ?"


# -- /proc/cpuinfo and sysctl of other machines


def test_x86_cpuinfo():
    assert parse_cpuinfo(X86_CPUINFO) == {
        "model": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
        "flags": ["avx", "avx2", "avx512_vnni", "avx512bw", "avx512f", "avx512vl", "f16c", "fma"],
    }


def test_x86_cpuinfo_with_amx():
    parsed = parse_cpuinfo(f"processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: {SPR_FLAGS}\n")
    assert parsed["flags"] == sorted(set(SPR_FLAGS.split()) - {"fpu", "sse", "sse2"})
    assert kernel_label("x86_64", parsed["flags"]) == "AMX"


def test_arm64_cpuinfo_names_the_part():
    assert parse_cpuinfo(ARM64_CPUINFO) == {
        "model": "ARM Neoverse-N1",
        "flags": ["asimd", "asimddp", "asimdhp", "fphp"],
    }


def test_big_little_names_both_and_keeps_the_flags_every_core_has():
    assert parse_cpuinfo(BIG_LITTLE_CPUINFO) == {
        "model": "ARM Cortex-A55 + ARM Cortex-A76",
        "flags": ["asimd", "asimdhp", "fphp"],
    }


def test_arm32_cpuinfo():
    assert parse_cpuinfo(ARM32_CPUINFO) == {"model": "ARMv7 Processor rev 3 (v7l)", "flags": ["neon"]}
    assert kernel_label("armv7l", ["neon"]) == "NEON"


def test_unknown_parts_and_no_flags():
    text = "processor\t: 0\nCPU implementer\t: 0xc0\nCPU part\t: 0xac3\n"
    assert parse_cpuinfo(text) == {"model": "Ampere part 0xac3", "flags": None}
    assert parse_cpuinfo("processor\t: 0\nCPU implementer\t: 0x99\nCPU part\t: 0x1\nFeatures\t: fp\n") == {
        "model": "implementer 0x99 part 0x1",
        "flags": [],
    }
    assert parse_cpuinfo("") == {"model": None, "flags": None}


def test_apple_silicon_sysctl_in_linux_names():
    assert parse_sysctl(APPLE_SYSCTL) == {
        "model": "Apple M2",
        "flags": ["asimd", "asimddp", "asimdhp", "bf16", "fphp", "i8mm"],
    }
    assert kernel_label("aarch64", parse_sysctl(APPLE_SYSCTL)["flags"]) == "NEON + dot product + fp16 + i8mm + bf16"


def test_intel_mac_sysctl_in_linux_names():
    assert parse_sysctl(INTEL_MAC_SYSCTL) == {
        "model": "Intel(R) Core(TM) i7-8569U CPU @ 2.80GHz",
        "flags": ["avx", "avx2", "f16c", "fma"],
    }
    assert parse_sysctl("machdep.cpu.brand_string: Mystery\n") == {"model": "Mystery", "flags": None}


def test_every_kernel_flag_is_spelled_as_linux_spells_it():
    assert all(flag == flag.lower() and " " not in flag for flag in KERNEL_FLAGS)
    assert {"avx512_vnni", "avx_vnni", "amx_int8", "asimddp", "i8mm"} <= set(KERNEL_FLAGS)


# -- differences


def _packed() -> dict:
    """A packing record of another machine: an Ice Lake server."""
    return {
        "mgedump": "0.1.0",
        "onnxruntime": "1.23.0",
        "onnxruntime_packages": ["onnxruntime"],
        "providers": ["CPUExecutionProvider"],
        "onnx": "1.17.0",
        "numpy": "2.1.3",
        "python": "3.11.9",
        "os": {"system": "Linux", "release": "6.8.0-45-generic"},
        "cpu": {
            "model": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
            "arch": "x86_64",
            "flags": parse_cpuinfo(X86_CPUINFO)["flags"],
            "flags_from": "/proc/cpuinfo",
            "logical_cpus": 8,
        },
    }


def _edited(**changes) -> dict:
    """_packed() with fields replaced; ``cpu__flags=...`` replaces a field of ``cpu`` (``os__system`` of ``os``)."""
    record = copy.deepcopy(_packed())
    for key, value in changes.items():
        outer, _, inner = key.partition("__")
        if inner:
            record[outer][inner] = value
        else:
            record[outer] = value
    return record


def test_the_same_machine_differs_in_nothing():
    assert differences(_packed(), _packed()) == []
    here = pack_environment()
    assert differences(here, run_environment()) == []
    assert differences(json.loads(json.dumps(here)), run_environment()) == []


def test_what_does_not_change_results_is_not_named():
    ran = _edited(
        host="ci-runner-7",
        timestamp="2031-01-01T00:00:00Z",
        mgedump="0.2.0",
        onnx=None,
        python="3.12.1",
        providers=["CUDAExecutionProvider", "CPUExecutionProvider"],
        onnxruntime_packages=["onnxruntime-gpu"],
        os__release="6.10.0",
        cpu__logical_cpus=64,
        numpy="2.4.6",
    )
    assert differences(_packed(), ran) == []


def test_another_onnxruntime():
    assert differences(_packed(), _edited(onnxruntime="1.32.0")) == ["packed with onnxruntime 1.23.0, run with 1.32.0"]


def test_a_lesser_instruction_set():
    avx2 = ["avx", "avx2", "f16c", "fma"]
    assert differences(_packed(), _edited(cpu__flags=avx2)) == [
        "packed on AVX-512 VNNI, run on AVX2 only: int8 and float kernels differ"
    ]
    assert differences(_edited(cpu__flags=avx2), _packed()) == [
        "packed on AVX2, run on AVX-512 VNNI: int8 and float kernels differ"
    ]


def test_flags_of_the_same_family():
    without_f16c = [f for f in _packed()["cpu"]["flags"] if f != "f16c"]
    assert differences(_packed(), _edited(cpu__flags=without_f16c)) == [
        "CPU features differ (the run lacks f16c): float16 kernels differ"
    ]
    swapped = [*without_f16c, "avx512_bf16"]
    assert differences(_packed(), _edited(cpu__flags=swapped)) == [
        "CPU features differ (the run lacks f16c; the run adds avx512_bf16): float16 and bfloat16 kernels differ"
    ]


def test_arm_instruction_sets():
    n1 = parse_cpuinfo(ARM64_CPUINFO)["flags"]
    graviton3 = sorted([*n1, "i8mm", "bf16", "sve"])
    packed = _edited(cpu__arch="aarch64", cpu__model="ARM Neoverse-N1", cpu__flags=n1)
    ran = _edited(cpu__arch="aarch64", cpu__model="ARM Neoverse-V1", cpu__flags=graviton3)
    assert differences(packed, ran) == [
        "packed on NEON + dot product + fp16, run on NEON + dot product + fp16 + i8mm + bf16 + SVE: "
        "int8, float and bfloat16 kernels differ",
        "packed on CPU 'ARM Neoverse-N1', run on 'ARM Neoverse-V1'",
    ]


def test_another_architecture_differs_in_every_kernel():
    ran = _edited(cpu__arch="aarch64", cpu__model="ARM Neoverse-N1", cpu__flags=["asimd"])
    assert differences(_packed(), ran) == ["packed on x86_64, run on aarch64: every kernel differs"]


def test_another_cpu_model_os_and_numpy():
    ran = _edited(cpu__model="AMD EPYC 7R13 Processor", os__system="Darwin", numpy="1.26.4")
    assert differences(_packed(), ran) == [
        "packed on CPU 'Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz', run on 'AMD EPYC 7R13 Processor'",
        "packed on Linux, run on Darwin",
        "packed with numpy 2.1.3, run with 1.26.4",
    ]
    assert differences(_packed(), _edited(numpy="2.4.6")) == []


def test_unknown_fields_are_not_guessed():
    ran = _edited(cpu__flags=None, cpu__model=None, onnxruntime=None)
    assert differences(_packed(), ran) == []
    assert differences(_edited(cpu=None, os=None), _packed()) == []


def test_a_bundle_without_a_packing_record():
    for packed in (None, {}):
        assert differences(packed, run_environment()) == [
            "packing environment unknown: the bundle does not record where it was packed"
        ]


def test_versions_are_importlib_metadatas_without_importing_it(tmp_path, monkeypatch):
    """Every installed distribution's version as importlib.metadata gives it, read from its METADATA without that
    module (a pack that imports it spends a tenth of its time beyond onnxruntime there); installs read otherwise
    (an egg-info, a folded header, two of one name) are asked of importlib.metadata and give its answer too."""
    from importlib import metadata

    from mgedump.model import environment

    names = sorted({dist.metadata["Name"] for dist in metadata.distributions()})
    assert {"numpy", "onnx", "onnxruntime"} <= set(names)
    for name in [*names, "onnxruntime-gpu", "no-such-distribution"]:
        try:
            expected = metadata.version(name)
        except metadata.PackageNotFoundError:
            expected = None
        assert environment._version(name) == expected, name
    read_here = [n for n in names if environment._dist_info_version(n) is not environment._UNSURE]
    assert {"numpy", "onnx", "onnxruntime"} <= set(read_here)

    crafted = {
        "plain-pkg": ("plain_pkg-1.0.dist-info", "Metadata-Version: 2.1\nName: plain-pkg\nVersion: 1.0 \n\nbody\n"),
        "Folded.Pkg": ("folded_pkg-2.0.dist-info", "Name: folded.pkg\nVersion: 2.0\n  .post1\n"),
        "late-pkg": ("late_pkg-3.0.dist-info", "Name: late-pkg\n\nVersion: 3.0\n"),
        "egg-pkg": ("egg_pkg-4.0-py3.11.egg-info", "Name: egg-pkg\nVersion: 4.0\n"),
    }
    for folder, text in crafted.values():
        (tmp_path / folder).mkdir()
        (tmp_path / folder / ("PKG-INFO" if "egg" in folder else "METADATA")).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in crafted:
        assert environment._version(name) == metadata.version(name), name
    assert environment._version("plain-pkg") == "1.0 "  # what the email parser keeps, kept
    assert environment._dist_info_version("plain-pkg") == "1.0 "
    assert environment._dist_info_version("Folded.Pkg") is environment._UNSURE
    assert environment._dist_info_version("egg-pkg") is environment._UNSURE
    code = "import sys\nfrom mgedump.model.environment import pack_environment\npack_environment()\n"
    code += "print('importlib.metadata' in sys.modules)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "False"
