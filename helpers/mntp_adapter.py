"""Notebook 02's masked-LM runs and the MNTP adapter the later notebooks read (MAGNET App. A, App. E).

Every run and adapter is keyed by :func:`masked_lm_run_key`: notebook 02's MNTP and MTP runs
(``helpers.papers.mntp.experiment``), the adapter :func:`mntp_adapter` looks up, and :func:`load_or_train_mntp`'s
short fallback run when notebook 02 has not run. The recipe's sizes per profile live in :mod:`helpers.mntp_recipe`.
"""
from __future__ import annotations

from pathlib import Path

import torch

from . import adapters, data, metrics, models, profiles, store, training
from . import masks as M
from . import objectives as O
from .mntp_recipe import (FALLBACK, MASKED_LM_VERSION, NOTEBOOK_02, MaskedLMRecipe, masked_lm_recipe,
                          record_loaded_mntp_adapter)
from .training import LoraSettings, TrainConfig


def mlm_train_config(profile, recipe: MaskedLMRecipe | None = None, *, fallback: bool = False) -> TrainConfig:
    """Notebook 02's TrainConfig from the profile and its recipe; ``fallback``: :func:`load_or_train_mntp`'s short
    run (half the steps, no evaluations or checkpoints)."""
    recipe = recipe or masked_lm_recipe(profile)
    if fallback:
        return TrainConfig(steps=max(1, recipe.steps // 2), batch_size=recipe.batch_size, grad_accum=recipe.grad_accum,
                           lr=recipe.lr, eval_every=0, seed=profile.seed,
                           gradient_checkpointing=profile.gradient_checkpointing)
    return TrainConfig(steps=recipe.steps, batch_size=recipe.batch_size, grad_accum=recipe.grad_accum, lr=recipe.lr,
                       eval_every=recipe.eval_every, checkpoint_every=recipe.checkpoint_every, seed=profile.seed,
                       gradient_checkpointing=profile.gradient_checkpointing)


def masked_lm_run_key(profile, objective: str, mask_token: str = "underscore", config: TrainConfig | None = None,
                      lora: LoraSettings | None = None, *, recipe: MaskedLMRecipe | None = None,
                      fallback: bool = False) -> dict:
    """Everything that changes a masked-LM run of MAGNET App. E: its adapter is keyed by this, its run folder by this
    without the length (:func:`run_folder_key`).

    The one place the key is built: notebook 02's MNTP and MTP runs (``helpers.papers.mntp.experiment``), the
    adapter :func:`mntp_adapter` looks up, and :func:`load_or_train_mntp`'s fallback. ``config`` and ``lora``
    default to :func:`mlm_train_config` (of ``recipe``, the profile's own by default) and
    :func:`helpers.training.lora_settings`; ``fallback``: the short run's config and its single held-out batch.
    """
    recipe = recipe or masked_lm_recipe(profile)
    config = config or mlm_train_config(profile, recipe, fallback=fallback)
    return store.canonical_settings({
        "version": MASKED_LM_VERSION, "objective": objective, "mask_token": mask_token, "model": profile.model_name,
        "dtype": models.weight_dtype_name(profile), "four_bit": profile.load_in_4bit, "corpus": profile.corpus,
        "seq_len": recipe.seq_len, "train_blocks": recipe.train_blocks,
        "eval_batches": 1 if fallback else recipe.eval_batches,
        "config": config, "lora": lora or training.lora_settings(profile), "masking": O.MaskingConfig(),
        "steps": config.steps})


def run_folder_key(key: dict) -> dict:
    """A masked-LM key (:func:`masked_lm_run_key`) without its length: what names the run folder, which holds the
    run whatever its length (``training.train`` extends it or reads its prefix). The adapter a run saves, and what
    the later notebooks read, is keyed by the full key, length included."""
    return store.canonical_without(key, ("steps",))


def notebook02_mntp_run(profile) -> Path:
    """The run folder notebook 02 trains its MNTP adapter in, under the profile's recipe."""
    return store.run_dir_for(f"02_mntp_{profile.name}", run_folder_key(masked_lm_run_key(profile, "mntp")))


def mntp_heldout_curve(profile) -> list[tuple[int, float]] | None:
    """The held-out curve of the MNTP adapter the later notebooks read: notebook 02's MNTP run's held-out
    masked-token accuracy (``eval_accuracy``) at every evaluation, ``(step, value)``; None when that run has not
    been trained or logged no evaluation (the short fallback adapter logs none). Rows of notebooks 03, 05 and 07
    that rest on the adapter's training pass it as their budget check (``claims.curve``)."""
    folder = notebook02_mntp_run(profile)
    if not (folder / training.METRICS_FILE).exists():
        return None
    points = metrics.curve_points(training.read_metrics(folder), "eval_accuracy")
    return points or None


def mntp_adapter(profile) -> tuple[Path, dict] | None:
    """Notebook 02's MNTP adapter for ``profile`` (default mask token "underscore"), else the short fallback one;
    ``(path, settings)`` of the first that exists, or None."""
    for settings in (masked_lm_run_key(profile, "mntp"), masked_lm_run_key(profile, "mntp", fallback=True)):
        path = adapters.adapter_path("mntp", profile.model_name, settings)
        if adapters.adapter_exists(path):
            return path, settings
    return None


def heldout_batches(tokenizer, corpus: str, *, seq_len: int, batch_size: int, num_batches: int, mask_id: int,
                    objective: str = "mntp", asked: str | None = None) -> list[dict]:
    """The workbook's held-out masked-LM batches: the first ``batch_size x num_batches`` packed blocks of ``seq_len``
    tokens of ``corpus``'s validation split (never trained on), corrupted once for ``objective`` with the fixed seed
    of :func:`helpers.objectives.fixed_eval_batches` (MNTP: 20 % of the tokens, 80/10/10), so that every evaluation
    scores the same positions and MNTP and MTP the same selections. ``asked``: the size as the caller's settings name
    it, for the error when the split holds fewer blocks (default: the batches asked for)."""
    wanted = batch_size * num_batches
    blocks = data.token_blocks(tokenizer, (p.text for p in data.load_paragraphs(corpus, "validation")), seq_len,
                               max_blocks=wanted)
    if len(blocks) < wanted:
        raise ValueError(f"the validation split of corpus={corpus!r} holds {len(blocks)} blocks of {seq_len} tokens, "
                         f"fewer than {asked or f'{num_batches} batches of {batch_size}'}")
    return O.fixed_eval_batches(objective, blocks, batch_size=batch_size, num_batches=num_batches, mask_id=mask_id,
                                vocab_size=len(tokenizer), special_ids=tokenizer.all_special_ids)


def notebook02_heldout_batches(tokenizer, profile, mask_id: int, objective: str = "mntp", *,
                               recipe: MaskedLMRecipe | None = None, fallback: bool = False) -> list[dict]:
    """Notebook 02's held-out set (:func:`heldout_batches`) under ``recipe`` (the profile's own by default):
    ``eval_batches`` batches of ``batch_size`` blocks of ``seq_len`` tokens, or the single batch of
    :func:`load_or_train_mntp`'s short fallback run (``fallback``, as its run key says). Notebook 02 scores its MNTP
    and MTP runs on it, and notebook 07 the adapters it compares."""
    recipe = recipe or masked_lm_recipe(profile)
    return heldout_batches(tokenizer, profile.corpus, seq_len=recipe.seq_len, batch_size=recipe.batch_size,
                           num_batches=1 if fallback else recipe.eval_batches, mask_id=mask_id, objective=objective)


def masked_lm_experiment(model, tokenizer, *, objective: str, train_blocks: torch.Tensor, eval_batches: list[dict],
                         config: TrainConfig, run_dir, mask_id: int, masking=None, mask=None,
                         lora: LoraSettings = LoraSettings(), four_bit: bool = False, resume: bool = True,
                         stop_after: int | None = None, progress: bool = True, mask_tensor: bool = True):
    """Train ``objective`` ("mntp" or "mtp") with LoRA under ``mask`` (bidirectional by default).

    Returns ``(peft_model, records)``. Batches are drawn from ``train_blocks`` as a pure function of
    ``(config.seed, step, micro)``, so two objectives with one seed see the same data and selections.
    ``mask_tensor=False``: the training loss passes the bidirectional mask to sdpa as no mask tensor
    (``objectives.masked_lm_loss``; the held-out evaluation renders it as before), a run keyed apart; the default
    renders it, as every run so far.
    """
    O.check_objective(objective)
    if not isinstance(train_blocks, torch.Tensor) or train_blocks.dim() != 2 or train_blocks.numel() == 0 \
            or train_blocks.is_floating_point():
        raise ValueError(f"train_blocks has shape {tuple(getattr(train_blocks, 'shape', ()))}; expected a non-empty "
                         "(blocks, length) tensor of token ids (data.token_blocks)")
    # the training blocks first: a block too long for the model is named as such, whatever else is wrong
    models.check_fits(model, train_blocks.shape[1], "train_blocks' block length")
    if not isinstance(eval_batches, (list, tuple)) or not eval_batches:
        raise ValueError(f"eval_batches={eval_batches!r} must be a non-empty list of batches (heldout_batches)")
    masking = masking or O.MaskingConfig()
    mask = mask or M.bidirectional
    O.check_mask_id(model, mask_id, tokenizer)
    peft_model = model if hasattr(model, "peft_config") else \
        training.add_lora(model, lora, four_bit=four_bit, seed=config.seed)
    device = next(peft_model.parameters()).device
    special_ids = tokenizer.all_special_ids
    vocab_size = peft_model.get_input_embeddings().weight.shape[0]

    def batch_for(step: int, micro: int) -> dict:
        generator = O.seeded_generator(config.seed, step, micro)
        rows = torch.randint(len(train_blocks), (config.batch_size,), generator=generator)
        ids = train_blocks[rows]
        batch = O.make_batch(objective, ids, torch.ones_like(ids), mask_id=mask_id, vocab_size=vocab_size,
                             special_ids=special_ids, config=masking, generator=generator)
        return O.to_device(batch, device)

    identity = {"objective": objective, "mask_id": mask_id, "masking": masking, "mask": mask, "lora": lora,
                "train_blocks": train_blocks, "eval_batches": eval_batches,
                **({} if mask_tensor else {"mask_tensor": False})}
    records = training.train(peft_model, batch_for=batch_for,
                             loss_fn=lambda m, b: O.masked_lm_loss(m, b, mask, mask_tensor=mask_tensor),
                             config=config, run_dir=run_dir,
                             evaluate=lambda m: O.evaluate_masked_lm(m, eval_batches, mask), resume=resume,
                             stop_after=stop_after, progress=progress, settings=identity)
    return peft_model, records


def load_or_train_mntp(profile=None, *, merge: bool = True, progress: bool = True):
    """The offline masked LM: the profile's decoder with notebook 02's MNTP adapter, bidirectional.

    Returns ``(model, tokenizer, mask_id)``. The adapter is the one notebook 02 trains under the profile's
    settings and the default mask token (``mntp_adapter``); when it has not run, a short MNTP run (half of
    the recipe's steps) trains one first and caches it under its own settings. The adapter's stored settings are
    checked against the ones asked for, so an adapter trained otherwise is never read. The model predicts
    token l from output l - 1 under ``masks.bidirectional``. With ``merge`` (and no 4-bit), the adapter is
    merged into the weights for faster inference.
    """
    profile = profile or profiles.current()
    model, tokenizer = models.load_model(profile.model_name)
    four_bit = training.four_bit_requested(profile)
    found = mntp_adapter(profile)
    holder = store.holder_of(notebook02_mntp_run(profile)) if found is None else None
    if holder is not None:
        raise store.InUseError(f"notebook 02 is training the MNTP adapter right now ({holder}, in "
                               f"{notebook02_mntp_run(profile)}); wait for it to finish, then run this again, rather "
                               "than train a short fallback adapter beside it")
    if found is None:
        lora = training.lora_settings(profile)
        config = mlm_train_config(profile, fallback=True)
        settings = masked_lm_run_key(profile, "mntp", config=config, lora=lora, fallback=True)
        path = adapters.adapter_path("mntp", profile.model_name, settings)
        print(f"no MNTP adapter from notebook 02; training a short one into {path} (run notebook 02 for the full run)")
        mask_id = O.resolve_mask_token(tokenizer, "underscore")
        recipe = masked_lm_recipe(profile)
        blocks = data.token_blocks(tokenizer, (p.text for p in data.load_paragraphs(profile.corpus, "train")),
                                   recipe.seq_len, max_blocks=recipe.train_blocks)
        evals = notebook02_heldout_batches(tokenizer, profile, mask_id, fallback=True)
        trained, _ = masked_lm_experiment(model, tokenizer, objective="mntp", train_blocks=blocks, eval_batches=evals,
                                          config=config, run_dir=store.run_dir_for(f"mntp_fallback_{profile.name}",
                                                                                   run_folder_key(settings)),
                                          mask_id=mask_id, lora=lora, four_bit=four_bit, progress=progress)
        adapters.save_adapter(trained, path, {**settings, "mask_id": mask_id})
        model, tokenizer = models.load_model(profile.model_name)
        found = path, settings
    path, settings = found
    mask_id = O.resolve_mask_token(tokenizer, settings["mask_token"], model=model)
    adapters.check_adapter_mask_id(path, mask_id, tokenizer)
    model = adapters.load_adapter(model, path, expected=settings)
    source = FALLBACK if settings == masked_lm_run_key(profile, "mntp", fallback=True) else NOTEBOOK_02
    record_loaded_mntp_adapter(profile.name, source, store.fingerprint(settings))
    if source == FALLBACK:
        print(f"[mntp] using the short fallback MNTP adapter ({path}); run notebook 02 for the full one")
    if merge and not four_bit:
        model = model.merge_and_unload()
    return model.eval(), tokenizer, mask_id
