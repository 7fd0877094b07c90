"""MNTP and MTP as MAGNET defines them (§3.2.1 Eq. 2; App. E): the labels sit where each objective reads them, both
objectives select the same tokens, and mechanism.py stays free of the experiment, report and figures."""
import ast
from pathlib import Path

import torch

from helpers import objectives
from helpers.papers.mntp import mechanism

SPECIAL = (0, 1, 2)
VOCAB = 300
MASK_ID = 7


def test_mechanism_imports_no_experiment_report_or_figures():
    tree = ast.parse(Path(mechanism.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    assert not {name for name in imported for part in ("experiment", "report", "figures") if part in name}


def test_the_pieces_are_the_shared_objectives():
    for name in mechanism.__all__:
        assert getattr(mechanism, name) is getattr(objectives, name)


def test_mntp_reads_the_next_token_and_mtp_the_token_itself_on_one_selection():
    ids = torch.randint(10, VOCAB, (3, 30), generator=torch.Generator().manual_seed(0))
    batches = {objective: mechanism.make_batch(objective, ids, torch.ones_like(ids), mask_id=MASK_ID, vocab_size=VOCAB,
                                               special_ids=SPECIAL, generator=torch.Generator().manual_seed(5))
               for objective in mechanism.OBJECTIVES}
    mntp, mtp = batches["mntp"], batches["mtp"]
    assert torch.equal(mntp["selected"], mtp["selected"]) and torch.equal(mntp["input_ids"], mtp["input_ids"])
    selected = mntp["selected"]
    assert not selected[:, 0].any()  # nothing precedes the first token, so neither objective selects it
    rows, cols = selected.nonzero(as_tuple=True)
    assert torch.equal(mtp["labels"][rows, cols], ids[rows, cols])  # App. E: output l predicts token l
    assert torch.equal(mntp["labels"][rows, cols - 1], ids[rows, cols])  # Eq. 2: output l predicts token l + 1
    assert (mntp["labels"] != mechanism.IGNORE_INDEX).sum() == (mtp["labels"] != mechanism.IGNORE_INDEX).sum() \
        == selected.sum()

def _llama2_like_tokenizer():
    """A stand-in with LLaMA-2's tokenizer schema (SentencePiece BPE as ``tokenizer.json`` writes it: a "▁" word
    boundary prepended by the normalizer) and both of its underscore pieces at their LLaMA-2 ids: "▁_" = 903 (what
    the text "_" encodes to) and the bare "_" = 29918 (what ``tokenizer.mask_token = "_"`` names)."""
    from tokenizers import Tokenizer, models as tm, normalizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "▁": 29871, "▁_": 903, "_": 29918}
    taken = set(vocab.values())
    vocab.update({f"<filler{i}>": i for i in range(32000) if i not in taken})
    model = tm.BPE(vocab=vocab, merges=[("▁", "_")], unk_token="<unk>")
    backend = Tokenizer(model)
    backend.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def test_the_underscore_mask_is_llm2vecs_bare_piece_not_the_encoded_text():
    """App. A's "_" is LLM2Vec's ``tokenizer.mask_token = "_"``: the vocabulary's bare piece (29918 on LLaMA-2),
    whereas encoding the text "_" prepends SentencePiece's word boundary and gives "▁_" (903)."""
    tokenizer = _llama2_like_tokenizer()
    assert tokenizer("_", add_special_tokens=False).input_ids == [903]  # the trap: the text "_" is "▁_"
    assert mechanism.resolve_mask_token(tokenizer, "underscore") == 29918
    tokenizer.mask_token = "_"  # what LLM2Vec's run_mntp.py does
    assert tokenizer.mask_token_id == mechanism.resolve_mask_token(tokenizer, "underscore")


def test_the_underscore_mask_on_the_workbooks_byte_level_tokenizer_is_unchanged():
    """SmolLM2's byte-level BPE has one "_" token, which the text "_" also encodes to: the smoke and cpu profiles'
    mask id does not move."""
    from helpers import models

    tokenizer = models.load_tokenizer("embedded:smollm2-135m")
    (encoded,) = tokenizer("_", add_special_tokens=False).input_ids
    assert mechanism.resolve_mask_token(tokenizer, "underscore") == encoded == tokenizer.convert_tokens_to_ids("_")
