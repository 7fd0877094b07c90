"""Sequence repetition's Table 2 (seed 003): speedups timed trial by trial in one or more processes, and the two §4.5
statements as rows."""
import dataclasses

import pytest
import torch

from helpers import models
from helpers import ledger as claims
from helpers.papers.sequence_repetition import experiment_table2 as T2
from helpers.papers.sequence_repetition import report
from helpers.papers.sequence_repetition.mechanism import scaled_exit_layer


def test_speedups_come_with_one_value_per_trial_and_the_base_is_one(tiny):
    body, _ = tiny
    depth = models.num_layers(body)
    ids = torch.randint(3, 50, (3, 6))
    mask = torch.ones_like(ids)
    speedups, seconds, per_process = T2.measure_speedups(body, ids, mask, repeats=(0, 1), exits=[2, None],
                                                         batch_size=2, trials=3, progress=False)
    assert set(per_process) == {(2, 0), (2, 1), (depth, 0), (depth, 1)}
    assert all(len(runs) == 1 and len(runs[0]) == 3 and all(v > 0 for v in runs[0]) for runs in per_process.values())
    assert per_process[(depth, 0)] == ((1.0, 1.0, 1.0),)  # the base against itself, trial by trial
    assert speedups.loc[depth, 0] == pytest.approx(1.0)
    assert speedups.loc[2, 1] == pytest.approx(seconds.loc[depth, 0] / seconds.loc[2, 1])
    with pytest.raises(ValueError, match="trials"):
        T2.measure_speedups(body, ids, mask, repeats=(0,), exits=[None], batch_size=2, trials=0, progress=False)
    with pytest.raises(ValueError, match="processes"):
        T2.measure_speedups(body, ids, mask, repeats=(0,), exits=[None], batch_size=2, processes=0, progress=False)


def test_timed_passes_run_only_the_layers_before_the_exit(tiny):
    """§3.5, Table 2: exit@L is timed on the L - 1 layers before it, the base (r = 0) on all of them. Every decoder
    layer's calls are recorded during the timing: the r = 1 sequences (2n tokens) at exit@2 reach layer 0 only, the
    base's (n tokens) every layer."""
    body, _ = tiny
    layers = list(models.decoder_layers(body))
    ids = torch.randint(3, 50, (2, 6))
    seen = set()  # (layer index, sequence length) of every call of a decoder layer

    def record(index):
        def hook(module, args, kwargs):
            seen.add((index, (args[0] if args else kwargs["hidden_states"]).shape[1]))
        return hook

    hooks = [layer.register_forward_pre_hook(record(index), with_kwargs=True) for index, layer in enumerate(layers)]
    try:
        T2.measure_speedups(body, ids, torch.ones_like(ids), repeats=(1,), exits=[2], batch_size=2, trials=1,
                            progress=False)
    finally:
        for hook in hooks:
            hook.remove()
    assert {index for index, length in seen if length == 12} == {0}  # exit@2 keeps layers[:1]
    assert {index for index, length in seen if length == 6} == set(range(len(layers)))  # the base: every layer
    assert len(models.decoder_layers(body)) == len(layers)  # the timing restored every layer

def test_speedups_repeat_their_trials_in_fresh_processes(tiny):
    """Two processes: each times every configuration in its own interleaved trials (the base over itself is 1 in
    every trial of both), and the interval nests the trials in the processes."""
    body, _ = tiny
    depth = models.num_layers(body)
    ids = torch.randint(3, 50, (2, 5))
    _, _, per_process = T2.measure_speedups(body, ids, torch.ones_like(ids), repeats=(0, 1), exits=[None],
                                            batch_size=2, trials=2, processes=2, progress=False)
    assert per_process[(depth, 0)] == ((1.0, 1.0), (1.0, 1.0))
    assert len(per_process[(depth, 1)]) == 2 and all(len(trials) == 2 for trials in per_process[(depth, 1)])


def _trials(depth, faster, matched, full_r1=(0.5, 0.52, 0.48)):
    """Per configuration two processes of trials: the given ones and the same shifted by 0.01."""
    both = lambda trials: (tuple(trials), tuple(value + 0.01 for value in trials))  # noqa: E731
    return {(scaled_exit_layer(19, depth), 1): both(faster), (scaled_exit_layer(24, depth), 2): both(matched),
            (depth, 1): both(full_r1), (depth, 0): ((1.0, 1.0, 1.0), (1.0, 1.0, 1.0))}


def test_table2_rows_follow_the_rule_and_need_a_sane_timer_to_refute():
    depth = 30
    rows = report._speed_claims(_trials(depth, (1.5, 1.6, 1.55), (0.99, 1.01, 1.0)), depth, "cpu (2 threads)", "figures/04_")
    faster, matches = rows
    assert [row.id for row in rows] == ["sr.table2.r1_exit19", "sr.table2.r2_exit24"]
    assert faster.threshold == 1.0 and faster.direction == 1
    assert matches.margin == report.SPEED_MARGIN and matches.margin_source.startswith("ours:")
    assert "1.00x" in matches.ours and not faster.confound
    assert faster.n == 6 and "3 interleaved timing trials × 2 processes" in faster.method
    assert "1.51x" in faster.paper_value and "0.98x" in matches.paper_value  # Table 2's own cells
    # a CPU timing of a GPU table: the regime is declared on both rows, so neither can be decided, on either side
    assert all(row.regime == report.SPEED_REGIME and "GPU" in row.regime for row in rows)
    assert [row.verdict for row in rows] == ["inconclusive", "inconclusive"]
    slow = report._speed_claims(_trials(depth, (0.6, 0.62, 0.61), (0.45, 0.46, 0.44)), depth, "cpu", "figures/04_")
    assert [row.verdict for row in slow] == ["inconclusive", "inconclusive"] and not slow[0].confound
    # without the regime, the rule would decide them: reproduced on the paper's side, not reproduced beyond it
    undecided = lambda row: claims.Claim(**{**dataclasses.asdict(row), "regime": "", "verdict": ""})  # noqa: E731
    assert [undecided(row).verdict for row in rows] == ["reproduced", "reproduced"]
    assert [undecided(row).verdict for row in slow] == ["not reproduced", "not reproduced"]
    # a timer that does not order r=1 at full depth below the base confounds both rows
    blind = report._speed_claims(_trials(depth, (0.6, 0.62, 0.61), (0.45, 0.46, 0.44), full_r1=(1.2, 1.1, 1.3)),
                                 depth, "cpu", "figures/04_")
    assert all("timer does not order" in row.confound for row in blind)
    assert [undecided(row).verdict for row in blind] == ["inconclusive", "inconclusive"]
    assert all(row.quantity.endswith("(scaled)") and not row.trained for row in rows)
    assert report._speed_claims({}, depth, "cpu", "figures/04_") == []
    assert all(isinstance(row, claims.Claim) for row in rows)
