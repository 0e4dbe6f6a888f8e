"""The plots panel: one plot per refresh in turn, legends edited in place, step range."""
from __future__ import annotations

import numpy as np

from tensorscope.common.events import CallDigest, StepSummary
from tensorscope.ui.plots import (MAX_CURVES, NEW_CURVES_PER_REFRESH, PLOT_INTERVAL_S, PlotsPanel,
                                  StepRange, nice_ceil, peak_decimate)
from tensorscope.ui.model.session_model import SessionModel

MODULES = 8


def _steps(model: SessionModel, first: int, count: int) -> None:
    for step in range(first, first + count):
        msgs = [CallDigest(step=step, index=i, root=0, path=f"layers.{i}", type="Linear",
                           stats={"norm": 1.0 + i, "zero_fraction": 0.0}, grad_norm=0.1 * (i + 1))
                for i in range(MODULES)]
        msgs.append(StepSummary(step=step, loss=1.0 / (1 + step)))
        model.ingest_many(msgs)


class Clock:
    """A clock the test advances by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _panel(qtbot) -> tuple[PlotsPanel, Clock]:
    panel = PlotsPanel()
    qtbot.addWidget(panel)
    panel.clock = clock = Clock()
    return panel, clock


def _legend(panel: PlotsPanel, kind: str) -> list[str]:
    return sorted(panel.legend_entries(kind))


def _counts(panel: PlotsPanel) -> tuple[int, int, int]:
    """(loss points, grad curves, stat curves) on screen."""
    xs = panel.loss_curve.getData()[0]
    kinds = [kind for kind, _key in panel._curves]
    return (0 if xs is None else len(xs), kinds.count("grad"), kinds.count("stat"))


def test_one_plot_per_refresh_in_turn_each_at_most_five_times_a_second(qtbot):
    panel, clock = _panel(qtbot)
    model = SessionModel()
    _steps(model, 0, 30)
    seen = [_counts(panel)]
    for _ in range(5):
        panel.refresh(model)
        seen.append(_counts(panel))
    # loss, then grad, then stat (a few curves each); then nothing until the interval passed
    n = NEW_CURVES_PER_REFRESH
    assert seen == [(0, 0, 0), (30, 0, 0), (30, n, 0), (30, n, n), (30, n, n), (30, n, n)]
    clock.now += PLOT_INTERVAL_S
    _steps(model, 30, 5)
    panel.refresh(model)
    assert _counts(panel) == (35, n, n)


def _fully_plotted(qtbot):
    """A panel refreshed until every curve of 30 steps is on it."""
    panel, clock = _panel(qtbot)
    model = SessionModel()
    _steps(model, 0, 30)
    for _ in range(3 * MAX_CURVES):
        panel.refresh(model)
        clock.now += PLOT_INTERVAL_S
    return panel, model


def test_curves_arrive_a_few_per_refresh_until_all_are_plotted(qtbot):
    panel, _model = _fully_plotted(qtbot)
    for kind in ("grad", "stat"):
        keys = sorted(k[2] for t, k in panel._curves if t == kind)
        # the modules with the largest gradient norms, with every step plotted
        assert keys == sorted(f"layers.{i}" for i in range(MODULES - MAX_CURVES, MODULES))
        assert _legend(panel, kind) == keys
    steps, values = panel._curves[("grad", (0, 0, "layers.7"))].getData()
    assert list(steps) == list(range(30)) and values[0] == 0.8


def test_focus_swaps_one_curve_and_one_legend_entry(qtbot):
    panel, model = _fully_plotted(qtbot)
    kept = panel._curves[("grad", (0, 0, "layers.7"))]
    panel.set_focus((0, "layers.0"))   # the smallest gradient norm: not plotted until now
    for _ in range(3):
        panel.refresh(model)
    keys = sorted(k[2] for t, k in panel._curves if t == "grad")
    assert keys == ["layers.0"] + [f"layers.{i}" for i in range(MODULES - MAX_CURVES + 1, MODULES)]
    assert _legend(panel, "grad") == keys and _legend(panel, "stat") == keys
    assert panel._curves[("grad", (0, 0, "layers.7"))] is kept   # edited, not rebuilt
    assert panel._curves[("grad", (0, 0, "layers.0"))].opts["pen"].width() == 3


def test_clear_forgets_curves_legends_and_range(qtbot):
    panel, clock = _panel(qtbot)
    model = SessionModel()
    _steps(model, 0, 30)
    for _ in range(6):
        panel.refresh(model)
        clock.now += PLOT_INTERVAL_S
    panel.clear()
    assert panel._curves == {} and _legend(panel, "grad") == []
    assert panel.steps.shown is None and panel.steps.hi is None


def test_nice_ceil():
    assert [nice_ceil(x) for x in (0.5, 1, 1.1, 2.01, 7, 9, 10, 11, 130, 2600)] == \
        [1, 1, 1.2, 2.5, 8, 10, 10, 12, 150, 3000]


def test_step_range_grows_in_steps_and_stops_following_the_user(qtbot):
    panel, clock = _panel(qtbot)
    steps = StepRange(list(panel.plots.values()), clock=clock)   # a clock that stands still
    steps.include([0, 95])
    assert steps.apply() and steps.shown == (0.0, 100.0)
    steps.include([96, 99])
    assert not steps.apply()   # still inside: no repaint of the three plots
    steps.include([100, 101])
    assert steps.apply() and steps.shown == (0.0, 120.0)
    left, right = panel.grad_plot.getViewBox().viewRange()[0]
    assert left < 1 and 120 <= right < 125   # the linked plots follow
    steps.user_changed([True, False])   # the user zoomed the step axis
    steps.include([500])
    assert not steps.apply() and steps.shown == (0.0, 120.0)
    panel.stat_plot.getViewBox().enableAutoRange()   # the auto-range button
    assert steps.apply() and steps.following and steps.shown == (0.0, 600.0)


def test_step_range_leaves_room_for_the_next_seconds_of_fast_training(qtbot):
    panel, _clock = _panel(qtbot)
    clock = Clock()
    steps = StepRange(list(panel.plots.values()), clock=clock)
    steps.include([0, 1000])
    assert steps.apply() and steps.shown == (0.0, 1200.0)   # no rate yet: 5% room
    clock.now += 1.0
    steps.include([1250])   # 250 steps/s: room for 2 s of them
    assert steps.apply() and steps.shown == (0.0, 2000.0)
    clock.now += 1.0
    steps.include([3000])   # 1750 steps/s: room capped at half the span
    assert steps.apply() and steps.shown == (0.0, 5000.0)


def test_peak_decimate_keeps_every_bins_extremes_in_step_order():
    steps = np.arange(10_000)
    values = np.sin(steps / 50.0)
    values[1234], values[7777] = 9.0, -9.0   # spikes a plain stride would miss
    xs, ys = peak_decimate(steps, values, 600)
    assert 500 < len(xs) <= 600
    assert (np.diff(xs) > 0).all() and (ys == values[xs]).all()
    assert ys.max() == 9.0 and ys.min() == -9.0
    assert xs[0] == 0 and xs[-1] == 9_999   # the newest step is always drawn
    short = np.arange(100.0)
    assert peak_decimate(short, short, 600)[0] is short   # small series are drawn whole
    gaps = values.copy()
    gaps[5] = np.nan
    assert len(peak_decimate(steps, gaps, 600)[0]) == len(steps)   # NaN gaps kept as they are


def test_logged_scalars_get_a_plot_of_their_own_once_they_arrive(qtbot):
    from tensorscope.common.events import Scalars

    panel, clock = _panel(qtbot)
    model = SessionModel()
    _steps(model, 0, 4)
    for _ in range(4):
        panel.refresh(model)
        clock.now += PLOT_INTERVAL_S
    assert panel.logged_plot.isHidden() and panel.logged_choice.count() == 0
    for step in range(4):
        model.ingest(Scalars(step=step, source="transformers",
                             values={"learning_rate": 1e-3 * (4 - step), "loss": 2.0 - step / 4}))
    for _ in range(4):
        panel.refresh(model)
        clock.now += PLOT_INTERVAL_S
    assert not panel.logged_plot.isHidden()
    assert [panel.logged_choice.itemData(i) for i in range(panel.logged_choice.count())] == \
        ["learning_rate", "loss"]
    assert panel.logged_choice.currentData() == "loss"   # loss first, beside TensorScope's
    xs, ys = panel._logged[(0, "loss")].getData()
    assert list(xs) == [0, 1, 2, 3] and list(ys) == [2.0, 1.75, 1.5, 1.25]
    panel.logged_choice.setCurrentIndex(0)
    for _ in range(4):
        panel.refresh(model)
        clock.now += PLOT_INTERVAL_S
    assert list(panel._logged) == [(0, "learning_rate")]
    assert _legend(panel, "logged") == ["learning_rate"]
    panel.clear()
    assert panel.logged_plot.isHidden() and panel._logged == {}


def test_legends_name_full_paths_elided_in_the_middle_without_duplicates():
    from tensorscope.ui.plots import elide_middle, legend_label
    paths = [f"transformer.h.{i}.mlp.c_fc" for i in range(12)] + ["resnet.encoder.stages.1."
                                                                   "layers.0.shortcut"]
    labels = [legend_label(p, paths, width=16) for p in paths]
    assert len(set(labels)) == len(labels)
    assert all(label.endswith("mlp.c_fc") for label in labels[:12])
    assert elide_middle("resnet.encoder.stages.1.layers.0.shortcut", 24) \
        == "resnet.enc…rs.0.shortcut"


def test_a_substring_or_regex_filter_chooses_the_modules(qtbot):
    panel, clock = _panel(qtbot)
    model = SessionModel()
    _steps(model, 0, 10)
    panel.module_filter.setText("/layers\\.[12]$/")
    for _ in range(9):
        panel.refresh(model)
        clock.now += PLOT_INTERVAL_S
    assert sorted(k[2] for t, k in panel._curves if t == "grad") == ["layers.1", "layers.2"]
    assert _legend(panel, "grad") == ["layers.1", "layers.2"]
    panel.module_filter.setText("layers.3")
    for _ in range(6):
        panel.refresh(model)
        clock.now += PLOT_INTERVAL_S
    assert _legend(panel, "stat") == ["layers.3"]
    panel.module_filter.setText("/[/")   # not a regex: nothing matches, said in red
    assert panel.module_filter.toolTip() == "not a valid regex"


def test_settled_once_every_curve_is_on_and_again_after_new_data(qtbot):
    panel, clock = _panel(qtbot)
    model = SessionModel()
    _steps(model, 0, 30)
    refreshes = 0
    while not panel.settled(model):
        panel.refresh(model)
        clock.now += PLOT_INTERVAL_S
        refreshes += 1
        assert refreshes < 10 * MAX_CURVES
    assert _counts(panel) == (30, MAX_CURVES, MAX_CURVES)
    _steps(model, 30, 1)
    assert not panel.settled(model)


def test_a_nan_loss_is_marked_not_left_out(qtbot):
    """From the step the loss went NaN the curve has nothing to draw: red marks say
    why, instead of a run that seems to stop."""
    panel, _clock = _panel(qtbot)
    model = SessionModel()
    model.ingest_many([StepSummary(step=s, loss=1.0 / (1 + s) if s < 5 else float("nan"))
                       for s in range(8)])
    panel.refresh(model)
    assert panel.nonfinite_loss_steps() == [5, 6, 7]
    assert list(panel.loss_curve.getData()[0]) == list(range(8))
    panel.clear()
    assert panel.nonfinite_loss_steps() == []


def test_legends_sit_under_the_plots_never_over_the_curves(qtbot):
    """The loss legend of a job of several ranks was drawn inside the plot, over
    the curve's first steps; an empty one painted a blank box in the corner."""
    panel, clock = _panel(qtbot)
    panel.resize(900, 300)
    panel.show()
    model = SessionModel()
    _steps(model, 0, 3)
    for _ in range(6):
        panel.refresh(model)
        clock.now += PLOT_INTERVAL_S
    assert panel.legends["loss"].isHidden()   # one rank: nothing to tell apart
    model.ingest_many([StepSummary(step=s, rank=1, loss=2.0) for s in range(3)])
    model.ingest(StepSummary(step=3, loss=float("nan")))
    for _ in range(6):
        panel.refresh(model)
        clock.now += PLOT_INTERVAL_S
    assert panel.legend_entries("loss") == ["rank 0", "rank 1", "NaN/Inf loss"]
    label, plot = panel.legends["loss"], panel.loss_plot
    assert label.isVisible() and not label.geometry().intersects(plot.geometry())
    assert all(p.getPlotItem().legend is None for p in panel.plots.values())
    panel.clear()
    assert panel.legends["loss"].isHidden() and panel.legend_entries("loss") == []


def test_a_nan_evaluation_loss_is_marked_not_called_an_evaluation_point(qtbot):
    """A script that stops on a NaN loss before backward() ends on an inference step:
    its NaN loss drew nothing, and the legend named an evaluation point not drawn."""
    panel, _clock = _panel(qtbot)
    model = SessionModel()
    model.ingest_many([StepSummary(step=0, loss=39.3),
                       StepSummary(step=1, loss=float("nan"), kind="inference")])
    panel.refresh(model)
    assert panel.nonfinite_loss_steps() == [1]
    assert panel.legend_entries("loss") == ["NaN/Inf loss"]
    assert len(panel.eval_curve.getData()[0] if panel.eval_curve.getData()[0] is not None
               else []) == 0


def test_gradient_norms_spanning_decades_are_plotted_on_a_log_scale(qtbot):
    """One module's norm of 11,000 at one step drew every other curve as 0."""
    panel, clock = _panel(qtbot)
    model = SessionModel()
    for step in range(3):
        model.ingest_many([CallDigest(step=step, index=i, root=0, path=f"layers.{i}",
                                      type="Linear", grad_norm=11000.0 if step == 1 and i == 0
                                      else 0.01 * (i + 1)) for i in range(3)]
                          + [StepSummary(step=step, loss=1.0)])
    for _ in range(12):
        panel.refresh(model)
        clock.now += PLOT_INTERVAL_S
    assert panel.log_scale("grad") and "(log)" in panel.grad_plot.getPlotItem().titleLabel.text
    panel.clear()
    model2 = SessionModel()
    _steps(model2, 0, 5)
    for _ in range(12):
        panel.refresh(model2)
        clock.now += PLOT_INTERVAL_S
    assert not panel.log_scale("grad")


def test_a_legend_wraps_between_entries_never_inside_an_elided_name(qtbot):
    from PySide6.QtGui import QTextDocument

    panel, clock = _panel(qtbot)
    model = SessionModel()
    paths = [f"resnet.embedder.embedder.{n}" for n in ("activation", "normalization",
                                                         "convolution", "pooler")]
    for step in range(3):
        model.ingest_many([CallDigest(step=step, index=i, root=0, path=p, type="Conv2d",
                                      stats={"norm": 1.0 + i}, grad_norm=0.5 + i)
                           for i, p in enumerate(paths)] + [StepSummary(step=step, loss=1.0)])
    for _ in range(3 * MAX_CURVES):
        panel.refresh(model)
        clock.now += PLOT_INTERVAL_S
    html = panel.legends["grad"].text()
    assert "…" in html   # the names are elided
    for width in (260, 300, 360, 420):   # wider than any one entry, as the plots are
        doc = QTextDocument()
        doc.setHtml(html)
        doc.setTextWidth(width)
        doc.size()   # lays the text out
        block = doc.begin()
        layout, text = block.layout(), block.text()
        starts = [layout.lineAt(i).textStart() for i in range(layout.lineCount())]
        assert len(starts) > 1
        for start in starts:   # every line begins with an entry's colour square
            assert text[start:].lstrip(" \u00a0").startswith("■"), (width, text[start:start + 20])


def test_the_hidden_logged_plot_leaves_its_room_to_the_others(qtbot):
    """Its empty column took a quarter of the panel before anything was logged."""
    panel, _clock = _panel(qtbot)
    panel.resize(1000, 300)
    panel.show()
    qtbot.waitExposed(panel)
    widths = [panel.plots[k].width() for k in ("loss", "grad", "stat")]
    assert sum(widths) > 0.85 * panel.width() and max(widths) - min(widths) <= 2


def _step_labels(panel: PlotsPanel) -> list[tuple[float, float, str]]:
    """The step axis's labels as pyqtgraph would draw them: (left, right, text)."""
    from PySide6.QtGui import QImage, QPainter
    axis = panel.loss_plot.getAxis("bottom")
    image = QImage(axis.boundingRect().size().toSize(), QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        texts = axis.generateDrawSpecs(painter)[2]
    finally:
        painter.end()
    return sorted((r.left(), r.right(), text) for r, _flags, text in texts)


def test_step_labels_stand_apart_in_narrow_plots_and_stay_dense_in_wide_ones(qtbot):
    """A narrow plot labelled 2000 4000 6000 8000 run into one another (pyqtgraph
    always labels its coarsest level, however crowded)."""
    from tensorscope.ui.plots import StepAxis
    panel = PlotsPanel()
    qtbot.addWidget(panel)
    panel.show()
    for width in (420, 600, 900):   # three plots side by side: 96, 156 and 256 px
        panel.resize(width, 260)
        for lo, hi in ((0, 1050), (0, 10_500), (9000, 12_000), (0, 120_000), (0, 50)):
            panel.loss_plot.setXRange(lo, hi, padding=0.02)
            qtbot.waitUntil(lambda lo=lo: panel.loss_plot.getAxis("bottom").range[1] > lo)
            labels = _step_labels(panel)
            gaps = [b[0] - a[1] for a, b in zip(labels, labels[1:])]
            assert all(g >= StepAxis.GAP for g in gaps), (width, lo, hi, labels)
            assert labels, (width, lo, hi)
    panel.resize(1500, 260)
    panel.loss_plot.setXRange(0, 10_500, padding=0.02)
    qtbot.waitUntil(lambda: panel.loss_plot.getAxis("bottom").width() > 400)
    assert len(_step_labels(panel)) >= 5


def _sampled_steps(model: SessionModel, count: int, every: int) -> None:
    """``count`` steps whose activation statistics were taken every ``every`` steps
    (``--stats-every``): the other steps' digests carry gradient norms only."""
    for step in range(count):
        stats = {"norm": 2.0, "zero_fraction": 0.0} if step % every == 0 else None
        model.ingest_many([CallDigest(step=step, index=0, root=0, path="layers.0",
                                      type="Linear", stats=stats, grad_norm=0.1),
                           StepSummary(step=step, loss=1.0)])


def _refreshed(qtbot, model: SessionModel) -> PlotsPanel:
    panel, clock = _panel(qtbot)
    for _ in range(6):
        panel.refresh(model)
        clock.now += PLOT_INTERVAL_S
    return panel


def test_the_statistic_plot_says_how_often_statistics_were_taken(qtbot):
    """Six steps with statistics at step 0 only drew one dot per module at step 0 and
    nothing after, as though the activations had gone: the title says it."""
    model = SessionModel()
    _sampled_steps(model, 6, every=10)
    panel = _refreshed(qtbot, model)
    assert "step 0 only" in panel.stat_plot.getPlotItem().titleLabel.text
    assert "--stats-every" in panel.stat_plot.toolTip()
    model = SessionModel()
    _sampled_steps(model, 35, every=10)
    title = _refreshed(qtbot, model).stat_plot.getPlotItem().titleLabel.text
    assert "every 10 steps" in title
    model = SessionModel()
    _sampled_steps(model, 6, every=1)
    title = _refreshed(qtbot, model).stat_plot.getPlotItem().titleLabel.text
    assert "every" not in title and "only" not in title


def test_a_loss_module_inside_the_model_is_left_out_of_the_module_plots(qtbot):
    """A Hugging Face model computes its CrossEntropyLoss inside its forward (a module
    named ``~CrossEntropyLoss``): its gradient norm of 1 took the grad plot's first
    curve and squeezed the layers' norms (0.2) into a flat band at its foot."""
    model = SessionModel()
    for step in range(5):
        msgs = [CallDigest(step=step, index=i, root=0, path=f"layers.{i}", type="Linear",
                           stats={"norm": 1.0 + i}, grad_norm=0.1 * (i + 1)) for i in range(3)]
        msgs.append(CallDigest(step=step, index=3, root=0, path="~CrossEntropyLoss",
                               type="CrossEntropyLoss", stats={"norm": 6.0}, grad_norm=1.0))
        msgs.append(StepSummary(step=step, loss=6.0))
        model.ingest_many(msgs)
    panel = _refreshed(qtbot, model)
    assert _legend(panel, "grad") == ["layers.0", "layers.1", "layers.2"]
    panel.set_focus((0, "~CrossEntropyLoss"))   # selected: it is plotted
    for _ in range(3):
        panel.refresh(model)
        panel.clock.now += PLOT_INTERVAL_S
    assert "~CrossEntropyLoss" in _legend(panel, "grad")


def test_plots_of_a_forward_only_run_say_it_trained_nothing(qtbot):
    """An evaluation script (forwards under no_grad, no optimizer): the loss plot said
    'none of their backward passes started from a loss TensorScope saw', as if
    backward passes had run."""
    model = SessionModel()
    for step in range(3):
        model.ingest_many([CallDigest(step=step, index=0, root=0, path="layers.0",
                                      type="Linear", stats={"norm": 2.0}),
                           StepSummary(step=step, kind="inference")])
    panel = _refreshed(qtbot, model)
    for kind in ("loss", "grad"):
        assert "forward passes only" in panel.notes[kind].text(), kind
    model.ingest_many([StepSummary(step=3, loss=1.0)])   # a training step: as before
    panel = _refreshed(qtbot, model)
    assert panel.notes["loss"].text() == ""
    assert "forward passes only" not in panel.notes["grad"].text()


def test_a_roots_curve_is_named_after_the_root(qtbot):
    """A root's own curve read '(root)': the model's or the loss's?"""
    from tensorscope.common.events import Hello, ModuleTree
    panel, clock = _panel(qtbot)
    model = SessionModel()
    model.ingest_many([Hello(), ModuleTree(roots=[
        {"root": 0, "name": "Sequential", "type": "Sequential",
         "modules": [{"path": "", "type": "Sequential", "children": []}]}])])
    for step in range(3):
        model.ingest_many([CallDigest(step=step, index=0, root=0, path="", type="Sequential",
                                      stats={"norm": 2.0, "zero_fraction": 0.0}, grad_norm=0.5),
                           StepSummary(step=step, loss=1.0)])
    panel.set_focus((0, ""))   # the root selected: its curve is drawn
    for _ in range(4):
        panel.refresh(model)
        clock.now += PLOT_INTERVAL_S
    assert _legend(panel, "grad") == ["Sequential"]


def test_a_narrow_plot_shows_a_shorter_title_whole(qtbot):
    """At 1024 px the statistic plot's title was cut: 'Activation statistic · every 5 st'."""
    from PySide6.QtGui import QFont, QFontMetricsF
    import re
    model = SessionModel()
    _sampled_steps(model, 35, every=5)
    panel = _refreshed(qtbot, model)
    panel.resize(1500, 260)
    panel.show()
    item = panel.stat_plot.getPlotItem()
    qtbot.waitUntil(lambda: item.titleLabel.text.startswith("Activation statistic"),
                    timeout=2000)
    panel.resize(600, 260)   # three plots side by side: 200 px each
    font = QFont(panel.stat_plot.font())
    font.setPointSizeF(9.0)
    metrics = QFontMetricsF(font)

    def plain() -> str:
        return re.sub(r"<[^>]+>", "", item.titleLabel.text)
    # centred over the plot less its y axis: wider, it ran off the plot's right edge
    # (and widened the view box past the plot: the scene was cut)
    qtbot.waitUntil(lambda: panel.stat_plot.width() < 300, timeout=2000)
    room = panel.stat_plot.width() - item.getAxis("left").width()
    qtbot.waitUntil(lambda: metrics.horizontalAdvance(plain()) <= room, timeout=2000)
    assert "every 5 steps" in plain()
