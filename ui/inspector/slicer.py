"""The n-d slicer: view and colormap pickers, dims → rows/cols, sliders, slice box."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QGridLayout, QHBoxLayout, QLabel, QLineEdit, QSlider,
                               QSpinBox, QVBoxLayout, QWidget)

from tensorscope.ui.model.received import COMPLEX_PARTS
from tensorscope.ui.model.inspector_state import COLORMAPS, VIEWS, InspectorState
from tensorscope.ui.inspector.theme import error_color, mute

NO_DIM = "—"


class DimSlider(QWidget):
    """A slider and a spin box for one fixed dim's index, kept in step."""

    def __init__(self, dim: int, size: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.dim = dim
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.spin = QSpinBox(self)
        for control in (self.slider, self.spin):
            control.setRange(0, max(size - 1, 0))
        self.spin.setKeyboardTracking(False)
        self.spin.setMinimumWidth(self.spin.fontMetrics().horizontalAdvance(str(size)) + 34)
        self.slider.valueChanged.connect(self.spin.setValue)
        self.spin.valueChanged.connect(self.slider.setValue)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.slider, 1)
        layout.addWidget(self.spin)

    def set_value(self, value: int) -> None:
        """Show ``value`` without emitting (state → widget sync)."""
        for control in (self.slider, self.spin):
            control.blockSignals(True)
            control.setValue(value)
            control.blockSignals(False)


class SlicerPanel(QWidget):
    """Controls bound to an ``InspectorState``: user edits call the state's setters."""

    def __init__(self, state: InspectorState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.view_box = self._combo(VIEWS, self._view_chosen)
        self.cmap_box = self._combo(tuple(COLORMAPS), state.set_colormap)
        self.part_box = self._combo(COMPLEX_PARTS, state.set_complex_part)
        self.rows_box = self._combo((), lambda _: self._dims_chosen("rows"))
        self.cols_box = self._combo((), lambda _: self._dims_chosen("cols"))
        self.part_label = QLabel("complex", self)
        self.sliders: dict[int, DimSlider] = {}
        self.slider_grid = QGridLayout()
        self.slider_grid.setContentsMargins(0, 0, 0, 0)
        self.slider_grid.setVerticalSpacing(2)
        self.slice_edit = QLineEdit(self)
        self.slice_edit.setPlaceholderText("numpy slice, e.g. 0, :, 3:10")
        self.slice_edit.setToolTip("numpy-style slice; press Enter to apply")
        self.slice_edit.returnPressed.connect(self._text_entered)
        self.error_label = QLabel("", self)
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet(f"color: {error_color(self)};")
        self.error_label.hide()
        self._layout_controls()
        self._shape_key: tuple = ()

    def _combo(self, items: tuple[str, ...], on_chosen) -> QComboBox:
        box = QComboBox(self)
        box.addItems(list(items))
        box.textActivated.connect(on_chosen)
        return box

    def _layout_controls(self) -> None:
        top = QGridLayout()
        top.setHorizontalSpacing(6)
        top.setVerticalSpacing(3)
        for col, (text, box) in enumerate((("view", self.view_box), ("colormap", self.cmap_box))):
            top.addWidget(self._caption(text), 0, col * 2)
            top.addWidget(box, 0, col * 2 + 1)
        for col, (text, box) in enumerate((("rows", self.rows_box), ("cols", self.cols_box))):
            top.addWidget(self._caption(text), 1, col * 2)
            top.addWidget(box, 1, col * 2 + 1)
        top.addWidget(self.part_label, 2, 0)
        top.addWidget(self.part_box, 2, 1)
        top.setColumnStretch(1, 1)
        top.setColumnStretch(3, 1)
        slice_row = QHBoxLayout()
        slice_row.addWidget(self._caption("slice"))
        slice_row.addWidget(self.slice_edit, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addLayout(top)
        layout.addLayout(self.slider_grid)
        layout.addLayout(slice_row)
        layout.addWidget(self.error_label)

    def _caption(self, text: str) -> QLabel:
        label = QLabel(text, self)
        mute(label)
        return label

    # ---------------------------------------------------------- user → state --
    def _view_chosen(self, view: str) -> None:
        self.state.set_view(view)

    def _dims_chosen(self, which: str) -> None:
        rows, cols = self._dim_of(self.rows_box), self._dim_of(self.cols_box)
        if rows is not None and rows == cols:      # picking the other axis's dim swaps them
            rows, cols = (rows, self.state.rows) if which == "rows" else (self.state.cols, cols)
        self.state.set_dims(rows, cols)

    def _dim_of(self, box: QComboBox) -> int | None:
        data = box.currentData()
        return None if data is None or data < 0 else int(data)

    def _text_entered(self) -> None:
        self.state.set_slice_text(self.slice_edit.text())

    def _index_moved(self, dim: int, value: int) -> None:
        self.state.set_index(dim, value)

    # ---------------------------------------------------------- state → widget --
    def refresh(self) -> None:
        """Show the state's view, dims, indices, slice text and error."""
        state = self.state
        for box, value in ((self.view_box, state.view), (self.cmap_box, state.colormap),
                           (self.part_box, state.complex_part)):
            box.blockSignals(True)
            box.setCurrentText(value)
            box.blockSignals(False)
        self._fill_dim_box(self.rows_box, state.rows, allow_none=state.view != "grid")
        self._fill_dim_box(self.cols_box, state.cols, allow_none=False)
        self.rows_box.setEnabled(state.view != "line" and state.ndim >= 2)
        self.cols_box.setEnabled(state.ndim >= 1)
        complex_dtype = "complex" in str(state.meta.get("dtype", ""))
        self.part_label.setVisible(complex_dtype)
        self.part_box.setVisible(complex_dtype)
        self._sync_sliders()
        if not self.slice_edit.hasFocus() or state.error:
            self.slice_edit.setText(state.slice_text)
        self.slice_edit.setEnabled(state.is_tensor)
        self.show_error(state.error)

    def show_error(self, message: str) -> None:
        """Show (or hide, for "") the inline slice error."""
        self.error_label.setStyleSheet(f"color: {error_color(self)};")
        self.error_label.setText(message)
        self.error_label.setVisible(bool(message))

    def _fill_dim_box(self, box: QComboBox, current: int | None, allow_none: bool) -> None:
        box.blockSignals(True)
        box.clear()
        if allow_none or current is None:
            box.addItem(NO_DIM, -1)
        for d, size in enumerate(self.state.shape):
            box.addItem(f"dim {d} · {size}", d)
        box.setCurrentIndex(max(box.findData(-1 if current is None else current), 0))
        box.blockSignals(False)

    def _sync_sliders(self) -> None:
        state = self.state
        wanted = (state.shape, state.slider_dims, state.tiles)
        if wanted != self._shape_key:
            self._rebuild_sliders()
            self._shape_key = wanted
        for dim, slider in self.sliders.items():
            slider.set_value(state.indices[dim])

    def _rebuild_sliders(self) -> None:
        while self.slider_grid.count():
            item = self.slider_grid.takeAt(0)
            widget = item.widget()
            if widget is not None:
                widget.hide()              # gone now, even before the deferred delete runs
                widget.setParent(None)
                widget.deleteLater()
        self.sliders = {}
        for row, dim in enumerate(self.state.slider_dims):
            size = self.state.shape[dim]
            tile = dim in self.state.tiles
            caption = self._caption(f"dim {dim} · {size}" + (" (first tile)" if tile else ""))
            slider = DimSlider(dim, size, self)
            slider.slider.valueChanged.connect(lambda v, d=dim: self._index_moved(d, v))
            self.slider_grid.addWidget(caption, row, 0)
            self.slider_grid.addWidget(slider, row, 1)
            self.sliders[dim] = slider
