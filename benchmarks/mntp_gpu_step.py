"""Tokens/s and model-FLOPs utilisation of a LoRA-MNTP step on a randomly initialised 1B-shape Llama (goal: ≥ 40% MFU).

Random weights of a real shape (TinyLlama-1.1B: 22 layers, d = 2048, 32 heads, 4 KV heads, FFN 5632,
vocab 32000) at L = 512 in bf16 with sdpa and the bidirectional mask, LoRA r = 16 on q/k/v/o.
FLOPs per token are counted two ways:
- "LoRA step": 4·N (forward, plus backward through frozen weights for input gradients only) + attention;
- "6N": the usual full-training model FLOPs, for comparison with published MFU numbers.

    python benchmarks/mntp_gpu_step.py [--batch 8] [--length 512] [--peak-tflops 989]
    python benchmarks/mntp_gpu_step.py --tiny      # a CPU-sized shape, to check the script itself
    python benchmarks/mntp_gpu_step.py --compile --fused-adamw   # torch.compile of the model, fused AdamW: run it
                                                                  # beside the plain command on the same machine
"""
from __future__ import annotations

import argparse
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from helpers import objectives as O
from helpers import training as T
from helpers.device import device_label, get_device

ONE_B = dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
             num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048)
TINY = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=1000, max_position_embeddings=512)
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}


def peak_tflops(device: torch.device, override: float | None) -> float | None:
    if override:
        return override
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((value for key, value in PEAK_BF16_TFLOPS.items() if key in name), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--compile", action="store_true", help="torch.compile the LoRA model (warm-up steps compile it)")
    parser.add_argument("--fused-adamw", action="store_true", help="AdamW(fused=True): one kernel for the update")
    args = parser.parse_args()
    device = get_device()
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    shape = TINY if args.tiny else ONE_B
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**shape, attn_implementation="sdpa")).to(device=device, dtype=dtype)
    parameters = sum(p.numel() for p in model.parameters())
    model = T.add_lora(model)
    ids = torch.randint(10, shape["vocab_size"], (args.batch, args.length), device=device)
    batch = O.make_batch("mntp", ids.cpu(), torch.ones_like(ids.cpu()), mask_id=5, vocab_size=shape["vocab_size"],
                         special_ids=(0, 1, 2), generator=torch.Generator().manual_seed(0))
    batch = O.to_device(batch, device)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4,
                                  **({"fused": True} if args.fused_adamw else {}))
    if args.compile:
        model = torch.compile(model)

    def one_step():
        loss = O.masked_lm_loss(model, batch)["loss"]
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(2):
        one_step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        one_step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / args.steps
    tokens = args.batch * args.length
    attention = 4 * shape["num_hidden_layers"] * args.length * shape["hidden_size"]  # QK^T and AV, fwd, per token
    lora_flops = tokens * (4 * parameters + 2 * attention)
    full_flops = tokens * (6 * parameters + 3 * attention)
    peak = peak_tflops(device, args.peak_tflops)
    switches = ", ".join(name for name, on in (("compiled", args.compile), ("fused AdamW", args.fused_adamw)) if on)
    print(f"device {device_label(device)}, {dtype}{', ' + switches if switches else ''}, "
          f"{parameters / 1e9:.2f}B parameters, batch {args.batch} x L={args.length}")
    print(f"step {seconds * 1e3:.1f} ms, {tokens / seconds:,.0f} tokens/s")
    for label, flops in (("LoRA step (4N + attention)", lora_flops), ("6N + attention", full_flops)):
        achieved = flops / seconds / 1e12
        mfu = f"{achieved / peak:.1%} of {peak:.0f} TFLOP/s" if peak else "peak unknown (pass --peak-tflops)"
        print(f"{label:28} {achieved:8.1f} TFLOP/s achieved, MFU {mfu}")


if __name__ == "__main__":
    main()
