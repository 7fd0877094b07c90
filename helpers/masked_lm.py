"""The one masked-LM interface of the workbook: predict the tokens at given columns of a sequence.

Two backends share it:

- :class:`EncoderMLM`: an encoder MLM (BERT, RoBERTa; any ``AutoModelForMaskedLM``). The output at
  position l predicts the token at l (seed 002 §3.1, Mask-Predict).
- :class:`MNTPDecoder`: a decoder adapted with masked next-token prediction (MAGNET §3.2.1, notebook 02),
  run bidirectionally. The output at l - 1 predicts the token at l, so ``offset = 1``.

Callers (mask-predict in :mod:`helpers.decoding`) only use :meth:`MaskedLM.predict` and
:meth:`MaskedLM.hidden_states`, passing workbook masks (:mod:`helpers.masks`) that reach the model
through :mod:`helpers.attention`; they never need to know which backend they hold.
"""
from __future__ import annotations

from typing import Sequence

import torch

from . import attention
from . import masks as M


class MaskedLM:
    """What mask-predict needs from a masked LM: predict the token at given columns of a sequence.

    Subclasses set ``offset``: the output at column ``c - offset`` predicts the token at column c.
    """

    offset: int = 0
    kind: str = "masked-lm"

    def __init__(self, model, tokenizer, mask_id: int, *, banned_ids: Sequence[int] = (), pad_id: int | None = None):
        self.model, self.tokenizer = model, tokenizer
        self.mask_id = int(mask_id)
        specials = list(tokenizer.all_special_ids) if tokenizer is not None else []
        self.banned_ids = sorted({self.mask_id, *specials, *map(int, banned_ids)})
        if pad_id is None:
            pad_id = getattr(tokenizer, "pad_token_id", None) if tokenizer is not None else None
        self.pad_id = int(pad_id if pad_id is not None else self.mask_id)

    # -- shape of the model
    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    @property
    def max_positions(self) -> int:
        return int(self.model.config.max_position_embeddings)

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

    def hidden_states(self, input_ids, padding_mask, *, mask=None, layer_masks=None) -> torch.Tensor:
        """Last-layer hidden states ``(B, L, H)`` under a workbook mask."""
        raise NotImplementedError

    def predict(self, input_ids: torch.Tensor, padding_mask: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, *,
                mask=None, layer_masks=None) -> torch.Tensor:
        """Logits ``(K, V)`` for the tokens at ``(rows[i], cols[i])`` (absolute columns)."""
        raise NotImplementedError


class EncoderMLM(MaskedLM):
    """Backend (a): an encoder MLM such as BERT or RoBERTa; output l predicts token l (seed 002 §3.1)."""

    offset = 0
    kind = "encoder"

    def __init__(self, model, tokenizer, mask_id: int | None = None, **kwargs):
        mask_id = tokenizer.mask_token_id if mask_id is None else mask_id
        if mask_id is None:
            raise ValueError(f"{type(model).__name__}'s tokenizer has no mask token; pass mask_id")
        super().__init__(model, tokenizer, mask_id, **kwargs)
        # RoBERTa-style position embeddings start after the padding index.
        self.position_start = int(model.config.pad_token_id) + 1 if "roberta" in model.config.model_type else 0

    @property
    def max_positions(self) -> int:
        return int(self.model.config.max_position_embeddings) - self.position_start

    def encode(self, text: str, max_tokens: int | None = None) -> torch.Tensor:
        """``[CLS] prompt [SEP]`` (or ``<s> prompt </s>``); targets follow the separator."""
        body = super().encode(text, max_tokens)
        ids = self.tokenizer.build_inputs_with_special_tokens(body.tolist())
        return torch.tensor(ids, dtype=torch.long)

    def position_ids(self, padding_mask: torch.Tensor) -> torch.Tensor:
        return M.content_positions(padding_mask) + self.position_start

    def hidden_states(self, input_ids, padding_mask, *, mask=None, layer_masks=None) -> torch.Tensor:
        output = attention.forward_with_mask(self.model, input_ids, mask, layer_masks=layer_masks, padding_mask=padding_mask,
                                             position_ids=self.position_ids(padding_mask), output_hidden_states=True)
        return output.hidden_states[-1]

    def predict(self, input_ids, padding_mask, rows, cols, *, mask=None, layer_masks=None) -> torch.Tensor:
        output = attention.forward_with_mask(self.model, input_ids, mask, layer_masks=layer_masks, padding_mask=padding_mask,
                                             position_ids=self.position_ids(padding_mask))
        return output.logits[rows, cols - self.offset]


class MNTPDecoder(MaskedLM):
    """Backend (b): a decoder adapted with MNTP (MAGNET §3.2.1), run bidirectionally; output l - 1 predicts token l.

    The LM head runs only at the rows that are asked for (the masked positions), never over the whole sequence.
    """

    offset = 1
    kind = "mntp"

    def _body(self):
        body = self.model.get_decoder() if hasattr(self.model, "get_decoder") else None
        if body is None:
            raise ValueError(f"{type(self.model).__name__} exposes no decoder body via get_decoder()")
        return body

    def hidden_states(self, input_ids, padding_mask, *, mask=None, layer_masks=None) -> torch.Tensor:
        return attention.forward_with_mask(self._body(), input_ids, mask, layer_masks=layer_masks,
                                           padding_mask=padding_mask).last_hidden_state

    def predict(self, input_ids, padding_mask, rows, cols, *, mask=None, layer_masks=None) -> torch.Tensor:
        hidden = self.hidden_states(input_ids, padding_mask, mask=mask, layer_masks=layer_masks)
        return self.model.get_output_embeddings()(hidden[rows, cols - self.offset])
