"""Attention under the MAGNET hybrid mask: dense 4D through sdpa, flex BlockMask, and plain causal sdpa.

Prints, for each length, the time of one attention call (9 heads x 64, SmolLM2's shape; 32 x 128,
Llama-2-7B's, with --llama) under the three settings and the ratios measured in this one run.
The goal is flex hybrid at >= 0.8x the speed of plain causal at L = 2048 on GPU.

    python benchmarks/attention_masks.py [--lengths 512 1024 2048 4096] [--device cuda] [--llama]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.nn.attention.flex_attention import flex_attention
from torch.nn.functional import scaled_dot_product_attention

from helpers import masks as M
from helpers.device import device_label, get_device


def magnet_spans(length: int) -> list[tuple[int, int]]:
    """Two MSG-sized spans (§3.2.3: up to 2 spans of 4-128 tokens)."""
    span = min(128, max(4, length // 16))
    return [(length // 4, length // 4 + span), (length // 2, length // 2 + span)]


def timed(function, device: torch.device, repeats: int, calls: int = 1) -> float:
    """Median seconds of one ``function()`` after two warm-up calls: ``repeats`` samples of ``calls`` back-to-back
    calls each (on a GPU one call can be shorter than a kernel launch's jitter, so a sample averages many)."""
    for _ in range(2):
        function()
    samples = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            function()
        if device.type == "cuda":
            torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


@torch.no_grad()
def run(lengths, device: torch.device, heads: int, head_dim: int, repeats: int, batch: int = 1,
        calls: int = 1) -> list[dict]:
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    compiled_flex = torch.compile(flex_attention, dynamic=False)
    rows = []
    for length in lengths:
        q, k, v = (torch.randn(batch, heads, length, head_dim, device=device, dtype=dtype) for _ in range(3))
        mask = M.magnet(magnet_spans(length))
        start = time.perf_counter()
        dense = M.to_4d(mask, length, dtype=dtype, device=device)
        dense_build = time.perf_counter() - start
        start = time.perf_counter()
        block = M.to_block_mask(mask, length, device=device)
        block_build = time.perf_counter() - start
        causal = timed(lambda: scaled_dot_product_attention(q, k, v, is_causal=True), device, repeats, calls)
        hybrid_dense = timed(lambda: scaled_dot_product_attention(q, k, v, attn_mask=dense), device, repeats, calls)
        hybrid_flex = timed(lambda: compiled_flex(q, k, v, block_mask=block), device, repeats, calls)
        causal_block = M.to_block_mask(M.causal, length, device=device)  # the same kernel under the causal mask
        causal_flex = timed(lambda: compiled_flex(q, k, v, block_mask=causal_block), device, repeats, calls)
        rows.append(dict(length=length, causal_ms=causal * 1e3, dense_ms=hybrid_dense * 1e3, flex_ms=hybrid_flex * 1e3, causal_flex_ms=causal_flex * 1e3,
                         dense_build_ms=dense_build * 1e3, block_build_ms=block_build * 1e3,
                         dense_mask_mib=dense.numel() * dense.element_size() / 2**20, block_sparsity=block.sparsity()))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--device", default=None, help="cpu or cuda (default: get_device())")
    parser.add_argument("--llama", action="store_true", help="Llama-2-7B attention shape (32 heads x 128)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=1, help="sequences per attention call")
    parser.add_argument("--calls", type=int, default=1, help="back-to-back calls per timing sample (use ~20 on a GPU)")
    args = parser.parse_args()
    device = torch.device(args.device) if args.device else get_device()
    heads, head_dim = (32, 128) if args.llama else (9, 64)
    print(f"device {device_label(device)}, batch {args.batch}, {heads} heads x {head_dim}, torch {torch.__version__}")
    rows = run(args.lengths, device, heads, head_dim, args.repeats, args.batch, args.calls)
    print(f"{'L':>6} {'causal ms':>10} {'dense ms':>10} {'flex ms':>10} {'dense/causal':>13} {'flex/causal':>12} "
          f"{'flex speed vs causal':>21} {'flex causal ms':>15} {'dense mask MiB':>15} {'block sparsity %':>17}")
    for row in rows:
        print(f"{row['length']:>6} {row['causal_ms']:>10.2f} {row['dense_ms']:>10.2f} {row['flex_ms']:>10.2f} "
              f"{row['dense_ms'] / row['causal_ms']:>12.2f}x {row['flex_ms'] / row['causal_ms']:>11.2f}x "
              f"{row['causal_ms'] / row['flex_ms']:>20.2f}x {row['causal_flex_ms']:>15.2f} {row['dense_mask_mib']:>15.1f} {row['block_sparsity']:>17.1f}")
    print("'flex causal ms' is the compiled flex kernel under the causal BlockMask: flex's own cost apart from the mask")
    print("ratios are time over plain causal sdpa (lower is faster); 'flex speed vs causal' is causal time / flex time "
          "(goal >= 0.8 at L=2048 on GPU)")


if __name__ == "__main__":
    main()
