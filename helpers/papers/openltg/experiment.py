"""Notebook 05's experiments (OpenLTG, seed 002): prompts, models, Table 6's generations, Fig. 2/4's measurements
and Fig. 5's timings. Table 6's scoring is in :mod:`.experiment_table6`, Table 7's length strategies in
:mod:`.experiment_table7`.

- **Prompts** (:func:`story_prompts`): the first sentence of a held-out paragraph and the rest of it, or
  WritingPrompts (§3.2) on the Hub.
- **Table 6's systems** (:func:`table6_generations`): the four ablation rows of §5.3, Ours with SMART's update-all
  (§4.3) and with Eq. 3's last-layer prompt states, the AR baseline with the same sampler, and the human text;
  :func:`save_generations` writes them to a run folder keyed by :class:`GenerationsKey`.
- **Fig. 2 and Fig. 4 in numbers** (§3.3, §4.2): the function-word share of the top candidates, and the entropy at
  the probe position with LTD and at T = 1.
- **Fig. 5** (§6.1): tokens/s at batch 1 of mask-predict for each T and of AR with a KV cache, in one run.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import torch

from ... import metrics, models, store
from ...checks import whole_number
from ...device import device_label  # noqa: F401  (re-exported: notebook 05 and the speed benchmark read it here)
from ...masked_lm import MaskedLM
from .mechanism_autoregressive import autoregressive_batched, autoregressive_generate
from .mechanism import (DecodeConfig, check_fits, check_iterations,
                        check_length, check_positive, check_prompts, mask_predict, mask_predict_batched)
from .settings import OpenLTGSettings

ABLATIONS = ("Ours", "w/o DSWA", "w/o LTD", "w/o ALL")
SMART_ROW = "Ours + SMART (update all)"
LAST_LAYER_ROW = "Ours, Eq. 3 prompt states (last layer)"
AR_ROW = "AR (KV cache; judge = generator)"
TRUTH_ROW = "Ground truth"
PROMPT_SOURCES = ("corpus", "writingprompts")
WRITINGPROMPTS_DATASET = "euclaise/writingprompts"
GENERATIONS_RUN = "05_ablation"  # runs/05_ablation_<fingerprint of GenerationsKey>/generations.jsonl


# --------------------------------------------------------------------------- prompts and models

@dataclass(frozen=True)
class PromptExample:
    """A prompt and its human continuation (the ground truth of Table 4's last row)."""

    prompt: str
    continuation: str


def story_prompts(source: str, corpus: str, split: str, limit: int, *, min_continuation_words: int = 8,
                  offset: int = 0) -> list[PromptExample]:
    """Prompts from held-out text.

    - ``"corpus"``: paragraphs of ``corpus`` (Austen offline, WikiText on the Hub) with at least two
      sentences; the first sentence is the prompt, the rest of the paragraph the continuation.
    - ``"writingprompts"``: WritingPrompts (Fan et al., 2018) from the Hub, as in seed 002 §3.2.
    """
    if source not in PROMPT_SOURCES:
        raise ValueError(f"source={source!r} must be one of {PROMPT_SOURCES}")
    limit = whole_number(limit, "limit", 1, "the number of prompts")
    examples: list[PromptExample] = []
    if source == "writingprompts":
        from datasets import load_dataset

        for record in load_dataset(WRITINGPROMPTS_DATASET, split=split):
            prompt = re.sub(r"^\s*\[\s*\w+\s*\]\s*", "", record["prompt"]).strip()
            story = record["story"].replace("<newline>", " ").strip()
            if prompt and len(story.split()) >= min_continuation_words:
                examples.append(PromptExample(prompt, story))
            if len(examples) >= offset + limit:
                break
        return examples[offset:offset + limit]
    from ... import data

    for paragraph in data.load_paragraphs(corpus, split):
        sentences = data.split_sentences(paragraph.text)
        if len(sentences) < 2:
            continue
        rest = " ".join(sentences[1:])
        if len(rest.split()) >= min_continuation_words:
            examples.append(PromptExample(sentences[0], rest))
        if len(examples) >= offset + limit:
            break
    return examples[offset:offset + limit]


def load_causal_lm(settings: OpenLTGSettings, profile=None):
    """The AR baseline and perplexity judge: ``settings.causal_lm`` or the profile's own decoder (without the adapter)."""
    from ... import models, profiles

    profile = profile or profiles.current()
    if settings.causal_lm:  # a small judge such as GPT-2: never quantised
        return models.load_model(settings.causal_lm, load_in_4bit=False)
    return models.load_model(profile.model_name)


# --------------------------------------------------------------------------- Table 6's systems (§5.3)

def ablation_configs(base: DecodeConfig) -> dict[str, DecodeConfig]:
    """Table 6's rows: Ours (LTD + DSWA), w/o DSWA, w/o LTD, w/o ALL, all with ``base``'s update rule,
    and Ours with the other update rule (SMART's update-all, §4.3, when ``base`` updates masked positions only)."""
    rows = {"Ours": base, "w/o DSWA": replace(base, dswa=False), "w/o LTD": replace(base, ltd=False),
            "w/o ALL": replace(base, dswa=False, ltd=False)}
    if not base.update_all:
        rows[SMART_ROW] = replace(base, update_all=True)
    return rows


def table6_generations(backend: MaskedLM, causal_model, causal_tokenizer, examples: Sequence[PromptExample],
                       settings: OpenLTGSettings, *, seed: int = 0) -> dict[str, list[str]]:
    """Every system of Table 6 on the same prompts, texts one per prompt: the four ablations and Ours with SMART's
    update-all (mask-predict), Ours with Eq. 3's last-layer prompt states (when ``settings.compare_source_states``),
    the AR baseline with the same sampler (T = 1, top-p, KV cache) and the human continuation cut to the same length."""
    prompts = [backend.encode(example.prompt, settings.max_prompt_tokens) for example in examples]
    decode = lambda ids: [backend.tokenizer.decode(row, skip_special_tokens=True).strip() for row in ids]
    configs = ablation_configs(settings.decode_config())
    if settings.compare_source_states:
        configs[LAST_LAYER_ROW] = replace(configs["Ours"], source_states="last-layer")
    systems = {name: decode(mask_predict_batched(backend, prompts, settings.target_length, config,
                                                 batch_size=settings.batch_size, seed=seed, desc=name))
               for name, config in configs.items()}
    causal_prompts = [torch.tensor(causal_tokenizer(example.prompt, add_special_tokens=False).input_ids[-settings.max_prompt_tokens:])
                      for example in examples]
    ar = autoregressive_batched(causal_model, causal_prompts, settings.target_length, batch_size=settings.batch_size,
                                desc="AR", seed=seed, top_p=settings.top_p, banned_ids=causal_tokenizer.all_special_ids,
                                pad_id=causal_tokenizer.pad_token_id)
    systems[AR_ROW] = [causal_tokenizer.decode(row, skip_special_tokens=True).strip() for row in ar]
    truth = [backend.tokenizer(example.continuation, add_special_tokens=False).input_ids[:settings.target_length]
             for example in examples]
    systems[TRUTH_ROW] = decode(truth)
    return systems


def table6_draws(backend: MaskedLM, causal_model, causal_tokenizer, examples: Sequence[PromptExample],
                 settings: OpenLTGSettings, profile) -> list[dict[str, list[str]]]:
    """Table 6's systems sampled ``settings.draws`` times on the same prompts (:func:`table6_generations`, draw ``d``
    from ``settings.draw_seeds()[d]``), each draw saved to the run folder (:func:`save_generations`): one dict of
    texts per draw. Draw 0 samples from ``settings.seed``, as a one-draw evaluation does."""
    draws = []
    for draw, draw_seed in enumerate(settings.draw_seeds()):
        systems = table6_generations(backend, causal_model, causal_tokenizer, examples, settings, seed=draw_seed)
        save_generations(examples, systems, settings, profile, seed=settings.seed, draw=draw)
        draws.append(systems)
    return draws


@dataclass(frozen=True)
class GenerationsKey:
    """What changes :func:`table6_generations`' texts besides the evaluation's size; their run folder is keyed by it.
    The size (how many prompts, how many sampling draws) names a file in that folder instead
    (:func:`save_generations`), so a larger evaluation finds the same folder."""

    profile: str  # the profile's decoder and notebook 02's MNTP recipe (the masked LM when it is "mntp")
    dtype: str  # the weights' dtype (models.weight_dtype_name)
    masked_lm: str
    causal_lm: str  # the AR baseline: settings.causal_lm, else the profile's decoder
    prompts: str
    corpus: str
    max_prompt_tokens: int
    target_length: int
    batch_size: int  # each batch of prompts decodes from its own seed
    decoding: DecodeConfig  # Ours; the other rows are ablation_configs of it
    compare_source_states: bool
    seed: int

    @classmethod
    def of(cls, settings: OpenLTGSettings, profile, *, seed: int) -> "GenerationsKey":
        return cls(profile=profile.name, dtype=models.weight_dtype_name(profile), masked_lm=settings.masked_lm,
                   causal_lm=settings.causal_lm or profile.model_name,
                   prompts=settings.prompts, corpus=profile.corpus,
                   max_prompt_tokens=settings.max_prompt_tokens, target_length=settings.target_length,
                   batch_size=settings.batch_size, decoding=settings.decode_config(),
                   compare_source_states=settings.compare_source_states, seed=seed)


def save_generations(examples: Sequence[PromptExample], systems: dict[str, Sequence[str]], settings: OpenLTGSettings,
                     profile, *, seed: int, draw: int = 0) -> Path:
    """Write every system's texts of sampling draw ``draw`` to
    ``runs/05_ablation_<fingerprint>/generations_<n>prompts_draw<draw>.jsonl`` (one line per prompt), the folder keyed
    by :class:`GenerationsKey` (:func:`helpers.store.reuse_run`), so tables can be redrawn and another setting never
    overwrites them. The evaluation's size (``n`` = the number of prompts, the draw) names the file, not the folder:
    the last batch of prompts samples differently when there are more prompts, so each size keeps its own file."""
    draw = whole_number(draw, "draw", 0, "the sampling draw's index")
    run = store.reuse_run(GENERATIONS_RUN, GenerationsKey.of(settings, profile, seed=seed))
    path = run.path / f"generations_{len(examples)}prompts_draw{draw}.jsonl"
    with store.atomic_write(path) as handle:
        for index, example in enumerate(examples):
            line = {"prompt": example.prompt, **{name: texts[index] for name, texts in systems.items()}}
            handle.write(json.dumps(line) + "\n")
    return path


# --------------------------------------------------------------------------- Fig. 2 and Fig. 4 quantities

def is_function_word(text: str) -> bool:
    """Stop words (spaCy's English list) and tokens without a letter or digit (punctuation, spaces)."""
    from spacy.lang.en.stop_words import STOP_WORDS

    stripped = text.strip().lower()
    return not any(ch.isalnum() for ch in stripped) or stripped in STOP_WORDS


def function_word_share(tokenizer, logits: torch.Tensor, *, temperature: float = 1.0, top_k: int = 50) -> float:
    """Share of the probability mass of the ``top_k`` candidates that falls on function words (seed 002 §3.3, Fig. 2)."""
    temperature = check_positive(temperature, "temperature", "the softmax temperature")
    whole_number(top_k, "top_k")
    probs = torch.softmax(logits.float() / temperature, -1)
    values, ids = probs.topk(top_k)
    function = torch.tensor([is_function_word(tokenizer.decode([i])) for i in ids.tolist()])
    return float(values[function].sum() / values.sum())


def entropy(logits: torch.Tensor, temperature: float = 1.0) -> float:
    """Entropy (nats) of ``softmax(logits / temperature)``."""
    temperature = check_positive(temperature, "temperature", "the softmax temperature")
    log_probs = torch.log_softmax(logits.float() / temperature, -1)
    probs = log_probs.exp()
    return float(-(probs * torch.where(probs > 0, log_probs, torch.zeros_like(log_probs))).sum())


def ltd_entropies(decoded, row: int = 0) -> list[dict]:
    """Per iteration at the probe position: temperature, entropy with LTD and at T = 1 (Fig. 4 in numbers)."""
    if decoded.config.probe_position is None:
        raise ValueError("decoded has no probe logits; decode with DecodeConfig(probe_position=...)")
    return [{"step": it.step, "temperature": it.temperature, "entropy_ltd": entropy(it.probe_logits[row], it.temperature),
             "entropy_t1": entropy(it.probe_logits[row], 1.0)} for it in decoded.trace]


# --------------------------------------------------------------------------- speed (Fig. 5)

def decoding_speed(backend: MaskedLM, causal_model, prompt: torch.Tensor, lengths: Sequence[int],
                   iterations: Sequence[int], config: DecodeConfig = DecodeConfig(), *, repeats: int = 1,
                   seeds: Sequence[int] = (0,), extra: dict[str, DecodeConfig] | None = None,
                   processes: int = 1) -> list[dict]:
    """Tokens/s at batch 1 (Fig. 5): mask-predict for each T in ``iterations`` and AR with a KV cache, per target length.

    One trial per sampling seed in ``seeds``: within it every setting runs ``repeats`` times (after one warm-up) and
    the fastest repeat counts, the settings taking turns (:func:`helpers.metrics.interleaved_timings`), so drift hits
    them alike and the ratios compare like with like. ``processes`` = 1 times in this process; more repeat the same
    trials in that many fresh processes, one after another (:func:`helpers.workers.in_fresh_processes`, the models
    sent to each), so the ratios' intervals can cover run-to-run variance (:func:`speed_ratio_runs`). ``extra`` adds named
    mask-predict variants at T = ``config.iterations`` (e.g. the prompt recomputed every iteration). One row per
    setting, process and seed.
    """
    from ... import workers

    repeats = whole_number(repeats, "repeats", 1, "timed runs per setting")
    processes = whole_number(processes, "processes", 1, "processes the timing trials repeat in")
    seeds = [whole_number(seed, "seeds", 0, "a sampling seed per trial") for seed in seeds]
    if not seeds:
        raise ValueError("seeds is empty; give one sampling seed per timing trial")
    prompt = check_prompts(prompt)[:1]
    for value in iterations:
        check_iterations(value)
    lengths = [check_length(value, "lengths") for value in lengths]
    check_fits(backend, prompt, max(lengths))
    variants = {"mask-predict": None, **(extra or {})}
    settings = [(length, 0, "AR") for length in lengths]
    settings += [(length, steps, "mask-predict") for length in lengths for steps in iterations]
    settings += [(length, config.iterations, name) for length in lengths for name in variants if name != "mask-predict"]
    arguments = (backend, causal_model, prompt, settings, config, variants, seeds, repeats)
    runs = workers.in_fresh_processes(_timed_decodes, arguments, processes, progress=True,
                                      models=(backend.model, causal_model))
    rows = []
    for process, milliseconds in enumerate(runs):
        for (length, steps, variant), per_seed in milliseconds.items():
            for seed, elapsed in zip(seeds, per_seed):
                seconds = elapsed / 1000
                rows.append({"method": variant, "iterations": steps, "length": length, "process": process,
                             "seed": seed, "seconds": seconds, "tokens_per_s": length / seconds})
    return rows


def _timed_decodes(backend: MaskedLM, causal_model, prompt: torch.Tensor, settings: list, config: DecodeConfig,
                   variants: dict, seeds: list, repeats: int, progress: bool = False) -> dict:
    """Milliseconds per ``(length, T, variant)`` setting and seed, the settings taking turns on every seed
    (:func:`helpers.metrics.interleaved_timings`). Runs in whichever process calls it."""
    def job(length: int, steps: int, variant: str):
        if steps == 0:
            return lambda run_seed: autoregressive_generate(causal_model, prompt, length, top_p=config.top_p,
                                                            banned_ids=backend.banned_ids, seed=run_seed)
        chosen = replace(variants[variant] or config, iterations=steps)
        return lambda run_seed: mask_predict(backend, prompt, length, chosen, seed=run_seed)

    synchronize = torch.cuda.synchronize if backend.device.type == "cuda" else None
    return metrics.interleaved_timings({setting: job(*setting) for setting in settings}, list(seeds), rounds=repeats,
                                       best=True, synchronize=synchronize, progress=progress, per_input=True)


def speed_ratios(rows: list[dict], method: str = "mask-predict"):
    """``method``'s tokens/s divided by AR tokens/s at the same length, process and seed (one trial), median over
    the trials: one row per T, one column per length."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    for column in ("seed", "process"):
        if column not in frame:
            frame[column] = 0
    ar = frame[frame.method == "AR"].set_index(["length", "process", "seed"])["tokens_per_s"]
    nar = frame[frame.method == method].set_index(["length", "process", "seed"])
    nar = nar.assign(ratio=nar["tokens_per_s"] / ar.reindex(nar.index).values).reset_index()
    table = nar.groupby(["iterations", "length"])["ratio"].median().unstack("length")
    return table.rename(index=lambda t: f"T={t}")


def speed_ratio_samples(rows: list[dict], iterations: int, length: int, method: str = "mask-predict") -> list[float]:
    """Per trial (process and seed), ``method``'s tokens/s at (T, length) over AR's at the same length and trial."""
    return [ratio for trials in speed_ratio_runs(rows, iterations, length, method) for ratio in trials]


def speed_ratio_runs(rows: list[dict], iterations: int, length: int,
                     method: str = "mask-predict") -> tuple[tuple[float, ...], ...]:
    """Per process (rows without one are process 0), the tuple of its trials' ratios, each ``method``'s tokens/s at
    (T, length) over AR's at the same length in the same trial (seed): the samples behind an interval with the
    trials nested in the processes (:func:`helpers.metrics.trials_in_processes_interval`)."""
    by = {(row["method"], row["iterations"], row["length"], row.get("process", 0), row.get("seed", 0)):
          row["tokens_per_s"] for row in rows}
    trials = sorted({key[3:] for key in by if key[0] == "AR" and key[2] == length})
    if not trials:
        raise ValueError(f"rows hold no AR timing at length={length!r}")
    missing = [trial for trial in trials if (method, iterations, length, *trial) not in by]
    if missing:
        raise ValueError(f"rows hold no {method!r} timing at iterations={iterations!r}, length={length!r} for the "
                         f"(process, seed) trials {missing}")
    processes = sorted({process for process, _ in trials})
    return tuple(tuple(by[(method, iterations, length, process, seed)] / by[("AR", 0, length, process, seed)]
                       for trial_process, seed in trials if trial_process == process) for process in processes)
