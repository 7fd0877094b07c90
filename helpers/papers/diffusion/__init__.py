"""From mask-predict to masked diffusion, on notebook 02's adapted model: notebook 07.

Papers beyond the workbook's four seeds: LLaDA (the samplers and the objective), MDLM (the fine-tune of a fixed-ratio
masked LM), BD3-LM (block-causal attention and its exact cache), Fast-dLLM (the confidence threshold and the block
cache); DiffuLLaMA/DiffuGPT keep the AR shift when they adapt a causal model, as notebook 02's MNTP adapter does.

- :mod:`.mechanism`: one sampler family (:func:`sample`, :class:`SamplerConfig`; notebook 05's mask-predict is
  :func:`mask_predict_config`), the diffusion objective (:func:`diffusion_batch`, :func:`diffusion_loss`) and the
  likelihood bound (:func:`diffusion_bound`, :func:`causal_nll`); the block-causal mask is
  :func:`helpers.masks.block_causal`;
- :mod:`.ecosystem`: diffusers' ``BlockRefinementScheduler`` (``LLaDA2Pipeline``, and ``DiffusionGemmaPipeline``'s
  uniform-corruption loop) driven by the same model, the library's implementation of :func:`sample`;
- :mod:`.judge`: the judges against the human continuations (MAUVE for samplers, the bound for models);
- :mod:`.settings`: the sizes per profile;
- :mod:`.experiment`: the sampler rows, the block cache's timing, the mask's proof on the model; the fine-tune (run
  folder keyed by :class:`FineTuneKey` without the length: a longer request extends it) and the likelihood study in
  :mod:`.experiment_fine_tune`;
- :mod:`.declarations`: the papers' numbers and the notebook's claims, declared once (``CLAIMS``);
- :mod:`.report`: the tables, the sentences and :func:`claims` (the rows);
- :mod:`.figures`: the masks, the commit maps and their widget, the sampler bars, the steps and the likelihood.
"""
from . import declarations, ecosystem, experiment, figures, judge, mechanism, report, settings
from .ecosystem import BackendLogits, llada2_generate, pipeline_arguments, uniform_generate
from .experiment import (BLOCK_CAUSAL, EDITING, LOW_CONFIDENCE, MASK_CORRUPTION, MASK_PREDICT, RANDOM, SEMI_AR, THRESHOLD,
                         TRUTH_ROW, UNIFORM_CORRUPTION, BlockProof, corruption_generations, corruption_rows,
                         FineTuned, FineTuneKey, Generations, LikelihoodStudy, accuracy_difference, anatomy, anatomy_rows,
                         block_mask_identities, cache_matches, cache_speed, fine_tune, fine_tune_heldout_curve, generate,
                         generate_draws, systems_per_draw,
                         heldout_blocks, heldout_diffusion_batches, heldout_diffusion_loss,
                         human_continuation_bounds, human_continuation_ids, human_continuations, judge_against_humans,
                         likelihood_study, log_ppl_difference, mask_predict_matches,
                         notebook02_eval_batches, reachability_proof, row_hits, sampler_rows, score, speed_ratios,
                         steps_row, story_prompts)
from .figures import (anatomy_figure, block_masks_figure, commit_map_figure, likelihood_figure, proof_figure,
                      sampler_view, samplers_figure, steps_figure)
from .judge import MauveJudge, mauve_judge, mauve_of_histograms
from .mechanism import (BoundSamples, Sampled, SamplerConfig, Step, causal_nll, continuation_bound, diffusion_batch,
                        diffusion_bound,
                        diffusion_loss, mask_predict_config, sample, unmasked_after)
from .report import (CLAIMS, NAMES, PAPER, claims, describe_blocks, describe_corruption, describe_editing, describe_fine_tune, describe_judges, describe_mask_predict, describe_masks,
                     describe_remasking, describe_steps, sampler_table, settings_table)
from .settings import FINE_TUNE_HELDOUT_CURVE, SETTINGS, DiffusionSettings, curve_points

CITATIONS = {
    "LLaDA": dict(title="Large Language Diffusion Models",
                  authors="Shen Nie, Fengqi Zhu, Zebin You, Xiaolu Zhang, Jingyang Ou, Jun Hu, Jun Zhou, Yankai Lin, "
                          "Ji-Rong Wen, Chongxuan Li", venue="arXiv preprint (v2, February 2025)", arxiv="2502.09992"),
    "MDLM": dict(title="Simple and Effective Masked Diffusion Language Models",
                 authors="Subham Sekhar Sahoo, Marianne Arriola, Yair Schiff, Aaron Gokaslan, Edgar Marroquin, "
                         "Justin T Chiu, Alexander Rush, Volodymyr Kuleshov", venue="NeurIPS 2024", arxiv="2406.07524"),
    "BD3-LM": dict(title="Block Diffusion: Interpolating Between Autoregressive and Diffusion Language Models",
                   authors="Marianne Arriola, Aaron Gokaslan, Justin T Chiu, Zhihan Yang, Zhixuan Qi, Jiaqi Han, "
                           "Subham Sekhar Sahoo, Volodymyr Kuleshov", venue="ICLR 2025", arxiv="2503.09573"),
    "Fast-dLLM": dict(title="Fast-dLLM: Training-free Acceleration of Diffusion LLM by Enabling KV Cache and Parallel "
                            "Decoding", authors="Chengyue Wu, Hao Zhang, Shuchen Xue, Zhijian Liu, Shizhe Diao, "
                                                "Ligeng Zhu, Ping Luo, Song Han, Enze Xie",
                      venue="arXiv preprint (2025)", arxiv="2505.22618"),
}
CITATION = {**CITATIONS["LLaDA"], "also": [CITATIONS[name] for name in ("MDLM", "BD3-LM", "Fast-dLLM")]}

__all__ = ["BLOCK_CAUSAL", "EDITING", "MASK_CORRUPTION", "UNIFORM_CORRUPTION", "BackendLogits", "corruption_generations",
           "corruption_rows", "declarations", "describe_corruption", "describe_editing", "ecosystem", "llada2_generate",
           "pipeline_arguments", "uniform_generate", "CITATION", "CITATIONS", "CLAIMS", "FINE_TUNE_HELDOUT_CURVE", "NAMES", "LOW_CONFIDENCE", "MASK_PREDICT", "PAPER", "RANDOM", "SEMI_AR",
           "SETTINGS", "THRESHOLD", "TRUTH_ROW", "BlockProof", "BoundSamples", "DiffusionSettings", "FineTuneKey",
           "FineTuned", "Generations", "LikelihoodStudy", "Sampled", "SamplerConfig", "Step", "accuracy_difference",
           "anatomy", "anatomy_figure", "anatomy_rows", "block_mask_identities", "block_masks_figure", "cache_matches",
           "cache_speed", "generate_draws", "systems_per_draw", "causal_nll", "claims", "curve_points", "commit_map_figure", "describe_blocks", "describe_fine_tune",
           "describe_mask_predict", "describe_masks", "describe_remasking", "describe_steps", "diffusion_batch",
           "diffusion_bound", "diffusion_loss", "experiment", "figures", "fine_tune", "fine_tune_heldout_curve", "generate", "heldout_blocks",
           "heldout_diffusion_batches", "heldout_diffusion_loss",
           "human_continuation_bounds", "human_continuation_ids", "human_continuations", "judge", "judge_against_humans",
           "MauveJudge", "mauve_judge", "mauve_of_histograms", "continuation_bound", "describe_judges", "likelihood_figure", "likelihood_study", "log_ppl_difference", "mask_predict_config",
           "mask_predict_matches", "mechanism", "notebook02_eval_batches", "proof_figure", "reachability_proof",
           "report", "row_hits", "sample", "sampler_rows", "sampler_table", "sampler_view", "samplers_figure", "score",
           "settings", "settings_table", "speed_ratios", "steps_figure", "steps_row", "story_prompts", "unmasked_after"]
