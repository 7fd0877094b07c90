"""helpers.ledger.sequential: Pocock's boundary against the published constants and a simulated null; futility and the
allocation of the next look."""
import numpy as np
import pytest

from helpers.ledger import sequential


@pytest.mark.parametrize("looks, published", [((1, 2, 3), 2.289), ((1, 2, 3, 4, 5), 2.413), ((1, 2), 2.178)])
def test_pococks_constant_matches_the_published_table(looks, published):
    """Jennison & Turnbull (2000), Table 2.1 (Pocock 1977): alpha = 0.05, equally spaced looks."""
    assert sequential.pocock_critical_value(looks) == pytest.approx(published, abs=2e-3)


def test_the_plans_boundary_keeps_the_overall_level_where_95_percent_looks_do_not():
    """Simulated null studies with looks after 3, 5 and 8 standard normal draws: crossing Pocock's boundary at any
    look happens in about 5% of them; crossing 1.96 at any look in about 11%."""
    plan = sequential.SequentialPlan()
    draws = np.random.default_rng(1).normal(size=(40_000, 8)).cumsum(axis=1)
    z = np.abs(draws[:, [n - 1 for n in plan.looks]]) / np.sqrt(plan.looks)
    assert 0.045 <= np.mean((z >= plan.critical_value).any(axis=1)) <= 0.055
    assert np.mean((z >= 1.96).any(axis=1)) > 0.09
    assert 0.97 < plan.level < 0.985 and plan.look_number(5) == 2
    assert "98.0%" in plan.describe() and "c = 2.282" in plan.describe()


def _null_studies(draws: int, looks, examples_sd: float, seed: int):
    """Null studies under the design the ledger reads: each seed's value is its training noise (sd 1) plus the
    examples' offset, one draw per study shared by every seed (the same test examples), known to each seed's
    bootstrap as a 95% half-width of 1.96 x ``examples_sd``."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((draws, looks[-1])) + examples_sd * rng.standard_normal((draws, 1))


def _rule_crosses(values, looks, level, examples_sd):
    """Whether some look's interval excludes 0 under the ledger's rule: t over the seeds at ``level``, the
    examples' term (its 95% half-width re-read at ``level``) added in quadrature."""
    from scipy import stats

    crossed = np.zeros(len(values), dtype=bool)
    for n in looks:
        first = values[:, :n]
        seeds_half = stats.t.ppf(0.5 + level / 2, n - 1) * first.std(axis=1, ddof=1) / np.sqrt(n)
        examples_half = stats.norm.ppf(0.5 + level / 2) * examples_sd
        crossed |= np.abs(first.mean(axis=1)) > np.hypot(seeds_half, examples_half)
    return crossed


def test_the_plans_level_keeps_five_percent_overall_under_the_t_rule_with_the_examples_nested():
    """The whole rule simulated on null studies drawn apart from the calibration's: at the calibrated level the
    overall crossing rate is 5% (±0.5) with no examples' noise (the worst case) and at most 5.5% with it nested;
    Pocock's normal-theory 97.8% gives more than 5.3% under the t rule."""
    plan = sequential.SequentialPlan()
    looks = plan.looks
    pure = _null_studies(200_000, looks, 0.0, seed=7)
    assert 0.045 <= np.mean(_rule_crosses(pure, looks, plan.level, 0.0)) <= 0.055
    normal_level = plan.pocock_level
    assert np.mean(_rule_crosses(pure, looks, normal_level, 0.0)) > 0.053
    for examples_sd in (0.3, 1.0, 3.0):
        nested = _null_studies(100_000, looks, examples_sd, seed=8)
        assert np.mean(_rule_crosses(nested, looks, plan.level, examples_sd)) <= 0.055
    assert sequential.t_rule_level((3, 5, 8)) > normal_level
    with pytest.raises(ValueError, match="alpha="):
        sequential.t_rule_level((3, 5, 8), alpha=1.5)


def test_the_next_look_goes_where_it_narrows_most_per_cpu_minute_and_never_to_examples_that_cannot_grow():
    plan = sequential.SequentialPlan()
    noisy = sequential.look_state([0.30, 0.31, 0.29], [0.4] * 3, threshold=0.0, plan=plan)  # examples' term rules
    spread = sequential.look_state([0.5, 0.1, 0.9], [0.05] * 3, threshold=0.0, plan=plan)  # seeds' term rules
    assert noisy.half_after("examples", plan) < noisy.half_after("seeds", plan) < noisy.half_after("now", plan)
    assert spread.half_after("seeds", plan) < spread.half_after("examples", plan)
    even = {"seeds": 10.0, "examples": 10.0}
    assert sequential.allocate({"05": [noisy], "03": [spread]}, plan, {"05": even, "03": even}) == \
        {"05": "examples", "03": "seeds"}
    # the same rows when one kind of look costs far more: the cheaper narrowing wins
    assert sequential.allocate({"05": [noisy]}, plan, {"05": {"seeds": 1.0, "examples": 100.0}}) == {"05": "seeds"}
    fixed = sequential.look_state([0.30, 0.31, 0.29], [0.4] * 3, threshold=0.0, plan=plan, examples_grow=False)
    assert fixed.half_after("examples", plan) == fixed.half_after("now", plan)
    assert fixed.futile and sequential.allocate({"05": [fixed]}, plan, {"05": even}) == {"05": "stop"}  # nothing left
    both = sequential.look_state([1.5, 0.9, 2.1], [0.6] * 3, threshold=0.0, plan=plan, examples_grow=False)
    assert not both.futile and both.examples_dominated  # examples' term the larger, but its examples are all there
    assert sequential.allocate({"05": [both]}, plan, {"05": {"seeds": 100.0, "examples": 0.1}}) == {"05": "seeds"}
    assert sequential.examples_grow({1: 40, 2: 80}) and not sequential.examples_grow({1: 40, 2: 80, 4: 80})
    assert not sequential.examples_grow({1: 16, 2: 16}) and sequential.examples_grow({1: 16})


def test_a_row_is_futile_only_when_the_last_look_could_not_decide_it():
    plan = sequential.SequentialPlan()
    near = sequential.look_state([0.1, -0.1, 0.05], [0.05] * 3, threshold=0.0, plan=plan)  # mean 0.017, sd 0.1
    assert near.futile and "futile" in near.reason
    far = sequential.look_state([0.5, 0.1, 0.9], [0.05] * 3, threshold=0.0, plan=plan)  # mean 0.5, sd 0.4
    assert not far.futile and not far.examples_dominated and "more seeds" in far.reason
    noisy = sequential.look_state([0.30, 0.31, 0.29], [0.4] * 3, threshold=0.0, plan=plan)  # examples' term rules
    assert not noisy.futile and noisy.examples_dominated
    inside = sequential.look_state([0.0, 0.02, -0.02], [0.01] * 3, threshold=0.0, margin=0.5, plan=plan)
    assert inside.distance == pytest.approx(0.5) and not inside.futile  # a "matches" row far from its margin's edge
    assert sequential.allocate({"03": [far, near], "05": [noisy], "07": [near]}) == \
        {"03": "seeds", "05": "examples", "07": "stop"}


def test_a_look_states_its_cost_and_bad_plans_name_the_argument():
    minutes = sequential.CPU_MINUTES_PER_SEED  # a look of two new seeds of two notebooks costs each seed of each
    assert sequential.look_cost(["02", "05"], 2) == pytest.approx(2 * (minutes["02"] + minutes["05"]))
    for looks in [(5, 3), (1, 3), [], "358", (3, 3, 5)]:
        with pytest.raises(ValueError, match="looks="):
            sequential.SequentialPlan(looks=looks)
    with pytest.raises(ValueError, match="alpha="):
        sequential.SequentialPlan(alpha=5)
    with pytest.raises(ValueError, match="notebooks=.*'99'"):
        sequential.look_cost(["99"], 1)
    with pytest.raises(ValueError, match="seeds=4"):
        sequential.SequentialPlan().look_number(4)


def test_a_schedule_adds_seeds_or_examples_one_look_at_a_time():
    """Each look after the first adds the plan's next seeds at the same examples, or scores the same seeds on
    examples_factor times the examples; at most len(looks) looks. What comes next follows the allocation."""
    plan = sequential.SequentialPlan()
    assert plan.check_schedule([(3, 1), (3, 2), (5, 2)]) == ((3, 1), (3, 2), (5, 2))
    assert plan.seeds_schedule(5) == ((3, 1), (5, 1))
    for bad in [[], [(5, 1)], [(3, 2)], [(3, 1), (5, 2)], [(3, 1), (3, 3)], [(3, 1), (4, 1)],
                [(3, 1), (3, 2), (3, 4), (5, 4)], "31"]:
        with pytest.raises(ValueError, match="is not a schedule of this plan"):
            plan.check_schedule(bad)
    assert plan.next_look([(3, 1)], "examples") == (3, 2)
    assert plan.next_look([(3, 1)], "seeds") == (5, 1)
    assert plan.next_look([(3, 1), (3, 2)], "seeds") == (5, 2)
    assert plan.next_look([(3, 1), (3, 2)], "stop") is None
    assert plan.next_look([(3, 1), (3, 2), (3, 4)], "examples") is None  # the plan's three looks are spent
    with pytest.raises(ValueError, match="allocation="):
        plan.next_look([(3, 1)], "more")
    with pytest.raises(ValueError, match="examples_factor="):
        sequential.SequentialPlan(examples_factor=1)


def test_an_examples_look_costs_the_cached_runs_times_the_scale():
    minutes = sequential.CPU_MINUTES_PER_CACHED_SEED
    assert sequential.examples_look_cost(["03", "05"], 3, 2) == pytest.approx(3 * 2 * (minutes["03"] + minutes["05"]))
    with pytest.raises(ValueError, match="scale="):
        sequential.examples_look_cost(["03"], 3, 0)
    with pytest.raises(ValueError, match="no measured minutes"):
        sequential.examples_look_cost(["09"], 3, 2)


def test_reading_every_look_at_pococks_level_keeps_the_overall_level_near_five_percent_for_any_spacing_it_meets():
    """The module's statement: no look more than doubles a row's information, and over such spacings reading each of
    three looks at c for (3, 5, 8) keeps the overall two-sided level between 4% and 5.4%."""
    import numpy as np
    from scipy import stats

    c = sequential.pocock_critical_value((3, 5, 8))

    def overall(information):
        information = np.asarray(information, dtype=float)
        correlation = np.sqrt(np.minimum.outer(information, information) / np.maximum.outer(information, information))
        law = stats.multivariate_normal(np.zeros(3), correlation, maxpts=600_000, abseps=1e-7, releps=1e-7, seed=0)
        return 1 - law.cdf(np.full(3, c), lower_limit=np.full(3, -c))

    assert overall((3, 5, 8)) == pytest.approx(0.05, abs=2e-3)
    assert 0.039 < overall((1, 1.2, 1.44)) < overall((1, 2, 4)) < 0.055
