"""Tokens/s and model-FLOPs utilisation (MFU) of a LoRA-MNTP step on a randomly initialised 1B-shape Llama, today's
step side by side with faster ones in one run, and where the time goes (goal: 40% MFU, 2x today's tokens/s).

Random weights of a real shape (TinyLlama-1.1B: 22 layers, d = 2048, 32 heads, 4 KV heads, FFN 5632, vocab 32000)
at L = 512 in bf16, LoRA r = 16 on q/k/v/o, the MNTP loss at the masked positions only (``objectives.gathered_loss``).
Each configuration builds the same model from the same seed and trains the same batch.

FLOPs per token are counted two ways:
- "LoRA step": 4·N (forward, plus a backward through the frozen weights for the input gradients only) + attention;
- "6N": the usual full-training model FLOPs, for comparison with published MFU numbers.

The configurations (``--configs``; each adds to the one before it unless its name says otherwise):
- ``today``: the step as this script ran it before: the bidirectional mask rendered as a 4D additive mask every
  step (``attention.forward_with_mask``), LoRA dropout 0.05, no autocast (peft computes the float32 adapters in
  float32), AdamW with foreach, batch 8;
- ``autocast``: the workbook's training path: accelerate's bf16 autocast around the forward;
- ``no-mask``: the fully bidirectional unpadded batch as sdpa's ``is_causal=False`` with no mask tensor, so sdpa may
  take its flash backend (a 4D mask rules flash out); the first batch's hidden states are compared with ``today``'s;
- ``dropout0``: LoRA dropout 0 (the papers' recipes set 0.05 or 0.1: a departure, measured here only);
- ``fused``: AdamW(fused=True);
- ``batch16``, ``batch32``: larger micro-batches;
- ``compiled``: ``torch.compile`` of the decoder body (the warm-up steps compile it: their time is printed).

    python benchmarks/mntp_gpu_step.py                      # on a GPU: every configuration, then two profiles
    python benchmarks/mntp_gpu_step.py --tiny               # a CPU-sized shape, to check the script itself
    python benchmarks/mntp_gpu_step.py --configs today fused --json out.json
"""
from __future__ import annotations

import argparse
import contextlib
import json
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from helpers import attention, masks as M, models, objectives as O
from helpers import training as T
from helpers.device import device_label, get_device

ONE_B = dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
             num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048)
TINY = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=1000, max_position_embeddings=512)
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}
# name -> switches, cumulative in this order
CONFIGS = {
    "today": dict(autocast=False, mask="rendered", dropout=0.05, fused=False, compiled=False, batch=8),
    "autocast": dict(autocast=True),
    "no-mask": dict(mask="none"),
    "dropout0": dict(dropout=0.0),
    "fused": dict(fused=True),
    "batch16": dict(batch=16),
    "batch32": dict(batch=32),
    "compiled": dict(compiled=True),
}


def peak_tflops(device: torch.device, override: float | None) -> float | None:
    if override:
        return override
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((value for key, value in PEAK_BF16_TFLOPS.items() if key in name), None)


def switches_of(name: str) -> dict:
    """The cumulative switches of configuration ``name``: every entry of :data:`CONFIGS` up to it, applied in order."""
    if name not in CONFIGS:
        raise ValueError(f"--configs: {name!r} is not one of {', '.join(CONFIGS)}")
    found: dict = {}
    for key, value in CONFIGS.items():
        found.update(value)
        if key == name:
            return found
    raise AssertionError(name)


class Step:
    """One configuration's model, optimizer, batch and step function."""

    def __init__(self, switches: dict, shape: dict, length: int, device: torch.device):
        self.switches, self.device, self.length = switches, device, length
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        torch.manual_seed(0)
        with device:
            model = LlamaForCausalLM(LlamaConfig(**shape, attn_implementation="sdpa")).to(dtype=dtype)
        self.parameters = sum(p.numel() for p in model.parameters())
        self.model = T.add_lora(model, T.LoraSettings(dropout=switches["dropout"]), seed=0)
        self.body = models.decoder_body(self.model)
        self.head = self.model.get_output_embeddings()
        self.forward_body = torch.compile(self.body) if switches["compiled"] else self.body
        ids = torch.randint(10, shape["vocab_size"], (switches["batch"], length),
                            generator=torch.Generator().manual_seed(0))
        batch = O.make_batch("mntp", ids, torch.ones_like(ids), mask_id=5, vocab_size=shape["vocab_size"],
                             special_ids=(0, 1, 2), generator=torch.Generator().manual_seed(0))
        self.batch = O.to_device(batch, device)
        self.positions = M.content_positions(batch["padding_mask"]).to(device)
        self.optimizer = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=1e-4,
                                           **({"fused": True} if switches["fused"] else {"foreach": True}))

    def hidden(self, body=None) -> torch.Tensor:
        """The decoder's last hidden states on the batch (``body``: the eager body, else the one the step trains)."""
        batch, body = self.batch, body or self.forward_body
        if self.switches["mask"] == "rendered":
            return attention.forward_with_mask(body, batch["input_ids"], M.bidirectional,
                                               padding_mask=batch["padding_mask"]).last_hidden_state
        # every key visible to every query and no padding: sdpa's own bidirectional path, no mask tensor
        return body(input_ids=batch["input_ids"], attention_mask=None, is_causal=False, position_ids=self.positions,
                    use_cache=False).last_hidden_state

    def __call__(self) -> float:
        context = (torch.autocast(self.device.type, dtype=torch.bfloat16) if self.switches["autocast"]
                   else contextlib.nullcontext())
        with context:
            loss = O.gathered_loss(self.head, self.hidden(), self.batch["labels"])["loss"]
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(name: str, args, shape: dict, device: torch.device, reference: torch.Tensor | None) -> tuple[dict, Step]:
    """Build configuration ``name``, warm it up (compiling where it compiles), time ``args.steps`` steps."""
    switches = switches_of(name)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    step = Step(switches, shape, args.length, device)
    row: dict = {"config": name, **switches}
    with torch.no_grad():  # before any update: every configuration starts from the same weights
        step.initial_hidden = step.hidden(step.body).float()  # eager: a compiled body compiles for training only
    if reference is not None and switches["batch"] == reference.shape[0]:
        row["hidden_max_abs_diff_vs_today"] = float((step.initial_hidden - reference).abs().max())
    synchronize(device)
    start = time.perf_counter()
    for _ in range(args.warmup):
        step()
    synchronize(device)
    row["warmup_seconds"] = round(time.perf_counter() - start, 2)
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    synchronize(device)
    seconds = (time.perf_counter() - start) / args.steps
    tokens = switches["batch"] * args.length
    attention_flops = 4 * shape["num_hidden_layers"] * args.length * shape["hidden_size"]  # QK^T and AV, fwd, per token
    peak = peak_tflops(device, args.peak_tflops)
    row.update(step_ms=round(seconds * 1e3, 2), tokens_per_s=round(tokens / seconds), loss=round(loss, 4),
               lora_tflops=round(tokens * (4 * step.parameters + 2 * attention_flops) / seconds / 1e12, 2),
               full_tflops=round(tokens * (6 * step.parameters + 3 * attention_flops) / seconds / 1e12, 2),
               peak_tflops=peak, parameters=step.parameters)
    if peak:
        row["mfu_lora"] = round(row["lora_tflops"] / peak, 4)
        row["mfu_6n"] = round(row["full_tflops"] / peak, 4)
    if device.type == "cuda":
        row["peak_gib"] = round(torch.cuda.max_memory_allocated(device) / 2 ** 30, 2)
    return row, step


def profile_table(step: Step, device: torch.device, steps: int = 3, rows: int = 14) -> str:
    """torch.profiler's table of the most expensive operators over ``steps`` steps (self device time first)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        synchronize(device)
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=rows, max_name_column_width=48)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), help=f"any of {', '.join(CONFIGS)}")
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--tiny", action="store_true", help="a CPU-sized shape, to check the script itself")
    parser.add_argument("--no-profile", action="store_true", help="skip the profiles of today's and the best step")
    parser.add_argument("--json", default=None, help="also write the rows (and profiles) to this JSON file")
    args = parser.parse_args()
    for name in args.configs:
        switches_of(name)
    device = get_device()
    shape = TINY if args.tiny else ONE_B
    if args.tiny:
        args.length = min(args.length, 64)
    rows, steps, reference = [], {}, None
    for name in args.configs:
        row, step = measure(name, args, shape, device, reference)
        if name == "today":
            reference = step.initial_hidden
        rows.append(row)
        steps[name] = step
        mfu = f", MFU {row['mfu_lora']:.1%} (LoRA count) / {row['mfu_6n']:.1%} (6N)" if "mfu_lora" in row else ""
        diff = (f", hidden vs today max |diff| {row['hidden_max_abs_diff_vs_today']:.3g}"
                if "hidden_max_abs_diff_vs_today" in row else "")
        print(f"{name:9} {row['step_ms']:8.1f} ms/step {row['tokens_per_s']:>9,} tokens/s{mfu}{diff} "
              f"(warm-up {row['warmup_seconds']} s)", flush=True)
    base = rows[0]
    best = max(rows, key=lambda row: row["tokens_per_s"])
    print(f"\ndevice {device_label(device)}, {base['parameters'] / 1e9:.2f}B parameters, "
          f"L = {args.length}; best: {best['config']} at {best['tokens_per_s'] / base['tokens_per_s']:.2f}x "
          f"{base['config']}'s tokens/s", flush=True)
    profiles = {}
    if not args.no_profile:
        for name in dict.fromkeys([base["config"], best["config"]]):
            profiles[name] = profile_table(steps[name], device)
            print(f"\n--- profile of {name} (3 steps)\n{profiles[name]}", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"device": device_label(device), "torch": torch.__version__, "length": args.length,
                       "rows": rows, "profiles": profiles}, handle, indent=1)


if __name__ == "__main__":
    main()
