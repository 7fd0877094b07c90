"""Notebook 03's data for the three views (§3.3, App. A): packed token blocks for x^m, training sentences for x and
their positives x^+ (a paraphraser's, else word deletion and a crop drawn per step), and Fig. 4's small examples of
the three views for drawing. Read through :mod:`.experiment`, which re-exports it."""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import torch
from tqdm.auto import tqdm

from ... import data as D
from ... import masks as M
from ... import models, store
from ...checks import real_number
from ...seeds import seeded_generator
from .mechanism import encode_sentences, masked_view
from .settings import SETTINGS, MagnetSettings


@dataclass(frozen=True)
class JointData:
    """What joint training draws its views from: packed token ``blocks`` for x^m, ``sentences`` for x and x^+,
    and ``paraphrases`` of those sentences as x^+ (None: the :func:`augment` view is drawn per step)."""

    blocks: torch.Tensor
    sentences: list[str]
    paraphrases: list[str] | None


def joint_data(profile, settings: MagnetSettings, tokenizer) -> JointData:
    """App. A's data on the profile's corpus: blocks of ``seq_len`` tokens from the training split, training lines of
    more than ``sscl_min_words`` words, and their paraphrases where ``settings.positives`` asks for them."""
    blocks = D.token_blocks(tokenizer, (p.text for p in D.load_paragraphs(profile.corpus, "train")), settings.seq_len,
                            max_blocks=settings.train_blocks)
    sentences = sscl_sentences(profile.corpus, "train", min_words=settings.sscl_min_words, limit=settings.sscl_pool)
    return JointData(blocks, sentences, positive_pool(sentences, settings))


def sscl_sentences(corpus: str, split: str, *, min_words: int, limit: int) -> list[str]:
    """SSCL training sentences: App. A uses lines of more than 20 words."""
    texts = [s.text for s in D.load_sentences(corpus, split, min_words=min_words + 1, limit=limit)]
    if len(texts) < 2:
        raise ValueError(f"corpus={corpus!r} split={split!r} has {len(texts)} sentences of more than {min_words} words")
    return texts


def augment(text: str, generator: torch.Generator, delete_prob: float = 0.1, crop_min: float = 0.8) -> str:
    """The offline positive x^+: word deletion (each word with ``delete_prob``) then a random crop keeping
    at least ``crop_min`` of the words. It stands in for the paper's paraphraser (Parrot) where none loads."""
    real_number(delete_prob, "delete_prob", low=0.0, high=1.0, high_open=True, what="the chance to drop each word")
    real_number(crop_min, "crop_min", low=0.0, high=1.0, low_open=True, what="the least share of words a crop keeps")
    words = text.split()
    if len(words) < 2:
        return text
    keep = max(1, math.ceil(crop_min * len(words)))
    width = int(torch.randint(keep, len(words) + 1, (1,), generator=generator))
    start = int(torch.randint(0, len(words) - width + 1, (1,), generator=generator))
    cropped = words[start:start + width]
    drops = torch.rand(len(cropped), generator=generator) < delete_prob
    kept = [word for word, dropped in zip(cropped, drops.tolist()) if not dropped]
    return " ".join(kept or cropped[:1])


def paraphrase(texts: Sequence[str], model_name: str, *, batch_size: int = 32, max_new_tokens: int = 96,
               device=None) -> list[str]:
    """Paraphrases from a seq2seq paraphraser (the paper uses Parrot, Damodaran 2021), cached on disk.

    Raises :class:`helpers.models.MissingAssetError` when the model cannot be loaded (offline).
    """
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from ...device import get_device
    cache = store.cache_path_for("paraphrases", {"texts": store.texts_digest(texts), "model": model_name,
                                                 "max_new_tokens": max_new_tokens}, ".json")
    if cache.exists():
        return store.read_json(cache)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_name)
        model = AutoModelForSeq2SeqLM.from_pretrained(model_name)
    except Exception as error:  # offline or unknown id
        raise models.MissingAssetError(f"could not load the paraphraser {model_name!r}: {error}") from error
    device = device or get_device()
    model = model.to(device).eval()
    out: list[str] = []
    for first in tqdm(range(0, len(texts), batch_size), desc="paraphrasing"):
        chunk = [f"paraphrase: {text}" for text in texts[first:first + batch_size]]
        inputs = tokenizer(chunk, return_tensors="pt", padding=True, truncation=True, max_length=128).to(device)
        with torch.no_grad():
            generated = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1)
        out.extend(tokenizer.batch_decode(generated, skip_special_tokens=True))
    store.write_json(cache, out)
    return out


def positive_pool(texts: Sequence[str], settings: MagnetSettings) -> list[str] | None:
    """Paraphrases of ``texts`` when ``settings.positives == "paraphrase"`` and the paraphraser loads; else None
    (the augmentation of :func:`augment` is then drawn per step)."""
    if settings.positives != "paraphrase":
        return None
    try:
        return paraphrase(list(texts), settings.paraphraser)
    except models.MissingAssetError as error:
        warnings.warn(f"{error}; SSCL positives fall back to word deletion and cropping", stacklevel=2)
        return None


# --------------------------------------------------------------------------- Fig. 4: three views of small examples

def three_views(tokenizer, block_text: str, sentence: str, *, length: int, spans: Sequence[tuple[int, int]],
                mask_id: int, seed: int = 0, settings: MagnetSettings | None = None) -> dict:
    """Fig. 4's three views of small examples, for drawing: x^m (hybrid mask, corrupted context, spans)
    from ``block_text``, and x, x^+ (bidirectional, instruction + sentence + EOS) from ``sentence``.

    Each entry holds ``ids`` (what the model reads), ``mask`` (a :class:`~helpers.masks.Mask`) and, for
    x^m, the original ids, the spans and both label rows.
    """
    settings = settings or SETTINGS["cpu"]
    ids = tokenizer(block_text, add_special_tokens=False, return_tensors="pt").input_ids[:, :length]
    if ids.shape[1] < length:
        raise ValueError(f"block_text has {ids.shape[1]} tokens, fewer than length={length}")
    generator = seeded_generator(seed)
    view = masked_view(ids, [spans], mask_id=mask_id, vocab_size=len(tokenizer), special_ids=tokenizer.all_special_ids,
                       generator=generator)
    positive = augment(sentence, generator, settings.delete_prob, settings.crop_min)
    out = {"x^m": {"ids": view["input_ids"][0], "original": ids[0], "spans": view["spans"][0],
                   "mntp_labels": view["mntp_labels"][0], "msg_labels": view["msg_labels"][0],
                   "mask": M.magnet(view["spans"][0])}}
    for name, text in (("x", sentence), ("x^+", positive)):
        encoded = encode_sentences(tokenizer, [text], max_len=settings.sscl_max_len)
        out[name] = {"ids": encoded["input_ids"][0], "text": text, "mask": M.bidirectional}
    return out


def display_examples(corpus: str, *, block_words: int = 40, sentence_words: tuple[int, int] = (8, 14)) -> tuple[str, str]:
    """A held-out paragraph long enough for a small x^m and a short sentence for x and x^+ (Fig. 4 drawing)."""
    paragraphs = D.load_paragraphs(corpus, "validation")
    block = next(p.text for p in paragraphs if len(p.text.split()) >= block_words)
    low, high = sentence_words
    sentence = next(s.text for s in D.load_sentences(corpus, "validation") if low <= len(s.text.split()) <= high)
    return block, sentence
