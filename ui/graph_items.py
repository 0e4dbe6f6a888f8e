"""Batched scene items: all node cards in one item, all edges in a few paths.

Per-node QGraphicsItems cost ~0.75 ms each to build; one ``NodeLayer`` that
paints every card inside the exposed rectangle builds instantly and recolours
by swapping a dict (no per-item updates). ``EdgeLayer`` holds one
QPainterPath per edge style plus the shape labels, placed so that they never
overlap at the default zoom.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (QColor, QFontMetricsF, QPainter, QPainterPath, QPen,
                           QPolygonF)
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem

from tensorscope.ui.model.cards import (MEASURED, PILL_DOT, SIDE_ROW, CardText, TextWidths,
                                       elide_path, short_dtype)
from tensorscope.ui.theme import Theme, mono_font, ui_font

LOD_TEXT = 0.4
#: the tag beside a card where a NaN/Inf first appeared
ORIGIN_TAG = "NaN/Inf starts here"


@dataclass
class Card(CardText):
    """One node as drawn: its text plus its rectangle in the scene (GUI thread)."""

    rect: QRectF = field(default_factory=QRectF)


def text_widths() -> TextWidths:
    """The card fonts' character advances, for layout workers (GUI thread)."""
    fonts = {"title": ui_font(0.5, bold=True), "small": ui_font(-1.0), "mono": mono_font(-0.5)}
    advances = {}
    for name, font in fonts.items():
        metrics = QFontMetricsF(font)
        advances[name] = {ch: metrics.horizontalAdvance(ch) for ch in MEASURED}
    return TextWidths(advances)


class NodeLayer(QGraphicsItem):
    """Paints every card; holds selection, colours and markers as plain state."""

    def __init__(self, theme: Theme) -> None:
        super().__init__()
        self.theme = theme
        self.cards: list[Card] = []
        self.by_id: dict[str, Card] = {}
        self.colours: dict[str, QColor] = {}
        self.selected: set[str] = set()
        self.related: set[str] = set()
        self.breakpoints: set[str] = set()
        #: cards where a NaN/Inf first appeared (a ``non_finite`` finding names them): a
        #: heavy frame and a tag; the cards it only flowed through are tinted lightly
        self.origins: set[str] = set()
        #: the tag of each origin other than ``ORIGIN_TAG`` (a module that raised)
        self._tags: dict[str, str] = {}
        self.executing: str | None = None
        self._bounds = QRectF()
        self._card_bounds = QRectF()
        self._fonts = (ui_font(0.5, bold=True), ui_font(-1.0), mono_font(-0.5),
                       ui_font(-2.0, bold=True))
        self._metrics = [QFontMetricsF(f) for f in self._fonts]
        self._text_cache: dict[str, tuple[float, str]] = {}

    def set_cards(self, cards: list[Card]) -> None:
        """Replace every card (after a layout)."""
        self.prepareGeometryChange()
        self.cards = cards
        self.by_id = {c.id: c for c in cards}
        self._text_cache = {}
        rect = QRectF()
        for c in cards:
            rect = rect.united(c.rect)
        self._card_bounds = rect
        self.origins = {i for i in self.origins if i in self.by_id}
        self._bounds = self._with_tags(rect)
        self.update()

    def set_origins(self, ids: set[str] | dict[str, str]) -> None:
        """Mark the cards where a NaN/Inf first appeared, or (``ids`` a dict of tags)
        where something else went wrong, such as an exception raised (GUI thread)."""
        tags = ({i: t for i, t in ids.items() if i in self.by_id} if isinstance(ids, dict)
                else {i: ORIGIN_TAG for i in ids if i in self.by_id})
        if set(tags) == self.origins and tags == {i: self.tag_text(i) for i in self.origins}:
            return
        self.prepareGeometryChange()
        self.origins = set(tags)
        self._tags = {i: t for i, t in tags.items() if t != ORIGIN_TAG}
        self._bounds = self._with_tags(self._card_bounds)
        self.update()

    def _with_tags(self, rect: QRectF) -> QRectF:
        """The cards' bounds, with room for the origin tags left of their cards."""
        out = rect.adjusted(-12, -12, 12, 12)
        for nid in self.origins:
            out = out.united(self.tag_rect(self.by_id[nid]))
        return out

    def tag_text(self, nid: str) -> str:
        """The tag beside an origin's card."""
        return self._tags.get(nid, ORIGIN_TAG)

    def tag_rect(self, card: Card) -> QRectF:
        """Where the origin tag of ``card`` goes: left of it, level with its title."""
        w = self._metrics[3].horizontalAdvance(self.tag_text(card.id)) + 14
        return QRectF(card.rect.left() - w - 16, card.rect.top() + 6, w, 18)

    def boundingRect(self) -> QRectF:  # noqa: N802 (Qt API)
        return self._bounds

    def card_at(self, pos: QPointF) -> Card | None:
        """The card under a scene position."""
        for card in reversed(self.cards):
            if card.rect.contains(pos):
                return card
        return None

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        exposed = option.exposedRect
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, lod > 0.2)
        for card in self.cards:
            if not card.rect.intersects(exposed):
                continue
            if lod < LOD_TEXT:
                self._paint_block(painter, card)
            else:
                self._paint_card(painter, card)
        for nid in self.origins:   # after every card: nothing is drawn over a tag
            card = self.by_id[nid]
            if self.tag_rect(card).intersects(exposed) and lod >= LOD_TEXT:
                self._paint_tag(painter, card)

    def _paint_tag(self, painter: QPainter, card: Card) -> None:
        """A red tag left of a card where a NaN/Inf first appeared (or an exception was
        raised), with a tick to it."""
        t, rect = self.theme, self.tag_rect(card)
        y = rect.center().y()
        painter.setPen(QPen(t.non_finite, 2.0))
        painter.drawLine(QPointF(rect.right(), y), QPointF(card.rect.left() - 2, y))
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(t.non_finite)
        painter.drawRoundedRect(rect, 9, 9)
        painter.setFont(self._fonts[3])
        painter.setPen(t.badge_text)
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, self.tag_text(card.id))

    def _frame_pen(self, card: Card) -> QPen:
        t = self.theme
        if card.id == self.executing:
            return _marker_pen(t.executing, 3.0)
        if card.id in self.selected:
            return _marker_pen(t.accent, 2.5)
        if card.id in self.origins:
            return _marker_pen(t.non_finite, 3.5)
        colour = self.colours.get(card.id)
        if colour is not None and colour == t.non_finite:
            # where the NaN/Inf only flowed on from an origin shown: a plain red frame
            return QPen(t.non_finite, 1.5) if self.origins else _marker_pen(t.non_finite, 2.5)
        if card.id in self.related:
            return QPen(t.accent, 1.6, Qt.PenStyle.DashLine)
        return QPen(t.card_border, 1.0)

    def _paint_block(self, painter: QPainter, card: Card) -> None:
        fill = self.colours.get(card.id) or (self.theme.group_card if card.kind == "group"
                                             else self.theme.card)
        painter.setPen(self._frame_pen(card))
        painter.setBrush(fill)
        painter.drawRect(card.rect)

    def _paint_card(self, painter: QPainter, card: Card) -> None:
        t, r = self.theme, card.rect
        if card.kind in ("input", "output", "leaf", "param"):
            self._paint_pill(painter, card)
            return
        if card.kind in ("group", "opgroup"):  # stacked look: it folds several cards
            painter.setPen(QPen(t.card_border, 1.0))
            painter.setBrush(t.group_card.darker(112) if t.dark else t.group_card.darker(104))
            painter.drawRoundedRect(r.translated(5, 5), 7, 7)
        colour = self.colours.get(card.id)
        bad = colour is not None and colour == t.non_finite
        painter.setPen(self._frame_pen(card))
        fill = t.group_card if card.kind in ("group", "opgroup") else t.card
        if bad:   # NaN/Inf: tint the whole card, not just its bar
            fill = QColor(fill)
            red = t.non_finite
            carried = bool(self.origins) and card.id not in self.origins
            mix = (0.10 if t.dark else 0.06) if carried else (0.22 if t.dark else 0.14)
            fill.setRgbF(*(a + (b - a) * mix for a, b in zip(fill.getRgbF()[:3], red.getRgbF()[:3])))
        painter.setBrush(fill)
        painter.drawRoundedRect(r, 7, 7)
        if colour is not None:  # metric bar on the left edge
            bar = QPainterPath()
            bar.addRoundedRect(QRectF(r.left() + 1.5, r.top() + 1.5, 6, r.height() - 3), 3, 3)
            painter.fillPath(bar, colour)
        self._paint_text(painter, card)
        if card.id in self.breakpoints:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(t.breakpoint)
            painter.drawEllipse(QPointF(r.left() + 1, r.top() + 1), 6, 6)

    def _texts(self, card: Card) -> tuple[float, str]:
        """Title width and the elided path text of a card (computed once per layout)."""
        cached = self._text_cache.get(card.id)
        if cached is None:
            title_m, small_m = self._metrics[0], self._metrics[1]
            r = card.rect
            avail = r.width() - 24
            if card.kind in ("op", "opgroup"):
                cached = (0.0, _elide_path(small_m, card.path, avail, card))
            else:
                title_w = title_m.horizontalAdvance(card.title)
                room = avail - title_w - 10
                cached = (title_w, _elide_path(small_m, card.path, room, card) if room > 20 else "")
            self._text_cache[card.id] = cached
        return cached

    def _paint_text(self, painter: QPainter, card: Card) -> None:
        t, r = self.theme, card.rect
        title_f, small_f, mono_f, _badge_f = self._fonts
        left, right = r.left() + 14, r.right() - 10
        _title_w, path = self._texts(card)
        painter.setFont(title_f)
        painter.setPen(t.text)
        if card.kind in ("op", "opgroup"):
            top = QRectF(left, r.top() + 4, right - left, 20 if card.path else r.height() - 8)
            painter.drawText(top, Qt.AlignmentFlag.AlignVCenter, card.title)
            if card.path:
                painter.setFont(small_f)
                painter.setPen(t.subtle)
                painter.drawText(QRectF(left, r.top() + 21, right - left, 16),
                                 Qt.AlignmentFlag.AlignVCenter, path)
            return
        head = QRectF(left, r.top() + 6, right - left, 20)
        painter.drawText(head, Qt.AlignmentFlag.AlignVCenter, card.title)
        if path:
            painter.setFont(small_f)
            painter.setPen(t.subtle)
            painter.drawText(head, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, path)
        if card.side:   # side inputs: a stub from the left edge and their names
            y = r.top() + 26 + SIDE_ROW / 2
            painter.setPen(QPen(t.edge, 1.4))
            painter.drawLine(QPointF(r.left() - 12, y), QPointF(r.left() + 8, y))
            painter.setFont(small_f)
            painter.setPen(t.subtle)
            row = QRectF(left, r.top() + 26, right - left, SIDE_ROW)
            painter.drawText(row, Qt.AlignmentFlag.AlignVCenter, small_elide(
                self._metrics[1], card.side, row.width()))
        base = QRectF(left, r.bottom() - 25, right - left, 20)
        painter.setFont(mono_f)
        painter.setPen(t.text)
        painter.drawText(base, Qt.AlignmentFlag.AlignVCenter, card.shape or "—")
        x = right
        for text, colour in self.badges(card):
            x = self._badge(painter, x, base.center().y(), text, colour) - 5

    def badges(self, card: Card) -> list[tuple[str, QColor]]:
        """The badges of a card's bottom row, right to left: device, dtype, NaN/Inf.
        The card was sized for its dtype and device: a NaN/Inf badge takes the place
        of the device's, then the dtype's, rather than run over the shape."""
        t = self.theme
        bad = self.colours.get(card.id) == t.non_finite
        badges = [(text, colour) for text, colour in (
            (card.device, t.device_colour(card.device)),
            (short_dtype(card.dtype), t.dtype_colour(card.dtype)),
            ("NaN/Inf" if bad else "", t.non_finite)) if text]
        room = card.rect.width() - 24 - self._metrics[2].horizontalAdvance(card.shape or "—") - 8
        while len(badges) > 1 and sum(self._badge_width(b) + 5 for b, _c in badges) > room:
            badges.pop(0)
        return badges

    def _badge_width(self, text: str) -> float:
        return self._metrics[3].horizontalAdvance(text) + 10

    def _badge(self, painter: QPainter, right: float, cy: float, text: str,
               colour: QColor) -> float:
        font = self._fonts[3]
        w = self._badge_width(text)
        rect = QRectF(right - w, cy - 8, w, 16)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(colour)
        painter.drawRoundedRect(rect, 8, 8)
        painter.setFont(font)
        painter.setPen(self.theme.badge_text)
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        return rect.left()

    def _paint_pill(self, painter: QPainter, card: Card) -> None:
        t, r = self.theme, card.rect
        painter.setPen(self._frame_pen(card))
        fill = self.colours.get(card.id) if card.kind in ("param", "leaf") else None
        painter.setBrush(t.card_header)
        painter.drawRoundedRect(r, r.height() / 2, r.height() / 2)
        if fill is not None:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(fill)
            painter.drawEllipse(QPointF(r.left() + 12, r.center().y()), 4.5, 4.5)
        painter.setPen(t.text)
        io = card.kind in ("input", "output")
        painter.setFont(self._fonts[0] if io else self._fonts[1])
        # a parameter's name keeps its end (``…convolution.weight``), clear of the dot
        text_r = r.adjusted(10.0 if io else PILL_DOT + 4.0, 0.0, -10.0, 0.0)
        metrics = self._metrics[0 if io else 1]
        title = (metrics.elidedText(card.title, Qt.TextElideMode.ElideRight, text_r.width())
                 if io else elide_path(card.title, text_r.width(), metrics.horizontalAdvance))
        if not card.shape:
            painter.drawText(text_r, Qt.AlignmentFlag.AlignCenter, title)
            return
        painter.drawText(QRectF(text_r.left(), r.top() + 3, text_r.width(), r.height() / 2),
                         Qt.AlignmentFlag.AlignCenter, title)
        painter.setFont(self._fonts[2])
        painter.setPen(t.subtle)
        painter.drawText(QRectF(r.left(), r.center().y(), r.width(), r.height() / 2 - 3),
                         Qt.AlignmentFlag.AlignCenter, card.shape)


def _elide_path(metrics: QFontMetricsF, path: str, room: float, card: Card) -> str:
    """A card's path row (a folded group adds ``▸members``), shortened at dots."""
    suffix = f"  ▸{card.members}" if card.kind in ("group", "opgroup") else ""
    if not suffix:
        return elide_path(path, room, metrics.horizontalAdvance)
    kept = elide_path(path, room - metrics.horizontalAdvance(suffix), metrics.horizontalAdvance)
    return kept + suffix


def small_elide(metrics: QFontMetricsF, text: str, width: float) -> str:
    """``text`` elided on the right to ``width``."""
    return metrics.elidedText(text, Qt.TextElideMode.ElideRight, width)


@dataclass
class EdgeLabel:
    """A shape label placed on an edge."""

    text: str
    rect: QRectF
    style: str   # normal | device | precision


class EdgeLayer(QGraphicsItem):
    """All edges: a few paths per style, arrowheads, and non-overlapping labels.

    Edges are batched into chunks of ``CHUNK`` per style (one QPainterPath
    each, with its bounding box) so that a paint strokes only the chunks in
    the exposed area instead of every edge of a large graph.
    """

    STYLES = ("normal", "device", "precision", "related")
    CHUNK = 48

    def __init__(self, theme: Theme) -> None:
        super().__init__()
        self.theme = theme
        self.chunks: list[tuple[str, QRectF, QPainterPath, QPainterPath]] = []
        self.labels: list[EdgeLabel] = []
        self._bounds = QRectF()
        self._font = mono_font(-1.5)

    def boundingRect(self) -> QRectF:  # noqa: N802 (Qt API)
        return self._bounds

    def paths(self, style: str) -> list[QPainterPath]:
        """The edge paths of one style (for tests and export)."""
        return [c[2] for c in self.chunks if c[0] == style]

    def set_edges(self, polylines: list[tuple[list[QPointF], str]],
                  labels: list[EdgeLabel], related: list[list[QPointF]] = ()) -> None:
        """Rebuild the paths from polylines (scene coordinates) tagged by style."""
        self.prepareGeometryChange()
        by_style: dict[str, list[list[QPointF]]] = {s: [] for s in self.STYLES}
        for pts, style in polylines:
            by_style[style].append(pts)
        by_style["related"] += list(related)
        self.chunks = []
        rect = QRectF()
        for style, lines in by_style.items():
            lines.sort(key=lambda pts: (pts[0].y(), pts[0].x()))
            for i in range(0, len(lines), self.CHUNK):
                path, arrows = QPainterPath(), QPainterPath()
                for pts in lines[i:i + self.CHUNK]:
                    _add_polyline(path, arrows, pts)
                box = path.boundingRect().united(arrows.boundingRect()).adjusted(-4, -4, 4, 4)
                self.chunks.append((style, box, path, arrows))
                rect = rect.united(box)
        self.labels = labels
        for lab in labels:
            rect = rect.united(lab.rect)
        self._bounds = rect.adjusted(-10, -10, 10, 10)
        self.update()

    def pens(self) -> dict[str, QPen]:
        """The pen of each style."""
        t = self.theme
        return {"normal": QPen(t.edge, 1.4), "device": QPen(t.device_change, 3.0),
                "precision": QPen(t.precision_change, 2.4, Qt.PenStyle.DashLine),
                "related": QPen(t.accent, 2.4)}

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        exposed = option.exposedRect
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, lod > 0.2)
        pens = self.pens()
        for pen in pens.values():
            pen.setCosmetic(lod < LOD_TEXT)
        for style, box, path, arrows in self.chunks:
            if not box.intersects(exposed):
                continue
            pen = pens[style]
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawPath(path)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(pen.color())
            painter.drawPath(arrows)
        if lod < LOD_TEXT:
            return
        painter.setFont(self._font)
        colours = {"normal": self.theme.edge_label, "device": self.theme.device_change,
                   "precision": self.theme.precision_change}
        for lab in self.labels:
            if not lab.rect.intersects(exposed):
                continue
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(self.theme.background)
            painter.drawRoundedRect(lab.rect, 4, 4)
            painter.setPen(colours.get(lab.style, self.theme.edge_label))
            painter.drawText(lab.rect, Qt.AlignmentFlag.AlignCenter, lab.text)


def _add_polyline(path: QPainterPath, arrows: QPainterPath, pts: list[QPointF]) -> None:
    if len(pts) < 2:
        return
    path.moveTo(pts[0])
    if len(pts) == 2:
        a, b = pts
        dy = (b.y() - a.y()) * 0.45
        path.cubicTo(QPointF(a.x(), a.y() + dy), QPointF(b.x(), b.y() - dy), b)
    else:
        for i in range(1, len(pts) - 1):  # smooth corners through the bend points
            mid = (pts[i] + pts[i + 1]) / 2 if i < len(pts) - 2 else pts[i + 1]
            path.quadTo(pts[i], mid)
    tip, before = pts[-1], pts[-2]
    _arrow(arrows, tip, before)


def _arrow(arrows: QPainterPath, tip: QPointF, before: QPointF) -> None:
    d = tip - before
    length = (d.x() ** 2 + d.y() ** 2) ** 0.5 or 1.0
    ux, uy = d.x() / length, d.y() / length
    base = QPointF(tip.x() - ux * 8, tip.y() - uy * 8)
    nx_, ny = -uy * 4.5, ux * 4.5
    arrows.addPolygon(QPolygonF([tip, QPointF(base.x() + nx_, base.y() + ny),
                                 QPointF(base.x() - nx_, base.y() - ny), tip]))
    arrows.closeSubpath()


def _marker_pen(colour: QColor, width: float) -> QPen:
    """A frame that marks a card (selected, executing, non-finite): as wide on screen
    at any zoom, so a selection in a zoomed-out 12-layer graph still stands out."""
    pen = QPen(colour, width)
    pen.setCosmetic(True)
    return pen
