"""Notebook 06's data: the phrase vocabulary, the masked sentences and their splits (§3), and the cached features.

- **Vocabulary (§3):** spaCy noun chunks cut to their head as the public code cuts them, and entities, both then
  trimmed of leading determiners and edge punctuation (which the public code does not do: it keeps spaCy's entity
  spans as they are; at the cpu scale this gives 978 phrases where its rule gives 976), that occur at least ``k``
  times; up to 50 masked sentences per phrase,
  one masked span per sentence, train/dev/test 90/5/5, and an *unseen* split of phrases that never occur as a label
  in train or dev. Cached under ``data/cache/mtc/`` with a manifest (counts, ``k``, the Table 1 distributions).
- **Features:** the frozen masked LM's contextual embedding at the mask
  (:func:`helpers.papers.emat.mechanism.mask_features`), computed once and cached next to the dataset. For the
  MNTP decoder (MAGNET §3.2.1, notebook 02) the output at position l - 1 predicts the token at l, so the feature is
  the last hidden state *before* the mask.
"""
from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import torch
from tqdm.auto import tqdm

from ... import data, store
from ...checks import real_number, whole_number
from ...masked_lm import MaskedLM
from ...paths import cache_dir
from .mechanism import mask_features
from .settings import PhraseData

MASK_MARKER = MaskedLM.MASK_MARKER  # "[MASK]"
UNSEEN = "unseen"
MTC_SPLITS = ("train", "validation", "test", UNSEEN)
DATA_VERSION = "mtc-data-v3"  # v3: one masked span per sentence, pronoun phrases recorded
OCCURRENCES_VERSION = "mtc-occurrences-v2"  # v2: head-trimmed chunks, entities first, pronoun flag
FEATURES_VERSION = "mtc-features-v1"
# spaCy coarse tags trimmed from the front of a phrase ("the", "a", "this", "every", ...), and
# punctuation / possessive markers trimmed from either end.
TRIMMED_LEADING_POS = frozenset({"DET", "PUNCT"})
TRIMMED_TRAILING_TAGS = frozenset({"POS"})
# The public code keeps these dependents with a noun chunk's head and drops everything before them.
HEAD_MODIFIER_DEPS = frozenset({"advmod", "amod", "compound"})
# Token-count and word-count buckets of Table 1.
LENGTH_BUCKETS = ("1", "2", "3", "4", "5", ">5")


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

    Entities and noun chunks cut to their head (:func:`head_of_chunk`, as the public code) that share no token with
    an entity (entities win, as the public code); overlapping spans of one kind are resolved by
    ``spacy.util.filter_spans`` (longest first), as the public code. Unlike the public code, which keeps spaCy's
    entity spans and chunk heads as they are, both are trimmed of leading determiners and edge punctuation /
    possessive "'s" (:func:`trim_span`), so "the Bennets" and "Bennets" are one phrase. ``pronoun`` marks a phrase
    made of pronouns only ("she", "them"), which §3's vocabulary keeps and we report separately.
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


def vocabulary_token_counts(tokenizer, phrases: Sequence[str]) -> list[int]:
    """:func:`phrase_token_count` of every phrase: Table 1's per-phrase token counts, for an interval on its shares."""
    return [phrase_token_count(tokenizer, phrase) for phrase in phrases]


def _manifest(corpus: str, model_name: str, data_settings: PhraseData, texts, counts: Counter, vocabulary,
              unseen, pronouns, examples, token_counts) -> dict:
    """The dataset's manifest: what it was built from, its counts and Table 1's distributions."""
    return {
        "corpus": corpus, "model_name": model_name, "k (min_count)": data_settings.min_count,
        "corpus sentences": len(texts), "corpus words": sum(len(text.split()) for text in texts),
        "distinct phrases": len(counts), "phrase occurrences": sum(counts.values()),
        "vocabulary": len(vocabulary), "unseen phrases": len(unseen), "pronoun phrases": len(pronouns),
        "labelled phrases": len({example.phrase for split_examples in examples.values() for example in split_examples}),
        "max sentences per phrase": data_settings.max_sentences_per_phrase,
        "examples": {split: len(split_examples) for split, split_examples in examples.items()},
        "tokens per phrase %": length_distribution(token_counts),
        "words per phrase %": length_distribution(len(phrase.split()) for phrase in vocabulary),
        "mean tokens per phrase": sum(token_counts) / len(token_counts),
        "most frequent": [[phrase, counts[phrase]] for phrase in vocabulary[:20]],
    }


def build_dataset(corpus: str, data_settings: PhraseData, tokenizer, model_name: str, *, progress: bool = True,
                  rebuild: bool = False) -> MTCDataset:
    """Vocabulary, masked sentences and splits for ``corpus`` (§3), cached under ``data/cache/mtc/``.

    The folder is keyed by ``data_settings``, the corpus and the model (whose tokenizer counts Table 1's tokens).
    The frequency count and the vocabulary cover all three corpus splits together, as the public code
    does; the unseen phrases are then taken out of train and dev. The manifest records the counts,
    the ``k`` used and the tokens-per-phrase distribution under ``model_name``'s tokenizer (Table 1).
    """
    key = store.fingerprint({"version": DATA_VERSION, "corpus": corpus, "data": data_settings, "model_name": model_name})
    folder = _mtc_cache() / f"dataset-{corpus}-{key}"
    if (folder / "manifest.json").exists() and not rebuild:
        return load_dataset(folder)
    pairs = corpus_sentences(corpus, data_settings.corpus_sentences)
    texts = [text for text, _ in pairs]
    spans = extract_phrase_spans(texts, progress=progress)
    counts = phrase_counts(texts, spans)
    vocabulary = build_vocabulary(counts, data_settings.min_count)
    pronouns = sorted(pronoun_phrases(texts, spans) & set(vocabulary))
    unseen = choose_unseen_phrases(vocabulary, data_settings.unseen_fraction, data_settings.seed)
    examples = masked_examples(pairs, spans, vocabulary, unseen, data_settings.max_sentences_per_phrase,
                               data_settings.seed)
    token_counts = vocabulary_token_counts(tokenizer, vocabulary)
    manifest = _manifest(corpus, model_name, data_settings, texts, counts, vocabulary, unseen, pronouns, examples,
                         token_counts)
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
# The frozen masked LM: encoded sentences, contextual embeddings at the mask
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
    """The masked sentences as ``mlm`` reads them, and each label's tokens as they stand in its sentence."""
    encoded = [mlm.encode_masked(example.masked) for example in examples]
    spaced = [example.start > 0 and example.sentence[example.start - 1] == " " for example in examples]
    return EncodedSplit([ids for ids, _ in encoded], [position for _, position in encoded],
                        [mlm.phrase_ids(example.phrase, space) for example, space in zip(examples, spaced)],
                        [example.phrase for example in examples], [example.masked for example in examples])


def encode_splits(mlm: MaskedLM, dataset: MTCDataset) -> dict[str, EncodedSplit]:
    """:func:`encode_examples` for every split of ``dataset`` (train, validation, test, unseen)."""
    return {split: encode_examples(mlm, dataset.examples[split]) for split in MTC_SPLITS}


def model_probe(mlm: MaskedLM) -> list[float]:
    """The first 16 feature values of a fixed probe sentence, rounded: tells a retrained adapter from the old one."""
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
        features[rows] = mask_features(mlm, [encoded.input_ids[i] for i in rows],
                                       [encoded.mask_positions[i] for i in rows]).cpu()
    return features


def cached_features(mlm: MaskedLM, dataset: MTCDataset, encoded: dict[str, EncodedSplit], batch_size: int,
                    progress: bool = True) -> dict[str, torch.Tensor]:
    """:func:`compute_features` for every split, computed once and cached next to the dataset.

    The cache is keyed by the model name and context size, and checked against a fresh forward of
    a probe sentence (:func:`model_probe`), so a retrained adapter is never paired with stale features.
    """
    slug = mlm.name.replace(":", "-").replace("/", "-")
    path = dataset.path / f"features-{slug}-ctx{mlm.context_tokens}-{FEATURES_VERSION}.pt"
    fingerprint = model_probe(mlm)
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
