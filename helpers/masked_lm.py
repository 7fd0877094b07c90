"""The one masked-LM interface of the workbook: predict the tokens at given columns of a sequence.

Two backends share it:

- :class:`EncoderMLM`: an encoder MLM (BERT, RoBERTa; any ``AutoModelForMaskedLM``). The output at
  position l predicts the token at l (seed 002 §3.1, Mask-Predict).
- :class:`MNTPDecoder`: a decoder adapted with masked next-token prediction (MAGNET §3.2.1, notebook 02),
  run bidirectionally. The output at l - 1 predicts the token at l, so ``offset = 1``.

Callers (mask-predict in :mod:`helpers.papers.openltg.mechanism`) use :meth:`MaskedLM.predict` (one forward over the
whole sequence) or :meth:`MaskedLM.encode_source` once and :meth:`MaskedLM.predict_targets` per
iteration (the prompt's keys and values cached: exact when no prompt row attends a target, the closed
source block of seed 002 §4.1), and :meth:`MaskedLM.hidden_states`. Masks are :mod:`helpers.masks`
predicates that reach the model through :mod:`helpers.attention`; callers never need to know which
backend they hold. The LM head only ever runs at the rows asked for.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import torch
from transformers import DynamicCache

from . import attention, mntp_adapter, models, profiles
from . import masks as M
from .checks import whole_number
from .device import get_device
from .padding import padded

SOURCE_STATES = ("same-layer", "last-layer")
_UNDERSCORES_ONLY = re.compile(r"(?:Ġ|▁|##| )?_+")  # underscores, after at most one space or word-boundary marker


def underscore_only_ids(tokenizer) -> list[int]:
    """The ids of the vocabulary's tokens whose text is only underscores, with or without a leading space or
    byte-level / SentencePiece / WordPiece marker ("_", "__", "Ġ_", "▁__", "##_"); read once from the vocabulary."""
    if tokenizer is None:
        return []
    return sorted(int(index) for token, index in tokenizer.get_vocab().items() if _UNDERSCORES_ONLY.fullmatch(token))


@dataclass
class SourceCache:
    """The prompt (source) block computed once: per-layer keys and values, and its last-layer states.

    ``layers[i]`` holds layer i's ``(keys, values)``, each ``(B, heads, P, head_dim)``. With
    ``states="same-layer"`` they are what layer i computed for the prompt (one stack, as the model runs
    the whole sequence); with ``"last-layer"`` they are layer i's key/value projections of the prompt's
    *last-layer* states, seed 002 Eq. 3 and 6 (``Mixed-ATTN(H_tgt^(l-1), H_src^L)``).
    """

    layers: list[tuple[torch.Tensor, torch.Tensor]]
    last_hidden: torch.Tensor  # (B, P, H)
    states: str

    @property
    def width(self) -> int:
        return int(self.last_hidden.shape[1])

    def cache(self) -> DynamicCache:
        """A fresh cache holding the prompt; each forward appends the targets to its own copy."""
        cache = DynamicCache()
        for index, (keys, values) in enumerate(self.layers):
            cache.update(keys, values, index)
        return cache


class MaskedLM:
    """What mask-predict needs from a masked LM: predict the token at given columns of a sequence.

    Subclasses set ``offset`` (the output at column ``c - offset`` predicts the token at column c) and
    provide :meth:`body` (the transformer without its LM head) and :meth:`head` (hidden states to logits).
    """

    offset: int = 0
    kind: str = "masked-lm"

    def __init__(self, model, tokenizer, mask_id: int | None, *, banned_ids: Sequence[int] = (), pad_id: int | None = None,
                 context_tokens: int = 64, name: str = "", reader: bool = False):
        self.model, self.tokenizer = model, tokenizer
        # None, only with reader=True (:meth:`reader`): one that scores given sequences (notebook 03's objectives and
        # readouts) and never masks one. Anything else that writes or samples masks needs the id.
        if mask_id is None and not reader:
            raise ValueError(f"mask_id=None: {type(self).__name__} needs the id of the mask token it writes into a "
                             "sentence (masked_lm.load_masked_lm passes the adapter's); for a reader that only scores "
                             f"given sequences, use {type(self).__name__}.reader(model, tokenizer)")
        self.mask_id = None if mask_id is None else whole_number(mask_id, "mask_id", 0, "the mask token's id")
        self.context_tokens = whole_number(context_tokens, "context_tokens")  # per side, for encode_masked
        self.name = name or getattr(getattr(model, "config", None), "name_or_path", "") or type(model).__name__
        self._token_strings: list[str] | None = None
        self._float32_head_key, self._float32_head_cache = None, None  # token_logits's converted bf16 head
        specials = list(tokenizer.all_special_ids) if tokenizer is not None else []
        # The mask token's look-alikes are banned with it: a token whose text is only underscores ("_", "__", " _",
        # "Ġ__", "▁_") reads as a mask when the MNTP adapter's mask token is "_", and a sampler that writes one
        # leaves a blank in the text (15 such tokens besides "_" in SmolLM2's vocabulary).
        self.banned_ids = sorted({*([] if self.mask_id is None else [self.mask_id]), *specials, *map(int, banned_ids),
                                  *underscore_only_ids(tokenizer)})
        if pad_id is None:
            pad_id = getattr(tokenizer, "pad_token_id", None) if tokenizer is not None else None
        if pad_id is None:
            pad_id = self.mask_id if self.mask_id is not None else 0  # padded columns are masked out of attention
        self.pad_id = int(pad_id)

    @classmethod
    def reader(cls, model, tokenizer=None, **options):
        """A backend without a mask token (``mask_id=None``): it scores given sequences only and refuses to mask one
        (:meth:`encode_masked`)."""
        return cls(model, tokenizer, None, reader=True, **options)

    # -- shape of the model
    @property
    def num_layers(self) -> int:
        return models.num_layers(self.model)

    @property
    def max_positions(self) -> int:
        return models.max_positions(self.model)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def encode(self, text: str, max_tokens: int | None = None) -> torch.Tensor:
        """A prompt's ids (its last ``max_tokens`` if longer: the end of a prompt sits next to the target)."""
        ids = self.tokenizer(text, add_special_tokens=False).input_ids
        if max_tokens is not None:
            ids = ids[-max_tokens:]
        if not ids:
            raise ValueError(f"text={text!r} tokenizes to nothing; a prompt needs at least one token")
        return torch.tensor(ids, dtype=torch.long)

    def position_ids(self, padding_mask: torch.Tensor) -> torch.Tensor:
        return M.content_positions(padding_mask)

    # -- the two halves of the model
    def body(self):
        """The transformer stack without the LM head (returns ``last_hidden_state``)."""
        raise NotImplementedError

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits ``(K, V)`` from hidden states ``(K, H)``."""
        raise NotImplementedError

    def _layers(self):
        raise NotImplementedError

    def _project_source(self, layer_index: int, states: torch.Tensor, position_ids: torch.Tensor):
        """Layer ``layer_index``'s keys and values for ``states`` (B, P, H), as its attention would compute them."""
        raise NotImplementedError

    # -- one forward over the whole sequence
    def hidden_states(self, input_ids, padding_mask, *, mask=None, layer_masks=None) -> torch.Tensor:
        """Last-layer hidden states ``(B, L, H)`` under a workbook mask."""
        return attention.forward_with_mask(self.body(), input_ids, mask, layer_masks=layer_masks, padding_mask=padding_mask,
                                           position_ids=self.position_ids(padding_mask)).last_hidden_state

    def predict(self, input_ids: torch.Tensor, padding_mask: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, *,
                mask=None, layer_masks=None) -> torch.Tensor:
        """Logits ``(K, V)`` for the tokens at ``(rows[i], cols[i])`` (absolute columns); the head runs only there."""
        hidden = self.hidden_states(input_ids, padding_mask, mask=mask, layer_masks=layer_masks)
        return self.logits_at(hidden, rows, cols)

    def logits_at(self, hidden: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """Logits ``(K, V)`` for the tokens at ``(rows[i], cols[i])`` from last-layer states of the whole sequence:
        the head runs on the outputs ``offset`` columns before them (one forward, several label sets)."""
        if cols.device.type == "cpu" and cols.numel() and int((cols - self.offset).min()) < 0:  # no device sync
            raise ValueError(f"cols={cols.tolist()} include a column before {self.offset}: with offset {self.offset} "
                             "no output predicts it")
        rows, cols = rows.to(hidden.device), cols.to(hidden.device)
        return self.head(hidden[rows, cols - self.offset])

    # -- the prompt once, the targets per iteration
    def render(self, padding_mask: torch.Tensor, *, mask=None, layer_masks=None) -> dict:
        """Render a mask once for many forwards: ``{"rendered": ...}`` or ``{"layer_rendered": [...]}``, full (B, 1, L, L)."""
        body = self.body()
        if attention.attention_implementation(body) == "flex_attention":
            raise ValueError("a cached prompt slices the rendered mask's rows, which a flex BlockMask cannot; "
                             "load the model with attn_implementation='sdpa' or 'eager', or decode with cache_prompt=False")
        padding_mask = padding_mask.to(self.device)
        if layer_masks is None:
            return {"rendered": attention.render(mask, body, padding_mask)}
        return {"layer_rendered": attention.render_layers(list(layer_masks), body, padding_mask)}

    @staticmethod
    def rows_of(rendered: dict, start: int, stop: int | None = None, keys: int | None = None) -> dict:
        """The query rows ``start:stop`` (and the first ``keys`` key columns) of each rendered mask."""
        cut = lambda tensor: tensor[:, :, start:stop, :keys]
        if "rendered" in rendered:
            return {"rendered": cut(rendered["rendered"])}
        cache: dict[int, torch.Tensor] = {}
        return {"layer_rendered": [cache.setdefault(id(layer), cut(layer)) for layer in rendered["layer_rendered"]]}

    def encode_source(self, source_ids: torch.Tensor, padding_mask: torch.Tensor, rendered: dict, *,
                      states: str = "same-layer") -> SourceCache:
        """Run the prompt block alone (columns ``0:P`` of ``padding_mask``) and keep its keys and values.

        Exact only when no prompt row attends a target (the closed source block): then these states are
        the ones the prompt would have in the full sequence at every iteration. ``rendered`` is the
        full-sequence render of :meth:`render`; its prompt rows and columns are used.
        """
        if states not in SOURCE_STATES:
            raise ValueError(f"states={states!r} must be one of {SOURCE_STATES}")
        width = source_ids.shape[1]
        positions = self.position_ids(padding_mask)[:, :width]
        cache = DynamicCache()
        output = attention.forward_rendered(self.body(), source_ids, **self.rows_of(rendered, 0, width, width),
                                            position_ids=positions, past_key_values=cache, use_cache=True)
        hidden = output.last_hidden_state
        if states == "same-layer":
            layers = [(layer.keys, layer.values) for layer in cache.layers]
        else:
            layers = [self._project_source(index, hidden, positions) for index in range(self.num_layers)]
        return SourceCache(layers, hidden, states)

    def predict_targets(self, source: SourceCache, target_ids: torch.Tensor, padding_mask: torch.Tensor,
                        rows: torch.Tensor, cols: torch.Tensor, rendered: dict) -> torch.Tensor:
        """Logits ``(K, V)`` for target tokens ``(rows[i], cols[i])`` (cols count from the first target).

        Only the target block runs; it attends the cached prompt. With ``offset = 1`` target 0 is
        predicted by the prompt's last row, which the closed source block makes fixed.
        """
        width = source.width
        positions = self.position_ids(padding_mask)[:, width:]
        output = attention.forward_rendered(self.body(), target_ids, **self.rows_of(rendered, width),
                                            position_ids=positions, past_key_values=source.cache(), use_cache=True)
        states = output.last_hidden_state
        if self.offset:
            states = torch.cat([source.last_hidden[:, width - self.offset:], states], dim=1)
        return self.head(states[rows, cols])


    # -- one masked span in a sentence: what multi-token completion (notebook 06, seed 004) needs
    MASK_MARKER = "[MASK]"

    @property
    def output_matrix(self) -> torch.Tensor:
        """The output (token-prediction) matrix ``(V, H)``."""
        return self.model.get_output_embeddings().weight

    @property
    def input_embeddings(self) -> torch.Tensor:
        """The static input embeddings ``(V, H)``."""
        return self.model.get_input_embeddings().weight

    @property
    def hidden_size(self) -> int:
        return int(self.output_matrix.shape[1])

    @property
    def output_bias(self) -> torch.Tensor | None:
        """The bias added to the output matrix's logits (BERT, RoBERTa), or None."""
        return getattr(self.model.get_output_embeddings(), "bias", None)

    @property
    def token_strings(self) -> list[str]:
        """Each output row decoded and stripped: the completion a single token stands for ("" for special tokens)."""
        if self._token_strings is None:
            specials = set(self.tokenizer.all_special_ids)
            decoded = self.tokenizer.batch_decode([[i] for i in range(self.output_matrix.shape[0])])
            self._token_strings = ["" if i in specials else text.strip() for i, text in enumerate(decoded)]
        return self._token_strings

    def output_transform(self, hidden: torch.Tensor) -> torch.Tensor:
        """What the head does before the output matrix (BERT's dense -> GELU -> LayerNorm); here nothing."""
        return hidden

    def output_head(self):
        """A trainable copy of the head (hidden state -> token logits), e.g. for a decoder built on top (seed 004 §4.2)."""
        import copy

        head = copy.deepcopy(self._head_module())
        head.requires_grad_(True)
        return head

    def _head_module(self):
        return self.model.get_output_embeddings()

    def token_logits(self, features: torch.Tensor) -> torch.Tensor:
        """Single-token logits from :meth:`features` (already through :meth:`output_transform`): ``f W^T + b``."""
        matrix, bias = self._float32_head()
        logits = features @ matrix.T
        return logits if bias is None else logits + bias

    def _float32_head(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The output matrix and bias in float32. A bf16 model's are converted once and kept until the weights change
        (their storage or version counter), not on every call: converting SmolLM2's 49K x 576 matrix costs more than
        the product itself, and would be timed as part of the single-token path. Where autograd needs the weights
        (grad enabled and the matrix trainable), or they are float32 already, the conversion is the plain one."""
        matrix, bias = self.output_matrix, self.output_bias
        if matrix.dtype == torch.float32 or (torch.is_grad_enabled() and matrix.requires_grad):
            return matrix.float(), None if bias is None else bias.float()
        key = (matrix.data_ptr(), matrix._version, matrix.device,
               None if bias is None else (bias.data_ptr(), bias._version))
        if self._float32_head_key != key:
            self._float32_head_cache = (matrix.detach().float(), None if bias is None else bias.detach().float())
            self._float32_head_key = key
        return self._float32_head_cache

    def _wrap(self, content: list[int]) -> tuple[list[int], int]:
        """``(ids, start)``: ``content`` with the backend's special tokens, and where ``content`` starts."""
        raise NotImplementedError

    def _text_ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False).input_ids if text else []

    def encode_masked(self, sentence: str, mask_count: int = 1) -> tuple[list[int], int]:
        """Token ids of a sentence holding :attr:`MASK_MARKER` once, with ``mask_count`` mask tokens in its place and
        at most :attr:`context_tokens` tokens on each side; and the column of the (first) mask."""
        whole_number(mask_count, "mask_count")
        if self.mask_id is None:
            raise ValueError(f"{type(self).__name__} was built with mask_id=None; pass the mask token's id to mask a sentence")
        if not isinstance(sentence, str) or sentence.count(self.MASK_MARKER) != 1:
            count = sentence.count(self.MASK_MARKER) if isinstance(sentence, str) else 0
            raise ValueError(f"sentence={sentence!r} contains {self.MASK_MARKER} {count} times; expected exactly once")
        left, right = sentence.split(self.MASK_MARKER)
        left_ids = self._text_ids(left.rstrip(" "))[-self.context_tokens:] if left.strip() else []
        right_ids = self._text_ids(right)[:self.context_tokens]
        ids, start = self._wrap([*left_ids, *[self.mask_id] * mask_count, *right_ids])
        return ids, start + len(left_ids)

    def phrase_ids(self, phrase: str, spaced: bool) -> list[int]:
        """A label's tokens as they stand in a sentence (``spaced``: with the space before it)."""
        return self._text_ids((" " if spaced else "") + phrase)

    @torch.no_grad()
    def hidden_at(self, sequences: Sequence[Sequence[int]], positions: Sequence[int]) -> torch.Tensor:
        """Last hidden states at ``positions`` (one per sequence): a right-padded batch under the bidirectional mask."""
        input_ids, padding = padded(sequences, self.pad_id)
        hidden = self.hidden_states(input_ids, padding, mask=M.bidirectional)  # moved to the model's device there
        return hidden[torch.arange(len(sequences), device=hidden.device), torch.tensor(positions, device=hidden.device)]

    @torch.no_grad()
    def features(self, sentences: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """The contextual embedding of the mask as the output matrix sees it (the output that predicts the mask,
        ``offset`` columns before it, through :meth:`output_transform`), float32, and the ids of the tokens before it."""
        if isinstance(sentences, str) or not isinstance(sentences, Sequence) or len(sentences) == 0:
            raise ValueError(f"sentences={str(sentences)[:60]!r} must be a non-empty list of sentences, each holding "
                             f"{self.MASK_MARKER} once")
        encoded = [self.encode_masked(sentence) for sentence in sentences]
        hidden = self.hidden_at([ids for ids, _ in encoded], [position - self.offset for _, position in encoded])
        previous = torch.tensor([ids[position - 1] for ids, position in encoded], device=self.device)
        return self.output_transform(hidden).float(), previous


class EncoderMLM(MaskedLM):
    """Backend (a): an encoder MLM such as BERT or RoBERTa (``AutoModelForMaskedLM``); output l predicts token l (seed 002 §3.1)."""

    offset = 0
    kind = "encoder"

    def __init__(self, model, tokenizer, mask_id: int | None = None, **kwargs):
        mask_id = tokenizer.mask_token_id if mask_id is None else mask_id
        if mask_id is None:
            raise ValueError(f"{type(model).__name__}'s tokenizer has no mask token; pass mask_id")
        super().__init__(model, tokenizer, mask_id, **kwargs)
        # RoBERTa-style position embeddings start after the padding index.
        self.position_start = int(model.config.pad_token_id) + 1 if "roberta" in model.config.model_type else 0
        self._mlm_head = next((getattr(model, name) for name in ("cls", "lm_head") if hasattr(model, name)), None)
        if self._mlm_head is None:
            raise ValueError(f"{type(model).__name__} has no MLM head named cls (BERT) or lm_head (RoBERTa)")

    @property
    def max_positions(self) -> int:
        return models.max_positions(self.model) - self.position_start

    def encode(self, text: str, max_tokens: int | None = None) -> torch.Tensor:
        """``[CLS] prompt [SEP]`` (or ``<s> prompt </s>``); targets follow the separator."""
        body = super().encode(text, max_tokens)
        ids = self.tokenizer.build_inputs_with_special_tokens(body.tolist())
        return torch.tensor(ids, dtype=torch.long)

    def position_ids(self, padding_mask: torch.Tensor) -> torch.Tensor:
        return M.content_positions(padding_mask) + self.position_start

    def body(self):
        return self.model.base_model

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._mlm_head(hidden)

    @classmethod
    def from_pretrained(cls, name: str, *, device=None, dtype=torch.float32, **kwargs) -> "EncoderMLM":
        """An ``AutoModelForMaskedLM`` and its tokenizer from the Hub (or a local folder), frozen, in eval mode."""
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModelForMaskedLM.from_pretrained(name, dtype=dtype, attn_implementation="sdpa")
        model = model.to(device or get_device()).eval().requires_grad_(False)
        return cls(model, tokenizer, name=kwargs.pop("name", name), **kwargs)

    def _head_module(self):
        return self._mlm_head

    def output_transform(self, hidden: torch.Tensor) -> torch.Tensor:
        """BERT's ``cls.predictions.transform`` (dense -> GELU -> LayerNorm) or RoBERTa's ``lm_head`` equivalent."""
        head = self._mlm_head
        if hasattr(head, "predictions"):
            return head.predictions.transform(hidden)
        import torch.nn.functional as F

        return head.layer_norm(F.gelu(head.dense(hidden)))

    def _wrap(self, content):
        """``[CLS] content [SEP]`` (``<s> content </s>`` for RoBERTa), as the tokenizer frames one sentence."""
        first = self.tokenizer.cls_token_id if self.tokenizer.cls_token_id is not None else self.tokenizer.bos_token_id
        last = self.tokenizer.sep_token_id if self.tokenizer.sep_token_id is not None else self.tokenizer.eos_token_id
        if first is None or last is None:
            raise ValueError(f"{self.name}: the tokenizer lacks [CLS]/<s> or [SEP]/</s> to frame a sentence with")
        return [int(first), *content, int(last)], 1

    def _project_source(self, layer_index, states, position_ids):
        attention_module = self.body().encoder.layer[layer_index].attention.self  # post-norm: keys from states as they are
        shape = (*states.shape[:2], -1, attention_module.attention_head_size)
        return (attention_module.key(states).view(shape).transpose(1, 2),
                attention_module.value(states).view(shape).transpose(1, 2))


class MNTPDecoder(MaskedLM):
    """Backend (b): a decoder adapted with MNTP (MAGNET §3.2.1), run bidirectionally; output l - 1 predicts token l."""

    offset = 1
    kind = "mntp"

    def body(self):
        return models.decoder_body(self.model)

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.model.get_output_embeddings()(hidden)

    @property
    def separator_id(self) -> int:
        """What precedes a text in the packed blocks the MNTP adapter was trained on (EOS, else BOS)."""
        token = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else self.tokenizer.bos_token_id
        if token is None:
            raise ValueError("the tokenizer has neither EOS nor BOS to open a masked sentence with")
        return int(token)

    def _wrap(self, content):
        """``[separator] + content``: a phrase at the start of a sentence still has an output before it."""
        return [self.separator_id, *content], 1

    def _project_source(self, layer_index, states, position_ids):
        """Llama-family (pre-norm, rotary): ``k = RoPE(W_k · norm_i(h_src^L))``, ``v = W_v · norm_i(h_src^L)``."""
        import sys

        body = self.body()
        layer = body.layers[layer_index]
        attention_module = layer.self_attn
        normed = layer.input_layernorm(states)
        shape = (*states.shape[:2], -1, attention_module.head_dim)
        keys = attention_module.k_proj(normed).view(shape).transpose(1, 2)
        values = attention_module.v_proj(normed).view(shape).transpose(1, 2)
        cos, sin = body.rotary_emb(normed, position_ids)
        rotate = getattr(sys.modules[type(attention_module).__module__], "apply_rotary_pos_emb")
        keys, _ = rotate(keys, keys, cos, sin)
        return keys, values


MNTP = "mntp"  # the offline masked LM: the profile's decoder with notebook 02's MNTP adapter


def load_masked_lm(profile=None, name: str = MNTP, *, context_tokens: int = 64, progress: bool = True) -> MaskedLM:
    """The workbook's one masked-LM loader: a frozen :class:`MaskedLM` in eval mode.

    ``name="mntp"`` takes the profile's decoder with notebook 02's MNTP adapter merged in
    (``mntp_adapter.load_or_train_mntp``: a short MNTP run trains one first when notebook 02 has not run), read through
    :class:`MNTPDecoder`; any other ``name`` is a Hub encoder MLM (``bert-base-cased``, ``roberta-base``) or a local
    folder of one, read through :class:`EncoderMLM` in the profile's dtype.
    """
    profile = profile or profiles.current()
    if not isinstance(name, str) or not name:
        raise ValueError(f"name={name!r} must be {MNTP!r} or a Hub id of an encoder masked LM such as 'bert-base-cased'")
    if name == MNTP:
        model, tokenizer, mask_id = mntp_adapter.load_or_train_mntp(profile, progress=progress)
        model.eval().requires_grad_(False)
        return MNTPDecoder(model, tokenizer, int(mask_id), context_tokens=context_tokens, name=profile.model_name)
    return EncoderMLM.from_pretrained(name, dtype=models.resolve_dtype(profile.dtype), context_tokens=context_tokens)
