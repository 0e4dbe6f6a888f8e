"""Plots over steps (pyqtgraph): loss, gradient norm and a statistic per module.

Clicking a curve selects its module and the step under the cursor. In a
distributed job the loss and the focus module's curves of every rank are
overlaid (one colour per module, a dash pattern per rank); the other curves
are the selected rank's.

Repainting a plot costs several milliseconds (axes, grid, text), so the panel
keeps the work of one repaint-timer tick small: it updates at most one plot
per call, in turn (each at most 5 times a second), draws at most two points
per pixel column (:func:`peak_decimate`), adds curves and legend entries one
at a time instead of rebuilding legends, and lets the shared step axis grow in
steps (:class:`StepRange`) so that new data in one plot does not repaint the
other two every time.
"""
from __future__ import annotations

import html
import math
import re
import time
from typing import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QFont, QFontMetricsF
from PySide6.QtWidgets import QApplication, QComboBox, QHBoxLayout, QLabel, QLineEdit, QVBoxLayout, QWidget

from tensorscope.common.statistics import PLOTTED
from tensorscope.ui.elided import CentredNote
from tensorscope.ui.model.changes import ChangeCursor
from tensorscope.ui.model.session_model import LocalKey, ModuleKey, SessionModel
from tensorscope.ui.theme import Theme, make_theme

CURVE_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
                 "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
STATS = {s.key: s.label for s in PLOTTED}
MAX_CURVES = 6
#: each plot's title, then shorter forms for a narrow plot (``FittedTitle``)
TITLE_FORMS = {"Gradient norm per module": ("Gradient norm per module", "Gradient norm",
                                            "Grad norm"),
               "Activation statistic per module": ("Activation statistic per module",
                                                   "Activation statistic", "Activations")}
LEGEND_MIN_WIDTH = 60   # px
PLOT_INTERVAL_S = 0.2
NEW_CURVES_PER_REFRESH = 1
PLOTS = ("loss", "grad", "stat")
RANK_DASHES = (None, [4, 3], [1, 3], [6, 2, 1, 2])  # rank % 4: solid, dashed, dotted, dash-dot
# The fourth plot shows what the user or a framework logged (``Scalars``: the
# Trainer's loss, learning rate, grad norm), one name at a time; it appears with
# the first such values.
LOGGED = "logged"
ALL_PLOTS = PLOTS + (LOGGED,)
#: the session model's change topics each plot draws (``changes.SESSION_TOPICS``)
PLOT_TOPICS = {"loss": ("steps", "ranks"), LOGGED: ("scalars",)}
MODULE_PLOT_TOPICS = ("calls", "structure", "ranks")   # the grad and stat plots
#: the grad plot turns to a log scale when its largest norm is this many times its
#: smallest positive one, and back to linear under the second (no flapping)
LOG_SPAN_ON, LOG_SPAN_OFF = 1e3, 1e2
NICE_STEPS = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def nice_ceil(x: float) -> float:
    """The smallest of 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10^k that is ≥ ``x`` (x ≥ 1)."""
    if x <= 1:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(x))
    return next(n * scale for n in NICE_STEPS if n * scale >= x * (1 - 1e-12))


def elide_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters with an ellipsis in the middle
    (``resnet.enco…layers.0.shortcut``): both ends of a module path say the most."""
    if len(text) <= width:
        return text
    tail = (width - 1) * 3 // 5
    return text[:width - 1 - tail] + "…" + text[len(text) - tail:]


def legend_label(path: str, others, width: int = 30) -> str:
    """``path`` elided in the middle, wide enough that no other path reads the same."""
    others = [o for o in others if o != path]
    for w in range(width, len(path) + 1):
        label = elide_middle(path, w)
        if all(elide_middle(o, w) != label for o in others):
            return label
    return path


def module_filter(text: str) -> Callable[[str], bool] | None:
    """A predicate on module paths: a substring (any case), or a regex written ``/…/``;
    None when ``text`` is an invalid regex (the caller says so)."""
    import re
    t = text.strip()
    if not t:
        return lambda _path: True
    if len(t) > 1 and t.startswith("/") and t.endswith("/"):
        try:
            pattern = re.compile(t[1:-1], re.IGNORECASE)
        except re.error:
            return None
        return lambda path: pattern.search(path) is not None
    low = t.lower()
    return lambda path: low in path.lower()


def peak_decimate(steps: np.ndarray, values: np.ndarray, max_points: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """At most ~``max_points`` points keeping each bin's minimum and maximum, in order.

    A plot a few hundred pixels wide cannot show more, and drawing 1,000+
    points per curve is most of a plot's paint time; the extremes keep spikes
    visible. Series with NaN (gaps) are returned whole.
    """
    n = len(steps)
    if n <= max_points or max_points < 4 or not np.isfinite(values).all():
        return steps, values
    k = math.ceil(n / (max_points // 2))   # points per bin
    m = n // k * k
    rows = values[:m].reshape(-1, k)
    lo, hi = rows.argmin(axis=1), rows.argmax(axis=1)
    first, second = np.minimum(lo, hi), np.maximum(lo, hi)
    base = np.arange(0, m, k)
    idx = np.stack([base + first, base + second], axis=1).ravel()
    idx = np.concatenate([idx, np.arange(m, n)])   # the tail that fills no bin
    return steps[idx], values[idx]


#: what an empty plot says: before any step, and once steps came without its values
EMPTY_NOTES = {
    "loss": ("The loss appears with the first training step",
             "No loss in these steps: none of their backward passes started from a loss "
             "TensorScope saw"),
    "grad": ("Gradient norms appear after the first backward pass",
             "No gradient norms: no module received a gradient in these steps"),
    "stat": ("Activation statistics appear on the first statistics step",
             "No activation statistics in these steps (they are taken every --stats-every "
             "steps, or not in --mode shapes)"),
}

#: the loss and gradient plots of a run with no training step (an evaluation script)
FORWARD_ONLY = ("Every step was forward passes only (inference: no optimizer step): "
                "no training loss or gradients to plot")


class StepAxis(pg.AxisItem):
    """The step axis: whole steps only (a few steps were labelled 0, 0.5, 1.0), and
    labels at least ``GAP`` px apart: pyqtgraph always labels its coarsest level,
    which in a narrow plot ran ``9,000 10,000 11,000`` into one another."""

    GAP = 10     # px between two labels
    PITCH = 70   # px from one labelled tick to the next, at least (a fifth of a short axis)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.setStyle(maxTextLevel=0)   # only the coarsest level, spaced to fit, has labels

    def labels_fit(self, spacing: float, lo: float, hi: float, size: float) -> bool:
        """Whether the labels of ticks every ``spacing`` steps in ``[lo, hi]`` stand
        ``GAP`` px apart on an axis ``size`` px long (those past its ends are not drawn)."""
        metrics = QFontMetricsF(self.style.get("tickFont") or QApplication.font())
        px = size / (hi - lo)
        first = math.ceil(lo / spacing) * spacing
        values = [first + i * spacing for i in range(int((hi - first) / spacing) + 1)]
        spans = []
        for value, text in zip(values, self.tickStrings(values, 1, spacing)):
            x, half = (value - lo) * px, metrics.horizontalAdvance(text) / 2
            if x - half >= 0 and x + half <= size:
                spans.append((x - half, x + half))
        return all(b[0] - a[1] >= self.GAP for a, b in zip(spans, spans[1:]))

    def tickSpacing(self, minVal: float, maxVal: float, size: float):  # noqa: N802,N803 (pyqtgraph API)
        """Labelled ticks at the finest whole-step spacing whose labels stand ``GAP``
        px apart and ``PITCH`` px from one another; pyqtgraph's finer levels that
        divide it as unlabelled ticks."""
        levels = [(spacing, offset) for spacing, offset in super().tickSpacing(minVal, maxVal, size)
                  if spacing >= 1]
        lo, hi = min(minVal, maxVal), max(minVal, maxVal)
        if not (hi > lo and size > 0 and math.isfinite(hi - lo)):
            return levels or [(1.0, 0.0)]
        least = min(self.PITCH, size / 5) * (hi - lo) / size
        spacing = 1.0
        for spacing in nice_ticks(least, hi - lo):
            if self.labels_fit(spacing, lo, hi, size):
                break
        finer = [s for s, _o in levels if s < spacing and spacing % s == 0]
        return [(spacing, 0.0)] + ([(max(finer), 0.0)] if finer else [])

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph API)
        """Steps as integers (``1,000`` past four digits, as the status bar writes them)."""
        if spacing < 1 or scale != 1:
            return super().tickStrings(values, scale, spacing)
        return [f"{int(round(v)):,}" if abs(v) >= 10_000 else str(int(round(v))) for v in values]


def nice_ticks(least: float, span: float) -> list[float]:
    """Whole-step tick spacings from ``least`` on: 1, 2, 2.5, 5 × 10^k (2.5 only from
    25 on), the last at least ``span`` (one tick)."""
    out: list[float] = []
    scale = 10.0 ** math.floor(math.log10(max(least, 1.0)))
    while not out or out[-1] < span:
        out += [n * scale for n in (1, 2, 2.5, 5)
                if n * scale >= least and (n * scale).is_integer()]
        scale *= 10
    return out


class StepRange:
    """The step (x) range the three linked plots follow while data arrives.

    It spans the first step seen to a round number past the newest one, so it
    changes only when the newest step passes that end, not with every new
    step: a changed range repaints all three plots. The room left past the
    newest step is what ``LOOKAHEAD_S`` seconds add at the rate steps arrived
    since the last change, at least 5% and at most 50% of the span: slow
    training fills the plots, fast training moves the range every few
    seconds rather than several times a second. When the user pans or zooms,
    following stops; pyqtgraph's auto-range button ("A") turns it back on.
    """

    LOOKAHEAD_S = 2.0
    MAX_ROOM = 0.5   # of the span: at most a third of a plot is empty (paused, say)

    def __init__(self, plots: list[pg.PlotWidget],
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``plots`` share their x axis; the range is set on the first."""
        self.plots = plots
        self.clock = clock
        self.following = True
        self.lo: float | None = None
        self.hi: float | None = None
        self.shown: tuple[float, float] | None = None
        self._last: tuple[float, float] | None = None   # (time, newest step) at the last change
        for plot in plots:
            plot.getViewBox().enableAutoRange(x=False)
            plot.getViewBox().sigRangeChangedManually.connect(self.user_changed)

    def user_changed(self, mask: list[bool]) -> None:
        """The user panned or zoomed (``mask``: which axes); x: stop following."""
        if mask[0]:   # the x axis (the y axes are each plot's own)
            self.following = False

    def clear(self) -> None:
        """Forget the extent (a new session)."""
        self.lo = self.hi = self.shown = self._last = None

    def include(self, steps) -> None:
        """Widen the extent to these steps (a sorted array, maybe empty)."""
        if len(steps):
            lo, hi = float(steps[0]), float(steps[-1])
            self.lo = lo if self.lo is None else min(self.lo, lo)
            self.hi = hi if self.hi is None else max(self.hi, hi)

    def apply(self) -> bool:
        """Set the plots' step range if it must grow; True when it changed."""
        for plot in self.plots:
            vb = plot.getViewBox()
            if vb.autoRangeEnabled()[0]:   # the auto-range button: follow again, our way
                vb.enableAutoRange(x=False)
                self.following, self.shown = True, None
        if not self.following or self.lo is None or self.hi is None:
            return False
        if self.shown is not None and self.shown[0] <= self.lo and self.hi <= self.shown[1]:
            return False
        now, span = self.clock(), max(self.hi - self.lo, 1.0)
        room = 0.0
        if self._last is not None and now > self._last[0]:
            room = (self.hi - self._last[1]) / (now - self._last[0]) * self.LOOKAHEAD_S
        room = min(max(room, 0.05 * span), self.MAX_ROOM * span)
        self._last = (now, self.hi)
        self.shown = (self.lo, self.lo + nice_ceil(span + room))
        self.plots[0].setXRange(*self.shown, padding=0.02)
        return True


_TAGS = re.compile(r"<[^>]+>")


class FittedTitle(QObject):
    """A plot's title in the longest of its forms that fits the plot's width, chosen
    again when the plot is resized: in a 1024 px window the statistic plot's title
    was cut to 'Activation statistic · every 5 st', losing what it was there to say.
    The forms go from the whole title to the shortest; the last is used if none fits.
    Thread: GUI."""

    def __init__(self, plot: pg.PlotWidget, colour: str) -> None:
        super().__init__(plot)
        self.plot, self.colour = plot, colour
        self.forms: list[str] = []
        plot.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt API)
        """Choose again when the plot is resized."""
        if event.type() == QEvent.Type.Resize:
            self._apply()
        return False

    def set(self, *forms: str) -> None:
        """Offer these forms (HTML allowed), widest first."""
        if list(forms) != self.forms:
            self.forms = list(forms)
            self._apply()

    def _apply(self) -> None:
        if not self.forms:
            return
        font = QFont(self.plot.font())
        font.setPointSizeF(9.0)
        metrics = QFontMetricsF(font)
        # the widget less its y axis: the view box itself widens to a title too wide
        item = self.plot.getPlotItem()
        left = item.getAxis("left")
        room = self.plot.width() - (left.width() if left.isVisible() else 0) - 12
        pick = next((f for f in self.forms
                     if metrics.horizontalAdvance(html.unescape(_TAGS.sub("", f))) <= room),
                    self.forms[-1])
        if item.titleLabel.text != pick:
            item.setTitle(pick, color=self.colour, size="9pt")


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
        #: why module values may be missing (a damaged recording lost them): the
        #: grad and stat plots say it when empty, not that there were none
        self.lost = ""
        self.stat_plot = self._plot("Activation statistic per module", fg)
        self.grad_plot.setXLink(self.loss_plot)
        self.stat_plot.setXLink(self.loss_plot)
        self.logged_plot = self._plot("Logged", fg)
        self.logged_plot.setXLink(self.loss_plot)
        self.logged_plot.hide()
        self.plots = {"loss": self.loss_plot, "grad": self.grad_plot, "stat": self.stat_plot,
                      LOGGED: self.logged_plot}
        self.columns: dict[str, QWidget] = {}   # each plot with its legend
        self.clock: Callable[[], float] = time.monotonic   # seconds; a test may replace it
        self.steps = StepRange(list(self.plots.values()), clock=lambda: self.clock())
        self.loss_curve = self.loss_plot.plot(pen=pg.mkPen(self.theme.accent, width=2))
        self.loss_curve.curve.setClickable(True, width=8)
        self.loss_curve.sigClicked.connect(lambda item, ev: self._loss_clicked(ev))
        # Steps whose loss was NaN/Inf: red crosses along the top (the curve has a gap
        # there, and a loss that went NaN for good read as a run that stopped).
        self.nonfinite_loss = self.loss_plot.plot(pen=None, symbol="x", symbolSize=9,
                                                  symbolPen=pg.mkPen(self.theme.non_finite,
                                                                     width=2),
                                                  symbolBrush=None)
        self.nonfinite_loss.setToolTip("loss NaN/Inf at these steps")
        # Evaluation losses (inference steps) as points, apart from the training curve.
        self.eval_curve = self.loss_plot.plot(pen=None, symbol="d", symbolSize=7,
                                              symbolPen=None, symbolBrush="#e08a1e")
        self.stat_choice = QComboBox(self)
        for key, label in STATS.items():
            self.stat_choice.addItem(label, key)
        self.stat_choice.currentIndexChanged.connect(lambda _i: self._force("stat"))
        self.logged_label = QLabel("Logged:", self)
        self.logged_choice = QComboBox(self)
        self.logged_choice.currentIndexChanged.connect(lambda _i: self._force(LOGGED))
        for w in (self.logged_label, self.logged_choice):
            w.hide()
        self.module_filter = QLineEdit(self)
        self.module_filter.setPlaceholderText("Modules: text or /regex/")
        self.module_filter.setClearButtonEnabled(True)
        self.module_filter.setMaximumWidth(240)
        self.module_filter.setToolTip("Plot the modules whose path contains this text, or "
                                      "matches a regular expression written /like.*this/")
        self.module_filter.textChanged.connect(lambda _t: self._filter_changed())
        self._matches: Callable[[str], bool] = lambda _path: True
        # legends sit under the plots, never over the curves
        self.legends = {kind: QLabel(self) for kind in ALL_PLOTS}
        for label in self.legends.values():
            label.setWordWrap(True)
            label.setTextFormat(Qt.TextFormat.RichText)
            # a long entry is cut in a narrow window rather than holding the window
            # open: its least width was the widest entry's (each plot ~200 px)
            label.setMinimumWidth(LEGEND_MIN_WIDTH)
        self._paths: list[str] = []
        self._root_names: dict[int, str] = {}   # of the rank shown, for bare-index paths
        self._legend_entries: dict[str, list[str]] = {kind: [] for kind in self.legends}
        for kind in ("loss", LOGGED):
            self.legends[kind].hide()   # shown with entries: one line less for the curve
        self._logged: dict[tuple[int, str], pg.PlotDataItem] = {}
        self.focus: LocalKey | None = None
        self._rank_loss: dict[int, pg.PlotDataItem] = {}   # other ranks' loss curves
        self._curves: dict[tuple[str, ModuleKey], pg.PlotDataItem] = {}
        self._colours: dict[LocalKey, str] = {}
        self._seen = {name: ChangeCursor() for name in ALL_PLOTS}
        self._updated_at = dict.fromkeys(ALL_PLOTS, 0.0)
        self._turn = 0
        self._budget = NEW_CURVES_PER_REFRESH
        self.step_line = None
        self.notes = {kind: CentredNote(self.plots[kind], self.theme.subtle.name(), 48)
                      for kind in PLOTS}
        self._lay_out()

    def _lay_out(self) -> None:
        controls = QHBoxLayout()
        controls.addWidget(QLabel("Statistic:", self))
        controls.addWidget(self.stat_choice)
        controls.addWidget(self.logged_label)
        controls.addWidget(self.logged_choice)
        controls.addWidget(self.module_filter)
        controls.addStretch(1)
        row = QHBoxLayout()
        for kind, plot in self.plots.items():
            column = QWidget(self)   # hidden with its plot (the logged one, at first)
            lay = QVBoxLayout(column)
            lay.setContentsMargins(0, 0, 0, 0)
            lay.setSpacing(0)
            lay.addWidget(plot, 1)
            lay.addWidget(self.legends[kind])
            row.addWidget(column, 1)   # the plots share the width alike
            self.columns[kind] = column
        self.columns[LOGGED].hide()
        box = QVBoxLayout(self)
        box.setContentsMargins(4, 2, 4, 2)
        box.addLayout(controls)
        box.addLayout(row, 1)

    def _plot(self, title: str, fg: str, log: bool = False) -> pg.PlotWidget:
        w = pg.PlotWidget(self, background=self.theme.background,
                          axisItems={"bottom": StepAxis("bottom")})
        w.fitted_title = FittedTitle(w, self.theme.text.name())   # type: ignore[attr-defined]
        w.fitted_title.set(*TITLE_FORMS.get(title, (title,)))   # type: ignore[attr-defined]
        w.showGrid(x=True, y=True, alpha=0.15)
        for axis in ("left", "bottom"):
            w.getAxis(axis).setTextPen(fg)
            w.getAxis(axis).setPen(fg)
        # Tick labels that get narrower leave the axis as wide as it was: a width
        # that follows every label re-lays out and repaints the plot twice.
        w.getAxis("left").setStyle(autoReduceTextSpace=False)
        w.setLogMode(y=log)
        w.setMinimumHeight(120)
        return w

    def _force(self, *names: str) -> None:
        for name in names or ALL_PLOTS:
            self._seen[name].reset()
            self._updated_at[name] = 0.0

    def clear(self) -> None:
        """Forget the curves and the step range (a new session starts)."""
        for (kind, _key), item in list(self._curves.items()):
            self._remove_curve(kind, item)
        self._curves.clear()
        for kind, label in self.legends.items():
            label.setText("")
            self._legend_entries[kind] = []
        self._paths = []
        for item in self._logged.values():
            self.logged_plot.removeItem(item)
        self._logged.clear()
        self.logged_choice.clear()
        for w in (self.logged_plot, self.logged_label, self.logged_choice,
                  self.legends["loss"], self.legends[LOGGED], self.columns[LOGGED]):
            w.hide()
        self.loss_curve.setData([], [])
        self.nonfinite_loss.setData([], [])
        self.eval_curve.setData([], [])
        for item in self._rank_loss.values():
            self.loss_plot.removeItem(item)
        self._rank_loss.clear()
        self.steps.clear()
        self._force()

    def set_focus(self, key: LocalKey | None) -> None:
        """Always plot this module (the selection, ``(root, path)``) first, highlighted,
        on every rank."""
        if key != self.focus:
            self.focus = key
            for (_kind, k), item in self._curves.items():
                item.setPen(self._pen(k))
            self._force("grad", "stat")

    # ----------------------------------------------------------- refresh ---
    def refresh(self, model: SessionModel) -> None:
        """Redraw one plot whose data changed (GUI thread, on the repaint timer).

        The plots take turns, each at most 5 times a second; new curves are
        added ``NEW_CURVES_PER_REFRESH`` per update so that the first data (or
        a new selection) never stalls the GUI.
        """
        try:
            self._refresh_one(model)
        finally:   # after the update: a curve drawn this call hides its plot's note now
            self._say_empty(model)

    def _refresh_one(self, model: SessionModel) -> None:
        now = self.clock()
        names = ALL_PLOTS if model.scalars else PLOTS
        for i in range(len(names)):
            name = names[(self._turn + i) % len(names)]
            topics = PLOT_TOPICS.get(name, MODULE_PLOT_TOPICS)
            if (model.changes.changed(self._seen[name], *topics)
                    and now - self._updated_at[name] >= PLOT_INTERVAL_S):
                self._turn = (self._turn + i + 1) % len(names)
                model.changes.take(self._seen[name], *topics)
                self._updated_at[name] = now
                self._budget = NEW_CURVES_PER_REFRESH
                if name == "loss":
                    self._update_loss(model)
                elif name == LOGGED:
                    self._update_logged(model)
                else:
                    self._update_modules(name, model)
                moved = self.steps.apply()
                for plot in self.plots.values() if moved else (self.plots[name],):
                    # Apply the new ranges now: pyqtgraph applies them while painting,
                    # which marks the curves dirty again and paints the plot twice.
                    plot.getViewBox().prepareForPaint()
                return

    def _say_empty(self, model: SessionModel) -> None:
        """An empty plot says why (no steps yet, or steps without its values); cheap:
        it runs every refresh."""
        seen = model.steps_seen > 0
        for kind, note in self.notes.items():
            if kind == "loss":
                has = len(model.loss) > 0 or len(model.eval_loss) > 0 or any(
                    len(state.loss) for state in model.ranks.values())
            else:
                has = any(tag[0] == kind for tag in self._curves)
                if not has and seen and not model.modules:
                    note.say("No module was recorded")
                    continue
                if not has and seen and self.lost:
                    note.say(self.lost)
                    continue
                if not has and seen and any(
                        not (m.grad_finite if kind == "grad" else m.finite)
                        for m in model.modules.values() if m.rank == model.rank):
                    note.say("Only NaN/Inf values in these steps: nothing finite to plot "
                             "(the modules in red made them)")
                    continue
                if not has and seen and self.module_filter.text().strip():
                    note.say("No module matches the filter")
                    continue
            if not has and seen and kind != "stat" and not model.train_steps:
                note.say(FORWARD_ONLY)
                continue
            note.say("" if has else EMPTY_NOTES[kind][seen])

    def settled(self, model: SessionModel) -> bool:
        """Whether every plot shows all of ``model`` (no change left to draw, no curve
        still waiting for its turn): what a screenshot waits for."""
        names = ALL_PLOTS if model.scalars else PLOTS
        return not any(model.changes.changed(self._seen[name],
                                             *PLOT_TOPICS.get(name, MODULE_PLOT_TOPICS))
                       for name in names)

    def _update_loss(self, model: SessionModel) -> None:
        steps, values = model.loss.arrays()
        eval_steps, eval_values = model.eval_loss.arrays()
        self.steps.include(steps)
        self.steps.include(eval_steps)
        # NaN/Inf losses of training and evaluation steps alike (a script that stops on
        # a NaN loss before backward() makes its last step an evaluation one)
        both = np.concatenate([steps, eval_steps])
        order = np.argsort(both, kind="stable")
        self._mark_nonfinite_loss(both[order], np.concatenate([values, eval_values])[order])
        steps, values = peak_decimate(steps, values, self._max_points(self.loss_plot))
        self.loss_curve.setData(steps, values, symbol="o" if len(steps) < 24 else None,
                                symbolSize=5, symbolPen=None, symbolBrush=self.theme.accent)
        drawn = np.isfinite(eval_values)   # a NaN evaluation loss is a cross, not a point
        eval_steps, eval_values = eval_steps[drawn], eval_values[drawn]
        self.eval_curve.setData(eval_steps, eval_values)
        for rank, state in model.ranks.items():
            if rank == model.rank and rank not in self._rank_loss:
                continue
            item = self._rank_loss.get(rank)
            if item is None:
                item = self._rank_loss[rank] = self.loss_plot.plot(
                    pen=pg.mkPen(self.theme.subtle, width=1, dash=RANK_DASHES[rank % 4] or [2, 2]))
            r_steps, r_values = state.loss.arrays() if rank != model.rank else ([], [])
            if len(r_steps):
                self.steps.include(r_steps)
                r_steps, r_values = peak_decimate(r_steps, r_values,
                                                  self._max_points(self.loss_plot))
            item.setData(r_steps, r_values)
        self._loss_legend(model, len(eval_steps) > 0)

    def _loss_legend(self, model: SessionModel, evaluated: bool) -> None:
        """Under the loss plot: in a job of several ranks the solid curve's rank and
        each other rank's dashed one; evaluation points and NaN/Inf marks when drawn."""
        entries: list[tuple[str, str, str]] = []   # (mark, its colour, label)
        if len(model.ranks) > 1:
            entries.append(("━", self.theme.accent.name(), f"rank {model.rank}"))
            entries += [("╌", self.theme.subtle.name(), f"rank {rank}")
                        for rank in sorted(model.ranks) if rank != model.rank
                        and len(model.ranks[rank].loss)]
        if evaluated:
            entries.append(("◆", "#e08a1e", "evaluation"))
        if self.nonfinite_loss_steps():
            entries.append(("✕", self.theme.non_finite.name(), "NaN/Inf loss"))
        self._set_legend("loss", entries)

    def _set_legend(self, kind: str, entries: list[tuple[str, str, str]]) -> None:
        """Show ``(mark, colour, label)`` entries under plot ``kind`` (none: hidden)."""
        self._legend_entries[kind] = [label for _m, _c, label in entries]
        text = "&nbsp;&nbsp; ".join(f"<span style='color:{colour}'>{mark}</span>&nbsp;"
                                    f"{html.escape(label)}" for mark, colour, label in entries)
        label = self.legends[kind]
        if text:
            text = f"<span style='font-size:7.5pt;color:{self.theme.subtle.name()}'>{text}</span>"
        if label.text() != text:
            label.setText(text)
        if label.isHidden() == bool(text):
            label.setVisible(bool(text))

    def _mark_nonfinite_loss(self, steps: np.ndarray, values: np.ndarray) -> None:
        """A red cross at the top of the finite losses for every NaN/Inf loss."""
        bad = ~np.isfinite(values)
        if not bad.any():
            self.nonfinite_loss.setData([], [])
            return
        finite = values[~bad]
        top = float(finite.max()) if finite.size else 0.0
        self.nonfinite_loss.setData(steps[bad], np.full(int(bad.sum()), top))

    def nonfinite_loss_steps(self) -> list[int]:
        """The steps marked as having a NaN/Inf loss."""
        xs = self.nonfinite_loss.getData()[0]
        return [] if xs is None else [int(x) for x in xs]

    def _update_logged(self, model: SessionModel) -> None:
        """The chosen logged name's curve (one per rank); new names join the choice."""
        names = sorted({name for _rank, name in model.scalars})
        known = {self.logged_choice.itemData(i) for i in range(self.logged_choice.count())}
        for name in names:
            if name not in known:
                self.logged_choice.addItem(name, name)
        if "loss" in names and not known:
            self.logged_choice.setCurrentIndex(self.logged_choice.findData("loss"))
        for w in (self.logged_plot, self.logged_label, self.logged_choice, self.columns[LOGGED]):
            w.show()
        chosen = self.logged_choice.currentData()
        for key in [k for k in self._logged if k[1] != chosen]:
            self.logged_plot.removeItem(self._logged.pop(key))
        for key, series in sorted(model.scalars.items()):
            if key[1] != chosen or not len(series):
                continue
            steps, values = series.arrays(finite=True)
            self.steps.include(steps)
            item = self._logged.get(key)
            if item is None:
                colour = CURVE_COLOURS[key[0] % len(CURVE_COLOURS)]
                item = self._logged[key] = pg.PlotDataItem(pen=pg.mkPen(colour, width=1.5))
                self.logged_plot.addItem(item)
            steps, values = peak_decimate(steps, values, self._max_points(self.logged_plot))
            item.setData(steps, values, symbol="o" if len(steps) < 24 else None, symbolSize=5,
                         symbolPen=None, symbolBrush=CURVE_COLOURS[key[0] % len(CURVE_COLOURS)])
        self._set_legend(LOGGED, [("━", CURVE_COLOURS[rank % len(CURVE_COLOURS)],
                                   name if rank == 0 else f"{name} (rank {rank})")
                                  for rank, name in sorted(self._logged)])

    def legend_entries(self, kind: str) -> list[str]:
        """The labels of the legend under plot ``kind``, in order."""
        return list(self._legend_entries.get(kind, []))

    def _filter_changed(self) -> None:
        matches = module_filter(self.module_filter.text())
        self.module_filter.setStyleSheet(
            "" if matches is not None else f"color: {self.theme.non_finite.name()}")
        self.module_filter.setToolTip("" if matches is not None else "not a valid regex")
        self._matches = matches or (lambda _path: False)
        self._force("grad", "stat")

    def _update_modules(self, kind: str, model: SessionModel) -> None:
        """The grad-norm or statistic curves of the chosen modules."""
        keys = self._chosen(model)
        column = "grad_norm" if kind == "grad" else self.stat_choice.currentData()
        for tag in [t for t in self._curves if t[0] == kind and t[1] not in keys]:
            self._remove_curve(kind, self._curves.pop(tag))
        spans = []
        for key in keys:
            spans.append(self._update_curve((kind, key), model.module_series.get(key), column))
        if kind == "grad":
            self._choose_scale(self.grad_plot, "Gradient norm per module",
                               [s for s in spans if s is not None])
        else:
            self._say_sampling(model, keys, column)
        if len(self._paths) != len(model.module_series):
            self._paths = sorted({k[2] for k in model.module_series})
        self._root_names = dict(model.root_names)
        self._update_legend(kind, keys)

    def _say_sampling(self, model: SessionModel, keys: list[ModuleKey], column: str) -> None:
        """The statistic plot's title says how often statistics were taken, when some
        steps took none (``--stats-every``): one dot at step 0 of a short run looked
        like activations that stopped."""
        taken: set[int] = set()
        for key in keys:
            series = model.module_series.get(key)
            if series is not None and len(series):
                taken.update(int(s) for s in series.arrays(column, finite=True)[0])
        steps = sorted(taken)
        gaps = {b - a for a, b in zip(steps, steps[1:])}
        seen = max(model.steps_seen, steps[-1] + 1 if steps else 0)
        note = ""
        if len(steps) == 1 and seen > 1:
            note = f"step {steps[0]} only"
        elif len(gaps) == 1 and (gap := gaps.pop()) > 1:
            note = f"every {gap} steps"
        span = f"<span style='color:{self.theme.subtle.name()}'>"
        forms = ((f"Activation statistic {span}· {note}</span>",
                  f"Activations {span}· {note}</span>", f"{span}{note}</span>") if note
                 else TITLE_FORMS["Activation statistic per module"])
        if list(forms) != self.stat_plot.fitted_title.forms:
            self.stat_plot.fitted_title.set(*forms)
            self.stat_plot.setToolTip(f"Activation statistics were taken {note}: "
                                      f"tensorscope run --stats-every N sets how often "
                                      f"(--mode full: every step)" if note else "")

    def _update_legend(self, kind: str, keys: list[ModuleKey]) -> None:
        """One entry per curve: its colour and full path, elided in the middle."""
        entries, plain = [], []
        for key in keys:
            if (kind, key) not in self._curves:
                continue
            label = (legend_label(key[2], self._paths) if key[2]
                     else self._root_names.get(key[1], "(root)"))   # whose root: model or loss
            if key[2].split(".", 1)[0].isdigit():   # a Sequential root's "0": its name first
                label = f"{self._root_names.get(key[1], 'root')}.{label}"
            if key[0]:
                label += f" r{key[0]}"
            plain.append(label)
            weight = "bold" if key[1:] == self.focus else "normal"
            # one entry never wraps inside (an elided name broke after its "…": a word
            # joiner holds it): lines break between entries
            shown = html.escape(label).replace("…", "…\u2060")
            entries.append(f"<span style='white-space:nowrap'>"
                           f"<span style='color:{self._colour(key)}'>■</span>&nbsp;"
                           f"<span style='font-weight:{weight}'>{shown}</span></span>")
        text = "&nbsp;&nbsp; ".join(entries) or (
            "<i>no module matches the filter</i>" if self.module_filter.text().strip() else "")
        self._legend_entries[kind] = plain
        label = self.legends[kind]
        if label.text() != text:
            label.setText(f"<span style='font-size:7.5pt;color:{self.theme.subtle.name()}'>"
                          f"{text}</span>" if text else "")
            label.setToolTip("\n".join(k[2] for k in keys))

    def _remove_curve(self, kind: str, item: pg.PlotDataItem) -> None:
        self.plots[kind].removeItem(item)

    @staticmethod
    def _max_points(plot: pg.PlotWidget) -> int:
        """Points worth drawing across the plot: two per pixel column (min and max)."""
        return 2 * max(plot.width(), 200)

    def _colour(self, key: ModuleKey) -> str:
        """A stable colour per module (the same in both plots, on every rank)."""
        local = key[1:]
        if local not in self._colours:
            self._colours[local] = CURVE_COLOURS[len(self._colours) % len(CURVE_COLOURS)]
        return self._colours[local]

    def _pen(self, key: ModuleKey):
        return pg.mkPen(self._colour(key), width=3 if key[1:] == self.focus else 1.5,
                        dash=RANK_DASHES[key[0] % 4])

    def _chosen(self, model: SessionModel) -> list[ModuleKey]:
        """The focus module on every rank, plus the selected rank's modules with the
        largest latest grad norm."""
        def largest(kv) -> float:
            last = kv[1].last("grad_norm")
            return -last if last is not None and last == last else 0.0
        ranked = sorted(((k, v) for k, v in model.module_series.items()
                         if k[0] == model.rank and self._matches(k[2])), key=largest)
        # a loss module's gradient norm is 1 and its output the loss: a curve of it
        # squeezed the layers' into a band at its foot (plotted when it is the focus)
        leaves = [k for k, _ in ranked if _plotted_leaf(model.modules.get(k), k[2])
                  and not model.is_loss(k[1], k[2])]
        keys = leaves[:MAX_CURVES]
        if self.focus is not None:
            focus = [k for k in sorted(model.ranks) if (k, *self.focus) in model.modules]
            if focus:
                mine = [(r, *self.focus) for r in focus]
                keys = mine + [k for k in keys if k[1:] != self.focus][:MAX_CURVES - 1]
        return keys

    def _choose_scale(self, plot: pg.PlotWidget, title: str,
                      spans: list[tuple[float, float]]) -> None:
        """A log y axis when the curves' positive values span more than
        ``LOG_SPAN_ON`` (a norm of 11,000 at one step flattened the others to 0)."""
        lo = min((a for a, _b in spans), default=0.0)
        hi = max((b for _a, b in spans), default=0.0)
        log = plot.getPlotItem().ctrl.logYCheck.isChecked()
        span = hi / lo if lo > 0 else 1.0
        want = span > LOG_SPAN_ON if not log else span > LOG_SPAN_OFF
        if want != log:
            plot.setLogMode(y=want)
            plot.fitted_title.set(*(f + (" (log)" if want else "")
                                    for f in TITLE_FORMS.get(title, (title,))))

    def log_scale(self, kind: str) -> bool:
        """Whether plot ``kind``'s y axis is logarithmic."""
        return self.plots[kind].getPlotItem().ctrl.logYCheck.isChecked()

    def _update_curve(self, tag: tuple[str, ModuleKey], series, column: str
                      ) -> tuple[float, float] | None:
        """Draw one curve; returns the (least, largest) positive value drawn, if any."""
        if series is None or not len(series):
            return None
        steps, values = series.arrays(column, finite=True)
        if not len(steps):
            return None
        self.steps.include(steps)
        item = self._curves.get(tag) or self._new_curve(tag)
        if item is None:
            return None
        steps, values = peak_decimate(steps, values, self._max_points(self.plots[tag[0]]))
        sparse = len(steps) < 24   # a few points: draw them, lines alone would not show
        item.setData(steps, values, connect="finite", symbol="o" if sparse else None,
                     symbolSize=5, symbolPen=None, symbolBrush=self._colour(tag[1]))
        positive = values[values > 0]
        return (float(positive.min()), float(positive.max())) if positive.size else None

    def _new_curve(self, tag: tuple[str, ModuleKey]) -> pg.PlotDataItem | None:
        """A curve and its legend entry, within this call's budget (else None)."""
        if self._budget <= 0:
            self._seen[tag[0]].reset()   # come back for the rest next time
            return None
        self._budget -= 1
        kind, key = tag
        plot = self.plots[kind]
        item = pg.PlotDataItem(pen=self._pen(key), connect="finite")
        plot.addItem(item)
        item.curve.setClickable(True, width=8)
        item.sigClicked.connect(lambda it, ev, k=key, p=plot: self._clicked(k, p, ev))
        self._curves[tag] = item
        return item

    def _step_at(self, plot: pg.PlotWidget, ev) -> int:
        pos = plot.getPlotItem().vb.mapSceneToView(ev.scenePos())
        return int(round(pos.x()))

    def _clicked(self, key: ModuleKey, plot: pg.PlotWidget, ev) -> None:
        self.point_selected.emit(key[1], key[2], self._step_at(plot, ev))

    def _loss_clicked(self, ev) -> None:
        self.step_selected.emit(self._step_at(self.loss_plot, ev))

    def mark_step(self, step: int | None) -> None:
        """Draw a vertical marker at ``step`` on every plot (None: remove)."""
        for plot in self.plots.values():
            for item in list(plot.items()):
                if getattr(item, "_ts_marker", False):
                    plot.removeItem(item)
            if step is not None:
                line = pg.InfiniteLine(step, angle=90, pen=pg.mkPen(self.theme.executing, width=1))
                line._ts_marker = True
                plot.addItem(line)


def _plotted_leaf(state, path: str) -> bool:
    """A module whose own curve says something: a leaf (not the root), or a
    ``torch.compile`` card, whose inner modules are not observed."""
    if state is not None and getattr(state, "compiled", None) is not None:
        return True
    return bool(path) and not getattr(state, "children", None)
