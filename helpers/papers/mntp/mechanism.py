"""MNTP and MTP as MAGNET defines them (seed 000, §3.2.1 Eq. 2; App. A; App. E): what notebook 02 compares.

The objectives live once, in :mod:`helpers.objectives`, because MAGNET's joint training (notebook 03) and the
offline masked LM of notebooks 05 and 06 use them too; this module names the pieces the comparison rests on.

**The corruption** (§3.2.1): *"we select 20% of the input tokens for masking … we replace 80% of the selected
tokens with a [MASK] token, 10% with a random token from the model's vocabulary, and leave the remaining 10%
unchanged"* (:class:`MaskingConfig`, :func:`mask_tokens`). *"For LLaMA-2-7B, we use "_" as the mask token"*
(App. A; :func:`resolve_mask_token`'s default ``"underscore"``).

**MNTP** (§3.2.1): *"Since LLMs are trained to predict the next token in a sequence, we use the token
representations from position l to predict a masked token at position l + 1"*, with Eq. 2

    L_MNTP = -1/(NL) · Σ_n Σ_l Σ_v 1_mask(l + 1) · y_lv^(n) log ŷ_lv^(n)

**MTP** (App. E, footnote 2): *"the output at token l predicts the masked token at position l"* (l-to-l, as in
BERT). Both are cross-entropies at the selected positions only; they differ in which output carries a label
(:func:`labels_for`: MNTP ``labels[l] = x[l + 1]`` where l + 1 is selected, MTP ``labels[l] = x[l]`` where l is
selected).

**Identical selections.** The first token is never selected (MNTP has no output before it to predict it from), nor
is a special token (:func:`selectable`), so with one generator both objectives corrupt the same tokens and are
scored on the same held-out tokens (:func:`fixed_eval_batches`): App. E's comparison is paired token by token.

**The loss** is computed from logits at the labelled outputs only (:func:`gathered_loss`, called by
:func:`masked_lm_loss` after one forward pass under the bidirectional mask), returning the loss, the argmax hits and
the count of labelled tokens, from which the held-out accuracy of Fig. 7 is read.
"""
from ...objectives import (IGNORE_INDEX, MASK_TOKEN_CHOICES, OBJECTIVES, MaskingConfig, fixed_eval_batches,
                           gathered_loss, labels_for, make_batch, mask_tokens, masked_lm_loss, resolve_mask_token,
                           selectable)

__all__ = ["IGNORE_INDEX", "MASK_TOKEN_CHOICES", "OBJECTIVES", "MaskingConfig", "fixed_eval_batches", "gathered_loss",
           "labels_for", "make_batch", "mask_tokens", "masked_lm_loss", "resolve_mask_token", "selectable"]
