"""Guarded breaks: each a small, named change of a mechanism that a finding rests on, the kind of one-line mistake
that would leave the finding's number plausible. A finding declares the breaks its named checks must catch
(``Declared.breaks``); ``python -m helpers.ledger --breaks`` runs the checks under each break in a fresh pytest
process and fails when a break survives them all (:mod:`helpers.ledger.breaks`).

A break is applied as a monkeypatch at the start of that process (``WORKBOOK_BREAK=<name>``, read by the root
``conftest.py``), never as an edit of the tree. Each entry: ``name -> (what it breaks, in the mechanism's own
words; a function that applies it to a ``pytest.MonkeyPatch``)``.
"""
from __future__ import annotations

from typing import Callable

BREAKS: dict[str, tuple[str, Callable]] = {}


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

    monkeypatch.setattr(mechanism, "truncate_layers", lambda body, exit_layer: body)
    monkeypatch.setattr(mechanism, "early_exit", contextlib.contextmanager(lambda body, exit_layer: (yield body)))


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


@guarded_break("testing.nothing", "changes nothing (the runner's own test: a break no check can catch survives)")
def _nothing(monkeypatch) -> None:
    return None


def apply(name: str, monkeypatch) -> None:
    """Apply break ``name``; a name not registered is an error naming the registered ones."""
    if name not in BREAKS:
        raise ValueError(f"WORKBOOK_BREAK={name!r} is not a registered break; one of {sorted(BREAKS)}")
    BREAKS[name][1](monkeypatch)
