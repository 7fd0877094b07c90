"""The gpu profile's own ledger (claims/ledger_gpu.json): gathered under the cpu ledger's rules, refusing random-weight
and smoke runs in one line each, and leaving the cpu ledger and the cpu blocks of docs/claims.md and the README alone."""
import json

import pytest
from test_claims import ROW, _params  # a row, and the parameters a notebook registers unedited

from helpers import ledger, profiles


def _record_gpu(notebook="05", profile=None):
    gpu = profile or profiles.get("gpu")
    return ledger.record([ledger.Claim(**ROW)], notebook=notebook, profile=gpu, parameters=_params(notebook, gpu))


def test_a_gpu_profile_run_is_gathered_into_its_own_ledger_with_its_device_and_model(tmp_path, git_workbook):
    doc = git_workbook(docs=True, synthetic=True).root / "docs" / "claims.md"
    before, readme = doc.read_text(), (tmp_path / "README.md").read_text()
    path = _record_gpu()
    assert path == tmp_path / "runs" / "claims" / "gpu" / "05.json"
    assert ledger.main(["--gather", "--profile", "gpu"]) == 0
    assert ledger.read_rows(ledger.ledger_path("gpu")) == [ledger.Claim(**ROW)]
    assert not ledger.ledger_path("cpu").exists() and doc.read_text() == before  # no gpu block: the docs untouched
    origin = ledger.read_provenance(ledger.ledger_path("gpu"))["05"]
    assert origin["profile"] == "gpu" and origin["model"] == profiles.get("gpu").model_name
    assert origin["machine"]["device"].startswith("cpu (")  # a GPU's name where one computed it
    # with a gpu block in docs/claims.md, that block (and only it) is rewritten
    doc.write_text(before + f"\n{ledger.GPU_BEGIN}\nstale\n{ledger.GPU_END}\n")
    ledger.gather("gpu")
    text = doc.read_text()
    assert "stale" not in text and "1 rows at the gpu scale, on cpu (" in text and "ours (gpu profile)" in text
    assert f"{ledger.CLAIMS_BEGIN}\nold\n{ledger.CLAIMS_END}" in text  # the cpu block as it was
    assert (tmp_path / "README.md").read_text() == readme  # and the README's headline, the cpu ledger's


def test_the_gpu_ledger_refuses_random_weights_and_smoke_runs_in_one_line_each(git_workbook, capsys):
    git_workbook(docs=True, synthetic=True)
    random_gpu = profiles.get("gpu").replace(model_name="random:smollm2-360m")
    assert ledger.record([ledger.Claim(**ROW)], notebook="05", profile=random_gpu) is None  # a notebook on random
    out = capsys.readouterr().out  # weights finishes, says why, and writes nothing
    assert "[claims] not recorded" in out and "random:smollm2-360m" in out and "unset WORKBOOK_MODEL" in out
    assert not ledger.claims_dir("gpu").exists()
    target = _record_gpu()  # planted: a gpu claims file whose provenance names random weights
    payload = json.loads(target.read_text())
    payload["provenance"]["model"] = "random:smollm2-360m"
    target.write_text(json.dumps(payload))
    with pytest.raises(ledger.ProvenanceError) as refused:
        ledger.gather("gpu")
    assert "random weights (random:smollm2-360m)" in str(refused.value) and "\n" not in str(refused.value)
    smoke = ledger.record([ledger.Claim(**ROW)], notebook="05", profile=profiles.get("smoke"))
    target.write_text(smoke.read_text().replace('"profile": "smoke",', '"profile": "gpu",', 1))  # filed under gpu
    with pytest.raises(ledger.ProvenanceError, match="computed under the 'smoke' profile, not 'gpu'"):
        ledger.gather("gpu")
    with pytest.raises(ledger.ProvenanceError, match="smoke runs .* never enter a ledger"):
        ledger.gather("smoke")
    with pytest.raises(ValueError, match="profile='paper'"):
        ledger.gather("paper")
    assert not ledger.ledger_path("gpu").exists() and not ledger.ledger_path("cpu").exists()  # nothing written
