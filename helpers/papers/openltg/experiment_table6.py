"""Table 6 scored (OpenLTG §5.1, §5.3): B-1 and R-L against the human continuations, LR-n, D-4 and the perplexity
of the continuation under a causal judge, each cell with a 95% bootstrap interval over prompts, and paired
differences between systems on the same prompts.

The paper's metrics (§5.1): corpus BLEU-1 (``sacrebleu``), ROUGE-L F1 (``rouge-score``), LR-n (the share of texts with
a 4-gram repeated at least n times; LR-2 for ROC, LR-5 for WP), Distinct-4 and PPL under GPT-2.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ... import metrics, models
from ...checks import whole_number
from ...padding import padded

_WORDS = re.compile(r"\w+|[^\w\s]")


def words(text: str) -> list[str]:
    """Lower-cased words and punctuation marks: the units LR-n, Rep-n and Distinct-n count."""
    return _WORDS.findall(text.lower())


@torch.inference_mode()
def continuation_nlls(model, tokenizer, prompts: Sequence[str], continuations: Sequence[str], *, batch_size: int = 8,
                      desc: str = "perplexity") -> list[tuple[float, int]]:
    """Per prompt: the summed negative log-likelihood of the continuation given the prompt under a causal LM, and
    its token count. The LM head runs only at the positions that predict continuation tokens."""
    if len(prompts) != len(continuations):
        raise ValueError(f"prompts has {len(prompts)} texts but continuations has {len(continuations)}")
    batch_size = whole_number(batch_size, "batch_size", 1, "texts per batch")
    device = next(model.parameters()).device
    limit = models.max_positions(model)
    body = models.decoder_body(model)
    head = model.get_output_embeddings()
    out: list[tuple[float, int]] = []
    for index in tqdm(range(0, len(prompts), batch_size), desc=desc):
        pairs = []
        for prompt, continuation in zip(prompts[index:index + batch_size], continuations[index:index + batch_size]):
            source = tokenizer(prompt, add_special_tokens=False).input_ids
            target = tokenizer(" " + continuation.strip(), add_special_tokens=False).input_ids if continuation.strip() else []
            if not source:
                source = [tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id]
            pairs.append((source, target[:limit - len(source)]))
        ids, padding = padded([source + target for source, target in pairs], tokenizer.pad_token_id)
        targets, _ = padded([[-100] * len(source) + target for source, target in pairs], -100)
        rows, cols = (targets[:, 1:] != -100).nonzero(as_tuple=True)
        sums = torch.zeros(len(pairs), dtype=torch.float64)
        if rows.numel():
            hidden = body(input_ids=ids.to(device), attention_mask=padding.to(device)).last_hidden_state
            logits = head(hidden[rows.to(device), cols.to(device)]).float()
            gold = targets[:, 1:][rows, cols].to(device)
            losses = torch.nn.functional.cross_entropy(logits, gold, reduction="none").double().cpu()
            sums.index_add_(0, rows, losses)
        out.extend((float(total), len(target)) for total, (_, target) in zip(sums, pairs))
    return out


def continuation_nll(model, tokenizer, prompts: Sequence[str], continuations: Sequence[str], *, batch_size: int = 8,
                     desc: str = "perplexity") -> tuple[float, int]:
    """Summed negative log-likelihood of every continuation given its prompt, and the token count (:func:`continuation_nlls`)."""
    pairs = continuation_nlls(model, tokenizer, prompts, continuations, batch_size=batch_size, desc=desc)
    return sum(total for total, _ in pairs), sum(count for _, count in pairs)


def bleu1_statistics(hypothesis: str, reference: str) -> tuple[int, int, int, int]:
    """sacrebleu's sufficient statistics for BLEU-1 of one text (13a tokens, lower-cased): clipped unigram
    matches, hypothesis unigrams, hypothesis length, reference length. Summed over texts they give corpus BLEU-1."""
    from sacrebleu.metrics import BLEU

    score = BLEU(max_ngram_order=1, lowercase=True).corpus_score([hypothesis], [[reference]])
    return int(score.counts[0]), int(score.totals[0]), int(score.sys_len), int(score.ref_len)


def corpus_bleu1(statistics: Sequence[tuple[int, int, int, int]]) -> float:
    """Corpus BLEU-1 (percent) from summed :func:`bleu1_statistics`: brevity penalty × clipped unigram precision."""
    matches, total, hypothesis_length, reference_length = (sum(column) for column in zip(*statistics))
    if total == 0:
        return 0.0
    brevity = 1.0 if hypothesis_length > reference_length else math.exp(1 - reference_length / max(hypothesis_length, 1))
    return 100 * brevity * matches / total


@functools.lru_cache(maxsize=1)
def _rouge_l_scorer():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"])


def rouge_l(hypothesis: str, reference: str) -> float:
    """ROUGE-L F1 (percent) of one text against its reference, from Google's ``rouge-score``."""
    return 100 * _rouge_l_scorer().score(reference, hypothesis)["rougeL"].fmeasure


@dataclass
class Table6Scores:
    """Table 6 with error bars: each cell's value, its 95% bootstrap interval over prompts, and the per-prompt
    quantities behind it (for paired comparisons). ``values``/``low``/``high`` are systems × metrics tables."""

    values: object
    low: object
    high: object
    per_prompt: dict
    n: int
    lr_n: int
    resamples: int
    draws: int = 1  # sampling draws per prompt, averaged within each prompt (pool_draws)

    @property
    def interval_method(self) -> str:
        """How a paired interval of these scores is computed, in words, with n."""
        if self.draws == 1:
            return f"paired bootstrap over {self.n} prompts"
        return f"paired bootstrap over {self.n} prompts × {self.draws} sampling draws (draws averaged per prompt)"

    def cell(self, system: str, metric: str) -> str:
        return (f"{self.values.loc[system, metric]:.1f} [{self.low.loc[system, metric]:.1f}, "
                f"{self.high.loc[system, metric]:.1f}]")

    def display(self):
        """One string per cell, ``value [low, high]``."""
        return self.values.apply(lambda column: [self.cell(system, column.name) if np.isfinite(self.values.loc[system, column.name])
                                                 else "—" for system in self.values.index])


def _table6_statistics(lr_n: int) -> dict:
    """Each metric as a statistic of a list of per-prompt records (so the bootstrap resamples prompts)."""
    return {"B-1": lambda sample: corpus_bleu1([record["bleu1"] for record in sample]),
            "R-L": lambda sample: float(np.mean([record["rouge_l"] for record in sample])),
            f"LR-{lr_n}": lambda sample: 100 * float(np.mean([record["lr"] for record in sample])),
            "D-4": lambda sample: 100 * float(np.mean([record["distinct4"] for record in sample])),
            "PPL": lambda sample: math.exp(sum(r["nll"] for r in sample) / max(sum(r["tokens"] for r in sample), 1))}


def evaluate_generations(systems: dict[str, Sequence[str]], prompts: Sequence[str], judge, judge_tokenizer, *,
                         references: Sequence[str], lr_n: int = 5, batch_size: int = 8, resamples: int = 1000,
                         seed: int = 0) -> Table6Scores:
    """Table 6 for our runs, one row per system: B-1 (corpus BLEU-1, sacrebleu) and R-L (ROUGE-L F1, rouge-score)
    against ``references`` (the human continuations), LR-n, D-4 (percent) and the perplexity of the continuation
    given the prompt under the causal ``judge``. Every cell gets a 95% percentile-bootstrap interval over prompts
    (:func:`helpers.metrics.bootstrap_interval`, ``resamples`` draws). D-4 is each text's distinct 4-grams over its
    4-grams, averaged over prompts (= 100 - MAGNET's Rep-4): the corpus-level ratio changes with the number of
    texts, so resampling prompts (duplicates included) would bias its interval. The references themselves
    ("Ground truth") get no B-1/R-L."""
    per_prompt, reference_systems = generation_records(systems, prompts, judge, judge_tokenizer, references=references,
                                                       lr_n=lr_n, batch_size=batch_size)
    return table6_scores(per_prompt, lr_n=lr_n, resamples=resamples, seed=seed, references=reference_systems)


def evaluate_draws(draws: Sequence[dict[str, Sequence[str]]], prompts: Sequence[str], judge, judge_tokenizer, *,
                   references: Sequence[str], lr_n: int = 5, batch_size: int = 8, resamples: int = 1000,
                   seed: int = 0) -> Table6Scores:
    """Table 6 over several sampling draws of every system on the same prompts (``draws[d][system]``, one text per
    prompt): every draw of every prompt is scored as :func:`evaluate_generations` scores one, the draws are pooled per
    prompt (:func:`pool_draws`), and the bootstrap resamples prompts, each carrying the mean of its draws (draws nested
    in prompts). A system whose texts are the same in every draw (the human text) is scored once."""
    if not draws:
        raise ValueError("draws is empty; give the texts of at least one sampling draw")
    records, reference_systems = [], []
    for index, systems in enumerate(draws):
        same = {name for name, texts in systems.items() if index and name in draws[0] and list(texts) == list(draws[0][name])}
        fresh = {name: texts for name, texts in systems.items() if name not in same}
        per_prompt, references_here = generation_records(fresh, prompts, judge, judge_tokenizer, references=references,
                                                         lr_n=lr_n, batch_size=batch_size) if fresh else ({}, [])
        records.append({name: per_prompt[name] if name in per_prompt else records[0][name] for name in systems})
        reference_systems += [name for name in references_here if name not in reference_systems]
    scores = table6_scores(pool_draws(records), lr_n=lr_n, resamples=resamples, seed=seed, references=reference_systems)
    scores.draws = len(draws)
    return scores


def generation_records(systems: dict[str, Sequence[str]], prompts: Sequence[str], judge, judge_tokenizer, *,
                       references: Sequence[str], lr_n: int = 5, batch_size: int = 8) -> tuple[dict, list[str]]:
    """Per system, one record per prompt (BLEU-1 statistics and ROUGE-L against ``references``, LR-``lr_n``, D-4, the
    continuation's NLL and token count under ``judge``: :func:`evaluate_generations`' cells before the bootstrap), and
    the systems whose texts are the references themselves."""
    if len(references) != len(prompts):
        raise ValueError(f"references has {len(references)} texts but there are {len(prompts)} prompts")
    per_prompt, reference_systems = {}, []
    for name, texts in systems.items():
        if len(texts) != len(prompts):
            raise ValueError(f"systems[{name!r}] has {len(texts)} texts but there are {len(prompts)} prompts")
        nlls = continuation_nlls(judge, judge_tokenizer, prompts, texts, batch_size=batch_size, desc=f"PPL {name}")
        if sum(count for _, count in nlls) == 0:
            raise ValueError(f"systems[{name!r}] holds only empty texts; there is nothing to score")
        if list(texts) == list(references):
            reference_systems.append(name)
        records = []
        for text, reference, (nll, count) in zip(texts, references, nlls):
            units = words(text)
            records.append({"bleu1": bleu1_statistics(text, reference), "rouge_l": rouge_l(text, reference),
                            "lr": metrics.lexical_repetition([units], n=lr_n, gram=4),
                            "distinct4": metrics.distinct_n([units], 4), "nll": nll, "tokens": count})
        per_prompt[name] = records
    return per_prompt, reference_systems


def pool_draws(draws: Sequence[dict[str, list[dict]]]) -> dict[str, list[dict]]:
    """Per system and prompt, one record pooling that prompt's sampling draws (``draws[d][system][prompt]``, each a
    record of :func:`evaluate_generations`): BLEU-1 statistics, NLL and tokens summed, ROUGE-L, LR and D-4 averaged.

    Draws are nested in prompts: the bootstrap of :func:`table6_scores` then resamples prompts, each carrying the mean
    of its draws, so the interval holds the prompts' spread and the sampling noise left after averaging D draws
    (var = var_prompts / n + var_draws / (n D)) without counting a draw as another prompt. One draw: the records
    themselves."""
    if not draws:
        raise ValueError("draws is empty; give the records of at least one sampling draw")
    systems = set(draws[0])
    if any(set(draw) != systems for draw in draws):
        raise ValueError(f"every draw must score the same systems; got {[sorted(draw) for draw in draws]}")
    pooled = {}
    for system in draws[0]:
        lengths = {len(draw[system]) for draw in draws}
        if len(lengths) != 1:
            raise ValueError(f"draws of system {system!r} hold different numbers of prompts: {sorted(lengths)}")
        pooled[system] = []
        for records in zip(*(draw[system] for draw in draws)):
            count = len(records)
            pooled[system].append({
                "bleu1": tuple(int(sum(column)) for column in zip(*(record["bleu1"] for record in records))),
                "rouge_l": sum(record["rouge_l"] for record in records) / count,
                "lr": sum(record["lr"] for record in records) / count,
                "distinct4": sum(record["distinct4"] for record in records) / count,
                "nll": sum(record["nll"] for record in records), "tokens": sum(record["tokens"] for record in records)})
    return pooled


def table6_scores(per_prompt: dict[str, list[dict]], *, lr_n: int, resamples: int = 1000, seed: int = 0,
                  references: Sequence[str] = ()) -> Table6Scores:
    """Table 6 from per-prompt records (one dict per prompt and system: ``bleu1`` statistics, ``rouge_l``, ``lr``
    (0/1), ``distinct4``, ``nll`` and ``tokens``): every metric with its 95% bootstrap interval over prompts. The
    systems named in ``references`` (the human text itself) get no B-1/R-L."""
    import pandas as pd

    statistics = _table6_statistics(lr_n)
    counts = {name: len(records) for name, records in per_prompt.items()}
    if not counts or len(set(counts.values())) != 1 or 0 in counts.values():
        raise ValueError(f"per_prompt must hold the same, non-zero number of prompts for every system; got {counts}")
    values, low, high = {}, {}, {}
    for name, records in per_prompt.items():
        values[name], low[name], high[name] = {}, {}, {}
        for metric, statistic in statistics.items():
            if name in references and metric in ("B-1", "R-L"):
                values[name][metric] = low[name][metric] = high[name][metric] = float("nan")
                continue
            values[name][metric], low[name][metric], high[name][metric] = metrics.bootstrap_interval(
                records, statistic, resamples=resamples, seed=seed)
    frame = lambda table: pd.DataFrame(table).T
    return Table6Scores(frame(values), frame(low), frame(high), dict(per_prompt), next(iter(counts.values())), lr_n,
                        resamples)


def paired_metric_difference(scores: Table6Scores, first: str, second: str, metric: str, *, seed: int = 0):
    """``(value, low, high)``: ``metric(first) - metric(second)`` over the same prompts, with a paired bootstrap
    (each resample draws the same prompts for both systems)."""
    statistic = _table6_statistics(scores.lr_n)[metric]
    pairs = list(zip(scores.per_prompt[first], scores.per_prompt[second]))
    return metrics.bootstrap_interval(pairs, lambda sample: statistic([a for a, _ in sample]) - statistic([b for _, b in sample]),
                                      resamples=scores.resamples, seed=seed)
