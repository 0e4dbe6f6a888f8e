"""The image grid: N×C×H×W (or T×H×W) slices as normalised, labelled tiles."""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from tensorscope.ui.inspector.plots import AspectFit

from tensorscope.ui.model.inspector_state import COLORMAPS
from tensorscope.ui.model.received import finite_range, format_value
from tensorscope.ui.inspector.theme import (NAN_COLOR, NEGINF_COLOR, POSINF_COLOR, mute,
                                            plot_colors, style_plot)


SINGLE_ROW_TILES = 4   # a few channels (e.g. RGB) sit side by side
SCALE_NOTE = "each tile coloured from its own min to max · hover a pixel for its value"


def normalise_tile(tile: np.ndarray) -> np.ndarray:
    """Scale a tile's finite values to [0, 1] (a constant tile becomes 0.5)."""
    finite = np.isfinite(tile)
    if not finite.any():
        return np.full(tile.shape, 0.5)
    lo, hi = float(tile[finite].min()), float(tile[finite].max())
    if hi <= lo:
        return np.full(tile.shape, 0.5)
    return np.clip((np.where(finite, tile, lo) - lo) / (hi - lo), 0.0, 1.0)


def tile_rgba(tile: np.ndarray, cmap: pg.ColorMap) -> np.ndarray:
    """One tile as RGBA bytes: colormapped, with NaN/+Inf/-Inf in their marker colours."""
    rgba = np.asarray(cmap.map(normalise_tile(tile).ravel(), mode="byte"), dtype=np.uint8)
    rgba = rgba.reshape(tile.shape + (4,)).copy()
    for mask, color in ((np.isnan(tile), NAN_COLOR), (np.isposinf(tile), POSINF_COLOR),
                        (np.isneginf(tile), NEGINF_COLOR)):
        rgba[mask] = (*color, 255)
    return rgba


def grid_shape(tile_dims_shape: tuple[int, ...]) -> tuple[int, int]:
    """(tile rows, tile cols): samples × channels, or a near-square layout for one dim."""
    if len(tile_dims_shape) == 2:
        return tile_dims_shape[0], tile_dims_shape[1]
    count = tile_dims_shape[0]
    if count <= SINGLE_ROW_TILES:
        return 1, max(count, 1)
    cols = max(1, math.ceil(math.sqrt(count)))
    return math.ceil(count / cols), cols


class GridView(QWidget):
    """Tiles of a ([N,] C, H, W) slice, each normalised on its own, labelled on the axes."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        bg, _ = plot_colors(self)
        self.graphics = pg.GraphicsLayoutWidget(self)
        self.graphics.setBackground(bg)
        self.plot = self.graphics.addPlot()
        style_plot(self.plot, self)
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)
        self.plot.setMenuEnabled(False)
        self.plot.showAxis("top")
        self.plot.hideAxis("bottom")
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.fitter = AspectFit(self.graphics, self.plot)
        self.tile_count = 0
        self.mosaic = np.zeros((0, 0, 4), dtype=np.uint8)
        # the tiles have no shared colour bar: this says so, and reads a value on hover
        self.readout = QLabel(SCALE_NOTE, self)
        mute(self.readout)
        self.readout.setWordWrap(True)   # never widens a narrow inspector
        self._layout: tuple[int, int, int, int, int] | None = None   # rows, cols, h, w, gap
        self._raw = self._shown = np.zeros((0, 0, 0))
        self._indices: list[np.ndarray] = []
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.graphics, 100)
        layout.addWidget(self.readout)
        layout.addStretch(1)
        self.plot.scene().sigMouseMoved.connect(self._mouse_moved)

    def show_values(self, values: np.ndarray, tile_indices: list[np.ndarray],
                    tile_names: list[str], colormap: str,
                    pixel_indices: list[np.ndarray] | None = None,
                    raw: np.ndarray | None = None) -> None:
        """Draw ``values`` shaped (T1, [T2,] H, W); ``tile_indices`` are the tensor indices
        of the tile dims, ``pixel_indices`` those of H and W, ``raw`` the values the hover
        readout names (complex ones whole; default ``values``)."""
        tiles_shape, (h, w) = values.shape[:-2], values.shape[-2:]
        rows, cols = grid_shape(tuple(tiles_shape))
        gap = max(1, min(h, w) // 8)
        self._layout = (rows, cols, h, w, gap)
        self._shown = values.reshape((-1, h, w))
        self._raw = self._shown if raw is None else raw.reshape((-1, h, w))
        self._indices = [*tile_indices, *(pixel_indices or [np.arange(h), np.arange(w)])]
        self.readout.setText(SCALE_NOTE)
        mosaic = np.zeros((rows * (h + gap) - gap, cols * (w + gap) - gap, 4), dtype=np.uint8)
        cmap = pg.colormap.get(COLORMAPS.get(colormap, "viridis"))
        flat = values.reshape((-1, h, w))
        for i, tile in enumerate(flat):
            r, c = divmod(i, cols)
            y, x = r * (h + gap), c * (w + gap)
            mosaic[y:y + h, x:x + w] = tile_rgba(tile, cmap)
        self.tile_count = len(flat)
        self.mosaic = mosaic
        self.image.setImage(mosaic, autoLevels=False, levels=(0, 255))
        self._label_axes(rows, cols, h + gap, w + gap, tile_indices, tile_names)
        self.fitter.fit(QRectF(0, 0, mosaic.shape[1], mosaic.shape[0]))

    def _label_axes(self, rows: int, cols: int, step_y: int, step_x: int,
                    tile_indices: list[np.ndarray], tile_names: list[str]) -> None:
        left = self.plot.getAxis("left")
        top = self.plot.getAxis("top")
        half_y, half_x = (step_y - 1) / 2, (step_x - 1) / 2
        if len(tile_indices) == 2:
            left.setTicks([[(r * step_y + half_y, str(tile_indices[0][r])) for r in range(rows)]])
            top.setTicks([[(c * step_x + half_x, str(tile_indices[1][c])) for c in range(cols)]])
            left.setLabel(tile_names[0])
            top.setLabel(tile_names[1])
            return
        idx = tile_indices[0]
        if rows == 1:
            left.setTicks([[]])
            left.setLabel("")
            top.setTicks([[(c * step_x + half_x, str(idx[c])) for c in range(len(idx))]])
            top.setLabel(tile_names[0])
            return
        left.setTicks([[(r * step_y + half_y, str(idx[r * cols]))
                        for r in range(rows) if r * cols < len(idx)]])
        top.setTicks([[(c * step_x + half_x, f"+{c}") for c in range(cols)]])
        left.setLabel(f"{tile_names[0]} (row start)")
        top.setLabel(f"{tile_names[0]} offset")

    def _mouse_moved(self, pos: QPointF) -> None:
        if self.plot.sceneBoundingRect().contains(pos):
            point = self.plot.vb.mapSceneToView(pos)
            self.readout.setText(self.describe(point.x(), point.y()) or SCALE_NOTE)

    def describe(self, x: float, y: float) -> str:
        """The pixel under view coordinates (x, y): its tensor indices, its value and its
        tile's range ("" over a gap or outside the tiles)."""
        if self._layout is None:
            return ""
        rows, cols, h, w, gap = self._layout
        px, py = int(np.floor(x)), int(np.floor(y))
        (r, i), (c, j) = divmod(py, h + gap), divmod(px, w + gap)
        if px < 0 or py < 0 or i >= h or j >= w or r >= rows or c >= cols:
            return ""
        flat = r * cols + c   # two tile dims lay out as (T1, T2): the same order
        if flat >= len(self._raw):
            return ""
        at = ([self._indices[0][r], self._indices[1][c]] if len(self._indices) == 4
              else [self._indices[0][flat]])
        at += [self._indices[-2][i], self._indices[-1][j]]
        span = finite_range(self._shown[flat])   # what the tile's colours run over
        scale = f" · tile {format_value(span[0])} … {format_value(span[1])}" if span else ""
        return (f"[{', '.join(str(int(a)) for a in at)}] = "
                f"{format_value(self._raw[flat][i, j])}{scale}")
