"""``TensorInspector``: the right dock's tensor view (header, slicer, views, export).

The host (the main window) connects ``tensor_requested(ref, slice_text,
max_elements)`` to a ``GetTensor`` request and answers with
``slice_received(body)`` or ``slice_failed(message)``, on the GUI thread.
Only the slice the state asks for is requested, and slider moves are
coalesced by a single-shot timer before a request goes out.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np
from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (QFileDialog, QHBoxLayout, QLabel, QPushButton, QStackedWidget,
                               QVBoxLayout, QWidget)

from tensorscope.ui.elided import WrappedLabel
from tensorscope.ui.inspector import export, theme
from tensorscope.ui.inspector.grid import GridView
from tensorscope.ui.inspector.header import InspectorHeader
from tensorscope.ui.model.observe import Event
from tensorscope.ui.inspector.plots import HeatmapView, LineView
from tensorscope.ui.model.received import (ReceivedSlice, display_values, nonfinite_counts)
from tensorscope.ui.inspector.slicer import SlicerPanel
from tensorscope.ui.model.inspector_state import InspectorState
from tensorscope.ui.model.session_model import stats_output
from tensorscope.ui.inspector.table import ArrayTableView
from tensorscope.ui.inspector.theme import (NAN_COLOR, NEGINF_COLOR, POSINF_COLOR, css,
                                            error_color, mute)

DEBOUNCE_MS = 80


def ordinal(n: int) -> str:
    """``2nd``, ``3rd``, ``11th``, ``21st``: a downsampled slice read 'every 3th element'."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def nonfinite_legend(counts: dict[str, int]) -> str:
    """Rich text naming how many NaN/±Inf the slice holds, in their marker colours."""
    names = (("nan", "NaN", NAN_COLOR), ("posinf", "+Inf", POSINF_COLOR),
             ("neginf", "−Inf", NEGINF_COLOR))
    parts = [f"<span style='color:{css(color)}'>■</span> {counts[key]} {label}"
             for key, label, color in names if counts.get(key)]
    return "&nbsp;&nbsp;".join(parts)


class TensorInspector(QWidget):
    """The tensor inspector widget; its state lives in ``self.state`` (no Qt).

    Signals: ``tensor_requested(ref, slice_text, max_elements)`` asks the host
    to send ``GetTensor``. All methods run on the GUI thread.
    """

    tensor_requested = Signal(str, str, int)
    pin_requested = Signal()   # "Pin this module": keep its tensors from the next step on

    def __init__(self, parent: QWidget | None = None, state: InspectorState | None = None) -> None:
        super().__init__(parent)
        self.state = state if state is not None else InspectorState()
        self._choices: dict[str, dict[str, Any]] = {}
        self._choice_stats: dict[str, Any] | None = None
        self._stats_ref: str | None = None   # the choice ``_choice_stats`` describe
        self.header = InspectorHeader(self)
        self.slicer = SlicerPanel(self.state, self)
        self._build_views()
        self._build_footer()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(6)
        layout.addWidget(self.header)
        layout.addWidget(self.slicer)
        layout.addWidget(self.stack, 1)
        layout.addLayout(self.footer)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self.request_now)
        self._connect_state()
        self.header.picker.activated.connect(self._picked)
        self._refresh_all()

    def _build_views(self) -> None:
        self.stack = QStackedWidget(self)
        self.empty = WrappedLabel("", self)
        self.empty.setMargin(24)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        font = self.empty.font()
        font.setPointSizeF(font.pointSizeF() + 1.5)
        self.empty.setFont(font)
        mute(self.empty)
        self.heatmap = HeatmapView(self)
        self.table = ArrayTableView(self)
        self.line = LineView(self)
        self.grid = GridView(self)
        for page in (self.empty, self.heatmap, self.table, self.line, self.grid):
            self.stack.addWidget(page)
        self.pages = {"heatmap": self.heatmap, "table": self.table, "line": self.line,
                      "grid": self.grid}

    def _build_footer(self) -> None:
        self.legend = QLabel("", self)
        self.status = WrappedLabel("", self)
        self.npy_button = QPushButton("Save .npy…", self)
        self.csv_button = QPushButton("Save .csv…", self)
        self.pin_button = QPushButton("Pin this module", self)
        self.pin_button.setToolTip("Keep this module's tensors every step (Ctrl+P), so that "
                                   "the next pause can show them")
        self.pin_button.hide()
        self.pin_button.clicked.connect(self.pin_requested.emit)
        self.npy_button.clicked.connect(lambda: self._export_dialog("npy"))
        self.csv_button.clicked.connect(lambda: self._export_dialog("csv"))
        buttons = QHBoxLayout()
        buttons.addWidget(self.legend, 1)
        buttons.addWidget(self.pin_button)
        buttons.addWidget(self.npy_button)
        buttons.addWidget(self.csv_button)
        self.footer = QVBoxLayout()
        self.footer.setSpacing(2)
        self.footer.addWidget(self.status)
        self.footer.addLayout(buttons)

    def _connect_state(self) -> None:
        events = self.state.events
        events.selection.connect(lambda e: self._refresh_header())
        events.slice.connect(self._slice_changed)
        events.error.connect(lambda e: self.slicer.show_error(e.value))
        events.status.connect(lambda e: self._show_status(*e.value))
        for name in ("view", "colormap", "complex_part", "data"):
            getattr(events, name).connect(lambda e: self._render())

    # -------------------------------------------------------------- host API --
    def show_tensor(self, ref: str | None, meta: dict[str, Any], stats: dict[str, Any] | None,
                    unavailable: str = "", can_pin: bool = False, action: str = "") -> None:
        """Inspect a tensor; ``ref`` None when only metadata/stats are known, with
        ``unavailable`` saying why there are no values (and what to do); ``can_pin``
        offers the one-click pin, ``action`` (at a pause) labels the button instead:
        "Pin and run to step 7" (``pin_requested`` either way)."""
        self._timer.stop()
        self.pin_button.setVisible(bool(can_pin or action) and ref is None)
        self.pin_button.setText(action or "Pin this module")
        self.pin_button.setToolTip(
            "Pin this module and run to the step boundary that serves its tensors" if action
            else "Keep this module's tensors every step (Ctrl+P), so that the next pause can "
                 "show them")
        self.slicer.setEnabled(ref is not None)   # nothing to slice without values
        self.header.set_choices(list(self._choices) if ref in self._choices else [], ref)
        self.state.select(ref, meta, stats, unavailable=unavailable)
        self.request_now()
        self._render()

    def show_choices(self, entries: list[dict[str, Any]], stats: dict[str, Any] | None = None,
                     current: str | None = None) -> None:
        """Offer one call's tensors (``PausedAt.tensors`` entries: TensorMeta + ``"ref"``).

        A picker in the header lists them (``out``, ``in[0]``, ``grad`` …) and
        shows ``current`` (default: the first output, else the first entry).
        ``stats`` belong to the call's primary output; the others get their
        whole-tensor statistics with the first slice.
        """
        self._choices = {str(e["ref"]): dict(e) for e in entries if e.get("ref")}
        self._choice_stats = stats
        outputs = [e for r, e in self._choices.items() if r.rsplit("/", 1)[-1].startswith("out")]
        described = stats_output(outputs)
        self._stats_ref = str(described["ref"]) if described is not None else None
        refs = list(self._choices)
        if not refs:
            self.header.set_choices([], None)
            return
        outs = [r for r in refs if r.rsplit("/", 1)[-1].startswith("out")]
        pick = current if current in self._choices else (outs or refs)[0]
        self._show_choice(pick)

    def _show_choice(self, ref: str) -> None:
        meta = self._choices[ref]
        self.show_tensor(ref, meta, self._choice_stats if ref == self._stats_ref else None)

    def _picked(self, index: int) -> None:
        ref = self.header.picker.itemData(index)
        if ref in self._choices:
            self._show_choice(ref)

    def slice_received(self, body: dict[str, Any]) -> None:
        """The host's answer to ``tensor_requested``: a GetTensor response body."""
        self.state.receive(body)

    def slice_failed(self, message: str) -> None:
        """The host could not fetch the slice (not paused any more, bad ref …)."""
        self.state.fail(message)

    def request_now(self) -> None:
        """Send the pending request at once (skipping the debounce), if one is due."""
        self._timer.stop()
        request = self.state.request()
        if request is not None:
            self.tensor_requested.emit(*request)

    def export_npy(self, path: str | os.PathLike) -> str:
        """Write the current slice (as received) to ``path`` as ``.npy``."""
        return export.export_npy(self._export_array(), path)

    def export_csv(self, path: str | os.PathLike) -> str:
        """Write the current slice (as received) to ``path`` as CSV."""
        r = self.state.received
        array = self._export_array()
        comment = f"{r.ref} [{r.text}] shape {list(array.shape)}" if r else ""
        return export.export_csv(array, path, comment=comment)

    def _export_array(self) -> np.ndarray:
        array = self.state.as_array()
        if array is None:
            raise RuntimeError("no slice to export yet: pause training and select a tensor")
        return array

    def _export_dialog(self, kind: str) -> None:
        filters = {"npy": "NumPy array (*.npy)", "csv": "CSV (*.csv)"}
        path, _ = QFileDialog.getSaveFileName(self, f"Save slice as .{kind}",
                                              f"slice.{kind}", filters[kind])
        if not path:
            return
        try:
            (self.export_npy if kind == "npy" else self.export_csv)(path)
        except (OSError, RuntimeError, ValueError) as exc:
            self._show_status(f"Could not save {path}: {exc}", True)
        else:
            self._show_status(f"Saved {path}", False)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt API)
        """Follow a light/dark palette change at run time."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            QTimer.singleShot(0, self._palette_changed)   # once the children have the palette too

    def _palette_changed(self) -> None:
        theme.restyle(self)
        self._render()

    # ------------------------------------------------------------ rendering --
    def _slice_changed(self, event: Event) -> None:
        self.slicer.refresh()
        if self.state.can_fetch and not self.state.error:
            self._timer.start()   # restarting coalesces rapid slider moves into one request

    def _refresh_all(self) -> None:
        self._refresh_header()
        self.slicer.refresh()
        self._render()

    def _refresh_header(self) -> None:
        state = self.state
        r = state.received
        self.header.set_tensor(state.ref, state.meta, state.stats,
                               r.original_dtype if r else "",
                               str(r.array.dtype) if r else "")

    def _show_status(self, message: str, is_error: bool) -> None:
        self.status.setStyleSheet(f"color: {error_color(self)};" if is_error else "")
        self.status.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        if message and message == self.state.hint:
            message = ""           # already shown large in the view area
        self.status.setText(message or self._describe_slice())

    def _describe_slice(self) -> str:
        r = self.state.received
        if r is None:
            return ""
        if not r.full_shape:
            return "a scalar (0-d tensor): its one value"
        shape = "×".join(str(n) for n in r.oriented.shape) or "one value"
        text = f"slice [{r.text}] → {shape} of {list(r.full_shape)}"
        steps = {e.step for e in r.key if isinstance(e, slice) and (e.step or 1) > 1}
        if steps:
            every = "/".join(ordinal(n) for n in sorted(steps))
            text += f" · every {every} element (type a slice to zoom)"
        return text + (" (truncated)" if r.truncated else "")

    def _render(self) -> None:
        """Draw the received slice in the current view (or the hint when there is none)."""
        state = self.state
        r = state.received
        self._refresh_header()
        has_data = r is not None and r.ref == state.ref and r.oriented.size > 0
        self.npy_button.setEnabled(has_data)
        self.csv_button.setEnabled(has_data)
        if not has_data:
            empty = r is not None and r.ref == state.ref
            self.empty.setText(state.hint or ("The slice is empty" if empty else "Fetching slice…"))
            self.stack.setCurrentWidget(self.empty)
            self.header.set_histogram(None)
            self.legend.setText("")
            return
        values = display_values(r.oriented, state.complex_part)
        self.header.set_histogram(values)
        self.legend.setText(nonfinite_legend(nonfinite_counts(r.oriented)))
        view = self._view_for(r)
        self._draw(view, r, values)
        self.stack.setCurrentWidget(self.pages[view])
        self._show_status(state.status, state.status_is_error)

    def _view_for(self, r: ReceivedSlice) -> str:
        """The view that can draw ``r``: the chosen one when it fits the slice's rank."""
        view, n = self.state.view, len(r.dims)
        if n >= 3:
            return "grid"
        if n == 0:
            return "table"
        if view == "table":
            return view
        return "line" if n == 1 else ("heatmap" if view in ("line", "grid") else view)

    def _draw(self, view: str, r: ReceivedSlice, values: np.ndarray) -> None:
        names = [f"dim {d}" for d in r.dims]
        if view == "table":
            labels = [r.axis_indices(a) for a in range(len(r.dims))]
            self.table.set_array(r.oriented, *labels)
        elif view == "line":
            self.line.show_values(values, r.axis_indices(0), names[0])
        elif view == "heatmap":
            self.heatmap.show_values(values, r.axis_indices(0), r.axis_indices(1),
                                     (names[0], names[1]), self.state.colormap, raw=r.oriented)
        else:
            tiles = len(r.dims) - 2
            self.grid.show_values(values, [r.axis_indices(a) for a in range(tiles)],
                                  names[:tiles], self.state.colormap,
                                  [r.axis_indices(a) for a in (tiles, tiles + 1)],
                                  raw=r.oriented)
