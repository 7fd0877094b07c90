"""MNTP step with logits only at the masked positions against full-vocabulary logits (goal: ≥2× faster, ≥3× less logits memory).

One LoRA-MNTP training step (forward + backward) of the embedded SmolLM2-135M at L = 128, batch 8,
20% selection, on the same batches. Times are medians over interleaved steps in one process. Memory
is measured twice:
- the logits tensors themselves (their sizes, B·L·V against n_selected·V floats);
- everything autograd saves for the backward pass of one step (unique storages, via saved_tensors_hooks).

    python benchmarks/mntp_logits.py [--steps 6] [--batch 8] [--length 128]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch


def setup(batch_size: int, length: int):
    from helpers import data, models
    from helpers import objectives as O
    from helpers import training as T

    torch.manual_seed(0)
    model, tokenizer = models.load_model("embedded:smollm2-135m", device="cpu", dtype="float32")
    model = T.add_lora(model)
    mask_id = O.resolve_mask_token(tokenizer, "underscore")
    texts = (p.text for p in data.load_paragraphs("austen", "train", limit=2000))
    blocks = data.token_blocks(tokenizer, texts, length, max_blocks=batch_size * 4)
    batches = [O.make_batch("mntp", blocks[i * batch_size:(i + 1) * batch_size], torch.ones(batch_size, length, dtype=torch.long),
                            mask_id=mask_id, vocab_size=len(tokenizer), special_ids=tokenizer.all_special_ids,
                            generator=torch.Generator().manual_seed(i)) for i in range(4)]
    return model, batches, len(tokenizer)


def step(model, batch, full_logits: bool) -> None:
    from helpers import objectives as O

    loss = O.masked_lm_loss(model, batch, full_logits=full_logits)["loss"]
    loss.backward()
    model.zero_grad(set_to_none=True)


def saved_for_backward_mib(model, batch, full_logits: bool) -> float:
    """Bytes autograd keeps for the backward pass of one step (unique storages), in MiB."""
    from helpers import objectives as O

    storages: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = O.masked_lm_loss(model, batch, full_logits=full_logits)["loss"]
    loss.backward()
    model.zero_grad(set_to_none=True)
    return sum(storages.values()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    args = parser.parse_args()

    model, batches, vocab = setup(args.batch, args.length)
    times = {False: [], True: []}
    for index in range(args.steps + 1):
        for full in (False, True):
            batch = batches[index % len(batches)]
            start = time.perf_counter()
            step(model, batch, full)
            if index > 0:  # the first round is warm-up
                times[full].append(time.perf_counter() - start)
    selected = statistics.mean(int((b["labels"] != -100).sum()) for b in batches)
    gathered_ms, full_ms = (statistics.median(times[f]) * 1e3 for f in (False, True))
    logits_full_mib = args.batch * args.length * vocab * 4 / 2**20
    logits_gathered_mib = selected * vocab * 4 / 2**20
    saved_gathered, saved_full = (saved_for_backward_mib(model, batches[0], full) for full in (False, True))
    print(f"SmolLM2-135M + LoRA, MNTP step, batch {args.batch} x L={args.length}, {selected:.0f} selected tokens, "
          f"vocab {vocab}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'':28}{'masked-only':>14}{'full logits':>14}{'ratio':>10}")
    print(f"{'step time (ms, median)':28}{gathered_ms:>14.0f}{full_ms:>14.0f}{full_ms / gathered_ms:>9.2f}x")
    print(f"{'logits tensor (MiB)':28}{logits_gathered_mib:>14.1f}{logits_full_mib:>14.1f}{logits_full_mib / logits_gathered_mib:>9.2f}x")
    print(f"{'saved for backward (MiB)':28}{saved_gathered:>14.0f}{saved_full:>14.0f}{saved_full / saved_gathered:>9.2f}x")
    print("ratios are full / masked-only (goal: >= 2x time, >= 3x logits memory)")


if __name__ == "__main__":
    main()
