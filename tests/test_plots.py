"""helpers.plots.core: a saved figure says which run it shows (the profile and the parameters cell's fingerprint)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest
from PIL import Image

from helpers import ledger, profiles
from helpers.plots import core


def _stamps(fig):
    return [text.get_text() for text in fig.texts if text.get_gid() == core.STAMP_ID]


def test_a_figure_is_stamped_with_its_notebooks_parameters_and_the_stamp_changes_with_them(git_workbook):
    git_workbook()
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    unset = Image.open(core.save_figure(fig, "02_example")).info["Description"]
    assert unset == f"notebook 02 · profile {profiles.current().name} · parameters not set"

    first = ledger.parameters("02", profiles.current(), {"steps": 4})
    path = core.save_figure(fig, "02_example")
    assert Image.open(path).info["Description"].endswith(f"parameters {first.fingerprint}")
    second = ledger.parameters("02", profiles.current(), {"steps": 8})
    assert second.fingerprint != first.fingerprint
    core.save_figure(fig, "02_example")  # the same figure saved again carries one stamp, the new one
    assert _stamps(fig) == [f"notebook 02 · profile {profiles.current().name} · parameters {second.fingerprint}"]
    assert core.figure_stamp("07_other").endswith("parameters not set")  # another notebook's parameters are not this one's
    plt.close(fig)


def test_a_figure_of_results_computed_under_other_parameters_is_refused_and_names_the_cells_it_shows(git_workbook):
    """The parameters cell edited and rerun, a figure that shows an earlier cell's results is refused (one line)
    until that cell reruns; once it has, the figure is saved and its stamp names the cell."""
    git_workbook()
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    first = ledger.parameters("03", profiles.current(), {"steps": 4})
    first.computed("MAGNET training")
    assert core.save_figure(fig, "03_heldout", shows=["MAGNET training"]).exists()
    assert _stamps(fig)[0].endswith(f"parameters {first.fingerprint} · results of MAGNET training")
    second = ledger.parameters("03", profiles.current(), {"steps": 8})  # edited, and only the parameters cell rerun
    with pytest.raises(ledger.StaleResultsError, match="it shows the results of MAGNET training, which were "
                                                       "computed under other parameters") as refused:
        core.save_figure(fig, "03_heldout", shows=["MAGNET training"])
    assert refused.value._render_traceback_()[0].startswith("figure 03_heldout not saved: notebook 03: ")
    with pytest.raises(ledger.StaleResultsError, match="Table 4 has not run in this kernel"):
        core.show(fig, "03_infilling", shows=["Table 4"])
    core.save_figure(fig, "03_masks")  # a figure that shows no earlier cell's results is saved
    second.computed("MAGNET training")
    core.save_figure(fig, "03_heldout", shows=["MAGNET training"])
    assert _stamps(fig)[0].endswith(f"parameters {second.fingerprint} · results of MAGNET training")
    with pytest.raises(ValueError, match="shows='MAGNET training' must be a list"):
        core.save_figure(fig, "03_heldout", shows="MAGNET training")
    plt.close(fig)


def test_the_claims_file_records_the_fingerprint_the_figures_carry(git_workbook):
    git_workbook()
    made = ledger.parameters("05", profiles.current(), {"prompts": 4})
    row = ledger.Claim(id="openltg.table6.ltd", notebook="05", paper="002", where="Table 6", claim="LTD cuts repetition", paper_value="17.80",
                       ours="12.5", low=-40.0, high=-10.0, method="bootstrap over 32 prompts", n=32, direction=-1)
    path = ledger.record([row], "05", profiles.current(), parameters=made)
    assert ledger.files.read_payload(path)["provenance"]["parameters"] == made.fingerprint
    assert core.figure_stamp("05_ablation").endswith(made.fingerprint)


def test_a_seed_studys_figures_go_beside_the_committed_ones(tmp_path, monkeypatch, git_workbook):
    git_workbook()
    monkeypatch.setenv(profiles.ENV_VAR, "cpu")
    monkeypatch.setenv(profiles.SEED_VAR, "2")
    fig, ax = plt.subplots()
    path = core.save_figure(fig, "02_example")
    assert path == tmp_path / "figures" / "study" / "seed-2" / "02_example.png"
    assert "profile cpu (study seed 2)" in Image.open(path).info["Description"]
    plt.close(fig)


def test_the_seed_spread_draws_every_seed_of_every_trained_row():
    import matplotlib.pyplot as plt

    from helpers.plots import seed_spread_figure

    trained = dict(notebook="02", paper="000", where="Fig. 7", claim="MNTP beats MTP", paper_value="+", ours="x",
                   method="t", n=10, trained=True)
    rows = [ledger.Claim(**trained, id=f"mntp.fig7.q{i}", quantity=f"q{i}", low=0.5 + i, high=3.5 + i, value=2.0 + i, n_seeds=3,
                         seed_values=(1.0 + i, 2.0 + i, 3.0 + i)) for i in range(2)]
    untrained = ledger.Claim(**{**trained, "trained": False}, id="mntp.fig7.plain", quantity="plain", low=0.0, high=1.0)
    fig = seed_spread_figure([*rows, untrained])
    axes = fig.axes
    assert len(axes) == 2  # the row without seeds is not drawn
    for ax, row in zip(axes, rows):
        dots = [line for line in ax.lines if line.get_marker() == "o"]
        assert list(dots[0].get_xdata()) == list(row.seed_values)
        low, high = ax.get_xlim()
        assert low < min(row.low, row.threshold) and high > row.high  # the interval and the threshold are in view
    plt.close(fig)
    with pytest.raises(ValueError, match="rows holds no row with seed_values"):
        seed_spread_figure([untrained])
