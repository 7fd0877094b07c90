"""Widgets as a user meets them: they open at each view's defaults, bad settings show one line (no traceback,
no leaked figure), float sliders hand the view clean values, and the views' presentation holds (labels, titles, one figure per call)."""
import ast
import json
import re
import warnings
from functools import partial
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import ipywidgets  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from helpers import masks as M  # noqa: E402
from helpers import metrics, models, objectives, plots, training  # noqa: E402
from helpers.papers.emat import experiment as emat_experiment, figures as emat_figures, settings as emat_settings  # noqa: E402
from helpers.papers.lecture import figures as lecture_figures  # noqa: E402
from helpers.papers.magnet import figures as magnet_figures  # noqa: E402
from helpers.papers.mntp import figures as mntp_figures  # noqa: E402
from helpers.papers.openltg import figures as openltg_figures, report as openltg_report  # noqa: E402
from helpers.papers.diffusion import figures as diffusion_figures  # noqa: E402
from helpers.papers.sequence_repetition import figures as sr_figures  # noqa: E402

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
UNUSED = object()  # stands in for a model or data argument the controls never touch


def _maps(length=6, layers=2, heads=2):
    named = {"causal": M.causal, "bidirectional": M.bidirectional, "MAGNET": M.magnet([(2, 4)])}
    weights = {name: torch.rand(layers, heads, length, length).masked_fill(~M.dense(mask, length), float("-inf")).softmax(-1)
               for name, mask in named.items()}
    return weights, named


def notebook_widgets():
    """Each notebook's widget as its cell builds it: (view, controls); model and data arguments are stand-ins.

    The views are bound exactly as in the notebooks; ``view_controls`` never calls a view.
    """
    maps, named = _maps()
    tokens = [f"t{i}" for i in range(6)]
    return {
        "01 magnet": (lecture_figures.magnet_view, dict(span_start=(0, 12), span_end=(0, 12), second_start=(0, 12),
                                                        second_end=(0, 12), length=(4, 24))),
        "01 repetition": (lecture_figures.repetition_view, dict(r=(0, 8))),
        "01 dswa": (partial(lecture_figures.dswa_view, num_layers=30, fixed_window=64, alpha_min=0.125,
                            alpha_max=0.75),
                    dict(window=(1, 16), alpha_min=(0.0, 1.0, 0.025), alpha_max=(0.0, 1.0, 0.05))),
        "01 attention": (partial(lecture_figures.attention_view, maps, tokens, named_masks=named),
                         dict(layer=(0, 1), head=(0, 1))),
        "02 masking": (partial(mntp_figures.masking_view, UNUSED, "text", mask_token="underscore"),
                       dict(ratio=(0.05, 0.95, 0.05), mask_token=list(objectives.MASK_TOKEN_CHOICES),
                            objective=list(objectives.OBJECTIVES), seed=(0, 20))),
        "03 infill": (partial(magnet_figures.infill_view, UNUSED, UNUSED),
                      dict(passage=ipywidgets.Textarea(value="A passage.", continuous_update=False),
                           span_start=ipywidgets.IntSlider(value=5, min=0, max=60, continuous_update=False),
                           span_words=ipywidgets.IntSlider(value=6, min=1, max=30, continuous_update=False))),
        "04 tagging": (partial(sr_figures.sr_tagging_view, {1: UNUSED, 2: UNUSED}, UNUSED, ["O"],
                               sentence="A sentence .", r=2, layer=15, reference_task="chunks"),
                       dict(sentence=str, r=[1, 2], layer=(0, 29))),
        "05 decoding": (partial(openltg_figures.decoding_view, UNUSED, UNUSED, beta=1.8, iterations=8, window=64, top_p=0.9,
                                length=32, probe_position=7, seed=0),
                        dict(beta=(0.2, 3.0, 0.1), iterations=(1, 12), window=(2, 128, 2), top_p=(0.05, 1.0, 0.05))),
        "06 completion": (partial(emat_figures.completion_view, UNUSED, sentence="He met [MASK] there.", k=8),
                          dict(sentence=str, k=(1, 20))),
        "07 sampler": (partial(diffusion_figures.sampler_view, UNUSED, UNUSED, steps=8, block_length=32,
                               remasking="low_confidence", threshold=0.0, temperature=1.0, length=32, seed=0),
                       dict(steps=(1, 32), block_length=[4, 8, 16, 32], remasking=["low_confidence", "random"],
                            threshold=(0.0, 1.0, 0.05), temperature=(0.0, 2.0, 0.1))),
    }


@pytest.mark.parametrize("name", list(notebook_widgets()))
def test_every_control_opens_at_the_view_default(name):
    view, controls = notebook_widgets()[name]
    defaults = plots.view_defaults(view)
    built = plots.view_controls(view, **controls)
    assert set(built) == set(controls)
    for argument, control in built.items():
        if argument in defaults:  # 03's passage has none: the notebook fills the box with a held-out story
            assert control.value == defaults[argument], f"{name}: {argument} opens at {control.value!r}"


def test_a_control_whose_default_lies_outside_its_range_is_refused():
    with pytest.raises(ValueError, match="alpha_min.*outside the range"):
        plots.view_controls(lecture_figures.dswa_view, alpha_min=(0.2, 1.0, 0.05))
    with pytest.raises(ValueError, match="mask_token.*not one of the options"):
        plots.view_controls(partial(mntp_figures.masking_view, UNUSED, "x"), mask_token=["eos"])
    with pytest.raises(ValueError, match="no default"):
        plots.view_controls(partial(magnet_figures.infill_view, UNUSED, UNUSED), passage=str)
    with pytest.raises(ValueError, match="span_start: the widget opens at 9"):
        plots.view_controls(lecture_figures.magnet_view, span_start=ipywidgets.IntSlider(value=9, max=12))


def test_notebooks_build_every_widget_with_interactive_view():
    """No notebook calls ipywidgets' interact/interactive directly (that path opens sliders at their middle)."""
    calls = 0
    for notebook in NOTEBOOKS:
        for cell in json.loads(notebook.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            tree = ast.parse("".join(cell["source"]))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                    assert name not in ("interact", "interactive", "interact_manual"), f"{notebook.name} calls {name}"
                    calls += name == "interactive_view"
    assert calls >= 8


def _completer_without_a_model():
    """The real Completer: it checks the sentence before it touches the model, so no model is needed here."""
    return emat_experiment.Completer(mlm=None, emat=None, gru=None, lengths=None, settings=emat_settings.SETTINGS["smoke"],
                                     max_steps=1)


BAD_SETTINGS = {
    "overlapping spans": (lecture_figures.magnet_view, dict(span_start=3, span_end=7, second_start=5, second_end=9),
                          "overlaps"),
    "span past the length": (lecture_figures.magnet_view, dict(span_start=3, span_end=12, length=8), "shorter than"),
    "alpha_min > alpha_max": (lecture_figures.dswa_view, dict(alpha_min=0.5, alpha_max=0.25), "must not exceed"),
    "sentence without [MASK]": (partial(emat_figures.completion_view, _completer_without_a_model()),
                                dict(sentence="No mask here.", k=8), r"\[MASK\]"),
    "steps not a multiple of the blocks": (partial(diffusion_figures.sampler_view, UNUSED, UNUSED),
                                           dict(steps=5, block_length=8, length=32), "not a multiple of the 4 blocks"),
}


@pytest.mark.parametrize("case", list(BAD_SETTINGS))
def test_bad_settings_give_one_line_and_leak_no_figure(case):
    view, kwargs, expected = BAD_SETTINGS[case]
    plt.close("all")
    before = plt.get_fignums()
    result = plots.render_view(view, **kwargs)
    assert isinstance(result, str) and "\n" not in result and "Traceback" not in result
    assert re.search(expected, result)
    assert plt.get_fignums() == before


def test_a_view_that_fails_after_opening_a_figure_leaks_nothing():
    def half_drawn(value: int = 0):
        plt.subplots()
        raise ValueError(f"value={value} is bad")

    plt.close("all")
    assert plots.render_view(half_drawn, value=3) == "value=3 is bad"
    assert plt.get_fignums() == []


def test_interactive_view_shows_the_message_in_place_of_the_figure(monkeypatch):
    pytest.importorskip("IPython")
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *objects, **_: shown.extend(objects))
    plt.close("all")
    widget = plots.interactive_view(lecture_figures.magnet_view, span_start=(0, 12), span_end=(0, 12),
                                    second_start=(0, 12), second_end=(0, 12), length=(4, 24))
    assert isinstance(shown[-1], plt.Figure)  # the opening state draws
    controls = {control.description: control for control in widget.kwargs_widgets}
    controls["second_start"].value, controls["second_end"].value = 5, 9  # overlaps (3, 7)
    message = shown[-1]
    assert "overlaps" in message.data and "Traceback" not in message.data
    assert plt.get_fignums() == []


def test_float_sliders_hand_the_view_clean_values(monkeypatch):
    pytest.importorskip("IPython")
    monkeypatch.setattr("IPython.display.display", lambda *objects, **_: None)
    received = []

    def view(beta: float = 1.8):
        received.append(beta)
        return plt.figure()

    widget = plots.interactive_view(view, beta=(0.2, 3.0, 0.1))
    slider = widget.kwargs_widgets[0]
    assert slider.readout_format == ".1f" and slider.continuous_update
    slider.value = 0.2 + 14 * 0.1  # 1.5999999999999999, as a slider step produces it
    assert received == [1.8, 1.6]
    assert not plots.interactive_view(view, continuous_update=False, beta=(0.2, 3.0, 0.1)).kwargs_widgets[0].continuous_update


def test_show_returns_none(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBOOK_PROFILE", "smoke")
    fig = plt.figure()
    assert plots.show(fig, "test_widgets_show") is None
    assert not plt.fignum_exists(fig.number)


def test_trace_figure_histogram_uses_the_top_50_of_the_text():
    import inspect

    assert inspect.signature(openltg_figures.trace_figure).parameters["top_k"].default == \
        inspect.signature(openltg_report.describe_trace).parameters["top_k"].default == 50


def test_peft_wrapping_raises_no_gradient_checkpointing_future_warning():
    model, _ = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*is_gradient_checkpointing.*")
        training.add_lora(model, training.LoraSettings(r=2, alpha=4))


def test_one_seed_prints_na_not_zero():
    mean, half = metrics.mean_ci95([61.5])
    assert metrics.format_mean_ci(mean, half) == "61.5 ± n/a"
