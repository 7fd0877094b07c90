"""Notebook 04's numbers beside the paper's (:mod:`.declarations` holds the paper's and the claims): our tables,
sentences and claims rows.

- Fig. 1 (§2): the measured share of attention mass in full blocks against ``(k-1)/(k+1)``, four views;
- Fig. 2 and Table 1 (§4.1-§4.2): F1 against r, SR against middle and full unmasking;
- Fig. 5 (§4.4): early exit, fine-tuned and probed;
- Table 2 (§4.5): speedups.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ... import ledger
from ... import masks as M
from ... import metrics
from .declarations import (CLAIMS, EXIT_MARGIN, EXIT_PAPER_LAYERS, EXIT_REPEATS, PAPER_CONLL03, PAPER_SPEEDUPS,  # noqa: F401
                           PAPER_TABLE1_COLUMN, PAPER_TABLE1_R, SPEED_CELLS, SPEED_MARGIN, SPEED_REGIME, TAGGING_DATASET,
                           paper_f1_by_r, paper_speedups_table, paper_table1)
from .experiment import exit_or_none
from .experiment_data import TaggingData
from .experiment_probe import probe_layer_difference, probe_middle_gain
from .mechanism import SHARE_VIEWS, Strategy, scaled_exit_layer
from .settings import TAGGER_CURVE

# --------------------------------------------------------------------------- Fig. 1: block shares

def block_share_views_table(views: dict[str, dict[int, "object"]], resamples: int = 2000):
    """Fig. 1 in numbers, one row per r > 0: (k-1)/(k+1) beside each view's share (mean over layers and
    sentences) with its 95% bootstrap interval over sentences."""
    import pandas as pd

    rows = []
    for r in sorted(next(iter(views.values()))):
        if r == 0:
            continue
        row = {"r": r, "analytic (k-1)/(k+1) of blocks": M.bidirectional_block_share(r)}
        for view in SHARE_VIEWS:
            per_sentence = views[view][r].mean(-1).tolist()
            value, low, high = metrics.bootstrap_interval(per_sentence, resamples=resamples)
            row[view] = value
            row[f"{view} 95% interval"] = (low, high)
        rows.append(row)
    return pd.DataFrame(rows).set_index("r")


def describe_block_share_views(table) -> str:
    """Which measured share agrees with (k-1)/(k+1): the formula's value inside a view's interval, per r."""
    lines = []
    for r, row in table.iterrows():
        formula = row["analytic (k-1)/(k+1) of blocks"]
        parts = []
        for view in SHARE_VIEWS:
            low, high = row[f"{view} 95% interval"]
            where = "agrees" if low <= formula <= high else ("above" if low > formula else "below")
            parts.append(f"{view} {row[view]:.2f} [{low:.2f}, {high:.2f}] ({where})")
        lines.append(f"r={r}: formula {formula:.2f}; " + "; ".join(parts) + ".")
    return "\n".join(lines)


def block_share_summary(measured: dict):
    """Fig. 1 in numbers: per r, the mean over layers of attention mass in full and in diagonal blocks, and (k-1)/(k+1)."""
    import pandas as pd

    rows = []
    for r, shares in sorted(measured.items()):
        full = float(shares.mean())
        rows.append({"r": r, "full blocks (measured)": full, "diagonal blocks (measured)": 1 - full,
                     "full blocks (analytic share of blocks)": M.bidirectional_block_share(r),
                     "lowest layer": float(shares.min()), "highest layer": float(shares.max())})
    return pd.DataFrame(rows).set_index("r")


def describe_block_shares(block_summary, similarity: dict | None = None) -> str:
    """§2 on our numbers: the measured share of attention mass in full blocks against (k-1)/(k+1), and (optional)
    the last layer's cosine between SR's last copy and the fully unmasked single copy."""
    parts = [f"r={r}: {row['full blocks (measured)']:.2f} measured vs {row['full blocks (analytic share of blocks)']:.2f} analytic "
             f"(layers {row['lowest layer']:.2f}-{row['highest layer']:.2f})" for r, row in block_summary.iterrows() if r > 0]
    rising = all(a < b for a, b in zip(block_summary["full blocks (measured)"], block_summary["full blocks (measured)"][1:]))
    return ("Attention mass in full (bidirectional) blocks, mean over layers: " + "; ".join(parts) + ". "
            + ("It rises with r, as the block count predicts." if rising else "It does not rise monotonically with r.")
            + ("" if not similarity else " Untrained, last-layer cosine to the fully unmasked model: "
               + ", ".join(f"r={r} {float(values[-1]):.2f}" for r, values in sorted(similarity.items())) + "."))


# --------------------------------------------------------------------------- Fig. 2, Table 1, Fig. 5: F1

def summarize(*results, split: str = "test"):
    """Mean and 95% CI half-width of F1 (x100, as the paper reports) over seeds, per task and strategy, and the
    mean validation F1 (what :func:`best_sr_r` selects on). ``ci95`` is NaN for a single seed (print "n/a").

    ``results`` are one or more tables from :func:`~.experiment.run_experiments`.
    """
    import pandas as pd

    column = f"{split}_f1"
    rows = []
    keys = ["task", "kind", "r", "exit_layer", "strategy"]
    frame = pd.concat(results, ignore_index=True)
    frame["exit_layer"] = frame["exit_layer"].astype("object").where(frame["exit_layer"].notna(), None)
    for key, group in frame.groupby(keys, dropna=False, sort=False):
        mean, low, high = metrics.seed_interval([100 * value for value in group[column]])
        rows.append(dict(zip(keys, key), f1=mean, ci95=math.nan if low is None else high - mean, seeds=len(group),
                         validation_f1=100 * float(np.mean(group["validation_f1"]))))
    return pd.DataFrame(rows)


def f1_text(f1: float, ci95: float, seeds: int) -> str:
    """``"80.5 ± 2.1 (2 seeds)"``, or ``"80.5 ± n/a (1 seed)"``: a single seed has no interval."""
    spread = "n/a" if seeds < 2 or not math.isfinite(ci95) else f"{ci95:.1f}"
    return f"{f1:.1f} ± {spread} ({seeds} seed{'s' if seeds != 1 else ''})"


def best_sr_r(summary, task: str) -> int:
    """The r with the highest mean **validation** F1 among full-depth SR runs (how Table 1 picks its SR row;
    the test split never chooses)."""
    sr = summary[(summary.task == task) & (summary.kind == "sr") & summary.exit_layer.isna()]
    if sr.empty:
        raise ValueError(f"task={task!r} has no full-depth SR rows in the summary")
    return int(sr.loc[sr.validation_f1.idxmax(), "r"])


def table1(summary):
    """Table 1 at our scale: SR at its best r on validation, middle and full unmasking, ours (test mean ± CI)
    beside the paper.

    The paper column is Table 1's CoNLL03 column averaged over its seven decoders (:func:`paper_table1`).
    """
    import pandas as pd

    paper = paper_table1()
    rows = []
    for task in summary.task.unique():
        full_depth = summary[(summary.task == task) & summary.exit_layer.isna()]
        best = best_sr_r(summary, task)
        for kind, label in (("sr", f"SR (r={best})"), ("middle", "middle unmasking"), ("full", "full unmasking")):
            picked = full_depth[(full_depth.kind == kind) & ((full_depth.r == best) if kind == "sr" else True)]
            if picked.empty:
                continue
            row = picked.iloc[0]
            rows.append({"task": task, "method": label, "ours F1": f1_text(row.f1, row.ci95, row.seeds),
                         "ours mean": row.f1, PAPER_TABLE1_COLUMN: paper[kind]})
    return pd.DataFrame(rows)


def describe_repetitions(summary) -> str:
    """§4.2's claims checked on our numbers: r = 1 beats r = 0, the largest jump is 0 -> 1, more r does not hurt."""
    paper = paper_f1_by_r()
    lines = [f"Paper (Table 5, CoNLL03, mean of 7 decoders): r=0 {paper[0]:.1f}, r=1 {paper[1]:.1f}, r=2 {paper[2]:.1f}, "
             f"r=4 {paper[4]:.1f}, r=8 {paper[8]:.1f}; middle {paper['middle']:.1f}, full {paper['full']:.1f}."]
    for task in summary.task.unique():
        sr = summary[(summary.task == task) & (summary.kind == "sr") & summary.exit_layer.isna()].sort_values("r")
        values = dict(zip(sr.r, sr.f1))
        text = ", ".join(f"r={r} {f1:.1f}" for r, f1 in values.items())
        line = f"Ours, {task}: {text}."
        if 0 in values and 1 in values:
            jumps = [values[b] - values[a] for a, b in zip(list(values), list(values)[1:])]
            line += (f" r=1 {'beats' if values[1] > values[0] else 'does not beat'} r=0 by {values[1] - values[0]:+.1f}; "
                     f"the largest step is {'0 -> 1' if jumps and max(jumps) == jumps[0] else 'elsewhere'}; "
                     f"best r on validation = {best_sr_r(summary, task)}.")
        for kind in ("middle", "full"):
            base = summary[(summary.task == task) & (summary.kind == kind)]
            if not base.empty and values:
                line += f" {kind} unmasking {base.f1.iloc[0]:.1f} ({max(values.values()) - base.f1.iloc[0]:+.1f} for the best SR)."
        lines.append(line)
    return "\n".join(lines)


def describe_early_exit(summary, num_layers: int) -> str:
    """§4.4's claims on our numbers: how close each exit layer comes to the full-depth F1 of the same r."""
    lines = []
    exits = summary[summary.exit_layer.notna()]
    for (task, r), group in exits.groupby(["task", "r"]):
        full = summary[(summary.task == task) & (summary.kind == "sr") & (summary.r == r) & summary.exit_layer.isna()]
        if full.empty:
            continue
        reference = full.f1.iloc[0]
        parts = ", ".join(f"exit@{int(row.exit_layer)} {row.f1:.1f} ({row.f1 - reference:+.1f})"
                          for row in group.sort_values("exit_layer").itertuples())
        lines.append(f"{task}, r={r}: full depth ({num_layers} layers) {reference:.1f}; {parts}.")
    lines.append("Paper (§4.4, Mistral-7B): exit@9 falls short of the last layer, exit@14 can match it, "
                 "exit@19 and exit@24 are the best and improve with r.")
    return "\n".join(lines)


def _selected(results, task: str, kind: str, r: int = 0, exit_layer: int | None = None):
    rows = results[(results.task == task) & (results.kind == kind) & (results.r == r)]
    return rows.loc[np.array([exit_or_none(value) == exit_layer for value in rows.exit_layer], dtype=bool)]


def f1_comparison(results, tagging: TaggingData, first: dict, second: dict | None = None,
                  resamples: int = 2000) -> dict:
    """Test F1 (x100) of ``first`` (``dict(kind=, r=, exit_layer=)``), or its difference from ``second``, over the
    seeds both share: each seed's value on the whole test set with its paired bootstrap interval over test sentences,
    then the seed mean with a t interval over seeds, the sentences nested
    (:func:`metrics.seeds_with_examples_interval`, the same rule as a seed study's rows).
    Returns value, low, high, seeds, seed_values and sentences."""
    gold = [list(sentence.tags) for sentence in tagging.test]
    chosen = [_selected(results, tagging.task, **spec) for spec in ([first] if second is None else [first, second])]
    seeds = sorted(set.intersection(*[set(rows.seed) for rows in chosen]))
    if not seeds:
        raise ValueError(f"first={first!r}, second={second!r}: no seed has runs of both in task {tagging.task!r}")

    def statistic(records):
        scores = [metrics.f1_from_counts([record[i] for record in records]) for i in range(len(chosen))]
        return 100 * (scores[0] - (scores[1] if len(scores) > 1 else 0.0))

    seed_values, halves = [], []
    for seed in seeds:
        counts = [metrics.entity_counts(gold, rows[rows.seed == seed].iloc[0]["test_predictions"]) for rows in chosen]
        value, low, high = metrics.bootstrap_interval(list(zip(*counts)), statistic, resamples=resamples)
        seed_values.append(value)
        halves.append((high - low) / 2)
    value, low, high = metrics.seeds_with_examples_interval(seed_values, halves)
    return {"value": value, "low": low, "high": high, "seeds": len(seeds), "seed_values": tuple(seed_values),
            "sentences": len(gold)}


# --------------------------------------------------------------------------- Fig. 5 without fine-tuning: the probe

def probe_table(probe: dict[int, list], resamples: int = 1000):
    """Probe F1 (x100) per r and layer with its 95% bootstrap interval over test sentences."""
    import pandas as pd

    rows = []
    for r, per_layer in probe.items():
        for layer, counts in enumerate(per_layer):
            value, low, high = metrics.bootstrap_interval(counts, lambda sample: 100 * metrics.f1_from_counts(sample),
                                                          resamples=resamples)
            rows.append({"r": r, "layer": layer, "f1": value, "low": low, "high": high})
    return pd.DataFrame(rows)


def describe_probe(table, probe: dict[int, list], num_layers: int) -> str:
    """The probe's layer curve and its r=0 -> r=1 gain at the middle layers, in words."""
    lines = []
    for r, rows in table.groupby("r"):
        best = rows.loc[rows.f1.idxmax()]
        last = rows[rows.layer == num_layers].iloc[0]
        lines.append(f"r={r}: best layer {int(best.layer)} ({best.f1:.1f} [{best.low:.1f}, {best.high:.1f}]); "
                     f"last layer {last.f1:.1f} [{last.low:.1f}, {last.high:.1f}].")
    if 0 in probe and 1 in probe:
        value, low, high = probe_middle_gain(probe, num_layers)
        lower, upper = M.middle_unmasked_layers(num_layers)
        lines.append(f"r=1 minus r=0 over the middle layers {lower}..{upper}: {value:+.1f} [{low:+.1f}, {high:+.1f}] F1.")
    return "\n".join(lines)


# --------------------------------------------------------------------------- Table 2: speed

def describe_speedups(ours, num_layers: int) -> str:
    """Table 2's shape on our numbers: where SR with early exit matches the base model's time."""
    paper = paper_speedups_table()
    at_par = [(layer, r) for layer in ours.index for r in ours.columns if r > 0 and layer < num_layers and ours.loc[layer, r] >= 0.95]
    deepest = max(ours.index[ours.index < num_layers], default=None)
    text = (f"Ours ({num_layers} layers): r=1 at exit@{ours.index[0]} runs {ours.loc[ours.index[0], 1]:.2f}x the base speed"
            if 1 in ours.columns else "Ours:")
    if deepest is not None and 2 in ours.columns:
        text += f"; r=2 at exit@{deepest} runs {ours.loc[deepest, 2]:.2f}x (paper, exit@24 of 32: {paper.loc[24, 2]:.2f}x)"
    if num_layers in ours.index and max(ours.columns) > 0:
        r_max = max(ours.columns)
        text += f"; r={r_max} at full depth runs {ours.loc[num_layers, r_max]:.2f}x"
    text += f". Configurations with SR at or above 0.95x the base speed: {at_par or 'none'}."
    return text


# --------------------------------------------------------------------------- the summary table and the claims

def summary_table(block_summary, summary, speedups, num_layers: int):
    """Every number notebook 04 reproduces, ours beside the paper's (Fig. 1, Fig. 2, Table 1, Fig. 5, Table 2)."""
    import pandas as pd

    rows = []
    for r, row in block_summary.iterrows():
        rows.append(("Fig. 1 / §2", f"r={r}: share in full blocks", f"{row['full blocks (analytic share of blocks)']:.2f} of blocks",
                     f"{row['full blocks (measured)']:.2f} of attention mass"))
    paper = paper_f1_by_r()
    full_depth = summary[summary.exit_layer.isna()]
    for row in full_depth[full_depth.kind == "sr"].itertuples():
        reference = f"{paper[row.r]:.1f} (CoNLL03, 7-decoder mean)" if row.r in paper else "-"
        rows.append(("Fig. 2", f"{row.task}, SR r={row.r}", reference, f1_text(row.f1, row.ci95, row.seeds)))
    for _, row in table1(summary).iterrows():
        rows.append(("Table 1", f"{row['task']}, {row['method']}", f"{row[PAPER_TABLE1_COLUMN]:.1f} (CoNLL03, 7-decoder mean)",
                     row["ours F1"]))
    for row in summary[summary.exit_layer.notna()].itertuples():
        full = full_depth[(full_depth.task == row.task) & (full_depth.kind == "sr") & (full_depth.r == row.r)]
        reference = f"{full.f1.iloc[0]:.1f} at all {num_layers} layers" if not full.empty else "-"
        rows.append(("Fig. 5", f"{row.task}, r={row.r}, exit@{int(row.exit_layer)}",
                     "figure only: exit@19/24 match the last layer, exit@9 falls short",
                     f"{f1_text(row.f1, row.ci95, row.seeds)} (vs {reference})"))
    for paper_layer, by_r in PAPER_SPEEDUPS.items():
        ours_layer = scaled_exit_layer(paper_layer, num_layers)
        for r, value in by_r.items():
            if ours_layer in speedups.index and r in speedups.columns:
                rows.append(("Table 2", f"exit@{paper_layer} of 32 (ours @{ours_layer} of {num_layers}), r={r}",
                             f"{value:.2f}x", f"{speedups.loc[ours_layer, r]:.2f}x"))
    return pd.DataFrame(rows, columns=["paper item", "quantity", "paper", "ours"])


# --------------------------------------------------------------------------- the claims

def _block_share_claim(views: dict, figure_prefix: str):
    """Fig. 1: the rise of attention mass in full blocks (sink excluded) from the smallest to the largest r > 0."""
    table = block_share_views_table(views)
    r_low, r_high = int(table.index.min()), int(table.index.max())
    rise = [float(a - b) for a, b in zip(views["all queries, sink excluded"][r_high].mean(-1),
                                         views["all queries, sink excluded"][r_low].mean(-1))]
    value, low, high = metrics.bootstrap_interval(rise)
    shown = "; ".join(f"r={r}: " + ", ".join(f"{view} {row[view]:.2f}" for view in SHARE_VIEWS)
                      for r, row in table.iterrows())
    return CLAIMS["sr.fig1.block_share_rise"].measured(
        value, low, high, "bootstrap over sentences", len(rise), ours=f"{value:+.2f} (r={r_high} minus r={r_low})",
        note=f"measured shares: {shown}; (k-1)/(k+1) at these r: "
             + ", ".join(f"{row['analytic (k-1)/(k+1) of blocks']:.2f}" for _, row in table.iterrows()),
        figure=f"{figure_prefix}sr_block_shares.png")


def validation_curve(results, task: str, spec: dict) -> list[tuple[int, float]]:
    """The validation F1 curve (x100) of ``spec``'s taggers: each seed's ``(step, validation_f1)`` evaluations,
    averaged over the seeds at the steps all of them evaluated (:func:`helpers.metrics.mean_curve`); [] without
    evaluations."""
    curves = [[(int(step), 100 * float(score)) for step, score in evaluations]
              for evaluations in _selected(results, task, **spec).evaluations if len(evaluations)]
    return metrics.mean_curve(curves) if curves else []


def budget_curve(results, task: str, claimed: dict, other: dict) -> dict | None:
    """The held-out curves a fine-tuned comparison's budget check reads: the validation F1 curve of the tagger the
    claim is about (``claimed``) and, as ``against``, the other tagger's (``other``), both trained under one
    :class:`TaggerTraining`: the row's declaration reads their *gap* (``GAP_STOP``,
    :func:`helpers.curves.gap_stopped`). None when either has no evaluations."""
    points, against = (validation_curve(results, task, spec) for spec in (claimed, other))
    if not points or not against:
        return None
    return ledger.curve(f"{TAGGER_CURVE}: {Strategy(**claimed).label} against {Strategy(**other).label} ({task})",
                        points, against=against)


def _fine_tuned_claims(results, tagging: TaggingData, num_layers: int, figure_prefix: str) -> list:
    """Fig. 2 (r=1 against r=0, r=2 against r=1), Table 1 (SR at its validation-best r against both baselines) and
    Fig. 5 (each exit at the paper's best exits, 19 and 24 of 32, against full depth, and the most against the fewest
    repetitions there), from the fine-tuned runs. Each row's budget check reads the gap between the two taggers'
    validation F1 curves (:func:`budget_curve`)."""
    task = tagging.task
    has = lambda kind, r=0, exit_layer=None: not _selected(results, task, kind, r, exit_layer).empty  # noqa: E731

    def beats_causal(spec: dict) -> tuple[bool, str]:
        """Whether the tagger ``spec`` beats the causal decoder (r = 0) in this run: its F1 difference's 95%
        interval lies above 0 (the comparison the paper makes for it)."""
        if not has("sr", 0):
            return False, f"{Strategy(**spec).label} not shown to beat r=0: no r=0 tagger in this run"
        check = f1_comparison(results, tagging, spec, dict(kind="sr", r=0))
        return bool(check["low"] > 0), (f"{Strategy(**spec).label} - r=0: {check['value']:+.1f} "
                                        f"[{check['low']:.1f}, {check['high']:.1f}] F1")

    def comparison_row(claim_id, first, second, figure, baseline=None, note=""):
        """The row ``claim_id`` from ``first`` against ``second`` (F1 difference, x100). ``baseline``: the tagger
        that must beat the causal decoder (r = 0) to count as working."""
        found = f1_comparison(results, tagging, first, second)
        works, notes = {}, [note] if note else []
        if baseline is not None:
            passed, text = beats_causal(baseline)
            works = dict(baseline_works=passed)
            notes.append(f"baseline check: {text}")
        seeds = found["seeds"]
        each = ", ".join(f"{value:+.1f}" for value in found["seed_values"])
        method = (f"t over {seeds} training seeds, with a paired bootstrap over test sentences nested" if seeds > 1
                  else "paired bootstrap over test sentences (one training seed)")
        spread = f"mean of {seeds} seeds: {each}" if seeds > 1 else "one training seed"
        return CLAIMS[claim_id].measured(
            found["value"], found["low"], found["high"], method, found["sentences"],
            ours=f"{found['value']:+.1f} F1 ({task}, {spread})", note="; ".join(notes),
            plateau=budget_curve(results, task, first, second), figure=f"{figure_prefix}{figure}.png",
            seed_values=found["seed_values"], n_seeds=seeds, **works)

    rows = []
    if has("sr", 0) and has("sr", 1):
        rows.append(comparison_row("sr.fig2.r1_vs_r0", dict(kind="sr", r=1), dict(kind="sr", r=0), "sr_f1_vs_r"))
    if has("sr", 1) and has("sr", 2):
        rows.append(comparison_row("sr.fig2.r2_vs_r1", dict(kind="sr", r=2), dict(kind="sr", r=1), "sr_f1_vs_r",
                                   baseline=dict(kind="sr", r=1)))
    best = best_sr_r(summarize(results), task)
    for kind in ("middle", "full"):
        if has("sr", best) and has(kind):
            rows.append(comparison_row(f"sr.table1.sr_vs_{kind}", dict(kind="sr", r=best), dict(kind=kind),
                                       "sr_f1_vs_r", baseline=dict(kind=kind), note=f"SR at r={best}"))
    exits = {exit_or_none(value) for value in results.exit_layer} - {None}
    for paper_layer in EXIT_PAPER_LAYERS:
        exit_layer = scaled_exit_layer(paper_layer, num_layers)
        if exit_layer not in exits:
            continue
        where = f"exit@{exit_layer}: {exit_layer - 1} of {num_layers} layers"
        repeats = sorted(r for r in set(results.r) if has("sr", r, exit_layer))
        for r in repeats:
            if has("sr", r) and f"sr.fig5.exit{paper_layer}.r{r}" in CLAIMS:
                rows.append(comparison_row(f"sr.fig5.exit{paper_layer}.r{r}", dict(kind="sr", r=r, exit_layer=exit_layer),
                                           dict(kind="sr", r=r), "sr_early_exit", baseline=dict(kind="sr", r=r),
                                           note=where))
        if len(repeats) > 1:
            rows.append(comparison_row(f"sr.fig5.exit{paper_layer}.more_repeats",
                                       dict(kind="sr", r=repeats[-1], exit_layer=exit_layer),
                                       dict(kind="sr", r=repeats[0], exit_layer=exit_layer), "sr_early_exit",
                                       note=f"{where}; r={repeats[-1]} - r={repeats[0]}"))
    return rows


def _probe_claims(probe: dict, tagging: TaggingData, num_layers: int, figure_prefix: str) -> list:
    """The frozen-feature probe (rows the paper does not state): r=1 against r=0 in the middle layers (Fig. 2), and
    the state entering the scaled exit@19 against the last layer for every r > 0 (Fig. 5)."""
    task = tagging.task
    rows = []
    if 0 in probe and 1 in probe:
        value, low, high = probe_middle_gain(probe, num_layers)
        lower, upper = M.middle_unmasked_layers(num_layers)
        rows.append(CLAIMS["sr.fig2.probe.r1_vs_r0"].measured(
            value, low, high, "paired bootstrap over test sentences", len(tagging.test),
            ours=f"{value:+.1f} F1 ({task}, mean over {upper - lower + 1} layers)",
            note=f"middle layers {lower}..{upper} of {num_layers}", figure=f"{figure_prefix}sr_probe.png"))
    exit_layer = scaled_exit_layer(19, num_layers)
    for r in sorted(probe):
        if r == 0 or f"sr.fig5.probe.exit19.r{r}" not in CLAIMS:
            continue
        value, low, high = probe_layer_difference(probe, r, exit_layer - 1, num_layers)
        rows.append(CLAIMS[f"sr.fig5.probe.exit19.r{r}"].measured(
            value, low, high, "paired bootstrap over test sentences", len(tagging.test),
            ours=f"{value:+.1f} F1 ({task})", note=f"the state entering layer {exit_layer} (exit@{exit_layer}, "
                                                   f"{exit_layer - 1} of {num_layers} layers)",
            figure=f"{figure_prefix}sr_probe.png"))
    return rows


def _speed_claims(per_process: dict, num_layers: int, speed_device: str, figure_prefix: str) -> list:
    """Table 2 (§4.5) on our timer: the speedup over the base (r = 0, all layers) within each interleaved trial,
    ``per_process[(exit layer, r)]`` one tuple of trials per process (``measure_speedups``), with the trials nested in
    the processes (:func:`helpers.metrics.trials_in_processes_interval`), at the paper's exit layers scaled to our
    depth. Both rows carry the hardware regime (:data:`SPEED_REGIME`), so neither can be decided here; a timer that
    does not order what it must (r = 1 at full depth slower than the base) also confounds them."""
    interval = metrics.trials_in_processes_interval
    full_r1 = per_process.get((num_layers, 1))
    timed = lambda runs: runs is not None and all(len(trials) >= 2 for trials in runs)  # noqa: E731
    sane = timed(full_r1) and interval(full_r1)[2] < 1.0
    timer = (f"r=1 at full depth runs {interval(full_r1)[0]:.2f}x the base speed" if timed(full_r1)
             else "r=1 at full depth was not timed")
    confound = "" if sane else (f"the timer does not order the configurations as their work does ({timer}; it "
                                "must lie below 1 with its interval)")
    rows = []
    for paper_layer, r, _ in SPEED_CELLS:
        layer = scaled_exit_layer(paper_layer, num_layers)
        runs = per_process.get((layer, r))
        if not timed(runs):
            continue
        value, low, high = interval(runs)
        rows.append(CLAIMS[f"sr.table2.r{r}_exit{paper_layer}"].measured(
            value, low, high, metrics.trials_in_processes_method(runs), sum(len(trials) for trials in runs),
            ours=f"{value:.2f}x at exit@{layer} of {num_layers} on {speed_device}", note=f"timer check: {timer}",
            confound=confound, figure=f"{figure_prefix}sr_speed.png"))
    return rows


def claims(views: dict, results: Sequence, tagging: TaggingData, probe: dict | None, num_layers: int,
           figure_prefix: str = "figures/04_", *, speed: dict | None = None, speed_device: str = "") -> list:
    """Notebook 04's ledger rows, each built from its declaration in :data:`CLAIMS`: Fig. 1 shares, Fig. 2 (r=0 vs
    r=1, r=1 vs r=2), Table 1 (SR vs middle and full unmasking), Fig. 5 (exit vs full depth, fine-tuned and probed)
    and, with ``speed`` (``measure_speedups``' per-process, per-trial speedups, timed on ``speed_device``), Table 2.
    ``results`` are tables from :func:`~.experiment.run_experiments`; the rows of ``tagging.task`` are used."""
    import pandas as pd

    results = pd.concat(list(results), ignore_index=True)
    results = results[results.task == tagging.task]
    if results.empty:
        raise ValueError(f"results hold no runs of task={tagging.task!r}")
    rows = [_block_share_claim(views, figure_prefix)]
    rows += _fine_tuned_claims(results, tagging, num_layers, figure_prefix)
    if probe:
        rows += _probe_claims(probe, tagging, num_layers, figure_prefix)
    if speed:
        rows += _speed_claims(speed, num_layers, speed_device or "this machine", figure_prefix)
    return rows
