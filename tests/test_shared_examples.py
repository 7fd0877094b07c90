"""Every study seed scores the same test examples (notebooks 03-07 at the smoke profile, data drawn without training):
the seeds' interval nests one set of examples (``metrics.seeds_with_examples_interval``), and a larger test split finds
the same trained runs."""
import dataclasses

import pytest

from helpers import models, profiles, store
from helpers.papers.magnet import experiment_table1, experiment_table4
from helpers.papers.openltg import experiment as openltg
from helpers.papers.sequence_repetition import experiment as sr_experiment
from helpers.papers.sequence_repetition import experiment_data as sr_data
from helpers.papers.sequence_repetition.mechanism import Strategy


def _profiles():
    smoke = profiles.get("smoke")
    return smoke.replace(seed=0), smoke.replace(seed=1)


@pytest.fixture(scope="module")
def tokenizer():
    return models.load_tokenizer(profiles.get("smoke").model_name)


def test_notebook_03_probes_and_infills_the_same_examples_under_every_study_seed(tokenizer):
    drawn = []
    for profile in _profiles():
        settings = profiles.settings_for("magnet", profile)
        train, test = experiment_table1.probe_sentences(settings, profile.corpus)
        passages, sets = experiment_table4.infilling_sets(profile, settings, tokenizer)
        drawn.append(([s.words for s in test], [s.words for s in train], passages,
                      {name: [(example.ids.tolist(), example.spans) for example in examples]
                       for name, examples in sets.items()}))
    assert drawn[0] == drawn[1] and drawn[0][0] and all(drawn[0][3].values())


def test_notebook_04_scores_the_same_test_sentences_and_a_larger_test_split_keeps_the_run(tokenizer):
    seed0, seed1 = _profiles()
    tagged = {profile.seed: sr_data.load_tagging_data(tokenizer, "chunks", profiles.settings_for("sequence_repetition", profile),
                                                      profile.corpus, seed=profile.seed, progress=False)
              for profile in (seed0, seed1)}
    ids = lambda split: [sentence.input_ids for sentence in split]
    assert ids(tagged[0].test) == ids(tagged[1].test) and tagged[0].test
    assert ids(tagged[0].train) != ids(tagged[1].train)  # training data still follow the study seed
    settings = profiles.settings_for("sequence_repetition", seed0)
    larger_settings = dataclasses.replace(settings, test_sentences=settings.test_sentences + 4)
    larger = sr_data.load_tagging_data(tokenizer, "chunks", larger_settings, seed0.corpus, seed=0, progress=False)
    assert len(larger.test) > len(tagged[0].test) and larger.test_fingerprint() != tagged[0].test_fingerprint()
    strategy = Strategy("sr", r=1)
    folder = lambda data, chosen: store.run_dir_for("04_chunks", sr_experiment.TaggerRunKey(
        chosen.training, strategy, settings.seeds[0], seed0.model_name, data.fingerprint(), models.weight_dtype_name()))
    assert folder(larger, larger_settings) == folder(tagged[0], settings)


def test_notebooks_05_and_06_draw_their_prompts_and_phrases_apart_from_the_study_seed():
    seed0, seed1 = _profiles()
    prompts = [openltg.story_prompts(profiles.settings_for("openltg", p).prompts, p.corpus, "test",
                                     profiles.settings_for("openltg", p).num_prompts) for p in (seed0, seed1)]
    assert prompts[0] == prompts[1] and prompts[0]
    emat = [profiles.settings_for("emat", p) for p in (seed0, seed1)]
    assert emat[0].training.seed != emat[1].training.seed  # the heads follow the study seed ...
    assert store.fingerprint(emat[0].data) == store.fingerprint(emat[1].data)  # ... the phrase data (its cache key) do not


def test_notebook_07_decodes_and_judges_the_same_prompts_and_human_continuations_under_every_study_seed():
    """Notebook 07's prompts and their human continuations (MAUVE's reference) are drawn apart from the study seed,
    which changes only the samplers' and the fine-tune's randomness."""
    from helpers.papers import diffusion

    seed0, seed1 = _profiles()
    settings = [profiles.settings_for("diffusion", p) for p in (seed0, seed1)]
    assert settings[0].seed != settings[1].seed  # the samplers' draws follow the study seed ...
    examples = [diffusion.story_prompts("corpus", p.corpus, "test", s.num_prompts) for p, s in zip((seed0, seed1), settings)]
    assert examples[0] == examples[1] and examples[0]  # ... the prompts and human continuations do not
