"""The mask algebra: every attention mask of the workbook, defined once as a predicate over (query, key).

A :class:`Mask` wraps ``allowed(q, k) -> bool tensor`` that broadcasts over index tensors, in the
style of ``transformers.masking_utils``. True means the query row may attend the key column.
Masks compose with ``&``, ``|`` and ``~``. One definition renders to

- :func:`dense`: an ``(L, L)`` bool tensor, for plots and tests;
- :func:`to_4d`: the additive ``(B, 1, L, L)`` mask Hugging Face decoders accept (eager and sdpa);
- :func:`to_block_mask`: a flex-attention ``BlockMask``.

Padding lives in the renderers, not in the masks: with a 2D padding mask, every token is given its
*content index* (its position among the real tokens of its row), the mask is evaluated on content
indices, and padded keys are hidden. Left and right padding therefore give the same pattern
over the real tokens.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from .checks import real_number, whole_number

Predicate = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Mask:
    """A named predicate over query and key indices; ``min_length`` is the shortest sequence it fits."""

    allowed: Predicate
    name: str
    min_length: int = 0

    def __call__(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self.allowed(q, k)

    def grid(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """The predicate broadcast to the full ``q x k`` shape (some masks ignore one index)."""
        return torch.broadcast_to(self(q, k), torch.broadcast_shapes(q.shape, k.shape))

    def __and__(self, other: "Mask") -> "Mask":
        return Mask(lambda q, k: self(q, k) & other(q, k), f"({self.name} & {other.name})",
                    max(self.min_length, other.min_length))

    def __or__(self, other: "Mask") -> "Mask":
        return Mask(lambda q, k: self(q, k) | other(q, k), f"({self.name} | {other.name})",
                    max(self.min_length, other.min_length))

    def __invert__(self) -> "Mask":
        return Mask(lambda q, k: ~self(q, k), f"~{self.name}", self.min_length)

    def mask_mod(self) -> Callable:
        """The four-argument ``(batch, head, q_idx, kv_idx)`` form used by masking_utils and flex attention."""
        return lambda batch_idx, head_idx, q_idx, kv_idx: self(q_idx, kv_idx)


# --- The lecture's two masks (seed 001, "Bidirectional vs. Unidirectional Self-Attention") ---

# Unidirectional: each position attends to earlier positions and itself (MAGNET Fig. 2a).
causal = Mask(lambda q, k: k <= q, "causal")
# Every position attends to every position (MAGNET Fig. 2b).
bidirectional = Mask(lambda q, k: (q - k) == (q - k), "bidirectional")


def _whole_index(value) -> bool:
    """An integer index: a Python/numpy integer or an integer 0-d tensor (never a float, bool or string)."""
    if isinstance(value, torch.Tensor):
        return value.dim() == 0 and not value.is_floating_point() and value.dtype != torch.bool
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_spans(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    checked: list[tuple[int, int]] = []
    if isinstance(spans, (str, bytes)) or not hasattr(spans, "__iter__"):
        raise ValueError(f"spans={spans!r} must be a list of (start, end) pairs")
    for i, span in enumerate(spans):
        if not hasattr(span, "__len__") or len(span) != 2:
            raise ValueError(f"spans[{i}]={span!r} is not a (start, end) pair")
        if not all(_whole_index(value) for value in span):
            raise ValueError(f"spans[{i}]={tuple(span)!r} must hold whole-number token indices (not floats, "
                             "booleans or strings); spans are half-open (start, end) pairs")
        start, end = int(span[0]), int(span[1])
        if start < 0:
            raise ValueError(f"spans[{i}]=({start}, {end}) starts before 0; spans must be half-open (start, end) pairs within the sequence")
        if end <= start:
            raise ValueError(f"spans[{i}]=({start}, {end}) is empty; spans must be half-open (start, end) pairs with start < end")
        checked.append((start, end))
    order = sorted(range(len(checked)), key=lambda i: checked[i])
    for previous, current in zip(order, order[1:]):
        if checked[current][0] < checked[previous][1]:
            raise ValueError(
                f"spans[{current}]={checked[current]} overlaps spans[{previous}]={checked[previous]}; "
                "spans must be disjoint, half-open (start, end) pairs"
            )
    return checked


def span_ids(index: torch.Tensor, spans: Sequence[tuple[int, int]]) -> torch.Tensor:
    """0 for a context token, ``i + 1`` for a token inside ``spans[i]``."""
    ids = torch.zeros_like(torch.as_tensor(index), dtype=torch.long)
    for number, (start, end) in enumerate(spans, start=1):
        ids = torch.where((index >= start) & (index < end), torch.full_like(ids, number), ids)
    return ids


def magnet(spans: Sequence[tuple[int, int]]) -> Mask:
    """MAGNET's hybrid mask (seed 000 §3.1, Fig. 2).

    "Each context token attends to every other context token, and each span token attends to all
    context tokens and the preceding span tokens in the same span." Spans are half-open
    ``(start, end)`` pairs; any number is allowed (Fig. 2d). One span over the whole sequence is
    the causal mask (Fig. 2a); no span is the bidirectional mask (Fig. 2b).
    """
    checked = _check_spans(spans)

    def allowed(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        span_of_q, span_of_k = span_ids(q, checked), span_ids(k, checked)
        return (span_of_k == 0) | ((span_of_q == span_of_k) & (k <= q))

    end = max((e for _, e in checked), default=0)
    return Mask(allowed, f"magnet({checked})", end)


# --- Sequence repetition (seed 003 §2, Fig. 1) ---

BLOCK_FULL, BLOCK_LOWER, BLOCK_ZERO = "full", "lower", "zero"


def check_repeats(r: int) -> int:
    return whole_number(r, "r", 0, "repetitions: k = r + 1 copies")


@dataclass(frozen=True)
class Repetition:
    """The layout of an ``n``-token sequence repeated ``k = r + 1`` times (seed 003 §2).

    The attention matrix over ``s^k`` is a ``k x k`` grid of ``n x n`` blocks ``A_ij``:
    full for ``i > j``, lower-triangular for ``i = j`` and zero for ``i < j``.
    """

    n: int
    r: int

    def __post_init__(self):
        check_repeats(self.r)
        whole_number(self.n, "n", 1, "the sequence length")

    @property
    def k(self) -> int:
        return self.r + 1

    @property
    def length(self) -> int:
        return self.k * self.n

    @property
    def mask(self) -> Mask:
        """The plain causal mask over the k copies: SR changes the input, never the mask."""
        return Mask(causal.allowed, f"repetition(n={self.n}, r={self.r})", self.length)

    def copy_of(self, index: torch.Tensor) -> torch.Tensor:
        """Which copy (0-based) each position belongs to."""
        return torch.as_tensor(index) // self.n

    def block_kind(self, i: int, j: int) -> str:
        """Block ``A_ij`` (0-based copies): 'full' for i > j, 'lower' for i = j, 'zero' for i < j."""
        for name, value in (("i", i), ("j", j)):
            if not 0 <= value < self.k:
                raise ValueError(f"{name}={value} is out of range for k={self.k} copies (0..{self.k - 1})")
        return BLOCK_FULL if i > j else BLOCK_LOWER if i == j else BLOCK_ZERO

    def last_copy(self) -> torch.Tensor:
        """Indices of the last copy, whose token embeddings SR uses."""
        return torch.arange(self.r * self.n, self.length)

    def block_kinds(self) -> list[list[str]]:
        return [[self.block_kind(i, j) for j in range(self.k)] for i in range(self.k)]


def repetition(n: int, r: int) -> Mask:
    """The causal mask over ``k = r + 1`` copies of an ``n``-token sequence (seed 003 Fig. 1)."""
    return Repetition(n, r).mask


def bidirectional_block_share(r: int) -> float:
    """Share of non-zero blocks that are fully bidirectional: ``(k(k+1)/2 - k) / (k(k+1)/2) = (k-1)/(k+1)`` (seed 003 §2)."""
    k = check_repeats(r) + 1
    return (k - 1) / (k + 1)


# --- DSWA mixed attention (seed 002 §4.1, Fig. 3, Eq. 6-7) ---

# Eq. 7's constants as the paper sets them (§5.1: "α_min = 0.125, α_max = 0.75, S_fix = 64"); every default below,
# and every profile that keeps the paper's values, reads these.
DSWA_FIXED_WINDOW = 64
DSWA_ALPHA_MIN = 0.125
DSWA_ALPHA_MAX = 0.75

def _check_window(window: int, name: str = "window") -> int:
    return whole_number(window, name, 1, "tokens")


def _check_alpha(value: float, name: str) -> float:
    return real_number(value, name, low=0.0, high=1.0, what="seed 002 Eq. 7")


def sliding_window(window: int) -> Mask:
    """A symmetric band: each query sees keys within ``window // 2`` positions (Longformer's convention)."""
    half = _check_window(window) // 2
    return Mask(lambda q, k: (q - k).abs() <= half, f"sliding_window({window})")


def dswa(source_length: int, window: int) -> Mask:
    """DSWA mixed attention (seed 002 §4.1, Fig. 3, Eq. 6).

    The first ``source_length`` positions are the source (prompt), encoded on their own: source
    queries see every source key and no target. Target queries "attend all source sequence hidden
    states and the target sequence hidden states in the window".
    """
    source_length = whole_number(source_length, "source_length", 0)
    band = sliding_window(window)

    def allowed(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (k < source_length) | ((q >= source_length) & (k >= source_length) & band(q, k))

    return Mask(allowed, f"dswa(source={source_length}, window={window})", source_length)


def dswa_window_schedule(num_layers: int, fixed_window: int = DSWA_FIXED_WINDOW, alpha_min: float = DSWA_ALPHA_MIN,
                         alpha_max: float = DSWA_ALPHA_MAX) -> list[int]:
    """Per-layer window sizes, seed 002 Eq. 7: ``S_win = max(α_min, (L - i) / L · α_max) · S_fix``.

    ``i`` is the 1-based layer number and ``L`` the number of layers; sizes are rounded and at least 1.
    The paper's setting is α_min = 0.125, α_max = 0.75, S_fix = 64.
    """
    whole_number(num_layers, "num_layers")
    fixed_window = _check_window(fixed_window, "fixed_window")
    alpha_min, alpha_max = _check_alpha(alpha_min, "alpha_min"), _check_alpha(alpha_max, "alpha_max")
    if alpha_min > alpha_max:
        raise ValueError(f"alpha_min={alpha_min} must not exceed alpha_max={alpha_max}")
    sizes = []
    for layer in range(1, num_layers + 1):
        coefficient = max(alpha_min, (num_layers - layer) / num_layers * alpha_max)
        sizes.append(max(1, int(math.floor(coefficient * fixed_window + 0.5))))
    return sizes


def dswa_per_layer(source_length: int, num_layers: int, fixed_window: int = DSWA_FIXED_WINDOW,
                   alpha_min: float = DSWA_ALPHA_MIN, alpha_max: float = DSWA_ALPHA_MAX) -> list[Mask]:
    """One DSWA mask per layer, its window following Eq. 7. Feed to ``attention.forward_with_mask``."""
    schedule = dswa_window_schedule(num_layers, fixed_window, alpha_min, alpha_max)
    return [dswa(source_length, window) for window in schedule]


# --- Block diffusion: block-causal attention (BD3-LM §3.1, Suppl. B.6; LLaDA's semi-autoregressive blocks) ---

def block_ids(index: torch.Tensor, start: int, block: int) -> torch.Tensor:
    """Which target block each position is in: ``-1`` on the prompt (``index < start``), else ``(index - start) // block``."""
    index = torch.as_tensor(index)
    return torch.where(index < start, torch.full_like(index, -1), torch.div(index - start, block, rounding_mode="floor"))


def _check_blocks(start: int, block: int) -> tuple[int, int]:
    return (whole_number(start, "start", 0, "the prompt length: targets begin at this index"),
            whole_number(block, "block", 1, "the block length in target tokens"))


def same_block(start: int, block: int) -> Mask:
    """Query and key in the same block (the prompt counts as one block of its own)."""
    start, block = _check_blocks(start, block)
    return Mask(lambda q, k: block_ids(q, start, block) == block_ids(k, start, block),
                f"same_block(start={start}, block={block})", start)


def block_causal(start: int, block: int) -> Mask:
    """Block-causal attention (BD3-LM §3.1, Suppl. B.6): causal across blocks, bidirectional within a block.

    The first ``start`` positions are the prompt, a closed block as in notebook 05's mixed attention (prompt rows see
    the prompt only); the targets after it are cut into blocks of ``block`` tokens, and a target sees the prompt,
    every earlier block and its own block: ``(k < start) | (q >= start) & (block(k) <= block(q))``. It is the
    composition ``dswa(start, ∞) & (causal | same_block(start, block))``. ``block >= N`` (the whole target) is
    notebook 05's generation mask; ``block == 1`` is MAGNET's hybrid mask with one span over the target (Fig. 2c);
    with ``start == 0`` it is the causal mask at ``block == 1`` and the bidirectional one at ``block >= length``.
    Nothing in a block reaches an earlier block or the prompt, so their keys and values, once computed, are final:
    the exact KV cache of block diffusion.
    """
    start, block = _check_blocks(start, block)

    def allowed(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (k < start) | ((q >= start) & (block_ids(k, start, block) <= block_ids(q, start, block)))

    return Mask(allowed, f"block_causal(start={start}, block={block})", start)


# --- Middle-layer unmasking (seed 003 §3.2, App. A.3.1) ---

def middle_unmasked_layers(num_layers: int) -> tuple[int, int]:
    """The inclusive (lb, ub) layer indices that lose the causal mask (seed 003 App. A.3.1).

    ``N_u = ⌊N/3⌋_even``, ``lb = N/2 - 1 - N_u/2``, ``ub = N/2 + N_u/2``; ``⌊·⌋_even`` rounds down to
    an even number. ``N/2`` is a true division, as in the authors' code (float bounds, ``lb <= i <= ub``): for
    odd N the bounds are half-integers and the integer layers inside them are ``ceil(lb)..floor(ub)``.
    """
    whole_number(num_layers, "num_layers", 3)
    unmasked = (num_layers // 3) // 2 * 2
    lower, upper = num_layers / 2 - 1 - unmasked / 2, num_layers / 2 + unmasked / 2
    return math.ceil(lower), math.floor(upper)


def middle_unmasking(num_layers: int) -> list[Mask]:
    """Bidirectional in the middle layers of App. A.3.1, causal elsewhere: one mask per layer."""
    lower, upper = middle_unmasked_layers(num_layers)
    return [bidirectional if lower <= layer <= upper else causal for layer in range(num_layers)]


def check_layer(layer: int, num_layers: int, name: str = "layer") -> int:
    """Validate a 0-based layer index: a whole number in 0..num_layers - 1 (a string or bool is refused by name)."""
    try:
        whole = not isinstance(layer, (bool, str)) and int(layer) == layer
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole:
        raise ValueError(f"{name}={layer!r} must be a whole number, a layer index in 0..{num_layers - 1} "
                         f"(the model has {num_layers} layers)")
    if not 0 <= layer < num_layers:
        raise ValueError(f"{name}={layer!r} is out of range for a model with {num_layers} layers (0..{num_layers - 1})")
    return int(layer)


# --- Rendering: dense, 4D, BlockMask ---

def _check_length(mask: Mask, length: int) -> int:
    whole_number(length, "length")
    if length < mask.min_length:
        raise ValueError(f"length={length} is shorter than {mask.name} needs ({mask.min_length}); a span or source is out of range")
    return int(length)


def dense(mask: Mask, length: int) -> torch.Tensor:
    """The ``(length, length)`` bool matrix: True where query row q may attend key column k."""
    length = _check_length(mask, length)
    index = torch.arange(length)
    return mask.grid(index[:, None], index[None, :])


def check_padding_mask(padding_mask, shape: tuple | None = None, name: str = "padding_mask") -> torch.Tensor:
    """A ``(batch, length)`` tensor of 0/1 (or bool) with at least one real token per row, of ``shape`` if given.

    An all-padding row would be attended by nothing and scored as nothing: it is refused, not passed on.
    """
    if not isinstance(padding_mask, torch.Tensor):
        raise ValueError(f"{name}={padding_mask!r} must be a (batch, length) tensor of 1 (token) and 0 (padding)")
    if padding_mask.dim() != 2 or (shape is not None and tuple(padding_mask.shape) != tuple(shape)):
        expected = f"{tuple(shape)} like input_ids" if shape is not None else "(batch, length)"
        raise ValueError(f"{name} has shape {tuple(padding_mask.shape)}; expected {expected}")
    if padding_mask.numel() and not ((padding_mask == 0) | (padding_mask == 1)).all():
        raise ValueError(f"{name} holds values {padding_mask.unique()[:6].tolist()}; expected only 1 (token) and 0 (padding)")
    empty = (padding_mask.sum(-1) == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"{name} rows {empty[:8]} are all padding; every row needs at least one real token")
    return padding_mask


def content_positions(padding_mask: torch.Tensor) -> torch.Tensor:
    """Each token's index among the real tokens of its row (pads get the index of a neighbour; they are hidden anyway)."""
    if not isinstance(padding_mask, torch.Tensor) or padding_mask.dim() != 2:
        raise ValueError(f"padding_mask has shape {tuple(getattr(padding_mask, 'shape', ()))}; expected (batch, length)")
    return (padding_mask.long().cumsum(-1) - 1).clamp(min=0)


def _row_masks(mask: Mask | Sequence[Mask], batch_size: int) -> list[Mask]:
    if isinstance(mask, Mask):
        return [mask] * batch_size
    masks = list(mask)
    if len(masks) != batch_size:
        raise ValueError(f"mask has {len(masks)} per-row masks but the batch has {batch_size} rows")
    return masks


def dense_batch(mask: Mask | Sequence[Mask], padding_mask: torch.Tensor) -> torch.Tensor:
    """``(B, L, L)`` bool: the mask on content indices, padded keys hidden, padded queries see only themselves.

    ``mask`` is one Mask for every row or a list with one Mask per row (e.g. per-example MAGNET spans).
    """
    check_padding_mask(padding_mask)
    batch_size, length = padding_mask.shape
    valid = padding_mask.bool()
    positions = content_positions(padding_mask)
    eye = torch.eye(length, dtype=torch.bool, device=padding_mask.device)
    rows = []
    for row, row_mask in enumerate(_row_masks(mask, batch_size)):
        real = int(valid[row].sum())
        if real < row_mask.min_length:
            raise ValueError(f"row {row} has {real} real tokens, fewer than {row_mask.name} needs ({row_mask.min_length})")
        pos = positions[row]
        allowed = row_mask.grid(pos[:, None], pos[None, :]) & valid[row][None, :]
        rows.append(torch.where(valid[row][:, None], allowed, eye))
    return torch.stack(rows)


def to_4d(mask: Mask | Sequence[Mask], length: int | None = None, padding_mask: torch.Tensor | None = None,
          dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> torch.Tensor:
    """The additive ``(B, 1, L, L)`` mask for Hugging Face eager/sdpa attention: 0 where allowed, dtype-min elsewhere."""
    if padding_mask is None:
        if length is None:
            raise ValueError("length is required when padding_mask is None")
        padding_mask = torch.ones(1, length, dtype=torch.long)
    allowed = dense_batch(mask, padding_mask).to(device) if device is not None else dense_batch(mask, padding_mask)
    additive = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    additive.masked_fill_(~allowed, torch.finfo(dtype).min)
    return additive[:, None]


def to_block_mask(mask: Mask | Sequence[Mask], length: int | None = None, padding_mask: torch.Tensor | None = None,
                  device: torch.device | str = "cpu", block_size: int = 128):
    """A flex-attention ``BlockMask``.

    Without padding and with one Mask, the predicate itself is the ``mask_mod`` (block sparsity is
    found from the definition). With padding or per-row masks, the mask_mod reads the dense batch.
    """
    from torch.nn.attention.flex_attention import create_block_mask

    if padding_mask is None and isinstance(mask, Mask):
        if length is None:
            raise ValueError("length is required when padding_mask is None")
        length = _check_length(mask, length)
        return create_block_mask(mask.mask_mod(), None, None, length, length, device=device, BLOCK_SIZE=block_size)
    if padding_mask is None:
        padding_mask = torch.ones(1, length, dtype=torch.long)
    table = dense_batch(mask, padding_mask).to(device)
    batch_size, length = padding_mask.shape

    def from_table(batch_idx, head_idx, q_idx, kv_idx):
        return table[batch_idx, q_idx, kv_idx]

    return create_block_mask(from_table, batch_size, None, length, length, device=device, BLOCK_SIZE=block_size)


def reachability(layer_masks: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Which inputs can influence which outputs after each layer: ``R_l = M_l · R_(l-1)`` in boolean algebra.

    ``R_l[q, p]`` is True when the token at position p can change the hidden state at q after l layers.
    Residual connections are the diagonal, which every workbook mask contains.
    """
    if isinstance(layer_masks, torch.Tensor) or not layer_masks:
        raise ValueError(f"layer_masks={layer_masks!r} must be a non-empty list of (L, L) masks, one per layer")
    reach = torch.eye(layer_masks[0].shape[-1], dtype=torch.bool)
    out = []
    for layer_mask in layer_masks:
        reach = (layer_mask.float() @ reach.float()) > 0
        out.append(reach)
    return out
