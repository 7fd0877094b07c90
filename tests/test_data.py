"""Tests for helpers.data: sentence splitting, paragraphs, splits, validation and the real Austen corpus."""
from __future__ import annotations

import bz2
import json
import os
import random
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import helpers.austen
import helpers.labels
from helpers import data
from helpers.data import (
    SPLIT_NAMES,
    MissingAssetError,
    Paragraph,
    load_paragraphs,
    load_sentences,
    paragraphs_from_lines,
    split_of,
    split_paragraphs,
    split_sentences,
)

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def austen():
    try:
        return data.austen_paragraphs()
    except MissingAssetError as error:
        pytest.skip(f"Austen corpus not fetched (run `make setup` or `python -m helpers.data`): {error}")


# --------------------------------------------------------------------------- sentences


def test_split_sentences_keeps_titles_with_their_names():
    text = "Mr. Bennet was silent. Mrs. Long had come. Dr. Grant and Col. Brandon dined at St. James's. They left."
    assert split_sentences(text) == [
        "Mr. Bennet was silent.",
        "Mrs. Long had come.",
        "Dr. Grant and Col. Brandon dined at St. James's.",
        "They left.",
    ]


def test_split_sentences_handles_closing_quotes_and_dialogue_tags():
    text = (
        '"My dear Mr. Bennet," said his lady, "have you heard that Netherfield Park is let?" '
        'Mr. Bennet replied that he had not. "Is he married?" said she. "Oh! single, my dear!" She smiled.'
    )
    assert split_sentences(text) == [
        '"My dear Mr. Bennet," said his lady, "have you heard that Netherfield Park is let?"',
        "Mr. Bennet replied that he had not.",
        '"Is he married?" said she.',
        '"Oh! single, my dear!"',
        "She smiled.",
    ]


def test_split_sentences_initials_pronoun_and_whitespace():
    assert split_sentences("  I saw Mr. E. Smith.\n So did   I. Then we left  ") == [
        "I saw Mr. E. Smith.",
        "So did I.",
        "Then we left",
    ]
    assert split_sentences("") == []
    assert split_sentences("No full stop here") == ["No full stop here"]


# --------------------------------------------------------------------------- paragraphs


def test_paragraphs_drop_front_matter_headings_and_end_matter():
    lines = [
        "PRIDE AND PREJUDICE", "", "By Jane Austen", "", "",
        "VOLUME I", "", "CHAPTER I", "", "",
        "It is a truth universally acknowledged, that a single man", "in  possession of a good fortune.", "",
        "Chapter 2", "", "   ", "",
        "Mr. Bennet was among the earliest.", "",
        "CHAPTER XIV.", "", "Chapter the last of the novel was not a heading.", "",
        "THE END", "", "A note by a modern editor.",
    ]  # fmt: skip
    paragraphs = paragraphs_from_lines("P&P", lines)
    assert paragraphs == [
        Paragraph("P&P", 0, "It is a truth universally acknowledged, that a single man in possession of a good fortune."),
        Paragraph("P&P", 1, "Mr. Bennet was among the earliest."),
        Paragraph("P&P", 2, "Chapter the last of the novel was not a heading."),
    ]


def test_paragraphs_without_any_heading_keep_everything():
    paragraphs = paragraphs_from_lines("x", ["one line", "", "two", "lines", ""])
    assert [p.text for p in paragraphs] == ["one line", "two lines"]


# --------------------------------------------------------------------------- splits


def _synthetic_paragraphs(count_per_book: int = 4000) -> list[Paragraph]:
    return [Paragraph(book, i, f"text {i}") for book in ("A", "B", "C") for i in range(count_per_book)]


def test_splits_are_disjoint_cover_everything_and_are_roughly_90_5_5():
    paragraphs = _synthetic_paragraphs()
    groups = split_paragraphs(paragraphs)
    assert set(groups) == set(SPLIT_NAMES)
    keys = {name: {(p.book, p.index) for p in group} for name, group in groups.items()}
    assert sum(len(k) for k in keys.values()) == len(paragraphs)
    assert set().union(*keys.values()) == {(p.book, p.index) for p in paragraphs}
    assert not keys["train"] & keys["validation"] and not keys["train"] & keys["test"]
    assert not keys["validation"] & keys["test"]
    fractions = {name: len(group) / len(paragraphs) for name, group in groups.items()}
    assert fractions["train"] == pytest.approx(0.90, abs=0.015)
    assert fractions["validation"] == pytest.approx(0.05, abs=0.01)
    assert fractions["test"] == pytest.approx(0.05, abs=0.01)


def test_splits_are_stable_and_independent_of_paragraph_order():
    paragraphs = _synthetic_paragraphs(1000)
    first = split_paragraphs(paragraphs)
    assert split_paragraphs(paragraphs) == first
    shuffled = list(paragraphs)
    random.Random(7).shuffle(shuffled)
    reordered = split_paragraphs(shuffled)
    for name in SPLIT_NAMES:
        assert sorted(reordered[name], key=lambda p: (p.book, p.index)) == sorted(first[name], key=lambda p: (p.book, p.index))


@pytest.mark.slow  # a fresh interpreter imports torch and transformers (via helpers.models)
def test_splits_do_not_depend_on_the_python_hash_seed():
    keys = [("Emma", i) for i in range(300)]
    expected = [split_of(book, index) for book, index in keys]
    code = f"import json; from helpers.data import split_of; print(json.dumps([split_of(b, i) for b, i in {keys!r}]))"
    seed = "12345" if os.environ.get("PYTHONHASHSEED") != "12345" else "1"
    env = {**os.environ, "PYTHONHASHSEED": seed}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) == expected


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("loader", [load_paragraphs, load_sentences])
def test_bad_split_names_the_argument_and_the_choices(loader):
    with pytest.raises(ValueError, match=r"split='dev'.*train, validation, test"):
        loader("austen", split="dev")


@pytest.mark.parametrize("limit", [0, -3, 2.5, True, "10"])
@pytest.mark.parametrize("loader", [load_paragraphs, load_sentences])
def test_bad_limit_names_the_argument(loader, limit):
    with pytest.raises(ValueError, match=r"limit="):
        loader("austen", split="train", limit=limit)


def test_bad_min_words_and_unknown_corpus_name_the_argument():
    with pytest.raises(ValueError, match=r"min_words="):
        load_sentences("austen", min_words=-1)
    with pytest.raises(ValueError, match=r"corpus='shakespeare'.*austen"):
        load_paragraphs("shakespeare")


def test_missing_cache_raises_missing_asset_error_naming_path_and_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path))
    from helpers import models

    assert MissingAssetError is models.MissingAssetError and issubclass(MissingAssetError, ValueError)
    for call in (data.austen_paragraphs, data.austen_novels, lambda: load_sentences("austen", "test")):
        with pytest.raises(MissingAssetError) as error:
            call()
        assert str(tmp_path / "austen" / "novels.json") in str(error.value)
        assert "make setup" in str(error.value)


def test_fetch_without_apt_explains_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path))
    monkeypatch.setattr(helpers.austen.shutil, "which", lambda name: None)
    with pytest.raises(MissingAssetError, match=r"apt-get and dpkg.*make setup"):
        data.fetch_austen()
    assert not (tmp_path / "austen" / "novels.json").exists()


# --------------------------------------------------------------------------- R lazy-load blobs and Hub parsing


def test_r_blob_decompression_types():
    payload = b"X\n" + bytes(range(200))
    header = struct.pack(">I", len(payload))
    assert helpers.austen._decompress_r_blob(header + zlib.compress(payload), 1, "t") == payload
    assert helpers.austen._decompress_r_blob(header + b"2" + bz2.compress(payload), 3, "t") == payload
    assert helpers.austen._decompress_r_blob(header + b"0" + payload, 2, "t") == payload
    with pytest.raises(ValueError, match="header says"):
        helpers.austen._decompress_r_blob(struct.pack(">I", 5) + zlib.compress(payload), 1, "t")


def test_hub_corpus_drops_headings_and_blank_lines(monkeypatch):
    datasets = pytest.importorskip("datasets")
    calls = []

    def fake_load_dataset(repo, config, split):
        calls.append((repo, config, split))
        return {"text": ["", " = Valkyria Chronicles = \n", "", " The game  began in 2011 . It sold well . \n", " = = Plot = = \n", " Mr. Smith left . \n"]}

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    data._hub_paragraphs.cache_clear()
    try:
        paragraphs = load_paragraphs("wikitext-2-raw-v1", split="validation")
        sentences = load_sentences("wikitext-2-raw-v1", split="validation", min_words=1)
    finally:
        data._hub_paragraphs.cache_clear()
    assert calls == [("Salesforce/wikitext", "wikitext-2-raw-v1", "validation")]
    assert paragraphs == [
        Paragraph("wikitext-2-raw-v1", 0, "The game began in 2011 . It sold well ."),
        Paragraph("wikitext-2-raw-v1", 1, "Mr. Smith left ."),
    ]
    assert [s.text for s in sentences] == ["The game began in 2011 .", "It sold well .", "Mr. Smith left ."]


# --------------------------------------------------------------------------- the real corpus


def test_real_corpus_has_six_books_and_about_700k_words(austen):
    stats = data.corpus_statistics("austen")
    assert list(stats["words_per_book"]) == list(data.AUSTEN_BOOKS.values())
    assert "Pride & Prejudice" in stats["words_per_book"] and len(stats["words_per_book"]) == 6
    assert 650_000 <= stats["words_total"] <= 800_000
    assert all(60_000 <= words <= 170_000 for words in stats["words_per_book"].values())
    assert sum(stats["paragraphs_per_split"].values()) == len(austen)
    pride = [p for p in austen if p.book == "Pride & Prejudice"]
    assert pride[0].text.startswith("It is a truth universally acknowledged, that a single man in possession")
    assert [p.index for p in pride] == list(range(len(pride)))


def test_real_corpus_has_no_headings_or_front_matter(austen):
    texts = {p.text for p in austen}
    assert not any(data.is_heading(text) for text in texts)
    assert not texts & {"", "PRIDE AND PREJUDICE", "By Jane Austen", "THE END", "FINIS", "Finis", "VOLUME I"}
    assert all(text == " ".join(text.split()) for text in texts)


def test_real_splits_partition_paragraphs_and_sentences_stay_inside(austen):
    splits = {name: load_paragraphs("austen", name) for name in SPLIT_NAMES}
    keys = {name: {(p.book, p.index) for p in ps} for name, ps in splits.items()}
    assert sum(map(len, keys.values())) == len(austen) == len(set().union(*keys.values()))
    assert 0.87 < len(keys["train"]) / len(austen) < 0.93
    for name in ("validation", "test"):
        assert 0.035 < len(keys[name]) / len(austen) < 0.065
        sentences = load_sentences("austen", name)
        assert sentences and all((s.book, s.paragraph_index) in keys[name] for s in sentences)
        assert all(len(s.text.split()) >= 3 for s in sentences)


def test_real_limits_take_a_prefix(austen):
    assert load_paragraphs("austen", "train", limit=5) == load_paragraphs("austen", "train")[:5]
    first = load_sentences("austen", "validation", limit=7, min_words=5)
    assert len(first) == 7 and first == load_sentences("austen", "validation", min_words=5)[:7]


def test_fetch_is_idempotent_when_cached(austen):
    path = data.austen_cache_path()
    before = path.stat().st_mtime_ns
    assert data.fetch_austen() == path
    assert path.stat().st_mtime_ns == before


class _FakeClassLabel:
    def __init__(self, names):
        self.names = list(names)


class _FakeSequence:
    def __init__(self, names):
        self.feature = _FakeClassLabel(names)


class _FakeCoNLLSplit:
    """Just enough of a ``datasets.Dataset`` for the CoNLL-2003 loader: features with names, select, rows."""

    features = {"pos_tags": _FakeSequence(["NNP", "VBD", "."]), "chunk_tags": _FakeSequence(["O", "B-NP", "B-VP"]),
                "ner_tags": _FakeSequence(["O", "B-PER", "I-PER"])}

    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def select(self, indices):
        return [self.rows[i] for i in indices]


def test_conll2003_maps_tag_ids_to_names_skips_empty_rows_and_limits(monkeypatch):
    rows = [{"tokens": ["John", "Smith", "left", "."], "pos_tags": [0, 0, 1, 2], "chunk_tags": [1, 1, 2, 0],
             "ner_tags": [1, 2, 0, 0]},
            {"tokens": [], "pos_tags": [], "chunk_tags": [], "ner_tags": []},
            {"tokens": ["Ann", "left"], "pos_tags": [0, 1], "chunk_tags": [1, 2], "ner_tags": [1, 0]}]
    asked = []

    def load_dataset(hub_id, split, revision=None):
        asked.append(hub_id)
        if hub_id != data.CONLL2003_HUB_IDS[1] or revision is not None:
            raise ConnectionError("offline")  # the first id fails, the loader falls back to the next
        return _FakeCoNLLSplit(rows)

    monkeypatch.setitem(sys.modules, "datasets", type(sys)("datasets"))
    monkeypatch.setattr(sys.modules["datasets"], "load_dataset", load_dataset, raising=False)
    sentences = data.conll2003("test")
    # both parquet conversions, the script-free copy, then the repositories
    assert asked == [*data.CONLL2003_HUB_IDS, *helpers.labels.CONLL2003_PARQUET_COPIES, *data.CONLL2003_HUB_IDS]
    assert [s.words for s in sentences] == [("John", "Smith", "left", "."), ("Ann", "left")]
    assert sentences[0].ner == ("B-PER", "I-PER", "O", "O")
    assert sentences[0].pos == ("NNP", "NNP", "VBD", ".")
    assert sentences[0].chunks == ("B-NP", "B-NP", "B-VP", "O")
    assert len(data.conll2003("test", limit=1)) == 1

    from helpers.papers import sequence_repetition
    assert [s.tags for s in sequence_repetition.conll2003_sentences("test")] == [s.ner for s in sentences]


def test_conll2003_offline_and_bad_split_errors(monkeypatch):
    with pytest.raises(ValueError, match="split='dev'"):
        data.conll2003("dev")

    def offline(hub_id, split, revision=None):
        raise ConnectionError("no internet")

    monkeypatch.setitem(sys.modules, "datasets", type(sys)("datasets"))
    monkeypatch.setattr(sys.modules["datasets"], "load_dataset", offline, raising=False)
    with pytest.raises(data.MissingAssetError, match="silver labels"):
        data.conll2003("train")
