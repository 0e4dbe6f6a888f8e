"""The ranks dock of a distributed job: a rank selector with each rank's status.

One row per rank: step, steps/s and state (running, paused, failed, waiting in a
collective, stalled, ended). The straggler (the rank furthest behind) and
stalled ranks are highlighted. Clicking a row shows that rank in the graph,
tree, inspector and status bar (``SessionModel.select_rank``).
"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from tensorscope.ui.model.session_model import SessionModel
from tensorscope.ui.theme import Theme, make_theme

COLUMNS = ("Rank", "Step", "Steps/s", "State")


class RankPanel(QTableWidget):
    """Every rank's status; emits ``rank_selected(rank)`` when a row is clicked."""

    rank_selected = Signal(int)

    def __init__(self, parent: QWidget | None = None, theme: Theme | None = None) -> None:
        super().__init__(0, len(COLUMNS), parent)
        self.theme = theme or make_theme()
        self.setHorizontalHeaderLabels(list(COLUMNS))
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.horizontalHeader().setStretchLastSection(True)
        self.cellClicked.connect(lambda row, _col: self._clicked(row))
        self._ranks: list[int] = []
        #: a recording's window: steps/s is the recorded training's (``StatusPanel.recorded``)
        self.recorded = False

    def refresh(self, model: SessionModel) -> None:
        """Show every rank's status (GUI thread, on the repaint timer)."""
        states = model.rank_states()
        straggler = model.straggler()
        ranks = sorted(states)
        if ranks != self._ranks:
            self._ranks = ranks
            self.setRowCount(len(ranks))
        for row, rank in enumerate(ranks):
            state = model.ranks[rank]
            text = states[rank]
            if rank == straggler and text == "running":
                text = "running (straggler)"
            rate = state.recorded_steps_per_s() if self.recorded else state.steps_per_s()
            cells = (f"{rank}{' ◀' if rank == model.rank else ''}", str(max(state.step, 0)),
                     "—" if rate is None else f"{rate:.1f}", text)
            flag = text.startswith(("stalled", "waiting in", "failed")) or rank == straggler
            for col, value in enumerate(cells):
                item = self.item(row, col)
                if item is None:
                    item = QTableWidgetItem()
                    self.setItem(row, col, item)
                if item.text() != value:
                    item.setText(value)
                item.setForeground(QBrush(self.theme.non_finite) if flag else QBrush())
                item.setData(Qt.ItemDataRole.UserRole, rank)

    def state_text(self, rank: int) -> str:
        """The State cell of ``rank`` (tests and screenshots)."""
        row = self._ranks.index(rank)
        item = self.item(row, 3)
        return item.text() if item is not None else ""

    def _clicked(self, row: int) -> None:
        if 0 <= row < len(self._ranks):
            self.rank_selected.emit(self._ranks[row])
