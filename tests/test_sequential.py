"""helpers.sequential: Pocock's boundary against the published constants and a simulated null; futility and the
allocation of the next look."""
import numpy as np
import pytest

from helpers import sequential


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
