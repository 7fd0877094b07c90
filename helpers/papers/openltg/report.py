"""Notebook 05's report (OpenLTG, seed 002): the paper's numbers (once), our tables next to them, the sentences
the notebook prints and its claims (:func:`claims`, the rows of :mod:`helpers.claims`)."""
from __future__ import annotations

from dataclasses import asdict
from typing import Sequence

import numpy as np

from ... import metrics
from ...claims import DEFINITION, EXACT, Claim
from .experiment import ABLATIONS, AR_ROW, LAST_LAYER_ROW, SMART_ROW, TRUTH_ROW, function_word_share, speed_ratio_samples
from .experiment_table6 import Table6Scores, paired_metric_difference
from .experiment_table7 import LengthScores
from .mechanism import Decoded
from .settings import OpenLTGSettings

# The paper's numbers (seed 002). Table 6: Rep = LR-n (LR-2 ROC, LR-5 WP), Dist = D-4, PPL under GPT-2.
PAPER_TABLE6 = {
    "ROC": {"Ours": {"B-1": 33.22, "R-L": 18.22, "Rep": 3.28, "Dist": 68.93, "PPL": 53.00},
            "w/o DSWA": {"B-1": 32.12, "R-L": 17.67, "Rep": 3.71, "Dist": 68.53, "PPL": 48.87},
            "w/o LTD": {"B-1": 33.04, "R-L": 17.73, "Rep": 11.29, "Dist": 69.66, "PPL": 78.07},
            "w/o ALL": {"B-1": 31.86, "R-L": 16.96, "Rep": 14.49, "Dist": 67.30, "PPL": 67.75}},
    "WP": {"Ours": {"B-1": 32.80, "R-L": 12.97, "Rep": 0.73, "Dist": 86.70, "PPL": 85.88},
           "w/o DSWA": {"B-1": 29.37, "R-L": 12.31, "Rep": 0.90, "Dist": 86.07, "PPL": 86.95},
           "w/o LTD": {"B-1": 29.80, "R-L": 13.88, "Rep": 17.80, "Dist": 64.53, "PPL": 63.08},
           "w/o ALL": {"B-1": 12.95, "R-L": 6.60, "Rep": 90.58, "Dist": 32.15, "PPL": 17.69}},
}
# Table 4: the AR baseline (BART) and the references, same columns.
PAPER_TABLE4 = {
    "ROC": {"AR (BART)": {"Rep": 3.93, "Dist": 79.07, "PPL": 65.21, "Speedup": 1.0},
            "Ours": {"Rep": 3.28, "Dist": 68.93, "PPL": 53.00, "Speedup": 2.9},
            "Ground truth": {"Rep": 2.50, "Dist": 46.46, "PPL": 53.35}},
    "WP": {"AR (BART)": {"Rep": 0.73, "Dist": 90.38, "PPL": 88.74, "Speedup": 1.0},
           "Ours": {"Rep": 0.73, "Dist": 86.70, "PPL": 85.88, "Speedup": 6.4},
           "Ground truth": {"Rep": 0.45, "Dist": 49.23, "PPL": 55.39}},
}
# §6.1 / Fig. 5: tokens/s of mask-predict on an A100 at batch 1 and the speedup over BART.
PAPER_SPEED = {"ROC": (133, 391), "WP": (137, 882), "WikiPlots": (132, 1753), "speedup": (3.0, 13.0)}
# §3.3: function words hold 35-45% of the high-probability region at iteration 1 (the bad case of Fig. 2).
PAPER_FUNCTION_WORD_SHARE = (0.35, 0.45)
# Table 4's arrows (B-1, R-L, D-4 up; LR-n down) and §5.2's "lower perplexity": +1 when higher is better.
PAPER_BETTER = {"B-1": 1, "R-L": 1, "LR-n": -1, "D-4": 1, "PPL": -1}
TABLE6_OTHER_COLUMNS = {"B-1": "B-1", "R-L": "R-L", "D-4": "Dist", "PPL": "PPL"}  # our column -> the paper's Table 6 column
# Table 7 (WP): target lengths of the strategies.
PAPER_TABLE7 = {"Ground truth": 157.42, "Fixed": 153.51, "Prediction": 155.55}
SPEEDUP_GOAL = 5.0  # the workbook's bar: at T = 8, mask-predict at >= 5× the AR tokens/s for targets of >= 128 tokens
SPEEDUP_GOAL_LENGTH = 128


def settings_table(settings: OpenLTGSettings):
    """The settings as a one-column table, for the notebook."""
    import pandas as pd

    return pd.Series({name: str(value) for name, value in asdict(settings).items()}, name="value").to_frame()


# --------------------------------------------------------------------------- Table 6

def ablation_with_paper(scores: Table6Scores, paper_dataset: str):
    """Our Table 6 (each cell ``value [95% interval]``) next to the paper's rows for ``paper_dataset`` ("ROC" or "WP")."""
    import pandas as pd

    if paper_dataset not in PAPER_TABLE6:
        raise ValueError(f"paper_dataset={paper_dataset!r} must be one of {tuple(PAPER_TABLE6)}")
    paper = {**PAPER_TABLE6[paper_dataset], **{k: v for k, v in PAPER_TABLE4[paper_dataset].items() if k != "Ours"}}
    ours = scores.display()
    column = f"LR-{scores.lr_n}"
    rows = {}
    for name in ours.index:
        reference = paper.get(name, paper.get("AR (BART)") if name.startswith("AR") else {})
        row = {}
        for metric, theirs in (("B-1", "B-1"), ("R-L", "R-L"), (column, "Rep"), ("D-4", "Dist"), ("PPL", "PPL")):
            row[f"{metric} (ours)"] = ours.loc[name, metric]
            row[f"{theirs} (paper)"] = reference.get(theirs, np.nan)
        rows[name] = row
    return pd.DataFrame(rows).T


def describe_ablation(scores: Table6Scores, paper_dataset: str) -> str:
    """Table 6 in words, from the measured numbers: does removing LTD or DSWA raise repetition, as in the paper?
    Each change is a paired bootstrap over prompts (95%)."""
    paper = PAPER_TABLE6[paper_dataset]
    column = f"LR-{scores.lr_n}"
    values = scores.values
    lines = []
    for ablation in ("w/o DSWA", "w/o LTD", "w/o ALL", SMART_ROW, LAST_LAYER_ROW):
        if ablation not in values.index:
            continue
        change, low, high = paired_metric_difference(scores, ablation, "Ours", column)
        distinct, d_low, d_high = paired_metric_difference(scores, ablation, "Ours", "D-4")
        paper_note = (f"; paper {paper[ablation]['Rep'] - paper['Ours']['Rep']:+.2f} on {paper_dataset}"
                      if ablation in paper else "")
        lines.append(f"{ablation}: {column} {values.loc['Ours', column]:.1f} -> {values.loc[ablation, column]:.1f} "
                     f"({change:+.1f} [{low:+.1f}, {high:+.1f}]{paper_note}), D-4 {distinct:+.1f} [{d_low:+.1f}, {d_high:+.1f}], "
                     f"PPL {values.loc['Ours', 'PPL']:.1f} -> {values.loc[ablation, 'PPL']:.1f}.")
    return "\n".join(lines)


def describe_self_scoring(scores: Table6Scores) -> str:
    """The AR row's perplexity comes from the model that sampled it (the only causal LM offline): how it compares with
    the human text under the same judge, next to the paper's AR/human ratio under an independent judge (GPT-2)."""
    ar, truth = scores.values.loc[AR_ROW, "PPL"], scores.values.loc[TRUTH_ROW, "PPL"]
    paper = PAPER_TABLE4["WP"]
    paper_ratio = paper["AR (BART)"]["PPL"] / paper["Ground truth"]["PPL"]
    return (f"Self-scoring: the AR text was sampled from the judge itself, so its PPL ({ar:.1f}) is flattered: under its own "
            f"generator the AR text scores {ar / truth:.2f}× the human continuations' PPL ({truth:.1f}); in the paper, BART's "
            f"text under an independent judge (GPT-2) scores {paper_ratio:.2f}× the human text's (WP). The mask-predict rows are "
            f"sampled by the MNTP adapter and scored by the base model without it: a different model, though one that shares "
            f"its base weights. Read the AR row's PPL as a lower bound, not as a comparison.")


# --------------------------------------------------------------------------- Fig. 2, Fig. 4, Fig. 5, Table 7

def describe_trace(decoded: Decoded, tokenizer, row: int = 0, top_k: int = 50) -> str:
    """Fig. 2 in words: the function-word share at iteration 1 against §3.3's 35-45%, and the output."""
    first = decoded.trace[0]
    share = function_word_share(tokenizer, first.probe_logits[row], temperature=1.0, top_k=top_k)
    low, high = PAPER_FUNCTION_WORD_SHARE
    side = "inside" if low <= share <= high else "above" if share > high else "below"
    text = tokenizer.decode(decoded.tokens[row], skip_special_tokens=True)
    return (f"At iteration 1, function words and punctuation hold {share:.0%} of the top-{top_k} probability mass at "
            f"target position {decoded.config.probe_position}; the paper reports {low:.0%}-{high:.0%} for its bad case "
            f"(ours is {side} that range). Final text: {text!r}")


def describe_ltd(entropies: list[dict]) -> str:
    """Fig. 4 in words: how much LTD widens the distribution first and narrows it last."""
    first, last = entropies[0], entropies[-1]
    return (f"At t=0, T_t={first['temperature']:.2f} raises the entropy at the probe position from {first['entropy_t1']:.2f} "
            f"to {first['entropy_ltd']:.2f} nats (flatter); at t={last['step']}, T_t={last['temperature']:.2f} lowers it from "
            f"{last['entropy_t1']:.2f} to {last['entropy_ltd']:.2f} nats (sharper), the shape of the paper's Fig. 4.")


def describe_speed(ratios, device_label: str) -> str:
    """Fig. 5 in words: the measured speed-ups against the paper's 3-13× and the workbook's bar (:data:`SPEEDUP_GOAL`
    at the largest T for targets of at least :data:`SPEEDUP_GOAL_LENGTH` tokens)."""
    top = max(int(label.split("=")[1]) for label in ratios.index)
    long_lengths = [length for length in ratios.columns if length >= SPEEDUP_GOAL_LENGTH]
    parts = ", ".join(f"{ratios.loc[f'T={top}', length]:.2f}× at {length}" for length in ratios.columns)
    met = bool(long_lengths) and all(ratios.loc[f"T={top}", length] >= SPEEDUP_GOAL for length in long_lengths)
    fastest = ratios.max().max()
    return (f"On {device_label}, mask-predict with T={top} runs at {parts} the AR tokens/s (best of any T: {fastest:.2f}×). "
            f"The paper measures {PAPER_SPEED['speedup'][0]:.0f}-{PAPER_SPEED['speedup'][1]:.0f}× on an A100. The "
            f"{SPEEDUP_GOAL:.0f}× goal at length >= {SPEEDUP_GOAL_LENGTH} is {'met' if met else 'not met'} here.")


def describe_lengths(lengths: LengthScores) -> str:
    """Table 7 in words: the predictor's length error against the fixed length's, and how this differs from the paper."""
    table = lengths.table
    fixed, predicted = table.loc["Fixed"], table.loc["Prediction"]
    difference, low, high = metrics.paired_difference_interval(lengths.errors["Prediction"], lengths.errors["Fixed"])
    return (f"Held-out continuations average {table.loc['Ground truth', 'mean length']:.1f} tokens (n = {lengths.n}). The fixed "
            f"length ({fixed['mean length']:.0f}, the training median) misses each by {fixed['mean |error|']:.1f} "
            f"[{fixed['low']:.1f}, {fixed['high']:.1f}] tokens on average; the predictor (ridge α = {lengths.alpha:g} by 5-fold "
            f"cross-validation; training error {lengths.train_error:.1f}) by {predicted['mean |error|']:.1f} "
            f"[{predicted['low']:.1f}, {predicted['high']:.1f}]; predictor minus fixed: {difference:+.1f} [{low:+.1f}, {high:+.1f}] "
            f"(paired bootstrap over prompts). The paper scores the strategies by the quality of the generations they lead to "
            f"(Table 7: B-1, R-L, LR-n, D-4, PPL barely move; lengths fixed {PAPER_TABLE7['Fixed']}, predicted "
            f"{PAPER_TABLE7['Prediction']}, true {PAPER_TABLE7['Ground truth']}); we score only how close the length is, "
            f"which is what the predictor is for, but says nothing about text quality.")


# --------------------------------------------------------------------------- the claims

def claims(*, function_shares: Sequence[float], entropies: list[dict], table6: Table6Scores, speed_rows: list[dict],
           lengths: LengthScores, settings: OpenLTGSettings, speed_device: str) -> list[Claim]:
    """Notebook 05's ledger rows (:mod:`helpers.claims`; every verdict from its one rule): Fig. 2's function-word
    share (matches §3.3's band), Fig. 4's LTD (a definition check), Table 6's repetition directions and SMART, Table
    6's other columns for LTD and DSWA (paired bootstraps over prompts), Fig. 5's speed-up (over timing seeds) and
    Table 7's length error."""
    return [_function_word_claim(function_shares), _ltd_claim(entropies), *_table6_claims(table6, settings),
            *_table6_metric_claims(table6, settings), _speed_claim(speed_rows, settings, speed_device),
            _length_claim(lengths)]


def _function_word_claim(function_shares: Sequence[float]) -> Claim:
    """§3.3's "from 35% to 45%" as a band: ours matches when its interval lies inside it (the band's centre ± its
    half-width, the paper's own margin)."""
    share, low, high = metrics.bootstrap_interval(list(function_shares))
    lo, hi = PAPER_FUNCTION_WORD_SHARE
    return Claim(notebook="05", paper="002", where="§3.3, Fig. 2",
                 claim="at iteration 1, function words and punctuation hold 35-45% of the high-probability region "
                       "(the top-50 mass) in the bad case",
                 paper_value=f"{lo:.0%}-{hi:.0%}", ours=f"{share:.0%} (mean over prompts, at the probe position)",
                 low=low, high=high, method=f"bootstrap over {len(function_shares)} prompts", n=len(function_shares),
                 threshold=(lo + hi) / 2, margin=(hi - lo) / 2, value=share, trained=True,
                 margin_source="paper: §3.3, 'the function words dominate the high probability regions (from 35% to 45%)'",
                 figure="figures/05_ltd_trace.png", quantity="function-word share of the top-50 mass at iteration 1")


def _ltd_claim(entropies: list[dict]) -> Claim:
    """Fig. 4 is what a softmax does when its temperature falls from β > 1 to below 1: a definition check."""
    first, last = entropies[0], entropies[-1]
    flattens = first["entropy_ltd"] > first["entropy_t1"] and last["entropy_ltd"] < last["entropy_t1"]
    return Claim(notebook="05", paper="002", where="§4.2, Eq. 8, Fig. 4", kind=DEFINITION,
                 claim=f"LTD (T_t = β(1 - t/T), from {first['temperature']:.3g} down to {last['temperature']:.3g}) "
                       "flattens the distribution in the first iterations and sharpens it in the last",
                 paper_value="flat at t = 0, peaked at t = T-1",
                 ours=f"entropy ×{first['entropy_ltd'] / first['entropy_t1']:.2f} at t = 0, "
                      f"×{last['entropy_ltd'] / last['entropy_t1']:.2f} at t = {last['step']}",
                 low=None, high=None, method=EXACT, n=None, holds=flattens, figure="figures/05_ltd_distribution.png")


def _table6_claims(table6: Table6Scores, settings: OpenLTGSettings) -> list[Claim]:
    """§5.3's three directions (removing LTD, DSWA, both raises repetition) and §4.3's SMART, on LR-n."""
    column, dataset = f"LR-{settings.lr_n}", settings.paper_dataset
    paper = PAPER_TABLE6[dataset]
    method = f"paired bootstrap over {table6.n} prompts"
    directions = [("w/o LTD", "Ours", "removing LTD raises repetition"),
                  ("w/o DSWA", "Ours", "removing DSWA raises repetition")]
    runner_up = max([name for name in ABLATIONS if name != "w/o ALL"], key=lambda name: table6.values.loc[name, column])
    directions.append(("w/o ALL", runner_up, f"without both, repetition is the worst of the four rows "
                                             f"(against the next worst, {runner_up})"))
    rows = []
    for worse, better, claim in directions:
        value, low, high = paired_metric_difference(table6, worse, better, column)
        paper_gap = paper[worse]["Rep"] - paper[better]["Rep"]
        rows.append(Claim(notebook="05", paper="002", where="§5.3, Table 6", claim=claim,
                          paper_value=f"{column} {paper[worse]['Rep']:.2f} vs {paper[better]['Rep']:.2f} ({dataset}, {paper_gap:+.2f})",
                          ours=f"{column} {table6.values.loc[worse, column]:.1f} vs {table6.values.loc[better, column]:.1f} "
                               f"({value:+.1f} points)",
                          low=low, high=high, value=value, method=method, n=table6.n, direction=1, trained=True,
                          figure="figures/05_ablation.png",  # the runner-up may differ between seeds: named by role
                          quantity=f"{column}({worse}) - {column}({'next worst' if worse == 'w/o ALL' else better})"))
    if SMART_ROW in table6.values.index:
        value, low, high = paired_metric_difference(table6, SMART_ROW, "Ours", column)
        rows.append(Claim(notebook="05", paper="002", where="§4.3 (SMART)",
                          claim="updating every target token each iteration (SMART) avoids the degeneration of refining "
                                "only the low-confidence tokens",
                          paper_value="less repetition with update-all", ours=f"{column} {table6.values.loc[SMART_ROW, column]:.1f} "
                          f"(update all) vs {table6.values.loc['Ours', column]:.1f} (masked only), {value:+.1f} points",
                          low=low, high=high, value=value, method=method, n=table6.n, direction=-1, trained=True,
                          figure="figures/05_ablation.png", quantity=f"{column}(update all) - {column}(masked only)"))
    return rows


def _table6_metric_claims(table6: Table6Scores, settings: OpenLTGSettings) -> list[Claim]:
    """Table 6's other columns: what removing DSWA or LTD does to B-1, R-L, D-4 and PPL, each in the direction the
    paper's own row moves on ``settings.paper_dataset`` (whether that is better or worse is Table 4's arrow,
    :data:`PAPER_BETTER`), with a paired bootstrap over the same prompts."""
    dataset, paper = settings.paper_dataset, PAPER_TABLE6[settings.paper_dataset]
    rows = []
    for ablation, strategy in (("w/o DSWA", "DSWA"), ("w/o LTD", "LTD")):
        for metric, column in TABLE6_OTHER_COLUMNS.items():
            gap = paper[ablation][column] - paper["Ours"][column]
            direction = 1 if gap > 0 else -1
            better = "better" if direction == PAPER_BETTER[metric] else "worse"
            value, low, high = paired_metric_difference(table6, ablation, "Ours", metric)
            rows.append(Claim(
                notebook="05", paper="002", where=f"§5.3, Table 6 ({metric})",
                claim=f"removing {strategy} {'raises' if direction > 0 else 'lowers'} {metric} ({better}: "
                      f"{metric} is better {'higher' if PAPER_BETTER[metric] > 0 else 'lower'}, Table 4)",
                paper_value=f"{metric} {paper[ablation][column]:.2f} vs {paper['Ours'][column]:.2f} ({dataset}, {gap:+.2f})",
                ours=f"{metric} {table6.values.loc[ablation, metric]:.1f} vs {table6.values.loc['Ours', metric]:.1f} "
                     f"({value:+.1f})",
                low=low, high=high, value=value, method=f"paired bootstrap over {table6.n} prompts", n=table6.n,
                direction=direction, trained=True, figure="figures/05_ablation.png",
                quantity=f"{metric}({ablation}) - {metric}(Ours)"))
    return rows


def _speed_claim(speed_rows: list[dict], settings: OpenLTGSettings, speed_device: str) -> Claim:
    top, longest = max(settings.speed_iterations), max(settings.speed_lengths)
    samples = speed_ratio_samples(speed_rows, top, longest)
    ratio, low, high = metrics.seed_interval(samples)
    if low is None:
        low = high = ratio
    return Claim(notebook="05", paper="002", where="§6.1, Fig. 5",
                 claim=f"mask-predict (T = {top}) generates faster than AR with a KV cache at batch 1",
                 paper_value=f"{PAPER_SPEED['speedup'][0]:.0f}-{PAPER_SPEED['speedup'][1]:.0f}× (A100, T = 8)",
                 ours=f"{ratio:.2f}× at N = {longest} on {speed_device}",
                 low=low, high=high, method=f"t over {len(samples)} timing seeds", n=len(samples), direction=1,
                 threshold=1.0, n_seeds=len(samples), seed_values=tuple(samples), figure="figures/05_speed.png",
                 quantity="mask-predict tokens/s / AR tokens/s")


def _length_claim(lengths: LengthScores) -> Claim:
    difference, low, high = metrics.paired_difference_interval(lengths.errors["Prediction"], lengths.errors["Fixed"])
    return Claim(notebook="05", paper="002", where="§6.2, Table 7",
                 claim="the length predictor lands closer to the true length than the fixed length",
                 paper_value=f"{PAPER_TABLE7['Prediction']} (predicted) vs {PAPER_TABLE7['Fixed']} (fixed), true "
                             f"{PAPER_TABLE7['Ground truth']}",
                 ours=f"mean |error| {lengths.table.loc['Prediction', 'mean |error|']:.1f} vs "
                      f"{lengths.table.loc['Fixed', 'mean |error|']:.1f} tokens ({difference:+.1f})",
                 low=low, high=high, value=difference, method=f"paired bootstrap over {lengths.n} prompts",
                 n=lengths.n, direction=-1, trained=True, quantity="|error| predicted - |error| fixed")
