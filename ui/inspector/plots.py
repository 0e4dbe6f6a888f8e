"""The inspector's pyqtgraph views: a heatmap with a colour bar and a line plot."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from tensorscope.ui.elided import CentredNote
from tensorscope.ui.model.received import finite_range, format_value
from tensorscope.ui.model.inspector_state import COLORMAPS
from tensorscope.ui.inspector.theme import (NAN_COLOR, NEGINF_COLOR, POSINF_COLOR, accent_color,
                                            css, mute, plot_colors, style_plot)

MAX_LOCKED_ASPECT = 12.0   # beyond this rows:cols ratio a 1:1 aspect would leave a sliver
MIN_PLOT_HEIGHT = 160
#: magnitudes whose ticks read well without an SI scale (below: 1e-06 gradients;
#: above, ticks carry their exponent as the colour bar's do: '2e+20', not '200 (x1e+18)')
PLAIN_TICKS = (1e-3, float("inf"))
BAR_AXIS_WIDTH = 45   # px: pyqtgraph's own for a colour bar's axis
QWIDGETSIZE_MAX = (1 << 24) - 1


def nonfinite_overlay(values: np.ndarray) -> np.ndarray | None:
    """An RGBA image marking NaN, +Inf and -Inf in distinct colours (None if all finite)."""
    if values.dtype.kind != "f" or np.isfinite(values).all():
        return None
    rgba = np.zeros(values.shape + (4,), dtype=np.uint8)
    for mask, color in ((np.isnan(values), NAN_COLOR), (np.isposinf(values), POSINF_COLOR),
                        (np.isneginf(values), NEGINF_COLOR)):
        rgba[mask] = (*color, 255)
    return rgba


def _span(idx: np.ndarray) -> tuple[float, float]:
    step = float(idx[1] - idx[0]) if len(idx) > 1 else 1.0
    if step <= 0 or not len(idx):
        return -0.5, float(max(len(idx), 1))
    return float(idx[0]) - step / 2, step * len(idx)


def axis_rect(rows: np.ndarray, cols: np.ndarray) -> QRectF:
    """The image rectangle in tensor-index coordinates, each element centred on its index.

    Strided and offset slices keep their true indices on the axes; reversed or
    single-element axes fall back to positions.
    """
    (x0, w), (y0, h) = _span(cols), _span(rows)
    return QRectF(x0, y0, w, h)


class IndexAxis(pg.AxisItem):
    """An axis that only labels tensor indices inside the shown slice (no -50 ticks)."""

    def __init__(self, orientation: str, **kwargs: object) -> None:
        super().__init__(orientation, **kwargs)
        self.bounds: tuple[float, float] | None = None
        # indices have no unit to scale: a 1×1 slice's axes read 'dim 0 (x0.001)'
        self.enableAutoSIPrefix(False)

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:  # noqa: N802,N803
        """pyqtgraph's ticks, keeping whole indices within ``bounds``."""
        levels = super().tickValues(minVal, maxVal, size)
        if self.bounds is None:
            return levels
        view_lo, view_hi = sorted((minVal, maxVal))    # an inverted axis passes them reversed
        lo, hi = max(self.bounds[0], view_lo), min(self.bounds[1], view_hi)
        if 0 <= hi - lo <= 12:     # few indices in view: label each one
            return [(1.0, [float(v) for v in range(int(np.ceil(lo)), int(np.floor(hi)) + 1)])]
        return [(spacing, [v for v in values if lo <= v <= hi and float(v).is_integer()])
                for spacing, values in levels if spacing >= 1]

    def tickStrings(self, values: list, scale: float, spacing: float) -> list[str]:  # noqa: N802
        """Indices as whole numbers."""
        return [str(int(round(v))) for v in values]


class ValueAxis(pg.AxisItem):
    """A value axis whose SI scale stays within pyqtgraph's prefixes (1e-24 to 1e24).

    Beyond them pyqtgraph scales by 1e27 at most and still writes exponents on the
    ticks: an exploded gradient's histogram read '-6e+08' under '(x1e+27)' for
    -6.5e+35. Past the prefixes the ticks carry the whole exponent instead.
    """

    def updateAutoSIPrefix(self) -> None:  # noqa: N802 (pyqtgraph API)
        """pyqtgraph's prefix, or none where it has run out of prefixes, or where plain
        ticks read well: values of 0.15 to 0.42 (a softmax) read '200 250 300' under
        '(x0.001)'."""
        super().updateAutoSIPrefix()
        big = max(abs(self.range[0]), abs(self.range[1])) * self.scale
        if self.labelUnitPrefix.startswith("e") or PLAIN_TICKS[0] <= big < PLAIN_TICKS[1]:
            self.autoSIPrefixScale = 1.0
            self.labelUnitPrefix = ""
            self._updateLabel()


class AspectFit:
    """Keeps an image plot hugging its image: height capped to the aspect, top-aligned.

    Re-fits when the view is resized, until the user pans or zooms.
    """

    def __init__(self, graphics: pg.GraphicsLayoutWidget, plot: pg.PlotItem) -> None:
        self.graphics, self.plot = graphics, plot
        self.rect: QRectF | None = None
        self.auto = True
        plot.vb.sigResized.connect(self._refit)
        plot.vb.sigRangeChangedManually.connect(self._user_moved)

    def fit(self, rect: QRectF) -> None:
        """Show ``rect`` (view coordinates) and keep fitting it on resize."""
        self.rect, self.auto = rect, True
        self._refit()

    def _user_moved(self, *_: object) -> None:
        self.auto = False

    def _refit(self, *_: object) -> None:
        if not self.auto or self.rect is None:
            return
        vb, rect = self.plot.vb, self.rect
        self._cap_height()
        vb.setRange(rect, padding=0.02)
        y0, y1 = vb.viewRange()[1]
        pad = 0.02 * rect.height()
        if (y1 - y0) > rect.height() + 2 * pad:
            vb.setYRange(rect.top() - pad, rect.top() - pad + (y1 - y0), padding=0)

    def _cap_height(self) -> None:
        vb, rect = self.plot.vb, self.rect
        if rect is None or vb.width() <= 1 or rect.width() <= 0:
            return
        overhead = self.graphics.height() - vb.height()
        want = overhead + vb.width() * rect.height() / rect.width() * 1.05
        self.graphics.setMaximumHeight(int(min(max(want, MIN_PLOT_HEIGHT), QWIDGETSIZE_MAX)))


class _PlotHost(QWidget):
    """A palette-coloured GraphicsLayoutWidget holding one PlotItem, plus a hover readout."""

    def __init__(self, parent: QWidget | None = None, index_axes: bool = False) -> None:
        super().__init__(parent)
        bg, _ = plot_colors(self)
        self.graphics = pg.GraphicsLayoutWidget(self)
        self.graphics.setBackground(bg)
        # a line's x is a tensor index too: '0 0.5 1 1.5' named elements that do not exist
        axes = ({"left": IndexAxis("left"), "bottom": IndexAxis("bottom")} if index_axes
                else {"left": ValueAxis("left"), "bottom": IndexAxis("bottom")})
        self.plot = self.graphics.addPlot(axisItems=axes)
        style_plot(self.plot, self)
        self.readout = QLabel(" ", self)
        mute(self.readout)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.graphics, 100)
        layout.addWidget(self.readout)
        layout.addStretch(1)       # takes what a height-capped plot leaves over
        self.plot.scene().sigMouseMoved.connect(self._mouse_moved)

    def _mouse_moved(self, pos: QPointF) -> None:
        if self.plot.sceneBoundingRect().contains(pos):
            point = self.plot.vb.mapSceneToView(pos)
            self.readout.setText(self.describe(point.x(), point.y()) or " ")

    def describe(self, x: float, y: float) -> str:
        """The hover text at view coordinates (x, y); subclasses fill it in."""
        return ""


class HeatmapView(_PlotHost):
    """A 2-d slice as an image with a colour bar; rows run down, non-finite marked."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, index_axes=True)
        self.plot.invertY(True)
        self.plot.setMenuEnabled(False)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.overlay = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.plot.addItem(self.overlay)
        self.bar = pg.ColorBarItem(values=(0, 1), colorMap=pg.colormap.get("viridis"),
                                   interactive=False, width=12, colorMapMenu=False)
        self.bar.setImageItem(self.image, insert_in=self.plot)
        style_plot(self.bar, self)
        self.values: np.ndarray | None = None
        self.raw: np.ndarray | None = None
        self._rows = self._cols = np.arange(0)
        self.fitter = AspectFit(self.graphics, self.plot)

    def show_values(self, values: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                    labels: tuple[str, str], colormap: str, raw: np.ndarray | None = None) -> None:
        """Draw ``values`` (rows × cols, real) with tensor indices ``rows``/``cols`` on the axes."""
        values = values.reshape(len(rows), len(cols))
        self.values, self.raw = values, (values if raw is None else raw.reshape(values.shape))
        self._rows, self._cols = rows, cols
        span = finite_range(values) or (0.0, 1.0)
        lo, hi = span if span[1] > span[0] else (span[0] - 0.5, span[0] + 0.5)
        finite = np.where(np.isfinite(values), values, lo) if values.dtype.kind == "f" else values
        self.image.setImage(np.ascontiguousarray(finite, dtype=np.float32), autoLevels=False)
        self.bar.setColorMap(pg.colormap.get(COLORMAPS.get(colormap, "viridis")))
        self.bar.setLevels((lo, hi))
        self._fit_bar_axis(lo, hi)
        overlay = nonfinite_overlay(values)
        self.overlay.setVisible(overlay is not None)
        if overlay is not None:
            self.overlay.setImage(overlay, autoLevels=False, levels=(0, 255))
        rect = axis_rect(rows, cols)
        self.image.setRect(rect)
        self.overlay.setRect(rect)
        self.plot.getAxis("left").bounds = (float(rows.min()), float(rows.max()))
        self.plot.getAxis("bottom").bounds = (float(cols.min()), float(cols.max()))
        ratio = max(len(rows), len(cols)) / max(1, min(len(rows), len(cols)))
        self.plot.setAspectLocked(ratio <= MAX_LOCKED_ASPECT, ratio=1.0)
        self.plot.setLabel("left", labels[0])
        self.plot.setLabel("bottom", labels[1])
        self.fitter.fit(rect)

    def _fit_bar_axis(self, lo: float, hi: float) -> None:
        """Widen the colour bar's axis to its widest tick label: pyqtgraph fixes it at
        45 px and drops the labels that do not fit, so a bar over 1e+07 (or an
        exploded 1e+35) read '0' alone, or nothing."""
        axis = self.bar.axis
        levels = axis.tickValues(lo, hi, max(axis.geometry().height(), 100.0))
        texts = [t for spacing, values in levels[:2]
                 for t in axis.tickStrings(values, 1.0, spacing)]
        font = axis.style.get("tickFont") or axis.font()
        widest = max((QFontMetricsF(font).horizontalAdvance(t) for t in texts), default=0.0)
        want = max(BAR_AXIS_WIDTH, int(widest) + 16)   # + the tick and its gap
        if int(axis.width()) != want:
            axis.setWidth(want)

    def describe(self, x: float, y: float) -> str:
        """The element under the cursor: its tensor indices and value."""
        if self.raw is None:
            return ""
        pixel = self.image.mapFromView(QPointF(x, y))
        r, c = int(np.floor(pixel.y())), int(np.floor(pixel.x()))
        if not (0 <= r < self.raw.shape[0] and 0 <= c < self.raw.shape[1]):
            return ""
        return f"[{self._rows[r]}, {self._cols[c]}] = {format_value(self.raw[r, c])}"



#: where a line plot marks its non-finite elements: (name, test, marker colour, at the top)
NONFINITE_MARKS = (("NaN", np.isnan, NAN_COLOR, False), ("+Inf", np.isposinf, POSINF_COLOR, True),
                   ("−Inf", np.isneginf, NEGINF_COLOR, False))


class LineView(_PlotHost):
    """A 1-d slice as a line plot over its tensor indices; NaN and ±Inf leave gaps
    in the line and are marked with crosses in their legend colours (+Inf along
    the top, NaN and −Inf along the bottom), so an all-NaN slice is not bare axes."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        self.plot.setDownsampling(auto=True, mode="peak")   # long lines draw at screen resolution
        self.plot.setClipToView(True)
        self.plot.setMenuEnabled(False)
        color = accent_color(self)
        self.curve = self.plot.plot(pen=pg.mkPen(color, width=1.5), connect="finite")
        self.points = pg.ScatterPlotItem(size=5, brush=pg.mkBrush(color), pen=None)
        self.plot.addItem(self.points)
        self.marks = {name: pg.ScatterPlotItem(symbol="x", size=8, brush=None,
                                               pen=pg.mkPen(css(colour), width=2))
                      for name, _test, colour, _top in NONFINITE_MARKS}
        for item in self.marks.values():
            self.plot.addItem(item)
        self.note = CentredNote(self.graphics, plot_colors(self)[1].name(), left=48)
        self.x = np.arange(0)
        self.y = np.arange(0, dtype=np.float64)

    def show_values(self, values: np.ndarray, x: np.ndarray, label: str) -> None:
        """Plot ``values`` against tensor indices ``x``; markers when there are few points."""
        self.x, self.y = x, values.astype(np.float64, copy=False).ravel()
        self.plot.getAxis("bottom").bounds = ((float(x.min()), float(x.max())) if len(x)
                                              else None)
        finite_y = np.where(np.isfinite(self.y), self.y, np.nan)
        self.curve.setData(x, finite_y, connect="finite")
        few = len(x) <= 64
        self.points.setData(x[np.isfinite(finite_y)] if few else [],
                            finite_y[np.isfinite(finite_y)] if few else [])
        self._mark_nonfinite(x)
        self.plot.setLabel("bottom", label)
        self.plot.autoRange(padding=0.05)
        nothing = not self.note.isHidden()
        self.plot.getAxis("left").setStyle(showValues=not nothing)   # no value to scale
        if nothing:   # the crosses above and below the note, clear of it
            self.plot.setYRange(-1.6, 1.6, padding=0)

    def _mark_nonfinite(self, x: np.ndarray) -> None:
        """Crosses at the non-finite elements, just outside the finite values' range;
        with no finite value, a note says so over the crosses."""
        span = finite_range(self.y)
        lo, hi = span if span is not None else (-0.5, 0.5)
        pad = 0.06 * (hi - lo) if hi > lo else 0.5
        for name, test, _colour, top in NONFINITE_MARKS:
            bad = test(self.y)
            at = hi + pad if top else lo - pad
            self.marks[name].setData(x[bad], np.full(int(bad.sum()), at))
        self.note.say("" if span is not None or not len(self.y) else
                      f"No finite value to draw: all {len(self.y):,} are NaN or ±Inf "
                      "(marked ✕)")

    def marked(self) -> dict[str, list[int]]:
        """The tensor indices marked as NaN, +Inf and −Inf (for tests)."""
        return {name: [int(v) for v in (item.getData()[0] if len(item.getData()[0]) else [])]
                for name, item in self.marks.items()}

    def describe(self, x: float, y: float) -> str:
        """The element nearest the cursor's x."""
        if not len(self.x):
            return ""
        i = int(np.argmin(np.abs(self.x - x)))
        return f"[{self.x[i]}] = {format_value(self.y[i])}"
