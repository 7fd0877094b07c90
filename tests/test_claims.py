"""The claims ledger: rows are validated, verdicts follow the interval, the README table is the ledger's."""
import json
import os
from pathlib import Path

import pytest

from helpers import claims, metrics

ROW = dict(notebook="05", paper="002", where="Table 6", claim="LTD cuts repetition", paper_value="17.80 -> 0.73",
           ours="40.6 -> 12.5", low=-40.0, high=-10.0, method="bootstrap over 32 prompts", n=32,
           verdict="reproduced")


def test_claim_refuses_not_reproduced_without_a_check():
    with pytest.raises(ValueError, match="check="):
        claims.Claim(**{**ROW, "verdict": "not reproduced"})
    assert claims.Claim(**{**ROW, "verdict": "not reproduced", "check": "reference rule on the same inputs"}).check


@pytest.mark.parametrize("change, argument", [({"notebook": "5"}, "notebook"), ({"paper": "009"}, "paper"),
                                              ({"verdict": "maybe"}, "verdict"), ({"low": float("nan")}, "low"),
                                              ({"low": 1.0, "high": 0.0}, "low"), ({"n": 0}, "n"), ({"n": None}, "n"),
                                              ({"claim": " "}, "claim")])
def test_claim_names_the_bad_argument(change, argument):
    with pytest.raises(ValueError, match=argument):
        claims.Claim(**{**ROW, **change})


def test_exact_claims_need_no_n():
    row = claims.Claim(**{**ROW, "low": None, "high": None, "method": claims.EXACT, "n": None})
    assert row.interval_text == "exact (deterministic)"


@pytest.mark.parametrize("low, high, sign, check, expected", [
    (0.1, 0.5, 1, "", "reproduced"), (-0.5, -0.1, -1, "", "reproduced"), (-0.1, 0.2, 1, "", "inconclusive"),
    (-0.5, -0.1, 1, "", "inconclusive"), (-0.5, -0.1, 1, "reference code agrees", "not reproduced"),
    (0.0, 0.3, 1, "", "inconclusive")])
def test_verdict_follows_the_interval(low, high, sign, check, expected):
    assert claims.verdict_for_difference(low, high, paper_sign=sign, check=check) == expected


def test_bootstrap_interval_covers_the_mean_and_shrinks_with_n():
    small = metrics.bootstrap_interval([0, 1] * 10, seed=1)
    large = metrics.bootstrap_interval([0, 1] * 1000, seed=1, resamples=500)
    assert small[1] < 0.5 < small[2] and large[1] < 0.5 < large[2]
    assert large[2] - large[1] < (small[2] - small[1]) / 3
    assert metrics.bootstrap_interval([3.0, 3.0]) == (3.0, 3.0, 3.0)
    with pytest.raises(ValueError, match="first has 2"):
        metrics.paired_difference_interval([1, 2], [1])
    assert metrics.seed_interval([0.5]) == (0.5, None, None)


def test_record_gather_and_readme_round_trip(tmp_path, monkeypatch):
    for marker in ("pyproject.toml", "notebooks", "helpers"):
        (tmp_path / marker).mkdir() if marker != "pyproject.toml" else (tmp_path / marker).write_text("")
    (tmp_path / "README.md").write_text(f"# t\n\n{claims.README_BEGIN}\nold\n{claims.README_END}\n\nafter\n")
    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    rows = [claims.Claim(**ROW), claims.Claim(**{**ROW, "where": "Fig. 5", "verdict": "inconclusive", "high": 5.0})]
    path = claims.record(rows, notebook="05", profile="cpu")
    assert path == tmp_path / "runs" / "claims" / "cpu" / "05.json"
    with pytest.raises(ValueError, match="notebook='04'"):
        claims.record(rows, notebook="04", profile="cpu")
    gathered = claims.gather()
    assert gathered == rows
    readme = (tmp_path / "README.md").read_text()
    assert "1 reproduced, 0 not reproduced, 1 inconclusive" in readme and "old" not in readme and readme.endswith("after\n")
    assert claims.readme_is_current(tmp_path / "README.md")
    (tmp_path / "README.md").write_text(readme.replace("40.6", "41.6"))
    assert not claims.readme_is_current(tmp_path / "README.md")
    path.write_text(path.read_text()[:40])
    with pytest.raises(ValueError, match=str(path)):
        claims.gather()


def test_committed_readme_table_is_the_ledgers():
    assert claims.readme_is_current(), "README claims table differs from claims/ledger_cpu.json: python -m helpers.claims --gather"


NOTEBOOKS_WITH_CLAIMS = ("01", "02", "03", "04", "05", "06")


@pytest.mark.after_notebooks
def test_every_executed_notebook_wrote_well_formed_claims(request, session_start):
    """Runs after nbmake: each notebook executed in this session wrote its claims (smoke profile) in this session."""
    executed = {Path(str(item.fspath)).name[:2] for item in request.session.items if str(item.fspath).endswith(".ipynb")}
    if not executed:
        pytest.skip("no notebook was executed in this session (run with `notebooks --nbmake`)")
    profile = os.environ.get("WORKBOOK_PROFILE", "smoke")
    for notebook in sorted(executed & set(NOTEBOOKS_WITH_CLAIMS)):
        path = claims.claims_dir(profile) / f"{notebook}.json"
        assert path.exists(), f"notebook {notebook} wrote no claims to {path}"
        assert path.stat().st_mtime >= session_start - 1, f"{path} is older than this session: notebook {notebook} stopped writing it"
        rows = claims.read_rows(path)
        assert rows and all(row.notebook == notebook for row in rows)
        assert json.loads(path.read_text())["profile"] == profile
