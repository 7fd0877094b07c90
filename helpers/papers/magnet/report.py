"""Notebook 03's tables with intervals beside MAGNET's reported numbers (:mod:`.declarations`), its sentences, and
:func:`claims`, the ledger rows of the summary for the claims declared there."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ... import ledger
from ... import metrics, mntp_recipe
from .declarations import (CLAIMS, FIG6_DATA, FIG6_FLAT, INFILL_DATA, MUCH_LESS, PAPER, PREFIX_DATA,  # noqa: F401
                           PROBE_DATA, REP_INDEX, TABLE1_PAPER_ROWS, TABLE5_SET, TABLE6_ROWS, claim_slug, table1_paper,
                           table6_paper_value)
from .experiment_table1 import CHANCE_ROW, ENTITY_TASKS, PROBE_TASKS, ProbeStudy
from .experiment_table4 import nll_gain_interval, perplexity_interval
from .experiment_table5 import degeneration_difference, degeneration_raise_margin, per_text_rep_n
from .settings import MAGNET_HELDOUT_CURVE


# --------------------------------------------------------------------------- tables and sentences

def describe_joint_training(components: dict[str, list[dict]], window: int = 5) -> str:
    """Each run's per-objective loss over its first and last ``window`` logged steps (``experiment.read_components``)."""
    lines = []
    for name, records in components.items():
        parts = []
        for objective in ("mntp", "msg", "sscl"):
            values = [r[objective] for r in records if objective in r]
            if values:
                parts.append(f"{objective.upper()} {np.mean(values[:window]):.2f} -> {np.mean(values[-window:]):.2f}")
        lines.append(f"{name}: " + ", ".join(parts) + f" over {len(records)} steps (mean of the first and last {window}).")
    return "\n".join(lines)


def infilling_frame(infilling: dict):
    """Table 4 with intervals: span perplexity [95% bootstrap over examples] per dataset and model."""
    import pandas as pd

    rows = {}
    for dataset, by_model in infilling.items():
        for name, result in by_model.items():
            ppl, low, high = perplexity_interval(result)
            rows[(dataset, name)] = {"span PPL": ppl, "low": low, "high": high, "span tokens": result["tokens"],
                                     "examples": len(result["example_tokens"]),
                                     "paper": PAPER["table4"].get(dataset, {}).get(name)}
    return pd.DataFrame(rows).T


def describe_infilling(infilling: dict) -> str:
    """Per dataset: what the right context adds (MAGNET against the same model with the left context only,
    paired over examples), and MAGNET against the base as in Table 4, each as a perplexity ratio with its interval."""
    lines = []
    for dataset, by_model in infilling.items():
        paper = PAPER["table4"][dataset]
        parts = []
        for worse, label in (("MAGNET (left only)", "right-context gain (MAGNET / MAGNET left only)"),
                             ("base", "MAGNET / base")):
            if worse in by_model:
                gain, low, high = nll_gain_interval(by_model[worse], by_model["MAGNET"])
                parts.append(f"{label} = x{math.exp(-gain):.3f} [{math.exp(-high):.3f}, {math.exp(-low):.3f}]")
        n = len(by_model["MAGNET"]["example_tokens"])
        lines.append(f"{dataset}-style ({n} passages, {by_model['MAGNET']['tokens']} span tokens): " + "; ".join(parts) +
                     f"; paper MAGNET / base = x{paper['MAGNET'] / paper['base']:.3f}.")
    return "\n".join(lines)


def degeneration_frame(generations: dict):
    """Table 5 with intervals: mean Rep-Sen and Rep-4 [95% bootstrap over prefixes] per model and prefix set."""
    import pandas as pd

    rows = {}
    for (name, set_name), texts in generations.items():
        per_text = per_text_rep_n(texts)
        for metric, key in (("Rep-Sen", "rep_sen"), ("Rep-4", "rep_4")):
            value, low, high = metrics.bootstrap_interval(per_text[key])
            paper = PAPER["table5"].get(set_name, {}).get(name)
            rows[(name, set_name, metric)] = {"ours": value, "low": low, "high": high, "prefixes": len(texts),
                                              "paper": None if paper is None else paper[REP_INDEX[key]]}
    return pd.DataFrame(rows).T


def describe_degeneration(generations: dict) -> str:
    """Fig. 6's direction over all prefixes: how much each adaptation raises Rep-n over the base model, and the
    LLM2Vec-style minus MAGNET gap, each a paired bootstrap over prefixes."""
    lines = []
    for metric, label in (("rep_4", "Rep-4"), ("rep_sen", "Rep-Sen")):
        parts = []
        for first, second in (("LLM2Vec-style", "base"), ("MAGNET", "base"), ("LLM2Vec-style", "MAGNET")):
            value, low, high = degeneration_difference(generations, first, second, metric)
            parts.append(f"{first} - {second} {value:+.3f} [{low:+.3f}, {high:+.3f}]")
        lines.append(f"{label}: " + "; ".join(parts))
    n = sum(len(texts) for (name, _), texts in generations.items() if name == "base")
    return f"Paired over {n} prefixes (both sets pooled):\n" + "\n".join(lines)


def describe_fig6(curves: dict) -> str:
    """Each Fig. 6 line's Rep-4 and Rep-Sen at its first and last evaluation."""
    return "\n".join(f"{name}: Rep-4 {points[0]['rep_4']:.3f} at step {points[0]['step']} -> {points[-1]['rep_4']:.3f} "
                     f"at step {points[-1]['step']}; Rep-Sen {points[0]['rep_sen']:.3f} -> {points[-1]['rep_sen']:.3f}"
                     for name, points in curves.items())


def describe_probes(study: ProbeStudy, rows: Sequence[str]) -> str:
    """Token accuracy [interval] of ``rows`` per task, with entity F1 beside for chunking and NER."""
    lines = []
    for row in rows:
        parts = []
        for task in PROBE_TASKS:
            value, low, high = study.interval(row, task)
            text = f"{task} acc {value:.1f} [{low:.1f}, {high:.1f}]"
            if task in ENTITY_TASKS:
                f1, f1_low, f1_high = study.interval(row, task, "F1")
                text += f" (F1 {f1:.1f} [{f1_low:.1f}, {f1_high:.1f}])"
            parts.append(text)
        lines.append(f"{row}: " + ", ".join(parts))
    return "\n".join(lines)


def ablation_table(study: ProbeStudy):
    """Table 6's word-level rows (:data:`TABLE6_ROWS`): token accuracy per task, named as in the paper."""
    return study.table().loc[list(TABLE6_ROWS.values())].set_axis(list(TABLE6_ROWS), axis=0)


def ablation_frame(study: ProbeStudy, rows: dict = TABLE6_ROWS):
    """Table 6's word-level half: token accuracy [interval] of each objective subset (``rows``: Table 6 name ->
    study row), and its paired difference from MNTP alone; the paper's entries beside."""
    import pandas as pd

    first = next(iter(rows.values()))
    out = {}
    for name, row in rows.items():
        for task_index, task in enumerate(PROBE_TASKS):
            value, low, high = study.interval(row, task)
            difference, d_low, d_high = study.difference(row, first, task)
            paper = PAPER["table6"].get(name)
            paper_first = PAPER["table6"].get(next(iter(rows)))
            out[(name, task)] = {"ours": value, "low": low, "high": high, "minus MNTP": difference,
                                 "diff low": d_low, "diff high": d_high,
                                 "paper": paper[task_index] if isinstance(paper, tuple) else None,
                                 "paper minus MNTP": (paper[task_index] - paper_first[task_index])
                                 if isinstance(paper, tuple) else None}
    return pd.DataFrame(out).T


# --------------------------------------------------------------------------- claims: the ledger rows

def _curve(name: str, points) -> dict | None:
    """A held-out curve for a trained row (``ledger.curve``), or None where it was not recorded."""
    return ledger.curve(name, points) if points else None


def _above_zero(interval: tuple[float, float, float]) -> bool:
    """Whether a difference's 95% interval lies wholly above 0."""
    return bool(interval[1] > 0)


def _table1_claims(probes: ProbeStudy, rows: dict, heldout, mntp_heldout) -> list[ledger.Claim]:
    """Table 1: MAGNET against the base and against LLM2Vec-style MNTP in token accuracy (the paper's metric), then
    the reference rows (the switch to bidirectional, MNTP's gain over step 0, the middle layer) and the measurements
    (the i-1 readout, the metric). ``heldout``: MAGNET's held-out MNTP accuracy curve; ``mntp_heldout``: notebook
    02's MNTP run's held-out accuracy curve."""
    n = probes.n
    boot = f"paired bootstrap over {n} test sentences"
    magnet_curve = _curve(MAGNET_HELDOUT_CURVE, heldout)
    mntp_curve = _curve(mntp_recipe.MNTP_HELDOUT_CURVE, mntp_heldout)
    # the rows against LLM2Vec-style MNTP read the gap between the two adapters' curves (GAP_STOP)
    gap_curve = ledger.curve(f"{MAGNET_HELDOUT_CURVE} against {mntp_recipe.MNTP_HELDOUT_CURVE}", heldout,
                             against=mntp_heldout) if heldout and mntp_heldout else None
    out = []
    for task in PROBE_TASKS:
        value, low, high = probes.difference(rows["magnet"], rows["base"], task)
        out.append(CLAIMS[f"magnet.table1.{claim_slug(task)}.vs_base"].measured(
            value, low, high, boot, n, fmt="{:+.1f}", plateau=magnet_curve))
    for task in PROBE_TASKS:
        # The LLM2Vec-style [MNTP] baseline works where its probe beats the causal base's on this task, as it does
        # in Table 1 (POS: 92.61 against 91.53)
        mntp_over_base = probes.difference(rows["mntp"], rows["base"], task)
        value, low, high = probes.difference(rows["magnet"], rows["mntp"], task)
        out.append(CLAIMS[f"magnet.table1.{claim_slug(task)}.vs_llm2vec_mntp"].measured(
            value, low, high, boot, n, fmt="{:+.1f}", plateau=gap_curve,
            baseline_works=_above_zero(mntp_over_base),
            note=f"LLM2Vec-style MNTP - base {mntp_over_base[0]:+.1f} [{mntp_over_base[1]:+.1f}, "
                 f"{mntp_over_base[2]:+.1f}]"))
    value, low, high = probes.difference(rows["step0"], rows["base"], "POS")
    out.append(CLAIMS["magnet.table1.pos.step0_vs_base"].measured(value, low, high, boot, n, fmt="{:+.1f}"))
    value, low, high = probes.difference(rows["mntp"], rows["step0"], "POS")
    out.append(CLAIMS["magnet.table1.pos.mntp_vs_step0"].measured(value, low, high, boot, n, fmt="{:+.1f}",
                                                                  plateau=mntp_curve))
    value, low, high = probes.difference(rows["magnet"], rows["magnet_noshift"], "POS")
    out.append(CLAIMS["magnet.table1.pos.shift_vs_noshift"].measured(value, low, high, boot, n, fmt="{:+.1f}"))
    value, low, high = probes.difference(rows["magnet_mid"], rows["base_mid"], "POS")
    out.append(CLAIMS["magnet.table1.pos.middle_layer_vs_base"].measured(value, low, high, boot, n, fmt="{:+.1f}",
                                                                         plateau=magnet_curve))
    # The metric: the paper's 96-98 NER are token accuracies; the majority tag scores nearly as much.
    value, low, high = probes.interval(rows["base"], "NER")
    chance = probes.interval(CHANCE_ROW, "NER")[0]
    out.append(CLAIMS["magnet.table1.ner.base_token_accuracy"].measured(
        value, low, high, f"bootstrap over {n} test sentences", n, fmt="{:.1f}",
        note=f"the majority tag alone scores {chance:.1f}"))
    return out


def _table4_claims(infilling: dict, heldout) -> list[ledger.Claim]:
    """Table 4: the right context's gain (same model, left only against both sides), and MAGNET against the base;
    both rest on MAGNET's training (``heldout``: its held-out MNTP accuracy curve)."""
    out = []
    magnet_curve = _curve(MAGNET_HELDOUT_CURVE, heldout)
    for dataset, by_model in infilling.items():
        examples = len(by_model["MAGNET"]["example_tokens"])
        method = f"paired bootstrap over {examples} passages"
        gain, low, high = nll_gain_interval(by_model["MAGNET (left only)"], by_model["MAGNET"])
        out.append(CLAIMS[f"magnet.table4.{claim_slug(dataset)}.right_context"].measured(
            gain, low, high, method, examples, plateau=magnet_curve))
        gain, low, high = nll_gain_interval(by_model["base"], by_model["MAGNET"])
        out.append(CLAIMS[f"magnet.table4.{claim_slug(dataset)}.vs_base"].measured(
            gain, low, high, method, examples, plateau=magnet_curve))
    return out


def _table5_claims(generations: dict, heldout, mntp_heldout) -> list[ledger.Claim]:
    """Fig. 6 / Table 5, per prefix set with that set's paper row: the LLM2Vec-style adaptation raises Rep-n over
    the base, and MAGNET raises it much less: MAGNET's raise minus :data:`MUCH_LESS` of LLM2Vec-style's, below 0
    (the margin form of "a share below :data:`MUCH_LESS`", defined on every seed). The LLM2Vec-style rows rest on the
    MNTP adapter's training (``mntp_heldout``; its short SimCSE stage has no held-out curve of its own), the margin
    rows on MAGNET's (``heldout``), and count only where the LLM2Vec-style adaptation raised Rep-n over the base."""
    out = []
    magnet_curve = _curve(MAGNET_HELDOUT_CURVE, heldout)
    mntp_curve = _curve(mntp_recipe.MNTP_HELDOUT_CURVE, mntp_heldout)
    for set_name in dict.fromkeys(name for _, name in generations):
        prefixes = len(generations[("base", set_name)])
        method = f"paired bootstrap over {prefixes} prefixes ({set_name})"
        for metric in ("rep_4", "rep_sen"):
            raised = degeneration_difference(generations, "LLM2Vec-style", "base", metric, sets=[set_name])
            out.append(CLAIMS[f"magnet.table5.{metric}.llm2vec_vs_base.{claim_slug(set_name)}"].measured(
                *raised, method, prefixes, plateau=mntp_curve))
            value, low, high = degeneration_raise_margin(generations, "MAGNET", "LLM2Vec-style", "base", metric,
                                                         MUCH_LESS, sets=[set_name])
            out.append(CLAIMS[f"magnet.table5.{metric}.magnet_raise_margin.{claim_slug(set_name)}"].measured(
                value, low, high, method, prefixes, plateau=magnet_curve, baseline_works=_above_zero(raised),
                note=f"LLM2Vec-style - base {raised[0]:+.3f} [{raised[1]:+.3f}, {raised[2]:+.3f}]"))
    return out


def _fig6_claims(curves: dict, heldout, mntp_heldout) -> list[ledger.Claim]:
    """Fig. 6 ("LLM2Vec adaptation increases text repetition with more training, while no such trend is observed for
    MAGNET"): each line's trend is its least-squares Rep-4 slope over its evaluations (:func:`helpers.metrics.plateau`
    over the whole run, a Student-t interval), stated as the rise over the run (slope x steps). LLM2Vec-style's rise
    lies above 0; MAGNET's lies within +-:data:`FIG6_FLAT` of LLM2Vec's Wikitext-103 Rep-4 raise over the base
    (Table 5), a margin of ours, since the figure gives no number."""
    out = []
    held = {"MAGNET": _curve(MAGNET_HELDOUT_CURVE, heldout),
            "LLM2Vec-style": _curve(mntp_recipe.MNTP_HELDOUT_CURVE, mntp_heldout)}
    ids = {"MAGNET": "magnet.fig6.rep4_rise.magnet", "LLM2Vec-style": "magnet.fig6.rep4_rise.llm2vec_style"}
    for name, points in curves.items():
        if len(points) < 3:  # a trend's interval needs a residual
            continue
        first, last = points[0]["step"], points[-1]["step"]
        slope, low, high, _ = metrics.plateau(points, "rep_4", fraction=1.0)
        span = last - first
        method = f"least-squares slope over {len(points)} evaluations (t interval), x {span} steps"
        out.append(CLAIMS[ids[name]].measured(slope * span, low * span, high * span, method, len(points),
                                              plateau=held[name]))
    return out


def _table6_claims(probes: ProbeStudy, rows: dict) -> list[ledger.Claim]:
    """Table 6: MSG's marginal word-level effect (paper: +0.07 to +0.20 points). A measurement here: the two adapters
    come from different runs, so a difference between them is not MSG's alone."""
    n = probes.n
    out = []
    for task in PROBE_TASKS:
        value, low, high = probes.difference(rows["mntp_msg"], rows["mntp"], task)
        out.append(CLAIMS[f"magnet.table6.{claim_slug(task)}.msg_gain"].measured(
            value, low, high, f"paired bootstrap over {n} test sentences", n, fmt="{:+.1f}",
            note=f"an interval {high - low:.1f} points wide"))
    return out


def claims(*, infilling: dict, generations: dict, probes: ProbeStudy, rows: dict, curves: dict | None = None,
           heldout=None, mntp_heldout=None) -> list[ledger.Claim]:
    """Notebook 03's ledger rows, each built by its declaration in :data:`CLAIMS`: Table 1 and its reference rows,
    Table 4's infilling gains, Table 5 / Fig. 6's Rep-n gaps and Table 6's MSG effect.

    ``rows`` names the study's readouts by role (``experiment_table1.claim_rows``): ``base``, ``step0``
    (bidirectional, untrained, shift), ``mntp``, ``magnet``, ``magnet_noshift``, ``base_mid``, ``magnet_mid``,
    ``mntp_msg``. ``curves``: Fig. 6's lines (``experiment_table5.fig6_curves``; None: no Fig. 6 rows).
    ``heldout``: MAGNET's held-out MNTP accuracy ``(step, value)`` over its joint training
    (``metrics.curve_points(records, experiment.HELDOUT_KEY)``), the budget check of the rows that rest on MAGNET's
    training; ``mntp_heldout``: notebook 02's MNTP run's held-out accuracy (``mntp_adapter.mntp_heldout_curve``), the
    budget check of the rows that rest on the MNTP adapter. None: not recorded, so no such row reads "not reproduced".
    """
    return [*_table1_claims(probes, rows, heldout, mntp_heldout), *_table4_claims(infilling, heldout),
            *_table5_claims(generations, heldout, mntp_heldout), *_fig6_claims(curves or {}, heldout, mntp_heldout),
            *_table6_claims(probes, rows)]
