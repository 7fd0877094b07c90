"""MAGNET's settings per profile: App. A's values in the ``paper`` entry, and checked inputs."""
import pytest

from helpers import mntp_recipe, profiles
from helpers.papers.magnet.settings import SETTINGS, MagnetSettings


def test_settings_cover_every_profile():
    assert set(SETTINGS) == set(profiles.PROFILE_NAMES)
    paper = SETTINGS["paper"]
    assert (paper.phase1_steps, paper.phase2_steps, paper.lambda_sscl, paper.temperature) == (3400, 800, 9.0, 0.1)
    assert (paper.max_spans, paper.span_min, paper.span_max, paper.seq_len) == (2, 4, 128, 512)
    assert paper.batch_size * paper.grad_accum == 32 and paper.lr == 3e-5
    assert profiles.settings_for("magnet", profiles.get("smoke")) is SETTINGS["smoke"]


def test_settings_refuse_too_small_an_sscl_batch_and_no_simcse_cadence():
    with pytest.raises(ValueError, match="sscl_batch_size=1"):
        MagnetSettings(seq_len=32, batch_size=2, phase1_steps=1, phase2_steps=1, lr=1e-3, train_blocks=4,
                       span_min=2, span_max=4, sscl_batch_size=1)
    with pytest.raises(ValueError, match="simcse_eval_every=0"):
        MagnetSettings(seq_len=32, batch_size=2, phase1_steps=1, phase2_steps=1, lr=1e-3, train_blocks=4,
                       span_min=2, span_max=4, simcse_eval_every=0)


def test_curve_every_must_keep_fig6s_first_and_last_points_on_evaluation_steps():
    options = dict(seq_len=32, batch_size=2, phase1_steps=8, phase2_steps=4, lr=1e-3, train_blocks=4, span_min=2,
                   span_max=4, eval_every=2)
    assert MagnetSettings(**options, curve_every=4).curve_every == 4
    assert MagnetSettings(**options).curve_every is None  # Fig. 6 at every evaluation
    assert MagnetSettings(**options, curve_every=8).curve_every == 8  # the last step (12) is added by the evaluator
    for bad in (3, 0):  # not a multiple of eval_every; not positive
        with pytest.raises(ValueError, match=f"curve_every={bad}"):
            MagnetSettings(**options, curve_every=bad)
    cpu = SETTINGS["cpu"]  # the budget check keeps 11 held-out points in the last half; Fig. 6 keeps 6 points
    assert cpu.total_steps // cpu.eval_every + 1 == 21 and cpu.total_steps // cpu.curve_every + 1 == 6


def test_curve_points_count_the_evaluations_in_the_last_half_of_training_from_the_settings():
    from helpers import metrics, training
    from helpers.papers.magnet.settings import MAGNET_HELDOUT_CURVE, curve_points

    cpu = SETTINGS["cpu"]
    steps = range(0, cpu.total_steps + 1, cpu.eval_every)
    counted = curve_points("cpu")
    assert counted[MAGNET_HELDOUT_CURVE] == len([s for s in steps if s >= cpu.total_steps / 2]) == 11
    assert counted[mntp_recipe.MNTP_HELDOUT_CURVE] >= metrics.STOP_MIN_POINTS  # notebook 02's MNTP run, every 5 steps
    assert curve_points(profiles.get("smoke")) == curve_points("smoke")


def test_at_the_cpu_profile_magnet_and_llm2vec_style_mntp_train_alike_on_one_held_out_set(monkeypatch):
    """Table 1's rows against LLM2Vec-style MNTP read the gap between the two adapters' held-out curves
    (``declarations.GAP_STOP``): at the cpu profile both train the same steps of the same batch shape at the same
    learning rate and score the same held-out blocks (notebook 02's set: ``heldout_batches`` with the same arguments)
    at the same cadence."""
    from helpers.papers.magnet import experiment as E
    from helpers.papers.magnet.declarations import GAP_STOP
    from helpers.papers.magnet.report import CLAIMS

    magnet, mntp = SETTINGS["cpu"], mntp_recipe.MASKED_LM_RECIPES["cpu"]
    assert (magnet.total_steps, magnet.batch_size, magnet.seq_len, magnet.lr, magnet.eval_every) == \
        (mntp.steps, mntp.batch_size, mntp.seq_len, mntp.lr, mntp.eval_every)
    assert magnet.grad_accum == mntp.grad_accum
    assert magnet.heldout_blocks == mntp.eval_batches * mntp.batch_size and magnet.heldout_blocks % magnet.batch_size == 0
    # both held-out sets come from one call of mntp_adapter.heldout_batches with the same arguments
    from helpers import mntp_adapter

    import inspect

    signature, calls = inspect.signature(mntp_adapter.heldout_batches), []

    def record(*args, **kwargs):  # every argument as the real function binds it, defaults included
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        calls.append(dict(bound.arguments))

    monkeypatch.setattr(mntp_adapter, "heldout_batches", record)
    tokenizer, cpu = object(), profiles.get("cpu")
    monkeypatch.setattr(E, "mask_id_for", lambda _: 7)
    E.heldout_mntp_batches(cpu, magnet, tokenizer)
    mntp_adapter.notebook02_heldout_batches(tokenizer, cpu, 7)
    magnet_call, mntp_call = ({name: value for name, value in call.items() if name != "asked"} for call in calls)
    assert magnet_call == mntp_call and magnet_call["num_batches"] == 4
    assert {key for key, entry in CLAIMS.items() if entry.gap_stop == GAP_STOP} == {
        f"magnet.table1.{task}.vs_llm2vec_mntp" for task in ("chunking", "ner", "pos")}
