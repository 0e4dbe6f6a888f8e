"""The inspector's header: what the tensor is, its statistics and a histogram."""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout,
                               QWidget)

from tensorscope.ui.elided import ElidedLabel, WrappedLabel
from tensorscope.common.tensors import parse_tensor_ref
from tensorscope.common.statistics import BY_KEY, STAT_KEYS
from tensorscope.ui.inspector.plots import ValueAxis
from tensorscope.ui.inspector.theme import (accent_color, error_color, mute, plot_colors,
                                            style_plot)

STAT_ORDER = STAT_KEYS
STAT_LABELS = {s.key: s.short or s.label for s in BY_KEY.values() if s.short or s.finite_of}
#: shown only for a tensor that holds NaN/Inf (else they equal the plain ones)
FINITE_ONLY = frozenset(s.key for s in BY_KEY.values() if s.finite_of is not None)
HIST_BINS = 40


def format_stat(name: str, value: Any) -> str:
    """One statistic as short text (zero fraction as a percentage)."""
    if value is None:
        return "–"
    stat = BY_KEY.get(name)
    if stat is not None and stat.percent:
        return f"{100.0 * float(value):.1f}%"
    if isinstance(value, (int, np.integer)) or (stat is not None and stat.count):
        return str(int(value))
    return f"{float(value):.4g}"



_REF = re.compile(r"^(?P<root>\d+):(?P<path>.*)#(?P<call>\d+)/(?P<name>.+)$")


def title_for(ref: str | None, meta: dict[str, Any]) -> tuple[str, str]:
    """(title, detail) for a tensor ref ``"0:network.0#3/out"`` → ``network.0 › out``."""
    if not meta and ref is None:
        return "No tensor selected", ""
    try:
        rank, root, path, call, name = parse_tensor_ref(ref or "")
    except ValueError:
        match = _REF.match(ref or "")   # a ref without a rank (older recordings)
        if match is None:
            return (ref or str(meta.get("path") or "(tensor)")), ""
        rank, root, path, call, name = 0, match["root"], match["path"], match["call"], \
            match["name"]
    where = f"rank {rank} · " if rank else ""
    return f"{path or '(root)'} › {name}", f"{where}root {root} · call {call}"


def describe_meta(meta: dict[str, Any], original_dtype: str = "") -> str:
    """``shape [64, 128] · float32 · cpu`` for a TensorMeta dict."""
    if meta.get("kind", "tensor") != "tensor":
        return f"{meta.get('kind', 'object')} · {meta.get('dtype', '')}"
    parts = [f"shape {list(meta.get('shape') or [])}"]
    dtype = str(meta.get("dtype") or original_dtype or "?")
    parts.append(dtype)
    if meta.get("device"):
        parts.append(str(meta["device"]))
    if meta.get("requires_grad"):
        parts.append("requires_grad")
    if meta.get("contiguous") is False:
        parts.append("non-contiguous")
    return " · ".join(parts)


def histogram(values: np.ndarray, bins: int = HIST_BINS) -> tuple[np.ndarray, np.ndarray] | None:
    """(counts, edges) over the finite values, or None if there are none."""
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values.ravel()
    if finite.size == 0:
        return None
    lo, hi = float(finite.min()), float(finite.max())
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    return np.histogram(finite, bins=bins, range=(lo, hi))


class StatsGrid(QWidget):
    """(name, value) label pairs in rows of four pairs, or of two where the width is
    short: four pairs of ``finite mean -8.525e-09`` asked for 560 px and widened the
    inspector's dock over the graph. Its least width is the two-pair arrangement's;
    its height follows the arrangement its width allows. It places the labels
    itself (a grid layout would impose the four-pair width as its minimum; GUI thread)."""

    WIDE, NARROW = 4, 2
    H_SPACING, V_SPACING = 10, 1

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pairs: list[tuple[QLabel, QLabel]] = []
        self.columns = self.WIDE
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def add(self, key: QLabel, value: QLabel) -> None:
        """Append a pair (in statistic order); its labels are this widget's children."""
        for label in (key, value):
            label.setParent(self)
            label.installEventFilter(self)
        self.pairs.append((key, value))

    def _shown(self) -> list[tuple[int, QLabel, QLabel]]:
        return [(i, k, v) for i, (k, v) in enumerate(self.pairs)
                if not (k.isHidden() and v.isHidden())]

    def _widths(self, columns: int) -> list[tuple[int, int]]:
        widths = [[0, 0] for _ in range(columns)]
        for i, key, value in self._shown():
            w = widths[i % columns]
            w[0] = max(w[0], key.sizeHint().width())
            w[1] = max(w[1], value.sizeHint().width())
        return [(a, b) for a, b in widths]

    def width_for(self, columns: int) -> int:
        """The least width of ``columns`` pairs a row (the shown labels' widths)."""
        shown = [w for w in self._widths(columns) if w[0] or w[1]] or [(0, 0)]
        return sum(a + b for a, b in shown) + self.H_SPACING * (2 * len(shown) - 1)

    def _line(self) -> int:
        return max((v.sizeHint().height() for _k, v in self.pairs), default=16)

    def _height(self, columns: int) -> int:
        rows = len({i // columns for i, _k, _v in self._shown()}) or 1
        return rows * self._line() + (rows - 1) * self.V_SPACING

    def columns_for(self, width: int) -> int:
        """Four pairs a row where they fit in ``width``, else two."""
        return self.WIDE if width >= self.width_for(self.WIDE) else self.NARROW

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        """Four pairs a row."""
        return QSize(self.width_for(self.WIDE), self._height(self.WIDE))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        """Two pairs a row: the least it needs."""
        return QSize(self.width_for(self.NARROW), self._height(self.columns_for(self.width())))

    def heightForWidth(self, width: int) -> int:  # noqa: N802 (Qt API)
        return self._height(self.columns_for(width))

    def arrange(self) -> None:
        """Place the pairs as the current width allows (on a resize or new texts)."""
        columns = self.columns_for(self.width())
        if columns != self.columns:
            self.columns = columns
            self.updateGeometry()   # the height changes with the rows
        widths = self._widths(columns)
        # spread the spare width over the columns, as the grid did
        spare = max(0, self.width() - self.width_for(columns)) // max(1, 2 * columns)
        lefts, x = [], 0
        for key_w, value_w in widths:
            lefts.append((x, x + key_w + spare + self.H_SPACING))
            x += key_w + value_w + 2 * spare + 2 * self.H_SPACING
        line = self._line()
        rows: dict[int, int] = {}
        for i, key, value in self._shown():
            row = rows.setdefault(i // columns, len(rows))
            y = row * (line + self.V_SPACING)
            (kx, vx), (key_w, value_w) = lefts[i % columns], widths[i % columns]
            key.setGeometry(kx, y, key_w + spare, line)
            value.setGeometry(vx, y, value_w + spare, line)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt API)
        super().resizeEvent(event)
        self.arrange()

    def event(self, event: QEvent) -> bool:  # noqa: D102 (Qt API)
        if event.type() == QEvent.Type.LayoutRequest:   # a label's text changed its size
            self.updateGeometry()
            self.arrange()
        return super().event(event)

    def eventFilter(self, watched, event: QEvent) -> bool:  # noqa: N802 (Qt API)
        """A label shown or hidden: the rows may have changed."""
        if event.type() in (QEvent.Type.Show, QEvent.Type.Hide, QEvent.Type.FontChange):
            self.updateGeometry()
            self.arrange()
        return False


class InspectorHeader(QWidget):
    """Title, metadata line, whole-tensor statistics grid and a slice histogram."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = ElidedLabel("No tensor selected", self)
        font = self.title.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() + 1)
        self.title.setFont(font)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.meta_line = WrappedLabel("", self)
        self.stat_values: dict[str, QLabel] = {}
        self.stat_names: dict[str, QLabel] = {}
        stats = self._build_stats()
        self._build_histogram()
        self.picker = QComboBox(self)
        self.picker.setToolTip("which of this call's tensors to inspect")
        self.picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.picker.hide()
        title_row = QHBoxLayout()
        title_row.addWidget(self.title, 1)
        title_row.addWidget(self.picker)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(3)
        layout.addLayout(title_row)
        layout.addWidget(self.meta_line)
        layout.addWidget(stats)
        self.stats = stats
        layout.addWidget(self.hist)

    def _build_stats(self) -> StatsGrid:
        stats = StatsGrid(self)
        for name in STAT_ORDER:
            key = QLabel(STAT_LABELS.get(name, name), stats)
            key.setToolTip(BY_KEY[name].meaning)
            mute(key)
            self.stat_names[name] = key
            value = QLabel("–", stats)
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.stat_values[name] = value
            if name in FINITE_ONLY:
                key.hide()
                value.hide()
            stats.add(key, value)
        return stats

    def _build_histogram(self) -> None:
        self.hist = pg.PlotWidget(self, background=plot_colors(self)[0],
                                  axisItems={"bottom": ValueAxis("bottom")})
        self.hist.setFixedHeight(84)
        self.hist.setMenuEnabled(False)
        self.hist.setMouseEnabled(False, False)
        self.hist.hideButtons()
        style_plot(self.hist.getPlotItem(), self)
        self.hist.hideAxis("left")   # counts crowd a short plot; the label gives the total
        color = accent_color(self)
        self.bars = pg.PlotCurveItem([0.0, 1.0], [0.0], stepMode="center", fillLevel=0,
                                     brush=pg.mkBrush(color.red(), color.green(), color.blue(), 150),
                                     pen=pg.mkPen(color))
        self.hist.addItem(self.bars)

    def set_tensor(self, ref: str | None, meta: dict[str, Any], stats: dict[str, Any] | None,
                   original_dtype: str = "", transport_dtype: str = "") -> None:
        """Show a tensor's name, metadata and whole-tensor statistics."""
        title, detail = title_for(ref, meta)
        self.title.setText(title)
        self.title.setToolTip(ref or "")
        line = describe_meta(meta, original_dtype) if meta else ""
        line = f"{line}  ({detail})" if detail else line
        if original_dtype and transport_dtype and original_dtype != transport_dtype:
            line += f" (sent as {transport_dtype})"
        self.meta_line.setText(line)
        stats = stats or {}
        non_finite = bool(stats.get("nan") or stats.get("inf"))
        for name, label in self.stat_values.items():
            value = stats.get(name)
            label.setText(format_stat(name, value))
            if name in FINITE_ONLY:
                shown = non_finite and value is not None
                label.setVisible(shown)
                self.stat_names[name].setVisible(shown)
            bad = name in ("nan", "inf") and value
            label.setStyleSheet(f"color: {error_color(self)}; font-weight: bold;" if bad else "")

    def set_histogram(self, values: np.ndarray | None) -> None:
        """Histogram of a slice's finite values (cleared for None)."""
        result = None if values is None else histogram(values)
        self.hist.setVisible(result is not None)
        if result is None:
            self.bars.setData([0, 1], [0], stepMode="center")
            return
        counts, edges = result
        self.bars.setData(edges, counts, stepMode="center", fillLevel=0)
        self.hist.getPlotItem().setLabel("bottom", f"slice values ({int(counts.sum())} finite)")
        self.hist.autoRange(padding=0.02)

    def set_choices(self, refs: list[str], current: str | None) -> None:
        """Fill the tensor picker with refs (labelled by their last part); hidden below two."""
        self.picker.blockSignals(True)
        self.picker.clear()
        for ref in refs:
            self.picker.addItem(ref.rsplit("/", 1)[-1], ref)
        self.picker.setCurrentIndex(max(self.picker.findData(current), 0))
        self.picker.setVisible(len(refs) > 1)
        self.picker.blockSignals(False)

    def value_text(self, name: str) -> str:
        """The text shown for statistic ``name`` (for tests)."""
        return self.stat_values[name].text()

