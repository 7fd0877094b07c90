"""§4.5, Table 2: inference speedup of SR with early exit, for every r x exit layer, measured in one run."""
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
def measure_speedups(body, input_ids: torch.Tensor, padding_mask: torch.Tensor, *, repeats: Sequence[int],
                     exits: Sequence[int | None], batch_size: int, trials: int = 3, policy: str = "packed",
                     progress: bool = True):
    """Table 2: inference time of SR features for every r x exit layer, as speedups over (r = 0, all layers).

    All configurations run in the same process, interleaved trial by trial; each time is the median of
    ``trials`` passes over the sentences. Returns ``(speedups, seconds, per_trial)``: the first two with rows exit
    layer (the model's depth for all layers) and columns r; ``per_trial[(exit layer, r)]`` the speedup within each
    trial (the base pass of the same trial over this configuration's), for intervals over trials.
    """
    import pandas as pd

    repeats = [M.check_repeats(r) for r in repeats]
    depth = models.num_layers(body)
    exits = [None if layer is None else check_exit_layer(layer, depth) for layer in exits]
    for r in repeats:
        check_fits(body, input_ids.shape[1], r)
    configs = [(layer, r) for layer in exits for r in repeats]
    if (None, 0) not in configs:
        configs.append((None, 0))
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
    trials = whole_number(trials, "trials")
    per_pass = metrics.interleaved_timings({config: one_pass(*config) for config in configs}, list(range(trials)),
                                           rounds=1, synchronize=synchronize, progress=progress, per_input=True)
    seconds = {config: statistics.median(elapsed) / 1000 for config, elapsed in per_pass.items()}
    base = seconds[(None, 0)]
    index = [layer if layer is not None else depth for layer in exits]
    speedups = pd.DataFrame([[base / seconds[(layer, r)] for r in repeats] for layer in exits],
                            index=pd.Index(index, name="exit layer"), columns=pd.Index(repeats, name="r"))
    raw = pd.DataFrame([[seconds[(layer, r)] for r in repeats] for layer in exits],
                       index=pd.Index(index, name="exit layer"), columns=pd.Index(repeats, name="r"))
    per_trial = {(layer if layer is not None else depth, r): tuple(base_ms / ms for base_ms, ms in
                                                                   zip(per_pass[(None, 0)], per_pass[(layer, r)]))
                 for layer, r in configs}
    return speedups, raw, per_trial


def speed_inputs(sentences: Sequence[EncodedSentence], count: int, pad_id: int):
    """The first ``count`` sentences as one right-padded batch (ids, padding mask) for :func:`measure_speedups`."""
    if not sentences:
        raise ValueError("sentences is empty; Table 2 needs sentences to time")
    chosen = list(sentences[:count])
    batch = collate(chosen, ("O",), pad_id)
    return batch["input_ids"], batch["padding_mask"]
