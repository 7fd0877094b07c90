"""Notebook 01's claims: the lecture's definitions and the masks drawn from them, re-derived by brute force.

Every row is exact (a deterministic identity, not a measurement): the lecture's pair counts for N = 4, MAGNET
Fig. 2 against a literal pair-by-pair reading of §3.1 on random span sets, SR's block share counted on the rendered
mask, and the mask proof's outcome (section 7).
"""
from __future__ import annotations

from typing import Sequence

import torch

from ... import ledger
from ... import masks as M
from ...checks import whole_number

LECTURE_PAIRS = (16, 10)  # N = 4: the encoder's N² pairs, the decoder's N(N+1)/2 (the slide's 4 x 4 matrices)
SR_REPEATS = (1, 2, 4, 8)  # the repetitions r at which SR's block share is counted


def _brute_force_magnet(spans: Sequence[tuple[int, int]], length: int) -> torch.Tensor:
    """MAGNET §3.1 read literally, one (q, k) pair at a time."""
    owner = [next((i for i, (s, e) in enumerate(spans) if s <= position < e), None) for position in range(length)]
    grid = torch.zeros(length, length, dtype=torch.bool)
    for q in range(length):
        for k in range(length):
            grid[q, k] = owner[k] is None or (owner[q] == owner[k] and k <= q)
    return grid


def _random_spans(generator: torch.Generator, length: int) -> list[tuple[int, int]]:
    cuts = sorted(set(torch.randint(0, length + 1, (6,), generator=generator).tolist()))
    return [(a, b) for a, b in zip(cuts[::2], cuts[1::2]) if a < b]


_TESTS = "tests/papers/lecture"

CLAIMS = ledger.declare(
    ledger.Declared(
        "lecture.attention.pair_counts", "01", "001", "bidirectional vs unidirectional self-attention",
        says="for N = 4 the encoder attends all N² pairs, the decoder the N(N+1)/2 on and below the diagonal",
        paper_value=f"{LECTURE_PAIRS[0]} vs {LECTURE_PAIRS[1]}",
        quantity="allowed (query, key) pairs at N = 4: bidirectional vs causal", kind=ledger.DEFINITION,
        check=f"{_TESTS}/test_lecture_mechanism.py::test_masked_self_attention_is_pytorchs_attention_under_the_same_mask "
              f"{_TESTS}/test_lecture_mechanism.py::test_the_decoder_row_i_never_sees_a_later_position",
        figure="figures/01_lecture_masks.png"),
    ledger.Declared(
        "lecture.magnet.fig2_mask", "01", "000", "§3.1, Fig. 2 (a)-(d)",
        says="context attends all context; a span token attends all context and the earlier tokens of its own span",
        paper_value="definition", quantity="masks.magnet against a literal pair-by-pair reading of §3.1 (mismatches)",
        kind=ledger.DEFINITION,
        check=f"{_TESTS}/test_lecture_report.py::test_the_literal_magnet_reading_matches_the_mask_on_random_spans",
        figure="figures/01_magnet_masks.png"),
    ledger.Declared(
        "lecture.sr.block_share", "01", "003", "§2, Fig. 1",
        says="of the k(k+1)/2 non-zero blocks of s^k, a share (k-1)/(k+1) are full",
        paper_value=", ".join(f"{M.bidirectional_block_share(r):.2f}" for r in SR_REPEATS) + " at r = 1, 2, 4, 8",
        quantity="share of full blocks among the non-zero blocks of the rendered SR mask, r = 1, 2, 4, 8",
        kind=ledger.DEFINITION, check="tests/test_masks.py::test_bidirectional_block_share_counts_blocks",
        figure="figures/01_sr_blocks.png"),
    ledger.Declared(
        "lecture.magnet.mask_reaches_layers", "01", "000", "§3.1 (the mask reaches every layer)",
        says="a token changed inside a span moves only the hidden states the mask connects it to, layer by layer",
        paper_value="implied by the mask",
        quantity="hidden states moved by a changed span token == the mask's reachability, at every layer",
        kind=ledger.DEFINITION,
        check=f"{_TESTS}/test_lecture_experiment.py::test_the_mask_proof_matches_on_a_real_decoder_and_catches_a_wrong_reach",
        figure="figures/01_mask_proof.png"),
)


def claims(proof_matches: bool, proof_layers: int, trials: int = 200, length: int = 12, seed: int = 0) -> list:
    """Notebook 01's ledger rows: the lecture's pair counts, MAGNET Fig. 2 against a literal reading of §3.1 on
    ``trials`` random span sets, the SR block share counted on the rendered mask, and the mask proof's outcome."""
    trials = whole_number(trials, "trials")
    generator = torch.Generator().manual_seed(seed)
    magnet_mismatches = sum(int(not torch.equal(M.dense(M.magnet(spans), length), _brute_force_magnet(spans, length)))
                            for spans in (_random_spans(generator, length) for _ in range(trials)))
    counted_shares = {}
    for r in SR_REPEATS:
        layout = M.Repetition(3, r)
        kinds = [kind for row in layout.block_kinds() for kind in row if kind != M.BLOCK_ZERO]
        counted_shares[r] = sum(kind == M.BLOCK_FULL for kind in kinds) / len(kinds)
    formula = {r: M.bidirectional_block_share(r) for r in counted_shares}
    pairs = (int(M.dense(M.bidirectional, 4).sum()), int(M.dense(M.causal, 4).sum()))

    def exact(claim_id: str, ours: str, holds: bool) -> ledger.Claim:
        return CLAIMS[claim_id].measured(None, None, None, ledger.EXACT, None, ours=ours, holds=bool(holds))

    return [
        exact("lecture.attention.pair_counts", f"{pairs[0]} vs {pairs[1]}", pairs == LECTURE_PAIRS),
        exact("lecture.magnet.fig2_mask", f"masks.magnet equals a literal pair-by-pair reading on {trials} random span "
                                          f"sets ({magnet_mismatches} mismatches)", magnet_mismatches == 0),
        exact("lecture.sr.block_share", ", ".join(f"{counted_shares[r]:.2f}" for r in counted_shares)
              + " (blocks counted on the rendered mask)",
              all(abs(counted_shares[r] - formula[r]) < 1e-12 for r in formula)),
        exact("lecture.magnet.mask_reaches_layers", f"measured == predicted at all {proof_layers} layers: {proof_matches}",
              proof_matches),
    ]
