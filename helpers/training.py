"""Training helpers shared by every notebook: LoRA/QLoRA, AdamW, accumulation, checkpoints, metrics.

Built on accelerate, so ``accelerate launch`` runs the same loop on several GPUs. Batches are a pure
function of ``(seed, step, micro-batch)``, and checkpoints hold the adapter, optimizer, step and RNG
states, so an interrupted run resumes to exactly the result of an uninterrupted one.

MAGNET App. A: LoRA r = 16, α = 32; AdamW β = (0.9, 0.999), ε = 1e-8; lr 3e-5; bf16.
"""
from __future__ import annotations

import json
import random
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from .checks import whole_number
from .device import resolve_four_bit

CHECKPOINT_DIR = "checkpoint"
METRICS_FILE = "metrics.jsonl"


@dataclass(frozen=True)
class LoraSettings:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class TrainConfig:
    steps: int
    batch_size: int
    grad_accum: int = 1
    lr: float = 3e-5
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    eval_every: int = 10
    checkpoint_every: int = 0
    seed: int = 0
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in ("steps", "batch_size", "grad_accum"):
            whole_number(getattr(self, name), name)
        if self.lr <= 0:
            raise ValueError(f"lr={self.lr!r} must be positive")
        for name in ("eval_every", "checkpoint_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)!r} must be >= 0 (0 turns it off)")


def add_lora(model, settings: LoraSettings = LoraSettings(), *, four_bit: bool = False):
    """Wrap ``model`` with LoRA adapters on ``settings.target_modules`` (QLoRA when the model is 4-bit)."""
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    missing = [target for target in settings.target_modules if target not in names]
    if missing:
        raise ValueError(f"target_modules={settings.target_modules}: {missing} not found in {type(model).__name__}")
    if four_bit:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    config = LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                        target_modules=list(settings.target_modules), bias="none")
    return get_peft_model(model, config)


def four_bit_requested(profile) -> bool:
    """The profile's 4-bit wish, honoured only on CUDA with bitsandbytes (else a clear fallback warning)."""
    return resolve_four_bit(profile.load_in_4bit)


# --- Checkpoints ---

def _rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _trainable_state(model) -> dict:
    return {name: tensor.detach().cpu().clone() for name, tensor in model.named_parameters() if tensor.requires_grad}


def save_checkpoint(run_dir: Path, model, optimizer, step: int) -> Path:
    """Adapter (trainable) weights, optimizer, step and RNG states, written atomically to run_dir/checkpoint."""
    target = Path(run_dir) / CHECKPOINT_DIR
    scratch = Path(run_dir) / (CHECKPOINT_DIR + ".tmp")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    torch.save({"trainable": _trainable_state(model), "optimizer": optimizer.state_dict(), "step": step,
                "rng": _rng_state()}, scratch / "state.pt")
    shutil.rmtree(target, ignore_errors=True)
    scratch.rename(target)
    return target


def load_checkpoint(run_dir: Path, model, optimizer) -> int:
    """Restore a checkpoint; returns the step it was taken after (0 when there is none)."""
    path = Path(run_dir) / CHECKPOINT_DIR / "state.pt"
    if not path.exists():
        return 0
    state = torch.load(path, weights_only=False)
    parameters = dict(model.named_parameters())
    unknown = [name for name in state["trainable"] if name not in parameters]
    if unknown:
        raise ValueError(f"checkpoint at {path} does not match the model: unknown parameters {unknown[:3]}")
    with torch.no_grad():
        for name, tensor in state["trainable"].items():
            parameters[name].copy_(tensor)
    optimizer.load_state_dict(state["optimizer"])
    _set_rng_state(state["rng"])
    return int(state["step"])


# --- Metrics ---

def log_metrics(run_dir: Path, record: dict) -> None:
    with open(Path(run_dir) / METRICS_FILE, "a") as handle:
        handle.write(json.dumps(record) + "\n")


def read_metrics(run_dir: Path) -> list[dict]:
    """Every record of a run, in order (what the plotting helpers read)."""
    path = Path(run_dir) / METRICS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _truncate_metrics(run_dir: Path, after_step: int) -> None:
    """Drop records past the checkpoint, so a resumed run logs each step once."""
    kept = [record for record in read_metrics(run_dir) if record["step"] <= after_step]
    path = Path(run_dir) / METRICS_FILE
    path.write_text("".join(json.dumps(record) + "\n" for record in kept))


# --- The loop ---

def train(model, *, batch_for: Callable[[int, int], dict], loss_fn: Callable, config: TrainConfig, run_dir,
          evaluate: Callable | None = None, resume: bool = True, stop_after: int | None = None,
          progress: bool = True, lr_lambda: Callable[[int], float] | None = None) -> list[dict]:
    """Train ``model``'s trainable parameters; returns the run's metric records.

    Args:
        batch_for: ``(step, micro_index) -> batch``; must be deterministic so that resuming is exact.
        loss_fn: ``(model, batch) -> {"loss": ...}``.
        evaluate: ``model -> {name: float}``, run at step 0, every ``eval_every`` steps and at the end.
        stop_after: stop (as if interrupted) once this step is done; a checkpoint is written there.
        lr_lambda: ``step -> factor``; step ``s`` (0-based) uses ``config.lr * lr_lambda(s)`` (a pure function of
            the step, so resuming needs no scheduler state). None keeps ``config.lr`` (see :func:`linear_decay`).
    """
    from accelerate import Accelerator

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    accelerator = Accelerator(mixed_precision="bf16" if torch.cuda.is_available() else "no")
    parameters = [p for p in model.parameters() if p.requires_grad]
    if not parameters:
        raise ValueError("model has no trainable parameters; wrap it with add_lora() first")
    optimizer = torch.optim.AdamW(parameters, lr=config.lr, betas=config.betas, eps=config.eps,
                                  weight_decay=config.weight_decay)
    torch.manual_seed(config.seed)
    start = load_checkpoint(run_dir, model, optimizer) if resume else 0
    if not resume:
        shutil.rmtree(run_dir / CHECKPOINT_DIR, ignore_errors=True)
        (run_dir / METRICS_FILE).unlink(missing_ok=True)
    _truncate_metrics(run_dir, start)
    (run_dir / "config.json").write_text(json.dumps(asdict(config), indent=1, default=str))
    model, optimizer = accelerator.prepare(model, optimizer)
    model.train()

    if start == 0 and evaluate is not None:
        _evaluate(model, evaluate, run_dir, 0)
    last = config.steps if stop_after is None else min(stop_after, config.steps)
    bar = tqdm(range(start, last), desc=f"training {run_dir.name}", disable=not progress or not accelerator.is_main_process,
               initial=start, total=config.steps)
    for step in bar:
        total = 0.0
        for micro in range(config.grad_accum):
            batch = batch_for(step, micro * accelerator.num_processes + accelerator.process_index)
            with accelerator.autocast():
                loss = loss_fn(model, batch)["loss"] / config.grad_accum
            accelerator.backward(loss)
            total += float(loss.detach())
        if config.max_grad_norm:
            accelerator.clip_grad_norm_(parameters, config.max_grad_norm)
        if lr_lambda is not None:
            for group in optimizer.param_groups:
                group["lr"] = config.lr * float(lr_lambda(step))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        done = step + 1
        log_metrics(run_dir, {"step": done, "loss": total})
        bar.set_postfix(loss=f"{total:.3f}")
        if evaluate is not None and (done == config.steps or (config.eval_every and done % config.eval_every == 0)):
            _evaluate(model, evaluate, run_dir, done)
        if done == last and done < config.steps or (config.checkpoint_every and done % config.checkpoint_every == 0):
            save_checkpoint(run_dir, accelerator.unwrap_model(model), optimizer, done)
    model.eval()
    return read_metrics(run_dir)


def linear_decay(steps: int) -> Callable[[int], float]:
    """The HF Trainer default schedule (no warm-up): step ``s`` of ``steps`` runs at ``1 - s / steps`` of the lr."""
    steps = whole_number(steps, "steps")
    return lambda step: max(0.0, 1.0 - step / steps)


def _evaluate(model, evaluate: Callable, run_dir: Path, step: int) -> None:
    model.eval()
    with torch.no_grad():
        scores = evaluate(model)
    model.train()
    log_metrics(run_dir, {"step": step, **{name: float(value) for name, value in scores.items()}})


ADAPTER_METADATA = "workbook.json"


def save_adapter(model, path, metadata: dict | None = None) -> Path:
    """Save a peft adapter (small) with its config, plus ``metadata`` (e.g. the mask token) in workbook.json."""
    path = Path(path)
    model.save_pretrained(path)
    (path / ADAPTER_METADATA).write_text(json.dumps(metadata or {}, indent=1))
    return path


def adapter_metadata(path) -> dict:
    file = Path(path) / ADAPTER_METADATA
    return json.loads(file.read_text()) if file.exists() else {}


def load_adapter(model, path):
    """Attach a saved adapter to a base model."""
    from peft import PeftModel

    if not (Path(path) / "adapter_config.json").exists():
        raise ValueError(f"path={str(path)!r} holds no adapter (adapter_config.json missing)")
    return PeftModel.from_pretrained(model, str(path))


def adapter_path(kind: str, model_name: str) -> Path:
    """Where notebook 02 caches an adapter for later notebooks, e.g. data/cache/adapters/mntp-embedded-smollm2-135m."""
    from .paths import cache_dir

    slug = model_name.replace(":", "-").replace("/", "-")
    return cache_dir() / "adapters" / f"{kind}-{slug}"


def masked_lm_experiment(model, tokenizer, *, objective: str, train_blocks: torch.Tensor, eval_batches: list[dict],
                         config: TrainConfig, run_dir, mask_id: int, masking=None, mask=None,
                         lora: LoraSettings = LoraSettings(), four_bit: bool = False, resume: bool = True,
                         stop_after: int | None = None, progress: bool = True):
    """Train ``objective`` ("mntp" or "mtp") with LoRA under ``mask`` (bidirectional by default).

    Returns ``(peft_model, records)``. Batches are drawn from ``train_blocks`` as a pure function of
    ``(config.seed, step, micro)``, so two objectives with one seed see the same data and selections.
    """
    from . import masks as M
    from . import objectives as O

    O.check_objective(objective)
    masking = masking or O.MaskingConfig()
    mask = mask or M.bidirectional
    limit = getattr(model.config, "max_position_embeddings", train_blocks.shape[1])
    if train_blocks.shape[1] > limit:
        raise ValueError(f"sequence length {train_blocks.shape[1]} exceeds the model's max_position_embeddings={limit}")
    peft_model = model if hasattr(model, "peft_config") else add_lora(model, lora, four_bit=four_bit)
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

    records = train(peft_model, batch_for=batch_for, loss_fn=lambda m, b: O.masked_lm_loss(m, b, mask), config=config,
                    run_dir=run_dir, evaluate=lambda m: O.evaluate_masked_lm(m, eval_batches, mask), resume=resume,
                    stop_after=stop_after, progress=progress)
    return peft_model, records


def run_summary(runs: dict[str, list[dict]], window: int = 5):
    """One row per run: training loss at the start and end (mean of ``window`` steps) and eval accuracy at step 0, best and end."""
    import pandas as pd

    rows = {}
    for label, records in runs.items():
        losses = [r["loss"] for r in records if "loss" in r]
        evals = [(r["step"], r["eval_accuracy"]) for r in records if "eval_accuracy" in r]
        if not losses or not evals:
            raise ValueError(f"runs[{label!r}] has no training or evaluation records")
        best_step, best = max(evals, key=lambda item: item[1])
        rows[label] = {"loss, first steps": float(np.mean(losses[:window])), "loss, last steps": float(np.mean(losses[-window:])),
                       "eval acc, step 0": evals[0][1], "eval acc, best": best, "best at step": best_step,
                       "eval acc, final": evals[-1][1], "steps": evals[-1][0]}
    return pd.DataFrame(rows).T


def describe_mntp_vs_mtp(summary) -> str:
    """The App. E comparison in words, computed from :func:`run_summary`'s table."""
    lines = []
    for label in summary.index:
        row = summary.loc[label]
        trend = "rose" if row["eval acc, final"] > row["eval acc, step 0"] else "fell"
        lines.append(f"{label}: training loss {row['loss, first steps']:.2f} -> {row['loss, last steps']:.2f}; held-out accuracy "
                     f"{trend} from {row['eval acc, step 0']:.3f} to {row['eval acc, final']:.3f} "
                     f"(best {row['eval acc, best']:.3f} at step {int(row['best at step'])}).")
    if {"MNTP", "MTP"} <= set(summary.index):
        mntp, mtp = summary.loc["MNTP"], summary.loc["MTP"]
        mtp_loss_fell = mtp["loss, last steps"] < mtp["loss, first steps"]
        mtp_acc_fell = mtp["eval acc, final"] < mtp["eval acc, best"]
        mntp_acc_rose = mntp["eval acc, final"] > mntp["eval acc, step 0"]
        matches = mtp_loss_fell and mtp_acc_fell and mntp_acc_rose
        lines.append(f"Paper (App. E): MTP loss converges while its eval accuracy deteriorates; MNTP accuracy rises. "
                     f"Ours: MTP loss fell: {mtp_loss_fell}; MTP accuracy ended below its best: {mtp_acc_fell}; "
                     f"MNTP accuracy rose: {mntp_acc_rose}; MNTP ends {'above' if mntp['eval acc, final'] > mtp['eval acc, final'] else 'below'} "
                     f"MTP ({mntp['eval acc, final']:.3f} vs {mtp['eval acc, final']:.3f}). "
                     f"{'The finding is reproduced.' if matches else 'The finding is not fully reproduced at this scale.'}")
    return "\n".join(lines)


def load_or_train_mntp(profile=None, *, merge: bool = True, progress: bool = True):
    """The offline masked LM: the profile's decoder with notebook 02's MNTP adapter, bidirectional.

    Returns ``(model, tokenizer, mask_id)``. The adapter comes from ``adapter_path("mntp", model_name)``;
    when notebook 02 has not run, a short MNTP run (half of ``mlm_steps``) trains one first and caches it.
    The model predicts token l from output l - 1 under ``masks.bidirectional``. With ``merge`` (and no
    4-bit), the adapter is merged into the weights for faster inference.
    """
    from . import data, models
    from . import objectives as O
    from . import profiles
    from .paths import runs_dir

    profile = profile or profiles.current()
    path = adapter_path("mntp", profile.model_name)
    model, tokenizer = models.load_model(profile.model_name)
    four_bit = four_bit_requested(profile)
    if not (path / "adapter_config.json").exists():
        print(f"no MNTP adapter at {path}; training a short one (run notebook 02 for the full run)")
        mask_id = O.resolve_mask_token(tokenizer, "underscore")
        blocks = data.token_blocks(tokenizer, (p.text for p in data.load_paragraphs(profile.corpus, "train")),
                                   profile.mlm_seq_len, max_blocks=profile.mlm_train_blocks)
        held_out = data.token_blocks(tokenizer, (p.text for p in data.load_paragraphs(profile.corpus, "validation")),
                                     profile.mlm_seq_len, max_blocks=profile.mlm_batch_size)
        evals = O.fixed_eval_batches("mntp", held_out, batch_size=profile.mlm_batch_size, num_batches=1, mask_id=mask_id,
                                     vocab_size=len(tokenizer), special_ids=tokenizer.all_special_ids)
        config = TrainConfig(steps=max(1, profile.mlm_steps // 2), batch_size=profile.mlm_batch_size,
                             grad_accum=profile.mlm_grad_accum, lr=profile.mlm_lr, eval_every=0, seed=profile.seed)
        trained, _ = masked_lm_experiment(model, tokenizer, objective="mntp", train_blocks=blocks, eval_batches=evals,
                                          config=config, run_dir=runs_dir() / f"mntp_fallback_{profile.name}",
                                          mask_id=mask_id, lora=LoraSettings(r=profile.lora_r, alpha=profile.lora_alpha),
                                          four_bit=four_bit, progress=progress)
        save_adapter(trained, path, {"mask_token": "underscore", "objective": "mntp"})
        model, tokenizer = models.load_model(profile.model_name)
    mask_token = adapter_metadata(path).get("mask_token", "underscore")
    mask_id = O.resolve_mask_token(tokenizer, mask_token, model=model)
    model = load_adapter(model, path)
    if merge and not four_bit:
        model = model.merge_and_unload()
    return model.eval(), tokenizer, mask_id
