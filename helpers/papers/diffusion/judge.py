"""Notebook 07's judges against the human continuations of the same prompts.

The causal judge's perplexity (notebook 05's) rewards repeated text: a sampler that loops gets a low perplexity. Two
judges that compare with what a human wrote after the same prompt instead:

- **MAUVE** (Pillutla et al., NeurIPS 2021, arXiv 2102.01454, §3) for rows that compare samplers on one model:
  embed every continuation, quantise the generated and the human embeddings jointly with k-means, read the two
  histograms P (generated) and Q (human), and integrate the divergence curve of the mixtures
  ``R_λ = λ P + (1 - λ) Q``: the points ``(exp(-c KL(Q | R_λ)), exp(-c KL(P | R_λ)))``, ``c = 5``; MAUVE is the
  area under that curve. Identical distributions give 1, disjoint ones about 0; a sampler whose texts collapse onto a
  few repeated modes covers little of Q and scores lower. The arithmetic follows the authors' package
  ``mauve-text`` 0.4.0 (``compute_mauve``: 25 mixture weights in ``[1e-6, 1 - 1e-6]``, the two extreme points,
  the mean of the two trapezoid areas; l2-normalised features, PCA to 90 % of the variance, ``max(2, n / 10)``
  k-means buckets), tested against it on the same histograms; the k-means here is scikit-learn's (the package
  uses faiss), and exact ties on the curve are walked along the frontier (:func:`_area`). One more departure: every row of the table and the human row are quantised **together, once**, so two
  samplers are compared on the same buckets and the paired bootstrap over prompts (:meth:`MauveJudge.difference`)
  resamples the prompts, with the buckets held fixed.
- **The masked model's likelihood of the human continuation** for rows that compare models (the corruption
  switch): :func:`.mechanism_likelihood.continuation_bound`, LLaDA Eq. 6 given the prompt.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from ... import metrics, models
from ...checks import whole_number

MAUVE_SCALING = 5.0  # c in exp(-c KL) (MAUVE §3; mauve-text's mauve_scaling_factor)
MIXTURE_POINTS = 25  # λ on a grid of this many points (mauve-text's divergence_curve_discretization_size)
EXPLAINED_VARIANCE = 0.9  # PCA keeps the components that explain this share (mauve-text's kmeans_explained_var)
KMEANS_RESTARTS = 5  # mauve-text's kmeans_num_redo
KMEANS_ITERATIONS = 500  # mauve-text's kmeans_max_iter


def kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """``KL(p | q) = Σ p log(p / q)`` of two histograms; infinite where p has mass that q lacks."""
    if np.any((p > 0) & (q == 0)):
        return float("inf")
    keep = (p > 0) & (q > 0)
    return float(np.sum(p[keep] * np.log(p[keep] / q[keep])))


def divergence_curve(p: np.ndarray, q: np.ndarray, *, scaling: float = MAUVE_SCALING,
                     points: int = MIXTURE_POINTS) -> np.ndarray:
    """MAUVE's divergence curve (§3, Eq. 1-2): for ``R_λ = λ p + (1 - λ) q`` on ``points`` weights λ in
    ``[1e-6, 1 - 1e-6]``, the points ``(exp(-c KL(q | R_λ)), exp(-c KL(p | R_λ)))``, between the extremes (1, 0)
    and (0, 1). Shape ``(points + 2, 2)``."""
    curve = [(0.0, float("inf"))]
    for weight in np.linspace(1e-6, 1 - 1e-6, points):
        mixture = weight * p + (1 - weight) * q
        curve.append((kl_divergence(q, mixture), kl_divergence(p, mixture)))
    curve.append((float("inf"), 0.0))
    return np.exp(-scaling * np.asarray(curve))


def _area(x: np.ndarray, y: np.ndarray) -> float:
    """Trapezoid area under the curve walked along the frontier: ``x`` rising, and among equal ``x`` the higher
    ``y`` first (mauve-text sorts by ``x`` alone, so exact ties, as for two identical histograms, come out in
    argsort's order: it gives 0.75 for P = Q = (0.5, 0.5), where the definition gives 1)."""
    order = np.lexsort((-y, x))
    return float(np.trapezoid(y[order], x[order]))


def mauve_of_histograms(p: np.ndarray, q: np.ndarray, *, scaling: float = MAUVE_SCALING,
                        points: int = MIXTURE_POINTS) -> float:
    """MAUVE of two histograms over the same buckets: the area under :func:`divergence_curve` (the mean of the
    trapezoid areas taken along either axis, as mauve-text computes it)."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    if p.shape != q.shape or p.ndim != 1:
        raise ValueError(f"p has shape {p.shape} and q {q.shape}; MAUVE needs two histograms over the same buckets")
    if p.sum() <= 0 or q.sum() <= 0:
        raise ValueError(f"p sums to {p.sum()} and q to {q.sum()}; both histograms need mass")
    x, y = divergence_curve(p / p.sum(), q / q.sum(), scaling=scaling, points=points).T
    return 0.5 * (_area(x, y) + _area(y, x))


def default_buckets(texts_per_set: int) -> int:
    """mauve-text's rule: one bucket per ten texts, at least two (``num_buckets='auto'``)."""
    return max(2, int(round(texts_per_set / 10)))


def quantize(features: dict[str, np.ndarray], *, buckets: int | None = None, seed: int = 0) -> tuple[dict, int]:
    """Every set's bucket per text, from one k-means over all sets together (MAUVE §3's joint quantisation): rows
    l2-normalised, PCA to :data:`EXPLAINED_VARIANCE` of the variance, k-means with ``buckets`` centres
    (:func:`default_buckets` of the smallest set when None). Returns (name -> labels, buckets)."""
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA

    if not features:
        raise ValueError("features is empty; MAUVE needs the generated and the human feature sets")
    names = list(features)
    arrays = [np.asarray(features[name], dtype=np.float64) for name in names]
    for name, array in zip(names, arrays):
        if array.ndim != 2 or len(array) == 0:
            raise ValueError(f"features[{name!r}] has shape {array.shape}; expected (texts, dimensions) with texts >= 1")
    buckets = default_buckets(min(len(array) for array in arrays)) if buckets is None else \
        whole_number(buckets, "buckets", 1, "k-means buckets")
    data = np.vstack(arrays)
    data = data / np.maximum(np.linalg.norm(data, axis=1, keepdims=True), 1e-12)
    if np.allclose(data, data[0]):
        labels = np.zeros(len(data), dtype=int)  # one point repeated: a single bucket holds everything
    else:
        pca = PCA(n_components=None, whiten=False, random_state=seed + 1).fit(data)
        keep = int(np.argmax(np.cumsum(pca.explained_variance_ratio_) >= EXPLAINED_VARIANCE)) + 1
        reduced = pca.transform(data)[:, :keep]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # fewer distinct points than buckets: some buckets stay empty
            labels = KMeans(n_clusters=min(buckets, len(data)), n_init=KMEANS_RESTARTS, max_iter=KMEANS_ITERATIONS,
                            random_state=seed + 2).fit_predict(reduced)
    out, start = {}, 0
    for name, array in zip(names, arrays):
        out[name] = labels[start:start + len(array)]
        start += len(array)
    return out, buckets


@dataclass
class MauveJudge:
    """Every row's buckets per prompt (the same prompts, in the same order, for every row) from one joint
    quantisation (:func:`quantize`), and the human row they are compared with. ``labels[name]`` has one bucket per
    prompt, or shape ``(prompts, draws)``: a row sampled several times per prompt. Draws are nested in prompts: a
    row's histogram counts every draw of the chosen prompts, and the bootstrap resamples prompts, each carrying all
    its draws (and its human text), so a draw never counts as another prompt."""

    labels: dict[str, np.ndarray]
    buckets: int
    reference: str
    resamples: int = 2000
    _intervals: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # row or pair -> interval

    def __post_init__(self):
        if self.reference not in self.labels:
            raise ValueError(f"reference={self.reference!r} is not among the rows {sorted(self.labels)}")
        labels = {name: np.asarray(found, dtype=int) for name, found in self.labels.items()}
        shapes = {name: found.shape for name, found in labels.items() if found.ndim not in (1, 2) or 0 in found.shape}
        if shapes:
            raise ValueError(f"labels {shapes} must each hold one bucket per prompt, or (prompts, draws) buckets")
        sizes = {name: len(found) for name, found in labels.items()}
        if len(set(sizes.values())) != 1:
            raise ValueError(f"rows have different numbers of prompts {sizes}; MAUVE's paired bootstrap needs the same prompts")
        self.labels = {name: found.reshape(len(found), -1) for name, found in labels.items()}

    @property
    def n(self) -> int:
        return len(self.labels[self.reference])

    @property
    def draws(self) -> int:
        """The most sampling draws per prompt of any row (1: one text per prompt everywhere)."""
        return max(found.shape[1] for found in self.labels.values())

    def histogram(self, name: str, prompts: Sequence[int] | None = None) -> np.ndarray:
        """Bucket counts of ``name`` over ``prompts`` (indices, repeats counted; all prompts when None), every draw
        of each prompt counted."""
        found = self.labels[name] if prompts is None else self.labels[name][np.asarray(prompts, dtype=int)]
        return np.bincount(found.ravel(), minlength=self.buckets).astype(float)

    def score(self, name: str, prompts: Sequence[int] | None = None) -> float:
        """MAUVE of ``name``'s texts against the human continuations of the same prompts."""
        return mauve_of_histograms(self.histogram(name, prompts), self.histogram(self.reference, prompts))

    def interval(self, name: str, *, seed: int = 0) -> tuple[float, float, float]:
        """``name``'s MAUVE with a percentile-bootstrap interval over prompts (its texts and the human ones of the
        resampled prompts together); computed once per row and seed (the table and the figure share it)."""
        if (name, seed) not in self._intervals:
            self._intervals[name, seed] = metrics.bootstrap_interval(
                range(self.n), lambda prompts: self.score(name, prompts), resamples=self.resamples, seed=seed)
        return self._intervals[name, seed]

    def difference(self, first: str, second: str, *, seed: int = 0) -> tuple[float, float, float]:
        """``MAUVE(first) - MAUVE(second)`` with a paired bootstrap over prompts: each resample draws prompts once
        and scores both rows, and the human row, on them; computed once per pair and seed (the judges' print and the
        claims share it)."""
        if ("-", first, second, seed) not in self._intervals:
            self._intervals["-", first, second, seed] = metrics.bootstrap_interval(
                range(self.n), lambda prompts: self.score(first, prompts) - self.score(second, prompts),
                resamples=self.resamples, seed=seed)
        return self._intervals["-", first, second, seed]

    @property
    def floor(self) -> float:
        """The least MAUVE these buckets allow: a row whose texts share no bucket with the human texts (MAUVE of two
        disjoint histograms, which depends on neither's shape)."""
        disjoint = np.zeros((2, max(self.buckets, 2)))
        disjoint[0, 0] = disjoint[1, 1] = 1.0
        return mauve_of_histograms(disjoint[0], disjoint[1])

    def shares_no_bucket(self, name: str) -> bool:
        """Whether ``name``'s texts fall only in buckets no human text falls in: its MAUVE is :attr:`floor` however
        its texts differ from another such row's, so the judge cannot rank two such rows."""
        return not np.isin(self.labels[name], self.labels[self.reference]).any()

    def cell(self, name: str, *, seed: int = 0) -> str:
        """``value [low, high]`` for a table; the human row itself is the reference."""
        if name == self.reference:
            return "reference"
        value, low, high = self.interval(name, seed=seed)
        return f"{value:.3f} [{low:.3f}, {high:.3f}]"


@torch.inference_mode()
def continuation_features(model, tokenizer, prompts: Sequence[str], continuations: Sequence[str]) -> np.ndarray:
    """One feature per continuation: the causal ``model``'s last-layer hidden states averaged over the
    continuation's tokens, with the prompt as left context (the continuation is tokenised as notebook 05's judge
    reads it, ``" " + text``). An empty continuation takes the prompt's last state."""
    if len(prompts) != len(continuations):
        raise ValueError(f"prompts has {len(prompts)} texts but continuations has {len(continuations)}")
    device = next(model.parameters()).device
    limit = models.max_positions(model)
    rows = []
    for prompt, continuation in zip(prompts, continuations):
        source = tokenizer(prompt, add_special_tokens=False).input_ids or \
            [tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id]
        target = tokenizer(" " + continuation.strip(), add_special_tokens=False).input_ids if continuation.strip() else []
        target = target[:max(limit - len(source), 0)]
        ids = torch.tensor([source + target], device=device)
        hidden = model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0].float()
        rows.append((hidden[len(source):] if target else hidden[-1:]).mean(0).cpu().numpy())
    return np.stack(rows)


def mauve_judge(systems: dict[str, Sequence[str]] | Sequence[dict[str, Sequence[str]]], prompts: Sequence[str], model,
                tokenizer, *, reference: str, seed: int = 0, resamples: int = 2000,
                buckets: int | None = None) -> MauveJudge:
    """Every row of ``systems`` (name -> one continuation per prompt; ``reference`` is the human row), or of every
    sampling draw (``systems[d][name]``, the same rows in every draw), embedded by :func:`continuation_features` and
    quantised together (:func:`quantize`). A row whose texts are the same in every draw (the human row) is embedded
    once and holds one bucket per prompt; the others hold one per prompt and draw (:class:`MauveJudge`)."""
    draws = [systems] if isinstance(systems, dict) else list(systems)
    if not draws:
        raise ValueError("systems is empty; give the texts of at least one sampling draw")
    names = list(draws[0])
    if any(list(draw) != names for draw in draws):
        raise ValueError(f"every draw must hold the same rows; got {[sorted(draw) for draw in draws]}")
    if reference not in names:
        raise ValueError(f"reference={reference!r} is not among the systems {sorted(names)}")
    features, shapes = {}, {}
    for name in names:
        texts = [list(draw[name]) for draw in draws]
        distinct = texts[:1] if all(found == texts[0] for found in texts) else texts
        embedded = [continuation_features(model, tokenizer, prompts, found) for found in distinct]
        features[name] = np.stack(embedded, axis=1).reshape(-1, embedded[0].shape[1])  # prompt-major: (n D, features)
        shapes[name] = (len(prompts), len(distinct))
    labels, buckets = quantize(features, buckets=buckets, seed=seed)
    return MauveJudge({name: found.reshape(shapes[name]) for name, found in labels.items()}, buckets, reference,
                      resamples=resamples)
