"""What ``benchmarks/training_steps.py`` counts: the useful FLOPs of a training step, the matrix-product limit they are
set against, and a held-out evaluation's share of a run.

The count of one step (T: the real tokens a decoder runs, padding excluded; n: one row's real tokens; S: the rows the
LM head scores):

- every ``nn.Linear`` of the decoder layers, frozen or trainable (LoRA's A and B are Linear modules too):
  forward ``2·P·T``; with a backward through the body, ``2·P·T`` more for the activation gradient of each, and
  ``2·P·T`` for the weight gradient of the trainable ones only (a frozen weight gets none);
- attention, per layer and row: QK^T and AV, ``2·n²·W`` each forward (W = heads x head_dim), the dense n x n square
  whatever the mask (sdpa computes the whole square under a causal or hybrid mask too); with a backward, twice the
  forward (the gradients of both operands of each product);
- the LM head (frozen) on the S scored rows only: ``2·V·H·S`` forward and ``2·V·H·S`` for its activation gradient;
- a trainable head on ``R`` rows (SR's tagger head, MAGNET's projection head, EMAT's matrix, the GRU's matrices):
  ``2·P·R`` forward plus ``2·P·R`` weight gradient, plus ``2·P·R`` activation gradient where its input needs one;
  a frozen part of such a head (EMAT's token rows when only the new rows train) its forward only.

Not counted: embedding look-ups, norms, rotary, softmax, element-wise work, the loss, the optimizer, padding.

The limit: the faster of a bf16 ``(512 x 576) @ (576 x 1536)`` product (4 x 128 tokens through SmolLM2-135M's MLP
up-projection) and a large square one, each the fastest of several calls after a warm-up, in GFLOP/s (``2·m·k·n``
per product), at the thread count the step runs with.
"""
from __future__ import annotations

import statistics
import time

import torch
from torch import nn

from helpers import curves, models

MLP_SHAPE = (512, 576, 1536)  # 4 x 128 tokens, SmolLM2-135M's hidden width and MLP width


def product_flops(params: int, rows: int, *, input_grad: bool, weight_grad: bool) -> float:
    """``2·P·rows`` forward, plus ``2·P·rows`` for each gradient asked for."""
    return 2.0 * params * rows * (1 + int(input_grad) + int(weight_grad))


def linear_flops(module: nn.Module, tokens: int, *, backward: bool) -> float:
    """Every ``nn.Linear`` inside ``module`` on ``tokens`` rows: forward; with ``backward`` the activation gradient of
    each and the weight gradient of the trainable ones."""
    total = 0.0
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            total += product_flops(layer.weight.numel(), tokens, input_grad=backward,
                                   weight_grad=backward and layer.weight.requires_grad)
    return total


def attention_width(config) -> int:
    """Heads x head dim: the width QK^T and AV run over (``hidden_size`` when the config names no head dim)."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return int(config.num_attention_heads * head_dim)


def attention_flops(lengths, layers: int, width: int, *, backward: bool) -> float:
    """QK^T and AV over each row's dense n x n square in every layer; a backward costs twice the forward."""
    forward = sum(4.0 * int(n) ** 2 * width for n in lengths) * layers
    return forward * (3 if backward else 1)


def decoder_flops(model, lengths, scored: int, *, backward: bool = True, lm_head: bool = True) -> float:
    """A decoder's step: its layers' Linear products and attention on rows of ``lengths`` real tokens, and the LM
    head on ``scored`` rows (its activation gradient too with ``backward``)."""
    config, layers = model.config, models.decoder_layers(model)
    tokens = int(sum(int(n) for n in lengths))
    total = linear_flops(layers, tokens, backward=backward)
    total += attention_flops(lengths, len(layers), attention_width(config), backward=backward)
    if lm_head and scored:
        head = model.get_output_embeddings().weight
        total += product_flops(head.numel(), int(scored), input_grad=backward, weight_grad=False)
    return total


def tensor_flops(tensors, rows: int, *, input_grad: bool) -> float:
    """A head made of plain weight tensors on ``rows`` rows: the trainable ones forward and weight gradient (and
    activation gradient with ``input_grad``), the frozen ones forward (and activation gradient) only."""
    return sum(product_flops(t.numel(), rows, input_grad=input_grad, weight_grad=t.requires_grad) for t in tensors)


# --------------------------------------------------------------------------- the limit

def matmul_gflops(m: int, k: int, n: int, dtype: torch.dtype = torch.bfloat16, calls: int = 5) -> float:
    """GFLOP/s of ``(m x k) @ (k x n)`` in ``dtype``: the fastest of ``calls`` timed products after one warm-up (on a
    shared machine interference only ever adds time, and a limit is what the machine can do)."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=generator).to(dtype)
    b = torch.randn(k, n, generator=generator).to(dtype)
    a @ b
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        a @ b
        seconds.append(time.perf_counter() - started)
    return 2.0 * m * k * n / min(seconds) / 1e9


def limits(threads, square: int) -> dict:
    """Per thread count: the bf16 MLP-shape and square products' GFLOP/s and the limit (the faster of the two); the
    same in float32 (the heads of notebook 06 compute in float32)."""
    previous = torch.get_num_threads()
    found = {}
    try:
        for count in threads:
            torch.set_num_threads(count)
            found[count] = {"mlp": matmul_gflops(*MLP_SHAPE, calls=30),
                            "square": matmul_gflops(square, square, square),
                            "mlp_fp32": matmul_gflops(*MLP_SHAPE, torch.float32, calls=10),
                            "square_fp32": matmul_gflops(square, square, square, torch.float32, calls=3)}
            found[count]["limit"] = max(found[count]["mlp"], found[count]["square"])
            found[count]["limit_fp32"] = max(found[count]["mlp_fp32"], found[count]["square_fp32"])
    finally:
        torch.set_num_threads(previous)
    return found


# --------------------------------------------------------------------------- an evaluation's share of a run

def evaluation_count(steps: int, every: int, *, skip_first: bool = False) -> int:
    """How many times ``helpers.training.train`` evaluates a run of ``steps`` steps evaluated every ``every``: at step
    0, every ``every`` steps and at the last (``skip_first``: an evaluator that does nothing at step 0)."""
    return len(curves.evaluation_steps(steps, every)) - int(skip_first)


def evaluation_share(evaluations, train_seconds: float) -> float:
    """``Σ eval seconds x count / (train seconds + Σ eval seconds x count)``; ``evaluations``: (seconds, count)."""
    spent = sum(seconds * count for seconds, count in evaluations)
    return spent / (train_seconds + spent) if spent else 0.0
