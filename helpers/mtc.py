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

from . import attention, data, metrics
from . import store
from .checks import real_number, whole_number
from . import masks as M
from .paths import cache_dir, runs_dir

MASK_MARKER = "[MASK]"
KS = (1, 3, 5, 10, 50)
UNSEEN = "unseen"
MTC_SPLITS = ("train", "validation", "test", UNSEEN)
DATA_VERSION = "mtc-data-v2"
OCCURRENCES_VERSION = "mtc-occurrences-v1"
FEATURES_VERSION = "mtc-features-v1"
HEADS_VERSION = "mtc-heads-v2"  # part of every runs/ folder name: a change to the heads starts fresh runs
# spaCy coarse tags trimmed from the front of a phrase ("the", "a", "this", "every", ...), and
# punctuation / possessive markers trimmed from either end.
TRIMMED_LEADING_POS = frozenset({"DET", "PUNCT"})
TRIMMED_TRAILING_TAGS = frozenset({"POS"})
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
    length_epochs: int = 5  # naive MTC's length classifier (a linear probe on the frozen features)
    beam_size: int = 16
    naive_first_tokens: int = 100  # §5.2: "we replace the first mask with each of the top-100 predicted tokens"
    naive_second_tokens: int = 10
    naive_examples: int | None = None  # test sentences scored by naive MTC (it needs extra forwards); None: all
    eval_examples: int | None = None  # cap on the test and unseen sentences scored; None: all
    latency_sentences: int = 20
    ks: tuple[int, ...] = KS
    seed: int = 0


SETTINGS = {
    # The same code paths at toy sizes, on the tiny random Llama.
    "smoke": MTCSettings(corpus_sentences=400, min_count=3, max_sentences_per_phrase=8, unseen_fraction=0.1,
                         context_tokens=12, feature_batch_size=16, batch_size=32, emat_epochs=1, gru_epochs=1,
                         length_epochs=1, beam_size=3, naive_first_tokens=3, naive_second_tokens=2,
                         naive_examples=4, eval_examples=8, latency_sentences=1),
    # SmolLM2-135M + the notebook-02 MNTP adapter on half of Austen, within 20 minutes on 2 cores: k = 60 leaves
    # ~170 phrases with 50 sentences each; the GRU gets 5 of the paper's 10 epochs.
    "cpu": MTCSettings(corpus_sentences=15_000, min_count=60, max_sentences_per_phrase=50, unseen_fraction=0.08,
                       context_tokens=16, gru_epochs=5, beam_size=16, naive_first_tokens=10, naive_second_tokens=5,
                       naive_examples=80, eval_examples=300, latency_sentences=20),
    # The Hub model on 200K WikiText-103 sentences (~4M words); k = 50 keeps a few thousand phrases, 50 sentences each.
    "gpu": MTCSettings(corpus_sentences=200_000, min_count=50, context_tokens=48, feature_batch_size=128,
                       beam_size=50, naive_first_tokens=100, naive_second_tokens=10, naive_examples=2000,
                       latency_sentences=100),
    # The paper's hyperparameters; k = 500 per 3.3B words scaled to WikiText-103's 103M words is 16.
    "paper": MTCSettings(corpus_sentences=None, min_count=16, context_tokens=64, feature_batch_size=128,
                         beam_size=50, naive_first_tokens=100, naive_second_tokens=100, naive_examples=None,
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

    §3: "considering phrases as NP-chunks or entities". Trimming makes "the old house", "an old house"
    and "old house" one phrase.
    """
    doc, start, end = span.doc, span.start, span.end
    while start < end and (doc[start].pos_ in TRIMMED_LEADING_POS or doc[start].is_space):
        start += 1
    while end > start and (doc[end - 1].pos_ == "PUNCT" or doc[end - 1].tag_ in TRIMMED_TRAILING_TAGS
                           or doc[end - 1].is_space):
        end -= 1
    return doc[start:end] if start < end else None


def phrase_spans(doc) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the trimmed noun chunks and entities of one spaCy doc, each once."""
    spans = set()
    for span in (*doc.noun_chunks, *doc.ents):
        trimmed = trim_span(span)
        if trimmed is not None:
            spans.add((trimmed.start_char, trimmed.end_char))
    return sorted(spans)


def extract_phrase_spans(texts: Sequence[str], progress: bool = True, batch_size: int = 64) -> list[list[tuple[int, int]]]:
    """:func:`phrase_spans` for every text, with spaCy (``data.spacy_pipeline()``); cached on disk by the texts' hash."""
    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty; there is nothing to extract phrases from")
    path = _mtc_cache() / f"phrase-spans-{store.texts_digest(texts, OCCURRENCES_VERSION)}.json"
    if path.exists():
        return [[tuple(pair) for pair in spans] for spans in store.read_json(path)]
    nlp = data.spacy_pipeline()
    docs = nlp.pipe(texts, batch_size=batch_size, disable=["lemmatizer"])
    spans = [phrase_spans(doc) for doc in tqdm(docs, total=len(texts), desc="spaCy noun chunks + entities",
                                               disable=not progress)]
    store.write_json(path, spans)
    return spans


def phrase_counts(texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]) -> Counter:
    """How often each phrase (the exact, cased text of a span) occurs; spans without a letter or digit are dropped."""
    return Counter(text[start:end] for text, pairs in zip(texts, spans) for start, end in pairs
                   if any(character.isalnum() for character in text[start:end]))


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


def masked_examples(pairs: Sequence[tuple[str, str]], spans: Sequence[Sequence[tuple[int, int]]],
                    vocabulary: Sequence[str], unseen: Iterable[str], max_per_phrase: int,
                    seed: int = 0) -> dict[str, list[MaskedExample]]:
    """Up to ``max_per_phrase`` unique sentences per phrase, each with that phrase masked (§3).

    A sentence keeps the split of its paragraph (the corpus's fixed 90/5/5); every sentence of an
    unseen phrase goes to the ``unseen`` split instead, so those phrases are never a train or dev label.
    """
    whole_number(max_per_phrase, "max_sentences_per_phrase")
    wanted, unseen = set(vocabulary), set(unseen)
    occurrences: dict[str, dict[str, MaskedExample]] = defaultdict(dict)
    for (text, split), pairs_of_text in zip(pairs, spans):
        for start, end in pairs_of_text:
            phrase = text[start:end]
            if phrase in wanted and text not in occurrences[phrase]:  # one example per unique sentence
                occurrences[phrase][text] = MaskedExample(text, start, end, UNSEEN if phrase in unseen else split)
    examples: dict[str, list[MaskedExample]] = {split: [] for split in MTC_SPLITS}
    for phrase in vocabulary:
        found = list(occurrences[phrase].values())
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
    unseen = choose_unseen_phrases(vocabulary, settings.unseen_fraction, settings.seed)
    examples = masked_examples(pairs, spans, vocabulary, unseen, settings.max_sentences_per_phrase, settings.seed)
    token_counts = [phrase_token_count(tokenizer, phrase) for phrase in vocabulary]
    manifest = {
        "corpus": corpus, "model_name": model_name, "k (min_count)": settings.min_count,
        "corpus sentences": len(texts), "corpus words": sum(len(text.split()) for text in texts),
        "distinct phrases": len(counts), "phrase occurrences": sum(counts.values()),
        "vocabulary": len(vocabulary), "unseen phrases": len(unseen),
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
                                                  "unseen": unseen}, ensure_ascii=False)
    with store.atomic_write(folder / "examples.jsonl") as handle:
        for split in MTC_SPLITS:
            for example in examples[split]:
                handle.write(json.dumps(asdict(example), ensure_ascii=False) + "\n")
    store.write_json(folder / "manifest.json", manifest, indent=1, ensure_ascii=False)  # written last: marks done
    return MTCDataset(vocabulary, unseen, examples, manifest, folder)


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
    return MTCDataset(vocabulary["phrases"], vocabulary["unseen"], examples, manifest, folder)


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


@dataclass
class MaskedLM:
    """A frozen masked LM: an MNTP decoder (the output at l - 1 predicts the token at l, MAGNET §3.2.1).

    Inputs are ``[separator] + left + [mask] * n + right`` with at most ``context_tokens`` on each side,
    under the bidirectional mask. The separator (EOS) is what precedes a text in the packed blocks the
    MNTP adapter was trained on, so a phrase at the start of a sentence still has a position before it.
    """

    model: nn.Module
    tokenizer: object
    mask_id: int
    separator_id: int
    context_tokens: int
    name: str = ""
    _token_strings: list[str] | None = field(default=None, repr=False)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def output_matrix(self) -> torch.Tensor:
        return self.model.get_output_embeddings().weight

    @property
    def input_embeddings(self) -> torch.Tensor:
        return self.model.get_input_embeddings().weight

    @property
    def hidden_size(self) -> int:
        return int(self.output_matrix.shape[1])

    @property
    def token_strings(self) -> list[str]:
        """Each output row decoded and stripped: the completion string a single token stands for."""
        if self._token_strings is None:
            specials = set(self.tokenizer.all_special_ids)
            decoded = self.tokenizer.batch_decode([[i] for i in range(self.output_matrix.shape[0])])
            self._token_strings = ["" if i in specials else text.strip() for i, text in enumerate(decoded)]
        return self._token_strings

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False).input_ids if text else []

    def encode(self, sentence: str, mask_count: int = 1) -> tuple[list[int], int]:
        """Token ids of a sentence with one :data:`MASK_MARKER`, and the position of the (first) mask."""
        left, right = split_at_mask(sentence)
        left_ids = self._ids(left.rstrip(" "))[-self.context_tokens:] if left.strip() else []
        right_ids = self._ids(right)[:self.context_tokens]
        ids = [self.separator_id, *left_ids, *[self.mask_id] * mask_count, *right_ids]
        return ids, 1 + len(left_ids)

    def phrase_ids(self, example: MaskedExample) -> list[int]:
        """The label's tokens as they stand in this sentence (with the space before it, if any)."""
        spaced = example.start > 0 and example.sentence[example.start - 1] == " "
        return self._ids((" " if spaced else "") + example.phrase)

    @torch.no_grad()
    def hidden_at(self, sequences: Sequence[Sequence[int]], positions: Sequence[int]) -> torch.Tensor:
        """Last hidden states at ``positions`` (one per sequence), right-padded batch, bidirectional mask."""
        length = max(len(ids) for ids in sequences)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.separator_id
        input_ids = torch.full((len(sequences), length), pad, dtype=torch.long)
        padding = torch.zeros_like(input_ids)
        for row, ids in enumerate(sequences):
            input_ids[row, :len(ids)] = torch.tensor(ids)
            padding[row, :len(ids)] = 1
        body = self.model.get_decoder()
        hidden = attention.forward_with_mask(body, input_ids, M.bidirectional, padding_mask=padding).last_hidden_state
        return hidden[torch.arange(len(sequences), device=hidden.device), torch.tensor(positions, device=hidden.device)]

    def features(self, sentences: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Contextual embeddings at the mask (the MNTP output one position before it) and the preceding token ids."""
        encoded = [self.encode(sentence) for sentence in sentences]
        hidden = self.hidden_at([ids for ids, _ in encoded], [position - 1 for _, position in encoded])
        previous = torch.tensor([ids[position - 1] for ids, position in encoded], device=self.device)
        return hidden.float(), previous

    def token_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The masked LM's own single-token prediction from a contextual embedding (Figure 1 (1))."""
        return hidden @ self.output_matrix.float().T


def load_masked_lm(cfg, settings: MTCSettings, progress: bool = True) -> MaskedLM:
    """The profile's model with notebook 02's MNTP adapter (``training.load_or_train_mntp``), merged and frozen."""
    from . import training

    model, tokenizer, mask_id = training.load_or_train_mntp(cfg, progress=progress)
    model.eval().requires_grad_(False)
    separator = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.bos_token_id
    return MaskedLM(model, tokenizer, int(mask_id), int(separator), settings.context_tokens, cfg.model_name)


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
    encoded = [mlm.encode(example.masked) for example in examples]
    return EncodedSplit([ids for ids, _ in encoded], [position for _, position in encoded],
                        [mlm.phrase_ids(example) for example in examples], [example.phrase for example in examples],
                        [example.masked for example in examples])


def _model_fingerprint(mlm: MaskedLM) -> list[float]:
    probe = f"It is a truth universally acknowledged, that {MASK_MARKER} in possession of a good fortune."
    hidden, _ = mlm.features([probe])
    return [round(float(v), 4) for v in hidden[0, :16].cpu()]


def compute_features(mlm: MaskedLM, encoded: EncodedSplit, batch_size: int, progress: bool = True,
                     desc: str = "features") -> torch.Tensor:
    """The contextual embedding at the mask of every example, ``(N, hidden)`` float32 on the CPU."""
    whole_number(batch_size, "batch_size")
    order = sorted(range(len(encoded)), key=lambda i: len(encoded.input_ids[i]))  # similar lengths per batch
    features = torch.empty(len(encoded), mlm.hidden_size)
    for start in tqdm(range(0, len(order), batch_size), desc=desc, disable=not progress):
        rows = order[start:start + batch_size]
        hidden = mlm.hidden_at([encoded.input_ids[i] for i in rows], [encoded.mask_positions[i] - 1 for i in rows])
        features[rows] = hidden.float().cpu()
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
    as the **mean of the output embeddings of the phrase's tokens**. With ``train_token_rows`` (the default)
    the whole extended matrix is trained, a copy of the original rows included (the masked LM itself is
    untouched); without it only the new rows are, and the token rows stay the masked LM's own.
    """

    def __init__(self, token_matrix: torch.Tensor, phrase_rows: torch.Tensor, token_strings: Sequence[str],
                 phrases: Sequence[str], train_token_rows: bool = True):
        super().__init__()
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
        return torch.cat([hidden @ self.token_matrix.T, hidden @ self.phrase_matrix.T], dim=-1)

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
    return ExtendedMatrixDecoder(matrix, phrase_rows, mlm.token_strings, multi, train_token_rows).to(mlm.device)


def emat_labels(emat: ExtendedMatrixDecoder, mlm: MaskedLM, encoded: EncodedSplit) -> torch.Tensor:
    canonical = {phrase: mlm.tokenizer(" " + phrase, add_special_tokens=False).input_ids for phrase in set(encoded.phrases)}
    return torch.tensor([emat.label(phrase, ids, canonical[phrase])
                         for phrase, ids in zip(encoded.phrases, encoded.phrase_ids)])


# ---------------------------------------------------------------------------------------------
# §4.2 The GRU decoder
# ---------------------------------------------------------------------------------------------


class GRUDecoder(nn.Module):
    """The generative extension (§4.2, Figure 1 (3)).

    - *"we use this vector [the contextual embedding of the mask] as the first hidden vector fed into
      the GRU"*: every layer starts from it.
    - *"As the first input … the static embedding of the token preceding the [MASK] token. For later
      steps, the input is the previous token"*; the static embeddings are the masked LM's own (shared, frozen).
    - *"at each step we concatenate: a) the output of the GRU; b) the previous vector embedding; and c)
      the masked token contextual embedding … and feed them to a feed forward (FF) layer"*, whose output
      goes through the masked LM's output matrix (its "MLM decoder") to the next token. Dropout 0.2,
      2 layers (App. C, Table 8).
    """

    def __init__(self, embeddings: torch.Tensor, output_matrix: torch.Tensor, eos_id: int, layers: int = 2,
                 dropout: float = 0.2):
        super().__init__()
        hidden = int(embeddings.shape[1])
        self.register_buffer("embeddings", embeddings.detach().float(), persistent=False)
        self.register_buffer("output_matrix", output_matrix.detach().float(), persistent=False)
        self.eos_id = int(eos_id)
        self.layers = whole_number(layers, "layers")
        self.gru = nn.GRU(hidden, hidden, num_layers=layers, dropout=dropout if layers > 1 else 0.0, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.feed_forward = nn.Linear(3 * hidden, hidden)

    def initial_state(self, mask_hidden: torch.Tensor) -> torch.Tensor:
        return mask_hidden.unsqueeze(0).expand(self.layers, -1, -1).contiguous()

    def step(self, tokens: torch.Tensor, state: torch.Tensor, mask_hidden: torch.Tensor):
        """One generation step: logits over the vocabulary and the new GRU state."""
        embedded = self.embeddings[tokens]
        output, state = self.gru(embedded.unsqueeze(1), state)
        combined = self.dropout(torch.cat([output[:, 0], embedded, mask_hidden], dim=-1))
        return self.feed_forward(combined) @ self.output_matrix.T, state

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
        """Mean cross-entropy per label token (EOS included), step by step as in :meth:`forward`, without
        keeping every step's logits."""
        state, tokens = self.initial_state(mask_hidden), first_tokens
        total = mask_hidden.new_zeros(())
        for t in range(targets.shape[1]):
            logits, state = self.step(tokens, state, mask_hidden)
            total = total + F.cross_entropy(logits, targets[:, t], ignore_index=-100, reduction="sum")
            use_gold = teacher_forcing >= 1.0 or bool(torch.rand(()) < teacher_forcing)
            tokens = targets[:, t].clamp(min=0) if use_gold else logits.argmax(-1)
        return total / (targets != -100).sum().clamp(min=1)

    @torch.no_grad()
    def beam_search(self, mask_hidden: torch.Tensor, first_tokens: torch.Tensor, beam_size: int, max_steps: int,
                    num_results: int) -> list[list[tuple[list[int], float]]]:
        """Beam search until EOS (§4.2): every live beam that emits EOS becomes a finished completion.

        Returns, per input, up to ``num_results`` finished token sequences (EOS stripped) with their
        log-probabilities, best first. Stops early once ``num_results`` finished ones beat every live beam.
        """
        whole_number(beam_size, "beam_size")
        whole_number(max_steps, "max_steps")
        count, vocab = mask_hidden.shape[0], self.output_matrix.shape[0]
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
    eos = mlm.tokenizer.eos_token_id if mlm.tokenizer.eos_token_id is not None else mlm.separator_id
    return GRUDecoder(mlm.input_embeddings, mlm.output_matrix, eos, settings.gru_layers,
                      settings.gru_dropout).to(mlm.device)


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
    encoded_one = [mlm.encode(sentence) for sentence in sentences]
    encoded_two = [mlm.encode(sentence, mask_count=2) for sentence in sentences]
    hidden = mlm.hidden_at([ids for ids, _ in encoded_one], [p - 1 for _, p in encoded_one]).float()
    length_probs = lengths(hidden).softmax(-1)
    single = mlm.token_logits(hidden).softmax(-1) * length_probs[:, :1]
    first = mlm.token_logits(mlm.hidden_at([ids for ids, _ in encoded_two], [p - 1 for _, p in encoded_two]).float())
    first_top = first.softmax(-1).topk(first_tokens, dim=-1)
    filled, positions = [], []
    for (ids, position), tokens in zip(encoded_two, first_top.indices.tolist()):
        for token in tokens:
            filled.append(ids[:position] + [token] + ids[position + 1:])
            positions.append(position)  # the first token's output predicts the second mask
    second = mlm.token_logits(mlm.hidden_at(filled, positions).float()).softmax(-1)
    second_top = second.topk(second_tokens, dim=-1)
    strings = mlm.token_strings
    ranked = []
    for row in range(len(sentences)):
        candidates = [(strings[t], float(p)) for p, t in zip(*single[row].topk(8 * k + 16))]
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


def train_head(head: nn.Module, tensors: dict[str, torch.Tensor], loss_fn, evaluate, *, epochs: int,
               settings: MTCSettings, run_dir, max_grad_norm: float = 0.0, resume: bool = True,
               progress: bool = True) -> list[dict]:
    """Adam (``settings.lr``), batches of ``settings.batch_size`` over a fresh seeded permutation each epoch,
    through ``training.train``: metrics per step and dev metrics per epoch in ``run_dir/metrics.jsonl``,
    a checkpoint per epoch, and a finished run is reused rather than retrained."""
    from . import objectives, training

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

    config = training.TrainConfig(steps=epochs * per_epoch, batch_size=settings.batch_size, lr=settings.lr,
                                  max_grad_norm=max_grad_norm, eval_every=per_epoch, checkpoint_every=per_epoch,
                                  seed=settings.seed, extra={"examples": count, "steps per epoch": per_epoch})
    return training.train(head, batch_for=batch_for, loss_fn=loss_fn, config=config, run_dir=run_dir,
                          evaluate=evaluate, resume=resume, progress=progress)


_TRAINING_FIELDS = ("batch_size", "lr", "emat_epochs", "gru_epochs", "gru_layers", "gru_dropout", "teacher_forcing",
                    "length_epochs", "seed")


def _run_dir(name: str, dataset: MTCDataset, mlm: MaskedLM, settings: MTCSettings) -> Path:
    """``runs/06_<head>_<hash>``: one folder per dataset, model and training settings, so a rerun resumes it."""
    trained_with = {field_name: getattr(settings, field_name) for field_name in _TRAINING_FIELDS}
    return runs_dir() / f"06_{name}_{_digest(HEADS_VERSION, dataset.key, mlm.name, mlm.context_tokens, trained_with)}"


def train_emat(mlm: MaskedLM, dataset: MTCDataset, encoded: dict[str, EncodedSplit], features: dict[str, torch.Tensor],
               settings: MTCSettings, *, train_token_rows: bool = True, resume: bool = True, progress: bool = True):
    """Build EMAT over the whole vocabulary (seen and unseen phrases) and train it (Adam 1e-3, batch 128,
    2 epochs; App. C): the whole extended matrix, or with ``train_token_rows=False`` the new rows only."""
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


def train_gru(mlm: MaskedLM, dataset: MTCDataset, encoded: dict[str, EncodedSplit], features: dict[str, torch.Tensor],
              settings: MTCSettings, *, resume: bool = True, progress: bool = True):
    """Train the GRU decoder with teacher forcing 0.5 (Adam 1e-3, batch 128, 10 epochs, App. C; gradients clipped at 1)."""
    gru = build_gru(mlm, settings)
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
    return gru.eval(), records


def train_length_classifier(mlm: MaskedLM, dataset: MTCDataset, encoded: dict[str, EncodedSplit],
                            features: dict[str, torch.Tensor], settings: MTCSettings, *, resume: bool = True,
                            progress: bool = True):
    """Naive MTC's length classifier on the frozen features (classes 1, 2, 3+ tokens; §5.2)."""
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

METHODS = ("mlm", "naive", "emat", "gru", "emat_new_rows")
METHOD_LABELS = {"mlm": "single-token MLM", "naive": "naive MTC", "emat": "EMAT", "gru": "GRU decoder",
                 "emat_new_rows": "EMAT, new rows only"}


@dataclass
class Completer:
    """The frozen masked LM with its three heads: complete any sentence that holds one [MASK]."""

    mlm: MaskedLM
    emat: ExtendedMatrixDecoder
    gru: GRUDecoder
    lengths: LengthClassifier
    settings: MTCSettings
    max_steps: int
    emat_new_rows: ExtendedMatrixDecoder | None = None  # the ablation: token rows kept frozen

    @property
    def methods(self) -> tuple[str, ...]:
        return METHODS if self.emat_new_rows is not None else METHODS[:-1]

    def _check(self, method: str, k) -> None:
        if method not in self.methods:
            raise ValueError(f"method={method!r} is not one of {self.methods}")
        _check_k(k)

    @torch.no_grad()
    def from_features(self, method: str, hidden: torch.Tensor, first: torch.Tensor, k: int):
        """Completions from cached mask embeddings (``method`` in mlm, emat, emat_new_rows, gru)."""
        self._check(method, k)
        hidden, first = hidden.to(self.mlm.device).float(), first.to(self.mlm.device)
        if method == "mlm":
            return rank_candidates(self.mlm.token_logits(hidden).softmax(-1), self.mlm.token_strings, k)
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


def _batched(items: Sequence, size: int):
    for start in range(0, len(items), size):
        yield start, items[start:start + size]


def evaluate_methods(completer: Completer, encoded: dict[str, EncodedSplit], features: dict[str, torch.Tensor],
                     splits: Sequence[str] = ("test", UNSEEN), progress: bool = True) -> dict:
    """accuracy@k of every method on each split, over all sentences and within each method's coverage.

    Coverage (Table 2): the single-token MLM can only produce labels that are one token here; naive MTC
    labels of one or two tokens; EMAT and the GRU any label. Naive MTC runs on the first
    ``settings.naive_examples`` sentences only (it needs 2 + ``naive_first_tokens`` forwards each).
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
        for method in [m for m in completer.methods if m != "naive"]:
            size = 512 if method != "gru" else 32
            ranked = []
            for start, _ in tqdm(list(_batched(range(limit), size)), desc=f"{METHOD_LABELS[method]} ({split})",
                                 disable=not progress):
                ranked.extend(completer.from_features(method, hidden[start:start + size], first[start:start + size], k))
            results[method][split] = _scores(ranked, gold, lengths, ks, max_tokens=1 if method == "mlm" else None)
        naive_limit = limit if settings.naive_examples is None else min(settings.naive_examples, limit)
        sentences = split_encoded.sentences[:naive_limit]
        size = max(1, 256 // settings.naive_first_tokens)
        ranked = []
        for _, chunk in tqdm(list(_batched(sentences, size)), desc=f"naive MTC ({split})", disable=not progress):
            ranked.extend(completer.complete(chunk, "naive", k))
        results["naive"][split] = _scores(ranked, gold[:naive_limit], lengths[:naive_limit], ks, max_tokens=2)
    return results


def _scores(ranked, gold, lengths, ks, max_tokens: int | None) -> dict:
    covered = [i for i, n in enumerate(lengths) if max_tokens is None or n <= max_tokens]
    within = accuracy([ranked[i] for i in covered], [gold[i] for i in covered], ks) if covered else {k: float("nan") for k in ks}
    return {"n": len(gold), "coverage": len(covered) / len(gold), "accuracy": accuracy(ranked, gold, ks),
            "accuracy within coverage": within, "ranked": ranked}


def measure_latency(completer: Completer, sentences: Sequence[str], methods: Sequence[str] | None = None, k: int = 10,
                    rounds: int = 2, progress: bool = True) -> dict[str, float]:
    """Milliseconds to complete one sentence (batch 1, masked LM forward included) per method: the median over
    ``sentences`` of the fastest of ``rounds`` repeats, the methods taking turns on every sentence
    (:func:`helpers.metrics.interleaved_timings`), so that their ratios are measured in one run.

    ``"forward"`` is the plain masked LM forward alone. The paper times a T4 GPU (Table 3, Inf-time).
    """
    if not sentences:
        raise ValueError("sentences is empty; nothing to time")
    methods = completer.methods if methods is None else methods
    jobs = {"forward": lambda s: completer.mlm.features([s])}
    jobs.update({method: (lambda s, m=method: completer.complete([s], m, k)) for method in methods})
    synchronize = torch.cuda.synchronize if completer.mlm.device.type == "cuda" else None
    return metrics.interleaved_timings(jobs, list(sentences), rounds=rounds, synchronize=synchronize, progress=progress)


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


def table3(results: dict, latency: dict[str, float] | None = None):
    """Table 3: accuracy@k (%) of every method on seen and unseen test phrases, and ms per sentence."""
    import pandas as pd

    rows = {}
    for paper, values in PAPER_TABLE3.items():
        rows[f"paper: {paper}"] = {"ms / sentence": values["ms"], "n": "", **{f"a@{k}": values[k] for k in KS}}
    for method in ("emat", "emat_new_rows", "gru", "mlm", "naive"):
        for split, label in (("test", "seen"), (UNSEEN, "unseen")):
            measured = results.get(method, {}).get(split)
            if measured is None:
                continue
            rows[f"ours: {METHOD_LABELS[method]} ({label})"] = {
                "ms / sentence": round(latency[method], 1) if latency and method in latency else float("nan"),
                "n": measured["n"],
                **{f"a@{k}": _percent(measured["accuracy"][k]) for k in KS if k in measured["accuracy"]}}
    return pd.DataFrame(rows).T


def describe_results(results: dict, latency: dict[str, float] | None = None) -> str:
    """Our Table 3 in words against the paper's claims, every number computed from ``results``."""
    emat, gru, mlm, naive = (results[m].get("test") for m in ("emat", "gru", "mlm", "naive"))
    lines = [f"Seen test phrases (n = {emat['n']}): EMAT a@1 {_percent(emat['accuracy'][1])}%, "
             f"a@10 {_percent(emat['accuracy'][10])}%; GRU a@1 {_percent(gru['accuracy'][1])}%, "
             f"a@10 {_percent(gru['accuracy'][10])}% (paper: EMAT 12.64% / 30.65%, RNN 9.24% / 21.32%). "
             f"EMAT {'beats' if emat['accuracy'][1] > gru['accuracy'][1] else 'does not beat'} the GRU at a@1 "
             f"(the paper: EMAT ahead by 3.4 points)."]
    lines.append(f"Baselines over the whole test set: single-token MLM a@1 {_percent(mlm['accuracy'][1])}% "
                 f"(coverage {_percent(mlm['coverage'])}%), naive MTC a@1 {_percent(naive['accuracy'][1])}% "
                 f"(coverage {_percent(naive['coverage'])}%, n = {naive['n']}); paper 1.8% and 4.3%. "
                 f"EMAT {'beats' if emat['accuracy'][1] > max(mlm['accuracy'][1], naive['accuracy'][1]) else 'does not beat'}"
                 f" both baselines at a@1 (the paper: it does, 12.6% against 4.3%).")
    rows_only = results.get("emat_new_rows", {})
    if "test" in rows_only:
        lines.append(f"EMAT with only the new rows trained (token rows frozen): a@1 {_percent(rows_only['test']['accuracy'][1])}% "
                     f"seen" + (f", {_percent(rows_only[UNSEEN]['accuracy'][1])}% unseen" if UNSEEN in rows_only else "")
                     + f", against {_percent(emat['accuracy'][1])}% seen"
                     + (f", {_percent(results['emat'][UNSEEN]['accuracy'][1])}% unseen" if UNSEEN in results["emat"] else "")
                     + " with the whole extended matrix trained.")
    emat_unseen, gru_unseen = results["emat"].get(UNSEEN), results["gru"].get(UNSEEN)
    if emat_unseen is not None:
        lines.append(f"Unseen phrases (n = {emat_unseen['n']}, never a training label): EMAT a@1 "
                     f"{_percent(emat_unseen['accuracy'][1])}%, a@50 {_percent(emat_unseen['accuracy'][50])}%; "
                     f"GRU a@1 {_percent(gru_unseen['accuracy'][1])}%, a@50 {_percent(gru_unseen['accuracy'][50])}%. "
                     f"The paper reports no unseen split; its vocabulary covers train, dev and test together.")
    if latency:
        lines.append(f"Per sentence (batch 1, this machine): masked LM forward {latency['forward']:.1f} ms, "
                     f"single-token MLM {latency['mlm']:.1f} ms, EMAT {latency['emat']:.1f} ms "
                     f"({latency['emat'] / latency['mlm']:.2f}x the MLM), GRU {latency['gru']:.1f} ms "
                     f"({latency['gru'] / latency['emat']:.1f}x EMAT; paper on a T4: 15 vs 44 ms, 2.9x).")
    return "\n".join(lines)


def summary_table(manifest: dict, results: dict, latency: dict[str, float], length_accuracy_value: float):
    """Every number this notebook reproduces, the paper's value next to ours."""
    import pandas as pd

    emat, gru, mlm, naive = (results[m]["test"] for m in ("emat", "gru", "mlm", "naive"))
    rows = [
        ("Table 1", "phrases in the vocabulary", "~93K", manifest["vocabulary"]),
        ("Table 1", "k (minimum frequency)", "500", manifest["k (min_count)"]),
        ("Table 1", "single-token phrases %", PAPER_TABLE1["tokens"]["1"], round(manifest["tokens per phrase %"]["1"], 1)),
        ("Table 1", "single-word phrases %", PAPER_TABLE1["words"]["1"], round(manifest["words per phrase %"]["1"], 1)),
        ("Table 2", "single-token MLM coverage %", PAPER_TABLE2["BERT-cased"]["coverage"], _percent(mlm["coverage"])),
        ("Table 2", "single-token MLM a@1 % (whole test set)", PAPER_TABLE2["BERT-cased"][1][1], _percent(mlm["accuracy"][1])),
        ("Table 2", "naive MTC coverage %", PAPER_TABLE2["Naive-MTC-BERT"]["coverage"], _percent(naive["coverage"])),
        ("Table 2", "naive MTC a@1 % (whole test set)", PAPER_TABLE2["Naive-MTC-BERT"][1][1], _percent(naive["accuracy"][1])),
        ("§5.2", "length classifier accuracy %", PAPER_LENGTH_CLASSIFIER_ACCURACY, _percent(length_accuracy_value)),
    ]
    for k in KS:
        rows.append(("Table 3", f"EMAT a@{k} % (seen)", PAPER_TABLE3["BERT-Adapted-EMAT"][k], _percent(emat["accuracy"][k])))
    for k in KS:
        rows.append(("Table 3", f"GRU a@{k} % (seen)", PAPER_TABLE3["BERT-Adapted-RNN"][k], _percent(gru["accuracy"][k])))
    for method, paper in (("emat", "BERT-Adapted-EMAT"), ("gru", "BERT-Adapted-RNN")):
        unseen = results[method].get(UNSEEN)
        if unseen is not None:
            rows.append(("Table 3", f"{METHOD_LABELS[method]} a@10 % (unseen phrases)", "not reported",
                         _percent(unseen["accuracy"][10])))
    rows += [
        ("Table 3", "EMAT ms / sentence", "15 (T4 GPU)", round(latency["emat"], 1)),
        ("Table 3", "GRU ms / sentence", "44 (T4 GPU)", round(latency["gru"], 1)),
        ("Table 3", "GRU time / EMAT time", round(44 / 15, 2), round(latency["gru"] / latency["emat"], 2)),
        ("issue 7", "EMAT time / single-token MLM time", "<= 1.1 (goal)", round(latency["emat"] / latency["mlm"], 3)),
    ]
    table = pd.DataFrame(rows, columns=["source", "quantity", "paper", "ours"], dtype=object)
    return table.set_index(["source", "quantity"])
