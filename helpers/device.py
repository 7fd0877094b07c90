"""The one place that decides the device, the training precision and whether 4-bit quantisation is usable."""
from __future__ import annotations

import importlib.util
import os
import warnings
from dataclasses import dataclass

import torch

_DEVICE_CHOICES = ("cpu", "cuda", "mps")


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


def precision(device: torch.device | str | None = None) -> Precision:
    """bf16 where the GPU computes it natively (sm80+: A100, L4, H100), else fp16 with a gradient scaler
    (T4, V100: no bf16 tensor cores, and the fused attention kernels refuse bf16 below sm80), fp32 off CUDA.

    MAGNET App. A trains in bf16; fp16 with loss scaling is the standard stand-in where bf16 is emulated.
    """
    device = torch.device(device) if device is not None else get_device()
    if device.type != "cuda":
        return Precision(torch.float32, "no", f"float32 on {device.type}")
    if torch.cuda.is_bf16_supported(including_emulation=False):
        return Precision(torch.bfloat16, "bf16", "bf16: this GPU computes bfloat16 natively")
    return Precision(torch.float16, "fp16", "fp16 with a gradient scaler: this GPU has no native bfloat16 (e.g. a T4)")


def release_memory() -> None:
    """Return the memory of models a notebook has ``del``-eted: collect them, then empty CUDA's cache."""
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def device_label(device: torch.device | str) -> str:
    """``"cpu (2 threads)"`` or the GPU's name: what a timing was measured on, for speed plots and claims."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{device.type} ({torch.get_num_threads()} threads)"
