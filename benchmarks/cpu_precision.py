"""bf16 against float32 on this CPU: the three kinds of work the cpu profile's notebooks spend their time on.

``helpers.device.precision`` picks bf16 on a CPU that computes it natively (AVX512-BF16 or AMX-BF16), and
``WORKBOOK_DTYPE=auto`` loads the cpu profile's model in it. This prints what that buys on the embedded SmolLM2-135M,
each kind timed in float32 and in bf16 in one run (the median of ``--repeats``), and the ratio float32 / bf16:

- a LoRA training step (r = 16 on every projection, AdamW, a batch of 4 x 128 tokens; bf16 weights with float32
  LoRA weights under bf16 autocast, as ``helpers.training`` trains them): MNTP, MAGNET, the taggers, the fine-tunes;
- a forward pass of 32 x 128 tokens without gradients: held-out curves, probes' features, span NLL, the bound;
- one cached greedy decoding step at batch 32: Table 5's generations, the samplers, beam search.

    python benchmarks/cpu_precision.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from helpers import device as D
from helpers import models
from helpers import training as T


def timed(work, repeats: int) -> float:
    """The median wall time of ``work()`` over ``repeats`` calls, after one untimed call."""
    work()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(dtype: torch.dtype, repeats: int) -> dict[str, float]:
    model, _ = models.load_model(models.profiles.EMBEDDED_MODEL, device="cpu", dtype=dtype, seed=0)
    model = T.add_lora(model, T.LoraSettings(r=16, alpha=32), seed=0)
    mixed = D.training_mixed_precision(model)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    generator = torch.Generator().manual_seed(0)
    train_ids = torch.randint(100, 49_000, (4, 128), generator=generator)
    forward_ids = torch.randint(100, 49_000, (32, 128), generator=generator)

    def train_step():
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed == "bf16"):
            loss = model(input_ids=train_ids, labels=train_ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    @torch.no_grad()
    def forward():
        model.eval()
        model(input_ids=forward_ids)

    @torch.no_grad()
    def decode_step():
        model.eval()
        prefix = model(input_ids=forward_ids[:, :16], use_cache=True)
        cache, token = prefix.past_key_values, prefix.logits[:, -1].argmax(-1, keepdim=True)
        start = time.perf_counter()
        for _ in range(8):
            out = model(input_ids=token, past_key_values=cache, use_cache=True)
            cache, token = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
        return (time.perf_counter() - start) / 8

    decode_times = [decode_step() for _ in range(repeats + 1)][1:]
    return {"LoRA training step (4 x 128)": timed(train_step, repeats),
            "forward, no gradients (32 x 128)": timed(forward, repeats),
            "cached decoding step (batch 32)": statistics.median(decode_times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    flags = D.cpu_flags()
    print(f"{D.device_label('cpu')}; native bf16: {D.cpu_computes_bf16(flags)} "
          f"({', '.join(f for f in D.NATIVE_BF16_CPU_FLAGS if f in flags) or 'no AVX512-BF16 / AMX-BF16'}); "
          f"precision('cpu'): {D.precision('cpu').reason}")
    float32, bf16 = measure(torch.float32, args.repeats), measure(torch.bfloat16, args.repeats)
    print(f"{'work':36s} {'float32 s':>10s} {'bf16 s':>10s} {'float32 / bf16':>15s}")
    for name in float32:
        print(f"{name:36s} {float32[name]:10.3f} {bf16[name]:10.3f} {float32[name] / bf16[name]:14.2f}x")


if __name__ == "__main__":
    main()
