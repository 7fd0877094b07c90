"""Colab set-up: the install cell, the notebooks' GPU request, Drive, HF_TOKEN, the profile's
offline assets, and the gated-model message, all without Colab (its modules are stood in for)."""
import json
import os
import re
import shutil
import sys
import types
from pathlib import Path

import pytest

from helpers import assets, colab, models, profiles

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import pin_colab_commit  # noqa: E402


def setup_cell(path: Path) -> str:
    notebook = json.loads(path.read_text())
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code" and "google.colab" in "".join(c["source"])]
    assert len(cells) == 1, path.name
    return cells[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name[:2])
def test_each_notebook_asks_colab_for_a_gpu_and_installs_its_own_commit_loudly(path):
    metadata = json.loads(path.read_text())["metadata"]
    assert metadata["accelerator"] == "GPU" and metadata["colab"]["gpuType"] == "T4"
    cell = setup_cell(path)
    assert re.search(r'^WORKBOOK_COMMIT = "[0-9a-f]{40}"', cell, re.MULTILINE)
    assert "@{WORKBOOK_COMMIT}" in cell and '"-q"' not in cell and "check=True" not in cell
    assert "raise RuntimeError" in cell and "print(pip.stdout" in cell  # pip's errors are shown, then it stops
    assert f'colab.prepare("{path.name[:2]}", drive=DRIVE)' in cell


def test_pinning_rewrites_every_install_cell(tmp_path):
    for path in NOTEBOOKS:
        shutil.copy(path, tmp_path / path.name)
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert len(pin_colab_commit.pin(commit, tmp_path)) == len(NOTEBOOKS)
    for path in tmp_path.glob("*.ipynb"):
        assert f'WORKBOOK_COMMIT = "{commit}"' in setup_cell(path)
    with pytest.raises(ValueError, match="commit='main'"):
        pin_colab_commit.pin("main", tmp_path)


def test_assets_follow_the_profile_and_notebook():
    gpu, cpu = profiles.get("gpu"), profiles.get("cpu")
    assert assets.required_for(gpu, "02") == []
    assert assets.required_for(gpu, "03") == []  # no notebook reads Austen in the gpu profile
    assert assets.required_for(cpu, "02") == ["embedded model", "Austen corpus"]
    assert assets.required_for(profiles.get("smoke"), "05") == ["embedded model", "Austen corpus"]


@pytest.fixture
def fake_colab(monkeypatch, tmp_path):
    """google.colab with a Drive that mounts into tmp_path and a secret store holding HF_TOKEN."""
    mounted = []
    drive = types.SimpleNamespace(mount=lambda where: (mounted.append(where), (Path(where) / "MyDrive").mkdir(parents=True)))
    userdata = types.SimpleNamespace(get=lambda key: {"HF_TOKEN": "hf_secret"}[key])
    package = types.ModuleType("google.colab")
    package.drive, package.userdata = drive, userdata
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", package)
    monkeypatch.setattr(colab, "DRIVE_MOUNT", tmp_path / "drive")
    monkeypatch.setattr(colab, "DRIVE_ROOT", tmp_path / "drive" / "MyDrive" / "mlm-workbook")
    for name in ("WORKBOOK_ROOT", "HF_TOKEN"):  # prepare() sets them: set-then-delete makes monkeypatch restore them
        monkeypatch.setenv(name, "unset")
        monkeypatch.delenv(name)
    fetched = []
    monkeypatch.setattr(assets, "fetch_for", lambda profile, notebook: fetched.append((profile.name, notebook)) or {})
    return mounted, fetched


def test_prepare_puts_the_runs_on_drive_reads_the_token_and_fetches_the_assets(fake_colab, monkeypatch, tmp_path, capsys):
    mounted, fetched = fake_colab
    monkeypatch.setenv("WORKBOOK_PROFILE", "paper")
    done = colab.prepare("03", drive=True)
    assert mounted == [str(tmp_path / "drive")]
    assert done["root"] == str(tmp_path / "drive" / "MyDrive" / "mlm-workbook")
    from helpers import paths
    assert paths.runs_dir() == tmp_path / "drive" / "MyDrive" / "mlm-workbook" / "runs"  # resume reads from Drive
    assert done["hf_token"] and os.environ["HF_TOKEN"] == "hf_secret"
    assert fetched == [("paper", "03")]
    assert "no GPU" in capsys.readouterr().out


def test_without_the_secret_the_paper_profile_says_how_to_get_llama_2(fake_colab, monkeypatch, capsys):
    def no_secret(key):
        raise KeyError(key)  # google.colab.userdata raises SecretNotFoundError

    monkeypatch.setattr(sys.modules["google.colab"], "userdata", types.SimpleNamespace(get=no_secret))
    monkeypatch.setenv("WORKBOOK_PROFILE", "paper")
    assert colab.prepare("02")["hf_token"] is False
    out = capsys.readouterr().out
    assert "accept its licence at https://huggingface.co/meta-llama/Llama-2-7b-hf" in out and "HF_TOKEN" in out


def test_a_gated_model_fails_with_the_steps_that_fix_it(monkeypatch):
    def gated(name, **kwargs):
        raise OSError(f"You are trying to access a gated repo.\nMake sure to have access to it at https://huggingface.co/{name}.")

    monkeypatch.setattr(models.AutoTokenizer, "from_pretrained", gated)
    with pytest.raises(models.GatedModelError, match=r"accept its licence.*HF_TOKEN") as caught:
        models.load_model("meta-llama/Llama-2-7b-hf", device="cpu")
    assert isinstance(caught.value, models.MissingAssetError)

    def missing(name, **kwargs):
        raise OSError("not a valid model identifier")

    monkeypatch.setattr(models.AutoTokenizer, "from_pretrained", missing)
    with pytest.raises(OSError, match="not a valid model identifier"):
        models.load_model("nobody/nothing", device="cpu")
