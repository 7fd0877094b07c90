"""The workbook's one padding loop (helpers.padding) and its one builder of held-out masked-LM batches
(helpers.mntp_adapter.heldout_batches): what every caller used to build by hand."""
import pytest
import torch

from helpers import models, objectives, profiles
from helpers.mntp_adapter import heldout_batches, notebook02_heldout_batches
from helpers.mntp_recipe import MASKED_LM_RECIPES
from helpers.padding import padded

ROWS = [[5, 6, 7], [], [8], torch.tensor([9, 10], dtype=torch.int32)]


@pytest.mark.parametrize("left", [False, True])
def test_padded_puts_each_row_where_a_double_loop_does(left):
    ids, mask = padded(ROWS, -1, left=left)
    assert ids.shape == mask.shape == (4, 3) and ids.dtype == mask.dtype == torch.long
    for r, row in enumerate(ROWS):
        row = [int(value) for value in row]
        start = 3 - len(row) if left else 0
        for c in range(3):
            inside = start <= c < start + len(row)
            assert int(ids[r, c]) == (row[c - start] if inside else -1), (r, c)
            assert int(mask[r, c]) == int(inside), (r, c)


def test_padded_refuses_no_rows():
    with pytest.raises(ValueError, match="rows is empty"):
        padded([], 0)


def _same(first: list[dict], second: list[dict]) -> bool:
    return len(first) == len(second) and all(
        a.keys() == b.keys() and all(torch.equal(a[key], b[key]) for key in a) for a, b in zip(first, second))


def test_notebook_02s_held_out_set_is_one_set_for_its_runs_notebook_07_and_the_fallback():
    from helpers.papers.diffusion import experiment as diffusion
    from helpers.papers.mntp import experiment as mntp

    smoke = profiles.get("smoke")
    tokenizer = models.load_tokenizer(smoke.model_name)
    mask_id = objectives.resolve_mask_token(tokenizer, "underscore")
    recipe = MASKED_LM_RECIPES["cpu"]  # several batches, so the fallback's single batch is a real part of the set
    full = notebook02_heldout_batches(tokenizer, smoke, mask_id, recipe=recipe)
    assert len(full) == recipe.eval_batches and full[0]["input_ids"].shape == (recipe.batch_size, recipe.seq_len)
    assert len({batch["input_ids"][0, 0].item() for batch in full}) > 1  # other blocks in each batch
    fallback = notebook02_heldout_batches(tokenizer, smoke, mask_id, recipe=recipe, fallback=True)
    assert _same(fallback, full[:1])  # the short fallback run scores the set's first batch
    assert _same(diffusion.notebook02_eval_batches(tokenizer, smoke, mask_id),  # notebook 07 scores notebook 02's set
                 notebook02_heldout_batches(tokenizer, smoke, mask_id))
    data = mntp.load_data(tokenizer, smoke, MASKED_LM_RECIPES["smoke"])
    for objective in ("mntp", "mtp"):
        assert _same(data.eval_batches[objective], notebook02_heldout_batches(tokenizer, smoke, mask_id, objective))
    with pytest.raises(ValueError, match="fewer than 100000 batches of 4"):
        heldout_batches(tokenizer, smoke.corpus, seq_len=128, batch_size=4, num_batches=100_000, mask_id=mask_id)
