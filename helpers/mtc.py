"""Multi-token completion (MTC) from a masked LM: phrase vocabulary, EMAT and GRU decoders, baselines.

Source: Kalinsky et al., "Simple and Effective Multi-Token Completion from Masked Language Models"
(seed 004). What lives here:

- **Data (§3):** a phrase vocabulary of spaCy noun chunks and entities (leading determiners trimmed)
  that occur at least ``k`` times, up to 50 masked sentences per phrase, train/dev/test 90/5/5, and an
  *unseen* test split of phrases that never occur as a label in train or dev. Cached under
  ``data/cache/mtc/`` with a manifest (counts, ``k``, the Table 1 distributions).
- **Features:** the frozen masked LM's contextual embedding at the mask, computed once and cached.
  Our masked LM is an MNTP decoder (MAGNET §3.2.1, notebook 02): the output at position l - 1
  predicts the token at l, so the feature is the last hidden state *before* the mask.
- **EMAT (§4.1):** the output matrix extended by one row per multi-token phrase (single-token phrases
  keep their original row); only the new rows are trained.
- **GRU decoder (§4.2):** the mask embedding is the GRU's first hidden state, the inputs are the static
  embedding of the preceding token and then of each generated token, and a feed-forward layer maps
  [GRU output; previous embedding; mask embedding] into the masked LM's own output matrix. Beam search
  until EOS.
- **Baselines (§5.1-5.2, Table 2):** single-token completion by the masked LM itself, and naive MTC,
  which predicts a length (1, 2, 3+) and fills one or two duplicated masks.
"""
from __future__ import annotations

import json
import math
import random
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from . import data, metrics, store
from .checks import real_number, whole_number
from .masked_lm import EncoderMLM, MaskedLM, MNTPDecoder
from .paths import cache_dir, runs_dir

MASK_MARKER = MaskedLM.MASK_MARKER  # "[MASK]"
KS = (1, 3, 5, 10, 50)
UNSEEN = "unseen"
MTC_SPLITS = ("train", "validation", "test", UNSEEN)
DATA_VERSION = "mtc-data-v3"  # v3: one masked span per sentence, pronoun phrases recorded
OCCURRENCES_VERSION = "mtc-occurrences-v2"  # v2: head-trimmed chunks, entities first, pronoun flag
FEATURES_VERSION = "mtc-features-v1"
HEADS_VERSION = "mtc-heads-v4"  # part of every runs/ folder name: a change to the heads starts fresh runs (v4: seeded init)
# spaCy coarse tags trimmed from the front of a phrase ("the", "a", "this", "every", ...), and
# punctuation / possessive markers trimmed from either end.
TRIMMED_LEADING_POS = frozenset({"DET", "PUNCT"})
TRIMMED_TRAILING_TAGS = frozenset({"POS"})
# The public code keeps these dependents with a noun chunk's head and drops everything before them.
HEAD_MODIFIER_DEPS = frozenset({"advmod", "amod", "compound"})
# Token-count and word-count buckets of Table 1.
LENGTH_BUCKETS = ("1", "2", "3", "4", "5", ">5")

# ---------------------------------------------------------------------------------------------
# The paper's numbers (seed 004), for the side-by-side tables.
# ---------------------------------------------------------------------------------------------

PAPER_TABLE1 = {  # % of phrases by number of BERT-cased tokens / words (Table 1)
    "tokens": {"1": 10.2, "2": 52.9, "3": 23.0, "4": 9.5, "5": 2.8, ">5": 1.6},
    "words": {"1": 53.3, "2": 38.3, "3": 5.4, "4": 2.1, "5": 0.5, ">5": 0.4},
}
PAPER_VOCABULARY = {"phrases": 93_000, "k": 500, "sentences per phrase": 50, "corpus words": 3.3e9}
PAPER_TABLE2 = {  # coverage %, then accuracy@k as (within coverage, over the whole test set), in %
    "BERT-cased": {"coverage": 13.8, 1: (13.5, 1.8), 3: (21.8, 3.0), 5: (25.9, 3.5), 10: (31.2, 4.3), 50: (43.1, 5.9)},
    "Naive-MTC-BERT": {"coverage": 66.1, 1: (6.6, 4.3), 3: (11.9, 7.8), 5: (14.9, 9.8), 10: (19.5, 12.8),
                       50: (32.3, 21.3)},
}
PAPER_LENGTH_CLASSIFIER_ACCURACY = 64.7
PAPER_TABLE3 = {  # accuracy@k in %, inference ms per sentence on an Nvidia T4 (Table 3)
    "BERT-Adapted-EMAT": {"ms": 15, 1: 12.64, 3: 20.48, 5: 24.63, 10: 30.65, 50: 45.85},
    "BERT-Adapted-RNN": {"ms": 44, 1: 9.24, 3: 14.64, 5: 17.39, 10: 21.32, 50: 31.28},
    "T5-3B": {"ms": 802, 1: 11.6, 3: 18.5, 5: 21.5, 10: 25.4, 50: float("nan")},
    "T5-base": {"ms": 224, 1: 5.2, 3: 8.3, 5: 9.7, 10: 11.4, 50: 15.6},
}


# ---------------------------------------------------------------------------------------------
# Settings per profile
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MTCSettings:
    """Sizes for notebook 06. ``min_count`` is the paper's k (§3: "We keep phrases appearing 500 times or more")."""

    corpus_sentences: int | None  # sentences run through spaCy, spread over the splits 90/5/5 (None: all)
    min_count: int  # k: keep phrases occurring at least this often in those sentences
    max_sentences_per_phrase: int = 50  # §3: "We sample 50 unique sentences containing each vocabulary-phrase"
    unseen_fraction: float = 0.05  # share of the vocabulary held out as never-seen phrases
    context_tokens: int = 24  # tokens kept on each side of the mask
    feature_batch_size: int = 32
    batch_size: int = 128  # App. C, Table 8 (both methods)
    lr: float = 1e-3  # App. C, Table 8 (both methods)
    emat_epochs: int = 2  # App. C, Table 8
    gru_epochs: int = 10  # App. C, Table 8
    gru_layers: int = 2  # App. C, Table 8
    gru_dropout: float = 0.2  # App. C, Table 8
    teacher_forcing: float = 0.5  # App. C, Table 8
    gru_pretrain_steps: int = 2000  # §4.2: "pre-train the generative model on a vanilla Language Modeling task" (batches)
    gru_pretrain_tokens: int = 24  # tokens per pre-training sentence (the public code cuts at the batch median)
    gru_train_embeddings: bool = True  # the public decoder trains its copy of the MLM's embeddings and output head
    length_epochs: int = 5  # naive MTC's length classifier (a linear probe on the frozen features)
    beam_size: int = 16
    naive_first_tokens: int = 100  # §5.2: "we replace the first mask with each of the top-100 predicted tokens"
    naive_second_tokens: int = 10
    eval_examples: int | None = None  # cap on the test and unseen sentences scored; None: all
    masked_lm: str | None = None  # a Hub encoder MLM (the paper: bert-base-cased); None: the profile's MNTP decoder
    latency_sentences: int = 20
    ks: tuple[int, ...] = KS
    seed: int = 0


SETTINGS = {
    # The same code paths at toy sizes, on the tiny random Llama.
    "smoke": MTCSettings(corpus_sentences=400, min_count=3, max_sentences_per_phrase=8, unseen_fraction=0.1,
                         context_tokens=12, feature_batch_size=16, batch_size=32, emat_epochs=1, gru_epochs=1,
                         length_epochs=1, beam_size=3, naive_first_tokens=3, naive_second_tokens=2,
                         eval_examples=8, latency_sentences=1, gru_pretrain_steps=2,
                         gru_pretrain_tokens=8),
    # SmolLM2-135M + the notebook-02 MNTP adapter on half of Austen, within 20 minutes on 2 cores: k = 60 leaves
    # ~170 phrases with 50 sentences each; the GRU gets 5 of the paper's 10 epochs.
    # SmolLM2-135M + the notebook-02 MNTP adapter on half of Austen: k = 10 with <= 20 sentences per phrase leaves
    # ~980 phrases and ~6.4K masked sentences (one per sentence); every method is scored on the whole test split.
    "cpu": MTCSettings(corpus_sentences=15_000, min_count=10, max_sentences_per_phrase=20, unseen_fraction=0.08,
                       context_tokens=12, gru_epochs=2, gru_pretrain_steps=20, gru_pretrain_tokens=8, beam_size=16,
                       naive_first_tokens=5, naive_second_tokens=5, latency_sentences=40),
    # The Hub model on 200K WikiText-103 sentences (~4M words); k = 50 keeps a few thousand phrases, 50 sentences each.
    "gpu": MTCSettings(corpus_sentences=200_000, min_count=50, context_tokens=48, feature_batch_size=128,
                       masked_lm="bert-base-cased",
                       beam_size=50, naive_first_tokens=100, naive_second_tokens=10,
                       latency_sentences=100),
    # The paper's hyperparameters; k = 500 per 3.3B words scaled to WikiText-103's 103M words is 16.
    "paper": MTCSettings(corpus_sentences=None, min_count=16, context_tokens=64, feature_batch_size=128,
                         masked_lm="bert-base-cased",
                         beam_size=50, naive_first_tokens=100, naive_second_tokens=100,
                         latency_sentences=200),
}


def _digest(*parts) -> str:
    return store.fingerprint(list(parts))


def _mtc_cache() -> Path:
    path = cache_dir() / "mtc"
    path.mkdir(parents=True, exist_ok=True)
    return path


# ---------------------------------------------------------------------------------------------
# §3 Completion vocabulary: spaCy noun chunks and entities, leading determiners trimmed
# ---------------------------------------------------------------------------------------------


def trim_span(span):
    """The span without leading determiners/punctuation and trailing punctuation/possessive "'s"; None if empty.

    Used for entities (§3: "considering phrases as NP-chunks or entities"); noun chunks are first cut to their
    head by :func:`head_of_chunk`.
    """
    doc, start, end = span.doc, span.start, span.end
    while start < end and (doc[start].pos_ in TRIMMED_LEADING_POS or doc[start].is_space):
        start += 1
    while end > start and (doc[end - 1].pos_ == "PUNCT" or doc[end - 1].tag_ in TRIMMED_TRAILING_TAGS
                           or doc[end - 1].is_space):
        end -= 1
    return doc[start:end] if start < end else None


def head_of_chunk(chunk):
    """A noun chunk cut to its head as the public code (after sense2vec) does: leading tokens are dropped until
    the first is a modifier kept with the head (dependency ``advmod``, ``amod`` or ``compound``) or only the
    head is left. "the old house" -> "old house", "her sister" -> "sister", "Mr. Darcy's estate" -> "estate"."""
    while len(chunk) > 1 and chunk[0].dep_ not in HEAD_MODIFIER_DEPS:
        chunk = chunk[1:]
    return chunk


def phrase_spans(doc) -> list[tuple[int, int, bool]]:
    """``(start, end, pronoun)`` character spans of one spaCy doc's phrases, each once, in text order.

    As the public code: entities (leading determiners and edge punctuation trimmed, :func:`trim_span`), and
    noun chunks cut to their head (:func:`head_of_chunk`) that share no token with an entity; overlapping
    spans of one kind are resolved by ``spacy.util.filter_spans`` (longest first). ``pronoun`` marks a
    phrase made of pronouns only ("she", "them"), which §3's vocabulary keeps and we report separately.
    """
    from spacy.util import filter_spans

    entities = filter_spans([t for t in (trim_span(span) for span in doc.ents) if t is not None])
    entity_tokens = {token.i for span in entities for token in span}
    chunks = []
    for chunk in doc.noun_chunks:
        head = trim_span(head_of_chunk(chunk))
        if head is not None and not any(token.i in entity_tokens for token in head):
            chunks.append(head)
    spans = {(span.start_char, span.end_char, all(token.pos_ == "PRON" for token in span))
             for span in (*filter_spans(chunks), *entities)}
    return sorted(spans)


def extract_phrase_spans(texts: Sequence[str], progress: bool = True, batch_size: int = 64) -> list[list[tuple[int, int, bool]]]:
    """:func:`phrase_spans` for every text, with spaCy (``data.spacy_pipeline()``); cached on disk by the texts' hash."""
    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty; there is nothing to extract phrases from")
    path = _mtc_cache() / f"phrase-spans-{store.texts_digest(texts, OCCURRENCES_VERSION)}.json"
    if path.exists():
        return [[(start, end, bool(pronoun)) for start, end, pronoun in spans] for spans in store.read_json(path)]
    nlp = data.spacy_pipeline()
    docs = nlp.pipe(texts, batch_size=batch_size, disable=["lemmatizer"])
    spans = [phrase_spans(doc) for doc in tqdm(docs, total=len(texts), desc="spaCy noun chunks + entities",
                                               disable=not progress)]
    store.write_json(path, spans)
    return spans


def phrase_counts(texts: Sequence[str], spans: Sequence[Sequence[tuple]]) -> Counter:
    """How often each phrase (the exact, cased text of a span) occurs; spans without a letter or digit are dropped."""
    return Counter(text[start:end] for text, pairs in zip(texts, spans) for start, end, *_ in pairs
                   if any(character.isalnum() for character in text[start:end]))


def pronoun_phrases(texts: Sequence[str], spans: Sequence[Sequence[tuple]]) -> set[str]:
    """Phrases that spaCy tagged as pronouns only ("she", "them") wherever they occur."""
    flags: dict[str, bool] = {}
    for text, pairs in zip(texts, spans):
        for start, end, *pronoun in pairs:
            phrase = text[start:end]
            flags[phrase] = flags.get(phrase, True) and bool(pronoun and pronoun[0])
    return {phrase for phrase, pronoun in flags.items() if pronoun}


def build_vocabulary(counts: Counter, min_count: int) -> list[str]:
    """Phrases occurring at least ``min_count`` (the paper's k) times, most frequent first (ties alphabetical).

    §3: "We keep phrases appearing 500 times or more in the corpus". An empty result is an error.
    """
    whole_number(min_count, "min_count")
    vocabulary = sorted((phrase for phrase, count in counts.items() if count >= min_count),
                        key=lambda phrase: (-counts[phrase], phrase))
    if not vocabulary:
        most = counts.most_common(1)
        raise ValueError(f"min_count={min_count}: no phrase occurs that often, so the vocabulary is empty "
                         f"(the most frequent phrase, {most[0][0]!r}, occurs {most[0][1]} times)" if most else
                         f"min_count={min_count}: there are no phrases at all, so the vocabulary is empty")
    return vocabulary


def clean_sentence(text: str) -> str:
    """The sentence without the underscores that mark italics in the Gutenberg texts ("_she_ said").

    "_" is also the MNTP adapter's mask token, so it must not appear in the context.
    """
    return " ".join(text.replace("_", "").split())


def corpus_sentences(corpus: str, limit: int | None = None) -> list[tuple[str, str]]:
    """``(sentence, split)`` pairs of ``corpus``, from its fixed 90/5/5 paragraph splits; ``limit`` spread 90/5/5."""
    if limit is not None:
        whole_number(limit, "limit")
    pairs = []
    for split in data.SPLIT_NAMES:
        share = None if limit is None else max(1, round(limit * data.SPLIT_FRACTIONS[split]))
        for sentence in data.load_sentences(corpus, split, limit=share):
            text = clean_sentence(sentence.text)
            if text:
                pairs.append((text, split))
    return pairs


# ---------------------------------------------------------------------------------------------
# §3 Masked sentences, splits, unseen phrases and the cache
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MaskedExample:
    """One sentence with one vocabulary phrase masked; the label is the phrase (§3)."""

    sentence: str
    start: int
    end: int
    split: str

    @property
    def phrase(self) -> str:
        return self.sentence[self.start:self.end]

    @property
    def masked(self) -> str:
        return self.sentence[:self.start] + MASK_MARKER + self.sentence[self.end:]


@dataclass
class MTCDataset:
    """The phrase vocabulary, the masked sentences of each split and the manifest, as cached on disk."""

    vocabulary: list[str]
    unseen_phrases: list[str]
    examples: dict[str, list[MaskedExample]]
    manifest: dict
    path: Path
    pronouns: list[str] = field(default_factory=list)  # vocabulary phrases that are pronouns only

    @property
    def key(self) -> str:
        return self.path.name

    def labels(self, split: str) -> list[str]:
        return [example.phrase for example in self.examples[split]]


def choose_unseen_phrases(vocabulary: Sequence[str], fraction: float, seed: int = 0) -> list[str]:
    """A seeded random ``fraction`` of the vocabulary, held out from train and dev entirely."""
    real_number(fraction, "unseen_fraction", low=0.0, high=1.0, high_open=True)
    count = min(len(vocabulary) - 1, round(fraction * len(vocabulary))) if fraction > 0 else 0
    return sorted(random.Random(seed).sample(list(vocabulary), max(count, 0)))


def masked_examples(pairs: Sequence[tuple[str, str]], spans: Sequence[Sequence[tuple]],
                    vocabulary: Sequence[str], unseen: Iterable[str], max_per_phrase: int,
                    seed: int = 0) -> dict[str, list[MaskedExample]]:
    """One masked span per unique sentence, then up to ``max_per_phrase`` sentences per phrase (§3).

    As in the public code, a recurring sentence counts once and each sentence masks one phrase, drawn at random
    (seeded by the sentence) among its vocabulary phrases (the public code draws among all its phrases and then
    drops the sentence if that one is rare; on a small corpus we keep it). A sentence keeps the split of its
    paragraph (the corpus's fixed 90/5/5); every sentence of an unseen phrase goes to the ``unseen`` split
    instead, so those phrases are never a train or dev label.
    """
    whole_number(max_per_phrase, "max_sentences_per_phrase")
    wanted, unseen = set(vocabulary), set(unseen)
    occurrences: dict[str, list[MaskedExample]] = defaultdict(list)
    used: set[str] = set()
    for (text, split), pairs_of_text in zip(pairs, spans):
        if text in used:
            continue
        candidates = sorted({(start, end) for start, end, *_ in pairs_of_text if text[start:end] in wanted})
        if not candidates:
            continue
        used.add(text)
        start, end = random.Random(f"{seed}:{text}").choice(candidates)
        phrase = text[start:end]
        occurrences[phrase].append(MaskedExample(text, start, end, UNSEEN if phrase in unseen else split))
    examples: dict[str, list[MaskedExample]] = {split: [] for split in MTC_SPLITS}
    for phrase in vocabulary:
        found = list(occurrences[phrase])
        random.Random(f"{seed}:{phrase}").shuffle(found)
        for example in found[:max_per_phrase]:
            examples[example.split].append(example)
    for split_examples in examples.values():
        random.Random(seed).shuffle(split_examples)
    return examples


def length_distribution(lengths: Iterable[int]) -> dict[str, float]:
    """Percentages in Table 1's buckets 1, 2, 3, 4, 5, > 5."""
    counts = Counter(str(n) if n <= 5 else ">5" for n in lengths)
    total = sum(counts.values())
    return {bucket: 100.0 * counts[bucket] / total if total else 0.0 for bucket in LENGTH_BUCKETS}


def phrase_token_count(tokenizer, phrase: str) -> int:
    """Tokens of the phrase as it appears mid-sentence (after a space), the count Table 1 reports."""
    return len(tokenizer(" " + phrase, add_special_tokens=False).input_ids)


def build_dataset(corpus: str, settings: MTCSettings, tokenizer, model_name: str, *, progress: bool = True,
                  rebuild: bool = False) -> MTCDataset:
    """Vocabulary, masked sentences and splits for ``corpus``, cached under ``data/cache/mtc/``.

    The frequency count and the vocabulary cover all three corpus splits together, as the public code
    does; the unseen phrases are then taken out of train and dev. The manifest records the counts,
    the ``k`` used and the tokens-per-phrase distribution under ``model_name``'s tokenizer (Table 1).
    """
    key = _digest(DATA_VERSION, corpus, settings.corpus_sentences, settings.min_count,
                  settings.max_sentences_per_phrase, settings.unseen_fraction, settings.seed, model_name)
    folder = _mtc_cache() / f"dataset-{corpus}-{key}"
    if (folder / "manifest.json").exists() and not rebuild:
        return load_dataset(folder)
    pairs = corpus_sentences(corpus, settings.corpus_sentences)
    texts = [text for text, _ in pairs]
    spans = extract_phrase_spans(texts, progress=progress)
    counts = phrase_counts(texts, spans)
    vocabulary = build_vocabulary(counts, settings.min_count)
    pronouns = sorted(pronoun_phrases(texts, spans) & set(vocabulary))
    unseen = choose_unseen_phrases(vocabulary, settings.unseen_fraction, settings.seed)
    examples = masked_examples(pairs, spans, vocabulary, unseen, settings.max_sentences_per_phrase, settings.seed)
    token_counts = [phrase_token_count(tokenizer, phrase) for phrase in vocabulary]
    manifest = {
        "corpus": corpus, "model_name": model_name, "k (min_count)": settings.min_count,
        "corpus sentences": len(texts), "corpus words": sum(len(text.split()) for text in texts),
        "distinct phrases": len(counts), "phrase occurrences": sum(counts.values()),
        "vocabulary": len(vocabulary), "unseen phrases": len(unseen), "pronoun phrases": len(pronouns),
        "labelled phrases": len({example.phrase for split_examples in examples.values() for example in split_examples}),
        "max sentences per phrase": settings.max_sentences_per_phrase,
        "examples": {split: len(split_examples) for split, split_examples in examples.items()},
        "tokens per phrase %": length_distribution(token_counts),
        "words per phrase %": length_distribution(len(phrase.split()) for phrase in vocabulary),
        "mean tokens per phrase": sum(token_counts) / len(token_counts),
        "most frequent": [[phrase, counts[phrase]] for phrase in vocabulary[:20]],
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").unlink(missing_ok=True)
    store.write_json(folder / "vocabulary.json", {"phrases": vocabulary, "counts": [counts[p] for p in vocabulary],
                                                  "unseen": unseen, "pronouns": pronouns}, ensure_ascii=False)
    with store.atomic_write(folder / "examples.jsonl") as handle:
        for split in MTC_SPLITS:
            for example in examples[split]:
                handle.write(json.dumps(asdict(example), ensure_ascii=False) + "\n")
    store.write_json(folder / "manifest.json", manifest, indent=1, ensure_ascii=False)  # written last: marks done
    return MTCDataset(vocabulary, unseen, examples, manifest, folder, pronouns)


def load_dataset(folder) -> MTCDataset:
    """A dataset written by :func:`build_dataset`."""
    folder = Path(folder)
    if not (folder / "manifest.json").exists():
        raise ValueError(f"folder={str(folder)!r} holds no MTC dataset (manifest.json missing)")
    fix = f"Delete {folder} and rerun to rebuild it (or build_dataset(..., rebuild=True))."
    vocabulary = store.read_json(folder / "vocabulary.json", fix)
    examples: dict[str, list[MaskedExample]] = {split: [] for split in MTC_SPLITS}
    for record in store.read_jsonl(folder / "examples.jsonl", fix):
        example = MaskedExample(**record)
        examples[example.split].append(example)
    manifest = store.read_json(folder / "manifest.json", fix)
    return MTCDataset(vocabulary["phrases"], vocabulary["unseen"], examples, manifest, folder, vocabulary.get("pronouns", []))


# ---------------------------------------------------------------------------------------------
# The frozen masked LM: encoding a masked sentence, contextual embeddings at the mask
# ---------------------------------------------------------------------------------------------


def split_at_mask(sentence: str) -> tuple[str, str]:
    """``(left, right)`` around the one :data:`MASK_MARKER` of ``sentence``; anything else is a ValueError."""
    if not isinstance(sentence, str):
        raise ValueError(f"sentence={sentence!r} must be a string containing {MASK_MARKER} once")
    count = sentence.count(MASK_MARKER)
    if count != 1:
        raise ValueError(f"sentence={sentence!r} contains {MASK_MARKER} {count} times; expected exactly once")
    left, right = sentence.split(MASK_MARKER)
    return left, right


def start_id(mlm: MaskedLM) -> int:
    """The token a GRU reads first when there is no preceding token (LM pre-training): the MNTP separator, else
    the encoder's [CLS] / <s>."""
    for token in (getattr(mlm, "separator_id", None), mlm.tokenizer.cls_token_id, mlm.tokenizer.bos_token_id):
        if token is not None:
            return int(token)
    raise ValueError(f"{mlm.name}: the tokenizer has no separator, [CLS] or BOS token to start a sequence with")


def end_id(mlm: MaskedLM) -> int:
    """The token that ends a completion: EOS, else the encoder's [SEP] (BERT has no EOS; the public code adds one)."""
    for token in (mlm.tokenizer.eos_token_id, mlm.tokenizer.sep_token_id):
        if token is not None:
            return int(token)
    raise ValueError(f"{mlm.name}: the tokenizer has no EOS or [SEP] token to end a completion with")


def load_masked_lm(cfg, settings: MTCSettings, progress: bool = True) -> MaskedLM:
    """The frozen masked LM of the profile, through the one interface (:mod:`helpers.masked_lm`).

    ``settings.masked_lm`` names a Hub encoder MLM (``bert-base-cased``, the paper's, on the gpu and paper
    profiles); ``None`` takes the profile's model with notebook 02's MNTP adapter (``training.load_or_train_mntp``),
    merged and frozen (the offline cpu and smoke profiles).
    """
    if settings.masked_lm is not None:
        return EncoderMLM.from_pretrained(settings.masked_lm, context_tokens=settings.context_tokens)
    from . import training

    model, tokenizer, mask_id = training.load_or_train_mntp(cfg, progress=progress)
    model.eval().requires_grad_(False)
    return MNTPDecoder(model, tokenizer, int(mask_id), context_tokens=settings.context_tokens, name=cfg.model_name)


@dataclass
class EncodedSplit:
    """One split, tokenised: model inputs, mask positions, in-context label tokens and label strings."""

    input_ids: list[list[int]]
    mask_positions: list[int]
    phrase_ids: list[list[int]]
    phrases: list[str]
    sentences: list[str]

    def __len__(self) -> int:
        return len(self.phrases)

    @property
    def previous_tokens(self) -> torch.Tensor:
        return torch.tensor([ids[position - 1] for ids, position in zip(self.input_ids, self.mask_positions)])


def encode_examples(mlm: MaskedLM, examples: Sequence[MaskedExample]) -> EncodedSplit:
    encoded = [mlm.encode_masked(example.masked) for example in examples]
    spaced = [example.start > 0 and example.sentence[example.start - 1] == " " for example in examples]
    return EncodedSplit([ids for ids, _ in encoded], [position for _, position in encoded],
                        [mlm.phrase_ids(example.phrase, space) for example, space in zip(examples, spaced)], [example.phrase for example in examples],
                        [example.masked for example in examples])


def _model_fingerprint(mlm: MaskedLM) -> list[float]:
    probe = f"It is a truth universally acknowledged, that {MASK_MARKER} in possession of a good fortune."
    hidden, _ = mlm.features([probe])
    return [round(float(v), 4) for v in hidden[0, :16].cpu()]


def mask_features(mlm: MaskedLM, sequences: Sequence[Sequence[int]], mask_columns: Sequence[int]) -> torch.Tensor:
    """The contextual embedding of the token at each ``mask_columns`` entry as the output matrix sees it: the
    output ``mlm.offset`` columns before it, through the head's transform (BERT) (float32)."""
    hidden = mlm.hidden_at(sequences, [column - mlm.offset for column in mask_columns])
    return mlm.output_transform(hidden).float()


def compute_features(mlm: MaskedLM, encoded: EncodedSplit, batch_size: int, progress: bool = True,
                     desc: str = "features") -> torch.Tensor:
    """The contextual embedding at the mask of every example, ``(N, hidden)`` float32 on the CPU."""
    whole_number(batch_size, "batch_size")
    order = sorted(range(len(encoded)), key=lambda i: len(encoded.input_ids[i]))  # similar lengths per batch
    features = torch.empty(len(encoded), mlm.hidden_size)
    for start in tqdm(range(0, len(order), batch_size), desc=desc, disable=not progress):
        rows = order[start:start + batch_size]
        features[rows] = mask_features(mlm, [encoded.input_ids[i] for i in rows],
                                       [encoded.mask_positions[i] for i in rows]).cpu()
    return features


def cached_features(mlm: MaskedLM, dataset: MTCDataset, encoded: dict[str, EncodedSplit], batch_size: int,
                    progress: bool = True) -> dict[str, torch.Tensor]:
    """:func:`compute_features` for every split, computed once and cached next to the dataset.

    The cache is keyed by the model name and context size, and checked against a fresh forward of
    a probe sentence, so a retrained adapter is never paired with stale features.
    """
    slug = mlm.name.replace(":", "-").replace("/", "-")
    path = dataset.path / f"features-{slug}-ctx{mlm.context_tokens}-{FEATURES_VERSION}.pt"
    fingerprint = _model_fingerprint(mlm)
    if path.exists():
        stored = store.load_torch(path, f"Delete {path}; it is recomputed on the next run.", weights_only=True)
        fresh = torch.tensor(fingerprint)
        if torch.allclose(torch.tensor(stored["fingerprint"]), fresh, atol=2e-3) and all(
                stored[split].shape[0] == len(encoded[split]) for split in encoded):
            return {split: stored[split] for split in encoded}
    features = {split: compute_features(mlm, encoded[split], batch_size, progress, desc=f"features ({split})")
                for split in encoded}
    store.save_torch(path, {**features, "fingerprint": fingerprint})
    return features


# ---------------------------------------------------------------------------------------------
# Ranking completions
# ---------------------------------------------------------------------------------------------


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int,)) or k <= 0:
        raise ValueError(f"k={k!r} must be a positive whole number (how many completions to return)")
    return k


def is_completion(text: str) -> bool:
    """A candidate counts only if it holds a letter or digit, like every vocabulary phrase (no bare punctuation)."""
    return any(character.isalnum() for character in text)



def first_distinct_completions(scored, k: int) -> list[tuple[str, float]]:
    """The first ``k`` distinct ``(text, score)`` pairs, in the given order, that are real completions."""
    seen, best = set(), []
    for text, score in scored:
        if text not in seen and is_completion(text):
            seen.add(text)
            best.append((text, score))
            if len(best) == k:
                break
    return best

def rank_candidates(scores: torch.Tensor, candidates: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
    """Per row, the ``k`` best distinct candidate strings (see :func:`is_completion`) with their scores, best first."""
    _check_k(k)
    if scores.shape[-1] != len(candidates):
        raise ValueError(f"scores has {scores.shape[-1]} columns but there are {len(candidates)} candidates")
    top = scores.topk(min(scores.shape[-1], 8 * k + 16), dim=-1)
    ranked = []
    for values, indices in zip(top.values.tolist(), top.indices.tolist()):
        ranked.append(first_distinct_completions(((candidates[index], value) for value, index in zip(values, indices)), k))
    return ranked


def accuracy(ranked: Sequence[Sequence[tuple[str, float] | str]], gold: Sequence[str], ks: Sequence[int] = KS) -> dict[int, float]:
    """accuracy@k (§5: "the percentage of masked sentences where the label is among the top-k predictions")."""
    strings = [[item[0] if isinstance(item, tuple) else item for item in row] for row in ranked]
    return metrics.accuracy_at_k(strings, [phrase.strip() for phrase in gold], ks)


# ---------------------------------------------------------------------------------------------
# §4.1 EMAT: the extended output matrix
# ---------------------------------------------------------------------------------------------


class ExtendedMatrixDecoder(nn.Module):
    """EMAT (§4.1, Figure 1 (2)): logits over the masked LM's tokens plus one new row per multi-token phrase.

    *"We assign each new multi-token phrase to an embedding vector, which is added only to the output
    token-prediction matrix"*, and *"we extract the contextual embedding from the masked sentence and only
    train the extended-matrix decoder"*. Single-token phrases keep their original row; each new row starts
    as the **mean of the output embeddings of the phrase's tokens** (the public code starts them at random).
    With ``train_token_rows`` (the default, as the public ``matrix_plugin``, which detaches the output matrix
    "so it will train") the whole extended matrix is trained, a copy of the token rows included (the masked LM
    itself is untouched); without it only the new rows are, and the token rows stay the masked LM's own, so a
    single-token label that never occurs in training keeps the masked LM's own score.
    """

    def __init__(self, token_matrix: torch.Tensor, phrase_rows: torch.Tensor, token_strings: Sequence[str],
                 phrases: Sequence[str], train_token_rows: bool = True, token_bias: torch.Tensor | None = None):
        super().__init__()
        bias = torch.zeros(token_matrix.shape[0]) if token_bias is None else token_bias.detach().float().clone()
        if train_token_rows and token_bias is not None:  # BERT's output bias trains with its rows
            self.token_bias = nn.Parameter(bias.to(token_matrix.device))
        else:
            self.register_buffer("token_bias", bias.to(token_matrix.device), persistent=False)
        if len(phrases) != phrase_rows.shape[0]:
            raise ValueError(f"phrases has {len(phrases)} entries but phrase_rows has {phrase_rows.shape[0]} rows")
        if train_token_rows:
            self.token_matrix = nn.Parameter(token_matrix.detach().float().clone())
        else:
            self.register_buffer("token_matrix", token_matrix.detach().float(), persistent=False)
        self.phrase_matrix = nn.Parameter(phrase_rows.detach().float().clone())
        self.phrases = list(phrases)
        self.phrase_index = {phrase: i for i, phrase in enumerate(self.phrases)}
        self.candidates = [*token_strings, *self.phrases]

    @property
    def vocab_size(self) -> int:
        return int(self.token_matrix.shape[0])

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.cat([hidden @ self.token_matrix.T + self.token_bias, hidden @ self.phrase_matrix.T], dim=-1)

    def label(self, phrase: str, phrase_ids: Sequence[int], canonical_ids: Sequence[int]) -> int:
        """The output row that stands for ``phrase`` here: its own token if it is one, else its phrase row."""
        if len(phrase_ids) == 1:
            return int(phrase_ids[0])
        if phrase in self.phrase_index:
            return self.vocab_size + self.phrase_index[phrase]
        return int(canonical_ids[0])  # one token mid-sentence, several here (rare): the canonical token

    @torch.no_grad()
    def complete(self, hidden: torch.Tensor, k: int) -> list[list[tuple[str, float]]]:
        return rank_candidates(self(hidden.float()).softmax(-1), self.candidates, k)


def build_emat(mlm: MaskedLM, vocabulary: Sequence[str], train_token_rows: bool = True) -> ExtendedMatrixDecoder:
    """An EMAT over ``vocabulary``: phrases that are one token (mid-sentence) reuse it; the rest get new rows."""
    if not vocabulary:
        raise ValueError("vocabulary is empty; EMAT needs at least one phrase to extend the output matrix with")
    matrix = mlm.output_matrix.detach().float()
    multi, rows = [], []
    for phrase in vocabulary:
        ids = mlm.tokenizer(" " + phrase, add_special_tokens=False).input_ids
        if len(ids) > 1:
            multi.append(phrase)
            rows.append(matrix[ids].mean(0))
    phrase_rows = torch.stack(rows) if rows else matrix.new_zeros((0, matrix.shape[1]))
    return ExtendedMatrixDecoder(matrix, phrase_rows, mlm.token_strings, multi, train_token_rows,
                                 token_bias=mlm.output_bias).to(mlm.device)


def emat_labels(emat: ExtendedMatrixDecoder, mlm: MaskedLM, encoded: EncodedSplit) -> torch.Tensor:
    canonical = {phrase: mlm.tokenizer(" " + phrase, add_special_tokens=False).input_ids for phrase in set(encoded.phrases)}
    return torch.tensor([emat.label(phrase, ids, canonical[phrase])
                         for phrase, ids in zip(encoded.phrases, encoded.phrase_ids)])


# ---------------------------------------------------------------------------------------------
# §4.2 The GRU decoder
# ---------------------------------------------------------------------------------------------


class GRUDecoder(nn.Module):
    """The generative extension (§4.2, Figure 1 (3)), shaped as the public decoder.

    - *"we use this vector [the contextual embedding of the mask] as the first hidden vector fed into
      the GRU"*: every layer starts from it.
    - *"As the first input … the static embedding of the token preceding the [MASK] token. For later
      steps, the input is the previous token"*. *"initializing the GRU's decoder embeddings with the same
      parameters used by the MLM … improves the performance"*: the embeddings are a copy of the masked LM's,
      trained with the decoder when ``train_embeddings`` (as the public code, ``freeze_bert=False``).
    - *"at each step we concatenate: a) the output of the GRU; b) the previous vector embedding; and c)
      the masked token contextual embedding … and feed them to a feed forward (FF) layer … The output of the
      FF is then fed as input to the MLM decoder"*: FF -> GELU (the public ``transform`` + ``gelu``) -> a copy
      of the masked LM's output head (for BERT ``cls``: transform, then the output matrix), trained with the
      decoder when ``train_embeddings``. Dropout 0.2, 2 layers (App. C, Table 8).
    """

    def __init__(self, embeddings: torch.Tensor, output_head: nn.Module, eos_id: int, layers: int = 2,
                 dropout: float = 0.2, train_embeddings: bool = True):
        super().__init__()
        hidden = int(embeddings.shape[1])
        self.embedding = nn.Embedding.from_pretrained(embeddings.detach().float().clone(), freeze=not train_embeddings)
        self.output_head = output_head.float()
        self.output_head.requires_grad_(train_embeddings)
        self.eos_id = int(eos_id)
        self.layers = whole_number(layers, "layers")
        self.gru = nn.GRU(hidden, hidden, num_layers=layers, dropout=dropout if layers > 1 else 0.0, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.feed_forward = nn.Linear(3 * hidden, hidden)

    @property
    def vocab_size(self) -> int:
        return int(self.embedding.num_embeddings)

    def initial_state(self, mask_hidden: torch.Tensor) -> torch.Tensor:
        return mask_hidden.unsqueeze(0).expand(self.layers, -1, -1).contiguous()

    def step(self, tokens: torch.Tensor, state: torch.Tensor, mask_hidden: torch.Tensor):
        """One generation step: logits over the vocabulary and the new GRU state."""
        embedded = self.embedding(tokens)
        output, state = self.gru(embedded.unsqueeze(1), state)
        combined = self.dropout(torch.cat([output[:, 0], embedded, mask_hidden], dim=-1))
        return self.output_head(F.gelu(self.feed_forward(combined))), state

    def forward(self, mask_hidden: torch.Tensor, first_tokens: torch.Tensor, targets: torch.Tensor,
                teacher_forcing: float = 1.0) -> torch.Tensor:
        """Logits ``(N, T, V)`` for padded ``targets`` (-100 after EOS); each step feeds the gold token with
        probability ``teacher_forcing``, else the model's own best guess (App. C: 0.5)."""
        state, tokens, steps = self.initial_state(mask_hidden), first_tokens, []
        for t in range(targets.shape[1]):
            logits, state = self.step(tokens, state, mask_hidden)
            steps.append(logits)
            gold = targets[:, t].clamp(min=0)
            use_gold = teacher_forcing >= 1.0 or bool(torch.rand(()) < teacher_forcing)
            tokens = gold if use_gold else logits.argmax(-1)
        return torch.stack(steps, dim=1)

    def loss(self, mask_hidden: torch.Tensor, first_tokens: torch.Tensor, targets: torch.Tensor,
             teacher_forcing: float = 1.0) -> torch.Tensor:
        """Mean cross-entropy per label token (EOS included), step by step as in :meth:`forward`.

        ``targets`` are padded with -100 at the end only (:func:`gru_targets`), so step ``t`` runs on the rows
        still inside their label: the same loss as over the padded batch, without the padding's vocabulary-wide
        logits (the costly part on a CPU)."""
        lengths = (targets != -100).sum(1)
        order = lengths.argsort(descending=True)
        mask_hidden, tokens, targets, lengths = mask_hidden[order], first_tokens[order], targets[order], lengths[order]
        state = self.initial_state(mask_hidden)
        total = mask_hidden.new_zeros(())
        for t in range(targets.shape[1]):
            live = int((lengths > t).sum())
            if live == 0:
                break
            state, tokens = state[:, :live], tokens[:live]
            logits, state = self.step(tokens, state.contiguous(), mask_hidden[:live])
            total = total + F.cross_entropy(logits, targets[:live, t], reduction="sum")
            use_gold = teacher_forcing >= 1.0 or bool(torch.rand(()) < teacher_forcing)
            tokens = targets[:live, t] if use_gold else logits.argmax(-1)
        return total / lengths.sum().clamp(min=1)

    @torch.no_grad()
    def beam_search(self, mask_hidden: torch.Tensor, first_tokens: torch.Tensor, beam_size: int, max_steps: int,
                    num_results: int) -> list[list[tuple[list[int], float]]]:
        """Beam search until EOS (§4.2): every live beam that emits EOS becomes a finished completion.

        Returns, per input, up to ``num_results`` finished token sequences (EOS stripped) with their
        log-probabilities, best first. Stops early once ``num_results`` finished ones beat every live beam.
        """
        whole_number(beam_size, "beam_size")
        whole_number(max_steps, "max_steps")
        count, vocab = mask_hidden.shape[0], self.vocab_size
        hidden = mask_hidden.repeat_interleave(beam_size, 0)
        state = self.initial_state(hidden)
        tokens = first_tokens.repeat_interleave(beam_size)
        scores = torch.full((count, beam_size), float("-inf"), device=hidden.device)
        scores[:, 0] = 0.0
        sequences = torch.empty((count, beam_size, 0), dtype=torch.long, device=hidden.device)
        finished_scores, finished_sequences = [], []
        for _ in range(max_steps):
            logits, state = self.step(tokens, state, hidden)
            total = scores.unsqueeze(-1) + logits.log_softmax(-1).view(count, beam_size, vocab)
            finished_scores.append(total[:, :, self.eos_id].clone())
            finished_sequences.append(sequences)
            total[:, :, self.eos_id] = float("-inf")
            scores, flat = total.view(count, -1).topk(beam_size, dim=-1)
            beams, new_tokens = flat // vocab, flat % vocab
            sequences = torch.cat([sequences.gather(1, beams.unsqueeze(-1).expand(-1, -1, sequences.shape[-1])),
                                   new_tokens.unsqueeze(-1)], dim=-1)
            rows = (beams + torch.arange(count, device=beams.device).unsqueeze(1) * beam_size).view(-1)
            state, tokens = state[:, rows], new_tokens.view(-1)
            done = torch.cat(finished_scores, dim=1)
            if done.shape[1] >= num_results and bool((done.topk(num_results, dim=1).values[:, -1]
                                                      >= scores.max(dim=1).values).all()):
                break
        results = []
        all_scores = torch.cat(finished_scores, dim=1).cpu()
        for row in range(count):
            order = all_scores[row].argsort(descending=True)[:num_results]
            results.append([(finished_sequences[int(i) // beam_size][row, int(i) % beam_size].tolist(),
                             float(all_scores[row, i])) for i in order if math.isfinite(float(all_scores[row, i]))])
        return results

    def complete(self, mask_hidden: torch.Tensor, first_tokens: torch.Tensor, tokenizer, k: int, beam_size: int,
                 max_steps: int) -> list[list[tuple[str, float]]]:
        """Top-``k`` distinct completion strings with their probabilities (beam search)."""
        _check_k(k)
        was_training = self.training
        self.eval()
        found = self.beam_search(mask_hidden.float(), first_tokens, beam_size, max_steps, num_results=2 * k + 4)
        self.train(was_training)
        ranked = []
        for candidates in found:
            seen, row = set(), []
            for ids, score in candidates:
                text = tokenizer.decode(ids, skip_special_tokens=True).strip()
                if text not in seen and is_completion(text):
                    seen.add(text)
                    row.append((text, math.exp(score)))
            ranked.append(row[:k])
        return ranked


def gru_targets(encoded: EncodedSplit, eos_id: int, max_steps: int) -> torch.Tensor:
    """In-context label tokens + EOS, cut to ``max_steps`` and padded with -100."""
    rows = [(ids + [eos_id])[:max_steps] for ids in encoded.phrase_ids]
    targets = torch.full((len(rows), max(len(r) for r in rows)), -100, dtype=torch.long)
    for i, row in enumerate(rows):
        targets[i, :len(row)] = torch.tensor(row)
    return targets


def build_gru(mlm: MaskedLM, settings: MTCSettings) -> GRUDecoder:
    eos = end_id(mlm)
    return GRUDecoder(mlm.input_embeddings, mlm.output_head(), eos, settings.gru_layers, settings.gru_dropout,
                      settings.gru_train_embeddings).to(mlm.device)


def language_model_targets(mlm: MaskedLM, sentences: Sequence[str], max_tokens: int) -> torch.Tensor:
    """Pre-training targets for the GRU (§4.2): each sentence's first ``max_tokens`` tokens, then EOS if the
    sentence ended there, padded with -100 (as the public ``lm_pretrain``, which cuts at the batch median)."""
    whole_number(max_tokens, "max_tokens")
    if not sentences:
        raise ValueError("sentences is empty; the GRU's language-model pre-training needs text")
    eos = end_id(mlm)
    rows = []
    for sentence in sentences:
        ids = mlm.tokenizer(sentence, add_special_tokens=False).input_ids
        rows.append(ids[:max_tokens] if len(ids) > max_tokens else [*ids, eos])
    targets = torch.full((len(rows), max(len(r) for r in rows)), -100, dtype=torch.long)
    for i, row in enumerate(rows):
        targets[i, :len(row)] = torch.tensor(row)
    return targets


# ---------------------------------------------------------------------------------------------
# §5.2 Naive MTC: predict a length, duplicate the mask, fill the masks one by one
# ---------------------------------------------------------------------------------------------

LENGTH_CLASSES = ("1 token", "2 tokens", "3+ tokens")  # §5.2: "we are only interested in 3 classes"


def length_class(phrase_ids: Sequence[int]) -> int:
    """0, 1 or 2 for phrases of 1, 2 or more tokens (Naive MTC's length classes)."""
    if len(phrase_ids) == 0:
        raise ValueError(f"phrase_ids={list(phrase_ids)!r} is empty; a phrase has at least one token")
    return min(len(phrase_ids), 3) - 1


class LengthClassifier(nn.Module):
    """Naive MTC's length predictor (§5.2), here a linear probe on the same frozen mask embedding
    (the paper fine-tunes a BERT classifier)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.linear = nn.Linear(hidden, len(LENGTH_CLASSES))

    def forward(self, mask_hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(mask_hidden.float())


@torch.no_grad()
def naive_complete(mlm: MaskedLM, lengths: LengthClassifier, sentences: Sequence[str], k: int,
                   first_tokens: int = 100, second_tokens: int = 10) -> list[list[tuple[str, float]]]:
    """Naive MTC (§5.2): P(one token) · P_MLM(t), and P(two tokens) · P(t1 | [MASK] [MASK]) · P(t2 | t1 [MASK]).

    *"After duplicating the mask, we complete the first missing token using the MLM. Then, we replace the
    first mask with each of the top-100 predicted tokens and complete the second mask."*
    """
    _check_k(k)
    whole_number(first_tokens, "first_tokens")
    whole_number(second_tokens, "second_tokens")
    encoded_one = [mlm.encode_masked(sentence) for sentence in sentences]
    encoded_two = [mlm.encode_masked(sentence, mask_count=2) for sentence in sentences]
    hidden = mask_features(mlm, [ids for ids, _ in encoded_one], [p for _, p in encoded_one])
    length_probs = lengths(hidden).softmax(-1)
    single = mlm.token_logits(hidden).softmax(-1) * length_probs[:, :1]
    first = mlm.token_logits(mask_features(mlm, [ids for ids, _ in encoded_two], [p for _, p in encoded_two]))
    first_top = first.softmax(-1).topk(first_tokens, dim=-1)
    filled, positions = [], []
    for (ids, position), tokens in zip(encoded_two, first_top.indices.tolist()):
        for token in tokens:
            filled.append(ids[:position] + [token] + ids[position + 1:])
            positions.append(position + 1)  # the second mask
    second = mlm.token_logits(mask_features(mlm, filled, positions)).softmax(-1)
    second_top = second.topk(second_tokens, dim=-1)
    strings = mlm.token_strings
    ranked = []
    for row in range(len(sentences)):
        candidates = [(strings[t], float(p)) for p, t in zip(*single[row].topk(min(8 * k + 16, single.shape[-1])))]
        p_two = float(length_probs[row, 1])
        for j, (p1, t1) in enumerate(zip(first_top.values[row].tolist(), first_top.indices[row].tolist())):
            flat = row * first_tokens + j
            for p2, t2 in zip(second_top.values[flat].tolist(), second_top.indices[flat].tolist()):
                candidates.append((mlm.tokenizer.decode([t1, t2], skip_special_tokens=True).strip(), p_two * p1 * p2))
        candidates.sort(key=lambda item: -item[1])
        ranked.append(first_distinct_completions(candidates, k))
    return ranked


# ---------------------------------------------------------------------------------------------
# Training the heads (features only: the masked LM never runs here)
# ---------------------------------------------------------------------------------------------


def train_head(head: nn.Module, tensors: dict[str, torch.Tensor], loss_fn, evaluate, *, epochs: int | None,
               settings: MTCSettings, run_dir, max_grad_norm: float = 0.0, resume: bool = True,
               progress: bool = True, steps: int | None = None) -> list[dict]:
    """Adam (``settings.lr``), batches of ``settings.batch_size`` over a fresh seeded permutation each epoch,
    through ``training.train``: metrics per step and dev metrics per epoch in ``run_dir/metrics.jsonl``,
    a checkpoint per epoch, and a finished run is reused rather than retrained."""
    from . import objectives, training

    if (epochs is None) == (steps is None):
        raise ValueError(f"epochs={epochs!r}, steps={steps!r}: give exactly one of them")
    if epochs is not None:
        whole_number(epochs, "epochs")
    sizes = {name: tensor.shape[0] for name, tensor in tensors.items()}
    count = next(iter(sizes.values()))
    if count == 0 or len(set(sizes.values())) != 1:
        raise ValueError(f"tensors must hold the same, non-zero number of examples; got {sizes}")
    per_epoch = math.ceil(count / settings.batch_size)
    device = next(head.parameters()).device

    def batch_for(step: int, micro: int) -> dict:
        epoch, offset = divmod(step, per_epoch)
        order = torch.randperm(count, generator=objectives.seeded_generator(settings.seed, epoch))
        rows = order[offset * settings.batch_size:(offset + 1) * settings.batch_size]
        return {name: tensor[rows].to(device) for name, tensor in tensors.items()}

    total = epochs * per_epoch if epochs is not None else whole_number(steps, "steps")
    every = per_epoch if epochs is not None else total
    config = training.TrainConfig(steps=total, batch_size=settings.batch_size, lr=settings.lr,
                                  max_grad_norm=max_grad_norm, eval_every=every, checkpoint_every=every,
                                  seed=settings.seed, extra={"examples": count, "steps per epoch": per_epoch})
    return training.train(head, batch_for=batch_for, loss_fn=loss_fn, config=config, run_dir=run_dir,
                          evaluate=evaluate, resume=resume, progress=progress)


_TRAINING_FIELDS = ("batch_size", "lr", "emat_epochs", "gru_epochs", "gru_layers", "gru_dropout", "teacher_forcing",
                    "gru_pretrain_steps", "gru_pretrain_tokens", "gru_train_embeddings", "length_epochs", "seed")


def _run_dir(name: str, dataset: MTCDataset, mlm: MaskedLM, settings: MTCSettings) -> Path:
    """``runs/06_<head>_<hash>``: one folder per dataset, model (name, context, a probe forward) and training
    settings, so a rerun resumes it and anything that changes the features or the training starts a fresh one."""
    trained_with = {field_name: getattr(settings, field_name) for field_name in _TRAINING_FIELDS}
    weights = [round(value, 2) for value in _model_fingerprint(mlm)]  # a retrained adapter starts fresh runs
    return runs_dir() / f"06_{name}_{_digest(HEADS_VERSION, dataset.key, mlm.name, mlm.context_tokens, weights, trained_with)}"


def train_emat(mlm: MaskedLM, dataset: MTCDataset, encoded: dict[str, EncodedSplit], features: dict[str, torch.Tensor],
               settings: MTCSettings, *, train_token_rows: bool = True, resume: bool = True, progress: bool = True):
    """Build EMAT over the whole vocabulary (seen and unseen phrases) and train it (Adam 1e-3, batch 128,
    2 epochs; App. C): the whole extended matrix as the public code (default), or with
    ``train_token_rows=False`` the new rows only."""
    emat = build_emat(mlm, dataset.vocabulary, train_token_rows)
    tensors = {"hidden": features["train"], "label": emat_labels(emat, mlm, encoded["train"])}
    dev_hidden, dev_gold = features["validation"].to(mlm.device), encoded["validation"].phrases

    def loss_fn(model, batch):
        return {"loss": F.cross_entropy(model(batch["hidden"]), batch["label"])}

    def evaluate(model):
        if not dev_gold:
            return {}
        scores = accuracy(model.complete(dev_hidden, 10), dev_gold, (1, 10))
        return {"dev a@1": scores[1], "dev a@10": scores[10]}

    name = "emat" if train_token_rows else "emat_new_rows"
    records = train_head(emat, tensors, loss_fn, evaluate, epochs=settings.emat_epochs, settings=settings,
                         run_dir=_run_dir(name, dataset, mlm, settings), resume=resume, progress=progress)
    return emat.eval(), records


def max_generation_steps(encoded: EncodedSplit) -> int:
    """Longest in-context label in train (tokens) plus EOS: how far beam search may run."""
    return max(len(ids) for ids in encoded.phrase_ids) + 1


def pretrain_gru(gru: GRUDecoder, mlm: MaskedLM, dataset: MTCDataset, settings: MTCSettings, *, resume: bool = True,
                 progress: bool = True) -> list[dict]:
    """§4.2: *"it helps to pre-train the generative model on a vanilla Language Modeling task before starting MTC
    training"*. As the public ``lm_pretrain``: the GRU starts from a zero state with a zero context vector, reads
    a start token (our separator) and predicts the train sentences token by token (teacher forcing 1), for
    ``settings.gru_pretrain_steps`` batches. Returns the run's records ([] when the step count is 0)."""
    if settings.gru_pretrain_steps == 0:
        return []
    sentences = sorted({example.sentence for example in dataset.examples["train"]})
    targets = language_model_targets(mlm, sentences, settings.gru_pretrain_tokens)
    tensors = {"target": targets, "first": torch.full((len(sentences),), start_id(mlm), dtype=torch.long)}

    def loss_fn(model, batch):
        zeros = batch["first"].new_zeros((batch["first"].shape[0], mlm.hidden_size), dtype=torch.float)
        return {"loss": model.loss(zeros, batch["first"], batch["target"], teacher_forcing=1.0)}

    return train_head(gru, tensors, loss_fn, None, epochs=None, steps=settings.gru_pretrain_steps, settings=settings,
                      run_dir=_run_dir("gru_lm", dataset, mlm, settings), max_grad_norm=0.25, resume=resume,
                      progress=progress)


def train_gru(mlm: MaskedLM, dataset: MTCDataset, encoded: dict[str, EncodedSplit], features: dict[str, torch.Tensor],
              settings: MTCSettings, *, resume: bool = True, progress: bool = True):
    """Pre-train the GRU decoder as a language model (:func:`pretrain_gru`), then train it on MTC with teacher
    forcing 0.5 (Adam 1e-3, batch 128, 10 epochs, App. C; gradients clipped at 1 as the public code).
    Returns the decoder and the MTC run's records, the pre-training records under ``"pretraining"`` of the first."""
    torch.manual_seed(settings.seed)  # the GRU's own weights: the same in every rerun
    gru = build_gru(mlm, settings)
    pretraining = pretrain_gru(gru, mlm, dataset, settings, resume=resume, progress=progress)
    max_steps = max_generation_steps(encoded["train"])
    tensors = {"hidden": features["train"], "first": encoded["train"].previous_tokens,
               "target": gru_targets(encoded["train"], gru.eos_id, max_steps)}
    dev = {"hidden": features["validation"].to(mlm.device),
           "first": encoded["validation"].previous_tokens.to(mlm.device),
           "target": gru_targets(encoded["validation"], gru.eos_id, max_steps).to(mlm.device)} if len(encoded["validation"]) else None

    def loss_fn(model, batch):
        return {"loss": model.loss(batch["hidden"], batch["first"], batch["target"], settings.teacher_forcing)}

    def evaluate(model):
        if dev is None:
            return {}
        loss = model.loss(dev["hidden"], dev["first"], dev["target"], teacher_forcing=1.0)
        greedy = model.complete(dev["hidden"], dev["first"], mlm.tokenizer, k=1, beam_size=1, max_steps=max_steps)
        return {"dev loss": float(loss), "dev a@1": accuracy(greedy, encoded["validation"].phrases, (1,))[1]}

    records = train_head(gru, tensors, loss_fn, evaluate, epochs=settings.gru_epochs, settings=settings,
                         run_dir=_run_dir("gru", dataset, mlm, settings), max_grad_norm=1.0, resume=resume, progress=progress)
    return gru.eval(), records, pretraining


def train_length_classifier(mlm: MaskedLM, dataset: MTCDataset, encoded: dict[str, EncodedSplit],
                            features: dict[str, torch.Tensor], settings: MTCSettings, *, resume: bool = True,
                            progress: bool = True):
    """Naive MTC's length classifier on the frozen features (classes 1, 2, 3+ tokens; §5.2)."""
    torch.manual_seed(settings.seed)  # the same initial weights in every rerun
    classifier = LengthClassifier(mlm.hidden_size).to(mlm.device)
    classes = {split: torch.tensor([length_class(ids) for ids in encoded[split].phrase_ids]) for split in encoded}
    dev_hidden = features["validation"].to(mlm.device)

    def loss_fn(model, batch):
        return {"loss": F.cross_entropy(model(batch["hidden"]), batch["label"])}

    def evaluate(model):
        if not len(dev_hidden):
            return {}
        return {"dev accuracy": float((model(dev_hidden).argmax(-1).cpu() == classes["validation"]).float().mean())}

    records = train_head(classifier, {"hidden": features["train"], "label": classes["train"]}, loss_fn, evaluate,
                         epochs=settings.length_epochs, settings=settings,
                         run_dir=_run_dir("length", dataset, mlm, settings), resume=resume, progress=progress)
    return classifier.eval(), records


def length_accuracy(classifier: LengthClassifier, encoded: EncodedSplit, features: torch.Tensor) -> float:
    """Share of sentences whose length class (1, 2, 3+ tokens) the classifier gets right (paper: 64.7%)."""
    with torch.no_grad():
        predicted = classifier(features.to(next(classifier.parameters()).device)).argmax(-1).cpu()
    truth = torch.tensor([length_class(ids) for ids in encoded.phrase_ids])
    return float((predicted == truth).float().mean())


# ---------------------------------------------------------------------------------------------
# Completing sentences: every method from one object (the widget and the latency use it)
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
        _check_k(k)
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
        _check_k(k)
        return [list(self.ranked[:k]) for _ in range(hidden.shape[0])]


def label_counts(encoded: EncodedSplit) -> Counter:
    """How often each phrase is a label in ``encoded`` (the training split: the prior of both baselines)."""
    return Counter(encoded.phrases)


METHODS = ("mlm", "naive", "mlm_vocab", "prior", "emat", "gru", "emat_new_rows")
METHOD_LABELS = {"mlm": "single-token MLM", "naive": "naive MTC", "mlm_vocab": "MLM first token over the vocabulary",
                 "prior": "label prior", "emat": "EMAT", "gru": "GRU decoder", "emat_new_rows": "EMAT, new rows only"}
FEATURE_METHODS = ("mlm", "mlm_vocab", "prior", "emat", "emat_new_rows", "gru")  # run from cached features


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
        _check_k(k)

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
    prior = label_counts(encoded["train"])
    return Completer(mlm, emat, gru, lengths, settings, max_steps=max_generation_steps(encoded["train"]),
                     emat_new_rows=emat_new_rows, closed_vocabulary=ClosedVocabularyMLM(mlm, dataset.vocabulary, prior),
                     prior=LabelPrior(dataset.vocabulary, prior))


def _batched(items: Sequence, size: int):
    for start in range(0, len(items), size):
        yield start, items[start:start + size]


COVERAGE_TOKENS = {"mlm": 1, "naive": 2}  # Table 2: the longest label (in tokens) each baseline can produce


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
            results[method][split] = _scores(ranked, gold, lengths, ks, COVERAGE_TOKENS.get(method))
        if split not in naive_splits:
            continue
        sentences = split_encoded.sentences[:limit]
        size = max(1, 256 // settings.naive_first_tokens)
        ranked = []
        for _, chunk in tqdm(list(_batched(sentences, size)), desc=f"naive MTC ({split})", disable=not progress):
            ranked.extend(completer.complete(chunk, "naive", k))
        results["naive"][split] = _scores(ranked, gold, lengths, ks, COVERAGE_TOKENS["naive"])
    return results


def _scores(ranked, gold, lengths, ks, max_tokens: int | None) -> dict:
    covered = [i for i, n in enumerate(lengths) if max_tokens is None or n <= max_tokens]
    within = accuracy([ranked[i] for i in covered], [gold[i] for i in covered], ks) if covered else {k: float("nan") for k in ks}
    strings = [[item[0] for item in row] for row in ranked]
    hits = {k: [int(answer.strip() in row[:k]) for row, answer in zip(strings, gold)] for k in ks}
    return {"n": len(gold), "coverage": len(covered) / len(gold), "accuracy": accuracy(ranked, gold, ks),
            "accuracy within coverage": within, "ranked": ranked, "hits": hits, "gold tokens": list(lengths)}


LENGTH_GROUPS = ("all", "single-token", "multi-token")


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
                      resamples: int = 1000) -> tuple[float, float, float, int]:
    """accuracy@k of ``first`` minus ``second`` on the same sentences, with its 95% paired bootstrap interval, and n
    (``None`` when no sentence of ``split`` falls in ``group``)."""
    a, b = results[first][split], results[second][split]
    rows = group_rows(a["gold tokens"], group)
    if not rows:
        return None
    value, low, high = metrics.paired_difference_interval([a["hits"][k][i] for i in rows], [b["hits"][k][i] for i in rows],
                                                          resamples=resamples)
    return value, low, high, len(rows)


LATENCY_METHODS = ("mlm", "emat", "emat_new_rows", "gru")


def measure_latency(completer: Completer, sentences: Sequence[str], methods: Sequence[str] | None = None, k: int = 10,
                    rounds: int = 2, progress: bool = True) -> dict:
    """Milliseconds to complete one sentence (batch 1, masked-LM forward included) with the trained heads.

    The jobs take turns on every sentence (:func:`helpers.metrics.interleaved_timings`, the fastest of ``rounds``
    repeats after a warm-up), so load on the machine hits them alike. ``"forward"`` is the bare masked-LM
    forward; ``"mlm"`` the single-token path (forward, output matrix, top-k). Returns the median per job, and
    under ``"samples"`` the per-sentence times, for intervals on the ratios (:func:`latency_ratio`).
    The paper times a T4 GPU (Table 3, Inf-time).
    """
    if not sentences:
        raise ValueError("sentences is empty; nothing to time")
    methods = [m for m in (methods or LATENCY_METHODS) if m in completer.methods]
    jobs = {"forward": lambda s: completer.mlm.features([s])}
    jobs.update({method: (lambda s, m=method: completer.complete([s], m, k)) for method in methods})
    synchronize = torch.cuda.synchronize if completer.mlm.device.type == "cuda" else None
    samples = {name: [] for name in jobs}
    for sentence in tqdm(list(sentences), desc="latency", disable=not progress):
        timed = metrics.interleaved_timings(jobs, [sentence], rounds=rounds, synchronize=synchronize)
        for name, value in timed.items():
            samples[name].append(value)
    import statistics

    return {**{name: float(statistics.median(values)) for name, values in samples.items()}, "samples": samples}


def latency_ratio(latency: dict, numerator: str, denominator: str, resamples: int = 1000) -> tuple[float, float, float, int]:
    """Median time of ``numerator`` over median time of ``denominator`` and its 95% bootstrap interval over sentences."""
    import statistics

    pairs = list(zip(latency["samples"][numerator], latency["samples"][denominator]))
    value, low, high = metrics.bootstrap_interval(
        pairs, lambda sample: statistics.median(a for a, _ in sample) / statistics.median(b for _, b in sample),
        resamples=resamples)
    return value, low, high, len(pairs)


# ---------------------------------------------------------------------------------------------
# Tables next to the paper's values, and sentences built from the measured numbers
# ---------------------------------------------------------------------------------------------


def table1(manifest: dict):
    """Table 1: % of phrases by number of tokens and of words, ours next to the paper's."""
    import pandas as pd

    return pd.DataFrame({
        "#tokens: paper % (BERT cased)": PAPER_TABLE1["tokens"],
        f"#tokens: ours % ({manifest['model_name']})": {b: round(v, 1) for b, v in manifest["tokens per phrase %"].items()},
        "#words: paper %": PAPER_TABLE1["words"],
        "#words: ours %": {b: round(v, 1) for b, v in manifest["words per phrase %"].items()},
    }).rename_axis("length")


def describe_vocabulary(manifest: dict) -> str:
    words, k = manifest["corpus words"], manifest["k (min_count)"]
    scaled = PAPER_VOCABULARY["k"] * words / PAPER_VOCABULARY["corpus words"]
    single, paper_single = manifest["tokens per phrase %"]["1"], PAPER_TABLE1["tokens"]["1"]
    one_word = manifest["words per phrase %"]["1"]
    examples = manifest["examples"]
    return (f"k = {k} over {manifest['corpus sentences']:,} sentences ({words:,} words) of {manifest['corpus']} "
            f"(the paper: k = 500 over ~3.3B words; scaled linearly that would be k = {scaled:.2g}): "
            f"{manifest['vocabulary']:,} phrases out of {manifest['distinct phrases']:,} distinct ones "
            f"(paper ~93K), of which {manifest['unseen phrases']} are held out as unseen. "
            f"{single:.1f}% are a single token (paper {paper_single}%), {100 - single:.1f}% need two or more; "
            f"{one_word:.1f}% are one word (paper {PAPER_TABLE1['words']['1']}%). Masked sentences: "
            + ", ".join(f"{split} {count:,}" for split, count in examples.items()) + ".")


def _percent(value: float) -> float:
    return round(100 * value, 1) if value == value else float("nan")


def table2(results: dict, split: str = "test"):
    """Table 2: coverage and accuracy@k as "within coverage / over the whole test set", ours next to the paper's."""
    import pandas as pd

    rows = {}
    for ours, paper in (("mlm", "BERT-cased"), ("naive", "Naive-MTC-BERT")):
        measured = results[ours].get(split)
        reference = PAPER_TABLE2[paper]
        rows[f"paper: {paper}"] = {"coverage %": reference["coverage"], "n": "",
                                   **{f"a@{k}": f"{reference[k][0]} / {reference[k][1]}" for k in KS}}
        if measured is not None:
            rows[f"ours: {METHOD_LABELS[ours]}"] = {
                "coverage %": _percent(measured["coverage"]), "n": measured["n"],
                **{f"a@{k}": f"{_percent(measured['accuracy within coverage'][k])} / {_percent(measured['accuracy'][k])}"
                   for k in KS if k in measured["accuracy"]}}
    return pd.DataFrame(rows).T


def _cell(value: tuple) -> str:
    return f"{100 * value[0]:.1f} [{100 * value[1]:.1f}, {100 * value[2]:.1f}]" if value else ""


TABLE3_KS = (1, 10, 50)
TABLE3_GROUP_NAMES = {"all": "all", "single-token": "1-token", "multi-token": "multi-token"}
TABLE3_METHODS = ("emat", "emat_new_rows", "gru", "naive", "mlm", "mlm_vocab", "prior")  # trained heads first


def table3_rows(intervals: dict, unseen: dict | None = None, latency: dict[str, float] | None = None,
                ks: Sequence[int] = TABLE3_KS) -> tuple[list[str], list[list[str]]]:
    """Table 3 by gold length as ``(header, rows)`` of strings, for the notebook and the README
    (``helpers.claims.record_table``): the paper's rows first (all sentences only, as Table 3 reports), then one row
    per method of ``accuracy_intervals`` in the order of ``TABLE3_METHODS`` (EMAT, EMAT new rows only, the GRU,
    naive MTC, the single-token MLM, the MLM's first token over the phrases, the label prior), with n (all / one-token gold / multi-token gold / unseen)
    and accuracy@k in % as "value [low, high]" (95% bootstrap over sentences) on all seen test sentences, on those
    whose gold phrase is one token and on those whose phrase is several, then on the unseen phrases (all gold);
    given ``latency``, ms per sentence (the paper's on a T4). "—" marks what was not measured."""
    if not isinstance(intervals, dict) or not intervals:
        raise ValueError(f"intervals={intervals!r} must be accuracy_intervals(results, 'test'): a non-empty dict")
    unseen = unseen or {}
    for name, table in (("intervals", intervals), ("unseen", unseen)):
        unknown = sorted(set(table) - set(METHODS))
        if unknown:
            raise ValueError(f"{name} has methods {unknown}; expected some of {METHODS} (from accuracy_intervals)")
    missing = "—"

    def cell(table, method, group, k):
        value = table.get(method, {}).get(group, {}).get(k)
        return _cell(value) if value else missing

    def count(table, method, group):
        found = table.get(method, {}).get(group)
        return str(next(iter(found.values()))[3]) if found else missing

    header = (["method", "n (all / 1-token / multi-token / unseen)"]
              + [f"{TABLE3_GROUP_NAMES[group]} a@{k}" for group in LENGTH_GROUPS for k in ks]
              + [f"unseen a@{k}" for k in ks] + (["ms / sentence"] if latency is not None else []))
    rows = []
    for paper, values in PAPER_TABLE3.items():
        accuracy_cells = [missing if values.get(k) is None or math.isnan(values[k]) else f"{values[k]:g}" for k in ks]
        rows.append([f"paper: {paper}", missing, *accuracy_cells, *[missing] * (len(ks) * (len(LENGTH_GROUPS) + 1) - len(ks)),
                     *([f"{values['ms']:g} (T4)"] if latency is not None else [])])
    for method in [m for m in TABLE3_METHODS if m in intervals or m in unseen]:
        counts = [count(intervals, method, group) for group in LENGTH_GROUPS] + [count(unseen, method, "all")]
        rows.append([f"ours: {METHOD_LABELS[method]}", " / ".join(counts),
                     *[cell(intervals, method, group, k) for group in LENGTH_GROUPS for k in ks],
                     *[cell(unseen, method, "all", k) for k in ks],
                     *([f"{latency[method]:.1f}" if method in latency else missing] if latency is not None else [])])
    return header, rows


def table3_note(manifest: dict) -> str:
    """What :func:`table3_rows` holds, in words, for the README under the table."""
    return (f"Accuracy@k in %, each with its 95% bootstrap interval over the sentences (seen: the test split; unseen: "
            f"the unseen split); n per row: all seen / one-token gold / multi-token gold / unseen sentences. Seen: the gold phrase is a training label; unseen: "
            f"it never is. 1-token / multi-token: the gold phrase is one / several tokens of {manifest['model_name']}'s "
            f"tokenizer. Ours: {_vocabulary_text(manifest)}; the paper's rows: BERT-base with ~93K phrases, all "
            f"sentences only.")


def _vocabulary_text(manifest: dict) -> str:
    return f"{manifest['vocabulary']} phrases (k = {manifest['k (min_count)']}) on {manifest['corpus']}"


def table3(intervals: dict, unseen: dict | None = None, latency: dict[str, float] | None = None):
    """Table 3 by gold length (:func:`table3_rows`) as a pandas table, with ms per sentence given ``latency``."""
    import pandas as pd

    header, rows = table3_rows(intervals, unseen, latency)
    return pd.DataFrame(rows, columns=header).set_index("method")


def training_label_share(ranked: Sequence[Sequence[tuple[str, float]]], train_labels: set[str], k: int = 50) -> float:
    """The share of all top-``k`` completions that are training labels (how closed the ranking is on their set)."""
    items = [text for row in ranked for text, _ in row[:k]]
    return sum(text in train_labels for text in items) / max(1, len(items))


def describe_results(results: dict, intervals: dict, unseen: dict | None = None,
                     train_labels: set[str] | None = None) -> str:
    """Our Table 3 in words, every number computed from the measured results and intervals (and, given the
    training labels, how much of each method's top-50 on unseen sentences is one of them)."""
    def at(method, group, k, table=intervals):
        value = table.get(method, {}).get(group, {}).get(k)
        return f"{_cell(value)}%" if value else "n/a"

    n = {group: next(iter(intervals["emat"][group].values()))[3] if intervals["emat"].get(group) else 0
         for group in LENGTH_GROUPS}
    lines = [f"Seen test sentences (n = {n['all']}; {n['single-token']} with a one-token gold label, "
             f"{n['multi-token']} with a longer one), a@1 / a@10 with 95% bootstrap intervals:"]
    for method in [m for m in METHODS if m in intervals]:
        lines.append(f"  {METHOD_LABELS[method]:<38} all {at(method, 'all', 1)} / {at(method, 'all', 10)}; "
                     f"single-token {at(method, 'single-token', 1)} / {at(method, 'single-token', 10)}; "
                     f"multi-token {at(method, 'multi-token', 1)} / {at(method, 'multi-token', 10)}")
    for first, second, k, group in (("emat", "gru", 1, "all"), ("emat", "gru", 1, "multi-token"),
                                    ("emat", "mlm_vocab", 10, "all"), ("emat", "mlm_vocab", 10, "multi-token")):
        found = paired_difference(results, first, second, k, group=group) if first in results and second in results else None
        if found:
            value, low, high, count = found
            lines.append(f"{METHOD_LABELS[first]} minus {METHOD_LABELS[second]}, a@{k}, {group}: {100 * value:+.1f} points "
                         f"[{100 * low:+.1f}, {100 * high:+.1f}] (paired bootstrap, n = {count}).")
    if unseen:
        lines.append("Unseen phrases (never a training label; n = "
                     f"{next(iter(unseen['emat']['all'].values()))[3]}), a@1 / a@50: "
                     + "; ".join(f"{METHOD_LABELS[m]} {at(m, 'all', 1, unseen)} / {at(m, 'all', 50, unseen)}"
                                 for m in ("emat", "emat_new_rows", "gru", "mlm_vocab", "mlm") if m in unseen))
        single = unseen["emat"].get("single-token")
        if single:
            lines.append(f"  of which one-token gold (n = {next(iter(single.values()))[3]}), a@50: "
                         + "; ".join(f"{METHOD_LABELS[m]} {at(m, 'single-token', 50, unseen)}"
                                     for m in ("emat", "emat_new_rows", "mlm") if m in unseen))
    if train_labels is not None and UNSEEN in results.get("emat", {}):
        shares = {m: training_label_share(results[m][UNSEEN]["ranked"], train_labels, 50)
                  for m in ("emat", "emat_new_rows", "mlm") if UNSEEN in results.get(m, {})}
        lines.append("Share of the top-50 completions on unseen sentences that are training labels: "
                     + "; ".join(f"{METHOD_LABELS[m]} {100 * v:.1f}%" for m, v in shares.items()) + ".")
    return "\n".join(lines)


def describe_latency(latency: dict[str, float]) -> str:
    """Per-sentence times as ratios to the bare masked-LM forward and to the single-token path (forward + output
    matrix + top-k), which is what the paper's "no slower than the MLM" compares with."""
    forward, single = latency["forward"], latency["mlm"]
    parts = [f"masked-LM forward {forward:.1f} ms; single-token MLM path {single:.1f} ms ({single / forward:.2f}x the forward)"]
    for method in ("emat", "emat_new_rows", "gru"):
        if method in latency:
            parts.append(f"{METHOD_LABELS[method]} {latency[method]:.1f} ms ({latency[method] / forward:.2f}x the forward, "
                         f"{latency[method] / single:.2f}x the single-token path)")
    if "gru" in latency and "emat" in latency:
        parts.append(f"GRU / EMAT {latency['gru'] / latency['emat']:.2f}x (paper on a T4: 44 / 15 = {44 / 15:.2f}x)")
    return "; ".join(parts) + "."


def summary_table(manifest: dict, results: dict, intervals: dict, latency: dict[str, float], length_accuracy_value: float):
    """Every number this notebook reproduces, the paper's value next to ours (intervals: 95% bootstrap over sentences)."""
    import pandas as pd

    mlm, naive = results["mlm"]["test"], results["naive"]["test"]
    rows = [
        ("Table 1", "phrases in the vocabulary", "~93K", manifest["vocabulary"]),
        ("Table 1", "k (minimum frequency)", "500", manifest["k (min_count)"]),
        ("Table 1", "single-token phrases %", PAPER_TABLE1["tokens"]["1"], round(manifest["tokens per phrase %"]["1"], 1)),
        ("Table 1", "single-word phrases %", PAPER_TABLE1["words"]["1"], round(manifest["words per phrase %"]["1"], 1)),
        ("§3", "pronoun-only phrases in the vocabulary", "not reported", manifest.get("pronoun phrases", "n/a")),
        ("Table 2", "single-token MLM coverage %", PAPER_TABLE2["BERT-cased"]["coverage"], _percent(mlm["coverage"])),
        ("Table 2", "single-token MLM a@1 % (whole test set)", PAPER_TABLE2["BERT-cased"][1][1], _cell(intervals["mlm"]["all"][1])),
        ("Table 2", "naive MTC coverage %", PAPER_TABLE2["Naive-MTC-BERT"]["coverage"], _percent(naive["coverage"])),
        ("Table 2", "naive MTC a@1 % (whole test set)", PAPER_TABLE2["Naive-MTC-BERT"][1][1], _cell(intervals["naive"]["all"][1])),
        ("§5.2", "length classifier accuracy %", PAPER_LENGTH_CLASSIFIER_ACCURACY, _percent(length_accuracy_value)),
    ]
    for method, paper in (("emat", "BERT-Adapted-EMAT"), ("gru", "BERT-Adapted-RNN")):
        for k in (1, 10, 50):
            rows.append(("Table 3", f"{METHOD_LABELS[method]} a@{k} % (seen, all)", PAPER_TABLE3[paper][k],
                         _cell(intervals[method]["all"][k])))
    for method in ("mlm_vocab", "prior"):
        if method in intervals:
            rows.append(("baseline", f"{METHOD_LABELS[method]} a@10 % (seen, all)", "not reported",
                         _cell(intervals[method]["all"][10])))
    rows += [
        ("Table 3", "EMAT ms / sentence", "15 (T4 GPU)", round(latency["emat"], 1)),
        ("Table 3", "GRU ms / sentence", "44 (T4 GPU)", round(latency["gru"], 1)),
        ("Table 3", "GRU time / EMAT time", round(44 / 15, 2), round(latency["gru"] / latency["emat"], 2)),
        ("§4.1", "EMAT time / bare masked-LM forward", "not reported", round(latency["emat"] / latency["forward"], 3)),
        ("§4.1", "EMAT time / single-token MLM path", "not reported", round(latency["emat"] / latency["mlm"], 3)),
    ]
    table = pd.DataFrame(rows, columns=["source", "quantity", "paper", "ours"], dtype=object)
    return table.set_index(["source", "quantity"])


def mtc_claims(manifest: dict, results: dict, intervals: dict, unseen: dict | None, latency: dict[str, float]) -> list:
    """Notebook 06's ledger rows (``helpers.claims.Claim``): the paper's orderings, each from a paired bootstrap
    over the same test sentences, by gold length where the issue asks it, and the latency ratios (measured once,
    interleaved: no interval, so no direction verdict beyond inconclusive)."""
    from .claims import Claim, verdict_for_difference

    rows = []
    vocabulary = _vocabulary_text(manifest)

    def difference(first, second, k, group, where, claim, paper_value, figure="figures/06_accuracy_at_k.png"):
        found = paired_difference(results, first, second, k, group=group)
        if found is None:
            return
        value, low, high, count = found
        a, b = intervals[first][group][k][0], intervals[second][group][k][0]
        rows.append(Claim(notebook="06", paper="004", where=where, claim=claim, paper_value=paper_value,
                          ours=f"{100 * a:.1f}% vs {100 * b:.1f}% ({100 * value:+.1f} points; {group} gold; {vocabulary})",
                          low=100 * low, high=100 * high, method="paired bootstrap over test sentences", n=count,
                          verdict=verdict_for_difference(low, high), figure=figure,
                          quantity=f"a@{k} {first} - {second}, points ({group})"))

    difference("emat", "gru", 1, "all", "Table 3", "EMAT beats the RNN decoder at a@1", "12.64% vs 9.24%")
    difference("emat", "gru", 1, "multi-token", "Table 3 (multi-token gold only)",
               "EMAT beats the RNN decoder at a@1 on labels of two or more tokens", "not reported by length")
    difference("emat", "gru", 10, "multi-token", "Table 3 (multi-token gold only)",
               "EMAT beats the RNN decoder at a@10 on labels of two or more tokens", "not reported by length")
    difference("emat", "naive", 1, "all", "Tables 2-3", "EMAT beats naive MTC with the same masked LM (whole test set)",
               "12.64% vs 4.3%")
    difference("emat", "mlm_vocab", 10, "all", "§4.1 (a trained head over a closed vocabulary)",
               "EMAT beats the untrained masked LM's first-token ranking over the same phrases", "not reported")
    difference("emat", "prior", 10, "all", "§4.1 (the context matters)",
               "EMAT beats ranking the phrases by their training frequency", "not reported")
    found = paired_difference(results, "emat_new_rows", "emat", 50, split=UNSEEN) if unseen and "emat_new_rows" in results else None
    if found:
        value, low, high, count = found
        rows.append(Claim(notebook="06", paper="004", where="§4.1 (which rows train; public matrix_plugin trains all)",
                          claim="training only the new rows keeps the masked LM's reach on phrases never seen as labels",
                          paper_value="not reported", ours=f"{100 * value:+.1f} points a@50 on unseen phrases (new rows only "
                                                           f"minus all rows)",
                          low=100 * low, high=100 * high, method="paired bootstrap over unseen sentences", n=count,
                          verdict=verdict_for_difference(low, high), figure="figures/06_accuracy_at_k.png",
                          quantity="unseen a@50 emat_new_rows - emat, points"))
    value, low, high, count = latency_ratio(latency, "gru", "emat")
    rows.append(Claim(notebook="06", paper="004", where="Table 3 (Inf-time)", claim="the RNN decoder is slower than EMAT",
                      paper_value="44 / 15 ms = 2.93x (T4)", ours=f"{value:.2f}x (trained heads, batch 1, CPU)",
                      low=low, high=high, method="bootstrap over sentences (ratio of medians)", n=count,
                      verdict=verdict_for_difference(low - 1, high - 1), figure="figures/06_latency.png",
                      quantity="GRU time / EMAT time"))
    for denominator, label in (("forward", "the bare masked-LM forward"), ("mlm", "the single-token MLM path")):
        value, low, high, count = latency_ratio(latency, "emat", denominator)
        rows.append(Claim(notebook="06", paper="004", where="§4.1 / Table 3 (EMAT adds only a matrix product)",
                          claim=f"EMAT costs at most 1.1x {label}", paper_value="15 ms (BERT-base forward on a T4)",
                          ours=f"{value:.3f}x {label} ({manifest['vocabulary']} phrases; the 93K-row case is in "
                               f"benchmarks/emat_speed.py)",
                          low=low, high=high, method="bootstrap over sentences (ratio of medians)", n=count,
                          verdict=verdict_for_difference(1.1 - high, 1.1 - low), figure="figures/06_latency.png",
                          quantity=f"EMAT time / {denominator} time"))
    return rows
