"""The library's implementation of notebook 07's sampler: diffusers' ``BlockRefinementScheduler`` driven by our model.

diffusers 0.42 ships the block sampler of LLaDA2.x and DiffusionGemma as one scheduler
(``diffusers.schedulers.scheduling_block_refinement``) and two loops around it: ``LLaDA2Pipeline`` (mask token, a
block of ``block_length`` aligned to absolute positions, ``num_inference_steps`` per block, commit by confidence,
``threshold``, ``editing_threshold`` with up to ``max_post_steps`` editing passes) and ``DiffusionGemmaPipeline``
(no mask token: a canvas of uniformly random tokens, re-noised after every step). Here:

- :class:`BackendLogits` makes a workbook backend look like the model ``LLaDA2Pipeline`` calls
  (``model(input_ids, attention_mask=, position_ids=).logits``): logits under the sampler's block-causal mask with the
  prompt closed, banned ids at ``-inf`` (what :func:`.mechanism.sample` proposes from);
- :func:`llada2_generate` runs the real ``LLaDA2Pipeline`` on it, with the arguments :func:`pipeline_arguments`
  derives from a :class:`.mechanism.SamplerConfig`;
- :func:`uniform_generate` is ``DiffusionGemmaPipeline``'s denoising loop (a random canvas, one scheduler step per
  forward pass, ``mask_token_id=None``) around the same scheduler, for :func:`.mechanism.sample` with
  ``corruption="uniform"``.

The conventions that differ (each is stated in notebook 07 and decided by a refusal here, not by silence):

- **steps**: ours counts forward passes over the whole target (``steps / blocks`` per block, LLaDA's rule); the
  pipeline's ``num_inference_steps`` is per block;
- **commits per step**: the scheduler commits every masked token above ``threshold`` when there are at least the
  schedule's ``n_t`` of them, else the top ``n_t`` (``n_t``: ``block_length`` spread over the steps, LLaDA's
  ``get_num_transfer_tokens``). Our schedule is the case ``threshold > 1`` (never reached); our threshold rule
  (Fast-dLLM: all above τ, at least one) is the case ``n_t = 1``, i.e. ``num_inference_steps = block_length``.
  The scheduler compares with ``>``, Fast-dLLM with ``>=``; in uniform mode its quota is cumulative,
  ``⌈kL/T⌉`` after step k: our ``schedule="mask-predict"``;
- **blocks**: the pipeline aligns blocks to absolute positions, so a prompt that is not a multiple of the block
  shares its last block with the first targets (and that block commits fewer tokens); ours starts the first block
  at the first target. Refused here unless the prompt is a multiple of the block;
- **what later blocks see**: the pipeline runs the model on the sequence up to the current block, so later blocks are
  absent: our block-causal attention (or one block); semi-AR under full attention, where later blocks are present as
  masks, is refused;
- **editing passes**: after a block's last mask, the pipeline keeps editing only if the block finished before its
  step budget, for at most ``max_post_steps + 1`` passes, stopping after a pass that edits nothing: our
  ``edit_passes = max_post_steps + 1``. Without editing it still runs one pass on such a block that changes nothing
  (counted in its forward passes, not in ours).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch

from ... import masks as M
from ...masked_lm import MaskedLM
from ...seeds import seeded_generator
from ..openltg import mechanism as mask_predict
from .mechanism import SamplerConfig, noise_vocabulary

NEVER = 1.01  # a threshold no probability exceeds: the scheduler's pure schedule ("> 1 to force top-k commits")
LLADA2_NEXT = ("LLaDA2Pipeline(model=AutoModelForCausalLM.from_pretrained('inclusionAI/LLaDA2.1-mini', "
               "trust_remote_code=True), scheduler=BlockRefinementScheduler(), tokenizer=...)")


class BackendLogits(torch.nn.Module):
    """A workbook backend as ``LLaDA2Pipeline``'s model: ``forward(input_ids, attention_mask, position_ids)`` returns
    logits for every position, computed under ``block_causal(prompt_length, block)`` (BD3-LM §3.1 with notebook 05's
    closed prompt) with banned ids at ``-inf``; the shift is the backend's (MNTP: output l - 1 predicts token l). It
    counts its forward passes. ``attention_mask`` must be all ones (one unpadded prompt) and ``position_ids`` the
    plain range: the backend's own positions are used."""

    def __init__(self, backend: MaskedLM, prompt_length: int, block: int):
        super().__init__()
        self.backend, self.prompt_length, self.block, self.forward_passes = backend, prompt_length, block, 0

    @property
    def device(self) -> torch.device:  # what DiffusionPipeline reads to place its tensors
        return self.backend.device

    @torch.inference_mode()
    def forward(self, input_ids, attention_mask=None, position_ids=None):
        if attention_mask is not None and not bool(attention_mask.bool().all()):
            raise ValueError("attention_mask holds padding; BackendLogits takes one unpadded prompt")
        self.forward_passes += 1
        ids = input_ids.to(self.backend.device)
        mask = M.block_causal(self.prompt_length, self.block)
        hidden = self.backend.hidden_states(ids, torch.ones_like(ids), mask=mask)
        offset = self.backend.offset
        rows, cols = torch.meshgrid(torch.arange(ids.shape[0]), torch.arange(offset, ids.shape[1]), indexing="ij")
        rows, cols = rows.flatten().to(ids.device), cols.flatten().to(ids.device)
        predicted = self.backend.logits_at(hidden, rows, cols).float()
        logits = torch.zeros(ids.shape[0], ids.shape[1], predicted.shape[-1], device=predicted.device)
        logits[rows, cols] = predicted
        banned = torch.tensor(self.backend.banned_ids, dtype=torch.long, device=logits.device)
        logits[..., banned[banned < logits.shape[-1]]] = float("-inf")
        return SimpleNamespace(logits=logits)


@dataclass(frozen=True)
class SchedulerRun:
    """Tokens ``(1, N)`` from the library's loop and the forward passes it took."""

    tokens: torch.Tensor
    forward_passes: int


def _check(config: SamplerConfig, prompt: torch.Tensor, length: int) -> tuple[int, int, int]:
    block, blocks, per_block = config.layout(length)
    if config.temperature != 0:
        raise ValueError(f"config.temperature={config.temperature}: the equality is greedy (temperature 0); the "
                         "scheduler samples with torch.multinomial, ours with notebook 05's nucleus sampler")
    if config.remasking != "low_confidence" or config.remask_committed or config.ltd_beta is not None:
        raise ValueError("the scheduler commits by confidence only: remasking='low_confidence', "
                         "remask_committed=False, ltd_beta=None")
    if blocks > 1 and config.attention != "block-causal":
        raise ValueError("the pipeline runs the model on the sequence up to the current block (later blocks absent); "
                         "with several blocks that is attention='block-causal'")
    if prompt.numel() % block:
        raise ValueError(f"prompt of {prompt.numel()} tokens is not a multiple of the block ({block}): the pipeline "
                         "aligns blocks to absolute positions, ours to the first target")
    return block, blocks, per_block


def pipeline_arguments(config: SamplerConfig, prompt: torch.Tensor, length: int) -> dict:
    """``LLaDA2Pipeline.__call__`` arguments equal to ``config`` (greedy, mask corruption; module docstring)."""
    block, _, per_block = _check(config, prompt, length)
    if config.corruption != "mask":
        raise ValueError("LLaDA2Pipeline corrupts with the mask token; corruption='uniform' is uniform_generate's")
    if config.threshold is None and config.schedule != "uniform":
        raise ValueError(f"schedule={config.schedule!r}: the pipeline's mask mode spreads the block as LLaDA's code "
                         "does, schedule='uniform'")
    editing = config.editing_threshold is not None
    if editing and config.threshold is not None and config.edit_passes < 1:
        raise ValueError("edit_passes=0 with editing: the pipeline always runs at least one editing pass on a block "
                         "finished before its budget (max_post_steps + 1 passes)")
    return dict(block_length=block, gen_length=length,
                num_inference_steps=block if config.threshold is not None else per_block,
                threshold=NEVER if config.threshold is None else float(config.threshold),
                editing_threshold=config.editing_threshold, max_post_steps=max(config.edit_passes - 1, 0),
                temperature=0.0, sampling_method="greedy", minimal_topk=1, eos_early_stop=False, output_type="seq")


def llada2_generate(backend: MaskedLM, prompt: torch.Tensor, length: int, config: SamplerConfig) -> SchedulerRun:
    """``diffusers.LLaDA2Pipeline`` (its own loop and ``BlockRefinementScheduler``) on :class:`BackendLogits`, with
    the arguments of :func:`pipeline_arguments`."""
    from diffusers import BlockRefinementScheduler, LLaDA2Pipeline

    prompt = mask_predict.check_prompts(prompt, mask_predict.vocabulary_size(backend.model))[0]
    arguments = pipeline_arguments(config, prompt, length)
    model = BackendLogits(backend, prompt.numel(), arguments["block_length"])
    pipe = LLaDA2Pipeline(model=model, scheduler=BlockRefinementScheduler(), tokenizer=None)
    pipe.set_progress_bar_config(disable=True)
    out = pipe(input_ids=prompt[None].to(backend.device), mask_token_id=backend.mask_id, **arguments)
    return SchedulerRun(out.sequences.cpu(), model.forward_passes)


@torch.inference_mode()
def uniform_generate(backend: MaskedLM, prompt: torch.Tensor, length: int, config: SamplerConfig, *,
                     seed: int = 0) -> SchedulerRun:
    """``DiffusionGemmaPipeline``'s denoising loop around ``BlockRefinementScheduler`` in its uniform corruption mode
    (``mask_token_id=None``): per block a canvas of ``randint(0, vocab)`` tokens, then ``num_inference_steps``
    scheduler steps, each on the model's logits for the canvas (the prefix: the prompt and the finished blocks), the
    scheduler committing its cumulative quota and re-noising the rest. The random stream is the one
    :func:`.mechanism.sample` draws from (``seeded_generator(seed)``)."""
    from diffusers import BlockRefinementScheduler

    prompt = mask_predict.check_prompts(prompt, mask_predict.vocabulary_size(backend.model))[0].to(backend.device)
    block, blocks, per_block = _check(config, prompt, length)
    if config.threshold is not None or config.schedule != "mask-predict":
        raise ValueError("the scheduler's uniform mode commits a cumulative quota ⌈kL/T⌉ (ours: schedule="
                         "'mask-predict', threshold=None)")
    generator = seeded_generator(mask_predict.check_seed(seed), device=backend.device)
    vocabulary = noise_vocabulary(backend)
    model = BackendLogits(backend, prompt.numel(), block)
    scheduler = BlockRefinementScheduler(block_length=block, num_inference_steps=per_block)
    scheduler.set_timesteps(per_block, device=backend.device, block_length=block)
    done = prompt[None]
    for _ in range(blocks):
        canvas = torch.randint(0, vocabulary, (1, block), device=backend.device, generator=generator)
        for step in range(per_block):
            logits = model(torch.cat([done, canvas], 1)).logits[:, -block:]
            canvas = scheduler.step(logits, step, canvas, mask_token_id=None, temperature=0.0, threshold=NEVER,
                                    editing_threshold=config.editing_threshold, generator=generator).prev_sample
        done = torch.cat([done, canvas], 1)
    return SchedulerRun(done[:, prompt.numel():].cpu(), model.forward_passes)
