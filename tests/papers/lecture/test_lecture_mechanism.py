"""The lecture's masked self-attention (seed 001): A = Softmax(QK^T / sqrt(d)) V over the keys its mask allows."""
import pytest
import torch

from helpers import masks as M
from helpers.papers.lecture import mechanism


def qkv(length=5, width=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(2, length, width, generator=generator) for _ in range(3)]


@pytest.mark.parametrize("mask", [M.causal, M.bidirectional, M.magnet([(1, 3)])], ids=lambda mask: mask.name)
def test_masked_self_attention_is_pytorchs_attention_under_the_same_mask(mask):
    queries, keys, values = qkv()
    weights, outputs = mechanism.masked_self_attention(queries, keys, values, mask)
    reference = torch.nn.functional.scaled_dot_product_attention(queries, keys, values,
                                                                 attn_mask=M.to_4d(mask, 5)[0])
    torch.testing.assert_close(outputs, reference, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 5))
    assert (weights[:, ~M.dense(mask, 5)] == 0).all()  # -inf before the softmax: no weight on a hidden key


def test_the_decoder_row_i_never_sees_a_later_position():
    queries, keys, values = qkv()
    _, before = mechanism.masked_self_attention(queries, keys, values, mechanism.causal)
    changed = values.clone()
    changed[:, -1] += 1.0
    _, after = mechanism.masked_self_attention(queries, keys, changed, mechanism.causal)
    torch.testing.assert_close(after[:, :-1], before[:, :-1])  # only the last row reads the last value
    torch.testing.assert_close(before[:, 0], values[:, 0])  # the first row attends only itself
    _, encoder = mechanism.masked_self_attention(queries, keys, changed, mechanism.bidirectional)
    assert not torch.allclose(encoder[:, 0], mechanism.masked_self_attention(queries, keys, values,
                                                                            mechanism.bidirectional)[1][:, 0])


def test_shapes_are_checked():
    queries, keys, values = qkv()
    with pytest.raises(ValueError, match="queries"):
        mechanism.masked_self_attention(queries, keys[:, :4], values, mechanism.causal)
