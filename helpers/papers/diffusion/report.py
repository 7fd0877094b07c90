"""Notebook 07's report: the papers' numbers (once), the sampler table, the sentences the notebook prints and its
claims (:func:`claims`, rows of :mod:`helpers.claims`: each verdict is computed from its row, its interval,
direction, threshold or margin, by the one rule ``claims.verdict_of``).

The sampler findings are judged against the human continuations of the same prompts, by MAUVE (Pillutla et al.
2021; :mod:`.judge`, :func:`judged_by_humans`): the causal judge's perplexity rewards repetition, so it stands
beside MAUVE in each row and confounds a row only where MAUVE cannot decide it. The corruption switch compares two
models, judged by the bound each gives the human continuations.

Sources, checked against the papers' text: LLaDA (arXiv 2502.09992 v2: Eq. 3, Eq. 6, Algorithm 5, App. B.3 Table 6,
B.4 Table 7, B.6); MDLM (arXiv 2406.07524: §5.1's C4 bounds and Table 4's GLUE average); BD3-LM (arXiv 2503.09573:
§4.1's sentence on the NELBO's tightness); Fast-dLLM (arXiv 2505.22618: Table 1, §4.1's defaults, Fig. 5). Beyond
them, two switches of 2026 systems, each as its own row: LLaDA2.1's token editing (arXiv 2602.08676, its abstract:
Token-to-Token editing woven into Mask-to-Token decoding, a Speedy Mode that lowers the M2T threshold and relies on
editing to refine the output) and DiffusionGemma's uniform corruption (diffusers' ``DiffusionGemmaPipeline``: a
canvas of uniformly random tokens instead of masks); their definitions are diffusers 0.42's
``BlockRefinementScheduler``, which :mod:`.ecosystem` drives.
"""
from __future__ import annotations

from dataclasses import asdict

import numpy as np

from ... import claims as ledger
from ... import metrics, training
from .experiment import (BLOCK_CAUSAL, EDITING, LOW_CONFIDENCE, LR_N, MASK_CORRUPTION, MASK_PREDICT, RANDOM, SEMI_AR,
                         TRUTH_ROW, UNIFORM_CORRUPTION, BlockProof,
                         LikelihoodStudy, accuracy_difference, high_ratio_hits, log_ppl_difference, mean_difference,
                         paired_metric_difference, speed_ratios, steps_row)
from .judge import MauveJudge
from .settings import FINE_TUNE_HELDOUT_CURVE, SETTINGS, DiffusionSettings

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
NAMES = ("MNTP (notebook 02)", "MNTP + diffusion fine-tune")  # the two adapters the fine-tune rows compare


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


# --------------------------------------------------------------------------- the claims

_MECHANISM = "tests/papers/diffusion/test_diffusion_mechanism.py"
_ECOSYSTEM = "tests/papers/diffusion/test_diffusion_ecosystem.py"
DIFFUSERS_CHECK = f"{_ECOSYSTEM}::test_llada2_pipeline_gives_the_tokens_of_sample"
UNIFORM_CHECK = f"{_ECOSYSTEM}::test_uniform_scheduler_gives_the_tokens_of_sample"
_EXPERIMENT = "tests/papers/diffusion/test_diffusion_experiment.py"
# The samplers against references on the same inputs: a port of LLaDA's Algorithm 5 (greedy; one block and semi-AR
# blocks) and notebook 05's mask-predict, token for token on the same seeds.
ALGORITHM5 = f"{_MECHANISM}::test_greedy_low_confidence_equals_llada_algorithm5"
SAMPLER_CHECK = f"{ALGORITHM5} {_MECHANISM}::test_mask_predict_is_one_configuration"
CACHE_CHECK = f"{_MECHANISM}::test_block_causal_cache_equals_recomputing_the_whole_sequence"
OBJECTIVE_CHECK = (f"{_MECHANISM}::test_diffusion_loss_is_llada_eq3_with_the_shift "
                   f"{_MECHANISM}::test_the_bound_is_unbiased_where_it_must_be_exact")
_JUDGE_TESTS = "tests/papers/diffusion/test_diffusion_judge.py"
# The judge against human text, on planted cases where the effect must appear, and against the authors' package.
MAUVE_MATCHES_PACKAGE = f"{_JUDGE_TESTS}::test_mauve_equals_the_authors_package_on_the_same_histograms"
MAUVE_RANKS = (f"{_JUDGE_TESTS}::test_mauve_ranks_a_repetitive_sampler_below_a_human_like_one "
               f"{_JUDGE_TESTS}::test_identical_sets_score_one_and_disjoint_sets_near_zero {MAUVE_MATCHES_PACKAGE}")
MAUVE_EQUIVALENCE = (f"{_JUDGE_TESTS}::test_two_samplers_of_one_distribution_differ_within_the_margin "
                     f"{_JUDGE_TESTS}::test_mauve_ranks_a_repetitive_sampler_below_a_human_like_one "
                     f"{MAUVE_MATCHES_PACKAGE}")
BOUND_CHECK = (f"{_JUDGE_TESTS}::test_the_continuation_bound_is_exact_for_one_token "
               f"{_JUDGE_TESTS}::test_the_continuation_bound_prefers_the_model_that_knows_the_text")
_CPU = SETTINGS["cpu"]  # the sizes the committed ledger is measured at: they name the step rows' quantities
_FEWEST = min(_CPU.step_grid)
_MAUVE = "MAUVE against the human continuations"
_STORIES = ("continuations of notebook 05's held-out story prompts (the profile's corpus: Jane Austen at cpu) judged "
            "by MAUVE against the human continuations of the same prompts (features: the causal judge's hidden "
            "states), the judge's perplexity, D-4 and LR-5 beside it; not GSM8K accuracy")
_BLOCKS = "held-out blocks of the profile's corpus (Jane Austen at cpu), not C4"
_TABLE6 = PAPER["llada_table6"]["Base"]
_FAST = PAPER["fast_dllm_table1"]
_C4, _GLUE = PAPER["mdlm_c4"], PAPER["mdlm_glue"]


def _mauve_margin_source(margin: float) -> str:
    return f"ours: ±{margin:g} MAUVE (a tenth of its 0..1 range), fixed before the run"


_ON_ADAPTER = dict(trained=True, curve=training.MNTP_HELDOUT_CURVE)  # rows resting on notebook 02's adapter alone
_ON_FINE_TUNE = dict(trained=True, curve=FINE_TUNE_HELDOUT_CURVE)  # rows resting on this notebook's fine-tune

CLAIMS = ledger.declare(
    # --- definition checks
    ledger.Declared(
        "diffusion.bd3lm.block_causal_mask", "07", "BD3-LM", "§3.1, Suppl. B.6",
        says="block-causal attention is causal across blocks and bidirectional within one; B = N is notebook 05's "
             "mask, B = 1 MAGNET's one-span mask; on the model a token reaches exactly the states the mask connects, "
             "at every layer",
        paper_value="definition", quantity="block-causal mask identities and its reach on the model, layer by layer",
        kind=ledger.DEFINITION,
        check=f"{_EXPERIMENT}::test_block_mask_identities_hold "
              f"{_EXPERIMENT}::test_reachability_proof_on_a_model_matches_the_mask",
        figure="figures/07_block_masks.png"),
    ledger.Declared(
        "diffusion.bd3lm.block_cache_exact", "07", "BD3-LM", "§3 (KV cache of finished blocks)",
        says="under block-causal attention, caching each finished block's keys and values once gives the tokens of "
             "recomputing the whole sequence at every step",
        paper_value="exact cache", quantity="tokens with the block cache == tokens recomputing every step",
        kind=ledger.DEFINITION, check=CACHE_CHECK),
    ledger.Declared(
        "diffusion.openltg.mask_predict_in_family", "07", "002", "§3.1 (mask-predict as a masked-diffusion sampler)",
        says="notebook 05's mask-predict with LTD is one configuration of the sampler family (re-mask committed "
             "tokens, mask-predict's schedule, tempered confidence)",
        paper_value="same algorithm", quantity="tokens of mask_predict_config == tokens of notebook 05's mask_predict",
        kind=ledger.DEFINITION, check=f"{_MECHANISM}::test_mask_predict_is_one_configuration"),
    # --- the samplers (on notebook 02's adapter)
    ledger.Declared(
        "diffusion.llada.table6.low_confidence_vs_random", "07", "LLaDA", "App. B.3, Table 6",
        says="low-confidence remasking beats random remasking at equal forward passes (one block)",
        paper_value=f"GSM8K {_TABLE6['low-confidence']} vs {_TABLE6['random']} (8B Base)",
        quantity=f"{_MAUVE}: low-confidence - random", direction=1,
        check=f"{SAMPLER_CHECK} {_MECHANISM}::test_low_confidence_commits_the_highest_scores_among_the_masked_positions "
              f"{_MECHANISM}::test_random_remasking_ignores_the_logits {MAUVE_RANKS}",
        figure="figures/07_samplers.png", dataset=_STORIES, **_ON_ADAPTER),
    ledger.Declared(
        "diffusion.llada.fig5.fewer_steps_worse", "07", "LLaDA", "App. B.6, Fig. 5; Table 7",
        says="fewer steps give worse text (low-confidence remasking)",
        paper_value="accuracy rises as the steps grow to the answer length (GSM8K, HumanEval)",
        quantity=f"{_MAUVE}: T={_FEWEST} - T={_CPU.steps}", direction=-1,
        check=f"{SAMPLER_CHECK} {_MECHANISM}::test_schedules_end_unmasked_and_follow_their_definitions {MAUVE_RANKS}",
        figure="figures/07_steps.png", dataset=_STORIES, **_ON_ADAPTER),
    ledger.Declared(
        "diffusion.llada.table6.semi_ar_vs_one_block", "07", "LLaDA", "App. B.3, Table 6",
        says="for a base model (no SFT), semi-autoregressive blocks make little difference against one block",
        paper_value=f"GSM8K {_TABLE6['low-confidence + semi-AR']} vs {_TABLE6['low-confidence']} (8B Base)",
        quantity=f"{_MAUVE}: semi-AR - one block", margin=_CPU.mauve_margin,
        margin_source=_mauve_margin_source(_CPU.mauve_margin),
        check=f"{SAMPLER_CHECK} {_MECHANISM}::test_semi_autoregressive_blocks_finish_before_the_next_one_starts "
              f"{MAUVE_EQUIVALENCE}",
        figure="figures/07_samplers.png", dataset=_STORIES, **_ON_ADAPTER),
    ledger.Declared(
        "diffusion.fast_dllm.table1.cache_speedup", "07", "Fast-dLLM", "Table 1 (+Cache); BD3-LM §3",
        says="a block KV cache speeds up decoding (block-causal with the exact cache against semi-AR blocks under "
             "full attention, same T and B, batch 1)",
        paper_value=f"{_FAST['+Cache'][2]}× ({_FAST['LLaDA'][1]} → {_FAST['+Cache'][1]} tokens/s, A100)",
        quantity="semi-AR time / block-causal time", direction=1, threshold=1.0, check=CACHE_CHECK,
        regime="timed at batch 1 on the run's device (a CPU at the cpu profile) with a 135M model; Fast-dLLM times "
               "LLaDA 8B on an A100, where the cache's saving depends on what bounds the GPU's step"),
    ledger.Declared(
        "diffusion.fast_dllm.table1.cache_quality", "07", "Fast-dLLM", "Table 1 (+Cache)",
        says="the block cache costs little quality (block-causal with the exact cache against semi-AR blocks under "
             "full attention)",
        paper_value=f"GSM8K {_FAST['LLaDA'][0]} → {_FAST['+Cache'][0]} (LLaDA-Instruct, length 256)",
        quantity=f"{_MAUVE}: block-causal - semi-AR", margin=_CPU.mauve_margin,
        margin_source=_mauve_margin_source(_CPU.mauve_margin), check=f"{ALGORITHM5} {CACHE_CHECK} {MAUVE_EQUIVALENCE}",
        figure="figures/07_samplers.png", dataset=_STORIES, **_ON_ADAPTER),
    ledger.Declared(
        "diffusion.llada.mask_predict_vs_low_confidence", "07", "LLaDA", "§2.4 against OpenLTG §3.1",
        says="notebook 05's mask-predict + LTD against LLaDA low-confidence at the same forward passes (neither paper "
             "compares them)",
        paper_value="not compared", quantity=f"{_MAUVE}: mask-predict + LTD - low-confidence", kind=ledger.MEASUREMENT,
        direction=0, check=f"{SAMPLER_CHECK} {MAUVE_RANKS}", figure="figures/07_samplers.png", dataset=_STORIES, **_ON_ADAPTER),
    # --- two switches of 2026 systems (LLaDA2.1's editing, DiffusionGemma's corruption), diffusers' definitions
    ledger.Declared(
        "diffusion.llada2.editing_vs_none", "07", "LLaDA", "LLaDA2.1 (arXiv 2602.08676): Token-to-Token editing",
        says="re-writing a committed token when the model predicts another one above an editing threshold "
             "(LLaDA2.1's T2T editing, BlockRefinementScheduler's editing_threshold) refines the output, at equal "
             "forward passes (block-causal blocks, LLaDA's schedule)",
        paper_value="editing refines the draft (abstract; no number for the switch alone there)",
        quantity=f"{_MAUVE}: editing - no editing", direction=1,
        check=f"{DIFFUSERS_CHECK} {_ECOSYSTEM}::test_editing_rewrites_exactly_the_confident_disagreements {MAUVE_RANKS}",
        figure="figures/07_samplers.png", dataset=_STORIES, **_ON_ADAPTER),
    # --- the diffusion fine-tune of notebook 02's adapter
    ledger.Declared(
        "diffusion.mdlm.s5_1.bound_falls", "07", "MDLM", "§5.1",
        says="a short diffusion fine-tune (1/t weight) lowers the likelihood bound of a fixed-ratio masked LM",
        paper_value=f"C4 PPL bound {_C4['BERT']} → {_C4['BERT + MDLM-FT']} (AR {_C4['AR']})",
        quantity="bound (nats/token): MNTP - MNTP + diffusion fine-tune", direction=1,
        check=f"{OBJECTIVE_CHECK} {_EXPERIMENT}::test_the_fine_tune_trains_once_and_is_reloaded_from_its_run_folder",
        figure="figures/07_likelihood.png", dataset=_BLOCKS, **_ON_FINE_TUNE),
    ledger.Declared(
        "diffusion.mdlm.table4.skill_kept", "07", "MDLM", "Table 4",
        says=f"the diffusion fine-tune keeps the masked LM's own skill (notebook 02's held-out masked-token accuracy, "
             f"at most {_CPU.accuracy_margin:g} points lost)",
        paper_value=f"GLUE average {_GLUE['BERT']} → {_GLUE['BERT + MDLM-FT']}",
        quantity="accuracy points: fine-tuned - MNTP", direction=1, threshold=-_CPU.accuracy_margin,
        check=f"{_EXPERIMENT}::test_row_hits_sum_to_the_workbook_accuracy "
              f"{_MECHANISM}::test_diffusion_loss_is_llada_eq3_with_the_shift",
        dataset="notebook 02's held-out masked-token accuracy on the profile's corpus (Jane Austen at cpu), not GLUE",
        **_ON_FINE_TUNE),
    ledger.Declared(
        "diffusion.bd3lm.s4_1.tight_at_block_one.mntp", "07", "BD3-LM", "§4.1",
        says="the bound is tight at block size 1 and looser for one block over the sequence (notebook 02's MNTP "
             "adapter)",
        paper_value=BD3_TIGHTNESS, quantity=f"{NAMES[0]}: bound(one block) - NLL(block size 1)", direction=1,
        check=f"{_MECHANISM}::test_at_block_size_one_the_bound_is_the_causal_nll_exactly "
              f"{_MECHANISM}::test_the_bound_is_unbiased_where_it_must_be_exact",
        figure="figures/07_likelihood.png", dataset=_BLOCKS, **_ON_ADAPTER),
    ledger.Declared(
        "diffusion.bd3lm.s4_1.tight_at_block_one.fine_tuned", "07", "BD3-LM", "§4.1",
        says="the bound is tight at block size 1 and looser for one block over the sequence (after the diffusion "
             "fine-tune)",
        paper_value=BD3_TIGHTNESS, quantity=f"{NAMES[1]}: bound(one block) - NLL(block size 1)", direction=1,
        check=f"{_MECHANISM}::test_at_block_size_one_the_bound_is_the_causal_nll_exactly "
              f"{_MECHANISM}::test_the_bound_is_unbiased_where_it_must_be_exact",
        figure="figures/07_likelihood.png", dataset=_BLOCKS, **_ON_FINE_TUNE),
    ledger.Declared(
        "diffusion.llada.s2_1.high_ratio_accuracy", "07", "LLaDA", "§2.1 (ratio t ~ U[0, 1] against a fixed one)",
        says="masked-token accuracy at mask ratios ≥ 0.5, fine-tuned minus MNTP (trained at a fixed 20 %)",
        paper_value="not measured", quantity="accuracy points at ratio >= 0.5", kind=ledger.MEASUREMENT, direction=0,
        check=f"{_EXPERIMENT}::test_accuracy_by_ratio_and_high_ratio_hits_read_the_bound_samples",
        figure="figures/07_likelihood.png", dataset=_BLOCKS, **_ON_FINE_TUNE),
    # --- the corruption switch (DiffusionGemma), on two fine-tunes
    ledger.Declared(
        "diffusion.diffusiongemma.uniform_vs_mask_corruption", "07", "LLaDA",
        "DiffusionGemma (diffusers DiffusionGemmaPipeline): uniform corruption",
        says="corrupting with uniformly random tokens instead of the mask token, in the fine-tune and the sampler, "
             "against mask corruption at the same fine-tune budget and forward passes (no paper compares the two "
             "in the sources read)",
        paper_value="not compared",
        quantity="bound each model gives the human continuation, given the prompt (LLaDA Eq. 6, nats per token): "
                 "uniform - mask corruption", kind=ledger.MEASUREMENT, direction=0,
        check=f"{UNIFORM_CHECK} {_ECOSYSTEM}::test_uniform_corruption_replaces_the_mask_at_the_same_positions "
              f"{BOUND_CHECK}",
        dataset="the human continuations of notebook 05's held-out story prompts (Jane Austen at cpu), each model "
                "under its own corruption; the judge's perplexity of the generations beside it", **_ON_FINE_TUNE),
)


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
    curve (``training.mntp_heldout_curve``), which these rows rest on."""
    fewest = min(settings.step_grid)
    plateau = _held_out(training.MNTP_HELDOUT_CURVE, mntp_curve)

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
    adapter_curve = _held_out(training.MNTP_HELDOUT_CURVE, mntp_curve)
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
    is notebook 02's held-out MNTP curve (``training.mntp_heldout_curve(cfg)``, None when it logged none) and
    ``fine_tune_curve`` the fine-tune's (``FineTuned.heldout_curve``): the trained rows' budget checks."""
    return [*definition_claims(identities, proof, cache_exact, mask_predict_equal),
            *sampler_claims(scores, settings, speed_ratios(speed), device, mauve, mntp_curve),
            *fine_tune_claims(study, accuracy, names, settings, mntp_curve, fine_tune_curve),
            corruption_claim(corruption_scores, corruption_bounds, settings, fine_tune_curve)]
