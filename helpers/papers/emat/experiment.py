"""Notebook 06's evaluation: every method behind one :class:`Completer`, accuracy@k on whole splits by gold length
with bootstrap intervals (Tables 2-3), paired differences, and inference time (Table 3, Inf-time).

The data and the features are built in :mod:`.experiment_data`, the heads trained in :mod:`.experiment_training`.
Two baselines the paper does not report sit beside its methods: the masked LM's first-token probability ranked over
the vocabulary (:class:`ClosedVocabularyMLM`) and the training-label prior (:class:`LabelPrior`).
"""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import torch
from tqdm.auto import tqdm

from ... import metrics
from ...checks import whole_number
from ...masked_lm import MaskedLM
from .experiment_data import UNSEEN, EncodedSplit, MTCDataset, split_at_mask
from .experiment_training import max_generation_steps
from .mechanism import (ExtendedMatrixDecoder, GRUDecoder, LengthClassifier, accuracy, check_k, naive_complete,
                        rank_candidates)
from .settings import MTCSettings

METHODS = ("mlm", "naive", "mlm_vocab", "prior", "emat", "gru", "emat_new_rows")
METHOD_LABELS = {"mlm": "single-token MLM", "naive": "naive MTC", "mlm_vocab": "MLM first token over the vocabulary",
                 "prior": "label prior", "emat": "EMAT", "gru": "GRU decoder", "emat_new_rows": "EMAT, new rows only"}
FEATURE_METHODS = ("mlm", "mlm_vocab", "prior", "emat", "emat_new_rows", "gru")  # run from cached features
COVERAGE_TOKENS = {"mlm": 1, "naive": 2}  # Table 2: the longest label (in tokens) each baseline can produce
LENGTH_GROUPS = ("all", "single-token", "multi-token")
LATENCY_METHODS = ("mlm", "emat", "emat_new_rows", "gru")
PAPER_SIZED = "emat_paper_size"  # the latency job of EMAT with a paper-sized extended matrix (:func:`paper_sized_emat`)
PAPER_SIZED_ROWS = "paper-sized rows"  # measure_latency's record of how many new rows that matrix had
LATENCY_LABELS = {**METHOD_LABELS, "forward": "masked-LM forward", PAPER_SIZED: "EMAT, paper-sized matrix (random rows)"}


# ---------------------------------------------------------------------------------------------
# Two baselines over the closed vocabulary
# ---------------------------------------------------------------------------------------------


class ClosedVocabularyMLM:
    """A baseline with no training: the frozen masked LM's probability of a phrase's **first** token at the mask,
    ranked over the completion vocabulary (phrases sharing a first token are ordered by how often they are a
    training label). It tells how much of a@k a closed choice among the vocabulary phrases gets for free."""

    def __init__(self, mlm: MaskedLM, phrases: Sequence[str], prior: Counter):
        if not phrases:
            raise ValueError("phrases is empty; the closed-vocabulary baseline ranks vocabulary phrases")
        self.mlm = mlm
        self.phrases = sorted(phrases, key=lambda phrase: -prior[phrase])  # ties in the stable sort: by the prior
        self.first_ids = torch.tensor([mlm.tokenizer(" " + p, add_special_tokens=False).input_ids[0] for p in self.phrases])

    @torch.no_grad()
    def complete(self, hidden: torch.Tensor, k: int) -> list[list[tuple[str, float]]]:
        check_k(k)
        probabilities = self.mlm.token_logits(hidden.float()).softmax(-1)[:, self.first_ids.to(hidden.device)]
        values, order = probabilities.sort(dim=-1, descending=True, stable=True)
        return [[(self.phrases[i], v) for v, i in zip(row_values[:k], row_order[:k])]
                for row_values, row_order in zip(values.tolist(), order.tolist())]


class LabelPrior:
    """A baseline that ignores the sentence: the vocabulary phrases ranked by how often each is a training label."""

    def __init__(self, phrases: Sequence[str], prior: Counter):
        if not phrases:
            raise ValueError("phrases is empty; the label prior ranks vocabulary phrases")
        total = max(1, sum(prior.values()))
        self.ranked = [(phrase, prior[phrase] / total) for phrase in sorted(phrases, key=lambda phrase: -prior[phrase])]

    def complete(self, hidden: torch.Tensor, k: int) -> list[list[tuple[str, float]]]:
        check_k(k)
        return [list(self.ranked[:k]) for _ in range(hidden.shape[0])]


# ---------------------------------------------------------------------------------------------
# Completing sentences: every method from one object (the evaluation, the widget and the latency use it)
# ---------------------------------------------------------------------------------------------


@dataclass
class Completer:
    """The frozen masked LM with its heads and the baselines: complete any sentence that holds one [MASK]."""

    mlm: MaskedLM
    emat: ExtendedMatrixDecoder
    gru: GRUDecoder
    lengths: LengthClassifier
    settings: MTCSettings
    max_steps: int
    emat_new_rows: ExtendedMatrixDecoder | None = None  # the ablation: token rows kept the masked LM's own
    closed_vocabulary: ClosedVocabularyMLM | None = None
    prior: LabelPrior | None = None

    @property
    def methods(self) -> tuple[str, ...]:
        present = {"mlm_vocab": self.closed_vocabulary, "prior": self.prior, "emat_new_rows": self.emat_new_rows}
        return tuple(method for method in METHODS if present.get(method, True) is not None)

    def _check(self, method: str, k) -> None:
        if method not in self.methods:
            raise ValueError(f"method={method!r} is not one of {self.methods}")
        check_k(k)

    @torch.no_grad()
    def from_features(self, method: str, hidden: torch.Tensor, first: torch.Tensor, k: int):
        """Completions from cached mask embeddings (``method`` in :data:`FEATURE_METHODS`)."""
        self._check(method, k)
        hidden, first = hidden.to(self.mlm.device).float(), first.to(self.mlm.device)
        if method == "mlm":
            return rank_candidates(self.mlm.token_logits(hidden).softmax(-1), self.mlm.token_strings, k)
        if method == "mlm_vocab":
            return self.closed_vocabulary.complete(hidden, k)
        if method == "prior":
            return self.prior.complete(hidden, k)
        if method == "emat":
            return self.emat.complete(hidden, k)
        if method == "emat_new_rows":
            return self.emat_new_rows.complete(hidden, k)
        if method == "gru":
            return self.gru.complete(hidden, first, self.mlm.tokenizer, k, self.settings.beam_size, self.max_steps)
        raise ValueError(f"method={method!r} needs the sentences, not features; use complete()")

    @torch.no_grad()
    def complete(self, sentences: str | Sequence[str], method: str, k: int = 10):
        """Top-``k`` ``(completion, score)`` pairs for each sentence (each must hold one ``[MASK]``)."""
        single = isinstance(sentences, str)
        sentences = [sentences] if single else list(sentences)
        if not sentences:
            raise ValueError("sentences is empty; pass a sentence holding [MASK] once, or a non-empty list of them")
        self._check(method, k)
        for sentence in sentences:
            split_at_mask(sentence)
        if method == "naive":
            ranked = naive_complete(self.mlm, self.lengths, sentences, k, self.settings.naive_first_tokens,
                                    self.settings.naive_second_tokens)
        else:
            hidden, first = self.mlm.features(sentences)
            ranked = self.from_features(method, hidden, first, k)
        return ranked[0] if single else ranked


def build_completer(mlm: MaskedLM, emat, gru, lengths, settings: MTCSettings, dataset: MTCDataset,
                    encoded: dict[str, EncodedSplit], emat_new_rows=None) -> Completer:
    """The :class:`Completer` with both baselines over ``dataset``'s vocabulary, the prior from the train labels."""
    prior = Counter(encoded["train"].phrases)  # how often each phrase is a training label
    return Completer(mlm, emat, gru, lengths, settings, max_steps=max_generation_steps(encoded["train"]),
                     emat_new_rows=emat_new_rows, closed_vocabulary=ClosedVocabularyMLM(mlm, dataset.vocabulary, prior),
                     prior=LabelPrior(dataset.vocabulary, prior))


# ---------------------------------------------------------------------------------------------
# accuracy@k on whole splits (Tables 2-3), by gold length, with intervals
# ---------------------------------------------------------------------------------------------


def _batched(items: Sequence, size: int):
    for start in range(0, len(items), size):
        yield start, items[start:start + size]


def evaluate_methods(completer: Completer, encoded: dict[str, EncodedSplit], features: dict[str, torch.Tensor],
                     splits: Sequence[str] = ("test", UNSEEN), naive_splits: Sequence[str] = ("test",),
                     progress: bool = True) -> dict:
    """accuracy@k of every method on every sentence of each split, over all sentences and within coverage.

    Coverage (Table 2): the single-token MLM can only produce labels that are one token here; naive MTC
    labels of one or two tokens; the others any label. Every method scores the same, whole split (naive MTC,
    which needs 2 + ``naive_first_tokens`` forwards per sentence, only the ``naive_splits``, as Table 2: the test split);
    ``results[method][split]["hits"][k]`` holds one 0/1 per sentence for the intervals and paired differences.
    """
    settings, ks = completer.settings, completer.settings.ks
    k = max(ks)
    results: dict = {method: {} for method in completer.methods}
    for split in splits:
        split_encoded = encoded[split]
        limit = len(split_encoded) if settings.eval_examples is None else min(settings.eval_examples, len(split_encoded))
        if limit == 0:
            continue
        gold = split_encoded.phrases[:limit]
        lengths = [len(ids) for ids in split_encoded.phrase_ids[:limit]]
        hidden, first = features[split][:limit], split_encoded.previous_tokens[:limit]
        for method in [m for m in completer.methods if m in FEATURE_METHODS]:
            size = 512 if method != "gru" else 32
            ranked = []
            for start, _ in tqdm(list(_batched(range(limit), size)), desc=f"{METHOD_LABELS[method]} ({split})",
                                 disable=not progress):
                ranked.extend(completer.from_features(method, hidden[start:start + size], first[start:start + size], k))
            results[method][split] = score_ranking(ranked, gold, lengths, ks, COVERAGE_TOKENS.get(method))
        if split not in naive_splits:
            continue
        sentences = split_encoded.sentences[:limit]
        size = max(1, 256 // settings.naive_first_tokens)
        ranked = []
        for _, chunk in tqdm(list(_batched(sentences, size)), desc=f"naive MTC ({split})", disable=not progress):
            ranked.extend(completer.complete(chunk, "naive", k))
        results["naive"][split] = score_ranking(ranked, gold, lengths, ks, COVERAGE_TOKENS["naive"])
    return results


def score_ranking(ranked, gold: Sequence[str], lengths: Sequence[int], ks: Sequence[int], max_tokens: int | None) -> dict:
    """One method's rankings on one split scored against ``gold``: accuracy@k over all sentences and within coverage
    (gold of at most ``max_tokens`` tokens; None: all), the 0/1 hit of every sentence per k, and the gold lengths."""
    covered = [i for i, n in enumerate(lengths) if max_tokens is None or n <= max_tokens]
    within = accuracy([ranked[i] for i in covered], [gold[i] for i in covered], ks) if covered else {k: float("nan") for k in ks}
    strings = [[item[0] for item in row] for row in ranked]
    hits = {k: [int(answer.strip() in row[:k]) for row, answer in zip(strings, gold)] for k in ks}
    return {"n": len(gold), "coverage": len(covered) / len(gold), "accuracy": accuracy(ranked, gold, ks),
            "accuracy within coverage": within, "ranked": ranked, "hits": hits, "gold tokens": list(lengths)}


def group_rows(lengths: Sequence[int], group: str) -> list[int]:
    """Indices of the sentences whose gold label is one token here (``single-token``), more (``multi-token``), or all."""
    if group not in LENGTH_GROUPS:
        raise ValueError(f"group={group!r} is not one of {LENGTH_GROUPS}")
    return [i for i, n in enumerate(lengths) if group == "all" or (n == 1) == (group == "single-token")]


def accuracy_intervals(results: dict, split: str = "test", ks: Sequence[int] = (1, 10, 50), resamples: int = 1000,
                       methods: Sequence[str] | None = None) -> dict:
    """``{method: {group: {k: (value, low, high, n)}}}``: accuracy@k by gold length with 95% bootstrap intervals
    over the sentences of ``split`` (``helpers.metrics.bootstrap_interval``)."""
    table: dict = {}
    for method in methods or [m for m in METHODS if m in results]:
        measured = results.get(method, {}).get(split)
        if measured is None:
            continue
        table[method] = {}
        for group in LENGTH_GROUPS:
            rows = group_rows(measured["gold tokens"], group)
            table[method][group] = {
                k: (*metrics.bootstrap_interval([measured["hits"][k][i] for i in rows], resamples=resamples), len(rows))
                for k in ks} if rows else {}
    return table


def paired_difference(results: dict, first: str, second: str, k: int, split: str = "test", group: str = "all",
                      resamples: int = 1000) -> tuple[float, float, float, int] | None:
    """accuracy@k of ``first`` minus ``second`` on the same sentences, with its 95% paired bootstrap interval, and n
    (``None`` when no sentence of ``split`` falls in ``group``)."""
    a, b = results[first][split], results[second][split]
    rows = group_rows(a["gold tokens"], group)
    if not rows:
        return None
    value, low, high = metrics.paired_difference_interval([a["hits"][k][i] for i in rows], [b["hits"][k][i] for i in rows],
                                                          resamples=resamples)
    return value, low, high, len(rows)


def training_label_share(ranked: Sequence[Sequence[tuple[str, float]]], train_labels: set[str], k: int = 50) -> float:
    """The share of all top-``k`` completions that are training labels (how closed the ranking is on their set)."""
    items = [text for row in ranked for text, _ in row[:k]]
    return sum(text in train_labels for text in items) / max(1, len(items))


# ---------------------------------------------------------------------------------------------
# Inference time (Table 3, Inf-time)
# ---------------------------------------------------------------------------------------------


def paper_sized_emat(mlm: MaskedLM, rows: int, *, seed: int = 0) -> ExtendedMatrixDecoder:
    """EMAT with ``rows`` new rows of random phrase embeddings (the paper's ~93K, §3 and §4.1) on ``mlm``'s output
    matrix: what inference costs at the paper's matrix size, whatever vocabulary we trained (its scores mean nothing).
    Shared by :func:`measure_latency` and ``benchmarks/emat_speed.py``."""
    whole_number(rows, "rows", 1, "new rows of the extended matrix")
    generator = torch.Generator().manual_seed(seed)
    phrase_rows = torch.randn(rows, mlm.hidden_size, generator=generator) * 0.02
    return ExtendedMatrixDecoder(mlm.output_matrix, phrase_rows, mlm.token_strings,
                                 [f"phrase {index}" for index in range(rows)]).to(mlm.device).eval()


def measure_latency(completer: Completer, sentences: Sequence[str], methods: Sequence[str] | None = None, k: int = 10,
                    trials: int = 10, processes: int = 1, progress: bool = True,
                    paper_sized: ExtendedMatrixDecoder | None = None) -> dict:
    """Milliseconds to complete one sentence (batch 1, masked-LM forward included) with the trained heads.

    One trial is a pass over ``sentences`` in which the jobs take turns on every sentence
    (:func:`helpers.metrics.interleaved_timings`, after one warm-up each), so load on the machine hits them alike;
    each sentence counts with the fastest of its ``trials`` (interference only ever adds time). ``processes`` = 1
    times in this process; more repeat the same trials in that many fresh processes, one after another
    (:func:`helpers.workers.in_fresh_processes`, the completer sent to each), so the ratios' intervals cover run-to-run
    variance (:func:`latency_ratio`). ``"forward"`` is the bare masked-LM forward; ``"mlm"`` the single-token path
    (forward, output matrix, top-k); with ``paper_sized`` (:func:`paper_sized_emat`), :data:`PAPER_SIZED` is EMAT's path
    through that matrix. Returns per job the median over sentences of the process mean, under ``"samples"`` those
    per-sentence process means, and under ``"runs"`` each process's per-sentence times. The paper times a T4 GPU
    (Table 3, Inf-time).
    """
    from ... import workers

    if not sentences:
        raise ValueError("sentences is empty; nothing to time")
    trials = whole_number(trials, "trials", 1, "interleaved passes over the sentences per process")
    processes = whole_number(processes, "processes", 1, "processes the timing trials repeat in")
    methods = [m for m in (methods or LATENCY_METHODS) if m in completer.methods]
    arguments = (completer, list(sentences), methods, k, trials, paper_sized)
    runs = workers.in_fresh_processes(_timed_sentences, arguments, processes, progress=progress,
                                      models=(completer.mlm.model,))
    samples = {name: [statistics.fmean(values) for values in zip(*(run[name] for run in runs))] for name in runs[0]}
    extra = {PAPER_SIZED_ROWS: len(paper_sized.phrases)} if paper_sized is not None else {}
    return {**{name: float(statistics.median(values)) for name, values in samples.items()}, "samples": samples,
            "runs": {name: [run[name] for run in runs] for name in runs[0]}, "trials": trials, **extra}


def _timed_sentences(completer: Completer, sentences: list[str], methods: list[str], k: int, trials: int,
                     paper_sized: ExtendedMatrixDecoder | None, progress: bool = False) -> dict:
    """Per job, each sentence's fastest of ``trials`` interleaved passes (ms). Runs in whichever process calls it."""
    jobs = {"forward": lambda s: completer.mlm.features([s])}
    jobs.update({method: (lambda s, m=method: completer.complete([s], m, k)) for method in methods})
    if paper_sized is not None:
        jobs[PAPER_SIZED] = lambda s: paper_sized.complete(completer.mlm.features([s])[0], k)
    synchronize = torch.cuda.synchronize if completer.mlm.device.type == "cuda" else None
    with torch.no_grad():
        return metrics.interleaved_timings(jobs, sentences, rounds=trials, best=True, synchronize=synchronize,
                                           progress=progress, per_input=True)


def latency_ratio(latency: dict, numerator: str, denominator: str, resamples: int = 1000) -> tuple[float, float, float, int]:
    """Median time of ``numerator`` over median time of ``denominator`` (over the sentences), its 95% interval, and
    the number of sentences. With one process (or a ``latency`` without ``"runs"``): the percentile bootstrap over
    sentences. With several, sentences and trials nested in processes: each process's ratio with its own
    sentence-bootstrap half-width, combined by :func:`helpers.metrics.seeds_with_examples_interval` (the Student-t
    half-width over the process ratios, P - 1 degrees of freedom, in quadrature with the root-mean-square of the
    sentence half-widths: every process times the same sentences, so their sampling error is common to all
    processes and invisible in the processes' spread)."""
    def ratio(pairs):
        return metrics.bootstrap_interval(
            pairs, lambda sample: statistics.median(a for a, _ in sample) / statistics.median(b for _, b in sample),
            resamples=resamples)

    runs = latency.get("runs")
    if not runs or len(runs[numerator]) == 1:
        pairs = list(zip(latency["samples"][numerator], latency["samples"][denominator]))
        value, low, high = ratio(pairs)
        return value, low, high, len(pairs)
    per_process = [ratio(list(zip(first, second))) for first, second in zip(runs[numerator], runs[denominator])]
    value, low, high = metrics.seeds_with_examples_interval([value for value, _, _ in per_process],
                                                           [(high - low) / 2 for _, low, high in per_process])
    return value, low, high, len(runs[numerator][0])


def latency_method(latency: dict) -> str:
    """How :func:`latency_ratio`'s interval is computed for ``latency``, in words."""
    runs = latency.get("runs")
    processes = len(next(iter(runs.values()))) if runs else 1
    trials = latency.get("trials")
    design = f"{trials} interleaved trials × {processes} processes" if trials else f"{processes} processes"
    if processes == 1:
        return f"{design}: bootstrap over sentences (ratio of medians)"
    return (f"{design}: t over process ratios (ratio of medians), sentence bootstrap within each process added "
            "(trials and sentences nested in processes)")
