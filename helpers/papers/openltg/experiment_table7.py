"""Table 7 (OpenLTG §3.1 "Length Prediction", Eq. 5; §6.2): a fixed target length or one predicted from the prompt.

Eq. 5 predicts the length from ``Mean-Pooling(H_src^L)`` with one classification layer; ours regresses (ridge, α
cross-validated) on the same mean-pooled prompt states. Both strategies are scored by their length error on
held-out prompts, with bootstrap intervals; the paper scores the generations each strategy leads to instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ... import masks as M
from ... import metrics
from ...masked_lm import MaskedLM
from .experiment import PromptExample
from .mechanism import check_prompts, left_padded
from .settings import OpenLTGSettings


@torch.inference_mode()
def prompt_features(backend: MaskedLM, prompts: list[torch.Tensor], *, batch_size: int = 16) -> np.ndarray:
    """Mean-pooled last-layer states of each prompt encoded on its own, Eq. 5's ``Mean-Pooling(H_src^L)``."""
    prompts = check_prompts(prompts)
    features = []
    for index in tqdm(range(0, len(prompts), batch_size), desc="prompt features"):
        chunk = prompts[index:index + batch_size]
        ids, padding = left_padded(chunk, 0, backend.pad_id, backend.pad_id)
        ids, padding = ids.to(backend.device), padding.to(backend.device)
        hidden = backend.hidden_states(ids, padding, mask=M.bidirectional).float()
        weights = padding[..., None].float()
        features.append(((hidden * weights).sum(1) / weights.sum(1)).cpu().numpy())
    return np.concatenate(features)


RIDGE_ALPHAS = tuple(10.0 ** power for power in range(-2, 6))  # the grid the length predictor's α is chosen from


@dataclass
class LengthPredictor:
    """Target-length prediction in the spirit of Eq. 5: a linear map of mean-pooled prompt states.

    Eq. 5 classifies over lengths; this regresses (ridge on standardised features, α chosen by 5-fold
    cross-validation over :data:`RIDGE_ALPHAS` unless ``ridge`` is given), then adds ``offset`` (the paper
    tunes an offset on validation, e.g. -20 for WP) and clips to ``[1, max_length]``.
    """

    max_length: int
    offset: int = 0
    ridge: float | None = None
    model: object = field(default=None, repr=False)

    def fit(self, features: np.ndarray, lengths: Sequence[int]) -> "LengthPredictor":
        from sklearn.linear_model import Ridge, RidgeCV
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        features, lengths = np.asarray(features, dtype=float), np.asarray(lengths, dtype=float)
        if len(features) != len(lengths) or len(lengths) < 2:
            raise ValueError(f"features has {len(features)} rows and lengths {len(lengths)}; need the same number, at least 2")
        if self.ridge is None:
            folds = min(5, len(lengths))
            regressor = RidgeCV(alphas=RIDGE_ALPHAS, cv=folds if folds >= 2 else None, scoring="neg_mean_absolute_error")
        else:
            regressor = Ridge(alpha=self.ridge)
        self.model = make_pipeline(StandardScaler(), regressor).fit(features, lengths)
        return self

    @property
    def alpha(self) -> float:
        regressor = self.model[-1]
        return float(getattr(regressor, "alpha_", getattr(regressor, "alpha", float("nan"))))

    def predict(self, features: np.ndarray) -> np.ndarray:
        if self.model is None:
            raise ValueError("the LengthPredictor is not fitted; call fit(features, lengths) first")
        raw = self.model.predict(np.asarray(features, dtype=float)) + self.offset
        return np.clip(np.rint(raw), 1, self.max_length).astype(int)


@dataclass
class LengthScores:
    """Table 7 scored by length error on held-out prompts: per strategy the mean length, the mean |error| and its
    bootstrap interval, the per-prompt errors, and the cross-validated α."""

    table: object
    errors: dict
    alpha: float
    train_error: float
    n: int


def length_strategies(train_features, train_lengths, test_features, test_lengths, *, max_length: int,
                      resamples: int = 1000, seed: int = 0) -> LengthScores:
    """Table 7's strategies scored by length error on held-out prompts: a fixed length (the training median, which
    minimises the mean absolute error on the training set) and the cross-validated predictor."""
    import pandas as pd

    train_lengths, test_lengths = np.asarray(train_lengths), np.asarray(test_lengths)
    fixed = int(np.clip(round(float(np.median(train_lengths))), 1, max_length))
    predictor = LengthPredictor(max_length=max_length).fit(train_features, train_lengths)
    predicted = predictor.predict(test_features)
    errors = {"Fixed": np.abs(test_lengths - fixed).astype(float), "Prediction": np.abs(test_lengths - predicted).astype(float)}
    rows = {"Ground truth": {"mean length": float(test_lengths.mean()), "mean |error|": 0.0, "low": 0.0, "high": 0.0}}
    for name, lengths in (("Fixed", np.full_like(test_lengths, fixed)), ("Prediction", predicted)):
        value, low, high = metrics.bootstrap_interval(errors[name], resamples=resamples, seed=seed)
        rows[name] = {"mean length": float(np.mean(lengths)), "mean |error|": value, "low": low, "high": high}
    train_error = float(np.abs(train_lengths - predictor.predict(train_features)).mean())
    return LengthScores(pd.DataFrame(rows).T, errors, predictor.alpha, train_error, len(test_lengths))


def continuation_lengths(tokenizer, examples: Sequence[PromptExample], max_length: int) -> np.ndarray:
    """Each human continuation's length in tokens, capped at ``max_length`` (the length to predict)."""
    return np.array([min(len(tokenizer(example.continuation, add_special_tokens=False).input_ids), max_length)
                     for example in examples])


def length_experiment(backend: MaskedLM, train_examples: Sequence[PromptExample], test_examples: Sequence[PromptExample],
                      settings: OpenLTGSettings, *, max_length: int | None = None):
    """Table 7's strategies on held-out prompts: the true lengths, a fixed length (training median) and Eq. 5's
    predictor (ridge, α cross-validated), scored by length error with bootstrap intervals (:class:`LengthScores`)."""
    max_length = max_length or backend.max_positions - settings.max_prompt_tokens - 2
    encode = lambda examples: [backend.encode(example.prompt, settings.max_prompt_tokens) for example in examples]
    return length_strategies(prompt_features(backend, encode(train_examples), batch_size=settings.batch_size),
                             continuation_lengths(backend.tokenizer, train_examples, max_length),
                             prompt_features(backend, encode(test_examples), batch_size=settings.batch_size),
                             continuation_lengths(backend.tokenizer, test_examples, max_length), max_length=max_length)
