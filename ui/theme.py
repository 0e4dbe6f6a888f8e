"""Colours and fonts of the GUI, derived from the system palette.

The palette follows the system (light or dark); every colour the views paint
with comes from a ``Theme`` so that text stays readable on both. Metric
colours use a perceptually ordered ramp (dark blue → teal → yellow); NaN/Inf
is always red.
"""
from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QColor, QFont, QGuiApplication, QPalette

# Ramp stops for metric colouring (a viridis-like sequence; our own values).
_RAMP = ((0.0, (68, 1, 84)), (0.25, (59, 82, 139)), (0.5, (33, 145, 140)),
         (0.75, (94, 201, 98)), (1.0, (253, 231, 37)))
# Diverging ramp for step comparisons: blue (decrease) → neutral → orange (increase).
_DIVERGING = ((0.0, (49, 104, 190)), (0.5, (150, 150, 150)), (1.0, (226, 112, 40)))

DTYPE_COLOURS = {
    "float32": "#3b82f6", "float64": "#6366f1", "float16": "#f59e0b",
    "bfloat16": "#d97706", "int64": "#64748b", "int32": "#64748b",
    "bool": "#14b8a6", "complex64": "#a855f7", "mixed": "#ef4444",
}


@dataclass(frozen=True)
class Theme:
    """Every colour the views paint with."""

    dark: bool
    background: QColor
    grid: QColor
    card: QColor
    card_header: QColor
    card_border: QColor
    group_card: QColor
    text: QColor
    subtle: QColor
    edge: QColor
    edge_label: QColor
    accent: QColor
    executing: QColor
    non_finite: QColor
    device_change: QColor
    precision_change: QColor
    breakpoint: QColor
    badge_text: QColor

    def ramp(self, t: float) -> QColor:
        """Metric colour for ``t`` in [0, 1]; NaN gives the non-finite red."""
        if t != t:  # NaN
            return self.non_finite
        return _lerp_stops(_RAMP, min(1.0, max(0.0, t)))

    def diverging(self, t: float) -> QColor:
        """Comparison colour for ``t`` in [-1, 1] (negative: decrease)."""
        if t != t:
            return self.non_finite
        return _lerp_stops(_DIVERGING, (min(1.0, max(-1.0, t)) + 1.0) / 2.0)

    def dtype_colour(self, dtype: str) -> QColor:
        """Badge colour of a dtype."""
        return QColor(DTYPE_COLOURS.get(dtype, "#64748b"))

    def device_colour(self, device: str) -> QColor:
        """Badge colour of a device (CUDA green, CPU slate, others purple)."""
        if device.startswith("cuda"):
            return QColor("#16a34a")
        if device.startswith("cpu") or not device:
            return QColor("#475569")
        return QColor("#9333ea")


def _lerp_stops(stops, t: float) -> QColor:
    for (t0, c0), (t1, c1) in zip(stops, stops[1:]):
        if t <= t1:
            f = 0.0 if t1 == t0 else (t - t0) / (t1 - t0)
            return QColor(*(round(a + (b - a) * f) for a, b in zip(c0, c1)))
    return QColor(*stops[-1][1])


def is_dark_palette(palette: QPalette | None = None) -> bool:
    """Whether the (system) palette has a dark window background."""
    if palette is None:
        app = QGuiApplication.instance()
        if app is None:
            return False
        palette = app.palette()
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def make_theme(dark: bool | None = None) -> Theme:
    """The theme for a dark or light system palette (None: ask the system)."""
    if dark is None:
        dark = is_dark_palette()
    if dark:
        return Theme(
            dark=True, background=QColor("#16191f"), grid=QColor("#20242c"),
            card=QColor("#242a33"), card_header=QColor("#2e3541"),
            card_border=QColor("#3d4553"), group_card=QColor("#1d2a3a"),
            text=QColor("#e6e9ef"), subtle=QColor("#9aa3b2"), edge=QColor("#6b7385"),
            edge_label=QColor("#aab3c2"), accent=QColor("#4da3ff"),
            executing=QColor("#ffb020"), non_finite=QColor("#ff4d4f"),
            device_change=QColor("#22c55e"), precision_change=QColor("#f59e0b"),
            breakpoint=QColor("#e5484d"), badge_text=QColor("#ffffff"))
    return Theme(
        dark=False, background=QColor("#f6f7f9"), grid=QColor("#eceef2"),
        card=QColor("#ffffff"), card_header=QColor("#eef1f6"),
        card_border=QColor("#c5cbd6"), group_card=QColor("#eaf2fd"),
        text=QColor("#1c2430"), subtle=QColor("#5d6878"), edge=QColor("#8a93a3"),
        edge_label=QColor("#4f5968"), accent=QColor("#1f6feb"),
        executing=QColor("#e08600"), non_finite=QColor("#d92d20"),
        device_change=QColor("#15803d"), precision_change=QColor("#c2410c"),
        breakpoint=QColor("#d92d20"), badge_text=QColor("#ffffff"))


def ui_font(point_delta: float = 0.0, bold: bool = False) -> QFont:
    """The application font, resized by ``point_delta`` points."""
    font = QFont(QGuiApplication.font())
    size = font.pointSizeF() if font.pointSizeF() > 0 else 9.0
    font.setPointSizeF(max(6.0, size + point_delta))
    font.setBold(bold)
    return font


def mono_font(point_delta: float = 0.0) -> QFont:
    """A fixed-pitch font for shapes and numbers."""
    font = QFont("monospace")
    font.setStyleHint(QFont.StyleHint.TypeWriter)
    base = QGuiApplication.font().pointSizeF()
    font.setPointSizeF(max(6.0, (base if base > 0 else 9.0) + point_delta))
    return font

