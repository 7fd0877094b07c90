"""The processes of a training run: ``accelerate launch`` runs :func:`helpers.training.train`'s loop once per process.

Every step has ``grad_accum`` micro-batches whatever the number of processes; process p computes micro-batches
p, p + N, ... (:func:`process_micro_batches`), each under torch's generator seeded by ``(seed, step, micro-batch)``
(:func:`micro_batch_rng`), and one all-reduce adds their gradients and losses (:func:`sum_gradients`), so N processes
train what one does. Only the main process writes (:func:`on_main_process`) and holds the run folder's lock
(:func:`one_at_a_time`). :func:`split_step` splits a notebook's step into more micro-batches, so that more processes
have work.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable

import torch

from . import memory, store
from .checks import whole_number

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
    launch, just call it. For what a run writes outside :func:`helpers.training.train` (an adapter, a result file)."""
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
def micro_batch_rng(seed: int, step: int, micro: int, device: torch.device):
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


def across_processes(tensors: list[torch.Tensor], operation: str) -> None:
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


def sum_gradients(parameters: list, loss: float, device: torch.device) -> float:
    """Add the processes' gradients and losses of one step: afterwards every process holds the gradient of the
    whole step (its micro-batches' Σ ∇(loss / grad_accum)) and returns the step's loss (their mean). A parameter
    no process computed a gradient for keeps ``grad = None``, as in one process."""
    used = torch.tensor([float(parameter.grad is not None) for parameter in parameters], device=device)
    for parameter in parameters:
        if parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)
    total = torch.tensor([loss], dtype=torch.float64, device=device)
    across_processes([parameter.grad for parameter in parameters] + [used, total], "sum")
    for parameter, count in zip(parameters, used.tolist()):
        if count == 0:
            parameter.grad = None
    return float(total.item())


def one_at_a_time(accelerator, run_dir: Path) -> contextlib.ExitStack:
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



def accelerator_for(mixed_precision: str):
    """An accelerator with ``mixed_precision``. accelerate keeps one mixed precision per process and refuses another;
    one process may train a bf16 model (the masked LM on a CPU that computes bf16) and then float32 heads on its
    features, so a change resets that one setting (the distributed state, which joins a launch's processes, stays)."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    if AcceleratorState._shared_state.get("_mixed_precision", mixed_precision) != mixed_precision:
        AcceleratorState._reset_state(reset_partial_state=False)
    return Accelerator(mixed_precision=mixed_precision)



def check_same_start(accelerator, run_dir: Path, start: int) -> None:
    """Every process of a launch must resume from the same checkpoint (the main process's): on several machines the
    run folder must be on a file system they all see."""
    if accelerator.num_processes == 1:
        return
    from accelerate.utils import gather_object

    starts = gather_object([start])
    if len(set(starts)) > 1:
        raise RuntimeError(f"the processes found different checkpoints in {run_dir} (steps {starts}, by process): "
                           "put WORKBOOK_ROOT on a file system every machine of the launch sees")



def split_step(settings, micro_batch: int | None):
    """``settings`` (a notebook's training settings: ``batch_size`` rows x ``grad_accum`` micro-batches per step) with
    each step's rows split into micro-batches of ``micro_batch`` rows (None: unchanged).

    The rows per step stay the same; the accumulation grows, so that N processes have micro-batches to share
    (:func:`process_micro_batches`). The loss is a mean per micro-batch and each micro-batch draws its own dropout,
    so this is another run, and the micro-batch is part of its key (as when ``memory.fit_training`` shrinks it to fit
    a GPU): a notebook finds such a run only under the same micro-batch.
    """
    if micro_batch is None:
        return settings
    recipe = getattr(settings, "training", settings)  # sequence repetition nests its batch sizes
    rows = recipe.batch_size * recipe.grad_accum
    if isinstance(micro_batch, bool) or not isinstance(micro_batch, int) or micro_batch < 1 or rows % micro_batch:
        raise ValueError(f"micro_batch={micro_batch!r} must be a whole number that divides the {rows} rows of each "
                         f"step ({recipe.batch_size} x {recipe.grad_accum})")
    return memory.with_micro_batch(settings, micro_batch, rows // micro_batch)

