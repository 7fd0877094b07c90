"""The AR baseline of OpenLTG's comparisons (Table 4, Fig. 5): left-to-right nucleus sampling with a KV cache, through
the sampler mask-predict uses (:func:`.mechanism.sample_tokens`), every prompt given exactly ``length`` new tokens (the
paper forces a fixed length, Table 1). Read through :mod:`.mechanism`, which re-exports it."""
from __future__ import annotations

from typing import Sequence

import torch
from tqdm.auto import tqdm

from ... import masks as M
from ... import models
from ...checks import whole_number
from ...seeds import seeded_generator
from .mechanism import (check_length, check_positive, check_prompts, check_seed, check_top_p, left_padded,
                        sample_tokens, vocabulary_size)


@torch.inference_mode()
def autoregressive_generate(model, prompts, length: int, *, temperature: float = 1.0, top_p: float = 0.9,
                            banned_ids: Sequence[int] = (), pad_id: int = 0, seed: int = 0) -> torch.Tensor:
    """Left-to-right sampling with a KV cache, using the same nucleus sampler as :func:`mask_predict`.

    Every prompt gets exactly ``length`` new tokens (the paper forces a fixed length, Table 1).
    Returns ``(B, length)`` ids.
    """
    prompts = check_prompts(prompts, vocabulary_size(model))
    check_seed(seed)
    length = check_length(length)
    check_positive(temperature, "temperature", "the sampling temperature")
    check_top_p(top_p)
    longest = max(prompt.numel() for prompt in prompts)
    models.check_fits(model, longest + length, f"prompt of {longest} tokens + length={length} =")
    device = next(model.parameters()).device
    ids, padding = left_padded(prompts, 0, pad_id, pad_id)
    ids, padding = ids.to(device), padding.to(device)
    positions = M.content_positions(padding)
    banned = torch.tensor(sorted(set(map(int, banned_ids))), dtype=torch.long, device=device)
    generator = seeded_generator(seed, device=device)  # one stream per decode
    out = model(input_ids=ids, attention_mask=padding, position_ids=positions, use_cache=True, logits_to_keep=1)
    generated = []
    next_position = positions[:, -1:] + 1
    for step in range(length):
        logits = out.logits[:, -1].float()
        if banned.numel():
            logits[:, banned[banned < logits.shape[-1]]] = float("-inf")
        token, _ = sample_tokens(logits, temperature, top_p, generator)
        generated.append(token)
        if step == length - 1:
            break
        padding = torch.cat([padding, torch.ones_like(padding[:, :1])], dim=1)
        out = model(input_ids=token[:, None], attention_mask=padding, position_ids=next_position,
                    past_key_values=out.past_key_values, use_cache=True)
        next_position = next_position + 1
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return torch.stack(generated, dim=1).cpu()


def autoregressive_batched(model, prompts: list[torch.Tensor], length: int, *, batch_size: int, desc: str = "AR",
                           seed: int = 0, **kwargs) -> list[torch.Tensor]:
    """:func:`autoregressive_generate` over many prompts in batches, with a progress bar."""
    batch_size = whole_number(batch_size, "batch_size", 1, "prompts per batch")
    prompts = check_prompts(prompts)
    out: list[torch.Tensor] = []
    for index in tqdm(range(0, len(prompts), batch_size), desc=desc):
        out.extend(autoregressive_generate(model, prompts[index:index + batch_size], length, seed=seed + index, **kwargs))
    return out
