"""Notebook 07's report: the sampler table, the sentences the notebook prints and its claims rows (:func:`claims`, rows
of :mod:`helpers.ledger` for the claims and the papers' numbers of :mod:`.declarations`: each verdict is computed from
its row, its interval, direction, threshold or margin, by the one rule ``claims.verdict_of``).

The sampler findings are judged against the human continuations of the same prompts, by MAUVE (Pillutla et al.
2021; :mod:`.judge`, :func:`judged_by_humans`): the causal judge's perplexity rewards repetition, so it stands
beside MAUVE in each row and confounds a row only where MAUVE cannot decide it. The corruption switch compares two
models, judged by the bound each gives the human continuations.
"""
from __future__ import annotations

from dataclasses import asdict

import numpy as np

from ... import ledger
from ... import metrics, mntp_recipe
from .declarations import BD3_TIGHTNESS, CLAIMS, NAMES, PAPER  # noqa: F401 (BD3_TIGHTNESS, NAMES: re-exported)
from .experiment import (BLOCK_CAUSAL, EDITING, LOW_CONFIDENCE, LR_N, MASK_CORRUPTION, MASK_PREDICT, RANDOM, SEMI_AR,
                         TRUTH_ROW, UNIFORM_CORRUPTION, BlockProof,
                         LikelihoodStudy, accuracy_difference, high_ratio_hits, log_ppl_difference, mean_difference,
                         paired_metric_difference, speed_ratios, steps_row)
from .judge import MauveJudge
from .settings import FINE_TUNE_HELDOUT_CURVE, DiffusionSettings


def settings_table(settings: DiffusionSettings):
    """The settings as a one-column table, for the notebook."""
    import pandas as pd

    return pd.Series({name: str(value) for name, value in asdict(settings).items()}, name="value").to_frame()


# --------------------------------------------------------------------------- tables and sentences

def sampler_table(scores, forward_passes: dict[str, int], mauve: MauveJudge | None = None,
                  bounds: dict[str, np.ndarray] | None = None):
    """Every row of the sampler table: forward passes per decode, judge PPL, D-4 and LR-5, and the judges against
    the human continuations where given (``mauve``: MAUVE of the row; ``bounds``: the bound the row's model gives the
    human continuations, nats per token), each ``value [low, high]`` over prompts."""
    import pandas as pd

    rows = {}
    for name in scores.values.index:
        rows[name] = {"forward passes": forward_passes.get(name, "—"),
                      **{metric: scores.cell(name, metric) for metric in ("PPL", "D-4", f"LR-{LR_N}")}}
        if mauve is not None:
            rows[name]["MAUVE vs human"] = mauve.cell(name) if name in mauve.labels else "—"
        if bounds is not None:
            if name in bounds:
                value, low, high = metrics.bootstrap_interval(bounds[name].tolist())
                rows[name]["bound on human text (nats/token)"] = f"{value:.3f} [{low:.3f}, {high:.3f}]"
            else:
                rows[name]["bound on human text (nats/token)"] = "—"
    return pd.DataFrame(rows).T


def describe_masks(identities: dict[str, bool], proof: BlockProof) -> str:
    held = ", ".join(f"{name}: {value}" for name, value in identities.items())
    return (f"Block-causal identities ({held}). On the model, changing position {proof.changed} (the first token of "
            f"the second block) moved exactly the hidden states the mask reaches at every one of its "
            f"{proof.moved.shape[0]} layers: {proof.matches}; no prompt position and no position of the first block moved.")


def _ppl(scores, name: str) -> str:
    return f"{scores.values.loc[name, 'PPL']:.1f}"


def _versus(scores, first: str, second: str) -> str:
    """``PPL a vs b``: the judge's perplexity of two sampler rows."""
    return f"PPL {_ppl(scores, first)} vs {_ppl(scores, second)}"


def _compared(scores, first: str, second: str) -> str:
    """``PPL a vs b (difference [interval] nats per token), D-4 a vs b``: two sampler rows side by side."""
    value, low, high = log_ppl_difference(scores, first, second)
    return (f"{_versus(scores, first, second)} ({value:+.3f} [{low:+.3f}, {high:+.3f}] nats per token), D-4 "
            f"{scores.values.loc[first, 'D-4']:.1f} vs {scores.values.loc[second, 'D-4']:.1f}")


def _repetition_confound(scores, first: str, second: str) -> str:
    """Why the judge's perplexity cannot compare ``first`` and ``second`` in this run, or ``""``: the row of lower
    perplexity is also significantly less diverse (its paired D-4 difference lies wholly below 0). A causal judge
    gives repeated text a low perplexity, so that row's lower perplexity is not plainly better text."""
    values = scores.values
    lower, higher = (first, second) if values.loc[first, "PPL"] < values.loc[second, "PPL"] else (second, first)
    change, low, high = paired_metric_difference(scores, lower, higher, "D-4")
    if high >= 0:
        return ""
    truth = f"; human text: PPL {_ppl(scores, TRUTH_ROW)}" if TRUTH_ROW in values.index else ""
    return (f"the lower-perplexity row ({lower}) repeats more, D-4 {values.loc[lower, 'D-4']:.1f} vs "
            f"{values.loc[higher, 'D-4']:.1f} ({change:+.1f} [{low:+.1f}, {high:+.1f}]), LR-{LR_N} "
            f"{values.loc[lower, f'LR-{LR_N}']:.1f} vs {values.loc[higher, f'LR-{LR_N}']:.1f}, and the judge's "
            f"perplexity rewards repetition{truth}")


def _over_prompts(mauve: MauveJudge) -> str:
    """``N prompts``, or ``N prompts × D sampling draws`` where the rows were sampled several times per prompt."""
    return f"{mauve.n} prompts" + (f" × {mauve.draws} sampling draws" if mauve.draws > 1 else "")


def _mauve_versus(mauve: MauveJudge, first: str, second: str) -> str:
    """``MAUVE a vs b (difference [interval])``: two sampler rows against the human continuations."""
    value, low, high = mauve.difference(first, second)
    return (f"MAUVE {mauve.score(first):.3f} vs {mauve.score(second):.3f} ({value:+.3f} [{low:+.3f}, {high:+.3f}], "
            f"paired over {_over_prompts(mauve)})")


def describe_judges(scores, mauve: MauveJudge, pairs: dict[str, tuple[str, str]]) -> str:
    """One line per compared pair (``pairs``: label -> (first, second)): both judges side by side, and whether the
    perplexity is confounded by repetition there (:func:`_repetition_confound`)."""
    lines = []
    for label, (first, second) in pairs.items():
        confound = _repetition_confound(scores, first, second)
        lines.append(f"{label}: {_mauve_versus(mauve, first, second)}; {_compared(scores, first, second)}"
                     + (f". Perplexity confounded: {confound}" if confound else ". Perplexity not confounded"))
    return "\n".join(lines)


def describe_remasking(scores) -> str:
    value, low, high = log_ppl_difference(scores, LOW_CONFIDENCE, RANDOM)
    table = PAPER["llada_table6"]["Base"]
    return (f"Low-confidence against random remasking at equal forward passes: PPL {_ppl(scores, LOW_CONFIDENCE)} vs "
            f"{_ppl(scores, RANDOM)} ({value:+.3f} [{low:+.3f}, {high:+.3f}] nats per token), D-4 "
            f"{scores.values.loc[LOW_CONFIDENCE, 'D-4']:.1f} vs {scores.values.loc[RANDOM, 'D-4']:.1f}; LLaDA 8B Base "
            f"(Table 6): GSM8K {table['low-confidence']} vs {table['random']}.")


def describe_steps(scores, settings: DiffusionSettings) -> str:
    fewest = min(settings.step_grid)
    value, low, high = log_ppl_difference(scores, steps_row(fewest), LOW_CONFIDENCE)
    parts = ", ".join(f"T={steps}: {_ppl(scores, LOW_CONFIDENCE if steps == settings.steps else steps_row(steps))}"
                      for steps in settings.step_grid)
    return (f"Low-confidence PPL against the number of steps ({parts}); T={fewest} minus T={settings.steps}: "
            f"{value:+.3f} [{low:+.3f}, {high:+.3f}] nats per token. LLaDA (App. B.6, Fig. 5): accuracy rises as the "
            f"steps grow to the answer length.")


def describe_blocks(scores, ratios: tuple[tuple[float, ...], ...]) -> str:
    """``ratios``: the block cache's speed-up per process and trial (:func:`.experiment.speed_ratios`)."""
    semi, _, _ = log_ppl_difference(scores, SEMI_AR, LOW_CONFIDENCE)
    cached, low, high = log_ppl_difference(scores, BLOCK_CAUSAL, SEMI_AR)
    speed, speed_low, speed_high = metrics.trials_in_processes_interval(ratios)
    interval = f"[{speed_low:.2f}, {speed_high:.2f}] ({metrics.trials_in_processes_method(ratios)})"
    return (f"Semi-AR blocks against one block: PPL {_ppl(scores, SEMI_AR)} vs {_ppl(scores, LOW_CONFIDENCE)} "
            f"({semi:+.3f} nats per token; LLaDA Base: 64.4 vs 64.7). Block-causal with the exact cache against semi-AR: "
            f"PPL {_ppl(scores, BLOCK_CAUSAL)} vs {_ppl(scores, SEMI_AR)} ({cached:+.3f} [{low:+.3f}, {high:+.3f}]), "
            f"{speed:.2f}× {interval} faster at batch 1 (Fast-dLLM Table 1: +Cache 3.2×, 79.3 → 79.5).")


def describe_mask_predict(scores) -> str:
    return (f"Notebook 05's mask-predict + LTD against LLaDA low-confidence at the same forward passes: "
            f"{_compared(scores, MASK_PREDICT, LOW_CONFIDENCE)}, LR-{LR_N} "
            f"{scores.values.loc[MASK_PREDICT, f'LR-{LR_N}']:.1f} vs {scores.values.loc[LOW_CONFIDENCE, f'LR-{LR_N}']:.1f}; "
            "neither paper compares the two.")


def describe_fine_tune(study: LikelihoodStudy, accuracy: dict, names: tuple[str, str]) -> str:
    before, after = names
    gain, low, high = mean_difference(study.bound[before].per_token(), study.bound[after].per_token())
    kept, k_low, k_high = accuracy_difference(accuracy[after], accuracy[before])
    bound = {name: float(study.bound[name].per_token().mean()) for name in names}
    causal = {name: float(study.causal[name].mean()) for name in names}
    c4 = PAPER["mdlm_c4"]
    return (f"Bound (nats per token, one block): {before} {bound[before]:.3f}, {after} {bound[after]:.3f} (lowered by "
            f"{gain:+.3f} [{low:+.3f}, {high:+.3f}]); at block size 1: {causal[before]:.3f} and {causal[after]:.3f}. "
            f"Notebook 02's held-out accuracy: {after} minus {before} {kept:+.1f} [{k_low:+.1f}, {k_high:+.1f}] points. "
            f"MDLM §5.1: BERT's C4 bound {c4['BERT']} → {c4['BERT + MDLM-FT']} after the fine-tune (AR {c4['AR']}), GLUE "
            f"{PAPER['mdlm_glue']['BERT']} → {PAPER['mdlm_glue']['BERT + MDLM-FT']}.")


def describe_editing(scores) -> str:
    return (f"Token editing against none (block-causal blocks, equal forward passes): "
            f"{_compared(scores, EDITING, BLOCK_CAUSAL)}; LLaDA2.1 relies on editing to refine a fast draft.")


def describe_corruption(scores, bounds: dict[str, np.ndarray] | None = None) -> str:
    likelihood = ""
    if bounds is not None:
        value, low, high = metrics.paired_difference_interval(bounds[UNIFORM_CORRUPTION].tolist(),
                                                              bounds[MASK_CORRUPTION].tolist())
        likelihood = (f"; the bound each model gives the human continuation, given the prompt: "
                      f"{bounds[UNIFORM_CORRUPTION].mean():.3f} vs {bounds[MASK_CORRUPTION].mean():.3f} nats per token "
                      f"({value:+.3f} [{low:+.3f}, {high:+.3f}])")
    return (f"Uniform against mask corruption (each fine-tuned with its own corruption for the same steps, then decoded "
            f"block-causally at equal forward passes): {_compared(scores, UNIFORM_CORRUPTION, MASK_CORRUPTION)}"
            f"{likelihood}. The mask model continues notebook 02's mask-trained adapter; the uniform one must unlearn "
            "the mask.")


def _held_out(name: str, points) -> dict | None:
    """A trained row's ``plateau=``: the held-out curve ``name`` when its points were recorded, else None."""
    return ledger.curve(name, points) if points else None


def definition_claims(identities: dict[str, bool], proof: BlockProof, cache_exact: bool, mask_predict_equal: bool) -> list:
    """The three definition checks: the block-causal mask (algebra and real model), its cache, mask-predict inside the
    sampler family."""
    def exact(claim_id: str, ours: str, holds: bool) -> ledger.Claim:
        return CLAIMS[claim_id].measured(None, None, None, ledger.EXACT, None, ours=ours, holds=bool(holds))

    return [
        exact("diffusion.bd3lm.block_causal_mask", f"identities {sum(identities.values())}/{len(identities)}; proof "
                                                   f"{'matches' if proof.matches else 'differs'}",
              all(identities.values()) and proof.matches),
        exact("diffusion.bd3lm.block_cache_exact", "same tokens" if cache_exact else "different tokens", cache_exact),
        exact("diffusion.openltg.mask_predict_in_family", "same tokens" if mask_predict_equal else "different tokens",
              mask_predict_equal),
    ]


def judged_by_humans(declared: ledger.Declared, scores, mauve: MauveJudge, first: str, second: str, *, note: str = "",
                     plateau=None) -> ledger.Claim:
    """A sampler comparison judged against the human continuations: ``MAUVE(first) - MAUVE(second)`` with its paired
    bootstrap over prompts, the judge's perplexity, D-4 and LR-5 beside it in ``ours``.

    The confound rules: when neither row's texts share a bucket with the human texts, both score MAUVE's floor and
    the judge cannot rank them (a difference of 0, or a match within any margin, would say nothing of the samplers),
    so the row is confounded. A "matches within ±margin" row needs more: ``MAUVE(first) - MAUVE(second)`` lies
    between ``floor - MAUVE(second)`` and ``MAUVE(first) - floor``, so when both rows score less than the margin above
    the floor the match holds whatever the samplers do (a few texts on a human bucket lift a row off the floor, not
    into the range where a loss of the margin could show); that row is confounded too. The causal judge's perplexity
    rewards repetition (:func:`_repetition_confound`), so it never decides these rows; MAUVE does. The row carries
    the perplexity's confound (and is inconclusive for it) only where MAUVE cannot decide the row either: then
    neither judge can. Rows sampled several times per prompt (``mauve.draws`` > 1) nest the draws in the prompts."""
    value, low, high = mauve.difference(first, second)
    ppl, ppl_low, ppl_high = log_ppl_difference(scores, first, second)
    ours = (f"{_mauve_versus(mauve, first, second)}; {_versus(scores, first, second)} "
            f"({ppl:+.3f} [{ppl_low:+.3f}, {ppl_high:+.3f}] nats per token), D-4 "
            f"{scores.values.loc[first, 'D-4']:.1f} vs {scores.values.loc[second, 'D-4']:.1f}")
    method = f"paired bootstrap over {_over_prompts(mauve)} (draws nested in prompts, buckets fixed)" \
        if mauve.draws > 1 else f"paired bootstrap over {mauve.n} prompts (buckets fixed)"

    def measured(confound: str = "") -> ledger.Claim:
        return declared.measured(value, low, high, method, mauve.n, ours=ours, note=note, plateau=plateau,
                                 confound=confound)

    if mauve.shares_no_bucket(first) and mauve.shares_no_bucket(second):
        # both at the floor: a zero difference, or a match within any margin, holds whatever the samplers do
        return measured(f"MAUVE cannot rank these two: neither row's texts share a bucket with the human texts "
                        f"({mauve.buckets} buckets), so both score its floor {mauve.floor:.3g}, whatever the "
                        f"samplers do")
    headroom = max(mauve.score(first), mauve.score(second)) - mauve.floor
    if declared.margin is not None and headroom < declared.margin:
        return measured(f"MAUVE cannot show a difference of the margin here: both rows score less than "
                        f"±{declared.margin:g} above its floor {mauve.floor:.3g} (the higher by {headroom:.3g}; "
                        f"{mauve.buckets} buckets), so a match within the margin holds whatever the samplers do")
    row = measured()
    confound = _repetition_confound(scores, first, second)
    if confound and not ledger.interval_decides(row):
        return measured(f"perplexity cannot stand in for MAUVE, which does not decide the row: {confound}")
    return row


def sampler_claims(scores, settings: DiffusionSettings, ratios: tuple[tuple[float, ...], ...], device: str,
                   mauve: MauveJudge, mntp_curve=None) -> list[ledger.Claim]:
    """LLaDA Table 6 (remasking rule), App. B.6 (steps), App. B.3 (semi-AR for a base model), Fast-dLLM Table 1 (the
    cache's speed and quality), and notebook 05's sampler against LLaDA's (a measurement: no paper compares them).
    Every comparison of two samplers is judged by MAUVE against the human continuations (``mauve``:
    :func:`.experiment.judge_against_humans`; :func:`judged_by_humans`). ``mntp_curve``: notebook 02's held-out MNTP
    curve (``mntp_adapter.mntp_heldout_curve``), which these rows rest on."""
    fewest = min(settings.step_grid)
    plateau = _held_out(mntp_recipe.MNTP_HELDOUT_CURVE, mntp_curve)

    def compared(claim_id: str, first: str, second: str, note: str = "") -> ledger.Claim:
        return judged_by_humans(CLAIMS[claim_id], scores, mauve, first, second, note=note, plateau=plateau)

    speed, low, high = metrics.trials_in_processes_interval(ratios)
    trials = sum(len(found) for found in ratios)
    rows = [
        compared("diffusion.llada.table6.low_confidence_vs_random", LOW_CONFIDENCE, RANDOM, f"T = {settings.steps}"),
        compared("diffusion.llada.fig5.fewer_steps_worse", steps_row(fewest), LOW_CONFIDENCE,
                 f"T = {fewest} against T = {settings.steps}"),
        compared("diffusion.llada.table6.semi_ar_vs_one_block", SEMI_AR, LOW_CONFIDENCE,
                 f"B = {settings.block_length}, T = {settings.steps}"),
        CLAIMS["diffusion.fast_dllm.table1.cache_speedup"].measured(
            speed, low, high, metrics.trials_in_processes_method(ratios), trials,
            ours=f"{speed:.2f}× on {device}",
            note=f"N = {settings.target_length}, B = {settings.block_length}, T = {settings.steps}"),
        compared("diffusion.fast_dllm.table1.cache_quality", BLOCK_CAUSAL, SEMI_AR,
                 f"B = {settings.block_length}, T = {settings.steps}"),
    ]
    rows.append(compared("diffusion.llada.mask_predict_vs_low_confidence", MASK_PREDICT, LOW_CONFIDENCE,
                         f"{settings.steps} forward passes each"))
    rows.append(compared("diffusion.llada2.editing_vs_none", EDITING, BLOCK_CAUSAL,
                         f"τ_edit = {settings.editing_threshold:g}, B = {settings.block_length}, T = {settings.steps} each"))
    return rows


def fine_tune_claims(study: LikelihoodStudy, accuracy: dict, names: tuple[str, str], settings: DiffusionSettings,
                     mntp_curve=None, fine_tune_curve=None) -> list:
    """MDLM §5.1 (the bound falls) and Table 4 (the masked LM's own skill is kept), BD3-LM §4.1 (the bound is tight at
    block size 1), and the fine-tune's accuracy at high mask ratios (a measurement). Each run has one training seed,
    so its intervals are over held-out blocks; a seed study (``make study``) adds the spread between seeds.
    ``fine_tune_curve``: the fine-tune's held-out curve (``FineTuned.heldout_curve``); ``mntp_curve``: notebook
    02's, for the row on its adapter alone."""
    before, after = names
    n = len(study.causal[before])
    method = f"paired bootstrap over {n} held-out blocks (one training seed)"
    bound = {name: study.bound[name].per_token() for name in names}
    tuned_curve = _held_out(FINE_TUNE_HELDOUT_CURVE, fine_tune_curve)
    adapter_curve = _held_out(mntp_recipe.MNTP_HELDOUT_CURVE, mntp_curve)
    gain = mean_difference(bound[before], bound[after])
    kept = accuracy_difference(accuracy[after], accuracy[before])
    blocks = len(accuracy[after][0])
    rows = [
        CLAIMS["diffusion.mdlm.s5_1.bound_falls"].measured(
            *gain, method, n, ours=f"{float(bound[before].mean()):.3f} → {float(bound[after].mean()):.3f} nats per token",
            note=f"{settings.fine_tune_steps} fine-tune steps", plateau=tuned_curve),
        CLAIMS["diffusion.mdlm.table4.skill_kept"].measured(
            *kept, f"paired bootstrap over {blocks} held-out blocks (one training seed)", blocks,
            ours=f"{kept[0]:+.1f} points", plateau=tuned_curve),
    ]
    for claim_id, name, plateau in (("diffusion.bd3lm.s4_1.tight_at_block_one.mntp", before, adapter_curve),
                                    ("diffusion.bd3lm.s4_1.tight_at_block_one.fine_tuned", after, tuned_curve)):
        found = mean_difference(bound[name], study.causal[name])
        rows.append(CLAIMS[claim_id].measured(
            *found, method, n, ours=f"{float(bound[name].mean()):.3f} (one block) vs "
                                    f"{float(study.causal[name].mean()):.3f} (block size 1) nats per token",
            plateau=plateau))
    hits = {name: high_ratio_hits(study.bound[name]) for name in names}
    value, low, high = accuracy_difference(hits[after], hits[before])
    rows.append(CLAIMS["diffusion.llada.s2_1.high_ratio_accuracy"].measured(
        value, low, high, method, n, ours=f"{value:+.1f} points", plateau=tuned_curve))
    return rows


def corruption_claim(scores, bounds: dict[str, np.ndarray], settings: DiffusionSettings,
                     fine_tune_curve=None) -> ledger.Claim:
    """Uniform against mask corruption (a measurement), each row on the fine-tune of its corruption, judged by the
    bound each model gives the human continuations (``bounds``: :func:`.experiment.human_continuation_bounds`), with
    a paired bootstrap over prompts; the generations' perplexity beside it."""
    value, low, high = metrics.paired_difference_interval(bounds[UNIFORM_CORRUPTION].tolist(),
                                                          bounds[MASK_CORRUPTION].tolist())
    confound = _repetition_confound(scores, UNIFORM_CORRUPTION, MASK_CORRUPTION)
    return CLAIMS["diffusion.diffusiongemma.uniform_vs_mask_corruption"].measured(
        value, low, high, f"paired bootstrap over {len(bounds[MASK_CORRUPTION])} prompts",
        len(bounds[MASK_CORRUPTION]),
        ours=f"{value:+.3f} nats per token on the human text; generations: "
             f"{_versus(scores, UNIFORM_CORRUPTION, MASK_CORRUPTION)}{f'; note: {confound}' if confound else ''}",
        note=f"{settings.fine_tune_steps} fine-tune steps each; B = {settings.block_length}, T = {settings.steps}",
        plateau=_held_out(FINE_TUNE_HELDOUT_CURVE, fine_tune_curve))


def claims(*, identities: dict[str, bool], proof: BlockProof, cache_exact: bool, mask_predict_equal: bool, scores,
           mauve: MauveJudge, settings: DiffusionSettings, speed: dict, device: str, study: LikelihoodStudy,
           accuracy: dict, names: tuple[str, str], mntp_curve, fine_tune_curve, corruption_scores,
           corruption_bounds: dict[str, np.ndarray]) -> list[ledger.Claim]:
    """Notebook 07's ledger rows: three definition checks, the sampler findings (token editing among them; judged by
    ``mauve``, :func:`.experiment.judge_against_humans`), the fine-tune's and the corruption switch's
    (``corruption_scores``: :func:`.experiment.score` of the two :func:`.experiment.corruption_rows` and the human
    row; ``corruption_bounds``: :func:`.experiment.human_continuation_bounds`). ``mntp_curve``
    is notebook 02's held-out MNTP curve (``mntp_adapter.mntp_heldout_curve(cfg)``, None when it logged none) and
    ``fine_tune_curve`` the fine-tune's (``FineTuned.heldout_curve``): the trained rows' budget checks."""
    return [*definition_claims(identities, proof, cache_exact, mask_predict_equal),
            *sampler_claims(scores, settings, speed_ratios(speed), device, mauve, mntp_curve),
            *fine_tune_claims(study, accuracy, names, settings, mntp_curve, fine_tune_curve),
            corruption_claim(corruption_scores, corruption_bounds, settings, fine_tune_curve)]
