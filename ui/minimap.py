"""A small overview of the whole graph with the visible region outlined.

The overview is a cached pixmap of the scene, re-rendered when the layout
changes (and at most every two seconds for colour changes), so panning and
live recolouring never repaint thousands of nodes twice.
"""
from __future__ import annotations

import time
from typing import Callable

from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QGraphicsScene, QGraphicsView, QWidget

from tensorscope.ui.theme import Theme

RERENDER_S = 2.0
#: px between the overview and the view's edges
MARGIN = 12
#: how opaque the overview is drawn while it lies over cards (until hovered)
FADED = 0.3
#: the least size of the main view, in overview sizes each way, that shows the overview
ROOM = 3


class Minimap(QWidget):
    """Overview in a corner of the main view; click or drag to jump there.

    It takes the bottom-right corner, or the bottom-left or top-left one when
    cards show under the first (the top-right one is the metric legend's);
    with cards under all three it stays bottom-right, faded so that they show
    through, until the pointer is over it. ``covers(scene_rect)``: whether a
    card lies in that part of the scene.
    """

    def __init__(self, main: QGraphicsView, scene: QGraphicsScene, theme: Theme,
                 covers: Callable[[QRectF], bool] | None = None) -> None:
        super().__init__(main)
        self.main, self._scene, self.theme = main, scene, theme
        self._covers = covers or (lambda _rect: False)
        self.faded = False
        self.setAttribute(Qt.WidgetAttribute.WA_Hover)
        self._pixmap: QPixmap | None = None
        self._source = QRectF()
        self._target = QRectF()
        self._rendered_at = 0.0
        self.resize(160, 116)
        self.hide()

    def refresh(self, force: bool = True) -> None:
        """Re-render the overview (``force`` False: only if it is stale)."""
        rect = self._scene.itemsBoundingRect()
        if rect.isEmpty():
            self.hide()
            return
        visible = self._visible()
        # only when much of the graph is off screen (it would hide nodes otherwise), and
        # in a view large enough to keep most of itself clear of the overview
        wanted = ((rect.width() > 1.5 * visible.width() or rect.height() > 1.5 * visible.height())
                  and self.fits())
        self.setVisible(wanted)
        self.reposition()
        if wanted and (force or self._pixmap is None or time.monotonic() - self._rendered_at > RERENDER_S):
            self._render(rect.adjusted(-20, -20, 20, 20))
        self.update()

    def fits(self) -> bool:
        """Whether the main view is at least ``ROOM`` times the overview's size
        each way (a small window keeps its few square inches for the graph)."""
        vp = self.main.viewport()
        return vp.width() >= ROOM * self.width() and vp.height() >= ROOM * self.height()

    def _render(self, source: QRectF) -> None:
        ratio = min(self.width() / source.width(), self.height() / source.height())
        w, h = source.width() * ratio, source.height() * ratio
        self._target = QRectF((self.width() - w) / 2, (self.height() - h) / 2, w, h)
        self._source = source
        pixmap = QPixmap(self.size())
        pixmap.fill(self.theme.grid)
        painter = QPainter(pixmap)
        self._scene.render(painter, self._target, source)
        painter.end()
        self._pixmap = pixmap
        self._rendered_at = time.monotonic()

    def _visible(self) -> QRectF:
        return self.main.mapToScene(self.main.viewport().rect()).boundingRect()

    def reposition(self) -> None:
        """Take the first corner with no card under it (bottom-right, bottom-left,
        top-left), else bottom-right, faded (GUI thread; cheap enough for every scroll)."""
        vp = self.main.viewport()
        right, bottom = vp.width() - self.width() - MARGIN, vp.height() - self.height() - MARGIN
        corners = (QPoint(right, bottom), QPoint(MARGIN, bottom), QPoint(MARGIN, MARGIN))
        free = next((c for c in corners if not self._covers(
            self.main.mapToScene(QRect(c, self.size())).boundingRect())), None)
        faded = free is None
        self.move(free or corners[0])
        if faded != self.faded:
            self.faded = faded
            self.update()

    def covered_cards(self) -> bool:
        """Whether a card lies under the overview where it is now."""
        return self._covers(self.main.mapToScene(self.geometry()).boundingRect())

    def event(self, event) -> bool:  # noqa: D102 (Qt API)
        if event.type() in (event.Type.HoverEnter, event.Type.HoverLeave) and self.faded:
            self.update()   # drawn opaque while the pointer is over it
        return super().event(event)

    def _to_minimap(self, r: QRectF) -> QRectF:
        s = self._target.width() / self._source.width() if self._source.width() else 1.0
        return QRectF(self._target.left() + (r.left() - self._source.left()) * s,
                      self._target.top() + (r.top() - self._source.top()) * s,
                      r.width() * s, r.height() * s)

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt API)
        p = QPainter(self)
        if self.faded and not self.underMouse():
            p.setOpacity(FADED)
        if self._pixmap is not None:
            p.drawPixmap(0, 0, self._pixmap)
            colour = QColor(self.theme.accent)   # a copy: the theme's colours are shared
            p.setPen(QPen(colour, 1.5))
            colour.setAlpha(40)
            p.setBrush(colour)
            p.drawRect(self._to_minimap(self._visible()).intersected(QRectF(self.rect())))
        p.setPen(QPen(self.theme.card_border, 1))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5))
        p.end()

    def mousePressEvent(self, event) -> None:  # noqa: N802 (Qt API)
        if self._source.isEmpty() or not self._target.width():
            return
        s = self._source.width() / self._target.width()
        pos = event.position()
        self.main.centerOn(QPointF(self._source.left() + (pos.x() - self._target.left()) * s,
                                   self._source.top() + (pos.y() - self._target.top()) * s))
        self.update()

    def mouseMoveEvent(self, event) -> None:  # noqa: N802 (Qt API)
        self.mousePressEvent(event)
