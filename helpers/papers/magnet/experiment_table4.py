"""Table 4 (infilling perplexity over span tokens, §4.3) and Table 10 (greedy infillings): the data, the scores and
their bootstrap intervals over examples."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ... import data as D
from ... import metrics
from .experiment import bos_id
from .mechanism import check_spans, infill_span, masked_lm_reader, mode_mask, sample_spans, span_mask
from .settings import MagnetSettings


@dataclass(frozen=True)
class InfillExample:
    """One infilling item: ``ids`` starts with BOS; ``spans`` are the masked-out token spans (start >= 1)."""

    ids: torch.Tensor
    spans: tuple[tuple[int, int], ...]
    kind: str


def pieces_to_example(tokenizer, pieces: Sequence[str], masked: Sequence[int], kind: str) -> InfillExample:
    """Tokenize text pieces one by one (each after the first with a leading space) behind BOS; the
    pieces listed in ``masked`` become spans."""
    ids, spans = [bos_id(tokenizer)], []
    for index, piece in enumerate(pieces):
        piece_ids = tokenizer((" " if index else "") + piece, add_special_tokens=False).input_ids
        if index in masked:
            spans.append((len(ids), len(ids) + len(piece_ids)))
        ids.extend(piece_ids)
    return InfillExample(torch.tensor(ids), tuple(spans), kind)


def story_passages(corpus: str, split: str, *, count: int, sentences: int = 5, max_words: int = 110,
                   seed: int = 0) -> list[list[str]]:
    """ROC-style passages: ``sentences`` consecutive sentences of one paragraph, at most ``max_words`` words in all."""
    passages = []
    for paragraph in D.load_paragraphs(corpus, split):
        parts = D.split_sentences(paragraph.text)
        for first in range(0, len(parts) - sentences + 1, sentences):
            window = parts[first:first + sentences]
            if len(" ".join(window).split()) <= max_words and all(len(s.split()) >= 3 for s in window):
                passages.append(window)
    random.Random(seed).shuffle(passages)
    if not passages:
        raise ValueError(f"corpus={corpus!r} split={split!r} has no paragraph with {sentences} short sentences")
    return passages[:count]


def sentence_infilling_data(tokenizer, passages: Sequence[Sequence[str]], seed: int = 0,
                            max_span_tokens: int | None = None) -> list[InfillExample]:
    """Table 4, ROC Stories style: one randomly chosen sentence of each passage is masked out.

    With ``max_span_tokens`` (the ``span_max`` MSG trained on) only sentences of at most that many tokens are
    chosen; a passage without one is left out (MSG never saw a longer span).
    """
    chooser = random.Random(seed)
    examples = []
    for passage in passages:
        lengths = [len(tokenizer((" " if index else "") + sentence, add_special_tokens=False).input_ids)
                   for index, sentence in enumerate(passage)]
        allowed = [index for index, length in enumerate(lengths) if max_span_tokens is None or length <= max_span_tokens]
        if allowed:
            examples.append(pieces_to_example(tokenizer, passage, [chooser.choice(allowed)], "sentence"))
    if not examples:
        raise ValueError(f"no passage has a sentence of at most max_span_tokens={max_span_tokens} tokens")
    return examples


def block_infilling_data(tokenizer, texts: Sequence[str], *, block_len: int, count: int, max_spans: int = 3,
                         span_min: int = 8, span_max: int = 32, seed: int = 0) -> list[InfillExample]:
    """Table 4, Wikitext-103 style: blocks of ``block_len`` tokens with up to ``max_spans`` spans of ``span_min``-``span_max``.

    Blocks are packed paragraphs (``data.token_blocks``), but no span holds the EOS that separates two
    paragraphs: every scored span lies inside one paragraph (a separator inside a span is a token no model can
    guess, which dominated an earlier version of this table). Spans are redrawn until they avoid it.
    """
    blocks = D.token_blocks(tokenizer, texts, block_len)
    generator = torch.Generator().manual_seed(seed)
    bos = torch.tensor([bos_id(tokenizer)])
    separator = tokenizer.eos_token_id
    examples = []
    for block in blocks:
        for _ in range(100):
            spans = sample_spans(block_len, max_spans=max_spans, min_len=span_min, max_len=span_max, generator=generator)
            if not any((block[start:end] == separator).any() for start, end in spans):
                examples.append(InfillExample(torch.cat([bos, block]), tuple((s + 1, e + 1) for s, e in spans), "block"))
                break
        if len(examples) == count:
            break
    if not examples:
        raise ValueError(f"no block of {block_len} tokens has room for spans that avoid the paragraph separator")
    return examples


def infilling_sets(profile, settings: MagnetSettings, tokenizer) -> tuple[list[list[str]], dict[str, list[InfillExample]]]:
    """Table 4's two test sets on the profile's corpus: the ROC-style passages (returned too, for the widget), with the
    masked sentence no longer than the ``span_max`` tokens MSG trained on, and Wikitext-style blocks of
    ``infill_block_len`` tokens with ``infill_*`` spans. Passages and spans are drawn with
    :data:`helpers.metrics.EXAMPLES_SEED`, not ``profile.seed``: every seed of a study infills the same spans."""
    seed = metrics.EXAMPLES_SEED
    passages = story_passages(profile.corpus, "test", count=settings.infill_passages, max_words=settings.story_max_words,
                              seed=seed)
    sets = {
        "ROC Stories": sentence_infilling_data(tokenizer, passages, seed=seed, max_span_tokens=settings.span_max),
        "Wikitext-103": block_infilling_data(tokenizer, [p.text for p in D.load_paragraphs(profile.corpus, "test")],
                                             block_len=settings.infill_block_len, count=settings.infill_blocks,
                                             max_spans=settings.infill_max_spans, span_min=settings.infill_span_min,
                                             span_max=settings.infill_span_max, seed=seed),
    }
    return passages, sets


@torch.no_grad()
def span_perplexity(model, examples: Sequence[InfillExample], mode: str, *, progress: bool = True) -> dict:
    """Perplexity over the masked-out span tokens only (Table 4, following Donahue et al. 2020).

    ``mode="causal"``: the usual left-to-right model, which sees only the left context (and, for a later
    span, the true text of earlier spans). ``mode="magnet"``: the hybrid mask, span tokens see both sides.
    Returns the pooled ``ppl``, ``nll`` (per token) and ``tokens``, and per example its NLL sum and token count
    (``example_nll``, ``example_tokens``) for bootstrap intervals over examples.
    """
    if not examples:
        raise ValueError("examples is empty")
    reader = masked_lm_reader(model)
    sums, counts = [], []
    for example in tqdm(examples, desc=f"span perplexity ({mode})", disable=not progress):
        ids = example.ids[None].to(reader.device)
        spans = check_spans(example.spans, ids.shape[1], min_start=1)
        rows, cols = span_mask(ids.shape[1], spans)[None].nonzero(as_tuple=True)  # the span tokens' own columns
        logits = reader.predict(ids, torch.ones_like(ids), rows, cols, mask=mode_mask(mode, spans)).float()
        sums.append(float(F.cross_entropy(logits, ids[rows.to(ids.device), cols.to(ids.device)], reduction="sum")))
        counts.append(int(rows.numel()))
    total, count = sum(sums), sum(counts)
    return {"ppl": math.exp(total / count), "nll": total / count, "tokens": count, "example_nll": sums,
            "example_tokens": counts}


def infill_passage(models_by_mode: dict, tokenizer, passage: str, span_start: int, span_end: int) -> dict:
    """Mask words ``span_start:span_end`` of ``passage`` and infill them with each (name -> (model, mode)) entry.

    Returns the left context, the original words, the right context, each infill, and each model's
    span perplexity of the original words.
    """
    words = passage.split()
    if not 0 <= span_start < span_end <= len(words):
        raise ValueError(f"span_start={span_start}, span_end={span_end}: expected 0 <= start < end <= {len(words)} "
                         "(word indices of the passage)")
    pieces = [p for p in (" ".join(words[:span_start]), " ".join(words[span_start:span_end]),
                          " ".join(words[span_end:])) if p]
    masked = 1 if span_start > 0 else 0
    example = pieces_to_example(tokenizer, pieces, [masked], "passage")
    span = example.spans[0]
    out = {"left": " ".join(words[:span_start]), "original": " ".join(words[span_start:span_end]),
           "right": " ".join(words[span_end:]), "infills": {}, "ppl": {}}
    for name, (model, mode) in models_by_mode.items():
        out["infills"][name] = tokenizer.decode(infill_span(model, example.ids, span, mode)).strip()
        out["ppl"][name] = span_perplexity(model, [example], mode, progress=False)["ppl"]
    return out


def infilling_table(models_by_mode: dict, datasets: dict, *, progress: bool = True) -> dict:
    """Table 4: ``{dataset: {name: span_perplexity(...)}}`` for each ``name -> (model, mode)`` on each list of
    examples (pooled perplexity in ``["ppl"]``, per-example NLL for intervals)."""
    return {dataset: {name: span_perplexity(model, examples, mode, progress=progress)
                      for name, (model, mode) in models_by_mode.items()}
            for dataset, examples in datasets.items()}


def perplexity_interval(result: dict, *, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """``(ppl, low, high)``: pooled span perplexity and its bootstrap interval over examples."""
    replicates = metrics.ratio_replicates(result["example_nll"], result["example_tokens"], resamples=resamples, seed=seed)
    low, high = metrics.replicate_interval(replicates)
    return result["ppl"], math.exp(low), math.exp(high)


def nll_gain_interval(worse: dict, better: dict, *, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Paired bootstrap over examples of the per-token NLL that ``better`` saves against ``worse`` (same
    examples, same span tokens): ``(gain, low, high)`` in nats per token; > 0 means ``better`` predicts the spans
    better. The perplexity ratio better / worse is ``exp(-gain)``."""
    if worse["example_tokens"] != better["example_tokens"]:
        raise ValueError("worse and better were scored on different examples or spans; a paired gain needs the same ones")
    tokens = worse["example_tokens"]
    gains = [a - b for a, b in zip(worse["example_nll"], better["example_nll"])]
    replicates = metrics.ratio_replicates(gains, tokens, resamples=resamples, seed=seed)
    low, high = metrics.replicate_interval(replicates)
    return sum(gains) / sum(tokens), low, high


def infill_examples_table(models_by_mode: dict, tokenizer, examples: Sequence[InfillExample]):
    """Table 10 style: the passage with its gap, the original sentence, and each model's greedy infilling."""
    import pandas as pd

    rows = []
    for example in tqdm(examples, desc="infilling examples"):
        (start, end), = example.spans[:1]
        row = {"passage (gap = ___)": tokenizer.decode(example.ids[1:start]) + " ___ " + tokenizer.decode(example.ids[end:]),
               "original": tokenizer.decode(example.ids[start:end]).strip()}
        for name, (model, mode) in models_by_mode.items():
            row[name] = tokenizer.decode(infill_span(model, example.ids, (start, end), mode)).strip()
        rows.append(row)
    return pd.DataFrame(rows)
