"""helpers.profiles: WORKBOOK_PROFILE picks the profile, WORKBOOK_SEED (the seed study) its seed, WORKBOOK_DTYPE its
weights' dtype, nothing else."""
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
    assert seeded.for_seed(0) == plain
    # notebook 04: every training seed moves by the stride, so no two study seeds share a training seed
    from helpers.papers.sequence_repetition.settings import STUDY_SEED_STRIDE

    plain_sr = profiles.settings_for("sequence_repetition", profiles.get("cpu"))
    seeded_sr = profiles.settings_for("sequence_repetition")
    assert seeded_sr.seeds == tuple(s + 2 * STUDY_SEED_STRIDE for s in plain_sr.seeds)
    assert seeded_sr.exit_seeds == tuple(s + 2 * STUDY_SEED_STRIDE for s in plain_sr.exit_seeds)
    assert seeded_sr.for_seed(0) == seeded_sr and plain_sr.for_seed(0) == plain_sr
    assert (seeded_sr.train_sentences, seeded_sr.test_sentences) == (plain_sr.train_sentences, plain_sr.test_sentences)
    monkeypatch.delenv(profiles.SEED_VAR)
    assert profiles.settings_for("sequence_repetition") == plain_sr


def test_the_dtype_override_changes_only_the_dtype_and_every_run_key_that_holds_it(monkeypatch):
    from helpers import device, models, training

    monkeypatch.setenv(profiles.ENV_VAR, "cpu")
    monkeypatch.delenv(profiles.SEED_VAR, raising=False)
    monkeypatch.setenv(profiles.DTYPE_VAR, "float32")
    plain = profiles.current()
    assert models.weight_dtype_name(plain) == "float32"
    monkeypatch.setenv(profiles.DTYPE_VAR, " BFloat16 ")
    bf16 = profiles.current()
    assert bf16.dtype == "bfloat16" and bf16.replace(dtype="float32") == plain
    assert models.weight_dtype_name(bf16) == "bfloat16"
    assert training.masked_lm_run_key(bf16, "mntp") != training.masked_lm_run_key(plain, "mntp")
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
    assert training.masked_lm_run_key(profiles.current(), "mntp") == training.masked_lm_run_key(plain, "mntp")
    monkeypatch.setattr(device, "cpu_flags", lambda cpuinfo=None: frozenset({"amx_bf16"}))
    assert models.weight_dtype_name() == "bfloat16"
    monkeypatch.delenv(profiles.DTYPE_VAR)  # the cpu profile's own dtype is the device's choice
    assert models.weight_dtype_name() == "bfloat16"
    assert training.masked_lm_run_key(profiles.current(), "mntp") != training.masked_lm_run_key(plain, "mntp")


@pytest.mark.parametrize("raw", ["half", "fp32", "int8"])
def test_a_bad_dtype_override_is_refused_by_name(monkeypatch, raw):
    monkeypatch.setenv(profiles.DTYPE_VAR, raw)
    with pytest.raises(ValueError, match=f"WORKBOOK_DTYPE={raw!r} is not one of auto, float32, bfloat16, float16"):
        profiles.current()
