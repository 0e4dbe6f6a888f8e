"""The graph canvas: cards, shape-labelled edges, live colour, minimap, export.

``GraphView`` draws a laid-out visible graph (from ``GraphModel``) with the
batched items of ``graph_items``. It never computes a layout itself: a layout
worker works out the cards' texts, sizes and positions as plain data
(``layout_runner.prepare``) and ``apply_layout`` makes the cards from them on
the GUI thread.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Collection, Iterable, Iterator, Mapping

import networkx as nx
from PySide6.QtCore import QPointF, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFontMetricsF, QImage, QPainter, QWheelEvent
from PySide6.QtWidgets import QGraphicsScene, QGraphicsView, QStyle, QWidget

from tensorscope.common.statistics import METRICS
from tensorscope.ui.graph_items import Card, EdgeLabel, EdgeLayer, NodeLayer
from tensorscope.ui.model.cards import CardText, short_dtype
from tensorscope.ui.legend import HEIGHT as LEGEND_HEIGHT
from tensorscope.ui.legend import MetricLegend
from tensorscope.ui.minimap import Minimap
from tensorscope.ui.theme import Theme, make_theme, mono_font

LOG_METRICS = tuple(m.key for m in METRICS if m.log)
FLOATS = ("float16", "bfloat16", "float32", "float64")


def edge_style(vis: nx.DiGraph, u: str, v: str) -> str:
    """``device``/``precision`` where a tensor changes device or float precision."""
    a, b = vis.nodes[u], vis.nodes[v]
    if a.get("kind") in ("call", "group", "input") and b.get("kind") in ("call", "group"):
        if a.get("device") and b.get("device") and a["device"] != b["device"]:
            return "device"
        if a.get("dtype") in FLOATS and b.get("dtype") in FLOATS and a["dtype"] != b["dtype"]:
            return "precision"
    return "normal"


_LUTS: dict[int, list[QColor]] = {}


def colour_lookup(values: Mapping[str, float | None], lo: float, hi: float, log: bool,
                  theme: Theme) -> dict[str, QColor]:
    """Map values to ramp colours through a 256-entry table (fast for thousands)."""
    lut = _LUTS.get(id(theme))
    if lut is None:
        lut = _LUTS[id(theme)] = [theme.ramp(i / 255) for i in range(256)]
    if log:
        lo, hi = math.log10(max(lo, 1e-30)), math.log10(max(hi, 1e-30))
    scale = 255.0 / (hi - lo) if hi > lo else 0.0
    mid, bad, out = lut[128], theme.non_finite, {}
    log10, isfinite = math.log10, math.isfinite
    for nid, v in values.items():
        if v is None:
            continue
        if not isfinite(v):
            out[nid] = bad
            continue
        if log:
            if v <= 0:   # no place on a log scale: the foot of the ramp, whatever the range
                out[nid] = lut[0]
                continue
            v = log10(v)
        if scale == 0.0:
            out[nid] = mid
            continue
        i = int((v - lo) * scale)
        out[nid] = lut[0 if i < 0 else 255 if i > 255 else i]
    return out


#: the least zoom the default fit uses: card titles stay readable (above the cards'
#: text level of detail); a graph too big for the view at it starts at its top
READABLE_SCALE = 0.72

#: arrow keys → the direction (x, y) they move the selection in the graph
ARROWS = {Qt.Key.Key_Up: (0, -1), Qt.Key.Key_Down: (0, 1), Qt.Key.Key_Left: (-1, 0),
          Qt.Key.Key_Right: (1, 0)}


def _reading_order(card: Card) -> tuple[float, float]:
    """Row by row (a card's middle: a taller card in a row, one with a side-input
    row, is not above its neighbours), then left to right."""
    return (round(card.rect.center().y()), card.rect.left())


class RectIndex:
    """Rectangles bucketed on a coarse grid: does a new one overlap any? (Testing
    every edge label against every card and label was quadratic: a second per
    layout, and per selection, on a graph of 2,000 cards.)"""

    CELL = 256.0

    def __init__(self, rects: Iterable[QRectF] = ()) -> None:
        self._cells: dict[tuple[int, int], list[QRectF]] = {}
        for r in rects:
            self.add(r)

    def _keys(self, r: QRectF) -> Iterator[tuple[int, int]]:
        c = self.CELL
        for i in range(math.floor(r.left() / c), math.floor(r.right() / c) + 1):
            for j in range(math.floor(r.top() / c), math.floor(r.bottom() / c) + 1):
                yield i, j

    def add(self, r: QRectF) -> None:
        """Index ``r``."""
        for key in self._keys(r):
            self._cells.setdefault(key, []).append(r)

    def intersects(self, r: QRectF) -> bool:
        """Whether ``r`` overlaps an indexed rectangle."""
        return any(r.intersects(o) for key in self._keys(r) for o in self._cells.get(key, ()))


class GraphView(QGraphicsView):
    """Zoomable, pannable view of one graph; emits what the user picks."""

    node_clicked = Signal(str)
    node_double_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None, theme: Theme | None = None) -> None:
        super().__init__(parent)
        self.theme = theme or make_theme()
        self._scene = QGraphicsScene(self)  # parented: kept alive with the view
        self.setScene(self._scene)
        self.edges = EdgeLayer(self.theme)
        self.nodes = NodeLayer(self.theme)
        self._scene.addItem(self.edges)
        self._scene.addItem(self.nodes)
        self.graph = nx.DiGraph()
        self.colour_metric = "grad_norm"
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.MinimalViewportUpdate)
        self.setBackgroundBrush(self.theme.background)
        self.legend = MetricLegend(self.viewport(), self.theme, covers=lambda r: self._has_card_in(
            self.mapToScene(r).boundingRect()))
        self.minimap = Minimap(self, self._scene, self.theme, covers=self._has_card_in)
        self._empty_text = "Waiting for a training script…"
        self.auto_fit = True   # refit on resize until the user zooms or pans
        #: which cards a click or an arrow key selects (the host's: those of a module)
        self.selectable: Callable[[str], bool] = lambda _nid: True
        self._fitting = False
        self._scene_rect: QRectF | None = None   # the laid-out graph's, before any fit band
        self._fitted_for: tuple[int, int] | None = None

    # ------------------------------------------------------------ content ---
    def set_empty_text(self, text: str) -> None:
        """What an empty canvas says."""
        self._empty_text = text
        self.viewport().update()

    def apply_layout(self, vis: nx.DiGraph, texts: Mapping[str, CardText],
                     sizes: Mapping[str, tuple[float, float]], layout: Any,
                     fit: bool = True) -> None:
        """Make the cards, place them at the layout's positions, rebuild the edges."""
        self.graph = vis
        cards = []
        for nid, text in texts.items():
            w, h = sizes[nid]
            x, y = layout.positions.get(nid, (0.0, 0.0))
            cards.append(Card(**vars(text), rect=QRectF(x - w / 2, y - h / 2, w, h)))
        self.nodes.set_cards(cards)
        self._build_edges(getattr(layout, "edge_points", {}))
        self._scene_rect = self._scene.itemsBoundingRect().adjusted(-60, -60, 60, 60)
        self._scene.setSceneRect(self._scene_rect)
        self.minimap.refresh()
        if fit:
            self.fit_default()

    def _build_edges(self, points: Mapping[tuple, list], related: set[str] = frozenset(),
                     labels: list[EdgeLabel] | None = None) -> None:
        """The edges' paths; ``labels`` placed before for the same cards (else placed now)."""
        by = self.nodes.by_id
        ports = self._ports()
        polylines, rel = [], []
        for u, v in self.graph.edges:
            if u not in by or v not in by:
                continue
            mid = [QPointF(*p) for p in points.get((u, v), [])[1:-1]]
            mid = [p for p in mid if not by[u].rect.contains(p) and not by[v].rect.contains(p)]
            pts = [ports[("out", u, v)], *mid, ports[("in", u, v)]]
            if u in related and v in related:
                rel.append(pts)
            else:
                polylines.append((pts, edge_style(self.graph, u, v)))
        if labels is None:
            labels = self._place_labels(ports)
        self.edges.set_edges(polylines, labels, rel)
        self._points, self._labels = points, labels

    def _ports(self) -> dict[tuple[str, str, str], QPointF]:
        """Spread each card's incoming/outgoing edges across its bottom/top."""
        by, ports = self.nodes.by_id, {}
        for nid, card in by.items():
            outs = sorted((v for v in self.graph.successors(nid) if v in by),
                          key=lambda v: by[v].rect.center().x())
            ins = sorted((u for u in self.graph.predecessors(nid) if u in by),
                         key=lambda u: by[u].rect.center().x())
            r = card.rect
            for i, v in enumerate(outs):
                x = r.left() + r.width() * (i + 1) / (len(outs) + 1)
                ports[("out", nid, v)] = QPointF(x, r.bottom())
            for i, u in enumerate(ins):
                x = r.left() + r.width() * (i + 1) / (len(ins) + 1)
                ports[("in", u, nid)] = QPointF(x, r.top())
        return ports

    def _place_labels(self, ports: dict) -> list[EdgeLabel]:
        """One label per (source, shape) just below the source; never overlapping."""
        fm = QFontMetricsF(mono_font(-1.5))
        placed: list[EdgeLabel] = []
        taken = RectIndex(c.rect for c in self.nodes.cards)
        seen: set[tuple[str, str]] = set()
        for u, v, a in self.graph.edges(data=True):
            text = str(a.get("label") or "")
            style = edge_style(self.graph, u, v) if u in self.nodes.by_id else "normal"
            if style != "normal":
                nu, nv = self.graph.nodes[u], self.graph.nodes[v]
                change = (f"{nu.get('device')}→{nv.get('device')}" if style == "device" else
                          f"{short_dtype(nu.get('dtype', ''))}→{short_dtype(nv.get('dtype', ''))}")
                text = f"{text}  {change}" if text else change
            if not text or (u, text) in seen or ("out", u, v) not in ports:
                continue
            start = ports[("out", u, v)]
            w, h = fm.horizontalAdvance(text) + 10, fm.height() + 4
            for dy in (16, 30, 44):
                rect = QRectF(start.x() - w / 2, start.y() + dy - h / 2, w, h)
                if not taken.intersects(rect):
                    placed.append(EdgeLabel(text, rect, style))
                    taken.add(rect)
                    seen.add((u, text))
                    break
        return placed

    # ------------------------------------------------------------- colour ---
    def set_metric_values(self, values: Mapping[str, float | None], metric: str,
                          off_range: Collection[str] = ()) -> None:
        """Colour nodes by ``metric`` (NaN/Inf red); update the legend. ≤16 ms for 2k.

        Nodes in ``off_range`` are coloured (clamped to the ends of the ramp) but
        do not stretch the range, unless nothing else has a value.
        """
        self.colour_metric = metric
        log = metric in LOG_METRICS
        usable = {nid: v for nid, v in values.items()
                  if v is not None and math.isfinite(v) and (v > 0 or not log)}
        finite = [v for nid, v in usable.items() if nid not in off_range] or list(usable.values())
        lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
        self.nodes.colours = colour_lookup(values, lo, hi, log, self.theme)
        self.nodes.update()
        self.minimap.refresh(force=False)
        zeros = not finite and any(v == 0 for v in values.values() if v is not None)
        self.legend.set_range(metric, lo, hi, log, bool(self.nodes.colours), bool(finite),
                              zeros)

    def set_difference_values(self, diffs: Mapping[str, float | None], metric: str) -> None:
        """Colour nodes by relative change between two steps (diverging)."""
        finite = [abs(v) for v in diffs.values() if v is not None and math.isfinite(v)]
        span = max(finite) if finite else 1.0
        self.nodes.colours = {nid: self.theme.diverging(v / span if span else 0.0)
                              for nid, v in diffs.items() if v is not None}
        self.nodes.update()
        self.legend.set_diverging(metric, span)

    # ---------------------------------------------------------- selection ---
    def select_nodes(self, ids: list[str], centre: bool = False) -> None:
        """Mark ``ids`` selected (and centre the first if asked)."""
        self.nodes.selected = {i for i in ids if i in self.nodes.by_id}
        self.nodes.update()
        if centre and ids and ids[0] in self.nodes.by_id:
            rect = self.nodes.by_id[ids[0]].rect
            visible = self.mapToScene(self.viewport().rect()).boundingRect()
            if not visible.contains(rect):   # only scroll when it is off screen
                self.centerOn(rect.center())
                self.auto_fit = False   # a later resize must not scroll it away again

    def reveal(self, nid: str) -> None:
        """Scroll so that node ``nid`` is on screen (no zoom change; GUI thread)."""
        card = self.nodes.by_id.get(nid)
        if card is None:
            return
        visible = self.mapToScene(self.viewport().rect()).boundingRect()
        if not visible.contains(card.rect):
            self.centerOn(card.rect.center())
            self.auto_fit = False
            self.minimap.update()

    def set_related(self, ids: set[str]) -> None:
        """Highlight nodes (and edges between them) related to the selection."""
        self.nodes.related = {i for i in ids if i in self.nodes.by_id}
        self._build_edges(getattr(self, "_points", {}), self.nodes.related,
                          getattr(self, "_labels", None))   # the cards have not moved
        self.nodes.update()

    def set_executing(self, nid: str | None) -> None:
        """Outline the node that is executing now (while stepping)."""
        self.nodes.executing = nid
        self.nodes.update()

    def set_origins(self, ids: set[str] | dict[str, str]) -> None:
        """Mark the nodes where a NaN/Inf first appeared, or (a dict of tags) where an
        exception was raised (a tag and a heavy frame)."""
        self.nodes.set_origins(ids)

    def set_breakpoints(self, ids: set[str]) -> None:
        """Mark nodes carrying a breakpoint."""
        self.nodes.breakpoints = set(ids)
        self.nodes.update()

    def find(self, text: str) -> list[str]:
        """Node ids whose path or class contains ``text`` (case-insensitive)."""
        t = text.strip().lower()
        if not t:
            return []
        exact = [c.id for c in self.nodes.cards if c.path.lower() == t]
        return exact or [c.id for c in self.nodes.cards
                         if t in c.path.lower() or t in c.title.lower()]

    # -------------------------------------------------------- navigation ---
    def fit_size(self) -> tuple[int, int]:
        """The viewport's size as if both scroll bars were shown.

        Fitting against this size does not change when a scroll bar appears or
        disappears, so a fit cannot toggle the bars and trigger another resize
        (the loop that froze the GUI: fit → bar shown → resize → fit → bar hidden…).
        """
        r = self.contentsRect()
        bar = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        return max(1, r.width() - bar), max(1, r.height() - bar)

    def fit_default(self) -> None:
        """Fit the graph, but never zoom past 100% or below readable text if avoidable."""
        rect = self.nodes.boundingRect().united(self.edges.boundingRect())
        if rect.isEmpty() or self._fitting:
            return
        self._fitting = True
        try:
            self._fit_default(rect)
        finally:
            self._fitting = False

    def _fit_default(self, rect: QRectF, top: float = 0.0) -> None:
        """Fit ``rect`` below a band of ``top`` pixels (the legend's, when a card
        would otherwise sit under it)."""
        self.resetTransform()
        vw, vh = self.fit_size()
        self._fitted_for = (vw, vh)
        scale = min(1.0, vw / (rect.width() + 40), (vh - top) / (rect.height() + 40))
        small = scale < READABLE_SCALE   # too small to read: start at the top, readable
        centre_x = rect.center().x()
        if small:
            scale = READABLE_SCALE
            if (rect.width() + 40) * scale > vw and self.nodes.cards:
                # wider than the view too (a deep model expanded): where the graph
                # starts, not the middle of its bounding box, which may be empty canvas
                first = min(self.nodes.cards, key=lambda c: (c.rect.top(), c.rect.left()))
                centre_x = min(max(first.rect.center().x(), rect.left() + vw / scale / 2),
                               rect.right() - vw / scale / 2)
        # the band is part of the scene: a scene smaller than the view is centred,
        # and centerOn cannot move it
        base = self._scene_rect if self._scene_rect is not None else self._scene.sceneRect()
        self._scene.setSceneRect(base.adjusted(0.0, -top / scale, 0.0, 0.0) if top else base)
        self.scale(scale, scale)
        if small:
            self.centerOn(QPointF(centre_x, rect.top() + vh / scale / 2 - 20 - top / scale))
        else:
            self.centerOn(QPointF(rect.center().x(), rect.center().y() - top / 2 / scale))
        if not top and self._under_legend():
            self._fit_default(rect, top=LEGEND_HEIGHT + 16.0)
            return
        self.minimap.refresh(force=False)

    def _under_legend(self) -> bool:
        """Whether a card shows under the metric legend's corner (shown or to come)."""
        vw, _vh = self.fit_size()
        box = QRect(vw - self.legend.width() - 12, 12, self.legend.width(), LEGEND_HEIGHT)
        area = self.mapToScene(box).boundingRect()
        return any(card.rect.intersects(area) for card in self.nodes.cards)

    def _has_card_in(self, area: QRectF) -> bool:
        """Whether a card lies in ``area`` (scene coordinates)."""
        return any(card.rect.intersects(area) for card in self.nodes.cards)

    def fit_all(self) -> None:
        """Fit the whole graph in the window."""
        rect = self.nodes.boundingRect().united(self.edges.boundingRect())
        if not rect.isEmpty():
            self.fitInView(rect, Qt.AspectRatioMode.KeepAspectRatio)
            self.minimap.refresh(force=False)

    def zoom(self, factor: float) -> None:
        """Zoom by ``factor`` (clamped to 3%–400%)."""
        current = self.transform().m11()
        factor = max(0.03 / current, min(4.0 / current, factor))
        self.scale(factor, factor)
        self.legend.reposition()
        self.minimap.refresh(force=False)

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802 (Qt API)
        self.auto_fit = False
        self.zoom(1.0015 ** event.angleDelta().y())

    def scrollContentsBy(self, dx: int, dy: int) -> None:  # noqa: N802 (Qt API)
        super().scrollContentsBy(dx, dy)
        self.legend.reposition()   # a viewport child: the viewport's scroll moves it too
        if self.minimap.isVisible():
            self.minimap.reposition()   # off the cards scrolled under it
        self.minimap.follow()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt API)
        super().resizeEvent(event)
        if self.auto_fit and self.nodes.cards and not self._fitting \
                and self.fit_size() != self._fitted_for:
            self.fit_default()
        self.legend.reposition()
        if self.minimap.isVisible() != (self.minimap.fits() and bool(self.nodes.cards)):
            self.minimap.refresh(force=False)   # shown or hidden for the view's new size
        self.minimap.reposition()

    def mousePressEvent(self, event) -> None:  # noqa: N802 (Qt API)
        card = self.nodes.card_at(self.mapToScene(event.position().toPoint()))
        if card is not None and event.button() == Qt.MouseButton.LeftButton:
            self.node_clicked.emit(card.id)
        else:
            self.auto_fit = False   # dragging the canvas: the user navigates now
        super().mousePressEvent(event)

    def keyPressEvent(self, event) -> None:  # noqa: N802 (Qt API)
        """Arrow keys select the nearest card that way (the first card when none is
        selected); Enter opens or folds the selected card, as a double click does."""
        plain = not event.modifiers() & (Qt.KeyboardModifier.ControlModifier
                                         | Qt.KeyboardModifier.AltModifier)
        if plain and event.key() in ARROWS and self.nodes.cards:
            nid = self.neighbour(ARROWS[event.key()])
            if nid is not None:
                self.node_clicked.emit(nid)
                self.reveal(nid)
            event.accept()
            return
        if plain and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            current = self._selected_card()
            if current is not None:
                self.node_double_clicked.emit(current.id)
                event.accept()
                return
        super().keyPressEvent(event)

    def _selected_card(self) -> Card | None:
        """The selected card highest up (a module called twice has two)."""
        chosen = [self.nodes.by_id[i] for i in self.nodes.selected if i in self.nodes.by_id]
        return min(chosen, key=_reading_order) if chosen else None

    def neighbour(self, direction: tuple[int, int]) -> str | None:
        """The card nearest the selected one in ``direction`` ((0, 1): down), favouring
        cards straight that way; with no selection, the first card (top left)."""
        cards = [c for c in self.nodes.cards if self.selectable(c.id)]
        current = self._selected_card()
        if current is None:
            first = min(cards, key=_reading_order, default=None)
            return first.id if first is not None else None
        dx, dy = direction
        origin = current.rect.center()
        best, score = None, math.inf
        for card in cards:
            d = card.rect.center() - origin
            along = d.x() * dx + d.y() * dy
            if card is current or along < 1.0:
                continue
            across = abs(d.x() * dy) + abs(d.y() * dx)
            if along + 2.0 * across < score:
                best, score = card, along + 2.0 * across
        return best.id if best is not None else None

    def mouseDoubleClickEvent(self, event) -> None:  # noqa: N802 (Qt API)
        card = self.nodes.card_at(self.mapToScene(event.position().toPoint()))
        if card is not None:
            self.node_double_clicked.emit(card.id)
        else:
            super().mouseDoubleClickEvent(event)

    def drawForeground(self, painter: QPainter, rect: QRectF) -> None:  # noqa: N802
        if self.nodes.cards:
            return
        painter.save()
        painter.resetTransform()
        painter.setPen(self.theme.subtle)
        box = self.viewport().rect()
        margin = max(24, (box.width() - 640) // 2)   # a readable measure, wrapped
        painter.drawText(box.adjusted(margin, 24, -margin, -24),
                         int(Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap),
                         self._empty_text)
        painter.restore()

    # ------------------------------------------------------------- export ---
    def export_png(self, path: str, scale: float = 2.0) -> bool:
        """Render the whole graph to a PNG at ``scale``; returns success."""
        rect = self._scene.itemsBoundingRect().adjusted(-20, -20, 20, 20)
        size = QSize(max(1, int(rect.width() * scale)), max(1, int(rect.height() * scale)))
        image = QImage(size, QImage.Format.Format_ARGB32)
        image.fill(self.theme.background)
        painter = QPainter(image)
        painter.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self._scene.render(painter, QRectF(0, 0, size.width(), size.height()), rect)
        painter.end()
        return image.save(path, "PNG")

    def export_svg(self, path: str) -> bool:
        """Write the whole graph as SVG (QtSvg); returns success."""
        from PySide6.QtSvg import QSvgGenerator
        rect = self._scene.itemsBoundingRect().adjusted(-20, -20, 20, 20)
        gen = QSvgGenerator()
        gen.setFileName(path)
        gen.setSize(QSize(int(rect.width()), int(rect.height())))
        gen.setViewBox(QRectF(0, 0, rect.width(), rect.height()))
        gen.setTitle("TensorScope graph")
        painter = QPainter(gen)
        painter.fillRect(QRectF(0, 0, rect.width(), rect.height()), self.theme.background)
        self._scene.render(painter, QRectF(0, 0, rect.width(), rect.height()), rect)
        ok = painter.end()
        return ok
