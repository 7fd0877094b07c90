"""`python -m helpers.train`: one process, two processes under `accelerate launch` (gloo, on CPUs), an interrupted
two-process run resumed, the notebook finding the command's run, and a seed study in parallel.

Each command here is written once, as docs/scaling.md gives it (a test checks the page holds it); the tests run it
with this interpreter and a free rendezvous port. Every run is notebook 02's smoke MNTP run (tiny random Llama, 4
steps, 2 rows x 32 tokens per step) in its own workbook root.

**The tolerance.** With ``--micro-batch 1`` each step has two micro-batches: one process computes both, two processes
one each. The batches and the dropout draws are functions of (seed, step, micro-batch) and the gradients are summed
exactly once per step, so the two runs differ only in floating-point rounding: each process runs its matrix products
on one thread (accelerate sets OMP_NUM_THREADS=1) where the single process uses two, which changes the order of
their float32 sums. Measured: at most ~1e-7 relative on the losses. We allow 1e-5 relative (100 times that), far
below what another split gives: the same rows as one micro-batch instead of two (other dropout draws, another mean)
move the step-2 loss by 6e-3 relative (10.80 against 10.86). The adapter's weights
are compared tensor by tensor, by the norm of their difference: AdamW divides each gradient by its own running scale,
so where an element's gradient is near zero a rounding difference becomes a visible share of that element's step
(measured: a few elements of 1024 moved by up to 2% of one step, lr; up to 1e-4 of a LoRA B matrix's norm). We allow
1e-3 of each tensor's norm; the same rows as one micro-batch give LoRA B matrices that differ by more than their
own norm (measured: at least 1.2 times it).
"""
from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from helpers import mntp_adapter, mntp_recipe, profiles, training

ROOT = Path(__file__).resolve().parents[1]
ONE_PROCESS = "python -m helpers.train mntp --profile smoke --micro-batch 1"
TWO_PROCESSES = ("ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 "
                 "-m helpers.train mntp --profile smoke --micro-batch 1")
INTERRUPTED = TWO_PROCESSES + " --stop-after 2"
NOTEBOOK_RUNS = "ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 -m helpers.train mntp mtp --profile smoke"
SEED_STUDY = "python -m helpers.train mntp --profile smoke --seeds 0 1 --parallel 2"
PAPER_RUNS = "ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 -m helpers.train magnet emat --profile smoke"
RELATIVE_TOLERANCE = 1e-5  # on every logged number
ADAPTER_TOLERANCE = 1e-3  # on each adapter tensor, relative to its norm
# the smoke recipe's 4 steps: the run keeps the adapter at the length it was asked for (training.kept_lengths)
RUN_FILES = {".lock", "settings.json", "metrics.jsonl", "checkpoint/state.pt", "checkpoint/adapter-at-4.pt"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_command(line: str, root: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run a docs/scaling.md command line in the workbook ``root``: ``python`` is this interpreter, ``accelerate launch`` its
    module, with a free ``--main_process_port`` so that runs beside each other do not collide."""
    words = shlex.split(line)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKBOOK_ROOT": str(root), "WORKBOOK_PROFILE": "smoke"}
    env.pop("WORKBOOK_CACHE", None)
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    if words[:2] == ["accelerate", "launch"]:
        words = [sys.executable, "-m", "accelerate.commands.launch", "--main_process_port", str(_free_port()),
                 "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", *words[2:]]
    elif words[0] == "python":
        words = [sys.executable, *words[1:]]
    result = subprocess.run(words, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{line} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def new_root(path: Path) -> Path:
    """A workbook root of its own (runs/, adapters) that reads the checkout's model and corpus."""
    cache = path / "data" / "cache"
    cache.mkdir(parents=True)
    for entry in (ROOT / "data" / "cache").iterdir():
        if entry.name != "adapters":
            (cache / entry.name).symlink_to(entry.resolve())
    return path


def only_run(root: Path, prefix: str = "02_mntp_smoke_") -> Path:
    runs = sorted((root / "runs").glob(prefix + "*"))
    assert len(runs) == 1, runs
    return runs[0]


def files_of(run: Path) -> set[str]:
    return {str(path.relative_to(run)) for path in run.rglob("*") if path.is_file()}


def adapter_weights(root: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    adapters = sorted((root / "data" / "cache" / "adapters").iterdir())
    assert len(adapters) == 1, adapters
    return load_file(adapters[0] / "adapter_model.safetensors")


def assert_same_run(records: list[dict], reference: list[dict]) -> None:
    """The same records, step by step (each step once), numbers within the tolerance."""
    assert [sorted(record) for record in records] == [sorted(record) for record in reference]
    assert [record["step"] for record in records] == [record["step"] for record in reference]
    for record, expected in zip(records, reference):
        for name, value in expected.items():
            assert record[name] == pytest.approx(value, rel=RELATIVE_TOLERANCE), (record, expected)


def assert_same_adapter(weights: dict[str, torch.Tensor], reference: dict) -> None:
    """The same adapter: each tensor within 1e-3 of its norm (see the module's docstring)."""
    assert weights.keys() == reference["adapter"].keys()
    for name, tensor in weights.items():
        expected = reference["adapter"][name]
        assert float((tensor - expected).norm()) <= ADAPTER_TOLERANCE * float(expected.norm()), name


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The one-process run: its records and adapter."""
    root = new_root(tmp_path_factory.mktemp("one"))
    run_command(ONE_PROCESS, root)
    run = only_run(root)
    return {"name": run.name, "records": training.read_metrics(run), "adapter": adapter_weights(root),
            "settings": json.loads((run / "settings.json").read_text())}


def test_two_processes_train_what_one_process_trains_and_only_the_main_one_writes(tmp_path, reference):
    root = new_root(tmp_path)
    run_command(TWO_PROCESSES, root)
    run = only_run(root)
    assert run.name == reference["name"]  # the number of processes is not part of the run key
    assert files_of(run) == RUN_FILES  # one settings.json, one checkpoint, no second writer's scratch files
    assert json.loads((run / "settings.json").read_text()) == reference["settings"]
    records = training.read_metrics(run)
    assert [r["step"] for r in records if "loss" in r] == [1, 2, 3, 4]  # each step logged once, not once per process
    assert [r["step"] for r in records if "eval_loss" in r] == [0, 2, 4]
    assert_same_run(records, reference["records"])
    weights = adapter_weights(root)
    assert_same_adapter(weights, reference)
    assert any(tensor.abs().max() > 0 for name, tensor in weights.items() if "lora_B" in name)  # it did train


def test_an_interrupted_two_process_run_resumes_with_two_processes_to_the_same_end(tmp_path, reference):
    root = new_root(tmp_path)
    run_command(INTERRUPTED, root)
    run = only_run(root)
    assert max(r["step"] for r in training.read_metrics(run)) == 2
    assert not (root / "data" / "cache" / "adapters").exists()  # an unfinished run saves no adapter
    # as a run killed after logging step 3, before its next checkpoint, leaves it: a record past the checkpoint
    # and a torn line
    with open(run / training.METRICS_FILE, "a") as handle:
        handle.write(json.dumps({"step": 3, "loss": 0.0}) + '\n{"step": 4, "lo')
    run_command(TWO_PROCESSES, root)
    assert files_of(run) == RUN_FILES
    assert_same_run(training.read_metrics(run), reference["records"])
    assert_same_adapter(adapter_weights(root), reference)


def test_the_notebook_finds_the_runs_the_command_trained_and_trains_no_step(tmp_path, monkeypatch, capsys):
    from helpers import memory, models
    from helpers.papers.mntp import experiment as mntp_experiment

    root = new_root(tmp_path)
    run_command(NOTEBOOK_RUNS, root)
    runs = {objective: only_run(root, f"02_{objective}_smoke_") for objective in ("mntp", "mtp")}
    before = {objective: ((run / "metrics.jsonl").read_bytes(), (run / "metrics.jsonl").stat().st_mtime_ns,
                          (run / "checkpoint" / "state.pt").stat().st_mtime_ns) for objective, run in runs.items()}
    monkeypatch.setenv("WORKBOOK_ROOT", str(root))
    monkeypatch.delenv("WORKBOOK_CACHE", raising=False)
    monkeypatch.setenv("WORKBOOK_PROFILE", "smoke")
    # notebook 02's cells, as they stand
    cfg = profiles.current()
    model, tokenizer = models.load_model(cfg.model_name)
    recipe = mntp_recipe.masked_lm_recipe(cfg)
    mlm_data = mntp_experiment.load_data(tokenizer, cfg, recipe, mask_token="underscore")
    fitted = memory.fit_training("02", cfg, recipe)
    comparison = mntp_experiment.train_both(cfg, tokenizer, mlm_data, recipe=fitted, mask_token="underscore")
    assert capsys.readouterr().out.count("0 new steps") == 2
    for objective, run in runs.items():
        metrics = run / "metrics.jsonl"
        assert (metrics.read_bytes(), metrics.stat().st_mtime_ns,
                (run / "checkpoint" / "state.pt").stat().st_mtime_ns) == before[objective]  # not a step more
        assert comparison.runs[objective.upper()] == training.read_metrics(run)
    assert comparison.mntp_adapter_path.parent == root / "data" / "cache" / "adapters"
    assert mntp_adapter.mntp_adapter(cfg)[0] == comparison.mntp_adapter_path  # where notebooks 03, 05 and 06 look


def test_a_seed_study_runs_one_process_per_seed_into_its_own_folder(tmp_path):
    root = new_root(tmp_path)
    started = time.perf_counter()
    output = run_command(SEED_STUDY, root).stdout
    assert "[seed 0] done" in output and "[seed 1] done" in output, output
    runs = sorted((root / "runs").glob("02_mntp_smoke_*"))
    seeds = {json.loads((run / "settings.json").read_text())["settings"]["config"]["seed"]: run for run in runs}
    assert sorted(seeds) == [0, 1] and len(runs) == 2  # the seed is part of the key: a folder each
    assert seeds[0].name == mntp_adapter.notebook02_mntp_run(profiles.get("smoke")).name  # seed 0 is the notebook's run
    for run in runs:
        assert [r["step"] for r in training.read_metrics(run) if "loss" in r] == [1, 2, 3, 4]
    assert len(list((root / "data" / "cache" / "adapters").iterdir())) == 2
    first = [r["loss"] for r in training.read_metrics(seeds[0]) if "loss" in r]
    assert first != [r["loss"] for r in training.read_metrics(seeds[1]) if "loss" in r]  # other batches, other draws
    print(f"two seeds in parallel: {time.perf_counter() - started:.1f}s")


def test_the_docs_give_the_commands_these_tests_run():
    page = (ROOT / "docs" / "scaling.md").read_text()
    for line in (ONE_PROCESS, TWO_PROCESSES, INTERRUPTED, NOTEBOOK_RUNS, SEED_STUDY, PAPER_RUNS):
        assert line in page, line


def test_the_registry_imports_a_paper_package_only_when_its_training_runs():
    probe = subprocess.run([sys.executable, "-c", "import sys, helpers.train as t; "
                            "print(sorted(t.TRAINERS), [m for m in sys.modules if m.startswith('helpers.papers.')])"],
                           cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    assert probe.stdout.strip() == "['emat', 'magnet', 'mntp', 'mtp', 'sr'] []", probe.stderr


# --- notebooks 03, 04 and 06: the command trains what the notebook trains, and the notebook trains no step more


@pytest.fixture
def smoke_root(tmp_path, monkeypatch):
    """A workbook root of its own under the smoke profile, in this process."""
    root = new_root(tmp_path)
    monkeypatch.setenv("WORKBOOK_ROOT", str(root))
    monkeypatch.delenv("WORKBOOK_CACHE", raising=False)
    monkeypatch.setenv("WORKBOOK_PROFILE", "smoke")
    return root


def _snapshot(folders) -> dict:
    """Each run's metrics, byte for byte, and when they were last written."""
    return {folder: ((folder / "metrics.jsonl").read_bytes(), (folder / "metrics.jsonl").stat().st_mtime_ns)
            for folder in folders}


def _train(name: str, **options) -> list[Path]:
    from helpers import train

    return train.train([name], "smoke", progress=False, **options)


def test_magnet_the_notebook_finds_the_commands_runs_and_trains_no_step(smoke_root):
    from helpers import memory, models
    from helpers.papers.magnet import experiment

    folders = _train("magnet")
    assert [folder.name.rsplit("_", 1)[0] for folder in folders] == ["03_magnet_smoke", "03_llm2vec_simcse_smoke"]
    before = _snapshot(folders)
    # notebook 03's cells, as they stand
    cfg = profiles.current()
    settings = profiles.settings_for("magnet")
    base, tokenizer = models.load_model(cfg.model_name)
    train_data = experiment.joint_data(cfg, settings, tokenizer)
    curve_prefixes, evaluate = experiment.joint_evaluation(cfg, settings, tokenizer)
    settings = memory.fit_training("03", cfg, settings)
    magnet_run = experiment.train_magnet(base, tokenizer, cfg, settings, train_data, evaluate=evaluate)
    llm2vec_run = experiment.train_llm2vec_style(tokenizer, cfg, settings, train_data, evaluate=evaluate)
    assert [magnet_run.path, llm2vec_run.path] == folders
    assert _snapshot(folders) == before  # not a step more
    evaluations = [record for record in magnet_run.records if any(key.startswith("rep") for key in record)]
    assert evaluations, magnet_run.records  # Fig. 6's curve: the command trained with the notebook's evaluation
    assert all(experiment.HELDOUT_KEY in record for record in evaluations)  # and the budget check's held-out curve
    assert (smoke_root / "data" / "cache" / "adapters").is_dir()


def test_magnet_stop_after_leaves_an_unfinished_run_that_the_command_finishes(smoke_root):
    from helpers import training as T

    first = _train("magnet", stop_after=1)
    assert max(record["step"] for record in T.read_metrics(first[0]) if "loss" in record) == 1
    assert not any(path.name.startswith("magnet") for path in (smoke_root / "data" / "cache" / "adapters").glob("*"))
    second = _train("magnet")
    assert second == first
    steps = [record["step"] for record in T.read_metrics(first[0]) if "loss" in record]
    assert steps == sorted(set(steps)) and steps[-1] > 1  # resumed, each step once
    assert any(path.name.startswith("magnet") for path in (smoke_root / "data" / "cache" / "adapters").glob("*"))


def test_sr_the_notebook_finds_the_commands_taggers_and_a_seed_gets_its_own(smoke_root):
    from helpers import memory, models
    from helpers.papers import sequence_repetition as sr

    folders = _train("sr")
    before = _snapshot(folders)
    cfg = profiles.current()
    settings = profiles.settings_for("sequence_repetition")
    model, tokenizer = models.load_model(cfg.model_name, attn_implementation="eager")
    taggings = {task: sr.experiment_data.load_tagging_data(tokenizer, task, settings, cfg.corpus, seed=cfg.seed)
                for task in settings.tasks}
    settings = memory.fit_training("04", cfg, settings)
    strategies = sr.experiment.main_strategies(settings)
    sr.experiment.run_experiments(taggings, strategies, settings.seeds, settings, model_name=cfg.model_name,
                                  run_prefix=sr.experiment.run_prefix(cfg))
    main_runs = len(settings.tasks) * len(strategies) * len(settings.seeds)
    assert _snapshot(folders) == before and len(folders) > main_runs  # the main and the early-exit taggers
    seeded = _train("sr", seed=7)
    assert all("_s7_" in folder.name for folder in seeded) and not set(seeded) & set(folders)


def test_emat_the_notebook_finds_the_commands_heads(smoke_root):
    from helpers import masked_lm
    from helpers.papers.emat import experiment_data, experiment_training

    folders = _train("emat")
    assert [folder.name.rsplit("_", 1)[0] for folder in folders][:2] == ["06_emat", "06_emat_new_rows"]
    before = _snapshot(folders)
    cfg = profiles.current()
    settings = profiles.settings_for("emat")
    mlm = masked_lm.load_masked_lm(cfg, settings.masked_lm or "mntp", context_tokens=settings.context_tokens)
    dataset = experiment_data.build_dataset(cfg.corpus, settings.data, mlm.tokenizer, mlm.name)
    encoded = experiment_data.encode_splits(mlm, dataset)
    features = experiment_data.cached_features(mlm, dataset, encoded, settings.feature_batch_size)
    _, records = experiment_training.train_emat(mlm, dataset, encoded, features, settings.training)
    experiment_training.train_gru(mlm, dataset, encoded, features, settings.training)
    assert _snapshot(folders) == before
    assert records == training.read_metrics(folders[0])


def test_an_option_a_trainer_does_not_take_is_refused_by_name(smoke_root):
    from helpers import train

    with pytest.raises(ValueError, match="stop_after=2: .*leave --stop-after out"):
        train.train(["emat"], "smoke", stop_after=2, progress=False)
    with pytest.raises(ValueError, match="micro_batch=1: .*leave --micro-batch out"):
        train.train(["sr"], "smoke", micro_batch=1, progress=False)
    with pytest.raises(ValueError, match="names=.*expected one or more of"):
        train.train(["bert"], "smoke")


def test_magnet_and_emat_under_two_processes_log_each_step_once(tmp_path):
    root = new_root(tmp_path)
    output = run_command(PAPER_RUNS, root).stdout
    heads = sorted((root / "runs").glob("06_*"))
    assert [run.name.rsplit("_", 1)[0] for run in heads] == ["06_emat", "06_emat_new_rows", "06_gru", "06_gru_lm",
                                                               "06_length"]
    runs = [only_run(root, "03_magnet_smoke_"), only_run(root, "03_llm2vec_simcse_smoke_"), *heads]
    for run in runs:
        steps = [record["step"] for record in training.read_metrics(run) if "loss" in record]
        assert steps == list(range(1, len(steps) + 1)) and steps, (run, steps)  # each step once, not once per process
        assert f"{run}: step {steps[-1]}, loss" in output and f"(lengths finished: [{steps[-1]}])" in output
    components = [json.loads(line) for line in (runs[0] / "components.jsonl").read_text().splitlines()]
    pairs = [(record["step"], record["micro"]) for record in components]
    assert len(pairs) == len(set(pairs))  # each micro-batch's Eq. 5 parts once, by whichever process computed it


# --- the command's run key follows WORKBOOK_DTYPE as the notebooks' does; --stop-after below 1 is refused


def test_the_command_keys_its_runs_by_workbook_dtype_like_the_notebooks(smoke_root, monkeypatch):
    from helpers import train
    from helpers.papers.mntp import experiment

    seen = {}

    def fake(profile, seed, **options):  # records the profile the command trains under, trains nothing
        seen[profile.dtype] = profile
        return []

    monkeypatch.setitem(train.TRAINERS, "mntp", fake)
    folders = {}
    for dtype in ("float32", "bfloat16"):
        monkeypatch.setenv(profiles.DTYPE_VAR, dtype)
        train.train(["mntp"], "smoke", progress=False)
        assert seen[dtype] == profiles.current()  # the profile a notebook under the same variables reads
        key = mntp_adapter.masked_lm_run_key(seen[dtype], "mntp")
        assert key["dtype"] == dtype
        folders[dtype] = experiment.run_folder(seen[dtype], "mntp", key)
        assert folders[dtype] == mntp_adapter.notebook02_mntp_run(profiles.current())  # the notebook's own folder
    assert folders["float32"] != folders["bfloat16"]  # a bf16 run never trains into the float32 run's folder


@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_stop_after_below_one_is_refused_naming_the_option(value, capsys):
    from helpers import train

    with pytest.raises(SystemExit) as stopped:
        train.parse_arguments(["mntp", "--profile", "smoke", "--stop-after", value])
    assert stopped.value.code == 2
    assert f"argument --stop-after: {value!r} must be a whole number >= 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"stop_after=0 must be a whole number >= 1"):
        train.train(["mntp"], "smoke", stop_after=0)
