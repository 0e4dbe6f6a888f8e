"""A small overview of the whole graph with the visible region outlined."""
from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QPainter, QPen
from PySide6.QtWidgets import QFrame, QGraphicsScene, QGraphicsView

from tensorscope.ui.theme import Theme


class Minimap(QGraphicsView):
    """Overview in the main view's bottom-right corner; click to jump there."""

    def __init__(self, main: QGraphicsView, scene: QGraphicsScene, theme: Theme) -> None:
        super().__init__(scene, main)
        self.main = main
        self.theme = theme
        self.setInteractive(False)
        self.setFrameShape(QFrame.Shape.Box)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setBackgroundBrush(theme.grid)
        self.setStyleSheet(f"border: 1px solid {theme.card_border.name()}; border-radius: 4px;")
        self.resize(150, 110)
        self.hide()

    def refresh(self) -> None:
        """Refit the overview; shown only when the graph overflows the view."""
        rect = self.scene().itemsBoundingRect()
        if rect.isEmpty():
            self.hide()
            return
        self.fitInView(rect.adjusted(-20, -20, 20, 20), Qt.AspectRatioMode.KeepAspectRatio)
        visible = self.main.mapToScene(self.main.viewport().rect()).boundingRect()
        # only when much of the graph is off screen (it would hide nodes otherwise)
        self.setVisible(rect.width() > 1.5 * visible.width() or rect.height() > 1.5 * visible.height())
        self.reposition()
        self.viewport().update()

    def reposition(self) -> None:
        """Stick to the bottom-right corner of the main view."""
        vp = self.main.viewport()
        self.move(vp.width() - self.width() - 12, vp.height() - self.height() - 12)

    def drawForeground(self, painter: QPainter, rect: QRectF) -> None:  # noqa: N802
        visible = self.main.mapToScene(self.main.viewport().rect()).boundingRect()
        painter.setPen(QPen(self.theme.accent, 0))
        colour = self.theme.accent
        colour.setAlpha(40)
        painter.setBrush(colour)
        painter.drawRect(visible)

    def mousePressEvent(self, event) -> None:  # noqa: N802 (Qt API)
        self.main.centerOn(self.mapToScene(event.position().toPoint()))
        self.viewport().update()

    def mouseMoveEvent(self, event) -> None:  # noqa: N802 (Qt API)
        self.mousePressEvent(event)
