"""Notebook 07's report: the papers' numbers (once), the sampler table, the sentences the notebook prints and its
claims (:func:`claims`, rows of :mod:`helpers.claims`: each verdict is computed from its row, its interval,
direction, threshold or margin, by the one rule ``claims.verdict_of``).

Sources, checked against the papers' text: LLaDA (arXiv 2502.09992 v2: Eq. 3, Eq. 6, Algorithm 5, App. B.3 Table 6,
B.4 Table 7, B.6); MDLM (arXiv 2406.07524: §5.1's C4 bounds and Table 4's GLUE average); BD3-LM (arXiv 2503.09573:
§4.1's sentence on the NELBO's tightness); Fast-dLLM (arXiv 2505.22618: Table 1, §4.1's defaults, Fig. 5).
"""
from __future__ import annotations

from dataclasses import asdict

import numpy as np

from ... import metrics
from ...claims import DEFINITION, MEASUREMENT, Claim
from .experiment import (BLOCK_CAUSAL, LOW_CONFIDENCE, LR_N, MASK_PREDICT, RANDOM, SEMI_AR, TRUTH_ROW, BlockProof,
                         LikelihoodStudy, accuracy_difference, high_ratio_hits, log_ppl_difference, mean_difference,
                         paired_metric_difference, speed_ratios, steps_row)
from .settings import DiffusionSettings

PAPER = {
    # LLaDA App. B.3, Table 6 (GSM8K accuracy; answer length 512, 256 steps, semi-AR blocks of 32).
    "llada_table6": {"Base": {"random": 52.3, "low-confidence": 64.7, "low-confidence + semi-AR": 64.4},
                     "Instruct": {"random": 72.0, "low-confidence": 12.9, "low-confidence + semi-AR": 73.8}},
    # LLaDA App. B.4, Table 7 (GSM8K, Base, steps = half the length): length -> accuracy.
    "llada_table7_base": {256: 62.5, 512: 64.7, 1024: 65.9},
    # MDLM §5.1: C4 validation perplexity: AR, BERT's MDLM bound, BERT + MDLM fine-tune's bound; Table 4: GLUE average.
    "mdlm_c4": {"AR": 22, "BERT": 78, "BERT + MDLM-FT": 35},
    "mdlm_glue": {"BERT": 81.62, "BERT + MDLM-FT": 82.06},
    # Fast-dLLM Table 1 (LLaDA-Instruct, GSM8K 5-shot, length 256): accuracy, tokens/s, speed-up.
    "fast_dllm_table1": {"LLaDA": (79.3, 6.7, 1.0), "+Cache": (79.5, 21.2, 3.2), "+Parallel": (79.2, 16.5, 2.5),
                         "+Cache+Parallel": (78.5, 54.4, 8.1)},
}
BD3_TIGHTNESS = "The NELBO is tight for L' = 1 but becomes a looser approximation of the true NLL for L' → L"
SAMPLER_CHECK = ("the sampler equals, token for token, a reference written from LLaDA's Algorithm 5 (greedy, one block "
                 "and semi-AR blocks) and notebook 05's mask-predict on the same seeds "
                 "(tests/papers/diffusion/test_diffusion_mechanism.py)")
_COMMON = dict(notebook="07")


def settings_table(settings: DiffusionSettings):
    """The settings as a one-column table, for the notebook."""
    import pandas as pd

    return pd.Series({name: str(value) for name, value in asdict(settings).items()}, name="value").to_frame()


# --------------------------------------------------------------------------- tables and sentences

def sampler_table(scores, forward_passes: dict[str, int]):
    """Every row of the sampler table: forward passes per decode, judge PPL, D-4 and LR-5, each ``value [low, high]``."""
    import pandas as pd

    rows = {}
    for name in scores.values.index:
        rows[name] = {"forward passes": forward_passes.get(name, "—"),
                      **{metric: scores.cell(name, metric) for metric in ("PPL", "D-4", f"LR-{LR_N}")}}
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


def describe_blocks(scores, ratios: list[float]) -> str:
    semi, _, _ = log_ppl_difference(scores, SEMI_AR, LOW_CONFIDENCE)
    cached, low, high = log_ppl_difference(scores, BLOCK_CAUSAL, SEMI_AR)
    speed, speed_low, speed_high = metrics.seed_interval(ratios)
    interval = f"[{speed_low:.2f}, {speed_high:.2f}]" if speed_low is not None else "n/a"
    return (f"Semi-AR blocks against one block: PPL {_ppl(scores, SEMI_AR)} vs {_ppl(scores, LOW_CONFIDENCE)} "
            f"({semi:+.3f} nats per token; LLaDA Base: 64.4 vs 64.7). Block-causal with the exact cache against semi-AR: "
            f"PPL {_ppl(scores, BLOCK_CAUSAL)} vs {_ppl(scores, SEMI_AR)} ({cached:+.3f} [{low:+.3f}, {high:+.3f}]), "
            f"{speed:.2f}× {interval} faster at batch 1 (Fast-dLLM Table 1: +Cache 3.2×, 79.3 → 79.5).")


def describe_mask_predict(scores) -> str:
    value, low, high = log_ppl_difference(scores, MASK_PREDICT, LOW_CONFIDENCE)
    return (f"Notebook 05's mask-predict + LTD against LLaDA low-confidence at the same forward passes: PPL "
            f"{_ppl(scores, MASK_PREDICT)} vs {_ppl(scores, LOW_CONFIDENCE)} ({value:+.3f} [{low:+.3f}, {high:+.3f}] nats "
            f"per token), D-4 {scores.values.loc[MASK_PREDICT, 'D-4']:.1f} vs {scores.values.loc[LOW_CONFIDENCE, 'D-4']:.1f}, "
            f"LR-{LR_N} {scores.values.loc[MASK_PREDICT, f'LR-{LR_N}']:.1f} vs "
            f"{scores.values.loc[LOW_CONFIDENCE, f'LR-{LR_N}']:.1f}; neither paper compares the two.")


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


# --------------------------------------------------------------------------- the claims

def _difference(paper: str, where: str, claim: str, paper_value: str, ours: str, found, n: int, method: str, sign: int,
                *, check: str = SAMPLER_CHECK, figure: str = "", quantity: str = "", **extra) -> Claim:
    """A comparison row; it rests on training (notebook 02's adapter, and the fine-tune where it enters), so it
    carries its point estimate for a seed study."""
    value, low, high = found
    return Claim(**_COMMON, paper=paper, where=where, claim=claim, paper_value=paper_value, ours=ours, low=low,
                 high=high, method=method, n=n, direction=sign, check=check, figure=figure, quantity=quantity,
                 trained=True, value=value, **extra)


def _equivalence(paper: str, where: str, claim: str, paper_value: str, ours: str, found, n: int, margin: float,
                 figure: str, quantity: str, confound: str = "") -> Claim:
    value, low, high = found
    return Claim(**_COMMON, paper=paper, where=where, claim=claim, paper_value=paper_value, ours=ours, low=low,
                 high=high, method=f"paired bootstrap over {n} prompts", n=n, margin=margin, check=SAMPLER_CHECK,
                 trained=True, value=value,
                 margin_source=f"ours: ±{margin:g} nats per token of the judge (about "
                               f"±{100 * (np.exp(margin) - 1):.0f} % perplexity), fixed before the run", figure=figure,
                 quantity=quantity, confound=confound)


def definition_claims(identities: dict[str, bool], proof: BlockProof, cache_exact: bool, mask_predict_equal: bool) -> list:
    """The three definition checks: the block-causal mask (algebra and real model), its cache, mask-predict inside the
    sampler family."""
    return [
        Claim(**_COMMON, paper="BD3-LM", where="§3.1, Suppl. B.6", kind=DEFINITION,
              claim="block-causal attention is causal across blocks and bidirectional within one; B = N is notebook "
                    "05's mask, B = 1 MAGNET's one-span mask; on the model a token reaches exactly the states the mask "
                    "connects, at every layer",
              paper_value="definition", ours=f"identities {sum(identities.values())}/{len(identities)}; proof "
                                             f"{'matches' if proof.matches else 'differs'}",
              low=None, high=None, method="exact", n=None, holds=all(identities.values()) and proof.matches,
              figure="figures/07_block_masks.png"),
        Claim(**_COMMON, paper="BD3-LM", where="§3 (KV cache of finished blocks)", kind=DEFINITION,
              claim="under block-causal attention, caching each finished block's keys and values once gives the tokens "
                    "of recomputing the whole sequence at every step",
              paper_value="exact cache", ours="same tokens" if cache_exact else "different tokens", low=None, high=None,
              method="exact", n=None, holds=cache_exact),
        Claim(**_COMMON, paper="002", where="§3.1 (mask-predict as a masked-diffusion sampler)", kind=DEFINITION,
              claim="notebook 05's mask-predict with LTD is one configuration of the sampler family (re-mask committed "
                    "tokens, mask-predict's schedule, tempered confidence)",
              paper_value="same algorithm", ours="same tokens" if mask_predict_equal else "different tokens",
              low=None, high=None, method="exact", n=None, holds=mask_predict_equal),
    ]


def sampler_claims(scores, settings: DiffusionSettings, ratios: list[float], device: str) -> list[Claim]:
    """LLaDA Table 6 (remasking rule), App. B.6 (steps), App. B.3 (semi-AR for a base model), Fast-dLLM Table 1 (the
    cache's speed and quality), and notebook 05's sampler against LLaDA's (a measurement: no paper compares them)."""
    n, table6 = scores.n, PAPER["llada_table6"]["Base"]
    method = f"paired bootstrap over {n} prompts"
    judge = "judge NLL per token (log PPL)"
    fewest, margin = min(settings.step_grid), settings.equivalence_margin
    fast = PAPER["fast_dllm_table1"]
    speed, low, high = metrics.seed_interval(ratios)
    low, high = (speed, speed) if low is None else (low, high)
    rows = [
        _difference("LLaDA", "App. B.3, Table 6", "low-confidence remasking beats random remasking at equal forward "
                    f"passes (T = {settings.steps}, one block)",
                    f"GSM8K {table6['low-confidence']} vs {table6['random']} (8B Base)",
                    _versus(scores, LOW_CONFIDENCE, RANDOM),
                    log_ppl_difference(scores, LOW_CONFIDENCE, RANDOM), n, method, -1,
                    figure="figures/07_samplers.png", quantity=f"{judge}: low-confidence - random",
                    confound=_repetition_confound(scores, LOW_CONFIDENCE, RANDOM)),
        _difference("LLaDA", "App. B.6, Fig. 5; Table 7", f"fewer steps give worse text (T = {fewest} against "
                    f"T = {settings.steps}, low-confidence)",
                    "accuracy rises as the steps grow to the answer length (GSM8K, HumanEval)",
                    _versus(scores, steps_row(fewest), LOW_CONFIDENCE),
                    log_ppl_difference(scores, steps_row(fewest), LOW_CONFIDENCE), n, method, 1,
                    figure="figures/07_steps.png", quantity=f"{judge}: T={fewest} - T={settings.steps}",
                    confound=_repetition_confound(scores, steps_row(fewest), LOW_CONFIDENCE)),
        _equivalence("LLaDA", "App. B.3, Table 6", f"for a base model (no SFT), semi-autoregressive blocks (B = "
                     f"{settings.block_length}) make little difference against one block",
                     f"GSM8K {table6['low-confidence + semi-AR']} vs {table6['low-confidence']} (8B Base)",
                     _versus(scores, SEMI_AR, LOW_CONFIDENCE),
                     log_ppl_difference(scores, SEMI_AR, LOW_CONFIDENCE), n, margin, "figures/07_samplers.png",
                     f"{judge}: semi-AR - one block", _repetition_confound(scores, SEMI_AR, LOW_CONFIDENCE)),
        Claim(**_COMMON, paper="Fast-dLLM", where="Table 1 (+Cache); BD3-LM §3", kind="finding",
              claim="a block KV cache speeds up decoding (block-causal with the exact cache against semi-AR "
                    f"blocks under full attention, same T and B, batch 1, N = {settings.target_length})",
              paper_value=f"{fast['+Cache'][2]}× ({fast['LLaDA'][1]} → {fast['+Cache'][1]} tokens/s, A100)",
              ours=f"{speed:.2f}× on {device}", low=low, high=high, n=len(ratios),
              method=f"t over {len(ratios)} timing seeds", direction=1, threshold=1.0, n_seeds=len(ratios),
              seed_values=tuple(ratios), check=SAMPLER_CHECK, quantity="semi-AR time / block-causal time"),
        _equivalence("Fast-dLLM", "Table 1 (+Cache)", "the block cache costs little quality (block-causal with the "
                     "exact cache against semi-AR blocks under full attention)",
                     f"GSM8K {fast['LLaDA'][0]} → {fast['+Cache'][0]} (LLaDA-Instruct, length 256)",
                     _versus(scores, BLOCK_CAUSAL, SEMI_AR),
                     log_ppl_difference(scores, BLOCK_CAUSAL, SEMI_AR), n, margin, "figures/07_samplers.png",
                     f"{judge}: block-causal - semi-AR", _repetition_confound(scores, BLOCK_CAUSAL, SEMI_AR)),
    ]
    value, m_low, m_high = log_ppl_difference(scores, MASK_PREDICT, LOW_CONFIDENCE)
    confound = _repetition_confound(scores, MASK_PREDICT, LOW_CONFIDENCE)
    mixed = f"; note: {confound}" if confound else ""
    rows.append(Claim(**_COMMON, paper="LLaDA", where="§2.4 against OpenLTG §3.1", kind=MEASUREMENT, direction=0,
                      claim=f"notebook 05's mask-predict + LTD against LLaDA low-confidence at the same {settings.steps} "
                            "forward passes (neither paper compares them)",
                      paper_value="not compared", ours=f"{value:+.3f} nats per token; "
                                                        f"{_versus(scores, MASK_PREDICT, LOW_CONFIDENCE)}{mixed}",
                      low=m_low, high=m_high, method=method, n=n, figure="figures/07_samplers.png",
                      quantity=f"{judge}: mask-predict + LTD - low-confidence", trained=True, value=value))
    return rows


def fine_tune_claims(study: LikelihoodStudy, accuracy: dict, names: tuple[str, str], settings: DiffusionSettings) -> list:
    """MDLM §5.1 (the bound falls) and Table 4 (the masked LM's own skill is kept), BD3-LM §4.1 (the bound is tight at
    block size 1), and the fine-tune's accuracy at high mask ratios (a measurement). Each run has one training seed,
    so its intervals are over held-out blocks; a seed study (``make study``) adds the spread between seeds."""
    before, after = names
    n = len(study.causal[before])
    c4, glue = PAPER["mdlm_c4"], PAPER["mdlm_glue"]
    method = f"paired bootstrap over {n} held-out blocks (one training seed)"
    bound = {name: study.bound[name].per_token() for name in names}
    gain = mean_difference(bound[before], bound[after])
    kept = accuracy_difference(accuracy[after], accuracy[before])
    blocks = len(accuracy[after][0])
    margin = settings.accuracy_margin
    rows = [
        _difference("MDLM", "§5.1", f"a short diffusion fine-tune ({settings.fine_tune_steps} steps, 1/t weight) "
                    "lowers the likelihood bound of a fixed-ratio masked LM", f"C4 PPL bound {c4['BERT']} → "
                    f"{c4['BERT + MDLM-FT']} (AR {c4['AR']})",
                    f"{float(bound[before].mean()):.3f} → {float(bound[after].mean()):.3f} nats per token", gain, n,
                    method, 1, check="", figure="figures/07_likelihood.png",
                    quantity="bound (nats/token): MNTP - MNTP + diffusion fine-tune"),
        Claim(**_COMMON, paper="MDLM", where="Table 4", claim="the diffusion fine-tune keeps the masked "
                         f"LM's own skill (notebook 02's held-out masked-token accuracy, at most {margin:g} points lost)",
                         paper_value=f"GLUE average {glue['BERT']} → {glue['BERT + MDLM-FT']}",
                         ours=f"{kept[0]:+.1f} points", low=kept[1], high=kept[2],
                         method=f"paired bootstrap over {blocks} held-out blocks (one training seed)", n=blocks,
                         direction=1, threshold=-margin, trained=True, value=kept[0],
                         quantity="accuracy points: fine-tuned - MNTP"),
    ]
    for name in names:
        found = mean_difference(bound[name], study.causal[name])
        rows.append(_difference("BD3-LM", "§4.1", f"the bound is tight at block size 1 and looser for one block over "
                                f"the sequence ({name})", BD3_TIGHTNESS,
                                f"{float(bound[name].mean()):.3f} (one block) vs {float(study.causal[name].mean()):.3f} "
                                "(block size 1) nats per token", found, n, method, 1, check="",
                                figure="figures/07_likelihood.png",
                                quantity=f"{name}: bound(one block) - NLL(block size 1)"))
    hits = {name: high_ratio_hits(study.bound[name]) for name in names}
    value, low, high = accuracy_difference(hits[after], hits[before])
    rows.append(Claim(**_COMMON, paper="LLaDA", where="§2.1 (ratio t ~ U[0, 1] against a fixed one)", kind=MEASUREMENT,
                      direction=0, claim="masked-token accuracy at mask ratios ≥ 0.5, fine-tuned minus MNTP (trained "
                                         "at a fixed 20 %)", paper_value="not measured",
                      ours=f"{value:+.1f} points", low=low, high=high, method=method, n=n,
                      figure="figures/07_likelihood.png", quantity="accuracy points at ratio >= 0.5", trained=True,
                      value=value))
    return rows


def claims(*, identities: dict[str, bool], proof: BlockProof, cache_exact: bool, mask_predict_equal: bool, scores,
           settings: DiffusionSettings, speed: dict, device: str, study: LikelihoodStudy, accuracy: dict,
           names: tuple[str, str]) -> list[Claim]:
    """Notebook 07's ledger rows: three definition checks, the sampler findings and the fine-tune's."""
    return [*definition_claims(identities, proof, cache_exact, mask_predict_equal),
            *sampler_claims(scores, settings, speed_ratios(speed), device),
            *fine_tune_claims(study, accuracy, names, settings)]
