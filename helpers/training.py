"""Training helpers shared by every notebook: LoRA/QLoRA, AdamW, accumulation, checkpoints, metrics.

Built on accelerate, so ``accelerate launch`` runs the same loop in several processes (one per GPU) with the same
result: batches, and every random draw inside a micro-batch (LoRA dropout), are pure functions of
``(seed, step, micro-batch)``; the processes share each step's micro-batches and sum their gradients (:func:`train`).
Checkpoints hold the adapter, optimizer, step and RNG states, so an interrupted run resumes to exactly the result of
an uninterrupted one, under any number of processes.

MAGNET App. A: LoRA r = 16, α = 32; AdamW β = (0.9, 0.999), ε = 1e-8; lr 3e-5; bf16 (fp16 with a gradient
scaler on GPUs without native bf16, see ``helpers.device.precision``).
"""
from __future__ import annotations

import contextlib
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

from . import models, store
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


@contextlib.contextmanager
def _peft_quietly():
    """peft reads transformers' deprecated ``model.is_gradient_checkpointing`` whenever it wraps a model, which
    raises a FutureWarning that is peft's to fix, not ours; silence that one warning, only around peft's calls."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        yield


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
        with _peft_quietly():
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    config = LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                        target_modules=list(settings.target_modules), bias="none")
    with _peft_quietly():
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
        differences = store.flat_differences(old, settings)
        if differences:
            raise ValueError(f"run_dir={str(run_dir)!r} was trained with other settings and cannot be resumed under "
                             f"these ones: " + "; ".join(differences[:12])
                             + (f" (and {len(differences) - 12} more)" if len(differences) > 12 else "") + f". {fix}")
    if write:
        store.write_json(stored_path, {"fingerprint": store.fingerprint(settings), "settings": settings}, indent=1)


# --- Processes: `accelerate launch` runs the loop once per process ---

MICRO_BATCH_SALT = 0x6D6963726F  # keeps the micro-batch seeds apart from the batch generators' (objectives.seeded_generator)


def launched():
    """accelerate's ``PartialState`` when this process is one of several (``accelerate launch``, torchrun: WORLD_SIZE
    above 1), else None (a notebook, a plain ``python -m helpers.train``): who writes, and who waits."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    from accelerate import PartialState
    from accelerate.utils import parse_flag_from_env

    state = PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU"))  # as Accelerator() will, so the two agree
    if state.num_processes != int(os.environ["WORLD_SIZE"]):
        raise RuntimeError(f"WORLD_SIZE={os.environ['WORLD_SIZE']} processes were started, but accelerate sees "
                           f"{state.num_processes} ({state.distributed_type}): each would train and write alone. On "
                           "CPUs only, set ACCELERATE_USE_CPU=1 for the launch (accelerate then joins them over gloo)")
    return state


def on_main_process(write: Callable[[], None]) -> None:
    """Call ``write`` in the main process only, the others waiting until it is done (:func:`launched`); outside a
    launch, just call it. For what a run writes outside :func:`train` (an adapter, a result file)."""
    launch = launched()
    if launch is None or launch.is_main_process:
        write()
    if launch is not None:
        launch.wait_for_everyone()


def micro_batch_seed(seed: int, step: int, micro: int) -> int:
    """The seed of torch's generator around micro-batch ``micro`` of step ``step`` (0-based): every draw inside it
    (LoRA dropout, teacher forcing) is a pure function of these, like the batch itself, whichever process computes
    it and whether or not the run was interrupted before."""
    value = MICRO_BATCH_SALT
    for index, part in enumerate((seed, step, micro)):
        value = (value * 1_000_003 + whole_number(part, ("seed", "step", "micro")[index], 0)) % (2**63 - 1)
    return value


@contextlib.contextmanager
def _micro_batch_rng(seed: int, step: int, micro: int, device: torch.device):
    """torch's generators seeded by :func:`micro_batch_seed` inside the block, and restored after it, so the caller's
    stream does not depend on how many micro-batches this process computed."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(micro_batch_seed(seed, step, micro))
        yield


def process_micro_batches(grad_accum: int, process_index: int, num_processes: int) -> range:
    """The micro-batches of each step that process ``process_index`` of ``num_processes`` computes.

    Every step has ``grad_accum`` micro-batches, ``batch_for(step, k)`` for k = 0 .. grad_accum - 1, whatever the
    number of processes; process p takes k = p, p + N, p + 2N, ..., so N processes share the accumulation
    (grad_accum / N each when N divides it) and the effective batch stays micro-batch x grad_accum.
    """
    return range(process_index, grad_accum, num_processes)


def _across_processes(tensors: list[torch.Tensor], operation: str) -> None:
    """In place, on every process: ``"sum"`` adds each tensor over the processes; ``"broadcast"`` copies the main
    process's. One collective per dtype, on a flat copy (LoRA's trainable tensors are small)."""
    import torch.distributed as dist

    groups: dict[torch.dtype, list[torch.Tensor]] = {}
    for tensor in tensors:
        groups.setdefault(tensor.dtype, []).append(tensor)
    for group in groups.values():
        flat = torch.cat([tensor.reshape(-1) for tensor in group])
        if operation == "sum":
            dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        else:
            dist.broadcast(flat, src=0)
        offset = 0
        for tensor in group:
            tensor.copy_(flat[offset:offset + tensor.numel()].view_as(tensor))
            offset += tensor.numel()


def _sum_gradients(parameters: list, loss: float, device: torch.device) -> float:
    """Add the processes' gradients and losses of one step: afterwards every process holds the gradient of the
    whole step (its micro-batches' Σ ∇(loss / grad_accum)) and returns the step's loss (their mean). A parameter
    no process computed a gradient for keeps ``grad = None``, as in one process."""
    used = torch.tensor([float(parameter.grad is not None) for parameter in parameters], device=device)
    for parameter in parameters:
        if parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)
    total = torch.tensor([loss], dtype=torch.float64, device=device)
    _across_processes([parameter.grad for parameter in parameters] + [used, total], "sum")
    for parameter, count in zip(parameters, used.tolist()):
        if count == 0:
            parameter.grad = None
    return float(total.item())


def _one_at_a_time(accelerator, run_dir: Path) -> contextlib.ExitStack:
    """The main process holds ``run_dir``'s lock (:func:`store.exclusive`) for the whole run; when another process
    (a notebook, a second command) holds it, every process of this launch refuses with its words."""
    stack = contextlib.ExitStack()
    refusal = None
    if accelerator.is_main_process:
        try:
            stack.enter_context(store.exclusive(run_dir, "training run"))
        except store.InUseError as error:
            refusal = str(error)
    if accelerator.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        refusal = broadcast_object_list([refusal])[0]
    if refusal is not None:
        stack.close()
        raise store.InUseError(refusal)
    return stack


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
            the step, so resuming needs no scheduler state). None keeps ``config.lr`` (see :func:`linear_decay`).
            Its factor at every step is part of the run's stored settings.

    While it trains, the run folder is locked (:func:`helpers.store.exclusive`): a second process (another notebook
    tab, another kernel) that starts the same run refuses at once, naming the holder, so metrics hold each step once.

    A finished run (its checkpoint at ``config.steps``) trains no more: the call loads the final adapter and returns
    the stored records, leaving the metrics file as it was.

    Under ``accelerate launch`` with N processes, each step's ``grad_accum`` micro-batches are shared out
    (:func:`process_micro_batches`), each process runs its own under :func:`micro_batch_seed`, and one all-reduce adds
    the gradients and losses (:func:`_sum_gradients`; no DDP wrapper: the adapter's gradients are small, and a process
    may hold fewer micro-batches than another). Every process then takes the same optimizer step, so the run is the
    one-process run up to the order of floating-point sums, under the same run key. Only the main process writes
    (settings.json, metrics, checkpoints) and evaluates; the others wait for it at the next collective.
    """
    return _train(model, batch_for=batch_for, loss_fn=loss_fn, config=config, run_dir=Path(run_dir), evaluate=evaluate,
                  resume=resume, stop_after=stop_after, progress=progress, settings=settings, lr_lambda=lr_lambda)


def _accelerator(mixed_precision: str):
    """An accelerator with ``mixed_precision``. accelerate keeps one mixed precision per process and refuses another;
    one process may train a bf16 model (the masked LM on a CPU that computes bf16) and then float32 heads on its
    features, so a change resets that one setting (the distributed state, which joins a launch's processes, stays)."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    if AcceleratorState._shared_state.get("_mixed_precision", mixed_precision) != mixed_precision:
        AcceleratorState._reset_state(reset_partial_state=False)
    return Accelerator(mixed_precision=mixed_precision)


def _train(model, *, batch_for, loss_fn, config: TrainConfig, run_dir: Path, evaluate, resume: bool,
           stop_after: int | None, progress: bool, settings: dict | None, lr_lambda) -> list[dict]:
    """:func:`train`'s loop; the main process holds the run folder's lock throughout (:func:`_one_at_a_time`)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if lr_lambda is not None:  # the schedule changes the numbers: its factor at every step joins the settings
        settings = {**(settings or {}), "lr_factors": [round(float(lr_lambda(step)), 9) for step in range(config.steps)]}
    launched()  # refuses a launch whose processes accelerate would not join
    accelerator = _accelerator(training_mixed_precision(model))
    main = accelerator.is_main_process
    with _one_at_a_time(accelerator, run_dir):
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
        _check_same_start(accelerator, run_dir, start)
        if main:
            _truncate_metrics(run_dir, start)
        model, optimizer = _prepare(accelerator, model, optimizer, parameters, config)
        micros = process_micro_batches(config.grad_accum, accelerator.process_index, accelerator.num_processes)
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
        accelerator.wait_for_everyone()  # the main process's last records and checkpoint are on disk
    model.eval()
    return read_metrics(run_dir)


def _check_same_start(accelerator, run_dir: Path, start: int) -> None:
    """Every process of a launch must resume from the same checkpoint (the main process's): on several machines the
    run folder must be on a file system they all see."""
    if accelerator.num_processes == 1:
        return
    from accelerate.utils import gather_object

    starts = gather_object([start])
    if len(set(starts)) > 1:
        raise RuntimeError(f"the processes found different checkpoints in {run_dir} (steps {starts}, by process): "
                           "put WORKBOOK_ROOT on a file system every machine of the launch sees")


def _prepare(accelerator, model, optimizer, parameters: list, config: TrainConfig):
    """The model and optimizer as accelerate places them, in training mode, one adapter in every process.

    ``evaluation_mode``: the device and mixed precision of one process, without DDP's wrapper (the processes add
    their gradients in :func:`_sum_gradients`).
    """
    if config.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    model = accelerator.prepare_model(model, evaluation_mode=True)
    optimizer = accelerator.prepare_optimizer(optimizer)
    if accelerator.num_processes > 1:
        _across_processes([p.data for p in parameters], "broadcast")  # the main process's adapter, whatever happened
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
        with _micro_batch_rng(config.seed, step, micro, accelerator.device):
            with accelerator.autocast():
                loss = loss_fn(model, batch)["loss"] / config.grad_accum
            accelerator.backward(loss)
        total += float(loss.detach())
    if accelerator.num_processes > 1:
        total = _sum_gradients(parameters, total, accelerator.device)
    if config.max_grad_norm:
        accelerator.clip_grad_norm_(parameters, config.max_grad_norm)
    if lr_lambda is not None:
        for group in optimizer.param_groups:
            group["lr"] = config.lr * float(lr_lambda(step))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total


def linear_decay(steps: int) -> Callable[[int], float]:
    """The HF Trainer default schedule (no warm-up): step ``s`` of ``steps`` runs at ``1 - s / steps`` of the lr."""
    steps = whole_number(steps, "steps")
    return lambda step: max(0.0, 1.0 - step / steps)


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


ADAPTER_METADATA = "workbook.json"
ADAPTER_FILES = ("adapter_config.json", ADAPTER_METADATA)
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")  # peft's weights file, either form


def save_adapter(model, path, metadata: dict | None = None) -> Path:
    """Save a peft adapter (small) with its config, plus ``metadata`` (the settings it was trained with, e.g. the
    mask token) in workbook.json. The folder is replaced whole (``store.replace_dir``): weights and metadata are
    never out of step, and a crash leaves the previous adapter. Under ``accelerate launch`` the main process writes
    it and the others wait (:func:`on_main_process`). Saves are serialised by a lock on the folder that holds the
    adapter (``store.folder_lock``, waiting its turn), so two processes saving one adapter at once both succeed. A
    failed write (a full disk, a file-size limit) raises ``store.WriteError`` naming the folder and what is intact."""
    path = Path(path)

    def write():
        with store.folder_lock(path.parent):  # one save of this adapter at a time, across threads and processes
            had = adapter_exists(path)
            try:
                with store.replace_dir(path) as scratch:
                    model.save_pretrained(scratch)
                    store.write_json(scratch / ADAPTER_METADATA, store.canonical_settings(metadata or {}), indent=1)
            except Exception as error:
                if store.write_failure(error) is None:
                    raise
                intact = "the previous adapter there is intact" if had else "no adapter was saved there"
                raise store.write_failed(path, error, f"{intact} (nothing half-written is left), and the run "
                                         "folder's checkpoint is untouched", "rerun the notebook or command that "
                                         "trains it: it saves the adapter again without training") from error

    on_main_process(write)  # under accelerate launch every process holds the same adapter: one writes it
    return path


def adapter_exists(path) -> bool:
    store.recover_dir(path)
    return all((Path(path) / name).is_file() for name in ADAPTER_FILES)


def adapter_metadata(path) -> dict:
    file = Path(path) / ADAPTER_METADATA
    return store.read_json(file, f"Delete {Path(path)} and rerun the notebook that trains it.") if file.exists() else {}


def load_adapter(model, path, expected: dict | None = None):
    """Attach a saved adapter to a base model; with ``expected``, refuse one whose metadata differs from it in any
    key ``expected`` names (the metadata may hold more, such as the mask id it was trained with)."""
    from peft import PeftModel

    path = Path(path)
    if not (path / "adapter_config.json").exists():
        raise ValueError(f"path={str(path)!r} holds no adapter (adapter_config.json missing)")
    fix = f"Delete {path} and rerun the notebook that trains it."
    if not any((path / name).is_file() for name in ADAPTER_WEIGHTS):  # else peft looks for it on the Hub
        raise store.CorruptFileError(f"{path / ADAPTER_WEIGHTS[0]} is missing: the adapter at {path} has its config "
                                     f"but no weights file; it is damaged or truncated. {fix}")
    if expected is not None:
        wanted = store.canonical_settings(expected)
        stored = adapter_metadata(path)
        differences = store.flat_differences({key: stored.get(key) for key in wanted} if isinstance(wanted, dict)
                                             else stored, wanted)
        if differences:
            raise ValueError(f"the adapter at {path} was trained with other settings: {'; '.join(differences[:12])}. {fix}")
    try:
        with _peft_quietly():
            return PeftModel.from_pretrained(model, str(path))
    except Exception as error:  # safetensors and json errors from peft: say which file and what to do
        if type(error).__name__ in ("SafetensorError", "JSONDecodeError", "HeaderTooLarge") or isinstance(
                error, (OSError, EOFError)):
            raise store.CorruptFileError(f"the adapter at {path} cannot be read ({type(error).__name__}: {error}); "
                                         f"it is damaged or truncated. {fix}") from error
        raise


def check_adapter_mask_id(path, mask_id: int, tokenizer) -> None:
    """Refuse an adapter trained with another mask id than ``mask_id`` (the one its mask-token setting resolves to
    now): a run whose data were built for another mask token, saved under this setting's name."""
    trained = adapter_metadata(path).get("mask_id")
    if trained is not None and int(trained) != int(mask_id):
        raise ValueError(f"the adapter at {path} was trained with mask id {trained} ({tokenizer.decode([int(trained)])!r}), "
                         f"but its mask-token setting resolves to id {mask_id} ({tokenizer.decode([int(mask_id)])!r}): its "
                         f"training data were built for another mask token. Delete {path} and rerun notebook 02.")


def adapter_path(kind: str, model_name: str, settings) -> Path:
    """Where an adapter trained under ``settings`` is cached, e.g. data/cache/adapters/mntp-embedded-smollm2-135m-<hash>.

    The fingerprint covers every setting (mask token included), so a reader asking for other settings never
    finds this adapter.
    """
    from .paths import cache_dir

    slug = model_name.replace(":", "-").replace("/", "-")
    return cache_dir() / "adapters" / f"{kind}-{slug}-{store.fingerprint([kind, model_name, settings])}"


MASKED_LM_VERSION = 1  # bump when the masked-LM recipe changes what a run or adapter holds


@dataclass(frozen=True)
class MaskedLMRecipe:
    """Notebook 02's MNTP and MTP runs (MAGNET App. A, App. E), and so the MNTP adapter notebooks 03, 05 and 06 read.

    The paper: 4200 iterations of batch 32 x 512 tokens at lr 3e-5 (the ``paper`` profile).
    """

    steps: int = 100
    batch_size: int = 4
    grad_accum: int = 1
    seq_len: int = 128
    lr: float = 5e-4
    eval_every: int = 10
    eval_batches: int = 4
    train_blocks: int = 2000
    checkpoint_every: int = 25


MASKED_LM_RECIPES = {
    "smoke": MaskedLMRecipe(steps=4, batch_size=2, seq_len=32, eval_every=2, eval_batches=1, train_blocks=16,
                            checkpoint_every=2),
    # Fig. 7's held-out set: 4 batches (16 blocks, about 410 masked tokens, SE ~2 points; the seed study's t interval
    # is far wider), scored every 5 steps (cheap: 4 small batches), so that 11 evaluations fall in the last half of
    # training, enough for the equivalence test that shows whether training stopped improving.
    "cpu": MaskedLMRecipe(eval_every=5, eval_batches=4),
    "gpu": MaskedLMRecipe(steps=1000, batch_size=16, grad_accum=2, seq_len=512, lr=1e-4, eval_every=50, eval_batches=16,
                          train_blocks=200_000, checkpoint_every=100),
    "paper": MaskedLMRecipe(steps=4200, batch_size=8, grad_accum=4, seq_len=512, lr=3e-5, eval_every=200,
                            eval_batches=32, train_blocks=300_000, checkpoint_every=200),
}


def masked_lm_recipe(profile) -> MaskedLMRecipe:
    """The masked-LM recipe of ``profile`` (:data:`MASKED_LM_RECIPES`)."""
    return MASKED_LM_RECIPES[profile.name]


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


def split_step(settings, micro_batch: int | None):
    """``settings`` (a notebook's training settings: ``batch_size`` rows x ``grad_accum`` micro-batches per step) with
    each step's rows split into micro-batches of ``micro_batch`` rows (None: unchanged).

    The rows per step stay the same; the accumulation grows, so that N processes have micro-batches to share
    (:func:`process_micro_batches`). The loss is a mean per micro-batch and each micro-batch draws its own dropout,
    so this is another run, and the micro-batch is part of its key (as when ``memory.fit_training`` shrinks it to fit
    a GPU): a notebook finds such a run only under the same micro-batch.
    """
    from . import memory

    if micro_batch is None:
        return settings
    recipe = getattr(settings, "training", settings)  # sequence repetition nests its batch sizes
    rows = recipe.batch_size * recipe.grad_accum
    if isinstance(micro_batch, bool) or not isinstance(micro_batch, int) or micro_batch < 1 or rows % micro_batch:
        raise ValueError(f"micro_batch={micro_batch!r} must be a whole number that divides the {rows} rows of each "
                         f"step ({recipe.batch_size} x {recipe.grad_accum})")
    return memory.with_micro_batch(settings, micro_batch, rows // micro_batch)


def lora_settings(profile) -> LoraSettings:
    return LoraSettings(r=profile.lora_r, alpha=profile.lora_alpha)


def masked_lm_run_key(profile, objective: str, mask_token: str = "underscore", config: TrainConfig | None = None,
                      lora: LoraSettings | None = None, *, recipe: MaskedLMRecipe | None = None,
                      fallback: bool = False) -> dict:
    """Everything that changes a masked-LM run of MAGNET App. E: its run folder and its adapter are keyed by this.

    The one place the key is built: notebook 02's MNTP and MTP runs (``helpers.papers.mntp.experiment``), the
    adapter :func:`mntp_adapter` looks up, and :func:`load_or_train_mntp`'s fallback. ``config`` and ``lora``
    default to :func:`mlm_train_config` (of ``recipe``, the profile's own by default) and :func:`lora_settings`;
    ``fallback``: the short run's config and its single held-out batch.
    """
    from . import objectives as O

    recipe = recipe or masked_lm_recipe(profile)
    config = config or mlm_train_config(profile, recipe, fallback=fallback)
    return store.canonical_settings({
        "version": MASKED_LM_VERSION, "objective": objective, "mask_token": mask_token, "model": profile.model_name,
        "dtype": models.weight_dtype_name(profile), "four_bit": profile.load_in_4bit, "corpus": profile.corpus,
        "seq_len": recipe.seq_len, "train_blocks": recipe.train_blocks,
        "eval_batches": 1 if fallback else recipe.eval_batches,
        "config": config, "lora": lora or lora_settings(profile), "masking": O.MaskingConfig()})


NOTEBOOK_02, FALLBACK = "notebook 02", "fallback"
_LOADED_ADAPTERS: dict[str, dict] = {}  # profile name -> which MNTP adapter this process loaded (claims record it)


def loaded_mntp_adapters() -> dict[str, dict]:
    """Which MNTP adapter :func:`load_or_train_mntp` loaded in this process, per profile: ``{"source": "notebook
    02" | "fallback", "fingerprint": ...}``; a notebook's claims carry it in their provenance."""
    return {name: dict(entry) for name, entry in _LOADED_ADAPTERS.items()}


def notebook02_mntp_run(profile) -> Path:
    """The run folder notebook 02 trains its MNTP adapter in, under the profile's recipe."""
    return store.run_dir_for(f"02_mntp_{profile.name}", masked_lm_run_key(profile, "mntp"))


MNTP_HELDOUT_CURVE = "notebook 02's MNTP held-out masked-token accuracy"


def mntp_heldout_curve(profile) -> list[tuple[int, float]] | None:
    """The held-out curve of the MNTP adapter the later notebooks read: notebook 02's MNTP run's held-out
    masked-token accuracy (``eval_accuracy``) at every evaluation, ``(step, value)``; None when that run has not
    been trained or logged no evaluation (the short fallback adapter logs none). Rows of notebooks 03, 05 and 07
    that rest on the adapter's training pass it as their budget check (``claims.curve``)."""
    from . import metrics

    folder = notebook02_mntp_run(profile)
    if not (folder / METRICS_FILE).exists():
        return None
    points = metrics.curve_points(read_metrics(folder), "eval_accuracy")
    return points or None


def mntp_adapter(profile) -> tuple[Path, dict] | None:
    """Notebook 02's MNTP adapter for ``profile`` (default mask token "underscore"), else the short fallback one;
    ``(path, settings)`` of the first that exists, or None."""
    for settings in (masked_lm_run_key(profile, "mntp"), masked_lm_run_key(profile, "mntp", fallback=True)):
        path = adapter_path("mntp", profile.model_name, settings)
        if adapter_exists(path):
            return path, settings
    return None


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
    if not isinstance(train_blocks, torch.Tensor) or train_blocks.dim() != 2 or train_blocks.numel() == 0 \
            or train_blocks.is_floating_point():
        raise ValueError(f"train_blocks has shape {tuple(getattr(train_blocks, 'shape', ()))}; expected a non-empty "
                         "(blocks, length) tensor of token ids (data.token_blocks)")
    # the training blocks first: a block too long for the model is named as such, whatever else is wrong
    models.check_fits(model, train_blocks.shape[1], "train_blocks' block length")
    if not isinstance(eval_batches, (list, tuple)) or not eval_batches:
        raise ValueError(f"eval_batches={eval_batches!r} must be a non-empty list of batches (objectives.fixed_eval_batches)")
    masking = masking or O.MaskingConfig()
    mask = mask or M.bidirectional
    O.check_mask_id(model, mask_id, tokenizer)
    peft_model = model if hasattr(model, "peft_config") else add_lora(model, lora, four_bit=four_bit, seed=config.seed)
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
                "train_blocks": train_blocks, "eval_batches": eval_batches}
    records = train(peft_model, batch_for=batch_for, loss_fn=lambda m, b: O.masked_lm_loss(m, b, mask), config=config,
                    run_dir=run_dir, evaluate=lambda m: O.evaluate_masked_lm(m, eval_batches, mask), resume=resume,
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
    from . import data
    from . import objectives as O
    from . import profiles

    profile = profile or profiles.current()
    model, tokenizer = models.load_model(profile.model_name)
    four_bit = four_bit_requested(profile)
    found = mntp_adapter(profile)
    holder = store.holder_of(notebook02_mntp_run(profile)) if found is None else None
    if holder is not None:
        raise store.InUseError(f"notebook 02 is training the MNTP adapter right now ({holder}, in "
                               f"{notebook02_mntp_run(profile)}); wait for it to finish, then run this again, rather "
                               "than train a short fallback adapter beside it")
    if found is None:
        lora = lora_settings(profile)
        config = mlm_train_config(profile, fallback=True)
        settings = masked_lm_run_key(profile, "mntp", config=config, lora=lora, fallback=True)
        path = adapter_path("mntp", profile.model_name, settings)
        print(f"no MNTP adapter from notebook 02; training a short one into {path} (run notebook 02 for the full run)")
        mask_id = O.resolve_mask_token(tokenizer, "underscore")
        recipe = masked_lm_recipe(profile)
        blocks = data.token_blocks(tokenizer, (p.text for p in data.load_paragraphs(profile.corpus, "train")),
                                   recipe.seq_len, max_blocks=recipe.train_blocks)
        held_out = data.token_blocks(tokenizer, (p.text for p in data.load_paragraphs(profile.corpus, "validation")),
                                     recipe.seq_len, max_blocks=recipe.batch_size)
        evals = O.fixed_eval_batches("mntp", held_out, batch_size=recipe.batch_size, num_batches=1, mask_id=mask_id,
                                     vocab_size=len(tokenizer), special_ids=tokenizer.all_special_ids)
        trained, _ = masked_lm_experiment(model, tokenizer, objective="mntp", train_blocks=blocks, eval_batches=evals,
                                          config=config, run_dir=store.run_dir_for(f"mntp_fallback_{profile.name}", settings),
                                          mask_id=mask_id, lora=lora, four_bit=four_bit, progress=progress)
        save_adapter(trained, path, {**settings, "mask_id": mask_id})
        model, tokenizer = models.load_model(profile.model_name)
        found = path, settings
    path, settings = found
    mask_id = O.resolve_mask_token(tokenizer, settings["mask_token"], model=model)
    check_adapter_mask_id(path, mask_id, tokenizer)
    model = load_adapter(model, path, expected=settings)
    source = FALLBACK if settings == masked_lm_run_key(profile, "mntp", fallback=True) else NOTEBOOK_02
    _LOADED_ADAPTERS[profile.name] = {"source": source, "fingerprint": store.fingerprint(settings)}
    if source == FALLBACK:
        print(f"[mntp] using the short fallback MNTP adapter ({path}); run notebook 02 for the full one")
    if merge and not four_bit:
        model = model.merge_and_unload()
    return model.eval(), tokenizer, mask_id
