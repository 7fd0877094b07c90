"""§3.1 data for notebook 04: words with IOB2 tags, encoded with the first sub-token of each word labelled (App. A.4).

The paper uses CoNLL-2003 (the ``gpu`` and ``paper`` profiles load it from the Hub); offline, the ``cpu`` and
``smoke`` profiles label sentences of the profile's corpus with spaCy: silver NER folded onto CoNLL's four types,
and silver noun chunks.
"""
from __future__ import annotations

import hashlib
import random
import warnings
from dataclasses import dataclass
from typing import Iterable, Sequence

import torch

from ... import data, metrics
from ...padding import padded
from .mechanism import IGNORE_INDEX
from .settings import TASKS, RepetitionSettings


@dataclass(frozen=True)
class TaggedSentence:
    words: tuple[str, ...]
    tags: tuple[str, ...]


@dataclass(frozen=True)
class EncodedSentence:
    """Sub-token ids of a sentence, where each (kept) word starts, and the word's IOB2 tag."""

    input_ids: tuple[int, ...]
    word_starts: tuple[int, ...]
    words: tuple[str, ...]
    tags: tuple[str, ...]


def encode_words(tokenizer, words: Sequence[str], max_tokens: int = 256) -> tuple[list[int], list[int]]:
    """Token ids of ``" ".join(words)`` (with the tokenizer's special tokens) and each word's first sub-token.

    Words whose first sub-token falls beyond ``max_tokens`` are dropped (App. A.4 caps sequences at 256).
    """
    if not words:
        raise ValueError("words is empty; a sentence needs at least one word")
    text, starts_in_text, cursor = "", [], 0
    for index, word in enumerate(words):
        if index:
            text += " "
        starts_in_text.append(len(text))
        text += word
    encoding = tokenizer(text, return_offsets_mapping=True, truncation=True, max_length=max_tokens)
    ids, offsets = list(encoding["input_ids"]), list(encoding["offset_mapping"])
    starts = []
    for start in starts_in_text:
        while cursor < len(offsets) and (offsets[cursor][1] <= start or offsets[cursor][0] == offsets[cursor][1]):
            cursor += 1
        if cursor >= len(offsets):
            break
        starts.append(cursor)
    return ids, starts


def encode_sentences(tokenizer, sentences: Sequence[TaggedSentence], max_tokens: int) -> list[EncodedSentence]:
    out = []
    for sentence in sentences:
        ids, starts = encode_words(tokenizer, sentence.words, max_tokens)
        if starts:
            kept = len(starts)
            out.append(EncodedSentence(tuple(ids), tuple(starts), tuple(sentence.words[:kept]), tuple(sentence.tags[:kept])))
    return out


def label_vocabulary(tag_sequences: Iterable[Sequence[str]]) -> tuple[str, ...]:
    """'O' first, then every B-X/I-X pair that occurs, sorted by type."""
    tag_sequences = [list(tags) for tags in tag_sequences]
    if not any(tag_sequences):
        raise ValueError("tag_sequences is empty; a label set needs at least one tagged sentence")
    for index, tags in enumerate(tag_sequences):
        for position, tag in enumerate(tags):
            if not isinstance(tag, str) or not (tag == "O" or tag[:2] in ("B-", "I-") and len(tag) > 2):
                raise ValueError(f"tag_sequences[{index}][{position}]={tag!r} is not an IOB2 tag ('O', 'B-X', 'I-X')")
    types = sorted({tag[2:] for tags in tag_sequences for tag in tags if tag != "O"})
    return ("O",) + tuple(f"{prefix}-{name}" for name in types for prefix in ("B", "I"))


def collate(sentences: Sequence[EncodedSentence], labels: Sequence[str], pad_id: int) -> dict:
    """Right-padded ``input_ids``/``padding_mask`` and ``labels``: the tag id on each word's first sub-token, -100
    elsewhere (App. A.4)."""
    if len(sentences) == 0:
        raise ValueError("sentences is empty; collate needs at least one encoded sentence (encode_sentences)")
    index = {label: i for i, label in enumerate(labels)}
    input_ids, padding_mask = padded([sentence.input_ids for sentence in sentences], pad_id)
    targets = torch.full_like(input_ids, IGNORE_INDEX)
    for row, sentence in enumerate(sentences):
        targets[row, list(sentence.word_starts)] = torch.tensor([index.get(tag, 0) for tag in sentence.tags])
    return {"input_ids": input_ids, "padding_mask": padding_mask, "labels": targets}


@dataclass
class TaggingData:
    """One task's encoded splits and its label set."""

    task: str
    labels: tuple[str, ...]
    train: list[EncodedSentence]
    validation: list[EncodedSentence]
    test: list[EncodedSentence]
    pad_id: int

    def fingerprint(self) -> str:
        """What of the data changes a trained tagger: the training and validation splits (validation picks the
        scored step) and the label set (the head's size). The test split is only scored, so a larger one finds the
        same runs."""
        digest = hashlib.md5()
        for split in (self.train, self.validation):
            for sentence in split:
                digest.update(repr((sentence.input_ids, sentence.tags)).encode())
        digest.update(repr(self.labels).encode())
        return digest.hexdigest()[:12]

    def test_fingerprint(self) -> str:
        """The test split's own fingerprint: a finished run scored on another test split is scored again."""
        digest = hashlib.md5()
        for sentence in self.test:
            digest.update(repr((sentence.input_ids, sentence.tags)).encode())
        return digest.hexdigest()[:12]


# spaCy's OntoNotes types folded into CoNLL-2003's four (§3.1); numbers, dates and amounts are not entities there.
SILVER_TO_CONLL = {"PERSON": "PER", "ORG": "ORG", "GPE": "LOC", "LOC": "LOC", "FAC": "LOC", "NORP": "MISC",
                   "EVENT": "MISC", "WORK_OF_ART": "MISC", "LAW": "MISC", "LANGUAGE": "MISC", "PRODUCT": "MISC"}


def conll_types(tags: Sequence[str]) -> tuple[str, ...]:
    """Silver OntoNotes IOB2 tags mapped onto CoNLL-2003's PER/ORG/LOC/MISC; other types become O."""
    out = []
    for tag in tags:
        kind = SILVER_TO_CONLL.get(tag[2:]) if tag != "O" else None
        out.append(f"{tag[:2]}{kind}" if kind else "O")
    # an I- whose entity start was dropped cannot happen: spaCy entities keep one type across B/I
    return tuple(out)


def _silver_split(corpus: str, split: str, count: int | None, settings: RepetitionSettings, task: str,
                  seed: int, progress: bool = True) -> list[TaggedSentence]:
    texts = [s.text for s in data.load_sentences(corpus, split, min_words=settings.min_words)
             if len(s.text.split()) <= settings.max_words]
    random.Random(seed).shuffle(texts)
    wanted = len(texts) if count is None else count
    pool = texts[:wanted * (4 if task == "ner" else 1)]  # about one short Austen sentence in three names an entity
    labelled = data.silver_labels(pool, progress=progress)
    tagged = [TaggedSentence(tuple(s.words), conll_types(s.ner) if task == "ner" else tuple(s.chunks))
              for s in labelled if s.words]
    if task == "ner":
        tagged = [s for s in tagged if any(tag != "O" for tag in s.tags)]
    return tagged[:wanted]


CONLL2003_SIZES = {"train": 14041, "validation": 3250, "test": 3453}  # sentences per split (§3.1, Table 4)


def conll2003_sentences(split: str, limit: int | None = None) -> list[TaggedSentence]:
    """CoNLL-2003 NER (§3.1) as IOB2 tag strings, through the one loader in :func:`helpers.data.conll2003`."""
    return [TaggedSentence(s.words, s.ner) for s in data.conll2003(split, limit)]


def load_tagging_data(tokenizer, task: str, settings: RepetitionSettings, corpus: str = "austen",
                      seed: int = 0, progress: bool = True) -> TaggingData:
    """§3.1 data for ``task``: spaCy silver NER or noun-chunk IOB2 tags on ``corpus`` (train/validation/test
    splits), or CoNLL-2003 NER from the Hub; encoded with the first sub-token of each word labelled. ``seed`` draws
    the training and validation sentences; the test sentences are drawn with :data:`helpers.metrics.EXAMPLES_SEED`,
    so every seed of a study scores the same ones."""
    if task not in TASKS:
        raise ValueError(f"task={task!r} is not one of {TASKS}")
    counts = {"train": settings.train_sentences, "validation": settings.validation_sentences,
              "test": settings.test_sentences}
    splits = None
    if settings.dataset == "conll2003":
        if task != "ner":
            raise ValueError(f"task={task!r}: the CoNLL-2003 path of notebook 04 labels NER only")
        try:
            splits = {name: conll2003_sentences(name, count) for name, count in counts.items()}
        except data.MissingAssetError as error:
            warnings.warn(f"CoNLL-2003 is unavailable, so notebook 04 falls back to spaCy silver NER on corpus={corpus!r} "
                          f"(CoNLL-sized splits); its F1 are then not CoNLL-2003 scores. Cause: {error}", stacklevel=2)
            counts = {name: CONLL2003_SIZES[name] if count is None else count for name, count in counts.items()}
    if splits is None:
        splits = {name: _silver_split(corpus, name, count, settings, task,
                                      metrics.EXAMPLES_SEED if name == "test" else seed, progress)
                  for name, count in counts.items()}
    encoded = {name: encode_sentences(tokenizer, sentences, settings.max_tokens) for name, sentences in splits.items()}
    for name, sentences in encoded.items():
        if not sentences:
            raise ValueError(f"split={name!r} of task={task!r} is empty; raise its sentence count in the settings")
    labels = label_vocabulary(s.tags for split in encoded.values() for s in split)
    return TaggingData(task, labels, encoded["train"], encoded["validation"], encoded["test"], int(tokenizer.pad_token_id))
