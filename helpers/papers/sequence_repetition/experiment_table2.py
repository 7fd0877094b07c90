"""§4.5, Table 2: inference speedup of SR with early exit, for every r x exit layer: interleaved trials within a
process, repeated in several processes."""
from __future__ import annotations

import statistics
from typing import Sequence

import torch

from ... import masks as M
from ... import metrics, models
from ...checks import whole_number
from .experiment_data import EncodedSentence, collate
from .mechanism import Strategy, check_exit_layer, check_fits, early_exit, sr_features


@torch.inference_mode()
def _timed_passes(body, input_ids: torch.Tensor, padding_mask: torch.Tensor, configs: list, batch_size: int,
                  trials: int, policy: str, progress: bool = False) -> dict:
    """Milliseconds of each ``(exit layer, r)`` pass over the sentences, one per trial, the configurations taking
    turns within every trial (:func:`helpers.metrics.interleaved_timings`). Runs in whichever process calls it."""
    device = next(body.parameters()).device
    batches = [(input_ids[i:i + batch_size].to(device), padding_mask[i:i + batch_size].to(device))
               for i in range(0, len(input_ids), batch_size)]

    def one_pass(layer, r):
        def run(_):
            with early_exit(body, layer):
                for ids, mask in batches:
                    sr_features(body, ids, mask, Strategy("sr", r), policy)
        return run

    synchronize = torch.cuda.synchronize if device.type == "cuda" else None
    return metrics.interleaved_timings({config: one_pass(*config) for config in configs}, list(range(trials)),
                                       rounds=1, synchronize=synchronize, progress=progress, per_input=True)


def measure_speedups(body, input_ids: torch.Tensor, padding_mask: torch.Tensor, *, repeats: Sequence[int],
                     exits: Sequence[int | None], batch_size: int, trials: int = 10, processes: int = 1,
                     policy: str = "packed", progress: bool = True):
    """Table 2: inference time of SR features for every r x exit layer, as speedups over (r = 0, all layers).

    Within a process the configurations take turns trial by trial (``trials`` interleaved passes over the sentences
    each), so drift hits them alike. ``processes`` = 1 times in this process; more run the same trials in that many
    fresh processes, one after another (:func:`helpers.workers.in_fresh_processes`, the body sent to each), so the rows
    see run-to-run variance (allocation, thread placement, the machine's state). Returns ``(speedups, seconds,
    per_process)``: the first two with rows exit layer (the model's depth for all layers) and columns r, each time
    the median of every pass of every process; ``per_process[(exit layer, r)]`` one tuple per process of the
    speedup within each trial (the base pass of the same trial over this configuration's), for intervals with the
    trials nested in the processes (:func:`helpers.metrics.trials_in_processes_interval`).
    """
    import pandas as pd

    from ... import workers

    repeats = [M.check_repeats(r) for r in repeats]
    depth = models.num_layers(body)
    exits = [None if layer is None else check_exit_layer(layer, depth) for layer in exits]
    for r in repeats:
        check_fits(body, input_ids.shape[1], r)
    trials = whole_number(trials, "trials")
    processes = whole_number(processes, "processes")
    configs = [(layer, r) for layer in exits for r in repeats]
    if (None, 0) not in configs:
        configs.append((None, 0))
    arguments = (body, input_ids, padding_mask, configs, batch_size, trials, policy)
    runs = workers.in_fresh_processes(_timed_passes, arguments, processes, progress=progress, models=(body,))
    seconds = {config: statistics.median(ms for run in runs for ms in run[config]) / 1000 for config in configs}
    index = [layer if layer is not None else depth for layer in exits]
    base = seconds[(None, 0)]
    speedups = pd.DataFrame([[base / seconds[(layer, r)] for r in repeats] for layer in exits],
                            index=pd.Index(index, name="exit layer"), columns=pd.Index(repeats, name="r"))
    raw = pd.DataFrame([[seconds[(layer, r)] for r in repeats] for layer in exits],
                       index=pd.Index(index, name="exit layer"), columns=pd.Index(repeats, name="r"))
    per_process = {(layer if layer is not None else depth, r):
                   tuple(tuple(base_ms / ms for base_ms, ms in zip(run[(None, 0)], run[(layer, r)])) for run in runs)
                   for layer, r in configs}
    return speedups, raw, per_process


def speed_inputs(sentences: Sequence[EncodedSentence], count: int, pad_id: int):
    """The first ``count`` sentences as one right-padded batch (ids, padding mask) for :func:`measure_speedups`."""
    if not sentences:
        raise ValueError("sentences is empty; Table 2 needs sentences to time")
    chosen = list(sentences[:count])
    batch = collate(chosen, ("O",), pad_id)
    return batch["input_ids"], batch["padding_mask"]
