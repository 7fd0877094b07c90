"""Notebook 07's claims: every verdict follows from its interval by the one rule ``claims.verdict_of``; definition
checks hold or fail; the "makes little difference" rows are "matches" claims with our margin, stated as ours."""
from dataclasses import replace

import numpy as np
import pytest
import torch

from helpers import mntp_recipe, profiles
from helpers import ledger as claims
from helpers.papers.diffusion import declarations, experiment, judge, mechanism, report, settings
from helpers.papers.openltg import experiment_table6

SMOKE = settings.SETTINGS["smoke"]
READ_AS_MEASUREMENTS = {claim_id: report.CLAIMS[claim_id] for claim_id in declarations.FINDINGS_ONCE_JUDGED}


@pytest.fixture
def judged(monkeypatch):
    """The rows MAUVE decides as the findings they become once the judge is off its floor: the report's rules for
    them (floor, headroom, perplexity confound, margin) are tested on those forms."""
    for claim_id, finding in declarations.FINDINGS_ONCE_JUDGED.items():
        monkeypatch.setitem(report.CLAIMS, claim_id, finding)


def test_the_rows_mauve_decides_are_measurements_until_the_judge_is_off_its_floor():
    """Read now, each MAUVE row is a measurement whose words say why; its finding keeps the paper's direction or
    margin, everything else the same."""
    assert len(READ_AS_MEASUREMENTS) == 5
    for claim_id, now in READ_AS_MEASUREMENTS.items():
        finding = declarations.FINDINGS_ONCE_JUDGED[claim_id]
        assert now.kind == claims.MEASUREMENT and finding.kind == claims.FINDING
        assert declarations.JUDGE_ON_ITS_FLOOR in now.says and now.says.startswith(finding.says)
        assert (now.check, now.curve, now.dataset, now.quantity) == (finding.check, finding.curve, finding.dataset,
                                                                       finding.quantity)
        assert finding.direction in (1, -1) or finding.margin is not None
        row = now.measured(0.3, 0.2, 0.4, "paired bootstrap over 12 prompts", 12,
                           plateau=claims.curve(now.curve, STOPPED))
        assert _as_study([row])[0].verdict == "inconclusive"  # wholly on one side, stopped: still a measurement


def _records(nll: float, tokens: int = 10, distinct: float = 0.5):
    return {"bleu1": (1, 2, 2, 2), "rouge_l": 10.0, "lr": 0, "distinct4": distinct, "nll": nll, "tokens": tokens}


def _scores(shifts: dict, n: int = 12, distinct: dict | None = None, rows=None):
    rows = rows or [*experiment.sampler_rows(SMOKE), experiment.TRUTH_ROW]
    rng = np.random.default_rng(0)
    per_prompt = {name: [_records(20 + shifts.get(name, 0.0) * 10 + rng.normal(0, 0.1),
                                  distinct=(distinct or {}).get(name, 0.5) + rng.normal(0, 0.01)) for _ in range(n)]
                  for name in rows}
    return experiment_table6.table6_scores(per_prompt, lr_n=5, resamples=200)


def _mauve(badness: dict, n: int = 12, rows=None) -> judge.MauveJudge:
    """A planted MAUVE judge over 4 buckets: the human row cycles through them; a row of badness b has its first
    round(b n) prompts collapsed onto bucket 0 (it repeats itself) and the others where the human text is."""
    rows = rows or [*experiment.sampler_rows(SMOKE), experiment.TRUTH_ROW]
    human = np.arange(n) % 4
    labels = {name: np.where(np.arange(n) < round(badness.get(name, 0.0) * n), 0, human) for name in rows}
    return judge.MauveJudge(labels, 4, experiment.TRUTH_ROW, resamples=200)


def _study(gain: float):
    blocks = 6
    def samples(shift):
        return mechanism.BoundSamples(nll=torch.full((blocks, 2), 40.0 - shift) + torch.arange(blocks)[:, None] * 0.01,
                                      tokens=torch.full((blocks,), 10.0), masked=torch.tensor([[3.0, 7.0]] * blocks),
                                      correct=torch.tensor([[1.0, 2.0]] * blocks))
    names = ("MNTP", "tuned")
    study = experiment.LikelihoodStudy({"MNTP": samples(0.0), "tuned": samples(gain)},
                                       {"MNTP": torch.full((blocks,), 3.0), "tuned": torch.full((blocks,), 3.1)})
    hits = (np.array([5.0] * blocks), np.array([10.0] * blocks))
    return study, {"MNTP": hits, "tuned": hits}, names


# A held-out curve that rose and then stayed flat over the last half of 16 steps: training shown to have stopped.
STOPPED = [(0, -3.0), (2, -2.5), (4, -2.1), (6, -2.0)] + [(step, -2.0) for step in range(8, 17)]


def _claims(shifts, **options):
    """:func:`_run_claims` as a study of three agreeing seeds combines them (:func:`_as_study`)."""
    return _as_study(_run_claims(shifts, **options))


def _run_claims(shifts, gain=5.0, ratios=(2.0, 2.2, 2.1), curve=None, badness=None, uniform_cost=0.5):
    """``shifts``: each row's judge NLL moved by this much (perplexity); ``badness``: each row's planted MAUVE
    collapse (:func:`_mauve`), by default the same rows as ``shifts`` fully collapsed where they shift upwards;
    ``uniform_cost``: how much higher the uniform model's bound on the human text is than the mask model's."""
    badness = {name: 1.0 for name, shift in shifts.items() if shift > 0} if badness is None else badness
    study, accuracy, names = _study(gain)
    corruption_rows = [*experiment.corruption_rows(SMOKE)]
    bounds = {experiment.MASK_CORRUPTION: 3.0 + np.linspace(0, 0.1, 12),
              experiment.UNIFORM_CORRUPTION: 3.0 + uniform_cost + np.linspace(0, 0.1, 12)[::-1]}
    proof = experiment.BlockProof(torch.ones(2, 3), torch.ones(2, 3, dtype=torch.bool), 1, 1, 1)
    speed = [{experiment.SEMI_AR: [r * 10 for r in ratios], experiment.BLOCK_CAUSAL: [10.0] * len(ratios)}]
    return report.claims(identities={"a": True}, proof=proof, cache_exact=True, mask_predict_equal=True,
                         scores=_scores(shifts), mauve=_mauve(badness), settings=SMOKE, speed=speed, device="cpu",
                         study=study, accuracy=accuracy, names=names, mntp_curve=curve, fine_tune_curve=curve,
                         corruption_scores=_scores(shifts, rows=[*corruption_rows, experiment.TRUTH_ROW]),
                         corruption_bounds=bounds)


def _as_study(rows):
    """The run's rows as a study of three agreeing seeds combines them: one seed's trained row reaches no verdict,
    and these tests check the report's per-row rules (judges, confound, budget check), which apply to a study's rows."""
    return claims.combine_seeds({seed: list(rows) for seed in range(3)})


def test_claims_follow_their_intervals_and_name_papers_beyond_the_seeds(judged):
    rows = _claims({experiment.RANDOM: 0.5, experiment.steps_row(2): 0.3})
    by = {(row.paper, row.where, row.quantity): row for row in rows}
    assert {row.paper for row in rows} == {"BD3-LM", "002", "LLaDA", "Fast-dLLM", "MDLM"} <= set(claims.PAPERS)
    assert [row.verdict for row in rows if row.kind == claims.DEFINITION] == ["holds"] * 3
    remasking = next(row for row in rows if row.where == "App. B.3, Table 6" and "random" in row.quantity)
    assert remasking.verdict == "reproduced" and remasking.low > 0 and "MAUVE" in remasking.quantity
    steps = next(row for row in rows if "T=2" in row.quantity)
    assert steps.verdict == "reproduced" and steps.high < 0
    semi = next(row for row in rows if "semi-AR - one block" in row.quantity)
    assert semi.margin == SMOKE.mauve_margin and semi.verdict == "reproduced"
    speed = next(row for row in rows if row.paper == "Fast-dLLM" and row.threshold == 1.0)
    # on the paper's side, but timed in another hardware regime than Fast-dLLM's A100: it cannot be decided
    assert speed.low > 1.0 and speed.n == 3 and speed.n_seeds is None and speed.regime  # trials, not seeds
    assert speed.verdict == "inconclusive" and "another regime" in speed.verdict_text
    assert next(row for row in rows if row.kind == claims.MEASUREMENT).verdict == "inconclusive"
    bound = next(row for row in rows if row.where == "§5.1")  # the fine-tune minimises what it is scored on
    assert bound.trained and bound.kind == claims.MEASUREMENT and bound.verdict == "inconclusive" and bound.low > 0
    tightness = [row for row in rows if row.where == "§4.1"]
    assert len(tightness) == 2 and all(row.kind == claims.MEASUREMENT and row.low > 0 for row in tightness)
    kept = next(row for row in rows if row.where == "Table 4")
    assert kept.threshold == -SMOKE.accuracy_margin and kept.verdict == "reproduced"
    assert len(by) == len(rows)


def test_a_wrong_side_is_never_not_reproduced_without_a_held_out_curve(judged):
    """Every sampler row rests on notebook 02's adapter and the fine-tune rows on the fine-tune too; none has a
    held-out curve that has stopped moving, so a row wholly on the wrong side reads inconclusive, even with the
    sampler check named."""
    rows = _claims({experiment.LOW_CONFIDENCE: 0.5}, gain=-5.0)
    remasking = next(row for row in rows if row.where == "App. B.3, Table 6" and "random" in row.quantity)
    assert remasking.high < 0 and "llada_algorithm5" in remasking.check and remasking.trained
    assert remasking.verdict == "inconclusive" and "not shown to have stopped" in remasking.verdict_text
    semi = next(row for row in rows if "semi-AR - one block" in row.quantity)
    assert semi.low > semi.margin and semi.verdict == "inconclusive"
    bound = next(row for row in rows if row.where == "§5.1")
    assert bound.high < 0 and bound.kind == claims.MEASUREMENT and bound.verdict == "inconclusive"


def test_a_wrong_side_reads_not_reproduced_once_the_held_out_curve_has_stopped(judged):
    rows = {row.id: row for row in _claims({experiment.LOW_CONFIDENCE: 0.5}, gain=-5.0, curve=STOPPED)}
    remasking = rows["diffusion.llada.table6.low_confidence_vs_random"]
    assert remasking.plateau["curve"].startswith(mntp_recipe.MNTP_HELDOUT_CURVE) and remasking.verdict == "not reproduced"
    assert rows["diffusion.llada.table6.semi_ar_vs_one_block"].verdict == "not reproduced"
    bound = rows["diffusion.mdlm.s5_1.bound_falls"]  # a measurement, whatever its curve
    assert bound.plateau["curve"].startswith(settings.FINE_TUNE_HELDOUT_CURVE) and bound.verdict == "inconclusive"
    assert rows["diffusion.bd3lm.s4_1.tight_at_block_one.mntp"].plateau["curve"].startswith(mntp_recipe.MNTP_HELDOUT_CURVE)
    speed = _claims({}, ratios=(0.5, 0.55, 0.52), curve=STOPPED)
    slower = next(row for row in speed if row.id == "diffusion.fast_dllm.table1.cache_speedup")
    assert slower.high < 1.0 and slower.verdict == "inconclusive" and "another regime" in slower.verdict_text
    assert slower.n == 3 and slower.n_seeds is None and not slower.seed_values  # timing trials are not study seeds


def test_two_samplers_at_mauves_floor_are_not_judged_alike(judged):
    """Rows whose texts share no bucket with the human texts both score MAUVE's floor: their difference is 0 and a
    "matches" claim would read reproduced whatever the samplers do. Planted: the block cache's two samplers off every
    human bucket; the row is confounded (inconclusive). With one of them on a human bucket, the judge reads it."""
    floored = {name: 0.0 for name in experiment.sampler_rows(SMOKE)}
    labels = _mauve(floored).labels
    for name in (experiment.BLOCK_CAUSAL, experiment.SEMI_AR):
        labels[name] = np.full_like(labels[name], 5)  # a bucket no human text falls in
    at_floor = judge.MauveJudge(labels, 6, experiment.TRUTH_ROW, resamples=200)
    assert at_floor.shares_no_bucket(experiment.SEMI_AR) and not at_floor.shares_no_bucket(experiment.RANDOM)
    assert at_floor.score(experiment.SEMI_AR) == pytest.approx(at_floor.floor) and at_floor.floor < 0.05
    assert at_floor.difference(experiment.BLOCK_CAUSAL, experiment.SEMI_AR) == (0.0, 0.0, 0.0)
    quality = report.CLAIMS["diffusion.fast_dllm.table1.cache_quality"]
    row = report.judged_by_humans(quality, _scores({}), at_floor, experiment.BLOCK_CAUSAL, experiment.SEMI_AR)
    study = claims.combine_seeds({seed: [row] for seed in range(3)})[0]
    assert study.verdict == "inconclusive" and "floor" in study.verdict_text
    labels[experiment.SEMI_AR] = labels[experiment.TRUTH_ROW].copy()  # the human buckets: MAUVE 1, off the floor
    read = judge.MauveJudge(labels, 6, experiment.TRUTH_ROW, resamples=200)
    row = report.judged_by_humans(quality, _scores({}), read, experiment.BLOCK_CAUSAL, experiment.SEMI_AR)
    assert not row.confound and row.high < 0


def test_a_match_within_the_margin_needs_mauve_headroom_above_its_floor(judged):
    """Two rows with one text each on a human bucket are off MAUVE's floor, yet both score less than the margin above
    it, so their difference cannot reach the margin whatever the samplers do: a "matches" row is confounded (the
    study's look 3 read the block cache's quality this way at 64 prompts). A row with headroom is read: one sampler
    on the human buckets and the other equal to it matches; one that collapses off them loses more than the margin."""
    n, buckets = 64, 8
    human = np.arange(n) % 4
    off = np.full(n, 6)  # a bucket no human text falls in
    near_floor = {name: off.copy() for name in experiment.sampler_rows(SMOKE)}
    near_floor[experiment.TRUTH_ROW] = human
    for name in (experiment.BLOCK_CAUSAL, experiment.SEMI_AR):
        near_floor[name][0] = human[0]  # one text of 64 on a human bucket: off the floor, barely
    judged = judge.MauveJudge(near_floor, buckets, experiment.TRUTH_ROW, resamples=200)
    quality = report.CLAIMS["diffusion.fast_dllm.table1.cache_quality"]
    assert quality.margin is not None and not judged.shares_no_bucket(experiment.SEMI_AR)
    assert judged.floor < judged.score(experiment.SEMI_AR) < judged.floor + quality.margin
    row = report.judged_by_humans(quality, _scores({}), judged, experiment.BLOCK_CAUSAL, experiment.SEMI_AR)
    assert "cannot show a difference of the margin" in row.confound
    study = _as_study([row])[0]
    assert study.verdict == "inconclusive" and "floor" in study.verdict_text
    with_headroom = dict(near_floor, **{experiment.BLOCK_CAUSAL: human.copy(), experiment.SEMI_AR: human.copy()})
    read = judge.MauveJudge(with_headroom, buckets, experiment.TRUTH_ROW, resamples=200)
    matched = report.judged_by_humans(quality, _scores({}), read, experiment.BLOCK_CAUSAL, experiment.SEMI_AR)
    assert not matched.confound and _as_study([matched])[0].verdict == "reproduced"
    collapsed = dict(with_headroom, **{experiment.BLOCK_CAUSAL: off.copy()})
    lost = report.judged_by_humans(quality, _scores({}), judge.MauveJudge(collapsed, buckets, experiment.TRUTH_ROW,
                                                                          resamples=200),
                                   experiment.BLOCK_CAUSAL, experiment.SEMI_AR)
    assert not lost.confound and lost.high < -quality.margin


def test_a_row_sampled_several_times_per_prompt_says_its_draws_are_nested_in_the_prompts(judged):
    one = _mauve({experiment.RANDOM: 1.0})
    drawn = judge.MauveJudge({name: np.repeat(found, 2, axis=1) if name != experiment.TRUTH_ROW else found
                              for name, found in one.labels.items()}, one.buckets, one.reference, resamples=200)
    rows = {draws: report.judged_by_humans(report.CLAIMS["diffusion.llada.table6.low_confidence_vs_random"],
                                           _scores({experiment.RANDOM: 0.5}), found, experiment.LOW_CONFIDENCE,
                                           experiment.RANDOM)
            for draws, found in ((1, one), (2, drawn))}
    assert "× 2 sampling draws" in rows[2].method and "nested" in rows[2].method and rows[2].n == 12
    assert "draws" not in rows[1].method
    assert (rows[2].value, rows[2].low, rows[2].high) == pytest.approx((rows[1].value, rows[1].low, rows[1].high))


def test_every_row_is_declared_and_every_declaration_is_emitted():
    rows = _claims({experiment.RANDOM: 0.5})
    assert [row.id for row in rows] == list(report.CLAIMS)
    for row in rows:
        entry = report.CLAIMS[row.id]
        assert (row.quantity, row.kind, row.check, row.trained, row.dataset, row.regime) == \
            (entry.quantity, entry.kind, entry.check, entry.trained, entry.dataset, entry.regime)
    assert claims.missing_checks(report.CLAIMS) == []
    assert all(entry.check for entry in report.CLAIMS.values())
    assert all(entry.kind == claims.MEASUREMENT for entry in report.CLAIMS.values()
               if entry.paper_value.startswith(("not compared", "not measured")))


@pytest.mark.parametrize("name", profiles.PROFILE_NAMES)
def test_every_trained_row_names_a_curve_the_settings_count(name):
    points = settings.curve_points(profiles.get(name))
    for entry in report.CLAIMS.values():
        assert entry.trained == bool(entry.curve) and (not entry.trained or entry.curve in points), entry.id
    if name != "smoke":  # the smoke profile may keep few evaluations
        decided = [entry for entry in report.CLAIMS.values() if entry.kind in claims.DECIDED]
        assert all(entry.reaches_either_verdict(points) for entry in decided if not entry.regime)


def test_the_declared_margins_are_every_profiles(judged):
    for chosen in settings.SETTINGS.values():
        assert report.CLAIMS["diffusion.llada.table6.semi_ar_vs_one_block"].margin == chosen.mauve_margin
        assert report.CLAIMS["diffusion.mdlm.table4.skill_kept"].threshold == -chosen.accuracy_margin


def test_a_seed_study_averages_every_row_that_rests_on_training():
    """Each row but the definition checks and the speed-up carries its point estimate, so ``claims.combine_seeds``
    makes it the mean of the seeds, with their spread in the interval; the speed-up stays seed 0's timing."""
    shifts = [{experiment.RANDOM: 0.5}, {experiment.RANDOM: 0.1}, {experiment.RANDOM: 0.9}]
    by_seed = {seed: [claims.Claim(**{**row.__dict__, "notebook": "07"})
                      for row in _run_claims(shift, gain=4.0 + seed, badness=shift)]
               for seed, shift in enumerate(shifts)}
    combined = claims.combine_seeds(by_seed)
    trained = [row for row in combined if row.n_seeds == 3 and len(row.seed_values) == 3 and row.kind != claims.DEFINITION
               and not (row.paper == "Fast-dLLM" and row.threshold == 1.0)]
    assert len(trained) == len(combined) - 4  # all but three definition checks and the speed-up
    remasking = next(row for row in combined if "random" in row.quantity)
    singles = [next(row for row in rows if "random" in row.quantity).value for rows in by_seed.values()]
    assert remasking.value == pytest.approx(np.mean(singles)) and len(set(np.round(singles, 6))) == 3
    assert remasking.high - remasking.low > max(row.high - row.low for rows in by_seed.values() for row in rows
                                                if "random" in row.quantity)  # the seeds' spread widens it


@pytest.mark.parametrize("low,high,expected", [(-0.05, 0.05, "reproduced"), (0.2, 0.3, "not reproduced"),
                                               (-0.3, -0.2, "not reproduced"), (-0.05, 0.3, "inconclusive"),
                                               (-0.3, 0.3, "inconclusive")])
def test_a_little_difference_row_is_a_matches_claim_within_our_margin(low, high, expected, judged):
    declared = report.CLAIMS["diffusion.llada.table6.semi_ar_vs_one_block"]
    row = declared.measured((low + high) / 2, low, high, "paired bootstrap over 12 prompts", 12)
    assert row.margin == 0.1 and row.margin_source.startswith("ours:") and "MAUVE" in row.margin_source and row.trained
    assert row.verdict == "inconclusive"  # one training seed: a study decides
    # outside the margin reads "not reproduced" only once training is shown to have stopped (a flat held-out curve)
    assert _as_study([row])[0].verdict == ("inconclusive" if expected == "not reproduced" else expected)
    settled = _as_study([declared.measured((low + high) / 2, low, high, "paired bootstrap over 12 prompts", 12,
                                           plateau=claims.curve(declared.curve, STOPPED))])[0]
    assert settled.verdict == expected
    unchecked = claims.Claim(**{**settled.__dict__, "check": "", "verdict": ""})
    assert unchecked.verdict == "inconclusive"  # without a check neither verdict can be reached


def test_describe_sentences_carry_the_numbers():
    scores = _scores({experiment.RANDOM: 0.5})
    assert "64.7" in report.describe_remasking(scores) and "52.3" in report.describe_remasking(scores)
    assert "T=2" in report.describe_steps(scores, SMOKE)
    blocks = report.describe_blocks(scores, ((2.0, 2.5), (2.2, 2.1)))
    assert "3.2×" in blocks and "2.20×" in blocks and "2 processes" in blocks
    study, accuracy, names = _study(5.0)
    assert "78 → 35" in report.describe_fine_tune(study, accuracy, names)
    table = report.sampler_table(scores, {experiment.LOW_CONFIDENCE: SMOKE.steps})
    assert table.loc[experiment.LOW_CONFIDENCE, "forward passes"] == SMOKE.steps


def test_a_confounded_perplexity_leaves_the_row_to_mauve_and_confounds_it_only_where_mauve_cannot_decide(judged):
    """The repetitive sampler has the lower perplexity (the judge rewards its repetition): MAUVE against the human
    text decides the row when its interval lies on one side; only where it cannot decide does the perplexity's
    confound make the row inconclusive."""
    scores = _scores({experiment.RANDOM: 0.5}, distinct={experiment.LOW_CONFIDENCE: 0.2})
    confound = report._repetition_confound(scores, experiment.LOW_CONFIDENCE, experiment.RANDOM)
    assert "repeats more" in confound and "human text" in confound
    assert report._repetition_confound(_scores({experiment.RANDOM: 0.5}), experiment.LOW_CONFIDENCE,
                                       experiment.RANDOM) == ""
    assert report.log_ppl_difference(scores, experiment.LOW_CONFIDENCE, experiment.RANDOM)[2] < 0  # PPL prefers it
    decided = _as_study(report.sampler_claims(scores, SMOKE, ((1.5, 1.6, 1.7),), "cpu",
                                              _mauve({experiment.LOW_CONFIDENCE: 1.0}), mntp_curve=STOPPED))
    remasking = next(row for row in decided if "random" in row.quantity)
    assert remasking.high < 0 and not remasking.confound and remasking.verdict == "not reproduced"
    run = next(row for row in report.sampler_claims(scores, SMOKE, ((1.5, 1.6, 1.7),), "cpu",
                                                    _mauve({experiment.LOW_CONFIDENCE: 1.0}), mntp_curve=STOPPED)
               if "random" in row.quantity)  # one run's row, before the seeds are combined
    assert "PPL" in run.ours and "D-4" in run.ours and "MAUVE" in run.ours
    undecided = _as_study(report.sampler_claims(scores, SMOKE, ((1.5, 1.6, 1.7),), "cpu", _mauve({}), mntp_curve=STOPPED))
    remasking = next(row for row in undecided if "random" in row.quantity)
    assert remasking.low <= 0 <= remasking.high  # MAUVE cannot tell them apart ...
    assert remasking.verdict == "inconclusive" and "confounded" in remasking.verdict_text  # ... nor can perplexity
    sentence = report.describe_judges(scores, _mauve({experiment.LOW_CONFIDENCE: 1.0}),
                                      {"remasking": (experiment.LOW_CONFIDENCE, experiment.RANDOM)})
    assert "MAUVE" in sentence and "Perplexity confounded" in sentence


def test_the_switch_rows_compare_each_switch_with_the_configuration_without_it(judged):
    rows = {row.id: row for row in _claims({experiment.EDITING: -0.5, experiment.UNIFORM_CORRUPTION: 0.5},
                                           badness={experiment.BLOCK_CAUSAL: 1.0})}
    editing = rows["diffusion.llada2.editing_vs_none"]
    assert editing.kind == claims.FINDING and editing.paper == "LLaDA" and editing.verdict == "reproduced"
    assert editing.low > 0 and "τ_edit" in editing.note
    corruption = rows["diffusion.diffusiongemma.uniform_vs_mask_corruption"]
    assert corruption.kind == claims.MEASUREMENT and corruption.low > 0  # uniform worse by construction here
    assert "bound" in corruption.quantity and "human" in corruption.quantity
    configs = experiment.corruption_rows(SMOKE)
    assert configs[experiment.UNIFORM_CORRUPTION] == replace(configs[experiment.MASK_CORRUPTION], corruption="uniform")
    sampler = experiment.sampler_rows(SMOKE)
    assert sampler[experiment.EDITING] == replace(sampler[experiment.BLOCK_CAUSAL],
                                                  editing_threshold=SMOKE.editing_threshold)


def test_the_judges_figure_draws_every_sampler_row_under_both_judges():
    from helpers.papers.diffusion import figures

    names = [*experiment.sampler_rows(SMOKE), experiment.TRUTH_ROW]
    fig = figures.judges_figure(_scores({experiment.RANDOM: 0.5}), _mauve({experiment.RANDOM: 1.0}), names)
    assert [label.get_text() for label in fig.axes[0].get_yticklabels()] == names[:-1]
    assert "MAUVE" in fig.axes[1].get_title() and "perplexity" in fig.axes[0].get_title()
    table = report.sampler_table(_scores({}), {}, _mauve({}))
    assert table.loc[experiment.TRUTH_ROW, "MAUVE vs human"] == "reference"
