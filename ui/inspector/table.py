"""The numbers table: a Qt model over a 0-, 1- or 2-d numpy slice."""
from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QHeaderView, QStyle, QTableView, QWidget

from tensorscope.ui.model.received import format_value
from tensorscope.ui.inspector.theme import NAN_COLOR, NEGINF_COLOR, POSINF_COLOR

AnyIndex = QModelIndex | QPersistentModelIndex
AUTOSIZE_CELLS = 20_000   # fit columns to their text up to this many cells


class ArrayTableModel(QAbstractTableModel):
    """Read-only table over a numpy array; headers show the tensor's own indices."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.array = np.zeros((0, 0))
        self.row_labels = np.arange(0)
        self.col_labels = np.arange(0)

    def set_array(self, array: np.ndarray, row_labels: np.ndarray | None = None,
                  col_labels: np.ndarray | None = None) -> None:
        """Show ``array`` (0-d → 1×1, 1-d → one column, 2-d as is)."""
        table = np.asarray(array)
        table = table.reshape(1, 1) if table.ndim == 0 else table
        table = table.reshape(-1, 1) if table.ndim == 1 else table
        if table.ndim != 2:
            raise ValueError(f"the table shows at most 2 dims, got {table.ndim}")
        self.beginResetModel()
        self.array = table
        self.row_labels = np.arange(table.shape[0]) if row_labels is None else row_labels
        self.col_labels = np.arange(table.shape[1]) if col_labels is None else col_labels
        self.endResetModel()

    def rowCount(self, parent: AnyIndex | None = None) -> int:  # noqa: N802 (Qt API)
        """Rows of the shown array."""
        return 0 if parent is not None and parent.isValid() else self.array.shape[0]

    def columnCount(self, parent: AnyIndex | None = None) -> int:  # noqa: N802 (Qt API)
        """Columns of the shown array."""
        return 0 if parent is not None and parent.isValid() else self.array.shape[1]

    def value(self, row: int, col: int) -> Any:
        """The element at (row, col), as a numpy scalar."""
        return self.array[row, col]

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        """Text, tooltip, alignment and non-finite colouring of one cell."""
        if not index.isValid():
            return None
        value = self.array[index.row(), index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return format_value(value)
        if role == Qt.ItemDataRole.ToolTipRole:
            return repr(value.item()) if hasattr(value, "item") else repr(value)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole:
            return _nonfinite_brush(value)
        return None

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802 (Qt API)
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        """The tensor index of a row or column."""
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        labels = self.col_labels if orientation == Qt.Orientation.Horizontal else self.row_labels
        return str(labels[section]) if section < len(labels) else str(section)


def _nonfinite_brush(value: Any) -> QBrush | None:
    if not isinstance(value, (float, np.floating, complex, np.complexfloating)):
        return None
    if np.isnan(value):
        return QBrush(QColor(*NAN_COLOR))
    if np.isinf(value):
        positive = np.real(value) > 0 if np.isreal(value) else True
        return QBrush(QColor(*(POSINF_COLOR if positive else NEGINF_COLOR)))
    return None


class ArrayTableView(QTableView):
    """A compact, monospace table over an ``ArrayTableModel``."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.array_model = ArrayTableModel(self)
        self.setModel(self.array_model)
        font = QFont("monospace")
        font.setStyleHint(QFont.StyleHint.TypeWriter)
        font.setPointSizeF(max(self.font().pointSizeF() - 0.5, 7.0))
        self.setFont(font)
        self.setAlternatingRowColors(True)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.horizontalHeader().setMinimumSectionSize(self.fontMetrics().horizontalAdvance("0") * 7)
        self.horizontalHeader().setDefaultSectionSize(
            self.fontMetrics().horizontalAdvance("-0.00000e+00") + 8)

    def set_array(self, array: np.ndarray, row_labels: np.ndarray | None = None,
                  col_labels: np.ndarray | None = None) -> None:
        """Show ``array`` with tensor-index headers."""
        self.array_model.set_array(array, row_labels, col_labels)
        self._fit_columns()

    def _fit_columns(self) -> None:
        """Each column as wide as its widest cell or header, measured from the array's
        own text: ``resizeColumnsToContents`` asked the model for every role of every
        cell (a 140×140 slice froze the window for 2 s, 8 ``data`` calls a cell)."""
        model = self.array_model
        table = model.array
        if table.size == 0 or table.size > AUTOSIZE_CELLS:
            return
        metrics, header = self.fontMetrics(), self.horizontalHeader()
        head_metrics = header.fontMetrics()
        pad = 2 * self.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, self) + 4
        for col in range(table.shape[1]):
            texts = {format_value(v) for v in table[:, col]}
            widest = max(metrics.horizontalAdvance(t) for t in texts)
            label = head_metrics.horizontalAdvance(str(model.headerData(
                col, Qt.Orientation.Horizontal))) + pad
            header.resizeSection(col, max(widest + pad, label, header.minimumSectionSize()))
