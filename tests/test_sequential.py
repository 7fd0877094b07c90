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
    assert "97.8%" in plan.describe() or "97.7%" in plan.describe()


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
    assert sequential.look_cost(["02", "05"], 2) == pytest.approx(2 * (4.2 + 3.7))
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
