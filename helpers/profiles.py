"""Run profiles: one variable, ``WORKBOOK_PROFILE``, picks the scale of every notebook.

- ``smoke``: the same code paths at tiny sizes (a tiny random decoder), in seconds, for nbmake in CI.
- ``cpu``: the embedded offline default, SmolLM2-135M on Jane Austen, minutes on a laptop.
- ``gpu``: Hub models and datasets on one Colab-class GPU.
- ``paper``: the papers' models and hyperparameters (e.g. Llama-2-7B with QLoRA).

The default is ``cpu``, or ``gpu`` when CUDA is present. An unknown value is an error.
"""
from __future__ import annotations

import dataclasses
import importlib
import os
from dataclasses import dataclass, field

import torch

PROFILE_NAMES = ("smoke", "cpu", "gpu", "paper")
ENV_VAR = "WORKBOOK_PROFILE"

EMBEDDED_MODEL = "embedded:smollm2-135m"
TINY_RANDOM_MODEL = "tiny-random:llama"


@dataclass(frozen=True)
class Profile:
    """Every size, model name and step count a notebook uses. Notebooks read these, never literals."""

    name: str
    model_name: str
    corpus: str
    load_in_4bit: bool = False
    dtype: str = "float32"  # or "auto": helpers.device.precision picks bf16 / fp16 / float32 for the device
    seed: int = 0
    # Notebook 01: attention-mask gallery.
    example_sentence_max_tokens: int = 24
    sr_repeats: tuple[int, ...] = (0, 1, 2, 4, 8)
    sr_sentences: int = 4
    sr_sentence_max_tokens: int = 12
    dswa_fixed_window: int = 64
    dswa_alpha_min: float = 0.125
    dswa_alpha_max: float = 0.75
    # Notebook 02: MNTP vs MTP (MAGNET App. A, App. E).
    mlm_steps: int = 100
    mlm_batch_size: int = 4
    mlm_grad_accum: int = 1
    mlm_seq_len: int = 128
    mlm_lr: float = 5e-4
    mlm_eval_every: int = 10
    mlm_eval_batches: int = 4
    mlm_train_blocks: int = 2000
    mlm_checkpoint_every: int = 25
    lora_r: int = 16
    lora_alpha: int = 32
    gradient_checkpointing: bool = False  # recompute layers in backward (helpers.memory: needed on a T4 / A100-40GB)
    extra: dict = field(default_factory=dict)

    def replace(self, **changes) -> "Profile":
        return dataclasses.replace(self, **changes)


_PROFILES = {
    "smoke": Profile(
        name="smoke",
        model_name=TINY_RANDOM_MODEL,
        corpus="austen",
        example_sentence_max_tokens=12,
        sr_repeats=(0, 1, 2),
        sr_sentences=1,
        sr_sentence_max_tokens=6,
        mlm_steps=4,
        mlm_batch_size=2,
        mlm_seq_len=32,
        mlm_eval_every=2,
        mlm_eval_batches=1,
        mlm_train_blocks=16,
        mlm_checkpoint_every=2,
    ),
    # Fig. 7's held-out set: 8 batches (32 blocks, about 800 masked tokens; 4 gave about 410, SE ~2 points),
    # scored every 25 steps (the 02 + 03 time budget of issue 18).
    "cpu": Profile(name="cpu", model_name=EMBEDDED_MODEL, corpus="austen", mlm_eval_every=25, mlm_eval_batches=8),
    "gpu": Profile(
        name="gpu",
        model_name="HuggingFaceTB/SmolLM2-360M",
        corpus="wikitext-103-raw-v1",
        dtype="auto",  # bf16 on A100/L4/H100, fp16 on a T4 (helpers.device.precision)
        sr_sentences=16,
        sr_sentence_max_tokens=24,
        mlm_steps=1000,
        mlm_batch_size=16,
        mlm_grad_accum=2,
        mlm_seq_len=512,
        mlm_lr=1e-4,
        mlm_eval_every=50,
        mlm_eval_batches=16,
        mlm_train_blocks=200_000,
        mlm_checkpoint_every=100,
        gradient_checkpointing=True,
    ),
    "paper": Profile(
        name="paper",
        model_name="meta-llama/Llama-2-7b-hf",
        corpus="wikitext-103-raw-v1",
        load_in_4bit=True,
        dtype="auto",  # bf16 on A100/L4/H100, fp16 on a T4 (helpers.device.precision)
        sr_sentences=32,
        sr_sentence_max_tokens=32,
        mlm_steps=4200,  # MAGNET App. A: 4200 iterations, batch 32, length 512, lr 3e-5
        mlm_batch_size=8,
        mlm_grad_accum=4,
        mlm_seq_len=512,
        mlm_lr=3e-5,
        mlm_eval_every=200,
        mlm_eval_batches=32,
        mlm_train_blocks=300_000,
        mlm_checkpoint_every=200,
        gradient_checkpointing=True,
    ),
}


def default_profile_name() -> str:
    return "gpu" if torch.cuda.is_available() else "cpu"


def parse_profile_name(raw: str | None) -> str:
    """Turn the raw ``WORKBOOK_PROFILE`` value into a profile name; unset or blank means the default."""
    if raw is None or raw.strip() == "":
        return default_profile_name()
    name = raw.strip().lower()
    if name not in PROFILE_NAMES:
        raise ValueError(f"{ENV_VAR}={raw!r} is not a known profile; expected one of {', '.join(PROFILE_NAMES)}")
    return name


def get(name: str) -> Profile:
    """The profile called ``name``."""
    if name not in _PROFILES:
        raise ValueError(f"profile={name!r} is not a known profile; expected one of {', '.join(PROFILE_NAMES)}")
    return _PROFILES[name]


def current() -> Profile:
    """The profile selected by ``WORKBOOK_PROFILE`` (read once per call, parsed explicitly)."""
    return get(parse_profile_name(os.environ.get(ENV_VAR)))


SETTINGS_MODULES = ("magnet", "repetition", "decoding", "mtc")


def settings_for(module: str, profile: Profile | None = None):
    """A paper module's own settings for a profile: ``helpers.<module>.SETTINGS[profile.name]``.

    Notebooks 03-06 keep their sizes next to the code they drive, one entry per profile.
    """
    if module not in SETTINGS_MODULES:
        raise ValueError(f"module={module!r} has no settings; expected one of {SETTINGS_MODULES}")
    profile = profile or current()
    table = importlib.import_module(f"helpers.{module}").SETTINGS
    missing = [name for name in PROFILE_NAMES if name not in table]
    if missing:
        raise ValueError(f"helpers.{module}.SETTINGS lacks profiles {missing}")
    return table[profile.name]
