"""Metrics shared by the notebooks: repetition and diversity of generations, accuracy@k, seqeval F1, CIs."""
from __future__ import annotations

import math
import numbers
from collections import Counter
from typing import Hashable, Sequence

from .checks import whole_number
from .curves import (STOP_MIN_POINTS, STOP_TOLERANCE, STOP_WINDOW, Stopping, curve_points,  # noqa: F401 (read as metrics.*)
                     evaluation_steps, gap_stopped, mean_curve, plateau, points_in_window,
                     stopped_improving)


def ngrams(tokens: Sequence[Hashable], n: int) -> list[tuple]:
    n = whole_number(n, "n")
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def rep_n(tokens: Sequence[Hashable], n: int = 4) -> float:
    """MAGNET §4.4: ``Rep-n = 1.0 - |unique n-grams| / |n-grams|`` of one generation (0 when it has no n-gram)."""
    grams = ngrams(tokens, n)
    return 0.0 if not grams else 1.0 - len(set(grams)) / len(grams)


def rep_sen(sentences: Sequence[str]) -> float:
    """MAGNET §4.4: ``Rep-Sen = 1.0 - |unique sentences| / |sentences|`` (sentences compared after stripping)."""
    if isinstance(sentences, str) or not all(isinstance(sentence, str) for sentence in sentences):
        raise ValueError(f"sentences={str(sentences)[:60]!r} must be a list of sentence strings (one generation split "
                         "into sentences), not a single string")
    cleaned = [sentence.strip() for sentence in sentences if sentence.strip()]
    return 0.0 if not cleaned else 1.0 - len(set(cleaned)) / len(cleaned)


def distinct_n(token_lists: Sequence[Sequence[Hashable]], n: int = 4) -> float:
    """Distinct-n over a set of generations: unique n-grams / all n-grams (OpenLTG's D-4 with n = 4)."""
    if isinstance(token_lists, str) or not token_lists:
        raise ValueError(f"token_lists={str(token_lists)[:60]!r} must be a non-empty list of generations, each a list "
                         "of tokens")
    grams = [gram for tokens in token_lists for gram in ngrams(tokens, n)]
    return 0.0 if not grams else len(set(grams)) / len(grams)


def lexical_repetition(token_lists: Sequence[Sequence[Hashable]], n: int = 2, gram: int = 4) -> float:
    """OpenLTG LR-n (after Shao et al., 2019): the share of texts in which some ``gram``-gram occurs at least ``n`` times."""
    whole_number(n, "n")
    if not token_lists:
        raise ValueError("token_lists is empty; LR-n needs at least one text")
    repeated = sum(1 for tokens in token_lists if any(count >= n for count in Counter(ngrams(tokens, gram)).values()))
    return repeated / len(token_lists)


def accuracy_at_k(ranked: Sequence[Sequence[Hashable]], gold: Sequence[Hashable], ks: Sequence[int] = (1, 3, 5, 10, 50)) -> dict[int, float]:
    """Share of examples whose gold answer is among the first k ranked predictions, for each k (EMAT Tables 2-3)."""
    if len(ranked) != len(gold):
        raise ValueError(f"ranked has {len(ranked)} examples but gold has {len(gold)}")
    if not gold:
        raise ValueError("gold is empty; accuracy@k needs at least one example")
    for k in ks:
        whole_number(k, "k")
    return {int(k): sum(answer in list(predictions)[:k] for predictions, answer in zip(ranked, gold)) / len(gold) for k in ks}


def _check_tag_sequences(true_tags, pred_tags, iob2: bool = False) -> None:
    """Two equally long lists of equally long tag sequences (of strings; IOB2 "O", "B-X", "I-X" with ``iob2``)."""
    for name, tags in (("true_tags", true_tags), ("pred_tags", pred_tags)):
        if isinstance(tags, str) or not isinstance(tags, Sequence):
            raise ValueError(f"{name}={tags!r} must be a list of tag sequences, one per sentence")
    if not true_tags:
        raise ValueError("true_tags is empty; there are no sentences to score")
    if len(true_tags) != len(pred_tags):
        raise ValueError(f"pred_tags has {len(pred_tags)} sentences but true_tags has {len(true_tags)}")
    for index, (truth, prediction) in enumerate(zip(true_tags, pred_tags)):
        for name, tags in (("true_tags", truth), ("pred_tags", prediction)):
            if isinstance(tags, str) or not isinstance(tags, Sequence):
                raise ValueError(f"{name}[{index}]={tags!r} must be a sequence of tags (strings)")
            for position, tag in enumerate(tags):
                if not isinstance(tag, str) or (iob2 and not (tag == "O" or tag[:2] in ("B-", "I-") and len(tag) > 2)):
                    expected = "an IOB2 tag: 'O', 'B-<type>' or 'I-<type>'" if iob2 else "a string"
                    raise ValueError(f"{name}[{index}][{position}]={tag!r} is not {expected}")
        if len(truth) != len(prediction):
            raise ValueError(f"pred_tags[{index}] has {len(prediction)} tags but true_tags[{index}] has {len(truth)}")


def seqeval_f1(true_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]]) -> float:
    """Entity-level micro F1 over IOB2 tag sequences (seqeval, strict IOB2 scheme)."""
    from seqeval.metrics import f1_score
    from seqeval.scheme import IOB2

    _check_tag_sequences(true_tags, pred_tags, iob2=True)
    return float(f1_score([list(t) for t in true_tags], [list(p) for p in pred_tags], average="micro", mode="strict", scheme=IOB2))


def token_accuracy(true_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]]) -> float:
    """Share of tokens tagged correctly (POS tagging)."""
    _check_tag_sequences(true_tags, pred_tags)
    pairs = [(t, p) for truth, prediction in zip(true_tags, pred_tags) for t, p in zip(truth, prediction)]
    if not pairs:
        raise ValueError("no tokens to score")
    return sum(t == p for t, p in pairs) / len(pairs)


def mean_ci95(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Mean and the half-width of its 95% Student-t interval (NaN for a single value: one seed has no interval);
    ``level`` reads it at another two-sided level (a sequential study's nominal level)."""
    if len(values) == 0:
        raise ValueError("values is empty")
    if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        raise ValueError(f"values={list(values)[:8]!r} must all be finite numbers (a nan or inf would give a nan interval)")
    mean = sum(values) / len(values)
    if len(values) == 1:
        return float(mean), math.nan
    from scipy.stats import t

    variance = sum((value - mean) ** 2 for value in values) / (len(values) - 1)
    return float(mean), float(t.ppf((1 + level) / 2, len(values) - 1) * math.sqrt(variance / len(values)))


def format_mean_ci(mean: float, half: float, decimals: int = 1) -> str:
    """``"53.5 ± 1.2"``; ``"53.5 ± n/a"`` where there is no interval (a single seed), never ``"± 0.0"``."""
    spread = "n/a" if half is None or math.isnan(half) else f"{half:.{decimals}f}"
    return f"{mean:.{decimals}f} ± {spread}"


def interleaved_timings(jobs: dict, inputs: Sequence, rounds: int = 2, best: bool = True, synchronize=None,
                        progress: bool = False, per_input: bool = False) -> dict:
    """Per job, the median over ``inputs`` of milliseconds per call, the jobs taking turns on every input.

    Taking turns spreads any drift of a shared machine over all jobs alike, so their ratios stay fair. With
    ``best`` each input counts with the fastest of its ``rounds`` repeats (interference only ever adds time);
    without it, with their median. ``synchronize`` (e.g. ``torch.cuda.synchronize``) runs around each call.
    With ``per_input`` each job maps to its list of per-input milliseconds instead of their median.
    """
    import statistics
    import time

    from tqdm.auto import tqdm

    if not jobs:
        raise ValueError("jobs is empty; nothing to time")
    if not inputs:
        raise ValueError("inputs is empty; nothing to time")
    rounds = whole_number(rounds, "rounds")
    wait = synchronize or (lambda: None)
    samples = {name: [[] for _ in inputs] for name in jobs}
    for job in jobs.values():
        job(inputs[0])  # warm-up
    with tqdm(total=rounds * len(inputs) * len(jobs), desc="timing", disable=not progress) as bar:
        for _ in range(rounds):
            for index, item in enumerate(inputs):
                for name, job in jobs.items():
                    wait()
                    started = time.perf_counter()
                    job(item)
                    wait()
                    samples[name][index].append(1000 * (time.perf_counter() - started))
                    bar.update()
    reduce = min if best else statistics.median
    if per_input:
        return {name: [float(reduce(repeats)) for repeats in inputs_] for name, inputs_ in samples.items()}
    return {name: float(statistics.median(reduce(repeats) for repeats in inputs_)) for name, inputs_ in samples.items()}


def bootstrap_interval(examples: Sequence, statistic=None, *, resamples: int = 2000, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float, float]:
    """``(value, low, high)``: ``statistic`` over all ``examples`` and its percentile-bootstrap interval.

    ``examples`` are resampled with replacement ``resamples`` times (fixed ``seed``); ``statistic`` maps a list of
    examples to a number (default: their mean). For a paired comparison pass pairs and a statistic of the pairs,
    e.g. ``lambda pairs: mean(a - b for a, b in pairs)``, so both sides see the same resampled examples.
    """
    import numpy as np

    examples = list(examples)
    if not examples:
        raise ValueError("examples is empty; a bootstrap needs at least one example")
    resamples = whole_number(resamples, "resamples")
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level={level!r} must lie in (0, 1)")
    statistic = statistic or (lambda sample: float(np.mean(sample)))
    value = float(statistic(examples))
    if not math.isfinite(value):
        raise ValueError(f"statistic over all {len(examples)} examples is {value}; it must be finite")
    generator = np.random.default_rng(seed)
    draws = generator.integers(0, len(examples), size=(resamples, len(examples)))
    replicates = np.array([statistic([examples[index] for index in row]) for row in draws], dtype=float)
    tail = (1 - level) / 2
    low, high = np.quantile(replicates, [tail, 1 - tail])
    return value, float(low), float(high)


def paired_difference_interval(first: Sequence[float], second: Sequence[float], **bootstrap) -> tuple[float, float, float]:
    """Mean of ``first - second`` over paired examples and its bootstrap interval (:func:`bootstrap_interval`)."""
    if len(first) != len(second):
        raise ValueError(f"first has {len(first)} values but second has {len(second)}; a paired comparison needs equal lengths")
    return bootstrap_interval([a - b for a, b in zip(first, second)], **bootstrap)


def seed_interval(values: Sequence[float]) -> tuple[float, float | None, float | None]:
    """``(mean, low, high)`` of a per-seed quantity: the Student-t 95% interval, or ``(value, None, None)`` for a
    single seed (print it as "n/a", never as "± 0")."""
    mean, half = mean_ci95(values)
    if len(values) == 1:
        return mean, None, None
    return mean, mean - half, mean + half


def entity_counts(true_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]]) -> list[tuple[int, int, int]]:
    """Per sentence, ``(correct, predicted, gold)`` entity counts under seqeval's strict IOB2 scheme. Summed over
    any set of sentences they give that set's micro F1, ``2 · correct / (predicted + gold)`` (:func:`f1_from_counts`),
    so a bootstrap over sentences needs no re-parsing."""
    from seqeval.scheme import IOB2, Entities

    if len(true_tags) != len(pred_tags):
        raise ValueError(f"true_tags has {len(true_tags)} sentences but pred_tags has {len(pred_tags)}")
    counts = []
    for index, (truth, prediction) in enumerate(zip(true_tags, pred_tags)):
        if len(truth) != len(prediction):
            raise ValueError(f"sentence {index}: {len(truth)} true tags but {len(prediction)} predicted")
        gold = {entity.to_tuple()[1:] for entity in Entities([list(truth)], IOB2, suffix=False).entities[0]}
        guessed = {entity.to_tuple()[1:] for entity in Entities([list(prediction)], IOB2, suffix=False).entities[0]}
        counts.append((len(gold & guessed), len(guessed), len(gold)))
    return counts


def f1_from_counts(counts) -> float:
    """Micro F1 from summed ``(correct, predicted, gold)`` counts (0 when there is nothing to score)."""
    import numpy as np

    correct, predicted, gold = np.asarray(counts, dtype=float).reshape(-1, 3).sum(0)
    return 0.0 if predicted + gold == 0 else float(2 * correct / (predicted + gold))


def seeds_with_examples_interval(values: Sequence[float], example_halves: Sequence[float], level: float = 0.95
                                 ) -> tuple[float, float, float]:
    """``(mean, low, high)`` over training seeds, the test examples nested: the seed mean with half-width
    ``sqrt(h_seeds² + mean(h_i²))``.

    ``values[i]`` is seed i's estimate on the shared test examples and ``example_halves[i]`` the half-width of its own
    interval over those examples. ``h_seeds`` is the Student-t half-width of the seed mean (S - 1 degrees of freedom):
    the spread of training (initial weights, data order, dropout). Every seed scores the same examples, so their
    sampling error is common to all seeds and invisible in the seeds' spread; ``mean(h_i²)`` adds it back (it is at
    most the seed mean's share, equal when the seeds agree perfectly), so the interval does not understate it.
    With one seed, the interval is that seed's own (the examples only).

    ``level`` (a sequential study's nominal level, :class:`helpers.ledger.sequential.SequentialPlan`) reads both terms at it:
    the seeds' t quantile at ``(1 + level) / 2``, each example half-width (a 95% interval) scaled by
    ``z_{(1 + level)/2} / z_{0.975}``."""
    values, example_halves = [float(v) for v in values], [float(h) for h in example_halves]
    if len(values) != len(example_halves):
        raise ValueError(f"{len(values)} values but {len(example_halves)} example_halves; give one per seed")
    if any(not math.isfinite(h) or h < 0 for h in example_halves):
        raise ValueError(f"example_halves={example_halves!r} must be finite half-widths >= 0")
    if not 0 < level < 1:
        raise ValueError(f"level={level!r} must lie in (0, 1)")
    mean, seed_half = mean_ci95(values, level)
    example_half = math.sqrt(sum(h * h for h in example_halves) / len(example_halves))
    if level != 0.95:
        from scipy import stats

        example_half *= float(stats.norm.ppf((1 + level) / 2) / stats.norm.ppf(0.975))
    half = example_half if len(values) == 1 else math.sqrt(seed_half ** 2 + example_half ** 2)
    return mean, mean - half, mean + half


def multi_bootstrap_interval(scores, level: float = 0.95, *, resamples: int = 1000, seed: int = 0
                             ) -> tuple[float, float, float]:
    """``(mean, low, high)`` by the multi-bootstrap of MultiBERTs (Sellam et al., ICLR 2022, §3): each replicate
    draws the training seeds and the test examples with replacement, jointly (the same examples for every drawn seed,
    as every seed scored them), and takes the mean of that seeds-by-examples table; the interval is the replicates'
    percentiles at ``level``. ``scores[s][i]``: seed s's score on example i. The alternative to
    :func:`seeds_with_examples_interval`; with 3 to 8 seeds its percentiles understate the seeds' spread (a bootstrap
    over 3 values sees at most 3 distinct values), which the tests measure."""
    import numpy as np

    table = np.asarray(scores, dtype=float)
    if table.ndim != 2 or min(table.shape) < 1 or not np.isfinite(table).all():
        raise ValueError(f"scores has shape {table.shape}; give one finite row of example scores per seed")
    if not 0 < level < 1:
        raise ValueError(f"level={level!r} must lie in (0, 1)")
    seeds, examples = table.shape
    rng = np.random.default_rng(seed)
    seed_counts = np.stack([np.bincount(row, minlength=seeds) for row in rng.integers(0, seeds, (resamples, seeds))])
    example_counts = np.stack([np.bincount(row, minlength=examples)
                               for row in rng.integers(0, examples, (resamples, examples))])
    replicates = np.einsum("rs,se,re->r", seed_counts, table, example_counts) / (seeds * examples)
    low, high = np.quantile(replicates, [(1 - level) / 2, (1 + level) / 2])
    return float(table.mean()), float(low), float(high)


def trials_in_processes_interval(runs: Sequence[Sequence[float]], argument: str = "runs"
                                 ) -> tuple[float, float, float]:
    """``(mean, low, high)`` of a timing ratio measured in interleaved trials repeated in several processes, trials
    nested in processes: the mean of the process means with :func:`seeds_with_examples_interval` (the Student-t
    half-width over the process means, P - 1 degrees of freedom, combined in quadrature with the root-mean-square of
    each process's own t half-width over its trials). The process means carry the run-to-run variance; the trials'
    term keeps two processes that agree by chance from giving a too-narrow interval. One process: its trials' t
    interval alone. ``argument`` names the caller's argument in the error."""
    runs = [tuple(float(value) for value in trials) for trials in runs]
    if not runs or any(len(trials) < 2 for trials in runs):
        raise ValueError(f"{argument}={runs!r} must hold, for at least one process, at least 2 trials each")
    means = [sum(trials) / len(trials) for trials in runs]
    return seeds_with_examples_interval(means, [mean_ci95(trials)[1] for trials in runs])


def trials_in_processes_method(runs: Sequence[Sequence[float]]) -> str:
    """How :func:`trials_in_processes_interval` formed the interval of ``runs``, in words (a claims row's method):
    the trials per process (``10`` or, where processes differ, ``9/10``) and the number of processes."""
    trials = "/".join(str(count) for count in sorted({len(found) for found in runs}))
    if len(runs) == 1:
        return f"t over {trials} interleaved timing trials in one process"
    return (f"trials nested in processes: {trials} interleaved timing trials × {len(runs)} processes (t over process "
            "means, within-process trials added)")


# Test examples, passages, spans and prompts are drawn with this seed, never the study's: every study seed then scores
# the same examples, which seeds_with_examples_interval's nesting assumes (redrawn examples count their variance twice).
EXAMPLES_SEED = 0

POWER = 0.8  # the power a minimum detectable effect is stated at


def minimum_detectable_effect(half_width: float, *, df: float | None = None, power: float = POWER,
                              level: float = 0.95) -> float:
    """The smallest true effect (distance from the threshold, in the row's units) that a two-sided ``level`` interval
    of this ``half_width`` puts wholly on the effect's side with probability ``power``.

    Derivation. The estimate is d̂ ~ δ + se·T, T standard normal (``df`` None: a bootstrap or normal interval) or
    Student-t with ``df`` degrees of freedom (a t interval over seeds), and the interval is d̂ ± h with h = q·se,
    q = the (1 + level)/2 quantile of T. It excludes 0 on δ's side when d̂ > h, with probability
    P(T > (h - δ)/se); setting that to ``power`` gives δ = h + q_power·se, so

        MDE = (q_{(1+level)/2} + q_power) / q_{(1+level)/2} × h

    ≈ (1.960 + 0.842) / 1.960 h = 1.43 h for a normal interval at 80% power (and 1.25 h for a t over 3 seeds:
    (4.303 + 1.061) / 4.303 h). Treating h as fixed is the usual approximation (Cohen 1988, §2.5); for a t interval
    whose h varies with the sample's SD, read it at the expected SD (``tests/test_metrics.py`` simulates both)."""
    if isinstance(half_width, bool) or not isinstance(half_width, numbers.Real) or not math.isfinite(half_width) \
            or half_width < 0:
        raise ValueError(f"half_width={half_width!r} must be a finite number >= 0 (the interval's half-width)")
    if not 0 < power < 1 or not 0 < level < 1:
        raise ValueError(f"power={power!r} and level={level!r} must lie in (0, 1)")
    if df is not None and not df > 0:
        raise ValueError(f"df={df!r} must be > 0 (the seeds' degrees of freedom) or None for a normal interval")
    from scipy import stats

    law = stats.norm if df is None else stats.t(df)
    quantile = float(law.ppf((1 + level) / 2))
    return float((quantile + float(law.ppf(power))) / quantile * half_width)


def seeds_with_examples_mde(values: Sequence[float], example_halves: Sequence[float], *, power: float = POWER,
                            level: float = 0.95) -> float:
    """The minimum detectable effect (:func:`minimum_detectable_effect`) of :func:`seeds_with_examples_interval`'s
    row read at ``level`` (a sequential plan's nominal level: the row is decided when its ``level`` interval leaves
    the threshold): the standard error of its two terms, se² = se_seeds² + se_examples² (se_seeds = h_seeds /
    t_{0.975, S-1}, se_examples = sqrt(mean(h_i²)) / z_{0.975}), with the Welch-Satterthwaite degrees of freedom
    df = se⁴ (S - 1) / se_seeds⁴ (the examples' term is known to the bootstrap, infinite df), and the row's own
    half-width at ``level``, h: MDE = h + t_{power, df}·se. One seed: the examples' normal interval alone."""
    from scipy import stats

    mean, low, high = seeds_with_examples_interval(values, example_halves, level)
    half = (high - low) / 2
    if len(values) == 1:
        return minimum_detectable_effect(half, power=power, level=level)
    seed_half = mean_ci95([float(v) for v in values])[1]
    se_seeds = seed_half / float(stats.t.ppf(0.975, len(values) - 1))
    se_examples = math.sqrt(sum(float(h) ** 2 for h in example_halves) / len(example_halves)) / float(stats.norm.ppf(0.975))
    se = math.hypot(se_seeds, se_examples)
    if se == 0:
        return 0.0
    df = math.inf if se_seeds == 0 else se ** 4 * (len(values) - 1) / se_seeds ** 4
    return float(half + (stats.norm.ppf(power) if math.isinf(df) else stats.t.ppf(power, df)) * se)


def ratio_replicates(numerators: Sequence[float], denominators: Sequence[float], *, resamples: int = 2000,
                     seed: int = 0):
    """Bootstrap replicates of ``sum(numerators) / sum(denominators)`` over examples (numpy, vectorised).

    For statistics that are ratios of per-example sums: token accuracy (correct / tokens), entity F1
    (2 TP / (predicted + gold)), a per-token mean NLL (NLL sum / tokens). The draws depend only on ``seed``
    and the number of examples, so two quantities over the same examples share their resamples: the
    difference of their replicates is a paired bootstrap.
    """
    import numpy as np

    numerators, denominators = np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)
    if numerators.ndim != 1 or numerators.shape != denominators.shape or len(numerators) == 0:
        raise ValueError(f"numerators {numerators.shape} and denominators {denominators.shape} must be equally long, "
                         "non-empty 1-d sequences (one entry per example)")
    resamples = whole_number(resamples, "resamples")
    draws = np.random.default_rng(seed).integers(0, len(numerators), size=(resamples, len(numerators)))
    totals = denominators[draws].sum(axis=1)
    return numerators[draws].sum(axis=1) / np.where(totals == 0, np.nan, totals)


def replicate_interval(replicates, level: float = 0.95) -> tuple[float, float]:
    """The percentile interval of bootstrap ``replicates`` (replicates with an empty denominator are dropped)."""
    import numpy as np

    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level={level!r} must lie in (0, 1)")
    values = np.asarray(replicates, dtype=float)
    values = values[np.isfinite(values)]
    if len(values) == 0:
        raise ValueError("replicates holds no finite value")
    tail = (1 - level) / 2
    low, high = np.quantile(values, [tail, 1 - tail])
    return float(low), float(high)

