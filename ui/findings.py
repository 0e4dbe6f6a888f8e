"""The findings panel: one row per diagnostic; clicking navigates to it."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QPainter, QPaintEvent
from PySide6.QtWidgets import (QFrame, QHeaderView, QScrollArea, QTreeWidget, QTreeWidgetItem,
                               QWidget)

from tensorscope.ui.elided import WrappedLabel
from tensorscope.ui.model.changes import ChangeCursor
from tensorscope.ui.model.names import module_name
from tensorscope.ui.model.session_model import SessionModel
from tensorscope.ui.theme import Theme, make_theme

COLUMNS = ("Severity", "Kind", "Module", "Step", "Count", "Message")
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


class FindingItem(QTreeWidgetItem):
    """A finding's row: sorts by severity (errors first), step and count as numbers."""

    def __lt__(self, other: QTreeWidgetItem) -> bool:
        tree = self.treeWidget()
        col = tree.sortColumn() if tree is not None else 0
        a, b = self.text(col), other.text(col)
        if COLUMNS[col] == "Severity":
            return (SEVERITY_ORDER.get(a, 3), _int(self.text(3))) < \
                (SEVERITY_ORDER.get(b, 3), _int(other.text(3)))
        if COLUMNS[col] in ("Step", "Count"):
            return _int(a) < _int(b)
        return a < b


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1


class FindingsPanel(QTreeWidget):
    """Findings and exceptions of every rank (labelled ``rank N`` in a job of several);
    emits ``rank_activated(rank)`` then ``finding_activated(root, path, step)``."""

    finding_activated = Signal(int, str, int)
    rank_activated = Signal(int)
    #: how many rows the list holds, after each rebuild (its dock's title shows it)
    count_changed = Signal(int)

    def __init__(self, parent: QWidget | None = None, theme: Theme | None = None) -> None:
        super().__init__(parent)
        self.theme = theme or make_theme()
        self.setColumnCount(len(COLUMNS))
        self.setHeaderLabels(list(COLUMNS))
        self.setRootIsDecorated(False)
        self.setAlternatingRowColors(True)
        self.setSortingEnabled(True)
        self.sortByColumn(0, Qt.SortOrder.AscendingOrder)   # errors first
        self.setWordWrap(True)
        self.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.header().setStretchLastSection(True)
        self.itemClicked.connect(self._clicked)
        # the chosen finding's whole message (its cause and fix) under the list: one
        # row shows only its start; the host lays this out below the panel
        self.detail = WrappedLabel("")
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.detail.setContentsMargins(4, 2, 4, 2)
        self.detail.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        # in a scroll area: in a short dock the message's end, its fix, was cut off
        self.detail_area = QScrollArea()
        self.detail_area.setWidget(self.detail)
        self.detail_area.setWidgetResizable(True)
        self.detail_area.setFrameShape(QFrame.Shape.NoFrame)
        self.detail_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.detail_area.hide()
        self.currentItemChanged.connect(lambda item, _previous: self._describe(item))
        self._seen = ChangeCursor()
        self._ranked = False
        self._root_names: dict[int, str] = {}
        self.empty_text = "No findings yet: the checks' warnings appear here as training runs"

    def refresh(self, model: SessionModel) -> None:
        """Rebuild when findings changed, or ranks joined (their labels) (GUI thread)."""
        steps = model.steps_seen
        empty = (f"No findings in {steps} step{'s' if steps != 1 else ''}" if steps > 0 else
                 "No findings yet: the checks' warnings appear here as training runs")
        if empty != self.empty_text:
            self.empty_text = empty
            self.viewport().update()
        if not model.changes.take(self._seen, "findings", "ranks"):
            return
        self.clear()
        colours = {"error": self.theme.non_finite, "warning": self.theme.precision_change,
                   "info": self.theme.subtle}
        self._ranked = len(model.ranks) > 1
        self._root_names = dict(model.root_names)
        for f in model.findings.values():
            self._add(f.severity, f.kind, f.root, f.module, f.step, f.count, f.message, colours,
                      f.rank)
        explained = {(f.rank, f.root, f.module, f.step) for f in model.findings.values()
                     if f.kind == "exception"}
        for e in model.exceptions:
            if (e.rank, e.root or 0, e.module or "", e.step) in explained:
                continue   # the ``exception`` finding names it, with its cause and fix
            self._add("error", f"exception: {e.type}", e.root or 0, e.module or "", e.step, 1,
                      e.message, colours, e.rank)
        self.sortItems(self.sortColumn() if self.topLevelItemCount() else 0,
                       self.header().sortIndicatorOrder())
        self._describe(self.currentItem() or self.topLevelItem(0))   # errors first
        self.count_changed.emit(self.topLevelItemCount())

    def _describe(self, item: QTreeWidgetItem | None) -> None:
        """Show ``item``'s whole message under the list (None: hide it)."""
        text = "" if item is None else (f"{item.text(0)} · {item.text(1)} · {item.text(2)} · "
                                        f"step {item.text(3)}: {item.text(5)}")
        self.detail.setText(text)
        self.detail_area.setVisible(bool(text))

    def _add(self, severity, kind, root, module, step, count, message, colours,
             rank: int = 0) -> None:
        where = module_name(self._root_names, int(root), str(module or ""))
        if self._ranked:
            where = f"rank {rank} · {where}"
        item = FindingItem([severity, kind, where, str(step), str(count), message])
        item.setData(0, Qt.ItemDataRole.UserRole, [int(root), str(module), int(step), int(rank)])
        item.setForeground(0, QBrush(colours.get(severity, self.theme.subtle)))
        item.setToolTip(5, message)
        self.addTopLevelItem(item)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt API)
        """An empty list says so (and how many steps were checked)."""
        super().paintEvent(event)
        if self.topLevelItemCount():
            return
        painter = QPainter(self.viewport())
        painter.setPen(self.theme.subtle)
        painter.drawText(self.viewport().rect().adjusted(12, 12, -12, -12),
                         int(Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap),
                         self.empty_text)
        painter.end()

    def _clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        data = item.data(0, Qt.ItemDataRole.UserRole)
        if data:
            self.rank_activated.emit(int(data[3]))
            self.finding_activated.emit(int(data[0]), str(data[1]), int(data[2]))
