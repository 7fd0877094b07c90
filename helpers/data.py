"""Text corpora: Jane Austen's six novels offline (:mod:`helpers.austen`), WikiText from the Hugging Face Hub online.

Every notebook reads paragraphs and sentences of a split here (:func:`load_paragraphs`, :func:`load_sentences`) and
packs them into token blocks (:func:`token_blocks`). Austen is split 90/5/5 into train/validation/test by paragraph,
from a stable hash of (book, paragraph index), so the splits do not depend on file order or the hash seed. The
probes' and taggers' word tags (spaCy silver labels, CoNLL-2003) are :mod:`helpers.labels`'.
"""
from __future__ import annotations

import functools
import hashlib
import re
import sys
from dataclasses import dataclass
from typing import Iterable

from helpers.austen import AUSTEN_BOOKS, cached_novels, verify_austen
# Read as data.<name> by the notebooks, the paper packages and the tests; their homes are helpers.austen and
# helpers.labels.
from helpers.austen import austen_cache_path, austen_novels, fetch_austen  # noqa: F401
from helpers.checks import whole_number
from helpers.errors import SETUP_HINT, MissingAssetError
from helpers.labels import (CONLL2003_HUB_IDS, CONLL2003_TAG_NAMES, LabelledSentence, conll2003,  # noqa: F401
                            silver_labels, spacy_pipeline)

AUSTEN_CORPUS = "austen"

SPLIT_NAMES = ("train", "validation", "test")
SPLIT_FRACTIONS = {"train": 0.90, "validation": 0.05, "test": 0.05}

HUB_CORPORA = {
    # corpus (Profile.corpus) -> (Hub dataset, config)
    "wikitext-103-raw-v1": ("Salesforce/wikitext", "wikitext-103-raw-v1"),
    "wikitext-2-raw-v1": ("Salesforce/wikitext", "wikitext-2-raw-v1"),
}
# Hub split name for each of SPLIT_NAMES (WikiText already uses the same names).
HUB_SPLIT_NAMES = {"train": "train", "validation": "validation", "test": "test"}


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Paragraph:
    """One paragraph; ``index`` counts the book's kept paragraphs from 0."""

    book: str
    index: int
    text: str


@dataclass(frozen=True)
class Sentence:
    """One sentence and the paragraph it came from."""

    book: str
    paragraph_index: int
    text: str


# --------------------------------------------------------------------------- paragraphs

_HEADING = re.compile(r"^(chapter|volume)\s+([0-9]+|[ivxlc]+)\.?$", re.IGNORECASE)
# Markers after which a book's text is over (Northanger Abbey ends with an editor's note).
_END_MARKERS = {"finis", "the end", "a note on the text"}


def _normalise_whitespace(text: str) -> str:
    return " ".join(text.split())


def is_heading(text: str) -> bool:
    """True for chapter and volume headings such as "CHAPTER 1", "Chapter IV", "VOLUME I"."""
    return _HEADING.match(text.strip()) is not None


def paragraphs_from_lines(book: str, lines: Iterable[str]) -> list[Paragraph]:
    """Group a novel's lines into paragraphs at blank lines.

    Drops the front matter (title, author, year; everything before the first chapter or
    volume heading, when there is one), the headings, empty paragraphs, and everything
    from an end marker ("THE END", "FINIS", "A NOTE ON THE TEXT") on. A text without any paragraph is refused.
    """
    if not isinstance(lines, str):
        lines = list(lines)
    if isinstance(lines, str) or not all(isinstance(line, str) for line in lines):
        raise ValueError(f"lines={str(lines)[:60]!r} must be a list of strings, one per line of the book")
    blocks: list[str] = []
    current: list[str] = []
    for line in [*lines, ""]:
        if line.strip():
            current.append(line)
        elif current:
            blocks.append(_normalise_whitespace(" ".join(current)))
            current = []
    first_heading = next((i for i, block in enumerate(blocks) if is_heading(block)), 0)
    paragraphs: list[Paragraph] = []
    for block in blocks[first_heading:]:
        if block.lower().rstrip(".") in _END_MARKERS:
            break
        if block and not is_heading(block):
            paragraphs.append(Paragraph(book=book, index=len(paragraphs), text=block))
    if not paragraphs:
        raise ValueError(f"lines of book={book!r} hold no paragraphs ({len(lines)} lines; only blank lines, headings or "
                         "front matter); an empty corpus would silently give nothing to train or score on")
    return paragraphs


@functools.lru_cache(maxsize=4)
def _austen_paragraphs_cached(path: str, modified_ns: int) -> tuple[Paragraph, ...]:
    novels = cached_novels(path, modified_ns)
    return tuple(paragraph for title, lines in novels for paragraph in paragraphs_from_lines(title, lines))


def austen_paragraphs() -> list[Paragraph]:
    """Every paragraph of the six novels, in book order; raises MissingAssetError if not fetched."""
    path = verify_austen(full=False)
    return list(_austen_paragraphs_cached(str(path), path.stat().st_mtime_ns))


# --------------------------------------------------------------------------- sentences

# Words that end in a full stop without ending the sentence (compared lower-case, without the dot).
ABBREVIATIONS = frozenset(
    "mr mrs messrs dr st col capt lt gen adm rev esq hon sr jr no vol viz etc ch i.e e.g a.m p.m".split()
)
# Terminal punctuation, any closing quotes/brackets, whitespace, then something that can start a sentence.
_BOUNDARY = re.compile(
    r"""(?P<stop>[.!?]+)(?P<closers>["'\u201d\u2019)\]_]*)(?P<space>\s+)(?=["'\u201c\u2018(\[_]*[A-Z])"""
)
_LAST_WORD = re.compile(r"""([A-Za-z][A-Za-z.]*)$""")


def _is_abbreviation(text_before_dot: str) -> bool:
    match = _LAST_WORD.search(text_before_dot)
    if match is None:
        return False
    word = match.group(1)
    if len(word) == 1:
        return word.isupper() and word != "I"  # an initial such as "E." in "Mr. E. Smith"
    return word.lower() in ABBREVIATIONS


def split_sentences(text: str) -> list[str]:
    """Split text into sentences at . ! ? (plus closing quotes) followed by a capital letter.

    Does not split after abbreviations such as Mr. Mrs. Dr. St. Col. or after initials.
    """
    if not isinstance(text, str):
        raise ValueError(f"text={text!r} must be a string")
    text = _normalise_whitespace(text)
    sentences: list[str] = []
    start = 0
    for boundary in _BOUNDARY.finditer(text):
        if (
            boundary.group("stop") == "."
            and not boundary.group("closers")
            and _is_abbreviation(text[start : boundary.start()])
        ):
            continue
        sentences.append(text[start : boundary.start("space")].strip())
        start = boundary.end()
    sentences.append(text[start:].strip())
    return [sentence for sentence in sentences if sentence]


# --------------------------------------------------------------------------- splits


def _check_split(split: str) -> str:
    if split not in SPLIT_NAMES:
        raise ValueError(f"split={split!r} is not a known split; expected one of {', '.join(SPLIT_NAMES)}")
    return split


def _check_limit(limit: int | None) -> int | None:
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise ValueError(f"limit={limit!r} must be a positive integer or None")
    return limit


def split_of(book: str, index: int) -> str:
    """The split of paragraph ``index`` of ``book``: a stable md5 bucket, 90/5/5."""
    digest = hashlib.md5(f"{book}\x1f{index}".encode("utf-8")).digest()
    position = int.from_bytes(digest[:8], "big") / 2**64
    cumulative = 0.0
    for name in SPLIT_NAMES:
        cumulative += SPLIT_FRACTIONS[name]
        if position < cumulative:
            return name
    return SPLIT_NAMES[-1]


def split_paragraphs(paragraphs: Iterable[Paragraph]) -> dict[str, list[Paragraph]]:
    """Group paragraphs by ``split_of``; each split keeps the input order."""
    paragraphs = list(paragraphs)
    if not paragraphs:
        raise ValueError("paragraphs is empty; there is nothing to split")
    groups: dict[str, list[Paragraph]] = {name: [] for name in SPLIT_NAMES}
    for paragraph in paragraphs:
        groups[split_of(paragraph.book, paragraph.index)].append(paragraph)
    return groups


# --------------------------------------------------------------------------- loading


@functools.lru_cache(maxsize=4)
def _hub_paragraphs(corpus: str, split: str) -> tuple[Paragraph, ...]:
    try:
        import datasets
    except ImportError as error:
        raise MissingAssetError(f"corpus={corpus!r} needs the `datasets` package; {SETUP_HINT}") from error
    repo, config = HUB_CORPORA[corpus]
    try:
        rows = datasets.load_dataset(repo, config, split=HUB_SPLIT_NAMES[split])
    except Exception as error:  # offline, Hub down, ...: say which asset and how to get it
        raise MissingAssetError(
            f"could not load the Hub dataset {repo} ({config}, split {split}) for corpus={corpus!r}: {error}. "
            f"It needs internet access to huggingface.co (or a warm HF datasets cache); offline, use "
            f"corpus='austen' and {SETUP_HINT}."
        ) from error
    paragraphs: list[Paragraph] = []
    for line in rows["text"]:
        text = _normalise_whitespace(line)
        if not text or (text.startswith("= ") and text.endswith(" =")):  # " = Heading = " lines
            continue
        paragraphs.append(Paragraph(book=corpus, index=len(paragraphs), text=text))
    return tuple(paragraphs)


@functools.lru_cache(maxsize=4)
def _austen_split_cached(path: str, modified_ns: int, split: str) -> tuple[Paragraph, ...]:
    return tuple(split_paragraphs(_austen_paragraphs_cached(path, modified_ns))[split])


def _split_paragraphs_cached(corpus: str, split: str) -> tuple[Paragraph, ...]:
    if corpus == AUSTEN_CORPUS:
        path = verify_austen(full=False)
        return _austen_split_cached(str(path), path.stat().st_mtime_ns, split)
    if corpus in HUB_CORPORA:
        return _hub_paragraphs(corpus, split)
    known = ", ".join((AUSTEN_CORPUS, *HUB_CORPORA))
    raise ValueError(f"corpus={corpus!r} is not a known corpus; expected one of {known}")


def load_paragraphs(corpus: str = AUSTEN_CORPUS, split: str = "train", limit: int | None = None) -> list[Paragraph]:
    """The paragraphs of one split of ``corpus`` ("austen" or a WikiText config), the first ``limit`` of them."""
    _check_split(split)
    _check_limit(limit)
    paragraphs = _split_paragraphs_cached(corpus, split)
    return list(paragraphs if limit is None else paragraphs[:limit])


def sentences_of(paragraphs: Iterable[Paragraph], min_words: int = 3) -> list[Sentence]:
    """The sentences of ``paragraphs`` that have at least ``min_words`` words."""
    return [
        Sentence(book=paragraph.book, paragraph_index=paragraph.index, text=sentence)
        for paragraph in paragraphs
        for sentence in split_sentences(paragraph.text)
        if len(sentence.split()) >= min_words
    ]


def load_sentences(
    corpus: str = AUSTEN_CORPUS, split: str = "train", limit: int | None = None, min_words: int = 3
) -> list[Sentence]:
    """The sentences (of at least ``min_words`` words) of one split of ``corpus``, the first ``limit`` of them."""
    _check_split(split)
    _check_limit(limit)
    if isinstance(min_words, bool) or not isinstance(min_words, int) or min_words < 0:
        raise ValueError(f"min_words={min_words!r} must be a non-negative integer")
    sentences: list[Sentence] = []
    for paragraph in _split_paragraphs_cached(corpus, split):
        sentences.extend(sentences_of([paragraph], min_words=min_words))
        if limit is not None and len(sentences) >= limit:
            return sentences[:limit]
    return sentences


def corpus_statistics(corpus: str = AUSTEN_CORPUS) -> dict:
    """Words and paragraphs per book, paragraphs and sentences (``load_sentences`` defaults) per split."""
    per_split = {split: _split_paragraphs_cached(corpus, split) for split in SPLIT_NAMES}
    words_per_book: dict[str, int] = {}
    paragraphs_per_book: dict[str, int] = {}
    for paragraph in sorted((p for ps in per_split.values() for p in ps), key=lambda p: (p.book, p.index)):
        words_per_book[paragraph.book] = words_per_book.get(paragraph.book, 0) + len(paragraph.text.split())
        paragraphs_per_book[paragraph.book] = paragraphs_per_book.get(paragraph.book, 0) + 1
    if corpus == AUSTEN_CORPUS:  # publication order rather than alphabetical
        order = list(AUSTEN_BOOKS.values())
        words_per_book = {book: words_per_book[book] for book in order if book in words_per_book}
        paragraphs_per_book = {book: paragraphs_per_book[book] for book in order if book in paragraphs_per_book}
    return {
        "corpus": corpus,
        "words_per_book": words_per_book,
        "words_total": sum(words_per_book.values()),
        "paragraphs_per_book": paragraphs_per_book,
        "paragraphs_per_split": {split: len(paragraphs) for split, paragraphs in per_split.items()},
        "sentences_per_split": {split: len(sentences_of(paragraphs)) for split, paragraphs in per_split.items()},
    }


def _print_statistics(stats: dict) -> None:
    print(f"corpus: {stats['corpus']}  ({stats['words_total']:,} words)")
    for book, words in stats["words_per_book"].items():
        print(f"  {book:<22} {words:>9,} words  {stats['paragraphs_per_book'][book]:>6,} paragraphs")
    for split in SPLIT_NAMES:
        print(
            f"  {split:<10} {stats['paragraphs_per_split'][split]:>7,} paragraphs  "
            f"{stats['sentences_per_split'][split]:>7,} sentences"
        )


def token_ids(tokenizer, texts: Iterable[str], max_tokens: int) -> list:
    """Each text tokenized without special tokens and cut to at most ``max_tokens`` ids (1D tensors)."""
    whole_number(max_tokens, "max_tokens")
    if isinstance(texts, str):
        raise ValueError(f"texts={texts[:40]!r} is one string; pass a list of texts")
    encoded = []
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids[0, :max_tokens]
        if ids.numel() == 0:
            raise ValueError(f"texts contains {text!r}, which tokenizes to nothing")
        encoded.append(ids)
    return encoded


def token_blocks(tokenizer, texts: Iterable[str], block_length: int, max_blocks: int | None = None):
    """Pack texts into ``(N, block_length)`` id blocks, each text followed by EOS (the usual LM packing)."""
    import torch

    whole_number(block_length, "block_length", 2)
    if max_blocks is not None:
        whole_number(max_blocks, "max_blocks", 1, "or None for all")
    if isinstance(texts, str):
        raise ValueError(f"texts={texts[:40]!r} is one string; pass a list of texts")
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no eos token to separate texts")
    stream: list[int] = []
    wanted = None if max_blocks is None else max_blocks * block_length
    for text in texts:
        stream.extend(tokenizer(text, add_special_tokens=False).input_ids)
        stream.append(eos)
        if wanted is not None and len(stream) >= wanted:
            break
    usable = len(stream) // block_length * block_length
    if wanted is not None:
        usable = min(usable, wanted)
    if usable == 0:
        raise ValueError(f"texts hold {len(stream)} tokens, fewer than one block of {block_length}")
    return torch.tensor(stream[:usable]).view(-1, block_length)


if __name__ == "__main__":
    fetch_austen(force="--force" in sys.argv[1:])
    _print_statistics(corpus_statistics(AUSTEN_CORPUS))
