"""Plots over steps (pyqtgraph): loss, gradient norm and a statistic per module.

Clicking a curve selects its module and the step under the cursor.
"""
from __future__ import annotations

import time

import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from tensorscope.ui.session_model import ModuleKey, SessionModel
from tensorscope.ui.theme import Theme, make_theme

CURVE_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
                 "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
STATS = {"norm": "activation norm", "zero_fraction": "zero fraction", "mean": "mean",
         "std": "std", "max": "max"}
MAX_CURVES = 6
PLOT_INTERVAL_S = 0.2
NEW_CURVES_PER_REFRESH = 3


class PlotsPanel(QWidget):
    """Three linked plots; emits ``point_selected(root, path, step)``."""

    point_selected = Signal(int, str, int)
    step_selected = Signal(int)

    def __init__(self, parent: QWidget | None = None, theme: Theme | None = None) -> None:
        super().__init__(parent)
        self.theme = theme or make_theme()
        pg.setConfigOptions(antialias=False)   # antialiased curves cost ~3× to paint
        fg = self.theme.subtle.name()
        self.loss_plot = self._plot("Loss", fg)
        self.grad_plot = self._plot("Gradient norm per module", fg)
        self.stat_plot = self._plot("Activation statistic per module", fg)
        self.grad_plot.setXLink(self.loss_plot)
        self.stat_plot.setXLink(self.loss_plot)
        self.loss_curve = self.loss_plot.plot(pen=pg.mkPen(self.theme.accent, width=2))
        self.loss_curve.curve.setClickable(True, width=8)
        self.loss_curve.sigClicked.connect(lambda item, ev: self._loss_clicked(ev))
        # Evaluation losses (inference steps) as points, apart from the training curve.
        self.eval_curve = self.loss_plot.plot(pen=None, symbol="d", symbolSize=7,
                                              symbolPen=None, symbolBrush="#e08a1e")
        self.stat_choice = QComboBox(self)
        for key, label in STATS.items():
            self.stat_choice.addItem(label, key)
        self.stat_choice.currentIndexChanged.connect(lambda _i: self._force())
        self.focus: ModuleKey | None = None
        self._curves: dict[tuple[str, ModuleKey], pg.PlotDataItem] = {}
        self._colours: dict[ModuleKey, str] = {}
        self._legend_keys: tuple[ModuleKey, ...] = ()
        self._rev = -1
        self._refreshed_at = 0.0
        self._budget = NEW_CURVES_PER_REFRESH
        self.step_line = None
        controls = QHBoxLayout()
        controls.addWidget(QLabel("Statistic:", self))
        controls.addWidget(self.stat_choice)
        controls.addStretch(1)
        row = QHBoxLayout()
        for plot in (self.loss_plot, self.grad_plot, self.stat_plot):
            row.addWidget(plot)
        box = QVBoxLayout(self)
        box.setContentsMargins(4, 2, 4, 2)
        box.addLayout(controls)
        box.addLayout(row, 1)

    def _plot(self, title: str, fg: str, log: bool = False) -> pg.PlotWidget:
        w = pg.PlotWidget(self, background=self.theme.background)
        w.setTitle(title, color=self.theme.text.name(), size="9pt")
        w.showGrid(x=True, y=True, alpha=0.15)
        for axis in ("left", "bottom"):
            w.getAxis(axis).setTextPen(fg)
            w.getAxis(axis).setPen(fg)
        w.setLogMode(y=log)
        w.setMinimumHeight(120)
        bg = self.theme.card
        bg.setAlpha(200)
        legend = w.addLegend(offset=(40, 2), labelTextColor=self.theme.subtle,
                             labelTextSize="7pt", brush=bg, verSpacing=-8, horSpacing=6)
        legend.setColumnCount(3)
        return w

    def _force(self) -> None:
        self._rev = -1
        self._refreshed_at = 0.0

    def set_focus(self, key: ModuleKey | None) -> None:
        """Always plot this module (the selection) first, highlighted."""
        if key != self.focus:
            self.focus = key
            self._legend_keys = ()   # re-weight the pens
            self._force()

    # ----------------------------------------------------------- refresh ---
    def refresh(self, model: SessionModel) -> None:
        """Redraw from the model's bounded series (GUI thread, at most 5 times a second).

        New curves are added a few per call so that a burst never stalls the GUI.
        """
        now = time.monotonic()
        if model.data_rev == self._rev or now - self._refreshed_at < PLOT_INTERVAL_S:
            return
        self._rev = model.data_rev
        self._refreshed_at = now
        self._budget = NEW_CURVES_PER_REFRESH
        steps, values = model.loss.arrays()
        self.loss_curve.setData(steps, values, symbol="o" if len(steps) < 24 else None,
                                symbolSize=5, symbolPen=None, symbolBrush=self.theme.accent)
        self.eval_curve.setData(*model.eval_loss.arrays())
        keys = self._chosen(model)
        stat = self.stat_choice.currentData()
        wanted = {("grad", k) for k in keys} | {("stat", k) for k in keys}
        for tag in list(self._curves):
            if tag not in wanted:
                plot = self.grad_plot if tag[0] == "grad" else self.stat_plot
                plot.removeItem(self._curves.pop(tag))
        for key in keys:
            series = model.module_series.get(key)
            self._update_curve(("grad", key), self.grad_plot, series, "grad_norm")
            self._update_curve(("stat", key), self.stat_plot, series, stat)
        shown = tuple(k for k in keys if ("grad", k) in self._curves)
        if shown != self._legend_keys:
            self._legend_keys = shown
            self._rebuild_legends(shown)

    def _colour(self, key: ModuleKey) -> str:
        """A stable colour per module (the same in both plots and the legend)."""
        if key not in self._colours:
            self._colours[key] = CURVE_COLOURS[len(self._colours) % len(CURVE_COLOURS)]
        return self._colours[key]

    def _rebuild_legends(self, keys: tuple[ModuleKey, ...]) -> None:
        for kind, plot in (("grad", self.grad_plot), ("stat", self.stat_plot)):
            legend = plot.getPlotItem().legend
            legend.clear()
            for key in keys:
                item = self._curves.get((kind, key))
                if item is not None:
                    item.setPen(pg.mkPen(self._colour(key), width=3 if key == self.focus else 1.5))
                    legend.addItem(item, ".".join(key[1].split(".")[-2:]))

    def _chosen(self, model: SessionModel) -> list[ModuleKey]:
        """The focus module plus the modules with the largest latest grad norm."""
        def rank(kv) -> float:
            last = kv[1].last("grad_norm")
            return -last if last is not None and last == last else 0.0
        ranked = sorted(model.module_series.items(), key=rank)
        leaves = [k for k, _ in ranked if k[1] and not getattr(model.module(*k), "children", None)]
        keys = leaves[:MAX_CURVES]
        if self.focus is not None and self.focus in model.modules:
            keys = [self.focus] + [k for k in keys if k != self.focus][:MAX_CURVES - 1]
        return keys

    def _update_curve(self, tag, plot: pg.PlotWidget, series, column: str) -> None:
        if series is None or not len(series):
            return
        steps, values = series.arrays(column, finite=True)
        if not len(steps):
            return
        item = self._curves.get(tag)
        if item is None:
            if self._budget <= 0:
                self._rev = -1   # come back for the rest next time
                return
            self._budget -= 1
            key = tag[1]
            item = pg.PlotDataItem(pen=pg.mkPen(self._colour(key), width=1.5), connect="finite")
            plot.addItem(item)
            item.curve.setClickable(True, width=8)
            item.sigClicked.connect(lambda it, ev, k=key, p=plot: self._clicked(k, p, ev))
            self._curves[tag] = item
        sparse = len(steps) < 24   # a few points: draw them, lines alone would not show
        item.setData(steps, values, connect="finite", symbol="o" if sparse else None,
                     symbolSize=5, symbolPen=None,
                     symbolBrush=self._colour(tag[1]))

    def _step_at(self, plot: pg.PlotWidget, ev) -> int:
        pos = plot.getPlotItem().vb.mapSceneToView(ev.scenePos())
        return int(round(pos.x()))

    def _clicked(self, key: ModuleKey, plot: pg.PlotWidget, ev) -> None:
        self.point_selected.emit(key[0], key[1], self._step_at(plot, ev))

    def _loss_clicked(self, ev) -> None:
        self.step_selected.emit(self._step_at(self.loss_plot, ev))

    def mark_step(self, step: int | None) -> None:
        """Draw a vertical marker at ``step`` on every plot (None: remove)."""
        for plot in (self.loss_plot, self.grad_plot, self.stat_plot):
            for item in list(plot.items()):
                if getattr(item, "_ts_marker", False):
                    plot.removeItem(item)
            if step is not None:
                line = pg.InfiniteLine(step, angle=90, pen=pg.mkPen(self.theme.executing, width=1))
                line._ts_marker = True
                plot.addItem(line)
