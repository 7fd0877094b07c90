"""Fig. 5's layer curve without fine-tuning: a frozen-feature probe on the untrained decoder (notebook 04, §4b).

One no-grad pass per r reads every layer's last-copy state of each word's first sub-token; a logistic regression
per layer, trained on the training split, tags the test split. Its layer and repetition differences come with
paired bootstrap intervals over the test sentences (:func:`probe_middle_gain`, :func:`probe_layer_difference`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ... import masks as M
from ... import metrics
from .experiment_data import EncodedSentence, TaggingData, collate
from .mechanism import Strategy, gather_last_copy, repeat_batch, sr_features
from .settings import RepetitionSettings


@torch.no_grad()
def layer_features(body, sentences: Sequence[EncodedSentence], strategy: Strategy, pad_id: int,
                   batch_size: int = 16, policy: str = "packed") -> torch.Tensor:
    """``(layers + 1, words, hidden)``: each word's first-sub-token state in the last copy after every layer
    (index 0: the embeddings), from one no-grad pass of the untrained ``body`` under ``strategy``."""
    if not sentences:
        raise ValueError("sentences is empty; the probe needs at least one sentence")
    device = next(body.parameters()).device
    collected = []
    for start in range(0, len(sentences), batch_size):
        chunk = list(sentences[start:start + batch_size])
        batch = collate(chunk, ("O",), pad_id)
        ids, mask = batch["input_ids"].to(device), batch["padding_mask"].to(device)
        _, output = sr_features(body, ids, mask, strategy, policy, output_hidden_states=True)
        repeated = repeat_batch(ids, mask, strategy.r, policy)
        states = torch.stack([gather_last_copy(hidden, repeated) for hidden in output.hidden_states]).float().cpu()
        for row, sentence in enumerate(chunk):
            collected.append(states[:, row, list(sentence.word_starts)])
    return torch.cat(collected, dim=1)


def probe_layers(body, tagging: TaggingData, repeats: Sequence[int], settings: RepetitionSettings,
                 progress: bool = True) -> dict[int, list[list[tuple[int, int, int]]]]:
    """The frozen-feature probe: for each r and each layer (0 = embeddings), a logistic regression on the
    standardised last-copy states of the training words predicts each test word's tag; returns per r and
    layer the per-test-sentence ``(correct, predicted, gold)`` entity counts (:func:`metrics.entity_counts`)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    train = tagging.train[:settings.probe_train_sentences] if settings.probe_train_sentences else tagging.train
    index = {label: i for i, label in enumerate(tagging.labels)}
    targets = np.array([index[tag] for sentence in train for tag in sentence.tags])
    gold = [list(sentence.tags) for sentence in tagging.test]
    lengths = np.cumsum([0] + [len(sentence.tags) for sentence in tagging.test])
    batch_size, policy = settings.training.batch_size * 2, settings.training.pad_policy
    results = {}
    for r in repeats:
        strategy = Strategy("sr", M.check_repeats(r))
        train_states = layer_features(body, train, strategy, tagging.pad_id, batch_size, policy)
        test_states = layer_features(body, tagging.test, strategy, tagging.pad_id, batch_size, policy)
        per_layer = []
        for layer in tqdm(range(train_states.shape[0]), desc=f"probe r={r}", disable=not progress):
            probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=settings.probe_max_iter))
            probe.fit(train_states[layer].numpy(), targets)
            guessed = probe.predict(test_states[layer].numpy())
            predicted = [[tagging.labels[int(g)] for g in guessed[a:b]] for a, b in zip(lengths[:-1], lengths[1:])]
            per_layer.append(metrics.entity_counts(gold, predicted))
        results[int(r)] = per_layer
    return results


def probe_middle_gain(probe: dict[int, list], num_layers: int, low_r: int = 0, high_r: int = 1,
                      resamples: int = 1000) -> tuple[float, float, float]:
    """Mean over App. A.3.1's middle layers of probe F1 at ``high_r`` minus ``low_r`` (x100), paired bootstrap
    over test sentences."""
    lower, upper = M.middle_unmasked_layers(num_layers)
    layers = range(lower + 1, upper + 2)  # hidden_states index = layer index + 1
    pairs = list(zip(*[probe[high_r][layer] for layer in layers], *[probe[low_r][layer] for layer in layers]))
    count = len(layers)

    def gain(sample):
        return 100 * float(np.mean([metrics.f1_from_counts([row[i] for row in sample])
                                    - metrics.f1_from_counts([row[count + i] for row in sample]) for i in range(count)]))

    return metrics.bootstrap_interval(pairs, gain, resamples=resamples)


def probe_layer_difference(probe: dict[int, list], r: int, layer: int, reference_layer: int,
                           resamples: int = 1000) -> tuple[float, float, float]:
    """Probe F1 (x100) at ``layer`` minus ``reference_layer`` for one r, paired bootstrap over test sentences."""
    pairs = list(zip(probe[r][layer], probe[r][reference_layer]))
    return metrics.bootstrap_interval(
        pairs, lambda sample: 100 * (metrics.f1_from_counts([a for a, _ in sample])
                                     - metrics.f1_from_counts([b for _, b in sample])), resamples=resamples)
