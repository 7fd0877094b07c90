"""Seeds: one fold mixes integers into a seed (two multipliers in use), one generator draws from it, and a seed
study's seed reaches each paper's settings through the one declaration its settings module makes."""
import dataclasses

import pytest
import torch

from helpers import distributed, profiles, seeds


def test_the_fold_mixes_parts_in_order_and_one_part_is_itself():
    assert seeds.mixed_seed(7) == 7 and seeds.mixed_seed() == 0
    assert seeds.mixed_seed(7, 3) == 7 * 1_000_003 + 3 != seeds.mixed_seed(3, 7)
    assert seeds.mixed_seed(2**62, 2**62) == (2**62 * 1_000_003 + 2**62) % (2**63 - 1)
    # sequence repetition's epoch orders: the same fold with its own multiplier, seed · 100003 + epoch
    assert seeds.mixed_seed(1005, 3, multiplier=seeds.EPOCH_ORDER_MULTIPLIER) == 1005 * 100_003 + 3
    with pytest.raises(ValueError, match=r"parts\[1\]=-1"):
        seeds.mixed_seed(3, -1)


def test_the_training_micro_batch_seed_is_the_fold_from_its_salt():
    for parts in [(0, 0, 0), (3, 17, 2), (2005, 99, 1)]:
        assert distributed.micro_batch_seed(*parts) == seeds.mixed_seed(*parts, start=distributed.MICRO_BATCH_SALT)


def test_a_seeded_generator_draws_what_torch_draws_from_the_mixed_seed():
    one = torch.rand(5, generator=seeds.seeded_generator(42, device=torch.device("cpu")))
    assert torch.equal(one, torch.rand(5, generator=torch.Generator().manual_seed(42)))
    mixed = torch.rand(5, generator=seeds.seeded_generator(4, 2, 1))
    assert torch.equal(mixed, torch.rand(5, generator=torch.Generator().manual_seed(seeds.mixed_seed(4, 2, 1))))
    from helpers import objectives

    assert objectives.seeded_generator is seeds.seeded_generator  # the masked-LM batches draw from the same one


def test_draw_zero_samples_from_the_seed_and_each_draw_a_stride_apart():
    assert seeds.draw_seeds(3, 1) == [3] and seeds.draw_seeds(3, 3) == [3, 1_000_006, 2_000_009]
    from helpers.papers.diffusion import settings as diffusion
    from helpers.papers.openltg import settings as openltg

    for table in (openltg.SETTINGS, diffusion.SETTINGS):
        for chosen in table.values():
            assert chosen.draw_seeds() == [chosen.seed + 1_000_003 * draw for draw in range(chosen.draws)]


@dataclasses.dataclass(frozen=True)
class _Inner:
    seed: int = 0
    kept: int = 0


@dataclasses.dataclass(frozen=True)
class _Outer:
    seeds: tuple = (5, 29)
    inner: _Inner = _Inner()
    other: int = 7


def test_a_study_seed_moves_the_named_seeds_by_its_stride_and_nothing_else():
    plain = _Outer()
    moved = seeds.StudySeed(("seeds", "inner.seed"), stride=1000).apply(plain, 2)
    assert moved == _Outer(seeds=(2005, 2029), inner=_Inner(seed=2000))
    assert seeds.StudySeed(("seeds",)).apply(plain, 3).seeds == (8, 32)
    assert seeds.StudySeed(("seeds",)).apply(plain, 0) is plain  # no study: the table's own object
    assert seeds.StudySeed().apply(plain, 5) is plain  # settings that hold no seed of the study
    with pytest.raises(ValueError, match="seed=-1"):
        seeds.StudySeed(("seeds",)).apply(plain, -1)


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_each_notebook_gets_the_seeds_it_always_got(seed):
    """The seeds of every paper's settings under study seed ``seed``, written out: notebook 04's taggers move by
    1000 a seed, notebook 06's heads and notebook 07's samplers and fine-tune take the seed itself, notebook 05's
    sampling seed stays 0, and the rest hold none (they read ``profile.seed``)."""
    cpu = profiles.get("cpu").replace(seed=seed)
    sr = profiles.settings_for("sequence_repetition", cpu, 1)
    assert (sr.seeds, sr.exit_seeds) == ((5 + 1000 * seed,), (5 + 1000 * seed,))
    emat = profiles.settings_for("emat", cpu, 1)
    assert (emat.training.seed, emat.data.seed) == (seed, 0)
    assert profiles.settings_for("diffusion", cpu, 1).seed == seed
    assert profiles.settings_for("openltg", cpu, 1).seed == 0
    for paper in ("lecture", "mntp", "magnet"):
        assert profiles.settings_for(paper, cpu, 1) is profiles.settings_for(paper, profiles.get("cpu"), 1)


def test_a_settings_module_without_its_study_seed_declaration_is_refused(monkeypatch):
    from helpers.papers.openltg import settings

    monkeypatch.delattr(settings, "STUDY_SEED")
    with pytest.raises(ValueError, match="STUDY_SEED=None must be a helpers.seeds.StudySeed"):
        profiles.settings_for("openltg", profiles.get("cpu"))
