"""Feeding workbook masks to any Hugging Face decoder, one mask for all layers or one per layer.

- One mask: rendered once (4D additive for eager/sdpa, BlockMask for flex) and passed as
  ``attention_mask``; transformers uses a 4D mask as given, for every model family.
- One mask per layer (middle-layer unmasking, DSWA's Eq. 7 schedule): the masks are rendered
  once per forward and travel *with* the mask the model hands every layer (an attribute of that
  object), and a registered ``AttentionInterface`` function gives layer ``i`` its own mask before
  calling the model's usual attention (eager, sdpa or flex). Because the masks ride on the layer
  call's own argument, gradient checkpointing's recompute in backward sees them too. Attention
  classes are never patched; the interface is transformers' own extension point.

Every entry point moves its inputs to the model's device; :func:`influence` and
:func:`attention_maps` hand back CPU tensors for plots.
"""
from __future__ import annotations

import copy
import sys
from typing import Sequence

import torch
from transformers import AttentionInterface, AttentionMaskInterface

from . import masks as M
from . import models
from .device import model_device

IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention")
_PER_LAYER_PREFIX = "workbook_per_layer_"
_LAYER_MASKS = "workbook_layer_masks"  # attribute of the mask every layer receives: one rendered mask per layer


def attention_implementation(model) -> str:
    """The model's base implementation (eager, sdpa or flex_attention), also while per-layer routing is on."""
    name = model.config._attn_implementation
    return name.removeprefix(_PER_LAYER_PREFIX)


def _check_implementation(name: str) -> str:
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"attn_implementation={name!r} is not supported for custom masks; expected one of {IMPLEMENTATIONS}")
    return name


def render(mask, model, padding_mask: torch.Tensor):
    """Render ``mask`` (one Mask or one per batch row) in the form the model's attention implementation takes.

    The predicates are evaluated on the CPU copy of ``padding_mask`` (they branch on its values) and
    the result is placed on the model's device.
    """
    implementation = _check_implementation(attention_implementation(model))
    device, padding_mask = model_device(model), padding_mask.cpu()
    if implementation == "flex_attention":
        return M.to_block_mask(mask, padding_mask=padding_mask, device=device)
    return M.to_4d(mask, padding_mask=padding_mask, dtype=model.dtype, device=device)


def _family_eager(module):
    family = sys.modules[type(module).__module__]
    return getattr(family, "eager_attention_forward")


def _per_layer_attention(base: str):
    def forward(module, query, key, value, attention_mask, **kwargs):
        layer_masks = getattr(attention_mask, _LAYER_MASKS, None)
        if layer_masks is not None:
            attention_mask = layer_masks[module.layer_idx]
        function = _family_eager(module) if base == "eager" else AttentionInterface._global_mapping[base]
        return function(module, query, key, value, attention_mask, **kwargs)

    return forward


for _base in IMPLEMENTATIONS:
    AttentionInterface.register(_PER_LAYER_PREFIX + _base, _per_layer_attention(_base))
    # Without carried layer masks the routed implementation is the base one, masks from 2D padding included.
    AttentionMaskInterface.register(_PER_LAYER_PREFIX + _base, AttentionMaskInterface._global_mapping[_base])


def _route_per_layer(model) -> None:
    """Switch ``model`` to the per-layer implementation of its base attention, and leave it there.

    It is not switched back after the forward: under gradient checkpointing the layers run again in
    backward, after the forward has returned, and must find the same routing. A mask without carried
    layer masks goes to the base implementation unchanged, so the switch alters no other call.
    """
    if not model.config._attn_implementation.startswith(_PER_LAYER_PREFIX):
        model.set_attn_implementation(_PER_LAYER_PREFIX + attention_implementation(model))


def _carrier(rendered_layers: list):
    """A fresh alias of layer 0's mask carrying every layer's mask; the rendered masks are not mutated."""
    first = rendered_layers[0]
    carrier = first.view_as(first) if isinstance(first, torch.Tensor) else copy.copy(first)
    setattr(carrier, _LAYER_MASKS, tuple(rendered_layers))
    return carrier


def check_batch(input_ids: torch.Tensor, padding_mask: torch.Tensor | None, model=None) -> torch.Tensor:
    """Validate a ``(batch, length)`` integer id tensor and its padding mask (all ones when None); returns the mask.

    With ``model``: ids must index its embedding rows and the length must fit its position embeddings.
    """
    if not isinstance(input_ids, torch.Tensor):
        raise ValueError(f"input_ids={str(input_ids)[:60]} is a {type(input_ids).__name__}; expected a (batch, length) "
                         "tensor of token ids")
    if input_ids.dim() != 2 or input_ids.numel() == 0:
        raise ValueError(f"input_ids has shape {tuple(input_ids.shape)}; expected a non-empty (batch, length)")
    if input_ids.is_floating_point() or input_ids.is_complex() or input_ids.dtype == torch.bool:
        raise ValueError(f"input_ids has dtype {input_ids.dtype}; expected integer token ids (torch.long)")
    if input_ids.device.type == "meta":
        raise ValueError(f"input_ids is on device {input_ids.device}, which holds no values; expected ids on the "
                         "CPU or the model's device")
    if padding_mask is None:
        padding_mask = torch.ones_like(input_ids)
    M.check_padding_mask(padding_mask, input_ids.shape)
    if model is not None:
        rows = model.get_input_embeddings().weight.shape[0]
        low, high = int(input_ids.min()), int(input_ids.max())
        if low < 0 or high >= rows:
            raise ValueError(f"input_ids hold ids in [{low}, {high}]; the model's embedding has rows 0..{rows - 1}")
        models.check_fits(model, input_ids.shape[1], "input_ids' length")
    return padding_mask


def forward_with_mask(model, input_ids: torch.Tensor, mask=None, *, layer_masks: Sequence | None = None,
                      padding_mask: torch.Tensor | None = None, mask_tensor: bool = True, **forward_kwargs):
    """Run ``model`` with a workbook mask.

    Args:
        mask: a :class:`~helpers.masks.Mask` (or a list with one per batch row) used in every layer.
        layer_masks: instead of ``mask``, one entry per decoder layer (each a Mask or per-row list).
        padding_mask: the usual 2D ``(batch, length)`` 1/0 mask; masks are applied on content
            indices, so left and right padding give the same pattern. Position ids follow the
            content indices.
        mask_tensor: True (the default) renders ``mask`` as a tensor (:func:`render`). False, for
            :data:`~helpers.masks.bidirectional` over a batch without padding under sdpa, passes no mask tensor
            and ``is_causal=False`` instead: every query sees every key either way, and sdpa may then pick a
            kernel that takes no mask. Any other mask, padding or implementation is rendered as with True.
        forward_kwargs: passed to the model (``output_hidden_states``, ``output_attentions``, ...).

    ``input_ids``, ``padding_mask`` and tensor ``forward_kwargs`` are moved to the model's device;
    the output stays there (training needs it there).
    """
    if (mask is None) == (layer_masks is None):
        raise ValueError("pass exactly one of mask= (all layers) or layer_masks= (one per layer)")
    padding_mask = check_batch(input_ids, padding_mask, model)
    device = model_device(model)
    forward_kwargs = {name: value.to(device) if isinstance(value, torch.Tensor) else value
                      for name, value in forward_kwargs.items()}
    forward_kwargs.setdefault("position_ids", M.content_positions(padding_mask).to(device))
    input_ids = input_ids.to(device)
    forward_kwargs.setdefault("use_cache", False)
    if layer_masks is None:
        if not mask_tensor and _needs_no_mask(mask, model, padding_mask):
            return model(input_ids=input_ids, attention_mask=None, is_causal=False, **forward_kwargs)
        return model(input_ids=input_ids, attention_mask=render(mask, model, padding_mask), **forward_kwargs)
    layer_masks = list(layer_masks)
    if len(layer_masks) != models.num_layers(model):
        raise ValueError(f"layer_masks has {len(layer_masks)} entries but the model has {models.num_layers(model)} layers")
    return forward_rendered(model, input_ids, layer_rendered=render_layers(layer_masks, model, padding_mask),
                            **forward_kwargs)


def _needs_no_mask(mask, model, padding_mask: torch.Tensor) -> bool:
    """Whether ``mask`` lets every query of an unpadded batch see every key under sdpa (no mask tensor needed)."""
    return mask is M.bidirectional and attention_implementation(model) == "sdpa" and bool(padding_mask.bool().all())


def forward_rendered(model, input_ids: torch.Tensor, rendered=None, *, layer_rendered: Sequence | None = None,
                     **forward_kwargs):
    """Run ``model`` with masks already rendered by :func:`render` / :func:`render_layers`.

    For callers that run many forwards under one mask (mask-predict's iterations): render once, then
    pass the tensor, or a slice of its query rows when earlier keys come from ``past_key_values``.
    Pass ``rendered`` (every layer) or ``layer_rendered`` (one per layer); position ids are the caller's.
    """
    if (rendered is None) == (layer_rendered is None):
        raise ValueError("pass exactly one of rendered= (all layers) or layer_rendered= (one per layer)")
    forward_kwargs.setdefault("use_cache", False)
    if layer_rendered is None:
        return model(input_ids=input_ids, attention_mask=rendered, **forward_kwargs)
    layer_rendered = list(layer_rendered)
    if len(layer_rendered) != models.num_layers(model):
        raise ValueError(f"layer_rendered has {len(layer_rendered)} entries but the model has {models.num_layers(model)} layers")
    _route_per_layer(model)
    return model(input_ids=input_ids, attention_mask=_carrier(layer_rendered), **forward_kwargs)


def render_layers(layer_masks: Sequence, model, padding_mask: torch.Tensor) -> list:
    """Render each distinct mask once (layers often share one); one rendered mask per layer."""
    cache: dict[int, object] = {}
    rendered = []
    for layer_mask in layer_masks:
        key = id(layer_mask)
        if key not in cache:
            cache[key] = render(layer_mask, model, padding_mask)
        rendered.append(cache[key])
    return rendered


def dense_layer_masks(mask=None, *, layer_masks: Sequence | None = None, num_layers: int,
                      padding_mask: torch.Tensor) -> list[torch.Tensor]:
    """The ``(B, L, L)`` bool mask each layer sees: what :func:`forward_with_mask` feeds the model."""
    if layer_masks is None:
        return [M.dense_batch(mask, padding_mask)] * num_layers
    return [M.dense_batch(layer_mask, padding_mask) for layer_mask in layer_masks]


@torch.no_grad()
def influence(model, input_ids: torch.Tensor, position: int, replacement: int, mask=None, *,
              layer_masks: Sequence | None = None, padding_mask: torch.Tensor | None = None,
              row: int = 0) -> torch.Tensor:
    """How much each hidden state moves when one input token changes.

    Replaces ``input_ids[row, position]`` with ``replacement`` and returns, for every layer
    l = 1..N and position q of that row, ``max |h_l(q) - h'_l(q)|`` as an ``(N, L)`` tensor.
    Positions the mask cannot connect to ``position`` within l layers must not move at all.
    """
    if not 0 <= position < input_ids.shape[1]:
        raise ValueError(f"position={position} is out of range for length {input_ids.shape[1]}")
    perturbed = input_ids.clone()
    perturbed[row, position] = replacement
    runs = [forward_with_mask(model, ids, mask, layer_masks=layer_masks, padding_mask=padding_mask,
                              output_hidden_states=True) for ids in (input_ids, perturbed)]
    before, after = (torch.stack(run.hidden_states[1:])[:, row].float() for run in runs)
    return (before - after).abs().amax(-1).cpu()


@torch.no_grad()
def attention_maps(model, input_ids: torch.Tensor, named_masks: dict) -> dict[str, torch.Tensor]:
    """Attention weights ``(layers, heads, L, L)`` of one sequence under each named mask (eager attention)."""
    if attention_implementation(model) != "eager":
        raise ValueError(f"attention weights need attn_implementation='eager', the model uses {attention_implementation(model)!r}")
    if input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"input_ids has shape {tuple(input_ids.shape)}; expected one sequence (1, length)")
    maps = {}
    for name, mask in named_masks.items():  # forward_with_mask moves the ids to the model's device
        output = forward_with_mask(model, input_ids, mask, output_attentions=True)
        maps[name] = torch.stack([weights[0].float().cpu() for weights in output.attentions])
    return maps


def predicted_influence(mask=None, *, layer_masks: Sequence | None = None, num_layers: int,
                        padding_mask: torch.Tensor, position: int, row: int = 0) -> torch.Tensor:
    """``(N, L)`` bool: which hidden states of ``row`` a change at ``position`` can reach after each layer."""
    dense = dense_layer_masks(mask, layer_masks=layer_masks, num_layers=num_layers, padding_mask=padding_mask)
    return torch.stack([reach[:, position] for reach in M.reachability([layer[row] for layer in dense])])
