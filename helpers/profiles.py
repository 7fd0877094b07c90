"""Run profiles: one variable, ``WORKBOOK_PROFILE``, picks the scale of every notebook.

- ``smoke``: the same code paths at tiny sizes (a tiny random decoder), in seconds, for nbmake in CI.
- ``cpu``: the embedded offline default, SmolLM2-135M on Jane Austen, minutes on a laptop.
- ``gpu``: Hub models and datasets on one Colab-class GPU.
- ``paper``: the papers' models and hyperparameters (e.g. Llama-2-7B with QLoRA).

The default is ``cpu``, or ``gpu`` when CUDA is present. An unknown value is an error.

``WORKBOOK_MODEL=random:<shape>`` (:data:`RANDOM_MODELS`) swaps any profile's model for random weights of a real
shape (SmolLM2-135M or SmolLM2-360M, with the embedded SmolLM2 tokenizer): offline, at the profile's sizes, for
running every notebook where no weights can be fetched (a borrowed GPU). Such runs are keyed apart and never reach
a claims ledger (``helpers.ledger``).
"""
from __future__ import annotations

import dataclasses
import importlib
import os
from dataclasses import dataclass

import torch

from . import papers
from .seeds import StudySeed

PROFILE_NAMES = ("smoke", "cpu", "gpu", "paper")
ENV_VAR = "WORKBOOK_PROFILE"
SEED_VAR = "WORKBOOK_SEED"  # the seed study's one switch: the profile's seed (scripts/study.py sets it per seed)
DTYPE_VAR = "WORKBOOK_DTYPE"  # the profile's weight dtype, e.g. auto: bf16 on a CPU that computes it natively
DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")

EMBEDDED_MODEL = "embedded:smollm2-135m"
TINY_RANDOM_MODEL = "tiny-random:llama"
MODEL_VAR = "WORKBOOK_MODEL"  # random:<shape>: random weights of a real shape in place of the profile's model
# A seed study's examples look: every notebook's test-example sizes (its paper settings' EXAMPLE_SIZES) times this
# whole number, on the same trained runs (scripts/study.py sets it; unset: 1)
EXAMPLES_VAR = "WORKBOOK_EXAMPLES"
# make reproduce's prefix: every trained run of a paper whose settings module defines ``at_prefix`` trains 1/N of
# its length, a prefix of the study's runs (they extend); unset or 1: the full length, the study's (make reproduce STOPS=1)
PREFIX_VAR = "WORKBOOK_PREFIX"
REPRODUCE_PREFIX = 4  # make reproduce's WORKBOOK_PREFIX when unset; the seed study records its seeds at it too
RANDOM_PREFIX = "random:"
# The random-weight models: the shape each one has (helpers.shapes.KNOWN_SHAPES holds the sizes).
RANDOM_MODELS = {"random:smollm2-135m": "SmolLM2-135M", "random:smollm2-360m": "SmolLM2-360M"}


@dataclass(frozen=True)
class Profile:
    """What every notebook shares: the model, the corpus, precision, the seed and LoRA's defaults.

    Each paper's own sizes live in its package's ``settings.py`` (:func:`settings_for`); the masked-LM recipe of
    notebook 02 (and of the adapter notebooks 03, 05 and 06 read) in ``mntp_recipe.MASKED_LM_RECIPES``.
    """

    name: str
    model_name: str
    corpus: str
    load_in_4bit: bool = False
    dtype: str = "float32"  # or "auto": helpers.device.precision picks bf16 / fp16 / float32 for the device
    seed: int = 0
    lora_r: int = 16
    lora_alpha: int = 32
    gradient_checkpointing: bool = False  # recompute layers in backward (helpers.memory: needed on a T4 / A100-40GB)

    def replace(self, **changes) -> "Profile":
        return dataclasses.replace(self, **changes)


_PROFILES = {
    "smoke": Profile(name="smoke", model_name=TINY_RANDOM_MODEL, corpus="austen"),
    # bf16 where this CPU computes it natively (AVX512-BF16 or AMX: the CI machine does; 1.34x over float32 on the whole
    # reproduction), float32 elsewhere; a CPU of the other kind trains another trajectory, as another seed would.
    "cpu": Profile(name="cpu", model_name=EMBEDDED_MODEL, corpus="austen", dtype="auto"),
    "gpu": Profile(
        name="gpu",
        model_name="HuggingFaceTB/SmolLM2-360M",
        corpus="wikitext-103-raw-v1",
        dtype="auto",  # bf16 on A100/L4/H100, fp16 on a T4 (helpers.device.precision)
        gradient_checkpointing=True,
    ),
    "paper": Profile(
        name="paper",
        model_name="meta-llama/Llama-2-7b-hf",
        corpus="wikitext-103-raw-v1",
        load_in_4bit=True,
        dtype="auto",  # bf16 on A100/L4/H100, fp16 on a T4 (helpers.device.precision)
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


def _setting(variable: str) -> str | None:
    """The environment variable ``variable``'s value, or None when it is unset or blank."""
    raw = os.environ.get(variable)
    return None if raw is None or raw.strip() == "" else raw


def study_seed() -> int | None:
    """The seed study's seed, ``WORKBOOK_SEED`` (None when unset or blank): an error names the variable."""
    raw = _setting(SEED_VAR)
    if raw is None:
        return None
    try:
        seed = int(raw.strip())
    except ValueError:
        seed = -1
    if seed < 0:
        raise ValueError(f"{SEED_VAR}={raw!r} must be a whole number >= 0 (a seed of the seed study), or unset")
    return seed


def dtype_override() -> str | None:
    """``WORKBOOK_DTYPE``, one of :data:`DTYPE_CHOICES` (None when unset or blank): an error names the variable."""
    raw = _setting(DTYPE_VAR)
    if raw is None:
        return None
    name = raw.strip().lower()
    if name not in DTYPE_CHOICES:
        raise ValueError(f"{DTYPE_VAR}={raw!r} is not one of {', '.join(DTYPE_CHOICES)} (auto: bf16 where the device "
                         "computes it natively, helpers.device.precision), or unset for the profile's own dtype")
    return name


def _whole_number_at_least_one(variable: str, meaning: str, unset: str) -> int:
    """The environment variable ``variable`` as a whole number >= 1 (1 when unset or blank); an error names the
    variable, what it means and what leaving it unset does."""
    raw = _setting(variable)
    if raw is None:
        return 1
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{variable}={raw!r} must be a whole number >= 1 ({meaning}), or unset for {unset}")
    return value


def examples_scale() -> int:
    """``WORKBOOK_EXAMPLES``: how many times its test-example sizes each notebook scores (1 when unset or blank); an
    error names the variable."""
    return _whole_number_at_least_one(EXAMPLES_VAR, "how many times each notebook's test examples, prompts and draws "
                                                    "it scores", "1")


def prefix_divisor() -> int:
    """``WORKBOOK_PREFIX``: the share 1/N of their lengths the trained runs train (1 when unset or blank); an error
    names the variable."""
    return _whole_number_at_least_one(PREFIX_VAR, "each trained run trains 1/N of its length, a prefix of the "
                                                  "study's", "the full length")


def has_prefix(paper: str) -> bool:
    """Whether ``paper``'s settings module defines ``at_prefix`` (its trained runs can stop at a prefix)."""
    return callable(getattr(importlib.import_module(f"helpers.papers.{paper}.settings"), "at_prefix", None))


def at_prefix(settings, divisor: int, paper: str):
    """``settings`` with every trained run at 1/``divisor`` of its length (its settings module's ``at_prefix``): a
    prefix of the runs the full length trains, since a run's key holds no length and its schedule none either. A
    paper without ``at_prefix``, or a divisor of 1, keeps its settings."""
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < 1:
        raise ValueError(f"divisor={divisor!r} must be a whole number >= 1")
    if divisor == 1 or not has_prefix(paper):
        return settings
    return importlib.import_module(f"helpers.papers.{paper}.settings").at_prefix(settings, divisor)


def example_sizes(paper: str) -> tuple[str, ...]:
    """The settings fields ``paper``'s test-example sizes are in (its settings module's ``EXAMPLE_SIZES``): what an
    examples look scales; ``()`` for a paper whose evaluation cannot grow (notebook 02's masked-LM recipe)."""
    return tuple(getattr(importlib.import_module(f"helpers.papers.{paper}.settings"), "EXAMPLE_SIZES", ()))


def scale_examples(settings, scale: int, paper: str):
    """``settings`` (a paper's settings) with each of its test-example sizes times ``scale``: the fields its settings
    module names in ``EXAMPLE_SIZES`` (test sentences, passages, prompts, sampling draws). None of them keys a trained
    run, so a larger evaluation scores the same runs on more examples. A size of None ("all") stays None."""
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise ValueError(f"scale={scale!r} must be a whole number >= 1")
    if scale == 1:
        return settings
    names = example_sizes(paper)
    if not names:
        raise ValueError(f"{EXAMPLES_VAR}={scale}: paper={paper!r} names no test-example sizes (EXAMPLE_SIZES in "
                         f"helpers/papers/{paper}/settings.py), so its evaluation cannot grow; unset {EXAMPLES_VAR}")
    grown = {name: None if getattr(settings, name) is None else getattr(settings, name) * scale for name in names}
    return dataclasses.replace(settings, **grown)


def is_random_model(name) -> bool:
    """Whether ``name`` (a model name, or a :class:`Profile`) is random weights of a real shape (``random:...``)."""
    name = name.model_name if isinstance(name, Profile) else name
    return isinstance(name, str) and name.startswith(RANDOM_PREFIX)


def check_random_model(name: str, argument: str = "name", unset: str = "") -> str:
    """``name`` when it is one of :data:`RANDOM_MODELS`, else a ValueError naming ``argument`` and the known shapes
    (``unset``: what leaving the setting unset does, said after them)."""
    if name not in RANDOM_MODELS:
        raise ValueError(f"{argument}={name!r} is not a known random-weight model; expected one of "
                         f"{', '.join(RANDOM_MODELS)} (random weights of {', '.join(RANDOM_MODELS.values())}'s shape)"
                         + (f", or unset {unset}" if unset else ""))
    return name


def model_override() -> str | None:
    """``WORKBOOK_MODEL``, one of :data:`RANDOM_MODELS` (None when unset or blank): an error names the variable."""
    raw = _setting(MODEL_VAR)
    if raw is None:
        return None
    name = raw.strip().lower()
    return name if name in RANDOM_MODELS else check_random_model(raw, MODEL_VAR, "for the profile's own model")


def current() -> Profile:
    """The profile selected by ``WORKBOOK_PROFILE`` (read once per call, parsed explicitly), with ``WORKBOOK_SEED``'s
    seed, ``WORKBOOK_DTYPE``'s weight dtype and ``WORKBOOK_MODEL``'s random-weight model when set. The profile's
    seed, dtype and model are part of every run key that rests on them (MNTP and MTP's runs, MAGNET's, their
    adapters), so each seed of a study, each dtype and each model trains and finds its own runs; unset, nothing
    changes."""
    profile = get(parse_profile_name(os.environ.get(ENV_VAR)))
    seed, dtype, model = study_seed(), dtype_override(), model_override()
    if seed is not None:
        profile = profile.replace(seed=seed)
    if model is not None:
        profile = profile.replace(model_name=model)
    return profile if dtype is None else profile.replace(dtype=dtype)


PAPERS = papers.PACKAGES  # the paper packages with settings, from the registry (helpers.papers)
# The package whose settings each notebook's parameters cell reads (``settings_for(paper)``; notebook 02's, mntp's, are
# the masked-LM recipe, ``mntp_recipe.MASKED_LM_RECIPES``), from the registry
NOTEBOOK_PAPERS = papers.NOTEBOOK_PACKAGES


def settings_for(paper: str, profile: Profile | None = None, examples: int | None = None, prefix: int | None = None):
    """A paper's own settings for a profile: ``helpers.papers.<paper>.settings.SETTINGS[profile.name]``.

    Each notebook keeps its sizes next to the code they drive, one entry per profile. The profile's seed (a seed
    study's ``WORKBOOK_SEED``) reaches them one way: the settings module's ``STUDY_SEED``
    (:class:`helpers.seeds.StudySeed`) names the seed fields that follow it and how far one study seed moves them
    (e.g. notebook 06's heads train from it); a paper whose settings name none reads ``profile.seed`` where it uses a
    seed. Their test-example sizes are ``examples`` times the table's (:func:`scale_examples`; None:
    ``WORKBOOK_EXAMPLES``, 1 when unset), and their trained runs 1/``prefix`` of their lengths (:func:`at_prefix`;
    None: ``WORKBOOK_PREFIX``, make reproduce's default).
    """
    if paper not in PAPERS:
        raise ValueError(f"paper={paper!r} has no settings; expected one of {PAPERS}")
    profile = profile or current()
    module = importlib.import_module(f"helpers.papers.{paper}.settings")
    missing = [name for name in PROFILE_NAMES if name not in module.SETTINGS]
    if missing:
        raise ValueError(f"helpers.papers.{paper}.settings.SETTINGS lacks profiles {missing}")
    study_seed = getattr(module, "STUDY_SEED", None)
    if not isinstance(study_seed, StudySeed):
        raise ValueError(f"helpers.papers.{paper}.settings.STUDY_SEED={study_seed!r} must be a helpers.seeds.StudySeed "
                         "(the seed fields a seed study's seed moves; StudySeed() for none)")
    settings = study_seed.apply(module.SETTINGS[profile.name], profile.seed)
    settings = scale_examples(settings, examples_scale() if examples is None else examples, paper)
    return at_prefix(settings, prefix_divisor() if prefix is None else prefix, paper)
