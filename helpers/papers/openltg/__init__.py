"""OpenLTG (seed 002): open-ended long text generation with a masked LM, notebook 05.

- :mod:`.mechanism`: mask-predict (§3.1) with LTD (§4.2, Eq. 8), DSWA (§4.1, Eq. 6-7) and SMART's update rule
  (§4.3), recurrent segments (App. B), the nucleus sampler and the AR baseline it shares
  (:mod:`.mechanism_autoregressive`);
- :mod:`.settings`: the sizes per profile (§5.1's values at the ``paper`` profile);
- :mod:`.experiment`: prompts, Table 6's generations (run folder keyed by :class:`GenerationsKey`), Fig. 2 and 4's
  measurements, Fig. 5's timings; :mod:`.experiment_table6` scores Table 6, :mod:`.experiment_table7` Table 7;
- :mod:`.report`: the paper's numbers, our tables next to them, the ``describe_*`` sentences and :func:`claims`;
- :mod:`.figures`: Fig. 2, Fig. 4, Fig. 5, Table 6 as bars, the generation masks and the decoding widget.
"""
from . import experiment, experiment_table6, experiment_table7, figures, mechanism, report, settings
from .experiment import (ABLATIONS, AR_ROW, LAST_LAYER_ROW, SMART_ROW, TRUTH_ROW, GenerationsKey, PromptExample,
                         ablation_configs, decoding_speed, device_label, entropy, function_word_share, is_function_word,
                         load_causal_lm, ltd_entropies, save_generations, speed_ratio_runs,
                         speed_ratio_samples, speed_ratios, story_prompts, table6_draws, table6_generations)
from .experiment_table6 import (Table6Scores, bleu1_statistics, continuation_nll, continuation_nlls, corpus_bleu1,
                                evaluate_draws, evaluate_generations, generation_records, paired_metric_difference, pool_draws,
                                rouge_l, table6_scores, words)
from .experiment_table7 import (LengthPredictor, LengthScores, continuation_lengths, length_experiment,
                                length_strategies, prompt_features)
from .figures import (ablation_figure, decoding_view, generation_masks_figure, ltd_figure, speed_figure,
                      trace_figure)
from .mechanism_autoregressive import autoregressive_batched, autoregressive_generate
from .mechanism import (REJECTION_ROUNDS, DecodeConfig, Decoded, Iteration, attention_masks,
                        generation_mask, joined_tokens, left_padded, ltd_temperature,
                        mask_predict, mask_predict_batched, recurrent_mask_predict, remask_count, sample_tokens,
                        segment_lengths, top_p_filter)
from .report import (PAPER_BETTER, PAPER_FUNCTION_WORD_SHARE, PAPER_SPEED, PAPER_TABLE4, PAPER_TABLE6, PAPER_TABLE7,
                     ablation_with_paper, claims, describe_ablation, describe_lengths, describe_ltd,
                     describe_self_scoring, describe_speed, describe_trace, settings_table)
from .settings import SETTINGS, OpenLTGSettings

CITATION = dict(
    title="Open-ended Long Text Generation via Masked Language Modeling",
    authors="Xiaobo Liang, Zecheng Tang, Juntao Li, Min Zhang",
    venue="ACL 2023 (Long Papers), pages 223-241; ACL Anthology 2023.acl-long.13, doi:10.18653/v1/2023.acl-long.13",
    arxiv=None,  # published through the ACL Anthology; no arXiv identifier is cited here
)

__all__ = ["ABLATIONS", "AR_ROW", "CITATION", "LAST_LAYER_ROW", "PAPER_BETTER", "PAPER_FUNCTION_WORD_SHARE", "PAPER_SPEED",
           "PAPER_TABLE4", "PAPER_TABLE6", "PAPER_TABLE7", "REJECTION_ROUNDS", "SETTINGS", "SMART_ROW", "TRUTH_ROW",
           "DecodeConfig", "Decoded", "GenerationsKey", "Iteration", "LengthPredictor", "LengthScores",
           "OpenLTGSettings", "PromptExample", "Table6Scores", "ablation_configs", "ablation_figure",
           "ablation_with_paper", "attention_masks", "autoregressive_batched", "autoregressive_generate",
           "bleu1_statistics", "claims", "continuation_lengths", "continuation_nll", "continuation_nlls", "corpus_bleu1",
           "decoding_speed", "decoding_view", "describe_ablation", "describe_lengths", "describe_ltd",
           "describe_self_scoring", "describe_speed", "describe_trace", "device_label", "entropy", "evaluate_draws",
           "evaluate_generations", "generation_records", "pool_draws", "speed_ratio_runs",
           "table6_draws",
           "experiment", "experiment_table6", "experiment_table7", "figures", "function_word_share",
           "generation_mask", "generation_masks_figure", "is_function_word", "joined_tokens", "left_padded",
           "length_experiment", "length_strategies", "load_causal_lm", "ltd_entropies", "ltd_figure", "ltd_temperature",
           "mask_predict", "mask_predict_batched", "mechanism", "paired_metric_difference", "prompt_features",
           "recurrent_mask_predict", "remask_count", "report", "rouge_l", "sample_tokens", "save_generations",
           "segment_lengths", "settings", "settings_table", "speed_figure", "speed_ratio_samples", "speed_ratios",
           "story_prompts", "table6_generations", "table6_scores", "top_p_filter", "trace_figure", "words"]
