"""The measured CUDA peak of one LoRA-MNTP training step against ``helpers.memory``'s estimate.

For notebook 02's training step in a profile (``helpers.memory.workload``), a randomly initialised model of the
profile's real shape (``memory.KNOWN_SHAPES``; no download) trains one warm-up step, so that the AdamW states exist,
and then one measured step: forward under the bidirectional mask, the gathered MNTP loss, backward, optimizer step.
It prints, per workload:
- the bytes held before the step (weights, LoRA and its AdamW states) against the estimate's weights + LoRA;
- the step's growth over that (``torch.cuda.max_memory_allocated`` minus the bytes held before) against the
  estimate's activations + logits;
- the whole allocated peak against the estimate without the models a notebook keeps resident and without the
  1 GiB allowance for the CUDA context (which the allocator does not see), and the reserved peak plus the context
  (what ``nvidia-smi`` would show) against the full estimate less the resident models.

The script measures unquantised models only: the paper profile's Llama-2-7B, which that profile loads in nf4, is
measured in bf16 and its estimate computed for bf16 too (the line says so).

    python benchmarks/gpu_memory.py [--profiles gpu paper] [--checkpointing on off]
    python benchmarks/gpu_memory.py --tiny      # a CPU-sized shape on CPU: checks the script itself (no peak)
"""
from __future__ import annotations

import argparse
import dataclasses

import torch
from transformers import AutoModelForCausalLM

from helpers import masks as M
from helpers import memory, models, objectives as O, profiles, training as T
from helpers.device import device_label, get_device

TINY = memory.ModelShape("tiny probe", 128, 256, 2, 4, 2, 1000, True)


def random_model(shape: memory.ModelShape, dtype: torch.dtype, device: torch.device):
    config = shape.llama_config(max_position_embeddings=4096)
    torch.manual_seed(0)
    with device:  # initialised where it runs: a 7B model's random init on the CPU takes minutes
        return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=dtype)


def measure(work: memory.Workload, device: torch.device, dtype: torch.dtype) -> dict:
    """Bytes before the step and the step's allocated and reserved peaks (CUDA); on CPU, zeros (a run-through)."""
    model = random_model(work.model, dtype, device)
    model = T.add_lora(model, dataclasses.replace(T.LoraSettings(), r=work.lora_r)).train()
    if work.checkpointing:
        T.enable_gradient_checkpointing(model)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    ids = torch.randint(10, work.model.vocab, (work.micro_batch, work.seq_len), generator=torch.Generator().manual_seed(0))
    batch = O.to_device(O.make_batch("mntp", ids, torch.ones_like(ids), mask_id=5, vocab_size=work.model.vocab,
                                     special_ids=(0, 1, 2), config=O.MaskingConfig(ratio=work.labelled_fraction),
                                     generator=torch.Generator().manual_seed(1)), device)

    def step():
        O.masked_lm_loss(model, batch, M.bidirectional)["loss"].backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # AdamW's states and the lazy allocations (cuBLAS workspace) exist from here on
    if device.type != "cuda":
        return dict(held=0, allocated_peak=0, reserved_peak=0, context=0)
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step()
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info(device)
    context = (total - free) - torch.cuda.memory_reserved(device)  # the driver's share: context, kernels, cuBLAS
    result = dict(held=held, allocated_peak=torch.cuda.max_memory_allocated(device),
                  reserved_peak=torch.cuda.max_memory_reserved(device), context=context)
    del model, optimizer, batch
    torch.cuda.empty_cache()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="+", default=["gpu", "paper"])
    parser.add_argument("--checkpointing", nargs="+", choices=["on", "off"], default=["on", "off"])
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args()
    device = torch.device("cpu") if args.tiny else get_device()
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    gib = memory.GIB
    precision_name = models.dtype_name(dtype)
    print(f"device {device_label(device)}{'' if device.type == 'cuda' else ', run-through only, no peak'}, {dtype}")
    rows = []
    for name in args.profiles:
        base = memory.workload("02", profiles.get(name))
        if args.tiny:
            base = dataclasses.replace(base, model=TINY, micro_batch=2, seq_len=64)
        for checkpointing in args.checkpointing:
            note = precision_name + (" (the profile loads nf4; measured unquantised)" if base.four_bit else "")
            work = dataclasses.replace(base, checkpointing=checkpointing == "on", resident_models=0, four_bit=False)
            estimate = memory.estimate(work, dtype_bytes=2)
            try:
                got = measure(work, device, dtype)
            except torch.OutOfMemoryError as error:
                print(f"{name} checkpointing {checkpointing}: out of memory ({str(error).splitlines()[0]})")
                torch.cuda.empty_cache()
                continue
            step_growth = got["allocated_peak"] - got["held"]
            rows.append(dict(
                workload=f"{name} 02 {work.model.name} {note}, {work.micro_batch} x {work.seq_len}, "
                         f"checkpointing {checkpointing}",
                held=(got["held"] / gib, (estimate.weights + estimate.lora) / gib),
                step=(step_growth / gib, (estimate.activations + estimate.logits) / gib),
                allocated=(got["allocated_peak"] / gib, (estimate.total - estimate.overhead) / gib),
                process=((got["reserved_peak"] + got["context"]) / gib, estimate.total / gib),
                context=got["context"] / gib))
            print(f"{rows[-1]['workload']}: measured {got['allocated_peak'] / gib:.2f} GiB allocated peak")
    print("\nmeasured / estimated (GiB), one step after a warm-up step; resident models left out of both")
    print(f"{'workload':70} {'weights+LoRA':>18} {'activations+logits':>22} {'allocated peak':>18} "
          f"{'reserved+context':>18}")
    for row in rows:
        cells = [f"{m:.2f}/{e:.2f}={m / e:.2f}x" if e else "-" for m, e in
                 (row["held"], row["step"], row["allocated"], row["process"])]
        print(f"{row['workload']:70} {cells[0]:>18} {cells[1]:>22} {cells[2]:>18} {cells[3]:>18}")
    if rows:
        print(f"CUDA context and driver allocations outside the allocator: {rows[-1]['context']:.2f} GiB "
              f"(the estimate allows {memory.CUDA_OVERHEAD_GIB:.1f} GiB for this and fragmentation)")


if __name__ == "__main__":
    main()
