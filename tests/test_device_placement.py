"""Every helper that runs a model puts its inputs on the model's device.

The model lives on PyTorch's ``meta`` device, a stand-in for CUDA that needs no GPU: any operation
that mixes a meta tensor with a CPU tensor raises (``test_meta_model_rejects_a_cpu_input`` shows
it), so an entry point that forgets to move an input fails here exactly as it would on a GPU. The
inputs are built on the CPU, as the notebooks build them.

Meta tensors hold no values, so a helper that ends by copying its result to the CPU for a plot
(``attention.influence``, ``attention.attention_maps``, ``sequence_repetition.unmasked_similarity``) stops at that copy with "Cannot copy out of meta tensor": the
test asserts it gets exactly that far, i.e. that no device mix came before and the result is being
handed to the CPU. Not covered, because transformers or the helper reads tensor values in Python, which
meta tensors do not have: helpers that call the model with its own 2D mask (``measure_block_share_views``,
``experiment_table5.generate``, ``openltg.autoregressive_generate``; covered: ``block_mass_shares``, where the bug
was), helpers that pass an already-moved padding mask (``mask_predict``, ``experiment_table1.word_features``), and
loops that read losses (``evaluate_masked_lm``, ``training.train``).
"""

import pytest
import torch
from transformers import AutoModelForCausalLM

from helpers import attention as A
from helpers import models
from helpers import masks as M
from helpers import objectives as O
from helpers.papers import sequence_repetition as R
from helpers.device import model_device
from helpers.masked_lm import MNTPDecoder
from helpers.papers import openltg
from helpers.papers.magnet import mechanism as magnet

VOCAB, LAYERS, PAD = 128, 6, 0
COPY_OUT = "Cannot copy out of meta tensor"


def _ids_on_the_weights_device(embedding, inputs):
    # CUDA's embedding kernel rejects CPU ids; meta's accepts them, so the check is made explicit here.
    if inputs[0].device != embedding.weight.device:
        raise RuntimeError(f"input_ids on device {inputs[0].device}, embedding weights on {embedding.weight.device}")


def meta_model(implementation: str = "sdpa"):
    config = models.tiny_random_config(VOCAB, num_layers=LAYERS, pad_token_id=PAD)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=implementation).to("meta").eval()
    model.get_input_embeddings().register_forward_pre_hook(_ids_on_the_weights_device)
    return model


@pytest.fixture(scope="module")
def meta():
    return meta_model("sdpa")


@pytest.fixture(scope="module")
def meta_eager():
    return meta_model("eager")


def cpu_batch(rows: int = 2, length: int = 10):
    ids = torch.randint(3, VOCAB, (rows, length), generator=torch.Generator().manual_seed(0))
    padding = torch.ones_like(ids)
    padding[0, -3:] = 0  # row 0 right-padded
    ids[0, -3:] = PAD
    return ids, padding


def on_meta(tensor: torch.Tensor) -> bool:
    return tensor.device.type == "meta"


def test_meta_model_rejects_a_cpu_input(meta):
    ids, padding = cpu_batch()
    with pytest.raises(RuntimeError, match="device"):
        meta.get_decoder()(input_ids=ids)  # CPU ids
    with pytest.raises(RuntimeError, match="device"):
        meta.get_decoder()(input_ids=ids.to("meta"), position_ids=M.content_positions(padding))  # CPU positions
    assert model_device(meta).type == "meta"


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("case", ["one mask", "per-row masks", "per-layer masks", "positions given"])
def test_forward_with_mask_moves_ids_padding_and_positions(implementation, case):
    model = meta_model(implementation)
    ids, padding = cpu_batch()
    kwargs = {"padding_mask": padding}
    if case == "one mask":
        kwargs["mask"] = M.bidirectional
    elif case == "per-row masks":
        kwargs["mask"] = [M.magnet([(2, 4)]), M.magnet([(1, 3), (5, 8)])]
    elif case == "per-layer masks":
        kwargs["layer_masks"] = M.middle_unmasking(LAYERS)
    else:
        kwargs.update(mask=M.causal, position_ids=M.content_positions(padding))
    output = A.forward_with_mask(model.get_decoder(), ids, **kwargs)
    assert on_meta(output.last_hidden_state) and output.last_hidden_state.shape == (2, 10, 64)


def test_influence_and_attention_maps_run_on_the_device_and_copy_to_the_cpu(meta_eager):
    ids, _ = cpu_batch(rows=1)
    for call in (lambda: A.influence(meta_eager, ids, 3, 5, layer_masks=M.middle_unmasking(LAYERS)),
                 lambda: A.influence(meta_eager, ids, 3, 5, M.causal),
                 lambda: A.attention_maps(meta_eager, ids, {"causal": M.causal, "bidirectional": M.bidirectional})):
        with pytest.raises(NotImplementedError, match=COPY_OUT):
            call()


def test_influence_and_attention_maps_return_cpu_tensors():
    config = models.tiny_random_config(VOCAB, num_layers=LAYERS, pad_token_id=PAD)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    ids, _ = cpu_batch(rows=1)
    moved = A.influence(model, ids, 3, 5, M.causal)
    maps = A.attention_maps(model, ids, {"causal": M.causal})
    assert moved.device.type == "cpu" and moved.shape == (LAYERS, 10)
    assert maps["causal"].device.type == "cpu" and maps["causal"].shape == (LAYERS, 4, 10, 10)


def test_masked_lm_loss_takes_a_cpu_batch(meta):
    ids, padding = cpu_batch()
    batch = O.make_batch("mntp", ids, padding, mask_id=5, vocab_size=VOCAB, special_ids=[PAD],
                         config=O.MaskingConfig(ratio=0.5), generator=torch.Generator().manual_seed(1))
    result = O.masked_lm_loss(meta, batch, M.bidirectional)
    assert on_meta(result["loss"]) and on_meta(result["count"])


def test_magnet_losses_take_cpu_views(meta):
    ids, _ = cpu_batch()
    ids = ids[:, :8]
    view = magnet.masked_view(ids, [[(2, 4)], [(3, 6)]], mask_id=5, vocab_size=VOCAB, special_ids=[PAD],
                              generator=torch.Generator().manual_seed(2))
    losses = magnet.mntp_msg_losses(meta, view)
    assert losses and all(on_meta(loss) for loss in losses.values())
    anchors = {"input_ids": ids, "padding_mask": torch.ones_like(ids)}
    head = magnet.ProjectionHead(64).to("meta")
    assert on_meta(magnet.sscl_loss(meta, head, anchors, anchors))


@pytest.mark.parametrize("strategy", [R.Strategy("sr", 1), R.Strategy("sr", 2), R.Strategy("middle", 0),
                                      R.Strategy("full", 0)])
def test_sequence_repetition_features_and_tagger_loss(meta, strategy):
    ids, padding = cpu_batch()
    features, _ = R.sr_features(meta.get_decoder(), ids, padding, strategy)
    assert on_meta(features) and features.shape == (2, 10, 64)
    tagger = R.TokenTagger(meta.get_decoder(), num_labels=3, strategy=strategy).to("meta")
    labels = torch.zeros_like(ids)
    assert on_meta(tagger(ids, padding, labels=labels)["loss"])


def test_block_shares_multiply_device_weights_by_the_block_layout(meta_eager):
    weights = [torch.empty(1, 4, 12, 12, device="meta")]
    assert on_meta(R.block_mass_shares(weights, 4, 2))  # the full-block layout follows the weights' device
    ids = torch.randint(3, VOCAB, (5,), generator=torch.Generator().manual_seed(3))
    with pytest.raises(NotImplementedError, match=COPY_OUT):
        R.unmasked_similarity(meta_eager, [ids], [1], progress=False)


def test_mask_predict_backend_predicts_from_cpu_inputs(meta):
    ids, padding = cpu_batch()
    backend = MNTPDecoder(meta, None, mask_id=5, pad_id=PAD)
    rows, cols = torch.tensor([0, 1]), torch.tensor([4, 7])
    schedule = openltg.attention_masks(backend, [4, 4], openltg.DecodeConfig(dswa=True, fixed_window=4))
    logits = backend.predict(ids, padding, rows, cols, **schedule)
    assert on_meta(logits) and logits.shape == (2, VOCAB)


def test_completion_masked_lm_reads_hidden_states_from_cpu_ids(meta):
    mlm = MNTPDecoder(meta, None, mask_id=5, pad_id=PAD)
    hidden = mlm.hidden_at([[1, 7, 5, 9], [1, 5, 8]], [1, 0])
    assert on_meta(hidden) and hidden.shape == (2, 64)
