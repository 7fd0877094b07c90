"""Guarded breaks: each a small, named change of a mechanism that a finding rests on, the kind of one-line mistake
that would leave the finding's number plausible. A finding declares the breaks its named checks must catch
(``Declared.breaks``); ``python -m helpers.ledger --breaks`` runs the checks under each break in a fresh pytest
process and fails when a break survives them all (:mod:`helpers.ledger.breaks`).

A break is applied as a monkeypatch at the start of that process (``WORKBOOK_BREAK=<name>``, read by the root
``conftest.py``), never as an edit of the tree. Each entry: ``name -> (what it breaks, in the mechanism's own
words; a function that applies it to a ``pytest.MonkeyPatch``)``.
"""
from __future__ import annotations

import sys
from typing import Callable

BREAKS: dict[str, tuple[str, Callable]] = {}


def _everywhere(monkeypatch, module, name: str, replacement) -> None:
    """Set ``module.name`` to ``replacement``, and the same name in every loaded ``helpers`` module that bound the
    original by ``from ... import`` (the module's package is imported first, so its siblings are loaded), so the
    break reaches every caller, not only those that read the module's attribute at call time."""
    import importlib

    importlib.import_module(module.__name__.rpartition(".")[0])
    original = getattr(module, name)
    for loaded in list(sys.modules.values()):
        if getattr(loaded, "__name__", "").startswith("helpers") and getattr(loaded, name, None) is original:
            monkeypatch.setattr(loaded, name, replacement)


def guarded_break(name: str, says: str):
    """Register ``apply(monkeypatch)`` as the break ``name``."""
    def register(apply: Callable) -> Callable:
        if name in BREAKS:
            raise ValueError(f"break {name!r} is registered twice")
        BREAKS[name] = (says, apply)
        return apply
    return register


@guarded_break("openltg.ltd_not_applied", "the sampler draws every iteration at temperature 1: LTD's T_t = β(1 - t/T) "
                                          "(Eq. 8) is computed and recorded but not applied")
def _ltd_not_applied(monkeypatch) -> None:
    from helpers.papers.openltg import mechanism

    original = mechanism.sample_tokens
    monkeypatch.setattr(mechanism, "sample_tokens",
                        lambda logits, temperature, top_p, generator=None: original(logits, 1.0, top_p, generator))


@guarded_break("openltg.dswa_window_ignored", "every target attends every target: DSWA's per-layer window (Eq. 6-7) "
                                              "is scheduled but the generation mask ignores it")
def _dswa_window_ignored(monkeypatch) -> None:
    from helpers.papers.openltg import mechanism

    original = mechanism.generation_mask
    monkeypatch.setattr(mechanism, "generation_mask", lambda source_length, window=None: original(source_length, None))


@guarded_break("mntp.causal_training", "MNTP and MTP are trained and scored under the causal mask: the decoder never "
                                       "attends to the tokens after a position (no bidirectional attention)")
def _causal_training(monkeypatch) -> None:
    from helpers import masks, objectives

    original = objectives.masked_lm_loss
    monkeypatch.setattr(objectives, "masked_lm_loss",
                        lambda model, batch, mask=masks.bidirectional, **options: original(model, batch, masks.causal,
                                                                                           **options))


@guarded_break("sr.exit_not_applied", "early exit (§3.5) is configured but not applied: the tagger reads the last "
                                      "layer whatever exit layer it names")
def _exit_not_applied(monkeypatch) -> None:
    import contextlib

    from helpers.papers.sequence_repetition import mechanism

    _everywhere(monkeypatch, mechanism, "truncate_layers", lambda body, exit_layer: body)
    _everywhere(monkeypatch, mechanism, "early_exit", contextlib.contextmanager(lambda body, exit_layer: (yield body)))


@guarded_break("magnet.hybrid_mask_causal", "MAGNET's hybrid mask (Fig. 2) is the causal one: span tokens never see "
                                            "their right context, in training and in scoring")
def _hybrid_mask_causal(monkeypatch) -> None:
    from helpers import masks

    monkeypatch.setattr(masks, "magnet", lambda spans: masks.causal)


@guarded_break("magnet.words_pooled_unshifted", "§4.1's word pooling reads output i for token i instead of output "
                                                "i - 1 (the MNTP model's shift dropped)")
def _words_pooled_unshifted(monkeypatch) -> None:
    from helpers.papers.magnet import mechanism

    original = mechanism.pool_words
    monkeypatch.setattr(mechanism, "pool_words", lambda hidden, spans, *, shift=True: original(hidden, spans,
                                                                                                shift=False))


@guarded_break("magnet.rep_scores_the_prefix", "Table 5's and Fig. 6's Rep-n and Rep-Sen score the prefix with the "
                                               "continuation (the generated ids read from the start of the row)")
def _rep_scores_the_prefix(monkeypatch) -> None:
    from helpers.papers.magnet import experiment_table5

    original = experiment_table5.generate

    def with_prefix(model, tokenizer, prefixes, **options):
        found = original(model, tokenizer, prefixes, **options)
        for row in found:
            row["continuation_ids"] = tokenizer(row["prefix"], add_special_tokens=False).input_ids + \
                row["continuation_ids"]
        return found

    monkeypatch.setattr(experiment_table5, "generate", with_prefix)


@guarded_break("sr.first_copy_read", "SR reads each token's state in the first copy instead of the last (§2): the "
                                     "repeated input is built, but its tokens are read where they saw no later token")
def _first_copy_read(monkeypatch) -> None:
    import dataclasses

    from helpers.papers.sequence_repetition import mechanism

    original = mechanism.repeat_batch

    def first_copy(input_ids, padding_mask=None, r=0, policy="packed"):
        found = original(input_ids, padding_mask, r, policy)
        stride = found.padding_mask.sum(-1, keepdim=True) // (found.r + 1) if policy == "packed" else input_ids.shape[1]
        return dataclasses.replace(found, last_copy=found.last_copy - found.r * stride)

    monkeypatch.setattr(mechanism, "repeat_batch", first_copy)


@guarded_break("emat.accuracy_off_by_one", "accuracy@k counts the gold among the first k + 1 predictions (EMAT §5's "
                                           "\"among the top-k predictions\" read one too wide)")
def _accuracy_off_by_one(monkeypatch) -> None:
    from helpers import metrics

    original = metrics.accuracy_at_k
    monkeypatch.setattr(metrics, "accuracy_at_k", lambda ranked, gold, ks=(1, 3, 5, 10, 50): {
        int(k): original(ranked, gold, [int(k) + 1])[int(k) + 1] for k in ks})


@guarded_break("sr.middle_upper_layer_masked", "middle unmasking (App. A.3.1) stops one layer short: the layers "
                                               "lb <= i < ub lose the causal mask, layer ub keeps it")
def _middle_upper_layer_masked(monkeypatch) -> None:
    from helpers import masks

    def one_short(num_layers):
        lower, upper = masks.middle_unmasked_layers(num_layers)
        return [masks.bidirectional if lower <= layer < upper else masks.causal for layer in range(num_layers)]

    _everywhere(monkeypatch, masks, "middle_unmasking", one_short)


@guarded_break("emat.phrase_rows_not_multiplied", "EMAT's logits cover the masked LM's tokens only: the new phrase "
                                                  "rows (§4.1, \"added only to the output token-prediction matrix\") "
                                                  "are stored but never multiplied")
def _phrase_rows_not_multiplied(monkeypatch) -> None:
    from helpers.papers.emat import mechanism

    monkeypatch.setattr(mechanism.ExtendedMatrixDecoder, "forward",
                        lambda self, hidden: hidden @ self.token_matrix.T + self.token_bias)


@guarded_break("emat.gru_decodes_one_step", "the GRU decoder's beam search (§4.2, \"until EOS\") stops after its "
                                            "first step whatever max_steps says: the RNN is timed and scored without "
                                            "its sequential decoding")
def _gru_decodes_one_step(monkeypatch) -> None:
    from helpers.papers.emat import mechanism

    original = mechanism.GRUDecoder.beam_search
    monkeypatch.setattr(mechanism.GRUDecoder, "beam_search",
                        lambda self, mask_hidden, first_tokens, beam_size, max_steps, num_results:
                        original(self, mask_hidden, first_tokens, beam_size, 1, num_results))


@guarded_break("openltg.function_share_of_all_mass", "Fig. 2's function-word share is their mass over the whole "
                                                     "distribution instead of over the top-50 candidates' mass (§3.3's "
                                                     "\"high probability regions\" not renormalised)")
def _function_share_of_all_mass(monkeypatch) -> None:
    import torch

    from helpers.papers.openltg import experiment

    original = experiment.function_word_share

    def of_all_mass(tokenizer, logits, *, temperature=1.0, top_k=50):
        share = original(tokenizer, logits, temperature=temperature, top_k=top_k)
        return share * float(torch.softmax(logits.float() / temperature, -1).topk(top_k).values.sum())

    _everywhere(monkeypatch, experiment, "function_word_share", of_all_mass)


class _PrefixRecomputed:
    """A causal LM whose calls with ``past_key_values`` run the whole sequence so far again (the cache is ignored)."""

    def __init__(self, model):
        self._model, self._ids, self._positions = model, None, None

    def __getattr__(self, name):
        return getattr(self._model, name)

    def __call__(self, *, input_ids, attention_mask, position_ids, past_key_values=None, **options):
        import torch

        if past_key_values is not None:
            input_ids = torch.cat([self._ids, input_ids], 1)
            position_ids = torch.cat([self._positions, position_ids], 1)
        self._ids, self._positions = input_ids, position_ids
        return self._model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                           use_cache=True, logits_to_keep=1)


@guarded_break("openltg.ar_cache_not_reused", "Fig. 5's AR baseline builds its KV cache but never reuses it: every "
                                              "step runs the prompt and all generated tokens again")
def _ar_cache_not_reused(monkeypatch) -> None:
    from helpers.papers.openltg import mechanism_autoregressive

    original = mechanism_autoregressive.autoregressive_generate
    _everywhere(monkeypatch, mechanism_autoregressive, "autoregressive_generate",
                lambda model, prompts, length, **options: original(_PrefixRecomputed(model), prompts, length,
                                                                   **options))


@guarded_break("openltg.smart_not_applied", "SMART (§4.3) is configured but not applied: update_all is ignored and "
                                            "only the masked positions are resampled")
def _smart_not_applied(monkeypatch) -> None:
    from dataclasses import replace

    from helpers.papers.openltg import mechanism

    original = mechanism.mask_predict
    _everywhere(monkeypatch, mechanism, "mask_predict",
                lambda backend, prompts, length, config=mechanism.DecodeConfig(), **options:
                original(backend, prompts, length, replace(config, update_all=False), **options))


@guarded_break("openltg.fixed_length_is_the_mean", "Table 7's fixed length is the training lengths' mean instead of "
                                                   "their median (the length that minimises the mean |error|)")
def _fixed_length_is_the_mean(monkeypatch) -> None:
    import numpy

    from helpers.papers.openltg import experiment_table7

    class MedianIsMean:
        median = staticmethod(numpy.mean)

        def __getattr__(self, name):
            return getattr(numpy, name)

    monkeypatch.setattr(experiment_table7, "np", MedianIsMean())


@guarded_break("diffusion.block_cache_not_kept", "the block-causal sampler (BD3-LM §3, Fast-dLLM's block cache) never "
                                                 "adds a finished block's keys and values to the cache: every step "
                                                 "runs every block since the prompt again")
def _block_cache_not_kept(monkeypatch) -> None:
    from helpers.papers.diffusion import mechanism

    original = mechanism._Predictor._block_step

    def not_kept(self, rows, cols, block_index):
        source = self.source
        try:
            return original(self, rows, cols, block_index)
        finally:
            self.source = source

    monkeypatch.setattr(mechanism._Predictor, "_block_step", not_kept)


@guarded_break("diffusion.loss_unweighted", "the diffusion loss drops LLaDA Eq. 3's 1/t weight: each row's masked "
                                            "cross-entropy counts alike whatever its masking ratio")
def _loss_unweighted(monkeypatch) -> None:
    from helpers.papers.diffusion import mechanism_likelihood

    original = mechanism_likelihood.diffusion_loss
    _everywhere(monkeypatch, mechanism_likelihood, "diffusion_loss",
                lambda model, batch: original(model, {**batch, "ratio": batch["ratio"].new_ones(batch["ratio"].shape)}))


@guarded_break("diffusion.loss_unshifted", "the diffusion batch labels output l with token l (MTP's labels) instead "
                                           "of token l + 1: the MNTP adapter's shift is dropped in the fine-tune")
def _loss_unshifted(monkeypatch) -> None:
    from helpers import objectives
    from helpers.papers.diffusion import mechanism_likelihood

    original = mechanism_likelihood.diffusion_batch

    def unshifted(*arguments, **options):
        batch = original(*arguments, **options)
        labels = batch["labels"].new_full(batch["labels"].shape, objectives.IGNORE_INDEX)
        labels[:, 1:] = batch["labels"][:, :-1]  # MNTP's labels[l - 1] = x[l] moved to labels[l]
        return {**batch, "labels": labels}

    _everywhere(monkeypatch, mechanism_likelihood, "diffusion_batch", unshifted)


@guarded_break("testing.nothing", "changes nothing (the runner's own test: a break no check can catch survives)")
def _nothing(monkeypatch) -> None:
    return None


def apply(name: str, monkeypatch) -> None:
    """Apply break ``name``; a name not registered is an error naming the registered ones."""
    if name not in BREAKS:
        raise ValueError(f"WORKBOOK_BREAK={name!r} is not a registered break; one of {sorted(BREAKS)}")
    BREAKS[name][1](monkeypatch)
