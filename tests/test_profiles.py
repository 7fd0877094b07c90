"""helpers.profiles: WORKBOOK_PROFILE picks the profile, WORKBOOK_SEED (the seed study) its seed, WORKBOOK_DTYPE its
weights' dtype, nothing else."""
import dataclasses

import pytest

from helpers import profiles, store


def test_the_study_seed_changes_only_the_profiles_seed_and_unset_changes_nothing(monkeypatch):
    monkeypatch.setenv(profiles.ENV_VAR, "cpu")
    monkeypatch.delenv(profiles.SEED_VAR, raising=False)
    plain = profiles.current()
    assert plain == profiles.get("cpu") and store.fingerprint(plain) == store.fingerprint(profiles.get("cpu"))
    monkeypatch.setenv(profiles.SEED_VAR, "2")
    seeded = profiles.current()
    assert seeded.seed == 2 and seeded.replace(seed=0) == plain
    assert store.fingerprint(seeded) != store.fingerprint(plain)  # every key that holds the profile moves with it
    monkeypatch.setenv(profiles.SEED_VAR, " ")
    assert profiles.current() == plain


@pytest.mark.parametrize("raw", ["a", "-1", "1.5"])
def test_a_bad_study_seed_is_refused_by_name(monkeypatch, raw):
    monkeypatch.setenv(profiles.SEED_VAR, raw)
    with pytest.raises(ValueError, match=f"WORKBOOK_SEED={raw!r} must be a whole number"):
        profiles.current()


def test_settings_that_follow_the_seed_get_the_study_seed_and_others_stay(monkeypatch):
    monkeypatch.setenv(profiles.ENV_VAR, "cpu")
    monkeypatch.delenv(profiles.SEED_VAR, raising=False)
    plain = profiles.settings_for("emat")
    assert plain.training.seed == 0 and plain == profiles.settings_for("emat", profiles.get("cpu"))
    monkeypatch.setenv(profiles.SEED_VAR, "2")
    seeded = profiles.settings_for("emat")
    # the heads' initial weights and batch order follow the seed; the phrase data (the test sentences) stay
    assert seeded.training.seed == 2 and seeded.data == plain.data
    # notebook 04: every training seed moves by the stride, so no two study seeds share a training seed
    from helpers.papers.sequence_repetition.settings import STUDY_SEED_STRIDE

    plain_sr = profiles.settings_for("sequence_repetition", profiles.get("cpu"))
    seeded_sr = profiles.settings_for("sequence_repetition")
    assert seeded_sr.seeds == tuple(s + 2 * STUDY_SEED_STRIDE for s in plain_sr.seeds)
    assert seeded_sr.exit_seeds == tuple(s + 2 * STUDY_SEED_STRIDE for s in plain_sr.exit_seeds)
    assert seeded_sr == dataclasses.replace(plain_sr, seeds=seeded_sr.seeds, exit_seeds=seeded_sr.exit_seeds)
    assert (seeded_sr.train_sentences, seeded_sr.test_sentences) == (plain_sr.train_sentences, plain_sr.test_sentences)
    monkeypatch.delenv(profiles.SEED_VAR)
    assert profiles.settings_for("sequence_repetition") == plain_sr


def test_the_dtype_override_changes_only_the_dtype_and_every_run_key_that_holds_it(monkeypatch):
    from helpers import device, mntp_adapter, models

    monkeypatch.setenv(profiles.ENV_VAR, "cpu")
    monkeypatch.delenv(profiles.SEED_VAR, raising=False)
    monkeypatch.setenv(profiles.DTYPE_VAR, "float32")
    plain = profiles.current()
    assert models.weight_dtype_name(plain) == "float32"
    monkeypatch.setenv(profiles.DTYPE_VAR, " BFloat16 ")
    bf16 = profiles.current()
    assert bf16.dtype == "bfloat16" and bf16.replace(dtype="float32") == plain
    assert models.weight_dtype_name(bf16) == "bfloat16"
    assert mntp_adapter.masked_lm_run_key(bf16, "mntp") != mntp_adapter.masked_lm_run_key(plain, "mntp")
    from helpers.papers.diffusion.experiment import FineTuneKey
    from helpers.papers.openltg.experiment import GenerationsKey
    from helpers.papers.magnet.experiment import run_key

    for key in (lambda profile: FineTuneKey.of(profile, profiles.settings_for("diffusion")),
                lambda profile: GenerationsKey.of(profiles.settings_for("openltg"), profile, seed=0),
                lambda profile: run_key(profile, profiles.settings_for("magnet"))):
        assert store.fingerprint(key(bf16)) != store.fingerprint(key(plain))
    # "auto" is the device's choice, and the key holds the dtype it resolves to on this machine
    monkeypatch.setenv(profiles.DTYPE_VAR, "auto")
    monkeypatch.setattr(device, "cpu_flags", lambda cpuinfo=None: frozenset({"avx2"}))
    assert models.weight_dtype_name() == "float32"
    assert mntp_adapter.masked_lm_run_key(profiles.current(), "mntp") == mntp_adapter.masked_lm_run_key(plain, "mntp")
    monkeypatch.setattr(device, "cpu_flags", lambda cpuinfo=None: frozenset({"amx_bf16"}))
    assert models.weight_dtype_name() == "bfloat16"
    monkeypatch.delenv(profiles.DTYPE_VAR)  # the cpu profile's own dtype is the device's choice
    assert models.weight_dtype_name() == "bfloat16"
    assert mntp_adapter.masked_lm_run_key(profiles.current(), "mntp") != mntp_adapter.masked_lm_run_key(plain, "mntp")


@pytest.mark.parametrize("raw", ["half", "fp32", "int8"])
def test_a_bad_dtype_override_is_refused_by_name(monkeypatch, raw):
    monkeypatch.setenv(profiles.DTYPE_VAR, raw)
    with pytest.raises(ValueError, match=f"WORKBOOK_DTYPE={raw!r} is not one of auto, float32, bfloat16, float16"):
        profiles.current()


def test_an_examples_look_multiplies_each_papers_test_examples_and_keeps_its_runs(monkeypatch):
    """WORKBOOK_EXAMPLES=2 doubles every size a paper names in EXAMPLE_SIZES (its test sentences, passages, prompts),
    leaves every other setting as it is, and changes no key of a trained run: MAGNET's run key (its settings without
    the evaluation-only sizes), DiffusionGemma's fine-tune key, and the training settings of notebooks 04 and 06."""
    import dataclasses
    import importlib

    from helpers.papers.diffusion import experiment as diffusion_experiment
    from helpers.papers.magnet import settings as magnet_settings

    cpu = profiles.get("cpu")
    for paper in ("magnet", "sequence_repetition", "openltg", "emat", "diffusion"):
        names = importlib.import_module(f"helpers.papers.{paper}.settings").EXAMPLE_SIZES
        base = profiles.settings_for(paper, cpu, 1)
        monkeypatch.setenv(profiles.EXAMPLES_VAR, "2")
        grown = profiles.settings_for(paper, cpu)
        monkeypatch.delenv(profiles.EXAMPLES_VAR)
        assert grown == profiles.settings_for(paper, cpu, 2)
        for field in dataclasses.fields(base):
            expected = getattr(base, field.name)
            if field.name in names and expected is not None:
                expected = 2 * expected
            assert getattr(grown, field.name) == expected, (paper, field.name)
        assert any(getattr(grown, name) != getattr(base, name) for name in names)
        if hasattr(base, "training"):
            assert grown.training == base.training  # a tagger's or a head's run key holds these
    assert set(magnet_settings.EXAMPLE_SIZES) <= set(magnet_settings.EVALUATION_ONLY)
    magnet = profiles.settings_for("magnet", cpu, 1)
    assert magnet_settings.evaluation_free(profiles.settings_for("magnet", cpu, 2)) == \
        magnet_settings.evaluation_free(magnet)
    assert diffusion_experiment.FineTuneKey.of(cpu, profiles.settings_for("diffusion", cpu, 2)) == \
        diffusion_experiment.FineTuneKey.of(cpu, profiles.settings_for("diffusion", cpu, 1))


@pytest.mark.parametrize("raw", ["0", "-2", "twice", "1.5"])
def test_a_bad_examples_scale_is_refused_by_name(monkeypatch, raw):
    monkeypatch.setenv(profiles.EXAMPLES_VAR, raw)
    with pytest.raises(ValueError, match=f"WORKBOOK_EXAMPLES={raw!r} must be a whole number >= 1"):
        profiles.settings_for("magnet", profiles.get("cpu"))


def test_a_paper_without_test_example_sizes_refuses_an_examples_look():
    with pytest.raises(ValueError, match="paper='lecture' names no test-example sizes"):
        profiles.settings_for("lecture", profiles.get("cpu"), 2)
    assert profiles.settings_for("lecture", profiles.get("cpu"), 1) == profiles.settings_for("lecture", profiles.get("cpu"))


def test_make_reproduces_prefix_trains_a_prefix_of_the_sr_taggers_and_leaves_other_papers_as_they_are(monkeypatch):
    """WORKBOOK_PREFIX=4 trains notebook 04's taggers 1/4 of their steps on the same cadence (a prefix of the full
    run: the tagger's run key holds everything else of TaggerTraining), at least one cadence at the smoke profile;
    papers without ``at_prefix`` keep their settings; a bad value is refused by name."""
    import dataclasses

    from helpers.papers.sequence_repetition import experiment as sr_experiment

    cpu = profiles.get("cpu")
    full = profiles.settings_for("sequence_repetition", cpu)
    monkeypatch.setenv(profiles.PREFIX_VAR, "4")
    prefix = profiles.settings_for("sequence_repetition", cpu)
    assert (prefix.training.steps, prefix.training.eval_every) == (full.training.steps // 4, full.training.eval_every)
    assert dataclasses.replace(prefix, training=full.training) == full
    assert dataclasses.replace(prefix.training, steps=full.training.steps) == full.training
    # the same run folder: a tagger's key holds its training without the length
    assert sr_experiment.run_folder_training(prefix.training) == sr_experiment.run_folder_training(full.training)
    smoke = profiles.settings_for("sequence_repetition", profiles.get("smoke"))
    assert smoke.training.steps == smoke.training.eval_every == 1
    assert profiles.has_prefix("sequence_repetition") and not profiles.has_prefix("magnet")
    assert profiles.settings_for("magnet", cpu) == profiles.settings_for("magnet", cpu, 1)
    monkeypatch.delenv(profiles.PREFIX_VAR)
    assert profiles.settings_for("sequence_repetition", cpu) == full
    for raw in ("0", "half"):
        monkeypatch.setenv(profiles.PREFIX_VAR, raw)
        with pytest.raises(ValueError, match=f"WORKBOOK_PREFIX={raw!r} must be a whole number >= 1"):
            profiles.settings_for("sequence_repetition", cpu)
