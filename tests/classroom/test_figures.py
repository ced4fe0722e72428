"""Figures: every heatmap has a colour bar, a boolean matrix never renders as one colour, integer axes."""
import re
from pathlib import Path

import matplotlib

matplotlib.use("agg", force=False)   # tests only: no window (the book never sets the backend)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from musictx_lite.classroom import plots  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def colours(im) -> np.ndarray:
    """The RGBA colours the image's pixels are drawn with, (H, W, 4)."""
    return im.to_rgba(im.get_array())


def test_heatmap_has_a_colour_bar_and_a_bare_imshow_is_caught():
    fig, (a, b) = plt.subplots(1, 2)
    plots.heatmap(a, np.random.default_rng(0).random((5, 5)), "weight")
    b.imshow(np.eye(3))
    missing = plots.images_without_colorbar(fig)
    assert len(missing) == 1 and missing[0].axes is b
    plt.close(fig)


@pytest.mark.parametrize("fill", [True, False])
def test_a_constant_boolean_matrix_is_not_drawn_blank(fill):
    fig, ax = plt.subplots()
    im = plots.heatmap(ax, torch.full((6, 6), fill), "nonzero")
    drawn = colours(im).reshape(-1, 4)
    assert (drawn == drawn[0]).all()
    assert np.allclose(drawn[0][:3], matplotlib.colors.to_rgb(plots.BOOL_COLORS[int(fill)]))
    assert not np.allclose(drawn[0][:3], 1.0) or not fill          # True is never white
    assert [t.get_text() for t in im.colorbar.ax.get_yticklabels()] == ["False", "True"]
    plt.close(fig)


def test_true_and_false_get_different_colours_in_every_panel():
    fig, axes = plt.subplots(1, 2)
    ims = plots.heatmaps(axes, [np.ones((4, 4), bool), np.tri(4, dtype=bool)], "allowed", labels=("no", "yes"))
    assert not np.allclose(colours(ims[0])[0, 0], colours(ims[1])[0, 3])   # True in one, False in the other
    assert np.allclose(colours(ims[0])[0, 0], colours(ims[1])[0, 0])       # True in both
    assert not plots.images_without_colorbar(fig)
    plt.close(fig)


def test_shared_scale_and_integer_ticks():
    fig, axes = plt.subplots(1, 3)
    ims = plots.heatmaps(axes, [np.full((12, 12), v) for v in (0.1, 0.2, 0.3)], "weight", titles=["a", "b", "c"])
    assert {im.norm.vmin for im in ims} == {0.1} and {im.norm.vmax for im in ims} == {0.3}
    fig.canvas.draw()
    for ax in axes:
        ticks = ax.get_xticks()
        assert np.allclose(ticks, np.round(ticks)), ticks                  # no 2.5 on an index axis
    assert [ax.get_title() for ax in axes] == ["a", "b", "c"]
    plt.close(fig)


def test_a_nearly_uniform_matrix_shows_its_range():
    """Weights near 0.25 on a 0-1 scale would all look alike; by default the scale is the data's range."""
    fig, ax = plt.subplots()
    im = plots.heatmap(ax, np.array([[0.22, 0.33], [0.21, 0.24]]), "weight")
    assert (im.norm.vmin, im.norm.vmax) == (0.21, 0.33)
    plt.close(fig)


def test_package_draws_no_bare_heatmap():
    for path in sorted((ROOT / "musictx_lite").rglob("*.py")):
        if path.name != "plots.py":
            assert not re.search(r"\.(imshow|matshow|pcolormesh)\(", path.read_text()), path


def test_style_sets_the_resolution():
    with matplotlib.rc_context():
        plots.style()
        assert matplotlib.rcParams["figure.dpi"] == plots.DPI >= 150


def test_history_legend_does_not_cover_the_baselines():
    """plot_history: the NLL panel's legend sits outside its axes, so no baseline line is hidden."""
    from musictx_lite.engine.training import History
    h = History(step=list(range(1, 101)), train_loss=list(np.linspace(3.5, 0.6, 100)),
                eval_step=[25, 50, 75, 100], valid_nll=[3.2, 1.5, 0.9, 0.7])
    fig = plots.plot_history({"a": h, "b": h}, {"unigram": 3.41, "7-gram": 1.02})
    fig.canvas.draw()
    nll = fig.axes[1]
    legend = nll.get_legend().get_window_extent()
    assert legend.x0 >= nll.get_window_extent().x1                        # right of the panel
    assert legend.x1 <= fig.bbox.x1 + 1                                   # and inside the figure
    assert {t.get_text() for t in nll.get_legend().get_texts()} >= {"unigram (3.410)", "7-gram (1.020)"}
    plt.close(fig)


def test_piano_roll_ticks_fall_on_bar_lines():
    import matplotlib.pyplot as plt
    import numpy as np

    from musictx_lite.classroom.plots import piano_roll

    grid = np.tile(np.array([[72, 67, 60, 48]]), (16 * 6 + 8, 1))               # 6 and a half bars
    ax = piano_roll(grid, start=16)                                            # starts on bar 2
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert len(ticks) >= 6 and all(t % 4 == 0 for t in ticks)                   # 4 quarters a bar
    plt.close("all")


def test_baselines_look_the_same_everywhere_and_a_far_one_is_named_not_drawn():
    import matplotlib.pyplot as plt

    from musictx_lite.classroom.plots import plot_history, plot_seeds
    from musictx_lite.engine.training import History

    base = {"unigram": 2.9, "7-gram": 1.02, "same voice": 1.05}
    h = History(step=[1, 2, 3, 4], train_loss=[2.0, 1.5, 1.2, 1.1], eval_step=[2, 4], valid_nll=[1.3, 1.0])
    styles = []
    for fig in (plot_history({"a": h}, base), plot_history({"a": h, "b": h, "c": h}, base),
                plot_seeds({"a": [1.0, 1.1]}, base)):
        ax = fig.axes[-1] if len(fig.axes) == 2 else fig.axes[0]
        lines = {ln.get_label().split(" (")[0]: ln for ln in ax.get_lines() if ln.get_label().split(" (")[0] in base}
        styles.append({k: (ln.get_color(), ln.get_linestyle()) for k, ln in lines.items()})
        assert "above the plot" in lines["unigram"].get_label() and not len(lines["unigram"].get_xdata())
        assert ax.get_ylim()[1] < 2.9                                            # the far line does not squash
    assert styles[0] == styles[1] == styles[2]                                 # whatever the number of runs
    plt.close("all")


def test_a_performance_roll_starts_at_its_first_note_not_at_the_recordings_silence():
    from musictx_lite.classroom.plots import piano_roll
    from musictx_lite.io import performance as perf

    notes = np.array([[3.9, 4.4, 60, 70], [4.5, 5.0, 64, 60], [20.0, 21.0, 67, 80]])
    piece = perf.Performance("p", notes, perf.encode(notes), "p", "p.mid")
    ax = piano_roll(piece, seconds=15)
    assert ax.get_xlim() == pytest.approx((3.9, 18.9))          # 15 s of music from the first note
    assert len(ax.patches) == 2                                  # the note at 20 s lies outside them
    plt.close("all")
