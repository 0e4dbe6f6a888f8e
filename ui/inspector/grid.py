"""The image grid: N×C×H×W (or T×H×W) slices as normalised, labelled tiles."""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QVBoxLayout, QWidget

from tensorscope.ui.inspector.plots import AspectFit

from tensorscope.ui.model.inspector_state import COLORMAPS
from tensorscope.ui.inspector.theme import (NAN_COLOR, NEGINF_COLOR, POSINF_COLOR, plot_colors,
                                            style_plot)


SINGLE_ROW_TILES = 4   # a few channels (e.g. RGB) sit side by side


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
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.graphics, 100)
        layout.addStretch(1)

    def show_values(self, values: np.ndarray, tile_indices: list[np.ndarray],
                    tile_names: list[str], colormap: str) -> None:
        """Draw ``values`` shaped (T1, [T2,] H, W); ``tile_indices`` are the tensor indices."""
        tiles_shape, (h, w) = values.shape[:-2], values.shape[-2:]
        rows, cols = grid_shape(tuple(tiles_shape))
        gap = max(1, min(h, w) // 8)
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
