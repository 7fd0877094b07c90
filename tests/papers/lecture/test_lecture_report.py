"""Notebook 01's claims (seed 001 and the masks of seeds 000 and 003): exact identities, each reproduced."""
import random

import torch

from helpers import ledger as claims
from helpers import masks as M
from helpers import profiles
from helpers.papers.lecture import report, settings


def test_the_literal_magnet_reading_matches_the_mask_on_random_spans():
    rng = random.Random(1)
    for _ in range(50):
        length = rng.randint(1, 16)
        cuts = sorted(rng.sample(range(length + 1), min(length + 1, 4)))
        spans = [(a, b) for a, b in zip(cuts[::2], cuts[1::2]) if a < b]
        assert torch.equal(report._brute_force_magnet(spans, length), M.dense(M.magnet(spans), length)), spans


def test_the_notebook_claims_are_definition_checks_that_hold():
    rows = report.claims(proof_matches=True, proof_layers=4, trials=20)
    assert [row.paper for row in rows] == ["001", "000", "003", "000"]
    assert all(row.notebook == "01" and row.method == "exact" and row.kind == "definition check"
               and row.verdict == "holds" for row in rows)
    assert [row.id for row in rows] == list(report.CLAIMS)
    assert all(row.quantity == report.CLAIMS[row.id].quantity and row.check == report.CLAIMS[row.id].check
               for row in rows)
    assert rows[0].ours == "16 vs 10" and "0 mismatches" in rows[1].ours
    assert rows[2].ours.startswith("0.33, 0.50, 0.67, 0.80")  # (k-1)/(k+1) at r = 1, 2, 4, 8
    assert report.claims(proof_matches=False, proof_layers=4, trials=1)[3].verdict == "fails"


def test_every_row_is_declared_once_and_every_declaration_is_emitted():
    rows = report.claims(proof_matches=True, proof_layers=2, trials=3)
    assert sorted(row.id for row in rows) == sorted(report.CLAIMS)
    assert all(entry.kind == claims.DEFINITION and entry.notebook == "01" for entry in report.CLAIMS.values())
    assert claims.missing_checks(report.CLAIMS) == []


def test_no_held_out_curve_is_declared():
    assert not any(entry.trained or entry.curve for entry in report.CLAIMS.values())
    assert all(settings.curve_points(profiles.get(name)) == {} for name in profiles.PROFILE_NAMES)
