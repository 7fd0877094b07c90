"""MAGNET's report (seed 000): the claims quote the paper's numbers from :data:`PAPER` alone, in the ledger's order."""
import numpy as np
import pytest

from helpers.papers.magnet import experiment_table1 as P
from helpers.papers.magnet import report


def _study(n=6):
    rng = np.random.default_rng(0)

    def counts():
        tags = np.full(n, 10.0)
        return {"correct": rng.integers(5, 11, n).astype(float), "tags": tags, "tp": rng.integers(0, 3, n).astype(float),
                "predicted": np.full(n, 3.0), "gold": np.full(n, 3.0)}

    rows = [P.CHANCE_ROW, *P.table1_readouts(middle=1)]
    return P.ProbeStudy({row: {task: counts() for task in P.PROBE_TASKS} for row in rows}, n=n)


def _infilling():
    def scored(shift):
        return {"example_nll": [4.0 + shift, 6.0 + shift, 5.0], "example_tokens": [2, 3, 3]}

    return {dataset: {"base": scored(1.0), "MAGNET (left only)": scored(0.5), "MAGNET": scored(0.0)}
            for dataset in ("ROC Stories", "Wikitext-103")}


def _generations():
    looping, fresh = [1, 2, 3, 4] * 3, list(range(12))
    texts = {"base": [fresh, fresh], "LLM2Vec-style": [looping, looping], "MAGNET": [looping, fresh]}
    return {(name, set_name): [{"text": "A b. A b.", "continuation_ids": ids} for ids in rows]
            for name, rows in texts.items() for set_name in ("5-word prefixes", "sentence prefixes")}


def test_claims_quote_the_papers_numbers_from_one_place():
    rows = report.claims(infilling=_infilling(), generations=_generations(), probes=_study(),
                         rows=P.claim_rows(middle=1))
    assert len(rows) == 19 and all(row.notebook == "03" and row.paper == "000" for row in rows)
    quoted = [row.paper_value for row in rows]
    assert quoted[:3] == ["+4.41", "+1.72", "+1.81"]  # Table 1, MAGNET - base
    assert quoted[7] == "96.59"  # Table 1's base NER, a token accuracy
    assert quoted[9] == "+0.381" and quoted[11] == "+0.355"  # Table 4, log(base / MAGNET) per dataset
    assert quoted[12:16] == ["+0.415 (5-word prefixes)", "+0.270 (5-word prefixes)", "+0.199 (5-word prefixes)",
                             "+0.189 (5-word prefixes)"]  # Table 5: LLM2Vec-style - base, LLM2Vec-style - MAGNET
    assert quoted[16:] == ["+0.07", "+0.09", "+0.20"]  # Table 6, MNTP + MSG - MNTP


def test_table_paper_lookups_read_paper():
    assert report.table1_paper()["base (causal)"] == report.PAPER["table1"]["base"]
    assert report.table6_paper_value("MNTP + MSG", "POS") == pytest.approx(93.38)
    assert list(report.ablation_table(_study()).index) == list(report.TABLE6_ROWS)
