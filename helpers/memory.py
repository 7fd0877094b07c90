"""How much GPU memory a notebook's training needs, said before it trains.

The estimate of one training step's peak is a sum of five parts:

- **weights**: every parameter in the compute dtype (2 bytes for bf16/fp16), or, with QLoRA, 0.5625
  bytes per linear weight (nf4 plus one fp32 absmax per 64) and 4 bytes for the rest, which
  ``peft.prepare_model_for_kbit_training`` casts to fp32 (embeddings, LM head, norms);
- **LoRA**: 16 bytes per trainable parameter (fp32 weight, gradient and AdamW's two moments);
- **activations**: what autograd keeps for backward, per token and decoder layer (see
  :func:`activation_bytes_per_token_layer`), plus backward's transients (:data:`BACKWARD_TRANSIENT_LAYERS`);
  with gradient checkpointing only each layer's input is kept, plus one layer of the largest single
  forward call recomputed in backward and its transients (MAGNET's SSCL views are separate calls, so
  they need no split);
- **logits**: labelled tokens x vocabulary, in the compute dtype, its fp32 copy and the fp32 log-softmax
  (the loss heads gather the labelled positions before the LM head);
- **resident models**: other models a notebook holds while it trains, and a fixed allowance for the
  CUDA context, cuBLAS workspace and allocator fragmentation (:data:`CUDA_OVERHEAD_GIB`).

:func:`fit_training` prints the estimate in a notebook and, on a GPU, halves the micro-batch (doubling
gradient accumulation, so the effective batch is unchanged) until it fits, or refuses with the numbers.
:func:`estimate_table` tables every profile and notebook against a T4, an A100-40GB and an A100-80GB.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from . import profiles
from .device import get_device, precision
from .mntp_recipe import masked_lm_recipe
# The shapes live in helpers.shapes (the model loader reads them too); memory.KNOWN_SHAPES and the rest stay readable.
from .shapes import KNOWN_SHAPES, ModelShape, model_shape, shape_of_config  # noqa: F401

GIB = 2 ** 30
CUDA_OVERHEAD_GIB = 1.0  # CUDA context, cuBLAS workspace, fragmentation: 0.75 GiB measured on an H100 (benchmarks/gpu_memory.py)
NF4_BYTES = 0.5 + 4 / 64  # 4-bit weight plus one fp32 absmax per block of 64 (bitsandbytes, no double quantisation)
ADAM_LORA_BYTES = 16  # fp32 weight + fp32 gradient + two fp32 AdamW moments
# Usable memory (torch.cuda.get_device_properties().total_memory) of the GPUs users have, in GiB.
# Gradients of activations and temporaries alive in backward, in units of one layer's kept activations: a CPU training
# step (fp32, 8 x 512 tokens, 4 layers of width 512) peaked at 2.3 (plain) and 2.7 (checkpointed, recompute included)
# such units above what is kept; 2.5 and 1 + 2 bring the estimate within 7% above that peak.
BACKWARD_TRANSIENT_LAYERS = 2.5
GPUS = {"T4 (15 GiB)": 14.75, "A100-40GB": 39.39, "A100-80GB": 79.15}
TRAINING_NOTEBOOKS = ("02", "03", "04")
# Notebook 03 trains its Table 6 runs while the base, LLM2Vec-style and MAGNET models and the previous Table 6 run
# are held (it frees the MNTP and MNTP + MSG models once Table 1 is done).
NOTEBOOK_03_RESIDENT = 4


class InsufficientGPUMemory(RuntimeError):
    """Even the smallest micro-batch does not fit this GPU."""


def activation_bytes_per_token_layer(shape: ModelShape, dtype_bytes: int, *, attention: str = "fused",
                                     seq_len: int = 0) -> float:
    """Bytes autograd keeps per token in one decoder layer of a LoRA-on-q,k,v,o model with frozen weights.

    ``(40 + 4e) h + 3 e i + 4 heads + 136`` for compute dtype size ``e``: fitted to the saved tensors of
    Llama layers on the CPU (fp32 and bf16, sdpa, LoRA dropout; ``tests/test_memory.py`` checks other
    shapes against it): the norms keep fp32 copies, q, k, v (GQA expanded), the attention output and the
    LoRA inputs are kept in ``e``, the MLP keeps gate, up and SiLU(gate). ``attention="math"`` (eager, or
    sdpa's fallback, e.g. bf16 on a T4) adds the ``heads x seq_len`` probabilities in ``e`` and fp32.
    """
    if attention not in ("fused", "math"):
        raise ValueError(f"attention={attention!r} is not 'fused' or 'math'")
    per_token = (40 + 4 * dtype_bytes) * shape.hidden + 3 * dtype_bytes * shape.intermediate + 4 * shape.heads + 136
    if attention == "math":
        per_token += shape.heads * seq_len * (dtype_bytes + 4)
    return float(per_token)


def checkpoint_bytes_per_token_layer(shape: ModelShape, dtype_bytes: int) -> float:
    """Bytes a checkpointed layer keeps per token: its hidden-state input."""
    return float(dtype_bytes * shape.hidden)


def final_norm_bytes_per_token(shape: ModelShape) -> float:
    """The final RMSNorm (never checkpointed) keeps an fp32 copy of its input and the inverse RMS."""
    return float(4 * shape.hidden + 4)


@dataclass(frozen=True)
class Workload:
    """One training step of a notebook: the model, the micro-batch and what else stays on the GPU."""

    notebook: str
    model: ModelShape
    micro_batch: int
    grad_accum: int
    seq_len: int
    four_bit: bool
    lora_r: int
    checkpointing: bool
    labelled_fraction: float  # share of the micro-batch's tokens that get LM-head logits
    extra_tokens: int = 0  # tokens of the same step not split by the micro-batch (MAGNET's SSCL views)
    extra_forward_tokens: int = 0  # the largest single forward among them (one SSCL view)
    extra_labelled: int = 0  # tokens with logits among them
    resident_models: int = 0  # further copies of the model held by the notebook while this trains
    note: str = ""

    @property
    def tokens(self) -> int:
        return self.micro_batch * self.seq_len + self.extra_tokens

    @property
    def largest_forward(self) -> int:
        """Tokens of the largest single forward call: checkpointing recomputes one layer of one call at a time."""
        return max(self.micro_batch * self.seq_len, self.extra_forward_tokens)


@dataclass(frozen=True)
class Estimate:
    workload: Workload
    weights: float
    lora: float
    activations: float
    logits: float
    resident: float
    overhead: float

    @property
    def total(self) -> float:
        return self.weights + self.lora + self.activations + self.logits + self.resident + self.overhead

    @property
    def total_gib(self) -> float:
        return self.total / GIB

    def line(self) -> str:
        w = self.workload
        parts = ", ".join(f"{name} {getattr(self, name) / GIB:.1f}" for name in
                          ("weights", "lora", "activations", "logits", "resident", "overhead"))
        return (f"[memory] notebook {w.notebook}, {w.model.name}{' nf4' if w.four_bit else ''}, micro-batch "
                f"{w.micro_batch} x {w.seq_len}{f' + {w.extra_tokens} tokens' if w.extra_tokens else ''} "
                f"(x{w.grad_accum} accumulation), checkpointing {'on' if w.checkpointing else 'off'}: "
                f"~{self.total_gib:.1f} GiB ({parts} GiB)")


def weight_bytes(shape: ModelShape, dtype_bytes: int, four_bit: bool) -> float:
    if four_bit:
        return shape.linear_parameters * NF4_BYTES + shape.other_parameters * 4
    return shape.parameters * dtype_bytes


def estimate(workload: Workload, dtype_bytes: int = 2, attention: str = "fused") -> Estimate:
    """Peak memory of one training step of ``workload`` (see the module docstring for the parts)."""
    shape, tokens = workload.model, workload.tokens
    per_layer = activation_bytes_per_token_layer(shape, dtype_bytes, attention=attention, seq_len=workload.seq_len)
    if workload.checkpointing:  # each layer's inputs, plus one layer of one forward recomputed, plus backward's transients
        kept = shape.layers * checkpoint_bytes_per_token_layer(shape, dtype_bytes)
        activations = tokens * kept + workload.largest_forward * 3 * per_layer
    else:  # every layer, plus backward's transients
        activations = tokens * (shape.layers + BACKWARD_TRANSIENT_LAYERS) * per_layer
    activations += tokens * final_norm_bytes_per_token(shape)
    labelled = workload.micro_batch * workload.seq_len * workload.labelled_fraction + workload.extra_labelled
    weights = weight_bytes(shape, dtype_bytes, workload.four_bit)
    return Estimate(workload, weights=weights, lora=shape.lora_parameters(workload.lora_r) * ADAM_LORA_BYTES,
                    activations=activations, logits=labelled * shape.vocab * (dtype_bytes + 8),
                    resident=workload.resident_models * weights, overhead=CUDA_OVERHEAD_GIB * GIB)


# --------------------------------------------------------------------------- the notebooks' workloads

def _check_notebook(notebook: str) -> str:
    if notebook not in TRAINING_NOTEBOOKS:
        raise ValueError(f"notebook={notebook!r} is not one of the training notebooks {TRAINING_NOTEBOOKS}")
    return notebook


def workload(notebook: str, profile, settings=None) -> Workload:
    """Notebook ``notebook``'s largest training step in ``profile`` (under ``settings``, default
    :func:`training_settings`)."""
    _check_notebook(notebook)
    shape = model_shape(profile.model_name)
    settings = settings or training_settings(notebook, profile)
    if notebook == "02":  # MNTP / MTP; section 2's untrained model and the MNTP model stay while MTP trains
        return Workload("02", shape, settings.batch_size, settings.grad_accum, settings.seq_len,
                        profile.load_in_4bit, profile.lora_r, profile.gradient_checkpointing, 0.2, resident_models=2,
                        note="MTP run; the untrained and the MNTP model resident")
    if notebook == "03":  # MAGNET phase 2: the masked view, and the SSCL views x and x+ of every micro-batch
        span_share = min(1.0, settings.max_spans * settings.span_max / settings.seq_len)
        views = 2 * settings.sscl_batch_size * settings.sscl_max_len
        return Workload("03", shape, settings.batch_size, settings.grad_accum, settings.seq_len, profile.load_in_4bit,
                        profile.lora_r, settings.gradient_checkpointing, 0.2 * (1 - span_share) + span_share,
                        extra_tokens=views, extra_forward_tokens=views // 2, resident_models=NOTEBOOK_03_RESIDENT,
                        note=f"phase 2 with {views} SSCL tokens; Table 6 runs with the other models resident")
    recipe = settings.training  # sequence repetition nests what changes a trained tagger
    longest = recipe.batch_size * (max(settings.repeats) + 1) * settings.max_tokens  # padded to max_tokens, r max
    return Workload("04", shape, recipe.batch_size, recipe.grad_accum, (max(settings.repeats) + 1) * settings.max_tokens,
                    bool(recipe.qlora), recipe.lora_r, recipe.gradient_checkpointing, 0.0,
                    note=f"r={max(settings.repeats)}, rows padded to {settings.max_tokens} tokens ({longest} tokens)")


def training_settings(notebook: str, profile):
    """What notebook ``notebook`` trains with in ``profile``: the masked-LM recipe (02), MAGNET's settings (03) or
    sequence repetition's (04); each has ``batch_size`` and ``grad_accum``."""
    _check_notebook(notebook)
    if notebook == "02":
        return masked_lm_recipe(profile)
    return profiles.settings_for(profiles.NOTEBOOK_PAPERS[notebook], profile)


def with_micro_batch(settings, micro_batch: int, grad_accum: int):
    """``settings`` (any of :func:`training_settings`) with a new micro-batch and accumulation (sequence
    repetition's sit in its nested ``settings.training``)."""
    if hasattr(settings, "training"):
        return dataclasses.replace(settings, training=with_micro_batch(settings.training, micro_batch, grad_accum))
    return dataclasses.replace(settings, batch_size=micro_batch, grad_accum=grad_accum)


def gpu_budget_gib(device: torch.device | None = None) -> float | None:
    """The total memory of the CUDA device in GiB, or None off CUDA (nothing to check)."""
    device = device or get_device()
    if device.type != "cuda":
        return None
    return torch.cuda.get_device_properties(device).total_memory / GIB


def fit_micro_batch(work: Workload, budget_gib: float, dtype_bytes: int = 2) -> tuple[Workload, Estimate]:
    """Halve the micro-batch (doubling accumulation) until the estimate fits ``budget_gib``; raise if even 1 does not."""
    current = estimate(work, dtype_bytes)
    while current.total_gib > budget_gib and work.micro_batch > 1 and work.micro_batch % 2 == 0:
        work = dataclasses.replace(work, micro_batch=work.micro_batch // 2, grad_accum=work.grad_accum * 2)
        current = estimate(work, dtype_bytes)
    if current.total_gib > budget_gib:
        raise InsufficientGPUMemory(
            f"notebook {work.notebook} needs ~{current.total_gib:.1f} GiB even at micro-batch {work.micro_batch} "
            f"({current.line()}); this GPU has {budget_gib:.1f} GiB. Use a larger GPU (see the README's memory "
            f"table) or a smaller profile (WORKBOOK_PROFILE=gpu or cpu)"
            f"{'' if work.checkpointing else ', or turn gradient checkpointing on'}.")
    return work, current


def fit_training(notebook: str, profile, settings=None, *, device: torch.device | None = None,
                 budget_gib: float | None = None):
    """Print what notebook ``notebook`` needs to train here; on a GPU, fit the micro-batch or refuse.

    Returns the notebook's training settings (:func:`training_settings`), with a smaller micro-batch and more
    accumulation (the same effective batch) where the estimate exceeds the GPU's memory.
    Raises :class:`InsufficientGPUMemory` when even a micro-batch of 1 does not fit.
    """
    settings = settings or training_settings(notebook, profile)
    work = workload(notebook, profile, settings)
    budget = budget_gib if budget_gib is not None else gpu_budget_gib(device)
    if budget is None:
        print(estimate(work).line() + " on a GPU (bf16/fp16); this device has no GPU budget to check")
        return settings
    chosen_dtype = precision(device).dtype
    dtype_bytes = 2 if chosen_dtype == torch.float32 else torch.finfo(chosen_dtype).bits // 8  # a budget given off CUDA
    fitted, chosen = fit_micro_batch(work, budget, dtype_bytes)
    print(chosen.line() + f"; this GPU has {budget:.1f} GiB")
    if fitted.micro_batch == work.micro_batch:
        return settings
    print(f"[memory] micro-batch {work.micro_batch} -> {fitted.micro_batch}, accumulation {work.grad_accum} -> "
          f"{fitted.grad_accum}: the same {work.micro_batch * work.grad_accum} rows per step")
    return with_micro_batch(settings, fitted.micro_batch, fitted.grad_accum)


def estimate_table(profile_names=("gpu", "paper")):
    """Profile x notebook: the estimate (bf16/fp16) against a T4, an A100-40GB and an A100-80GB (for the README)."""
    import pandas as pd

    rows = []
    for name in profile_names:
        profile = profiles.get(name)
        for notebook in TRAINING_NOTEBOOKS:
            work = workload(notebook, profile)
            total = estimate(work).total_gib
            row = {"profile": name, "notebook": notebook, "model": work.model.name + (" nf4" if work.four_bit else ""),
                   "micro-batch": f"{work.micro_batch} x {work.seq_len}" + (f" + {work.extra_tokens}" if work.extra_tokens else ""),
                   "checkpointing": "on" if work.checkpointing else "off", "estimate (GiB)": round(total, 1)}
            for gpu, capacity in GPUS.items():
                if total <= capacity:
                    row[gpu] = "fits"
                else:
                    try:
                        fitted, _ = fit_micro_batch(work, capacity)
                        row[gpu] = f"micro-batch {fitted.micro_batch}"
                    except InsufficientGPUMemory:
                        row[gpu] = "does not fit"
            rows.append(row)
    return pd.DataFrame(rows).set_index(["profile", "notebook"])
