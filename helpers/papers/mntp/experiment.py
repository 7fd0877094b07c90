"""Notebook 02's experiment (MAGNET App. E, Fig. 7): MNTP and MTP trained from one base, on one data stream, under
one budget and seed, scored on the same held-out tokens; and the MNTP adapter that notebooks 03, 05 and 06 read.

Both runs use LoRA (App. A: r = 16, α = 32 on the attention projections; AdamW 0.9, 0.999, 1e-8) under the
bidirectional mask, with the sizes of the profile's masked-LM recipe (:mod:`.settings`). Each run folder and the
adapter are keyed by ``mntp_adapter.masked_lm_run_key``, the one key ``mntp_adapter.mntp_adapter`` also looks up, so the
adapter saved here under the default mask token is the one the later notebooks find.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ... import adapters, data, distributed, mntp_adapter, mntp_recipe, models, store, training
from ... import masks as M
from ... import objectives as O
from . import mechanism


@dataclass(frozen=True)
class MaskedLMData:
    """Training blocks and the fixed held-out batches of each objective (App. E scores both on the same tokens)."""

    mask_id: int
    train_blocks: torch.Tensor
    eval_batches: dict[str, list[dict]]  # objective -> batches, corrupted once with a fixed seed
    recipe: mntp_recipe.MaskedLMRecipe

    def describe(self) -> str:
        return (f"{len(self.train_blocks)} training blocks x {self.recipe.seq_len} tokens; "
                f"{self.recipe.eval_batches} held-out batches of {self.recipe.batch_size}")


def load_data(tokenizer, profile, recipe: mntp_recipe.MaskedLMRecipe, *, mask_token: str = "underscore") -> MaskedLMData:
    """Packed blocks of ``recipe.seq_len`` tokens from the training split, and ``recipe.eval_batches`` held-out
    batches of ``recipe.batch_size`` blocks from the validation split for each objective, corrupted once with a fixed
    seed (``mntp_adapter.notebook02_heldout_batches``) so every evaluation scores the same positions."""
    mask_id = mechanism.resolve_mask_token(tokenizer, mask_token)
    train_blocks = data.token_blocks(tokenizer, (p.text for p in data.load_paragraphs(profile.corpus, "train")),
                                     recipe.seq_len, max_blocks=recipe.train_blocks)
    eval_batches = {objective: mntp_adapter.notebook02_heldout_batches(tokenizer, profile, mask_id, objective,
                                                                       recipe=recipe)
                    for objective in mechanism.OBJECTIVES}
    return MaskedLMData(mask_id, train_blocks, eval_batches, recipe)


def reference_accuracies(model, eval_batches: dict[str, list[dict]]) -> dict[str, float]:
    """The plain causal model scored on each objective's held-out labels: its own next-token alignment (MNTP) and
    the l-to-l one (MTP), with left context only (Fig. 7's reference lines)."""
    return {f"causal base, {objective.upper()} labels":
            O.evaluate_masked_lm(model, eval_batches[objective], M.causal)["eval_accuracy"]
            for objective in mechanism.OBJECTIVES}


@dataclass
class Comparison:
    """The two runs of Fig. 7: their LoRA models, metric records (labelled "MNTP" and "MTP") and run keys."""

    adapters: dict[str, object]  # objective -> the trained peft model
    runs: dict[str, list[dict]]  # "MNTP" / "MTP" -> the metric records each run logged under runs/
    keys: dict[str, dict]  # objective -> mntp_adapter.masked_lm_run_key
    mntp_adapter_path: Path | None = None


def run_objective(profile, tokenizer, mlm_data: MaskedLMData, objective: str, *, recipe: mntp_recipe.MaskedLMRecipe,
                  mask_token: str = "underscore", resume: bool = True, stop_after: int | None = None,
                  progress: bool = True):
    """Train ``objective`` ("mntp" or "mtp") with LoRA on a fresh copy of the profile's base model.

    Returns ``(peft_model, records, key)``; the run folder ``runs/02_<objective>_<profile>_<fingerprint>``
    (:func:`run_folder`) is keyed by every setting (mask token, micro-batch and seed included), so another setting
    trains afresh. ``stop_after``: stop after that step, as an interruption would (``training.train``).
    """
    config, lora = mntp_adapter.mlm_train_config(profile, recipe), training.lora_settings(profile)
    key = mntp_adapter.masked_lm_run_key(profile, objective, mask_token, config, lora, recipe=recipe)
    wanted = mechanism.resolve_mask_token(tokenizer, mask_token)
    if wanted != mlm_data.mask_id:
        raise ValueError(f"mlm_data was built for mask id {mlm_data.mask_id} but mask_token={mask_token!r} is id "
                         f"{wanted}: rebuild the data (load_data) with the same mask token before training")
    base, _ = models.load_model(profile.model_name)
    adapter, records = mntp_adapter.masked_lm_experiment(
        base, tokenizer, objective=objective, train_blocks=mlm_data.train_blocks,
        eval_batches=mlm_data.eval_batches[objective], config=config,
        run_dir=run_folder(profile, objective, key), mask_id=mlm_data.mask_id, lora=lora,
        four_bit=training.four_bit_requested(profile), resume=resume, stop_after=stop_after, progress=progress)
    return adapter, records, key


def run_folder(profile, objective: str, key: dict) -> Path:
    """Where :func:`run_objective` trains ``objective`` under ``key`` (``mntp_adapter.masked_lm_run_key``)."""
    return store.run_dir_for(f"02_{objective}_{profile.name}", mntp_adapter.run_folder_key(key))


def train_command(profile, seed: int | None, *, objective: str, mask_token: str = "underscore",
                  micro_batch: int | None = None, stop_after: int | None = None, progress: bool = True) -> list[Path]:
    """Notebook 02's ``objective`` run as a command (``python -m helpers.train mntp|mtp``, under ``accelerate launch``
    too): the notebook's own calls in its order (sections 2 and 4: :func:`load_data` on the profile's recipe,
    ``memory.fit_training``, :func:`run_objective`), so the run folder is the notebook's and the notebook afterwards
    finds the run finished and only evaluates. A finished MNTP run's adapter is saved where notebooks 03, 05 and 06
    look (:func:`save_mntp_adapter`). ``seed``: the run's seed (``profile.seed`` when None), part of its key;
    ``micro_batch``: split each step's rows into micro-batches of this many (``distributed.split_step``).
    Returns the run folder.
    """
    from ... import memory

    if seed is not None:
        profile = profile.replace(seed=seed)
    tokenizer = models.load_tokenizer(profile.model_name)
    recipe = mntp_recipe.masked_lm_recipe(profile)
    mlm_data = load_data(tokenizer, profile, recipe, mask_token=mask_token)
    fitted = distributed.split_step(memory.fit_training("02", profile, recipe), micro_batch)
    adapter, records, key = run_objective(profile, tokenizer, mlm_data, objective, recipe=fitted, mask_token=mask_token,
                                          stop_after=stop_after, progress=progress)
    if objective == "mntp" and max(record["step"] for record in records) == fitted.steps:
        save_mntp_adapter(adapter, profile, key, mlm_data.mask_id)
    return [run_folder(profile, objective, key)]


def train_both(profile, tokenizer, mlm_data: MaskedLMData, *, recipe: mntp_recipe.MaskedLMRecipe,
               mask_token: str = "underscore", resume: bool = True) -> Comparison:
    """MNTP, then MTP (:func:`run_objective`), from the same base, data, budget and seed. The MNTP adapter is saved
    under its run key (:func:`save_mntp_adapter`) as soon as the MNTP run finishes, before the MTP run starts: a
    notebook that needs it meanwhile (03, 05, 06, 07) finds it instead of training the short fallback. ``recipe``:
    the profile's recipe as ``memory.fit_training`` fitted it to this device."""
    comparison = Comparison({}, {}, {})
    for objective in mechanism.OBJECTIVES:
        adapter, records, key = run_objective(profile, tokenizer, mlm_data, objective, recipe=recipe,
                                              mask_token=mask_token, resume=resume)
        comparison.adapters[objective], comparison.runs[objective.upper()], comparison.keys[objective] = \
            adapter, records, key
        if objective == "mntp":
            comparison.mntp_adapter_path = save_mntp_adapter(adapter, profile, key, mlm_data.mask_id)
    return comparison


def save_mntp_adapter(adapter, profile, key: dict, mask_id: int) -> Path:
    """Save the MNTP adapter to ``adapters.adapter_path("mntp", model, key)`` with ``key`` and the mask id it was
    trained with as its metadata: with the default mask token this is where ``mntp_adapter.mntp_adapter`` looks, and
    what it checks on load (``adapters.check_adapter_mask_id``)."""
    return adapters.save_adapter(adapter, adapters.adapter_path("mntp", profile.model_name, key),
                                 {**key, "mask_id": int(mask_id)})


@torch.no_grad()
def masked_lm_row_hits(model, batches: list[dict], mask: M.Mask = M.bidirectional) -> tuple[np.ndarray, np.ndarray]:
    """Per held-out block: masked tokens predicted correctly and masked tokens (``objectives.masked_lm_loss``'s
    counts, one row at a time), for a bootstrap over blocks."""
    device = next(model.parameters()).device
    correct, counts = [], []
    for batch in batches:
        batch = O.to_device(batch, device)
        for row in range(batch["input_ids"].shape[0]):
            one = {name: value[row:row + 1] for name, value in batch.items() if isinstance(value, torch.Tensor)}
            if (one["labels"] != mechanism.IGNORE_INDEX).any():
                result = mechanism.masked_lm_loss(model, one, mask)
                correct.append(int(result["correct"]))
                counts.append(int(result["count"]))
    return np.array(correct, dtype=float), np.array(counts, dtype=float)


def final_hits(comparison: Comparison, mlm_data: MaskedLMData) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """"MNTP"/"MTP" -> :func:`masked_lm_row_hits` of each final adapter on its objective's held-out batches."""
    return {objective.upper(): masked_lm_row_hits(comparison.adapters[objective], mlm_data.eval_batches[objective])
            for objective in mechanism.OBJECTIVES}
