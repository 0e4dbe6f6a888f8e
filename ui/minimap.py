"""A small overview of the whole graph with the visible region outlined.

The overview is a schematic drawn from the view's own cards and edges: every
card a block at least ``MIN_BLOCK`` px in its metric colour (grey before any
colour), the edges as hairlines. Its shape follows the graph's (a tall strip
for a deep chain, a wide band for a wide graph), and a graph too big to show
whole at ``MIN_SCALE`` shows the part around the view, which follows the view
as it scrolls. The picture is a cached pixmap of a band around what is shown,
re-rendered when the layout changes, when the view leaves the band, and at
most every two seconds for colour changes, so panning and live recolouring
never repaint thousands of nodes twice.
"""
from __future__ import annotations

import math
import time
from typing import Callable

from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPen, QPixmap, QTransform
from PySide6.QtWidgets import QGraphicsScene, QGraphicsView, QWidget

from tensorscope.ui.theme import Theme

RERENDER_S = 2.0
#: px between the overview and the view's edges
MARGIN = 12
#: how opaque the overview is drawn while it lies over cards (until hovered)
FADED = 0.3
#: the least area of the main view, in overview areas (squared), that shows the overview
ROOM = 3
#: the overview's usual size; a tall or wide graph gets the same area in its own shape
BASE = QSize(160, 116)
#: the overview's least width and height (px), and its largest share of the view each way
LEAST_SIDE, MOST_SHARE = 64, 0.45
#: the least scale the overview draws at: a card of 200×60 stays a 10×3 px block; a
#: graph larger than the overview at this scale shows the part around the view
MIN_SCALE = 0.05
#: the least size (px) a card is drawn in the overview
MIN_BLOCK = 2.0


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
        self._graph = QRectF()       # the graph's bounds (scene), with a margin
        self._band = QRectF()        # the part of the scene the pixmap holds
        self.scale = 1.0             # overview px per scene unit
        self._held: QRectF | None = None   # the window kept still while dragging
        self._rendered_at = 0.0
        self.resize(BASE)
        self.hide()

    # ------------------------------------------------------------ shape ---
    def refresh(self, force: bool = True) -> None:
        """Re-render the overview (``force`` False: only if it is stale)."""
        rect = self._scene.itemsBoundingRect()
        if rect.isEmpty():
            self.hide()
            return
        graph = rect.adjusted(-20, -20, 20, 20)
        if graph != self._graph:
            force = True
        self._graph = graph
        visible = self._visible()
        # only when much of the graph is off screen (it would hide nodes otherwise), and
        # in a view large enough to keep most of itself clear of the overview
        wanted = ((rect.width() > 1.5 * visible.width() or rect.height() > 1.5 * visible.height())
                  and self.fits())
        if wanted:
            size = self.shape_for(graph)
            if size != self.size():
                self.resize(size)
                force = True
            scale = max(MIN_SCALE, min(size.width() / graph.width(),
                                       size.height() / graph.height()))
            if not math.isclose(scale, self.scale):
                self.scale = scale
                force = True
        self.setVisible(wanted)
        self.reposition()
        if wanted and (force or self._pixmap is None or not self._band.contains(self.shown_part())
                       or time.monotonic() - self._rendered_at > RERENDER_S):
            self._render()
        self.update()

    def shape_for(self, graph: QRectF) -> QSize:
        """The overview's size for a graph of that shape: ``BASE``'s area in the
        graph's proportions, each side at least ``LEAST_SIDE`` and at most
        ``MOST_SHARE`` of the view (a deep chain gets a tall strip, not a line)."""
        vp = self.main.viewport()
        aspect = graph.height() / graph.width() if graph.width() > 0 else 1.0
        area = BASE.width() * BASE.height()
        most_w = max(LEAST_SIDE, int(vp.width() * MOST_SHARE))
        most_h = max(LEAST_SIDE, int(vp.height() * MOST_SHARE))
        w = min(most_w, max(LEAST_SIDE, round(math.sqrt(area / aspect))))
        h = min(most_h, max(LEAST_SIDE, round(math.sqrt(area * aspect))))
        # a side held at its least gives its room to the other, up to the view's share
        if w == LEAST_SIDE:
            h = min(most_h, max(h, round(area / w)))
        elif h == LEAST_SIDE:
            w = min(most_w, max(w, round(area / h)))
        return QSize(w, h)

    def fits(self) -> bool:
        """Whether the main view has ``ROOM``² times the usual overview's area, and
        room for its least side (a small window keeps its few square inches for the
        graph; a narrow but tall view still shows the tall strip of a deep graph)."""
        vp = self.main.viewport()
        return (vp.width() * vp.height() >= ROOM * ROOM * BASE.width() * BASE.height()
                and min(vp.width(), vp.height()) >= ROOM * LEAST_SIDE)

    def shown_part(self) -> QRectF:
        """The part of the scene the overview shows: the whole graph when it fits at
        ``scale``, else an overview-sized part around the view's centre, kept
        inside the graph (held still while the pointer drags)."""
        if self._held is not None:
            return QRectF(self._held)
        w, h = self.width() / self.scale, self.height() / self.scale
        g, centre = self._graph, self._visible().center()

        def start(lo: float, hi: float, size: float, c: float) -> float:
            if hi - lo <= size:
                return (lo + hi) / 2 - size / 2   # the graph centred in the overview
            return min(max(c - size / 2, lo), hi - size)
        return QRectF(start(g.left(), g.right(), w, centre.x()),
                      start(g.top(), g.bottom(), h, centre.y()), w, h)

    def scrolls(self) -> bool:
        """Whether the graph is too big to show whole (the overview follows the view)."""
        w, h = self.width() / self.scale, self.height() / self.scale
        return self._graph.width() > w + 1 or self._graph.height() > h + 1

    # ----------------------------------------------------------- render ---
    def _render(self) -> None:
        """Draw the band around the window (three windows each way while it scrolls)."""
        win = self.shown_part()
        band = win.adjusted(-win.width(), -win.height(), win.width(), win.height()) \
            if self.scrolls() else win
        s = self.scale
        pixmap = QPixmap(QSize(max(1, math.ceil(band.width() * s)),
                               max(1, math.ceil(band.height() * s))))
        pixmap.fill(self.theme.grid)
        painter = QPainter(pixmap)
        to_px = QTransform(s, 0, 0, s, -band.left() * s, -band.top() * s)
        edges, nodes = getattr(self.main, "edges", None), getattr(self.main, "nodes", None)
        if nodes is None or edges is None:   # a plain view: render its scene as it is
            self._scene.render(painter, QRectF(pixmap.rect()), band)
        else:
            self._paint_schematic(painter, to_px, band, edges, nodes)
        painter.end()
        self._pixmap, self._band = pixmap, band
        self._rendered_at = time.monotonic()

    def _paint_schematic(self, painter: QPainter, to_px: QTransform, band: QRectF,
                         edges, nodes) -> None:
        """Edges as hairlines, then every card as a block of its colour."""
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        colour = QColor(self.theme.edge)
        colour.setAlpha(150)
        pen = QPen(colour, 1.0)
        pen.setCosmetic(True)
        painter.save()
        painter.setTransform(to_px)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        for _style, box, path, _arrows in edges.chunks:
            if box.intersects(band):
                painter.drawPath(path)
        painter.restore()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        painter.setPen(Qt.PenStyle.NoPen)
        plain = self.theme.subtle
        colours = nodes.colours
        for card in nodes.cards:
            if not card.rect.intersects(band):
                continue
            r = to_px.mapRect(card.rect)
            if r.width() < MIN_BLOCK or r.height() < MIN_BLOCK:
                c = r.center()
                r = QRectF(0, 0, max(MIN_BLOCK, r.width()), max(MIN_BLOCK, r.height()))
                r.moveCenter(c)
            painter.setBrush(colours.get(card.id) or plain)
            painter.drawRect(r)

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

    def follow(self) -> None:
        """The view scrolled: repaint, and render the band again when the part shown
        left it (GUI thread; called on every scroll)."""
        if self.isVisible() and self._pixmap is not None and not self._band.contains(self.shown_part()):
            self._render()
        self.update()

    def covered_cards(self) -> bool:
        """Whether a card lies under the overview where it is now."""
        return self._covers(self.main.mapToScene(self.geometry()).boundingRect())

    def event(self, event) -> bool:  # noqa: D102 (Qt API)
        if event.type() in (event.Type.HoverEnter, event.Type.HoverLeave) and self.faded:
            self.update()   # drawn opaque while the pointer is over it
        return super().event(event)

    def to_minimap(self, r: QRectF) -> QRectF:
        """A scene rectangle in the overview's pixels."""
        win, s = self.shown_part(), self.scale
        return QRectF((r.left() - win.left()) * s, (r.top() - win.top()) * s,
                      r.width() * s, r.height() * s)

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt API)
        p = QPainter(self)
        if self.faded and not self.underMouse():
            p.setOpacity(FADED)
        p.fillRect(self.rect(), self.theme.grid)
        if self._pixmap is not None:
            p.drawPixmap(self.to_minimap(self._band).topLeft(), self._pixmap)
            colour = QColor(self.theme.accent)   # a copy: the theme's colours are shared
            p.setPen(QPen(colour, 1.5))
            colour.setAlpha(40)
            p.setBrush(colour)
            shown = self.to_minimap(self._visible()).intersected(QRectF(self.rect()))
            if shown.height() < 3:   # the view's place stays visible however large the graph
                shown.adjust(0, -1.5, 0, 1.5)
            p.drawRect(shown)
        p.setPen(QPen(self.theme.card_border, 1))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5))
        p.end()

    def mousePressEvent(self, event) -> None:  # noqa: N802 (Qt API)
        if self._graph.isEmpty() or self._pixmap is None:
            return
        if self._held is None:
            self._held = self.shown_part()   # still under the pointer while it drags
        win, pos = self._held, event.position()
        self.main.centerOn(QPointF(win.left() + pos.x() / self.scale,
                                   win.top() + pos.y() / self.scale))
        self.update()

    def mouseMoveEvent(self, event) -> None:  # noqa: N802 (Qt API)
        if event.buttons() & Qt.MouseButton.LeftButton:
            self.mousePressEvent(event)

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802 (Qt API)
        self._held = None
        self.follow()
