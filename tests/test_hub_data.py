"""The gpu profile's data path on local files with the Hub datasets' schemas.

``datasets.load_dataset`` is replaced by a stand-in that serves small parquet files written here with the
columns and feature types of the real Hub datasets: WikiText-103 (``text``), CoNLL-2003's parquet
conversion (``id``, ``tokens``, ``pos_tags``/``chunk_tags``/``ner_tags`` as lists of ClassLabel), STS-B
(``sentence1``, ``sentence2``, ``score``) and WritingPrompts (``prompt``, ``story``). Like datasets >= 4, the
stand-in refuses the CoNLL-2003 loading-script repositories unless the parquet branch is asked for.
"""
import dataclasses
import sys

import datasets
import pytest

from helpers import data, labels, models, profiles
from helpers.papers import openltg
from helpers import masks as M
from helpers.papers import sequence_repetition as R
from helpers.papers.magnet import experiment as magnet_experiment
from helpers.papers.magnet import experiment_table1, experiment_table2, experiment_table5
from helpers.papers.magnet.settings import SETTINGS as MAGNET_SETTINGS

pytestmark = pytest.mark.embedded  # the SmolLM2 tokenizer (the gpu profile's SmolLM2-360M uses the same one)

WIKITEXT = [" = Valkyria Chronicles III = \n", "", " Senjō no Valkyria 3 is a tactical role @-@ playing video game "
            "developed by Sega and Media.Vision for the PlayStation Portable . Released in January 2011 in Japan , it "
            "is the third game in the Valkyria series . Employing the same fusion of tactical and real @-@ time gameplay "
            "as its predecessors , the story runs parallel to the first game and follows the Nameless . \n",
            " = = Gameplay = = \n", " As with previous games , the player takes control of a military unit and takes "
            "part in missions against enemy forces . Stories are told through comic book @-@ like panels with animated "
            "character portraits . The game retains many of the gameplay elements of its predecessors . \n"]
CONLL = [(["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
          [22, 42, 16, 21, 35, 37, 16, 21, 7], [11, 21, 11, 12, 21, 22, 11, 12, 0], [3, 0, 7, 0, 0, 0, 7, 0, 0]),
         (["Peter", "Blackburn"], [22, 22], [11, 12], [1, 2]),
         (["BRUSSELS", "1996-08-22"], [22, 11], [11, 12], [5, 0])]
STSB = {"sentence1": ["A plane is taking off.", "A man is playing a flute.", "A woman is slicing an onion.",
                      "A cat sits on a mat."],
        "sentence2": ["An air plane is taking off.", "A man is playing a bamboo flute.", "Someone is cutting an onion.",
                      "The stock market fell."],
        "score": [1.0, 0.76, 0.84, 0.0]}
WRITINGPROMPTS = {"prompt": ["[ WP ] The moon is actually a giant egg , and it has just started to hatch .",
                             "[ WP ] You can hear the thoughts of everyone around you , except one person ."],
                  "story": ["It was a quiet night when the first crack appeared . <newline> Nobody believed it at first .",
                            "Silence , for the first time in my life . <newline> She smiled and said nothing at all ."]}
SCRIPT_REFUSAL = "Dataset scripts are no longer supported, but found conll2003.py"


def conll_features():
    tags = lambda column: datasets.List(datasets.ClassLabel(names=list(labels.CONLL2003_TAG_NAMES[column])))
    return datasets.Features({"id": datasets.Value("string"), "tokens": datasets.List(datasets.Value("string")),
                              "pos_tags": tags("pos_tags"), "chunk_tags": tags("chunk_tags"), "ner_tags": tags("ner_tags")})


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """Serve the Hub datasets from parquet files under tmp_path; record what was asked for."""
    files = {}
    for split in ("train", "validation", "test"):
        files[("Salesforce/wikitext", "wikitext-103-raw-v1", split)] = datasets.Dataset.from_dict(
            {"text": WIKITEXT * 3}, features=datasets.Features({"text": datasets.Value("string")}))
        rows = {"id": [str(i) for i in range(len(CONLL))], "tokens": [c[0] for c in CONLL], "pos_tags": [c[1] for c in CONLL],
                "chunk_tags": [c[2] for c in CONLL], "ner_tags": [c[3] for c in CONLL]}
        files[("eriktks/conll2003@refs/convert/parquet", None, split)] = datasets.Dataset.from_dict(rows, features=conll_features())
        files[("euclaise/writingprompts", None, split)] = datasets.Dataset.from_dict(WRITINGPROMPTS)
    files[("sentence-transformers/stsb", None, "test")] = datasets.Dataset.from_dict(
        STSB, features=datasets.Features({"sentence1": datasets.Value("string"), "sentence2": datasets.Value("string"),
                                          "score": datasets.Value("float32")}))
    paths = {}
    for index, (key, dataset) in enumerate(files.items()):
        paths[key] = tmp_path / f"{index}.parquet"
        dataset.to_parquet(paths[key])
    real_load = datasets.load_dataset
    asked = []

    def load_dataset(path, name=None, *, split=None, revision=None, **kwargs):
        asked.append((path, name, split, revision))
        if path in labels.CONLL2003_HUB_IDS and revision != labels.PARQUET_REVISION:
            raise RuntimeError(SCRIPT_REFUSAL)
        key = (path + (f"@{revision}" if revision else ""), name, split)
        if key not in paths:
            raise FileNotFoundError(f"no stand-in for {key}")
        return real_load("parquet", data_files=str(paths[key]), split="train")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.setattr(sys.modules["datasets"], "load_dataset", load_dataset)
    data._hub_paragraphs.cache_clear()
    yield asked
    data._hub_paragraphs.cache_clear()


@pytest.fixture(scope="module")
def tokenizer():
    return models.load_tokenizer(profiles.EMBEDDED_MODEL)


GPU = profiles.get("gpu")


def test_wikitext_feeds_notebook_02_blocks_and_notebook_03_and_05_text(hub, tokenizer):
    paragraphs = data.load_paragraphs(GPU.corpus, "train")
    assert paragraphs and not any(p.text.startswith("= ") for p in paragraphs)  # headings dropped
    assert paragraphs[0].text.startswith("Senjō no Valkyria 3")
    blocks = data.token_blocks(tokenizer, (p.text for p in paragraphs), 16, max_blocks=4)
    assert blocks.shape == (4, 16)
    assert experiment_table5.word_prefixes(GPU.corpus, "test", count=2) == ["Senjō no Valkyria 3 is", "As with previous games ,"]
    assert len(magnet_experiment.sscl_sentences(GPU.corpus, "train", min_words=10, limit=4)) >= 2
    prompts = openltg.story_prompts("corpus", GPU.corpus, "test", 2)
    assert prompts[0].prompt.startswith("Senjō no Valkyria 3 is a tactical")
    assert ("Salesforce/wikitext", "wikitext-103-raw-v1", "train", None) in hub


def test_conll2003_loads_from_the_parquet_conversion_with_its_tag_names(hub, tokenizer):
    sentences = data.conll2003("train", limit=2)
    assert sentences[0].words[:3] == ("EU", "rejects", "German")
    assert sentences[0].ner == ("B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O")
    assert sentences[0].pos[:3] == ("NNP", "VBZ", "JJ") and sentences[0].chunks[:2] == ("B-NP", "B-VP")
    assert hub[0] == ("eriktks/conll2003", None, "train", labels.PARQUET_REVISION)
    settings = R.SETTINGS["gpu"]
    small = dataclasses.replace(settings, train_sentences=3, validation_sentences=2, test_sentences=None)
    tagging = R.load_tagging_data(tokenizer, "ner", small, GPU.corpus)
    assert len(tagging.train) == 3 and len(tagging.test) == 3 and "B-PER" in tagging.labels
    probe_settings = MAGNET_SETTINGS["gpu"]
    train, test = experiment_table1.probe_sentences(dataclasses.replace(probe_settings, probe_train_sentences=2,
                                                                     probe_test_sentences=1), GPU.corpus)
    assert [s.words for s in train] == [tuple(CONLL[0][0]), tuple(CONLL[1][0])] and len(test) == 1


def test_without_conll2003_notebook_04_falls_back_to_silver_labels_with_a_warning(hub, tokenizer, monkeypatch, tmp_path):
    monkeypatch.setattr(labels, "PARQUET_REVISION", "refs/convert/missing")  # the Hub has no such branch
    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path / "cache"))  # silver labels are cached; keep them here
    settings = R.SETTINGS["gpu"]
    small = dataclasses.replace(settings, train_sentences=2, validation_sentences=1, test_sentences=1)
    with pytest.warns(UserWarning, match="falls back to spaCy silver NER on corpus='wikitext-103-raw-v1'"):
        tagging = R.load_tagging_data(tokenizer, "ner", small, GPU.corpus, progress=False)
    assert len(tagging.train) >= 1 and all(tag[2:] in ("", "PER", "ORG", "LOC", "MISC") for s in tagging.train for tag in s.tags)


def test_stsb_and_writingprompts_have_the_columns_the_helpers_read(hub, tokenizer):
    model, _ = models.load_model(profiles.TINY_RANDOM_MODEL, device="cpu", dtype="float32", seed=0)
    score = experiment_table2.sts_spearman(model, tokenizer, mask=M.bidirectional, pairs=4, batch_size=2)
    assert -100.0 <= score <= 100.0 and ("sentence-transformers/stsb", None, "test", None) in hub
    prompts = openltg.story_prompts("writingprompts", GPU.corpus, "test", 2)
    assert prompts[0].prompt == "The moon is actually a giant egg , and it has just started to hatch ."
    assert "<newline>" not in prompts[0].continuation
