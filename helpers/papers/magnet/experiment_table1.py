"""Table 1 (§4.1, App. A): linear probes (chunking, NER, POS) on frozen word features pooled with the §4.1 shift,
scored per test sentence so that every score and difference has a bootstrap interval over sentences."""
from __future__ import annotations

import random
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from ... import attention, metrics, models
from ... import data as D
from ... import masks as M
from .experiment import bos_id
from .mechanism import pool_words
from .settings import MagnetSettings

PROBE_TASKS = ("Chunking", "NER", "POS")
PROBE_ATTRIBUTES = {"Chunking": "chunks", "NER": "ner", "POS": "pos"}
ENTITY_TASKS = ("Chunking", "NER")
LAST_LAYER = -1
CHANCE_ROW = "majority tag (chance)"


def word_token_spans(tokenizer, words: Sequence[str]) -> tuple[list[int], list[tuple[int, int]]]:
    """BOS followed by each word's sub-tokens (words after the first with a leading space), and each word's token span."""
    if not words:
        raise ValueError("words is empty")
    ids, spans = [bos_id(tokenizer)], []
    for index, word in enumerate(words):
        piece = tokenizer((" " if index else "") + word, add_special_tokens=False).input_ids
        if not piece:
            raise ValueError(f"words[{index}]={word!r} tokenizes to nothing")
        spans.append((len(ids), len(ids) + len(piece)))
        ids.extend(piece)
    return ids, spans


@torch.no_grad()
def word_hidden_states(model, tokenizer, sentences: Sequence[Sequence[str]], *, mask: M.Mask,
                       layers: Sequence[int] = (LAST_LAYER,), batch_size: int = 32,
                       progress: bool = False) -> tuple[dict[int, list[torch.Tensor]], list[list[tuple[int, int]]]]:
    """Frozen token states of each sentence (BOS + words) at each of ``layers`` (``hidden_states`` indices: 0 the
    embeddings, ``-1`` the last layer after the final norm), from one forward pass under ``mask``; and each
    sentence's word spans. Pool them with :func:`~helpers.papers.magnet.mechanism.pool_words`."""
    device = next(model.parameters()).device
    encoded_all = [word_token_spans(tokenizer, words) for words in sentences]
    order = sorted(range(len(encoded_all)), key=lambda i: len(encoded_all[i][0]))  # similar lengths share a batch
    by_sentence: dict[int, list[torch.Tensor | None]] = {layer: [None] * len(encoded_all) for layer in layers}
    for first in tqdm(range(0, len(order), batch_size), desc="word features", disable=not progress):
        rows = order[first:first + batch_size]
        encoded = [encoded_all[i] for i in rows]
        width = max(len(ids) for ids, _ in encoded)
        ids = torch.zeros(len(encoded), width, dtype=torch.long)
        padding = torch.zeros_like(ids)
        for row, (row_ids, _) in enumerate(encoded):
            ids[row, :len(row_ids)] = torch.tensor(row_ids)
            padding[row, :len(row_ids)] = 1
        output = attention.forward_with_mask(models.decoder_body(model), ids.to(device), mask,
                                             padding_mask=padding.to(device), output_hidden_states=True)
        for layer in layers:
            hidden = output.hidden_states[layer].float().cpu()
            for row, (index, (row_ids, _)) in enumerate(zip(rows, encoded)):
                by_sentence[layer][index] = hidden[row, :len(row_ids)]
    return by_sentence, [spans for _, spans in encoded_all]


def word_features(model, tokenizer, sentences: Sequence[Sequence[str]], *, mask: M.Mask, shift: bool,
                  layer: int = LAST_LAYER, batch_size: int = 32, progress: bool = False) -> list[torch.Tensor]:
    """Frozen word vectors (§4.1 pooling) at one layer, one ``(words, d)`` tensor per sentence."""
    states, spans = word_hidden_states(model, tokenizer, sentences, mask=mask, layers=(layer,), batch_size=batch_size,
                                       progress=progress)
    return [pool_words(hidden, row_spans, shift=shift) for hidden, row_spans in zip(states[layer], spans)]


def train_linear_probe(features: torch.Tensor, labels: torch.Tensor, num_classes: int, *, steps: int, batch_size: int,
                       lr: float, dropout: float, seed: int = 0) -> nn.Module:
    """App. A: a linear classifier on frozen representations (AdamW, dropout on its input)."""
    if len(features) != len(labels) or len(features) == 0:
        raise ValueError(f"features ({len(features)}) and labels ({len(labels)}) must be non-empty and equally long")
    torch.manual_seed(seed)
    probe = nn.Sequential(nn.Dropout(dropout), nn.Linear(features.shape[1], num_classes))
    optimizer = torch.optim.AdamW(probe.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    probe.train()
    for _ in range(steps):
        rows = torch.randint(len(features), (batch_size,), generator=generator)
        loss = F.cross_entropy(probe(features[rows]), labels[rows])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return probe.eval()


def probe_predict(x_train: torch.Tensor, train_tags: Sequence[str], x_test: torch.Tensor, settings: MagnetSettings,
                  seed: int = 0) -> list[str]:
    """Fit a linear probe on (word vector, tag) pairs and tag ``x_test``.

    ``settings.probe_classifier``: ``"app_a"``, App. A's probe (AdamW, ``probe_steps`` steps of batch
    ``probe_batch_size``, lr ``probe_lr``, input dropout); ``"logistic"``, multinomial logistic regression on
    standardised features, fitted to convergence (lbfgs), so that a row measures the features and not how far
    a short stochastic fit got.
    """
    vocabulary = sorted(set(train_tags))
    if len(vocabulary) == 1:
        return [vocabulary[0]] * len(x_test)
    index = {tag: i for i, tag in enumerate(vocabulary)}
    y_train = np.array([index[tag] for tag in train_tags])
    if settings.probe_classifier == "logistic":
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler

        scaler = StandardScaler().fit(x_train.numpy())
        with warnings.catch_warnings():
            warnings.simplefilter("always", ConvergenceWarning)  # shown, not fatal: "converged" is part of the claim
            classifier = LogisticRegression(max_iter=5000).fit(scaler.transform(x_train.numpy()), y_train)
        predicted = classifier.predict(scaler.transform(x_test.numpy()))
    else:
        probe = train_linear_probe(x_train, torch.from_numpy(y_train), len(vocabulary), steps=settings.probe_steps,
                                   batch_size=settings.probe_batch_size, lr=settings.probe_lr,
                                   dropout=settings.probe_dropout, seed=seed)
        with torch.no_grad():
            predicted = probe(x_test).argmax(-1).numpy()
    return [vocabulary[i] for i in predicted]


def sentence_probe_counts(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict[str, np.ndarray]:
    """Per test sentence: correct tags and tags (token accuracy), and entity TP, predicted and gold entities
    (strict IOB2 F1, as seqeval): the sums behind both metrics, so that either can be bootstrapped over sentences."""
    if len(gold) != len(predicted):
        raise ValueError(f"gold has {len(gold)} sentences but predicted has {len(predicted)}")
    out = {name: np.zeros(len(gold)) for name in ("correct", "tags", "tp", "predicted", "gold")}
    for row, (truth, guess) in enumerate(zip(gold, predicted)):
        if len(truth) != len(guess):
            raise ValueError(f"sentence {row}: {len(truth)} gold tags but {len(guess)} predicted")
        out["correct"][row] = sum(t == p for t, p in zip(truth, guess))
        out["tags"][row] = len(truth)
        if all(tag == "O" or tag[:2] in ("B-", "I-") for tag in (*truth, *guess)):  # IOB2 tasks only (not POS)
            out["tp"][row], out["predicted"][row], out["gold"][row] = metrics.entity_counts([truth], [guess])[0]
    return out


@dataclass(frozen=True)
class ProbeReadout:
    """One Table 1 row: which model's states, at which layer (``hidden_states`` index, -1 the last), with or
    without the §4.1 shift (token i read from output i - 1)."""

    model: str
    layer: int = LAST_LAYER
    shift: bool = True


def table1_readouts(middle: int) -> dict[str, ProbeReadout]:
    """Table 1's rows: its four (base, LLM2Vec-style [MNTP], LLM2Vec-style, MAGNET) and the reference rows that show
    the mechanism: step 0 (the base under the bidirectional mask, untrained) with and without the shift, MNTP and
    MAGNET without the shift, the ``middle`` layer of the base, MNTP and MAGNET, and MNTP + MSG (Table 6)."""
    R = ProbeReadout
    return {
        "base (causal)": R("base", shift=False),
        f"base (causal), layer {middle}": R("base", middle, shift=False),
        "step 0 (bidirectional, untrained)": R("step 0"),
        "step 0, no shift": R("step 0", shift=False),
        "LLM2Vec-style [MNTP]": R("MNTP"),
        "LLM2Vec-style [MNTP], no shift": R("MNTP", shift=False),
        f"LLM2Vec-style [MNTP], layer {middle}, no shift": R("MNTP", middle, shift=False),
        "LLM2Vec-style": R("LLM2Vec-style"),
        "MNTP + MSG": R("MNTP + MSG"),
        "MAGNET": R("MAGNET"),
        "MAGNET, no shift": R("MAGNET", shift=False),
        f"MAGNET, layer {middle}, no shift": R("MAGNET", middle, shift=False),
    }


def claim_rows(middle: int) -> dict[str, str]:
    """The rows of :func:`table1_readouts` that ``report.claims`` compares, by role (``base``, ``step0``, ``mntp``,
    ``magnet``, ``magnet_noshift``, ``base_mid``, ``magnet_mid``, ``mntp_msg``)."""
    return {"base": "base (causal)", "base_mid": f"base (causal), layer {middle}",
            "step0": "step 0 (bidirectional, untrained)", "mntp": "LLM2Vec-style [MNTP]", "magnet": "MAGNET",
            "magnet_noshift": "MAGNET, no shift", "magnet_mid": f"MAGNET, layer {middle}, no shift",
            "mntp_msg": "MNTP + MSG"}


@dataclass
class ProbeStudy:
    """Per-sentence probe counts of every readout and task (``counts[row][task]``, see
    :func:`sentence_probe_counts`), on ``n`` test sentences; ``table()`` and ``interval()`` read them."""

    counts: dict
    n: int
    resamples: int = 2000
    seed: int = 0

    def _replicates(self, row: str, task: str, metric: str):
        if row not in self.counts or task not in self.counts[row]:
            raise ValueError(f"row={row!r}, task={task!r} is not in the study (rows: {list(self.counts)})")
        if metric not in ("accuracy", "F1") or (metric == "F1" and task not in ENTITY_TASKS):
            raise ValueError(f"metric={metric!r} for task={task!r}: expected 'accuracy', or 'F1' for {ENTITY_TASKS}")
        c = self.counts[row][task]
        numerator, denominator = ((c["correct"], c["tags"]) if metric == "accuracy" else
                                  (2 * c["tp"], c["predicted"] + c["gold"]))
        value = 100.0 * float(numerator.sum() / max(denominator.sum(), 1))
        return value, 100.0 * metrics.ratio_replicates(numerator, denominator, resamples=self.resamples, seed=self.seed)

    def interval(self, row: str, task: str, metric: str = "accuracy") -> tuple[float, float, float]:
        """``(score, low, high)`` in %, bootstrap over test sentences."""
        value, replicates = self._replicates(row, task, metric)
        return (value, *metrics.replicate_interval(replicates))

    def difference(self, first: str, second: str, task: str, metric: str = "accuracy") -> tuple[float, float, float]:
        """``(first - second, low, high)`` in points, paired bootstrap over the same test sentences."""
        value_a, replicates_a = self._replicates(first, task, metric)
        value_b, replicates_b = self._replicates(second, task, metric)
        return (value_a - value_b, *metrics.replicate_interval(replicates_a - replicates_b))

    def table(self, metric: str = "accuracy", intervals: bool = False):
        """Rows x tasks in % (``metric`` "accuracy" for all three, or "F1" for chunking and NER); with
        ``intervals`` each cell is "score [low, high]"."""
        import pandas as pd

        tasks = PROBE_TASKS if metric == "accuracy" else ENTITY_TASKS
        cells = {}
        for row in self.counts:
            cells[row] = {}
            for task in tasks:
                value, low, high = self.interval(row, task, metric)
                cells[row][task] = f"{value:.1f} [{low:.1f}, {high:.1f}]" if intervals else value
        return pd.DataFrame(cells).T[list(tasks)]


def _readout_counts(readout: ProbeReadout, train_states, test_states, gold: dict, train_tags: dict,
                    settings: MagnetSettings, seed: int) -> dict:
    """One row of the study: §4.1-pooled features of ``readout``, a probe per task, counts per test sentence."""
    def pooled(states, spans):
        return torch.cat([pool_words(h, row_spans, shift=readout.shift) for h, row_spans in zip(states[readout.layer], spans)])

    x_train, x_test = pooled(*train_states), pooled(*test_states)
    counts = {}
    for task in PROBE_TASKS:
        flat = probe_predict(x_train, train_tags[task], x_test, settings, seed)
        cut = np.cumsum([len(tags) for tags in gold[task]])[:-1]
        by_sentence = [list(part) for part in np.split(np.array(flat, dtype=object), cut)]
        counts[task] = sentence_probe_counts(gold[task], by_sentence)
    return counts


def word_probe_study(named_models: dict, readouts: dict, tokenizer, train_sentences, test_sentences,
                     settings: MagnetSettings, seed: int = 0, progress: bool = True) -> ProbeStudy:
    """Table 1: ``named_models`` maps a name to ``(model, mask)``; ``readouts`` maps a row label to a
    :class:`ProbeReadout`. Each model runs once over the train and test sentences (every layer its readouts
    need from the same pass); a probe per row and task is fitted on the train sentences and scored per test
    sentence. A "majority tag" row (each task's most frequent training tag everywhere) is the chance level.
    """
    unknown = sorted({r.model for r in readouts.values()} - set(named_models))
    if unknown:
        raise ValueError(f"readouts name models {unknown} that named_models lacks ({list(named_models)})")
    gold = {task: [list(getattr(s, attribute)) for s in test_sentences] for task, attribute in PROBE_ATTRIBUTES.items()}
    train_tags = {task: [tag for s in train_sentences for tag in getattr(s, attribute)]
                  for task, attribute in PROBE_ATTRIBUTES.items()}
    counts = {CHANCE_ROW: {task: sentence_probe_counts(gold[task], [[Counter(train_tags[task]).most_common(1)[0][0]] * len(tags)
                                                                    for tags in gold[task]]) for task in PROBE_TASKS}}
    for name, (model, mask) in tqdm(named_models.items(), desc="Table 1 models", disable=not progress):
        rows = {label: readout for label, readout in readouts.items() if readout.model == name}
        if not rows:
            continue
        layers = sorted({readout.layer for readout in rows.values()})
        kwargs = dict(mask=mask, layers=layers, batch_size=settings.embed_batch_size)
        train_states = word_hidden_states(model, tokenizer, [s.words for s in train_sentences], **kwargs)
        test_states = word_hidden_states(model, tokenizer, [s.words for s in test_sentences], **kwargs)
        for label, readout in rows.items():
            counts[label] = _readout_counts(readout, train_states, test_states, gold, train_tags, settings, seed)
    return ProbeStudy(counts, len(test_sentences), seed=seed)


def probe_sentences(settings: MagnetSettings, corpus: str) -> tuple[list, list]:
    """(train, test) labelled sentences: spaCy silver labels on held-out text offline, CoNLL-2003 from the Hub.

    Drawn with :data:`helpers.metrics.EXAMPLES_SEED`, never the study's seed: every seed of a study probes the same
    sentences, so the seeds' interval nests one set of examples (``metrics.seeds_with_examples_interval``)."""
    if settings.probe_source == "conll2003":
        try:
            return (D.conll2003("train", settings.probe_train_sentences), D.conll2003("test", settings.probe_test_sentences))
        except D.MissingAssetError as error:
            warnings.warn(f"CoNLL-2003 is unavailable, so Table 1's probes fall back to spaCy silver labels on "
                          f"corpus={corpus!r}; its scores are then not CoNLL-2003 scores. Cause: {error}", stacklevel=2)

    def pick(split: str, count: int):
        texts = [s.text for s in D.load_sentences(corpus, split, min_words=4)
                 if len(s.text.split()) <= settings.probe_max_words]
        random.Random(metrics.EXAMPLES_SEED).shuffle(texts)
        return D.silver_labels(texts[:count])

    return pick("validation", settings.probe_train_sentences), pick("test", settings.probe_test_sentences)
