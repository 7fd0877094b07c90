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
