"""The one place that decides the device, the training precision and whether 4-bit quantisation is usable."""
from __future__ import annotations

import functools
import importlib.util
import os
import platform
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

_DEVICE_CHOICES = ("cpu", "cuda", "mps")
# "fp16": a GPU that computes bf16 takes a T4's path (fp16 with a gradient scaler), to test that path on it
GPU_PRECISION_VAR = "WORKBOOK_GPU_PRECISION"
_GPU_PRECISION_CHOICES = ("fp16",)


def get_device() -> torch.device:
    """CUDA if present, else Apple MPS, else CPU. ``WORKBOOK_DEVICE`` overrides (cpu, cuda, mps)."""
    requested = os.environ.get("WORKBOOK_DEVICE")
    if requested is not None and requested.strip() != "":
        name = requested.strip().lower()
        if name not in _DEVICE_CHOICES:
            raise ValueError(f"WORKBOOK_DEVICE={requested!r} is not one of {', '.join(_DEVICE_CHOICES)}")
        if name == "cuda" and not torch.cuda.is_available():
            raise ValueError("WORKBOOK_DEVICE='cuda' but torch.cuda.is_available() is False on this machine; unset "
                             "WORKBOOK_DEVICE to let the workbook choose, or set it to cpu")
        if name == "mps" and not (getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()):
            raise ValueError("WORKBOOK_DEVICE='mps' but this torch build or machine has no MPS (Apple GPU) support; "
                             "unset WORKBOOK_DEVICE to let the workbook choose, or set it to cpu")
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def four_bit_supported(device: torch.device | None = None) -> tuple[bool, str]:
    """Whether bitsandbytes nf4 can be used here, and if not, the reason in words."""
    device = device or get_device()
    if device.type != "cuda":
        return False, f"4-bit (bitsandbytes nf4) needs CUDA; this device is {device.type}, so the model loads unquantised"
    if importlib.util.find_spec("bitsandbytes") is None:
        return False, "4-bit needs bitsandbytes: pip install 'mlm-workbook[gpu]' (or pip install bitsandbytes); loading unquantised"
    return True, "4-bit nf4 with bitsandbytes"


def resolve_four_bit(requested: bool, device: torch.device | None = None) -> bool:
    """Honour a request for 4-bit where possible; otherwise warn once with the reason and fall back."""
    if not requested:
        return False
    supported, reason = four_bit_supported(device)
    if not supported:
        warnings.warn(f"load_in_4bit requested but unavailable: {reason}", stacklevel=2)
    return supported


def model_device(model) -> torch.device:
    """Where ``model``'s weights live (its first parameter); helpers move their inputs there."""
    parameter = next(iter(model.parameters()), None)
    if parameter is None:
        raise ValueError(f"model={type(model).__name__} has no parameters, so it has no device to move inputs to")
    return parameter.device


@dataclass(frozen=True)
class Precision:
    """How a model is loaded and trained here: weight dtype, accelerate's ``mixed_precision``, and why."""

    dtype: torch.dtype
    mixed_precision: str  # "bf16", "fp16" (autocast plus a GradScaler) or "no"
    reason: str


# The x86 instruction sets with bfloat16 dot products (AVX512-BF16: Cooper Lake, Zen 4 and later; AMX-BF16: Sapphire
# Rapids and later). oneDNN runs bf16 matrix products on them faster than float32; elsewhere bf16 is emulated, slower.
NATIVE_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


@functools.lru_cache(maxsize=1)
def _proc_cpuinfo() -> str:
    """``/proc/cpuinfo``, read once per process (precision() asks on every load, run key and training); "" where the
    file is missing."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The instruction-set flags of this CPU as Linux lists them (the ``flags`` line of ``/proc/cpuinfo``); empty
    where that file is missing (macOS, Windows), so those machines never count as computing bf16 natively."""
    cpuinfo = _proc_cpuinfo() if cpuinfo is None else cpuinfo
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def cpu_computes_bf16(flags: frozenset[str] | None = None) -> bool:
    """Whether this CPU computes bfloat16 matrix products natively (:data:`NATIVE_BF16_CPU_FLAGS`) and torch has
    oneDNN to use them."""
    flags = cpu_flags() if flags is None else flags
    return torch.backends.mkldnn.is_available() and any(flag in flags for flag in NATIVE_BF16_CPU_FLAGS)


def precision(device: torch.device | str | None = None) -> Precision:
    """bf16 where the device computes it natively (GPUs of sm80+: A100, L4, H100; CPUs with AVX512-BF16 or
    AMX-BF16), else fp16 with a gradient scaler on a GPU (T4, V100: no bf16 tensor cores, and the fused attention
    kernels refuse bf16 below sm80), else float32.

    MAGNET App. A trains in bf16; fp16 with loss scaling is the standard stand-in where bf16 is emulated. A profile
    whose ``dtype`` is ``"auto"`` (every profile but smoke) loads its model in this dtype. ``WORKBOOK_GPU_PRECISION=fp16``
    sends a GPU that computes bf16 down the T4's path (a check of that path; CPUs are unaffected).
    """
    device = torch.device(device) if device is not None else get_device()
    if device.type == "cpu" and cpu_computes_bf16():
        return Precision(torch.bfloat16, "bf16", "bf16: this CPU computes bfloat16 natively (AVX512-BF16 or AMX)")
    if device.type != "cuda":
        return Precision(torch.float32, "no", f"float32 on {device.type}")
    requested = os.environ.get(GPU_PRECISION_VAR, "").strip()
    if requested and requested not in _GPU_PRECISION_CHOICES:
        raise ValueError(f"{GPU_PRECISION_VAR}={requested!r} is not one of {', '.join(_GPU_PRECISION_CHOICES)}; unset "
                         "it to let the workbook choose")
    if requested == "fp16":
        return Precision(torch.float16, "fp16", f"fp16 with a gradient scaler: {GPU_PRECISION_VAR}=fp16 (a T4's path)")
    if torch.cuda.is_bf16_supported(including_emulation=False):
        return Precision(torch.bfloat16, "bf16", "bf16: this GPU computes bfloat16 natively")
    return Precision(torch.float16, "fp16", "fp16 with a gradient scaler: this GPU has no native bfloat16 (e.g. a T4)")


def training_mixed_precision(model) -> str:
    """accelerate's ``mixed_precision`` for training ``model``: :func:`precision`'s choice for the model's device. On a
    CPU only when the weights were loaded in that dtype, so a float32 model (the smoke profile's, or
    ``WORKBOOK_DTYPE=float32``) trains in float32 on every CPU, and a bf16 one (the cpu profile's ``dtype="auto"`` on a
    CPU that computes bf16) computes its float32 LoRA weights in bf16."""
    device = model_device(model)
    chosen = precision(device)
    if device.type == "cpu" and next(iter(model.parameters())).dtype != chosen.dtype:
        return "no"
    return chosen.mixed_precision


def release_memory() -> None:
    """Return the memory of models a notebook has ``del``-eted: collect them, then empty CUDA's cache."""
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says: the machine claims and slices record."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_label(device: torch.device | str) -> str:
    """``"cpu (2 threads)"`` or the GPU's name: what a timing was measured on, for speed plots and claims."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{device.type} ({torch.get_num_threads()} threads)"
