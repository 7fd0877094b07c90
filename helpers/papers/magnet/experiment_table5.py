"""Table 5 and Fig. 6 (§4.4): degeneration of open-ended greedy generation, measured by Rep-n (Rep-4 over a text's
token 4-grams, Rep-Sen over its sentences, Eq. 6). This is MAGNET's "repetition problem" of generated text, not
the sequence repetition of inputs that notebook 04 studies (a different paper)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ... import data as D
from ... import metrics, models
from ...padding import padded
from .settings import MagnetSettings

REP_METRICS = ("rep_sen", "rep_4")


def word_prefixes(corpus: str, split: str, *, count: int, words: int = 5) -> list[str]:
    """Wikitext-style prefixes: the first ``words`` words of held-out paragraphs (§4.4)."""
    out = [" ".join(p.text.split()[:words]) for p in D.load_paragraphs(corpus, split) if len(p.text.split()) > 2 * words]
    return out[:count]


def sentence_prefixes(corpus: str, split: str, *, count: int, max_words: int = 30) -> list[str]:
    """ROC-style prefixes: the first sentence of held-out paragraphs of several sentences (§4.4)."""
    out = []
    for paragraph in D.load_paragraphs(corpus, split):
        parts = D.split_sentences(paragraph.text)
        if len(parts) >= 2 and 4 <= len(parts[0].split()) <= max_words:
            out.append(parts[0])
    return out[:count]


def prefix_sets(corpus: str, settings: MagnetSettings) -> dict[str, list[str]]:
    """Table 5's two prefix sets from the test split: 5-word prefixes (Wikitext-103 style) and one-sentence prefixes
    (ROC Stories style), ``gen_prefixes`` of each."""
    return {"5-word prefixes": word_prefixes(corpus, "test", count=settings.gen_prefixes),
            "sentence prefixes": sentence_prefixes(corpus, "test", count=settings.gen_prefixes)}


@torch.no_grad()
def generate(model, tokenizer, prefixes: Sequence[str], *, max_new_tokens: int, batch_size: int = 32,
             progress: bool = False) -> list[dict]:
    """Greedy continuations under the causal mask (§3.1 mode 1), exactly ``max_new_tokens`` each (EOS is not
    allowed to end a text early, so every model is scored on equally long texts).

    Returns ``{"prefix", "continuation_ids", "text"}`` per prefix; ``text`` is prefix + continuation.
    """
    if not prefixes:
        raise ValueError("prefixes is empty")
    encoded = [tokenizer(prefix, add_special_tokens=False).input_ids for prefix in prefixes]
    for index, ids in enumerate(encoded):
        models.check_fits(model, len(ids) + max_new_tokens,
                          f"prefixes[{index}] has {len(ids)} tokens; with max_new_tokens={max_new_tokens} the length")
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id
    out = []
    for first in tqdm(range(0, len(encoded), batch_size), desc="generating", disable=not progress):
        chunk = encoded[first:first + batch_size]
        width = max(len(ids) for ids in chunk)
        input_ids, padding = (tensor.to(device) for tensor in padded(chunk, pad, left=True))
        generated = model.generate(input_ids=input_ids, attention_mask=padding, max_new_tokens=max_new_tokens,
                                   min_new_tokens=max_new_tokens, do_sample=False, num_beams=1, pad_token_id=pad)
        for row, prefix in enumerate(prefixes[first:first + batch_size]):
            continuation = generated[row, width:].tolist()
            out.append({"prefix": prefix, "continuation_ids": continuation,
                        "text": prefix + tokenizer.decode(continuation, skip_special_tokens=True)})
    return out


def per_text_rep_n(generations: Sequence[dict]) -> dict[str, list[float]]:
    """Rep-Sen and Rep-4 of §4.4 (Eq. 6) for each text: Rep-4 over the continuation's token 4-grams, Rep-Sen over
    the sentences of prefix + continuation (a model that repeats its prefix sentence, as in Table 11, counts)."""
    if not generations:
        raise ValueError("generations is empty")
    return {"rep_sen": [metrics.rep_sen(D.split_sentences(g["text"]) or [g["text"]]) for g in generations],
            "rep_4": [metrics.rep_n(g["continuation_ids"], 4) for g in generations]}


def degeneration_scores(generations: Sequence[dict]) -> dict:
    """Rep-Sen and Rep-4 (:func:`per_text_rep_n`) averaged over texts, plus corpus-level distinct-4."""
    per_text = per_text_rep_n(generations)
    return {"rep_sen": float(np.mean(per_text["rep_sen"])), "rep_4": float(np.mean(per_text["rep_4"])),
            "distinct_4": float(metrics.distinct_n([g["continuation_ids"] for g in generations], 4))}


def degeneration_difference(generations: dict, first: str, second: str, metric: str, *, sets: Sequence[str] | None = None,
                            resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean over prefixes of ``metric`` ("rep_sen" or "rep_4") of model ``first`` minus model ``second`` (same
    prefixes, pooled over ``sets``, default all), with its paired bootstrap interval over prefixes."""
    if metric not in REP_METRICS:
        raise ValueError(f"metric={metric!r} is not one of {REP_METRICS}")
    sets = list(sets or dict.fromkeys(set_name for _, set_name in generations))
    values = {}
    for model in (first, second):
        missing = [set_name for set_name in sets if (model, set_name) not in generations]
        if missing:
            raise ValueError(f"generations has no texts of model {model!r} for {missing}")
        values[model] = [v for set_name in sets for v in per_text_rep_n(generations[(model, set_name)])[metric]]
    return metrics.paired_difference_interval(values[first], values[second], resamples=resamples, seed=seed)


def degeneration_raise_margin(generations: dict, model: str, reference: str, base: str, metric: str, share: float,
                              *, sets: Sequence[str] | None = None, resamples: int = 2000, seed: int = 0
                              ) -> tuple[float, float, float]:
    """Table 5's "MAGNET raises repetition much less" as a margin: the mean over prefixes of
    (``model`` - ``base``) - ``share`` x (``reference`` - ``base``), with its paired bootstrap interval over prefixes.

    Below 0 exactly when ``model``'s raise is less than ``share`` of ``reference``'s. Unlike the ratio of the two
    raises, the margin is defined on every seed (also where ``reference`` raises nothing), so a seed study can
    average it."""
    if metric not in REP_METRICS:
        raise ValueError(f"metric={metric!r} is not one of {REP_METRICS}")
    if not 0 < share <= 1:
        raise ValueError(f"share={share!r} must lie in (0, 1]")
    sets = list(sets or dict.fromkeys(set_name for _, set_name in generations))
    values = {}
    for name in (model, reference, base):
        missing = [set_name for set_name in sets if (name, set_name) not in generations]
        if missing:
            raise ValueError(f"generations has no texts of model {name!r} for {missing}")
        values[name] = np.array([v for set_name in sets for v in per_text_rep_n(generations[(name, set_name)])[metric]])
    return metrics.paired_difference_interval(values[model] - values[base], share * (values[reference] - values[base]),
                                              resamples=resamples, seed=seed)


def fig6_evaluation(profile, settings: MagnetSettings, tokenizer) -> tuple[list[str], Callable]:
    """Fig. 6's evaluation during training: the validation 5-word prefixes (``settings.curve_prefixes``) and the
    evaluator that scores the repetition of their greedy generations at every evaluation of a joint run. The one
    definition notebook 03 and ``python -m helpers.train magnet`` both train with, so their records agree."""
    prefixes = word_prefixes(profile.corpus, "validation", count=settings.curve_prefixes)
    return prefixes, degeneration_evaluator(tokenizer, prefixes, settings.gen_new_tokens)


def degeneration_evaluator(tokenizer, prefixes: Sequence[str], max_new_tokens: int) -> Callable:
    """An ``evaluate(model)`` for :func:`helpers.training.train`: Fig. 6's Rep-n at each evaluation step."""
    def evaluate(model) -> dict:
        return degeneration_scores(generate(model, tokenizer, prefixes, max_new_tokens=max_new_tokens))

    return evaluate


def degeneration_table(named_models: dict, tokenizer, prefix_sets: dict, *, max_new_tokens: int, batch_size: int = 32,
                       progress: bool = True):
    """Table 5: one row per model, (Rep-Sen, Rep-4) per prefix set; returns (DataFrame, generations), the
    generations keyed by (model, prefix set) for per-prefix intervals (:func:`degeneration_difference`)."""
    import pandas as pd

    rows, generations = {}, {}
    for name, model in tqdm(named_models.items(), desc="Table 5 models", disable=not progress):
        row = {}
        pooled = [prefix for prefixes in prefix_sets.values() for prefix in prefixes]  # one call: fewer, fuller batches
        texts_of_model = generate(model, tokenizer, pooled, max_new_tokens=max_new_tokens, batch_size=batch_size)
        first = 0
        for set_name, prefixes in prefix_sets.items():
            texts = texts_of_model[first:first + len(prefixes)]
            first += len(prefixes)
            generations[(name, set_name)] = texts
            scores = degeneration_scores(texts)
            row[(set_name, "Rep-Sen")], row[(set_name, "Rep-4")] = scores["rep_sen"], scores["rep_4"]
        rows[name] = row
    return pd.DataFrame(rows).T, generations


def fig6_curves(magnet_records: Sequence[dict], simcse_records: Sequence[dict], *, mntp_steps: int) -> dict:
    """Fig. 6's two lines from the runs' evaluation records.

    MAGNET: its own evaluations (step 0 is the base model). LLM2Vec-style: the base model at 0, then the
    SimCSE stage's evaluations shifted by the MNTP stage's length (its step 0 is the MNTP model).
    """
    def points(records, offset=0):
        return [{"step": r["step"] + offset, "rep_sen": r["rep_sen"], "rep_4": r["rep_4"]} for r in records if "rep_4" in r]

    magnet_points = points(magnet_records)
    base = [p for p in magnet_points if p["step"] == 0]
    return {"MAGNET": magnet_points, "LLM2Vec-style": base + points(simcse_records, mntp_steps)}
