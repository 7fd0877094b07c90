"""Training helpers shared by every notebook: LoRA/QLoRA, AdamW, accumulation, checkpoints, metrics.

Built on accelerate, so ``accelerate launch`` runs the same loop in several processes (one per GPU) with the same
result: batches, and every random draw inside a micro-batch (LoRA dropout), are pure functions of
``(seed, step, micro-batch)``; the processes share each step's micro-batches and sum their gradients (:func:`train`;
the processes' plumbing is :mod:`helpers.distributed`). Checkpoints hold the adapter, optimizer, step and RNG states,
so an interrupted run resumes to exactly the result of an uninterrupted one, under any number of processes. Trained
adapters are saved and read by :mod:`helpers.adapters`; notebook 02's masked-LM runs and the MNTP adapter the later
notebooks read are :mod:`helpers.mntp_adapter`'s.

MAGNET App. A: LoRA r = 16, α = 32; AdamW β = (0.9, 0.999), ε = 1e-8; lr 3e-5; bf16 (fp16 with a gradient
scaler on GPUs without native bf16, see ``helpers.device.precision``).
"""
from __future__ import annotations

import inspect
import json
import os
import random
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from . import distributed, schedules, store
from .adapters import peft_quietly
from .checks import real_number, whole_number
from .device import resolve_four_bit, training_mixed_precision

CHECKPOINT_DIR = "checkpoint"
METRICS_FILE = "metrics.jsonl"


@dataclass(frozen=True)
class LoraSettings:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    # How LoRA's A matrices are drawn: "seeded", after torch.manual_seed(the run's seed) in add_lora. PyTorch's default
    # generator starts from a random seed in every process, so unseeded draws differed between reruns. A field of
    # every run and adapter key, so nothing trained with unseeded draws is reused.
    init: str = "seeded"

    def __post_init__(self):
        if self.init != "seeded":
            raise ValueError(f"init={self.init!r}: expected 'seeded' (LoRA's A matrices drawn after torch.manual_seed)")
        whole_number(self.r, "r", 1, "the LoRA rank")
        real_number(self.alpha, "alpha", low=0.0, low_open=True, what="the LoRA scale numerator")
        real_number(self.dropout, "dropout", low=0.0, high=1.0, high_open=True)
        if isinstance(self.target_modules, str) or not self.target_modules or not all(
                isinstance(name, str) and name for name in self.target_modules):
            raise ValueError(f"target_modules={self.target_modules!r} must be a non-empty tuple of module names, "
                             "e.g. ('q_proj', 'v_proj')")


RNG_SCHEME = "per-micro-batch"  # torch draws inside a micro-batch come from (seed, step, micro-batch): 1 or N processes


@dataclass(frozen=True)
class TrainConfig:
    # The run's length keys nothing (store's key=False): a longer request extends the run (train's "Extending").
    steps: int = field(metadata={"key": False})
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
    gradient_checkpointing: bool = False  # recompute each decoder layer in backward (helpers.memory)
    # Where the random draws inside a micro-batch's forward and backward (LoRA dropout, teacher forcing) come from:
    # "per-micro-batch", torch's generator seeded by (seed, step, micro-batch) around each micro-batch
    # (micro_batch_seed), so N processes draw what one process draws and a resumed run what an uninterrupted one
    # does. Runs trained with one stream over the whole run drew otherwise: a field of every run key, so they are
    # never resumed under this rule.
    rng: str = RNG_SCHEME  # keys that hold no TrainConfig name the scheme themselves
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.rng != "per-micro-batch":
            raise ValueError(f"rng={self.rng!r}: expected 'per-micro-batch' (torch seeded by (seed, step, micro-batch) "
                             "around each micro-batch)")
        for name in ("steps", "batch_size", "grad_accum"):
            whole_number(getattr(self, name), name)
        for name in ("eval_every", "checkpoint_every"):
            whole_number(getattr(self, name), name, 0, "0 turns it off")
        whole_number(self.seed, "seed", 0)
        real_number(self.lr, "lr", low=0, low_open=True, what="the AdamW learning rate")
        if not isinstance(self.betas, (tuple, list)) or len(self.betas) != 2:
            raise ValueError(f"betas={self.betas!r} must be a pair (beta1, beta2) of numbers in [0, 1)")
        for index, beta in enumerate(self.betas):
            real_number(beta, f"betas[{index}]", low=0, high=1, high_open=True, what="AdamW's moment decay")
        real_number(self.eps, "eps", low=0, low_open=True, what="AdamW's denominator term")
        real_number(self.weight_decay, "weight_decay", low=0)
        real_number(self.max_grad_norm, "max_grad_norm", low=0, what="0 turns clipping off")
        if not isinstance(self.extra, dict):
            raise ValueError(f"extra={self.extra!r} must be a dict")



def add_lora(model, settings: LoraSettings = LoraSettings(), *, four_bit: bool = False, seed: int | None = None):
    """Wrap ``model`` with LoRA adapters on ``settings.target_modules`` (QLoRA when the model is 4-bit).

    ``seed``: ``torch.manual_seed(seed)`` first, so the A matrices are the same in every rerun (B starts at zero).
    None leaves the generator alone, for a caller that seeded it itself.
    """
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if seed is not None:
        torch.manual_seed(whole_number(seed, "seed", 0))

    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    missing = [target for target in settings.target_modules if target not in names]
    if missing:
        raise ValueError(f"target_modules={settings.target_modules}: {missing} not found in {type(model).__name__}")
    if four_bit:
        with peft_quietly():
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    config = LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                        target_modules=list(settings.target_modules), bias="none")
    with peft_quietly():
        return get_peft_model(model, config)


def enable_gradient_checkpointing(model) -> None:
    """Keep only each decoder layer's input and recompute the layer in backward (non-reentrant).

    Per-layer masks ride on the layers' own mask argument (``helpers.attention``), so the recompute
    sees the same masks and the gradients do not change (``tests/test_attention_checkpointing.py``).
    """
    import warnings

    for module in model.modules():
        if getattr(module, "supports_gradient_checkpointing", False) and hasattr(module, "gradient_checkpointing_enable"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # renamed activation_checkpointing_enable in v6
                module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            return
    raise ValueError(f"model={type(model).__name__} holds no transformers model that supports gradient checkpointing")


def four_bit_requested(profile) -> bool:
    """The profile's 4-bit wish, honoured only on CUDA with bitsandbytes (else a clear fallback warning)."""
    return resolve_four_bit(profile.load_in_4bit)



def lora_settings(profile) -> LoraSettings:
    """The profile's LoRA rank and scale."""
    return LoraSettings(r=profile.lora_r, alpha=profile.lora_alpha)


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
    """Adapter (trainable) weights, optimizer, step and RNG states in run_dir/checkpoint/state.pt.

    Written through ``store.save_torch`` (temporary file, fsync, rename), so the previous checkpoint stays in
    place until the new one is complete: a crash at any point leaves one valid checkpoint. A failed write (a full
    disk, a file-size limit) raises ``store.WriteError`` naming the file and what is intact.
    """
    target = Path(run_dir) / CHECKPOINT_DIR
    path, had = target / "state.pt", (target / "state.pt").exists()
    try:
        store.save_torch(path, {"trainable": _trainable_state(model), "optimizer": optimizer.state_dict(),
                                "step": step, "rng": _rng_state()})
    except OSError as error:
        intact = ("the previous checkpoint there is intact (nothing half-written is left), and a rerun resumes from it"
                  if had else "no checkpoint was written (nothing half-written is left): a rerun starts this run afresh")
        raise store.write_failed(path, error, f"step {step}'s checkpoint was not saved; {intact}", "run again"
                                 ) from error
    return target


def _set_trainable_state(model, trainable: dict, path: Path) -> None:
    """Copy saved trainable weights into ``model``; an error naming ``path`` when the model lacks one of them."""
    parameters = dict(model.named_parameters())
    unknown = [name for name in trainable if name not in parameters]
    if unknown:
        raise ValueError(f"checkpoint at {path} does not match the model: unknown parameters {unknown[:3]}")
    with torch.no_grad():
        for name, tensor in trainable.items():
            parameters[name].copy_(tensor)


def load_checkpoint(run_dir: Path, model, optimizer) -> int:
    """Restore a checkpoint; returns the step it was taken after (0 when there is none)."""
    path = Path(run_dir) / CHECKPOINT_DIR / "state.pt"
    if not path.exists():
        return 0
    fix = f"Delete the run folder {Path(run_dir)} to train from scratch, or pass resume=False."
    state = store.load_torch(path, fix)
    if not isinstance(state, dict) or not {"trainable", "optimizer", "step", "rng"} <= set(state):
        raise store.CorruptFileError(f"{path} is not a training checkpoint (keys "
                                     f"{sorted(state) if isinstance(state, dict) else type(state).__name__}). {fix}")
    _set_trainable_state(model, state["trainable"], path)
    optimizer.load_state_dict(state["optimizer"])
    _set_rng_state(state["rng"])
    return int(state["step"])


KEPT_PREFIX = "adapter-at-"


def _kept_path(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR / f"{KEPT_PREFIX}{int(step)}.pt"


def kept_lengths(run_dir) -> list[int]:
    """The lengths whose adapter a run folder keeps (each finished request's)."""
    return sorted(int(path.stem[len(KEPT_PREFIX):]) for path in (Path(run_dir) / CHECKPOINT_DIR).glob(f"{KEPT_PREFIX}*.pt"))


def _keep(run_dir: Path, model, step: int) -> None:
    """The trainable weights after ``step`` steps, kept beside the checkpoint (written atomically)."""
    path = _kept_path(run_dir, step)
    try:
        store.save_torch(path, {"trainable": _trainable_state(model), "step": int(step)})
    except OSError as error:
        raise store.write_failed(path, error, f"the adapter after {step} steps was not kept; the run's checkpoint is "
                                              "intact", "run again") from error


def _load_kept(run_dir: Path, model, step: int) -> None:
    """Load the adapter kept after ``step`` steps; an error naming the lengths kept when there is none."""
    path = _kept_path(run_dir, step)
    if not path.exists():
        raise ValueError(f"steps={step}: {Path(run_dir)} has trained further, and keeps the adapter only at the "
                         f"lengths {kept_lengths(run_dir)} requested before; ask for one of them or a longer run, "
                         f"or delete the folder to train {step} steps afresh")
    state = store.load_torch(path, f"Delete {path} (the run's checkpoint is intact) and request {step} steps again "
                                   "only after retraining")
    _set_trainable_state(model, state["trainable"], path)


# --- Metrics ---

def log_metrics(run_dir: Path, record: dict) -> None:
    """Append one record; a crash mid-append leaves a torn last line, which :func:`read_metrics` drops."""
    with open(Path(run_dir) / METRICS_FILE, "a") as handle:
        handle.write(json.dumps(record) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_metrics(run_dir: Path) -> list[dict]:
    """Every record of a run, in order (what the plotting helpers read); a torn last line is dropped with a warning."""
    return store.read_jsonl(Path(run_dir) / METRICS_FILE,
                            f"Delete the run folder {Path(run_dir)} and rerun to train it again.")


def _truncate_metrics(run_dir: Path, after_step: int) -> None:
    """Drop records past the checkpoint (and a torn last line), so a resumed run logs each step once."""
    path = Path(run_dir) / METRICS_FILE
    if not path.exists():
        return
    text = "".join(json.dumps(record) + "\n" for record in read_metrics(run_dir) if record["step"] <= after_step)
    if text != path.read_text():  # a finished run's metrics stay untouched, to the byte and the mtime
        store.write_text(path, text)


# --- Settings ---

SETTINGS_FILE = "settings.json"
LEGACY_CONFIG_FILE = "config.json"


def run_settings(config: TrainConfig, settings: dict | None = None) -> dict:
    """What a run folder is keyed by: the TrainConfig plus everything else that changes its numbers."""
    return store.canonical_settings({"config": config, "run": settings or {}})


def check_run_settings(run_dir, settings: dict, resume: bool = True, *, write: bool = True) -> None:
    """Store ``settings`` (from :func:`run_settings`) in ``run_dir``, refusing a resume under other settings.

    A run folder holding a checkpoint or metrics resumes only when its stored settings equal ``settings``;
    otherwise a ValueError names the folder and every differing key (old -> new). ``write=False`` only checks
    (the processes of a launch other than the main one, which writes).
    """
    run_dir = Path(run_dir)
    stored_path = run_dir / SETTINGS_FILE
    started = (run_dir / CHECKPOINT_DIR / "state.pt").exists() or (run_dir / METRICS_FILE).exists()
    if resume and started:
        fix = (f"Delete {run_dir} to train afresh under the new settings, pass resume=False, or change the settings "
               f"back (a run folder named by run_dir_for/fingerprint gets a new name by itself).")
        if stored_path.exists():
            old = store.read_json(stored_path, fix).get("settings")
        elif (run_dir / LEGACY_CONFIG_FILE).exists():  # folders from before settings.json stored only the config
            old = {**settings, "config": store.read_json(run_dir / LEGACY_CONFIG_FILE, fix)}
        else:
            raise ValueError(f"run_dir={str(run_dir)!r} holds a checkpoint or metrics but no {SETTINGS_FILE}, so the "
                             f"settings it was trained with are unknown. {fix}")
        if isinstance(old, dict) and isinstance(old.get("config"), dict):  # stored before the length keyed nothing
            old = {**old, "config": store.canonical_without(old["config"], ("steps",))}
        differences = store.flat_differences(old, settings)
        if differences:
            raise ValueError(f"run_dir={str(run_dir)!r} was trained with other settings and cannot be resumed under "
                             f"these ones: " + "; ".join(differences[:12])
                             + (f" (and {len(differences) - 12} more)" if len(differences) > 12 else "") + f". {fix}")
    if write:
        store.write_json(stored_path, {"fingerprint": store.fingerprint(settings), "settings": settings}, indent=1)


# --- The loop ---

def train(model, *, batch_for: Callable[[int, int], dict], loss_fn: Callable, config: TrainConfig, run_dir,
          evaluate: Callable | None = None, resume: bool = True, stop_after: int | None = None,
          progress: bool = True, settings: dict | None = None,
          lr_lambda: Callable[[int], float] | None = None) -> list[dict]:
    """Train ``model``'s trainable parameters; returns the run's metric records.

    Args:
        batch_for: ``(step, micro_index) -> batch``; must be deterministic so that resuming is exact.
        loss_fn: ``(model, batch) -> {"loss": ...}``.
        evaluate: ``model -> {name: float}``, run at step 0, every ``eval_every`` steps and at the end; an evaluator
            with a ``step`` parameter is also given the step (:func:`_evaluate`), so it can do part of its work less
            often.
        stop_after: stop (as if interrupted) once this step is done; a checkpoint is written there.
        settings: everything besides ``config`` that changes the run (objective, data, mask id, ...). Both are
            stored in ``run_dir/settings.json``; resuming a run stored under other settings is refused.
        lr_lambda: ``step -> factor``; step ``s`` (0-based) uses ``config.lr * lr_lambda(s)`` (a pure function of
            the step, so resuming needs no scheduler state). None keeps ``config.lr`` (:mod:`helpers.schedules`).
            Its factor at every step is part of the run's stored settings.

    While it trains, the run folder is locked (:func:`helpers.store.exclusive`): a second process (another notebook
    tab, another kernel) that starts the same run refuses at once, naming the holder, so metrics hold each step once.

    A finished run (its checkpoint at ``config.steps``) trains no more: the call loads the final adapter and returns
    the stored records, leaving the metrics file as it was.

    Extending: the length (``config.steps``) keys nothing, and with no ``lr_lambda`` or a length-free one
    (:class:`helpers.schedules.WarmupConstant`) nothing else depends on it. A longer request continues the run from
    its checkpoint, so N then 2N steps equal 2N at once, loss for loss, evaluation for evaluation (N on the cadence:
    each request evaluates at its end) and in the final adapter; a shorter one returns the records up to its length
    and loads the adapter kept there (each finished request keeps its own: :func:`kept_lengths`).

    Under ``accelerate launch`` with N processes, each step's ``grad_accum`` micro-batches are shared out
    (:func:`helpers.distributed.process_micro_batches`), each process runs its own under
    :func:`helpers.distributed.micro_batch_seed`, and one all-reduce adds the gradients and losses
    (:func:`helpers.distributed.sum_gradients`; no DDP wrapper: the adapter's gradients are small, and a process
    may hold fewer micro-batches than another). Every process then takes the same optimizer step, so the run is the
    one-process run up to the order of floating-point sums, under the same run key. Only the main process writes
    (settings.json, metrics, checkpoints) and evaluates; the others wait for it at the next collective.
    """
    return _train(model, batch_for=batch_for, loss_fn=loss_fn, config=config, run_dir=Path(run_dir), evaluate=evaluate,
                  resume=resume, stop_after=stop_after, progress=progress, settings=settings, lr_lambda=lr_lambda)


def _train(model, *, batch_for, loss_fn, config: TrainConfig, run_dir: Path, evaluate, resume: bool,
           stop_after: int | None, progress: bool, settings: dict | None, lr_lambda) -> list[dict]:
    """:func:`train`'s loop; the main process holds the run folder's lock throughout
    (:func:`helpers.distributed.one_at_a_time`)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if isinstance(lr_lambda, schedules.WarmupConstant):  # a schedule independent of the length: its form keys the run
        settings = {**(settings or {}), "lr_schedule": lr_lambda}
    elif lr_lambda is not None:  # any other schedule: its factor at every step joins the settings (so the length)
        settings = {**(settings or {}), "lr_factors": [round(float(lr_lambda(step)), 9) for step in range(config.steps)]}
    distributed.launched()  # refuses a launch whose processes accelerate would not join
    accelerator = distributed.accelerator_for(training_mixed_precision(model))
    main = accelerator.is_main_process
    with distributed.one_at_a_time(accelerator, run_dir):
        check_run_settings(run_dir, run_settings(config, settings), resume, write=main)
        parameters = [p for p in model.parameters() if p.requires_grad]
        if not parameters:
            raise ValueError("model has no trainable parameters; wrap it with add_lora() first")
        optimizer = torch.optim.AdamW(parameters, lr=config.lr, betas=config.betas, eps=config.eps,
                                      weight_decay=config.weight_decay)
        torch.manual_seed(config.seed)
        if main and not resume:
            shutil.rmtree(run_dir / CHECKPOINT_DIR, ignore_errors=True)
            (run_dir / METRICS_FILE).unlink(missing_ok=True)
        start = load_checkpoint(run_dir, model, optimizer) if resume else 0
        if start > config.steps:  # a shorter request: the prefix, with the adapter kept at that length
            accelerator.wait_for_everyone()
            _load_kept(run_dir, model, config.steps)
            model.eval()
            return [record for record in read_metrics(run_dir) if record["step"] <= config.steps]
        distributed.check_same_start(accelerator, run_dir, start)
        if main:
            _truncate_metrics(run_dir, start)
        model, optimizer = _prepare(accelerator, model, optimizer, parameters, config)
        micros = distributed.process_micro_batches(config.grad_accum, accelerator.process_index, accelerator.num_processes)
        if main and start == 0 and evaluate is not None:
            _evaluate(model, evaluate, run_dir, 0)
        last = config.steps if stop_after is None else min(stop_after, config.steps)
        if main and progress and start >= last:
            print(f"{run_dir.name}: step {start} of {config.steps} reached earlier; 0 new steps")
        bar = tqdm(range(start, last), desc=f"training {run_dir.name}", disable=not progress or not main,
                   initial=start, total=config.steps)
        for step in bar:
            total = _step(accelerator, model, optimizer, parameters, step, micros, batch_for=batch_for, loss_fn=loss_fn,
                          config=config, lr_lambda=lr_lambda)
            done = step + 1
            bar.set_postfix(loss=f"{total:.3f}")
            if not main:
                continue
            log_metrics(run_dir, {"step": done, "loss": total})
            if evaluate is not None and (done == config.steps or (config.eval_every and done % config.eval_every == 0)):
                _evaluate(model, evaluate, run_dir, done)
            if done == last or (config.checkpoint_every and done % config.checkpoint_every == 0):
                save_checkpoint(run_dir, accelerator.unwrap_model(model), optimizer, done)
            if done == config.steps:  # each requested length keeps its adapter: a later shorter request reads it
                _keep(run_dir, accelerator.unwrap_model(model), done)
        accelerator.wait_for_everyone()  # the main process's last records and checkpoint are on disk
    model.eval()
    return read_metrics(run_dir)



def _prepare(accelerator, model, optimizer, parameters: list, config: TrainConfig):
    """The model and optimizer as accelerate places them, in training mode, one adapter in every process.

    ``evaluation_mode``: the device and mixed precision of one process, without DDP's wrapper (the processes add
    their gradients in :func:`helpers.distributed.sum_gradients`).
    """
    if config.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    model = accelerator.prepare_model(model, evaluation_mode=True)
    optimizer = accelerator.prepare_optimizer(optimizer)
    if accelerator.num_processes > 1:
        distributed.across_processes([p.data for p in parameters], "broadcast")  # the main process's adapter, whatever happened
        if accelerator.is_main_process and config.grad_accum % accelerator.num_processes:
            warnings.warn(f"grad_accum={config.grad_accum} micro-batches per step over {accelerator.num_processes} "
                          f"processes: some compute fewer (or none) and wait; the result is the same, but a grad_accum "
                          f"that is a multiple of the number of processes keeps them all busy (--micro-batch)",
                          stacklevel=3)
    model.train()
    return model, optimizer


def _step(accelerator, model, optimizer, parameters: list, step: int, micros: range, *, batch_for: Callable,
          loss_fn: Callable, config: TrainConfig, lr_lambda: Callable | None) -> float:
    """One optimizer step over this process's ``micros`` (all of them in one process); returns the step's loss, the
    mean over every micro-batch of every process."""
    total = 0.0
    for micro in micros:
        batch = batch_for(step, micro)
        with distributed.micro_batch_rng(config.seed, step, micro, accelerator.device):
            with accelerator.autocast():
                loss = loss_fn(model, batch)["loss"] / config.grad_accum
            accelerator.backward(loss)
        total += float(loss.detach())
    if accelerator.num_processes > 1:
        total = distributed.sum_gradients(parameters, total, accelerator.device)
    if config.max_grad_norm:
        accelerator.clip_grad_norm_(parameters, config.max_grad_norm)
    if lr_lambda is not None:
        for group in optimizer.param_groups:
            group["lr"] = config.lr * float(lr_lambda(step))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total


def _evaluate(model, evaluate: Callable, run_dir: Path, step: int) -> None:
    """Score ``model`` with ``evaluate`` and log the scores at ``step``; ``evaluate(model, step=step)`` when the
    evaluator names a ``step`` parameter, else ``evaluate(model)``."""
    model.eval()
    with torch.no_grad():
        scores = evaluate(model, step=step) if takes_step(evaluate) else evaluate(model)
    model.train()
    log_metrics(run_dir, {"step": step, **{name: float(value) for name, value in scores.items()}})


def takes_step(evaluate: Callable) -> bool:
    """Whether an evaluator names a ``step`` parameter (then :func:`train` passes the step it evaluates at)."""
    try:
        return "step" in inspect.signature(evaluate).parameters
    except (TypeError, ValueError):  # a callable without a signature (a builtin): the plain form
        return False


