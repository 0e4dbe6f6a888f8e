"""The metric legend painted over the graph's top-right corner."""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QColor, QLinearGradient, QPainter, QPen
from PySide6.QtWidgets import QWidget

from tensorscope.ui.model.session_model import METRICS
from tensorscope.ui.theme import Theme, ui_font


def format_number(value: float) -> str:
    """Short human form: 0.0123, 1.2e-05, 3.4e+03."""
    if value == 0:
        return "0"
    if 1e-3 <= abs(value) < 1e4:
        return f"{value:.3g}"
    return f"{value:.1e}"


WIDTH, MIN_WIDTH = 230, 150   # px: the legend's width, and its least in a narrow view
#: px: the legend's height, and its height folded to one row while cards lie under it
HEIGHT, FOLDED_HEIGHT = 64, 16
#: how opaque the legend is drawn while cards lie under it
FADED = 0.45


class MetricLegend(QWidget):
    """Shows which metric colours the nodes, its range and the NaN colour.

    It stays in the top-right corner; while cards scrolled under it, it folds to
    a thin ramp drawn faded, so that the cards' text shows through rather than
    under three rows of its own. ``covers(rect)``: whether a card lies
    under ``rect`` (the parent's coordinates).
    """

    def __init__(self, parent: QWidget, theme: Theme,
                 covers: Callable[[QRect], bool] | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        self._covers = covers or (lambda _rect: False)
        self.faded = False
        self.title = ""
        self.lo = self.hi = 0.0
        self.log = False
        self.diverging = False
        self.finite = True   # some node has a finite value (else the range says so)
        #: said in place of the range when there is none ("no finite value")
        self.note = ""
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.resize(WIDTH, HEIGHT)
        self.hide()

    def set_range(self, metric: str, lo: float, hi: float, log: bool, visible: bool,
                  finite: bool = True, zeros: bool = False) -> None:
        """Show a sequential ramp for ``metric`` over [lo, hi]; ``finite`` False: no node
        has a finite value the ramp can place (the range is not one: it says so, and
        ``zeros`` says the values are all 0, which a log scale cannot place)."""
        self.title = METRICS.get(metric, metric) + (" (log)" if log else "")
        self.lo, self.hi, self.log, self.diverging = lo, hi, log, False
        self.finite = finite
        self.note = "" if finite else "every value is 0" if zeros else "no finite value"
        self.setVisible(visible)
        self.reposition()
        self.update()

    def set_diverging(self, metric: str, span: float) -> None:
        """Show the diverging ramp of a two-step comparison."""
        self.title = f"Δ {METRICS.get(metric, metric)} (step B vs A)"
        self.lo, self.hi, self.diverging, self.finite = -span, span, True, True
        self.note = ""
        self.show()
        self.reposition()
        self.update()

    def reposition(self) -> None:
        """Stick to the top-right corner of the parent."""
        parent = self.parentWidget()
        if parent is not None:
            # a narrow view keeps some of its width for the graph: the ramp shrinks
            width = max(MIN_WIDTH, min(WIDTH, parent.width() * 2 // 3 - 12))
            if width != self.width():
                self.resize(width, self.height())
            self.move(parent.width() - self.width() - 12, 12)
        # judged on the unfolded size: folding must not unfold it again
        full = QRect(self.x(), self.y(), self.width(), HEIGHT)
        faded = self.isVisible() and self._covers(full)
        if faded != self.faded:
            self.faded = faded
            self.resize(self.width(), FOLDED_HEIGHT if faded else HEIGHT)
            self.update()

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt API)
        t = self.theme
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        if self.faded:
            p.setOpacity(FADED)
        bg = QColor(t.card)   # a copy: the theme's colours are shared
        bg.setAlpha(235)
        p.setPen(QPen(t.card_border, 1))
        p.setBrush(bg)
        p.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
        if self.faded:
            self._paint_folded(p)
            p.end()
            return
        p.setFont(ui_font(-1.0, bold=True))
        p.setPen(t.text)
        title = p.fontMetrics().elidedText(self.title, Qt.TextElideMode.ElideRight,
                                           self.width() - 20)
        p.drawText(QRectF(10, 4, self.width() - 20, 18), Qt.AlignmentFlag.AlignVCenter, title)
        bar = QRectF(10, 25, self.width() - 70, 12)
        self._paint_ramp(p, bar)
        nan = QRectF(bar.right() + 12, 25, 12, 12)
        p.setBrush(t.non_finite)
        p.drawRoundedRect(nan, 3, 3)
        p.setFont(ui_font(-2.0))
        p.setPen(t.subtle)
        p.drawText(QRectF(nan.right() + 4, 22, 40, 18), Qt.AlignmentFlag.AlignVCenter, "NaN")
        row = QRectF(10, 40, bar.width(), 18)
        if self.note:   # every value NaN/Inf, missing or 0 on a log scale: 0 and 1 would be made up
            p.drawText(row, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                       self.note)
            p.end()
            return
        p.drawText(row, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                   format_number(self.lo))
        p.drawText(row, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                   format_number(self.hi))
        p.end()

    def _paint_ramp(self, p: QPainter, bar: QRectF) -> None:
        """The metric's colour ramp (or diverging map) as a rounded bar."""
        t = self.theme
        grad = QLinearGradient(bar.topLeft(), bar.topRight())
        for i in range(11):
            f = i / 10
            grad.setColorAt(f, t.diverging(2 * f - 1) if self.diverging else t.ramp(f))
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(grad)
        p.drawRoundedRect(bar, 3, 3)

    def _paint_folded(self, p: QPainter) -> None:
        """Only the ramp and the NaN swatch: the metric's name is the toolbar's, and
        text over the cards' own text read as neither."""
        t = self.theme
        bar = QRectF(6, 4, self.width() - 28, self.height() - 8)
        self._paint_ramp(p, bar)
        p.setBrush(t.non_finite)
        p.drawRoundedRect(QRectF(bar.right() + 6, 4, 10, bar.height()), 3, 3)
