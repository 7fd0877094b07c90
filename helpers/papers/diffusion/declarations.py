"""Notebook 07's claims, declared once (:data:`CLAIMS`, read by :mod:`helpers.ledger`; :mod:`.report` measures the
rows), and the papers' numbers they quote: definition checks, sampler findings, the block cache, the fine-tune and
the two 2026 switches.

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

import dataclasses

from ... import ledger
from ... import mntp_recipe
from .settings import FINE_TUNE_HELDOUT_CURVE, SETTINGS

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


# MAUVE at the cpu profile cannot separate the samplers: at 4x the prompts (an earlier study's third look, by older
# code) every sampler of every seed read within about 0.005 of every other, a twentieth of the margin, while at the
# notebook's own 16 prompts (2 k-means buckets) one seed's differences spread over about ±0.5. (A rerun on another
# CPU landed outside that study's intervals only when compared with the 4x look's; against the seeds at its own
# prompts all its rows fell inside: study.seed_values_at.) The rows the judge decides are declared as the findings they are
# (FINDINGS_ONCE_JUDGED) and read as measurements until the judge has the resolution they need (more prompts, so
# more buckets, and its spread across seeds and machines measured).
JUDGE_ON_ITS_FLOOR = ("a measurement until the judge resolves the samplers: at 4x the prompts MAUVE put every sampler "
                      "of every seed within about 0.005 of the others, and at the notebook's own 16 prompts one "
                      "seed's differences spread over about ±0.5, so no difference of the margin can be read")
FINDINGS_ONCE_JUDGED: dict[str, ledger.Declared] = {}


def _until_the_judge_resolves(finding: ledger.Declared) -> ledger.Declared:
    """``finding``, a row MAUVE decides, as the ledger reads it while the judge is on its floor: a measurement (no
    direction, threshold or margin) whose words say why; the finding itself is kept in :data:`FINDINGS_ONCE_JUDGED`."""
    FINDINGS_ONCE_JUDGED[finding.id] = finding
    return dataclasses.replace(finding, kind=ledger.MEASUREMENT, direction=0, threshold=0.0, margin=None,
                               margin_source="", says=f"{finding.says} ({JUDGE_ON_ITS_FLOOR})")


_ON_ADAPTER = dict(trained=True, curve=mntp_recipe.MNTP_HELDOUT_CURVE)  # rows resting on notebook 02's adapter alone
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
    _until_the_judge_resolves(ledger.Declared(
        "diffusion.llada.table6.low_confidence_vs_random", "07", "LLaDA", "App. B.3, Table 6",
        says="low-confidence remasking beats random remasking at equal forward passes (one block)",
        paper_value=f"GSM8K {_TABLE6['low-confidence']} vs {_TABLE6['random']} (8B Base)",
        quantity=f"{_MAUVE}: low-confidence - random", direction=1,
        check=f"{SAMPLER_CHECK} {_MECHANISM}::test_low_confidence_commits_the_highest_scores_among_the_masked_positions "
              f"{_MECHANISM}::test_random_remasking_ignores_the_logits {MAUVE_RANKS}",
        figure="figures/07_samplers.png", dataset=_STORIES, **_ON_ADAPTER)),
    _until_the_judge_resolves(ledger.Declared(
        "diffusion.llada.fig5.fewer_steps_worse", "07", "LLaDA", "App. B.6, Fig. 5; Table 7",
        says="fewer steps give worse text (low-confidence remasking)",
        paper_value="accuracy rises as the steps grow to the answer length (GSM8K, HumanEval)",
        quantity=f"{_MAUVE}: T={_FEWEST} - T={_CPU.steps}", direction=-1,
        check=f"{SAMPLER_CHECK} {_MECHANISM}::test_schedules_end_unmasked_and_follow_their_definitions {MAUVE_RANKS}",
        figure="figures/07_steps.png", dataset=_STORIES, **_ON_ADAPTER)),
    _until_the_judge_resolves(ledger.Declared(
        "diffusion.llada.table6.semi_ar_vs_one_block", "07", "LLaDA", "App. B.3, Table 6",
        says="for a base model (no SFT), semi-autoregressive blocks make little difference against one block",
        paper_value=f"GSM8K {_TABLE6['low-confidence + semi-AR']} vs {_TABLE6['low-confidence']} (8B Base)",
        quantity=f"{_MAUVE}: semi-AR - one block", margin=_CPU.mauve_margin,
        margin_source=_mauve_margin_source(_CPU.mauve_margin),
        check=f"{SAMPLER_CHECK} {_MECHANISM}::test_semi_autoregressive_blocks_finish_before_the_next_one_starts "
              f"{MAUVE_EQUIVALENCE}",
        figure="figures/07_samplers.png", dataset=_STORIES, **_ON_ADAPTER)),
    ledger.Declared(
        "diffusion.fast_dllm.table1.cache_speedup", "07", "Fast-dLLM", "Table 1 (+Cache); BD3-LM §3",
        says="a block KV cache speeds up decoding (block-causal with the exact cache against semi-AR blocks under "
             "full attention, same T and B, batch 1)",
        paper_value=f"{_FAST['+Cache'][2]}× ({_FAST['LLaDA'][1]} → {_FAST['+Cache'][1]} tokens/s, A100)",
        quantity="semi-AR time / block-causal time", direction=1, threshold=1.0,
        check=f"{CACHE_CHECK} {_MECHANISM}::test_block_causal_steps_run_only_the_current_block_against_the_cache",
        breaks="diffusion.block_cache_not_kept",
        regime="timed at batch 1 on the run's device (a CPU at the cpu profile) with a 135M model; Fast-dLLM times "
               "LLaDA 8B on an A100, where the cache's saving depends on what bounds the GPU's step"),
    _until_the_judge_resolves(ledger.Declared(
        "diffusion.fast_dllm.table1.cache_quality", "07", "Fast-dLLM", "Table 1 (+Cache)",
        says="the block cache costs little quality (block-causal with the exact cache against semi-AR blocks under "
             "full attention)",
        paper_value=f"GSM8K {_FAST['LLaDA'][0]} → {_FAST['+Cache'][0]} (LLaDA-Instruct, length 256)",
        quantity=f"{_MAUVE}: block-causal - semi-AR", margin=_CPU.mauve_margin,
        margin_source=_mauve_margin_source(_CPU.mauve_margin), check=f"{ALGORITHM5} {CACHE_CHECK} {MAUVE_EQUIVALENCE}",
        figure="figures/07_samplers.png", dataset=_STORIES, **_ON_ADAPTER)),
    ledger.Declared(
        "diffusion.llada.mask_predict_vs_low_confidence", "07", "LLaDA", "§2.4 against OpenLTG §3.1",
        says="notebook 05's mask-predict + LTD against LLaDA low-confidence at the same forward passes (neither paper "
             "compares them)",
        paper_value="not compared", quantity=f"{_MAUVE}: mask-predict + LTD - low-confidence", kind=ledger.MEASUREMENT,
        direction=0, check=f"{SAMPLER_CHECK} {MAUVE_RANKS}", figure="figures/07_samplers.png", dataset=_STORIES, **_ON_ADAPTER),
    # --- two switches of 2026 systems (LLaDA2.1's editing, DiffusionGemma's corruption), diffusers' definitions
    _until_the_judge_resolves(ledger.Declared(
        "diffusion.llada2.editing_vs_none", "07", "LLaDA", "LLaDA2.1 (arXiv 2602.08676): Token-to-Token editing",
        says="re-writing a committed token when the model predicts another one above an editing threshold "
             "(LLaDA2.1's T2T editing, BlockRefinementScheduler's editing_threshold) refines the output, at equal "
             "forward passes (block-causal blocks, LLaDA's schedule)",
        paper_value="editing refines the draft (abstract; no number for the switch alone there)",
        quantity=f"{_MAUVE}: editing - no editing", direction=1,
        check=f"{DIFFUSERS_CHECK} {_ECOSYSTEM}::test_editing_rewrites_exactly_the_confident_disagreements {MAUVE_RANKS}",
        figure="figures/07_samplers.png", dataset=_STORIES, **_ON_ADAPTER)),
    # --- the diffusion fine-tune of notebook 02's adapter
    ledger.Declared(
        "diffusion.mdlm.s5_1.bound_falls", "07", "MDLM", "§5.1",
        # a measurement: the fine-tune minimises the very bound measured, so its fall is close to guaranteed; what
        # would make it MDLM's finding is a control fine-tune of the same steps at MNTP's fixed masking ratio
        kind=ledger.MEASUREMENT,
        says="a short diffusion fine-tune (1/t weight) lowers the likelihood bound of a fixed-ratio masked LM (a "
             "measurement: the fine-tune minimises the bound it is scored on, and no control fine-tune of the same "
             "steps at a fixed masking ratio runs beside it)",
        paper_value=f"C4 PPL bound {_C4['BERT']} → {_C4['BERT + MDLM-FT']} (AR {_C4['AR']})",
        quantity="bound (nats/token): MNTP - MNTP + diffusion fine-tune", direction=0,
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
        breaks="diffusion.loss_unweighted diffusion.loss_unshifted",
        dataset="notebook 02's held-out masked-token accuracy on the profile's corpus (Jane Austen at cpu), not GLUE",
        **_ON_FINE_TUNE),
    *[ledger.Declared(
        f"diffusion.bd3lm.s4_1.tight_at_block_one.{suffix}", "07", "BD3-LM", "§4.1",
        # a measurement: bound(one block) - NLL(block size 1) mostly measures how a short adapter handles high mask
        # ratios, not the looseness of the NELBO that BD3-LM §4.1 means (a bound against the same model's true NLL)
        kind=ledger.MEASUREMENT,
        says=f"the bound is tight at block size 1 and looser for one block over the sequence ({which}; a "
             f"measurement: the gap mostly measures how this short adapter handles high mask ratios, not the "
             f"looseness of the NELBO against the same model's true likelihood)",
        paper_value=BD3_TIGHTNESS, quantity=f"{name}: bound(one block) - NLL(block size 1)", direction=0,
        check=f"{_MECHANISM}::test_at_block_size_one_the_bound_is_the_causal_nll_exactly "
              f"{_MECHANISM}::test_the_bound_is_unbiased_where_it_must_be_exact",
        figure="figures/07_likelihood.png", dataset=_BLOCKS, **trained)
      for suffix, which, name, trained in (("mntp", "notebook 02's MNTP adapter", NAMES[0], _ON_ADAPTER),
                                           ("fine_tuned", "after the diffusion fine-tune", NAMES[1], _ON_FINE_TUNE))],
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
