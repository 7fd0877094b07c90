"""bf16 against float32 on this CPU: the three kinds of work the cpu profile's notebooks spend their time on.

``helpers.device.precision`` picks bf16 on a CPU that computes it natively (AVX512-BF16 or AMX-BF16), and
the cpu profile (``dtype="auto"``) loads its model in it there. This prints what that buys on the embedded SmolLM2-135M:
both models are loaded, the float32 and bf16 jobs take turns (``helpers.metrics.interleaved_timings``, so a drift of
the machine falls on both alike), each job's median over ``--repeats`` calls, and the ratio float32 / bf16:

- a LoRA training step (r = 16 on every projection, AdamW, a batch of 4 x 128 tokens; bf16 weights with float32
  LoRA weights under bf16 autocast, as ``helpers.training`` trains them): MNTP, MAGNET, the taggers, the fine-tunes;
- a forward pass of 32 x 128 tokens without gradients: held-out curves, probes' features, span NLL, the bound;
- 8 cached greedy decoding steps at batch 32 after a 16-token prefix (its cache copied, not timed): Table 5's
  generations, the samplers, beam search.

    python benchmarks/cpu_precision.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import copy

import torch

from helpers import device as D
from helpers import metrics, models, profiles
from helpers import training as T

WORKS = ("LoRA training step (4 x 128)", "forward, no gradients (32 x 128)", "8 cached decoding steps (batch 32)")


def jobs_for(dtype: torch.dtype) -> dict:
    """One timing job per entry of :data:`WORKS` on the embedded model loaded in ``dtype``."""
    model, _ = models.load_model(profiles.EMBEDDED_MODEL, device="cpu", dtype=dtype, seed=0)
    model = T.add_lora(model, T.LoraSettings(r=16, alpha=32), seed=0)
    mixed = D.training_mixed_precision(model)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    generator = torch.Generator().manual_seed(0)
    train_ids = torch.randint(100, 49_000, (4, 128), generator=generator)
    forward_ids = torch.randint(100, 49_000, (32, 128), generator=generator)
    with torch.no_grad():
        prefix = model.eval()(input_ids=forward_ids[:, :16], use_cache=True)

    def train_step(_):
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed == "bf16"):
            loss = model(input_ids=train_ids, labels=train_ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    @torch.no_grad()
    def forward(_):
        model.eval()(input_ids=forward_ids)

    @torch.no_grad()
    def decode(cache):
        model.eval()
        token = prefix.logits[:, -1].argmax(-1, keepdim=True)
        for _ in range(8):
            out = model(input_ids=token, past_key_values=cache, use_cache=True)
            cache, token = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)

    return dict(zip(WORKS, (train_step, forward, lambda _: decode(copy.deepcopy(prefix.past_key_values)))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    flags = D.cpu_flags()
    print(f"{D.device_label('cpu')}; native bf16: {D.cpu_computes_bf16(flags)} "
          f"({', '.join(f for f in D.NATIVE_BF16_CPU_FLAGS if f in flags) or 'no AVX512-BF16 / AMX-BF16'}); "
          f"precision('cpu'): {D.precision('cpu').reason}")
    jobs = {(dtype, work): job for dtype in (torch.float32, torch.bfloat16) for work, job in jobs_for(dtype).items()}
    milliseconds = metrics.interleaved_timings(jobs, list(range(args.repeats)), rounds=1, best=False)
    print(f"{'work':36s} {'float32 s':>10s} {'bf16 s':>10s} {'float32 / bf16':>15s}")
    for work in WORKS:
        slow, fast = milliseconds[(torch.float32, work)] / 1000, milliseconds[(torch.bfloat16, work)] / 1000
        print(f"{work:36s} {slow:10.3f} {fast:10.3f} {slow / fast:14.2f}x")


if __name__ == "__main__":
    main()
