"""plot_sweep: a sweep's final NLL is drawn against the value swept (chapter 5's depths), not against the step."""
import matplotlib

matplotlib.use("agg", force=False)   # tests only: no window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from musictx_lite.classroom import plots  # noqa: E402
from musictx_lite.engine.training import History  # noqa: E402


def run(final: float, steps: int = 166) -> History:
    """A run evaluated once, at its last step, as chapter 5's depth runs are."""
    return History(step=list(range(1, steps + 1)), train_loss=list(np.linspace(4.0, final + 0.1, steps)),
                   eval_step=[steps], valid_nll=[final])


def test_the_nll_panel_puts_the_swept_value_on_x_with_one_dot_per_run():
    runs = {1: run(2.1), 2: run(1.8), 4: run(1.7)}
    base = {"unigram": 3.4, "7-gram": 1.9, "same voice": 1.75}
    fig = plots.plot_sweep(runs, base, xlabel="blocks L", label=lambda L: f"{L} block{'s' * (L > 1)}")
    fig.canvas.draw()
    left, nll = fig.axes
    assert list(nll.get_xticks()) == [1, 2, 4]                            # depths, not steps
    lo, hi = nll.get_xlim()
    assert lo < 1 and 4 < hi < 10                                         # not 158..174
    dots = [ln for ln in nll.get_lines() if ln.get_marker() == "o"]
    assert [(float(ln.get_xdata()[0]), float(ln.get_ydata()[0])) for ln in dots] == [(1, 2.1), (2, 1.8), (4, 1.7)]
    assert sorted(t.get_text() for t in nll.texts) == ["1.700", "1.800", "2.100"]   # each dot's value
    # the dots take the colours of their training curves on the left
    assert [ln.get_color() for ln in dots] == [ln.get_color() for ln in left.get_lines()]
    assert [ln.get_label() for ln in left.get_lines()] == ["1 block", "2 blocks", "4 blocks"]
    assert nll.get_xlabel() == "blocks L"


def test_the_baselines_are_drawn_as_everywhere_else_and_a_far_one_is_named():
    base = {"unigram": 3.4, "7-gram": 1.9, "same voice": 1.75}
    fig = plots.plot_sweep({1: run(2.1), 2: run(1.8)}, base)
    nll = fig.axes[1]
    lines = {ln.get_label().split(" (")[0]: ln for ln in nll.get_lines()
             if ln.get_label().split(" (")[0] in base}
    ref = plots.plot_history({"a": run(2.1)}, base).axes[1]
    ref_lines = {ln.get_label().split(" (")[0]: ln for ln in ref.get_lines()
                 if ln.get_label().split(" (")[0] in base}
    assert {k: (ln.get_color(), ln.get_linestyle()) for k, ln in lines.items()} == \
        {k: (ln.get_color(), ln.get_linestyle()) for k, ln in ref_lines.items()}
    assert "above the plot" in lines["unigram"].get_label() and not len(lines["unigram"].get_xdata())
    lo, hi = nll.get_ylim()
    assert lo < 1.75 and 2.1 < hi < 3.4                                   # both near lines in view
    fig.canvas.draw()
    assert nll.get_legend().get_window_extent().x0 >= nll.get_window_extent().x1   # legend off the panel
    plt.close("all")
