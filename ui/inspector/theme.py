"""Palette-aware colours for the inspector (readable in light and dark themes)."""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QLabel, QWidget

NAN_COLOR = (255, 0, 255)      # magenta: stands out on every colormap we offer
POSINF_COLOR = (255, 80, 40)   # red-orange
NEGINF_COLOR = (40, 160, 255)  # azure


def is_dark(widget: QWidget | None = None) -> bool:
    """Whether the palette in use has a dark window background."""
    palette = widget.palette() if widget is not None else QApplication.palette()
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def plot_colors(widget: QWidget | None = None) -> tuple[QColor, QColor]:
    """(background, foreground) for pyqtgraph plots matching the palette."""
    palette = widget.palette() if widget is not None else QApplication.palette()
    return (palette.color(QPalette.ColorRole.Base), palette.color(QPalette.ColorRole.Text))


def style_plot(plot: pg.PlotItem, widget: QWidget | None = None) -> None:
    """Give a PlotItem's axes the palette's text colour."""
    _, fg = plot_colors(widget)
    for name in ("left", "bottom", "right", "top"):
        axis = plot.getAxis(name)
        axis.setPen(pg.mkPen(fg))
        axis.setTextPen(pg.mkPen(fg))


def error_color(widget: QWidget | None = None) -> str:
    """A red that reads well on the current background (CSS colour)."""
    return "#ff6b6b" if is_dark(widget) else "#c62828"


def accent_color(widget: QWidget | None = None) -> QColor:
    """The palette's highlight colour (histogram bars, line plots)."""
    palette = widget.palette() if widget is not None else QApplication.palette()
    return palette.color(QPalette.ColorRole.Highlight)


def css(rgb: tuple[int, int, int]) -> str:
    """A CSS hex colour for an RGB tuple."""
    return "#%02x%02x%02x" % rgb


def mute(label: QLabel) -> QLabel:
    """Draw ``label`` in the palette's secondary text colour (follows palette changes)."""
    label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
    return label


def restyle(root: QWidget) -> None:
    """Re-apply palette colours to every pyqtgraph view under ``root`` (after a theme change)."""
    bg, _ = plot_colors(root)
    for view in root.findChildren(pg.GraphicsView):
        view.setBackground(bg)
        for item in view.scene().items():
            if isinstance(item, pg.PlotItem):
                style_plot(item, root)
