"""Tokens/s of MAGNET's joint training step (Eq. 5) on a randomly initialised 1B-shape Llama, against a plain MNTP step.

Random weights of a real shape (TinyLlama-1.1B: 22 layers, d = 2048, 32 heads, 4 KV heads, FFN 5632, vocab
32000), bf16 on CUDA, sdpa, LoRA r = 16 on q/k/v/o, the SSCL projection head. Three steps are timed in one run:

- MNTP alone under the bidirectional mask (notebook 02's step), batch x L;
- phase 1 of App. A, λ = (1, 0, 1): x^m with up to 2 spans of 4-128 tokens, one hybrid mask per row;
- phase 2, λ = (1, 9, 1): the same plus SSCL on x and x^+ (``--sscl-batch`` sentences of ``--sscl-length`` tokens).

It prints tokens/s of each (x^m tokens, plus x and x^+ tokens in phase 2) and the time ratios to the MNTP step.

    python benchmarks/magnet_joint_step.py [--batch 8] [--length 512] [--sscl-batch 64] [--sscl-length 128]
    python benchmarks/magnet_joint_step.py --tiny      # a CPU-sized shape, to check the script itself
"""
from __future__ import annotations

import argparse
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from helpers import objectives as O
from helpers import training as T
from helpers.device import device_label, get_device
from helpers.papers.magnet import mechanism as G

ONE_B = dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
             num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048)
TINY = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=1000, max_position_embeddings=512)
SPECIAL, MASK_ID, EOS = (0, 1, 2), 5, 2


def sentences(count: int, length: int, vocab: int, generator: torch.Generator) -> dict:
    """Random "instruction + sentence + EOS" rows of 60-100% of ``length`` tokens, right-padded."""
    lengths = torch.randint(max(2, int(0.6 * length)), length + 1, (count,), generator=generator)
    ids = torch.randint(10, vocab, (count, length), generator=generator)
    padding = (torch.arange(length)[None] < lengths[:, None]).long()
    ids[torch.arange(count), lengths - 1] = EOS
    return {"input_ids": ids.masked_fill(padding == 0, 0), "padding_mask": padding}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--sscl-batch", type=int, default=64)
    parser.add_argument("--sscl-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args()
    device = get_device()
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    shape = TINY if args.tiny else ONE_B
    if args.tiny:
        args.length, args.batch, args.sscl_batch, args.sscl_length, args.steps = 128, 4, 8, 32, 3
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**shape, attn_implementation="sdpa")).to(device=device, dtype=dtype)
    model = T.add_lora(model)
    G.add_projection_head(model, shape["hidden_size"], 0)
    model.sscl_head.to(dtype)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(10, shape["vocab_size"], (args.batch, args.length), generator=generator)
    span_max = min(128, args.length // 4)
    spans = [G.sample_spans(args.length, max_spans=2, min_len=4, max_len=span_max, generator=generator)
             for _ in range(args.batch)]
    masked = O.to_device(G.masked_view(ids, spans, mask_id=MASK_ID, vocab_size=shape["vocab_size"], special_ids=SPECIAL,
                                       generator=generator), device)
    mntp = O.to_device(O.make_batch("mntp", ids, torch.ones_like(ids), mask_id=MASK_ID, vocab_size=shape["vocab_size"],
                                    special_ids=SPECIAL, generator=generator), device)
    anchors, positives = (O.to_device(sentences(args.sscl_batch, args.sscl_length, shape["vocab_size"], generator), device)
                          for _ in range(2))
    block_tokens = args.batch * args.length
    sscl_tokens = int(anchors["padding_mask"].sum() + positives["padding_mask"].sum())
    steps = {
        "MNTP (notebook 02)": (lambda: O.masked_lm_loss(model, mntp)["loss"], block_tokens),
        "phase 1: MNTP + MSG": (lambda: G.joint_loss(model, {"lambdas": (1.0, 0.0, 1.0), "masked": masked})["loss"],
                                block_tokens),
        "phase 2: + SSCL (λ2 = 9)": (lambda: G.joint_loss(model, {"lambdas": (1.0, 9.0, 1.0), "masked": masked,
                                                                  "anchors": anchors, "positives": positives})["loss"],
                                     block_tokens + sscl_tokens),
    }

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    timings = {}
    for name, (loss_of, tokens) in steps.items():
        for _ in range(2):  # warm-up
            loss_of().backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        sync()
        start = time.perf_counter()
        for _ in range(args.steps):
            loss_of().backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        sync()
        timings[name] = ((time.perf_counter() - start) / args.steps, tokens)
    print(f"device {device_label(device)}, {dtype}, batch {args.batch} x L={args.length}, "
          f"SSCL {args.sscl_batch} x ≤{args.sscl_length} (x and x^+: {sscl_tokens} real tokens)")
    reference = timings["MNTP (notebook 02)"][0]
    for name, (seconds, tokens) in timings.items():
        print(f"{name:28} {seconds * 1e3:9.1f} ms/step  {tokens / seconds:12,.0f} tokens/s  "
              f"time x{seconds / reference:.2f} of the MNTP step")


if __name__ == "__main__":
    main()
