"""Condition breakpoints from the GUI: a module, a condition, and the list to edit.

``Break when encoder.0: grad_norm > 100``: training pauses at the next step boundary
after a step whose statistics of that module (any module when none is named) meet
the condition. Those the run was started with (``--break-on``) are listed too,
marked so. The fields a condition may use are those of ``tensorscope.common.
conditions`` (``grad_norm``, ``norm``, ``max``, ``zero_fraction``, ``finite`` …).
"""
from __future__ import annotations

from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QFormLayout, QHBoxLayout, QLabel,
                               QLineEdit, QListWidget, QPushButton, QVBoxLayout, QWidget)

from tensorscope.common.conditions import ConditionError
from tensorscope.ui.model.view_state import ViewState


class ConditionDialog(QDialog):
    """Add and remove condition breakpoints (edits the ``ViewState``'s list, and shows
    it as it changes)."""

    def __init__(self, view_state: ViewState, module: str = "",
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Condition breakpoints")
        self.view_state = view_state
        self.module = QLineEdit(module, self)
        self.module.setPlaceholderText("module path, e.g. encoder.0 (empty: any module)")
        self.condition = QLineEdit(self)
        self.condition.setPlaceholderText("e.g. grad_norm > 100 or zero_fraction > 0.9")
        self.error = QLabel("", self)
        self.error.setStyleSheet("color: #d62728;")
        self.add_button = QPushButton("Add", self)
        self.remove_button = QPushButton("Remove", self)
        self.list = QListWidget(self)
        form = QFormLayout()
        form.addRow("Module", self.module)
        form.addRow("Break when", self.condition)
        buttons = QHBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        close.rejected.connect(self.reject)
        box = QVBoxLayout(self)
        box.addLayout(form)
        box.addWidget(self.error)
        box.addLayout(buttons)
        box.addWidget(self.list, 1)
        box.addWidget(close)
        self.add_button.clicked.connect(self.add)
        self.condition.returnPressed.connect(self.add)
        self.remove_button.clicked.connect(self.remove)
        emitter, callback = view_state.events.breakpoints, self._breakpoints_changed
        emitter.connect(callback)
        self.destroyed.connect(lambda *_a, e=emitter, c=callback: e.disconnect(c))
        self.refresh()

    def _breakpoints_changed(self, _event: object) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Show the ``ViewState``'s conditions."""
        self.list.clear()
        from_run = self.view_state.run_breakpoints.conditions
        for item in self.view_state.conditions:
            _root, path, expr = item
            origin = "   (--break-on)" if item in from_run else ""
            self.list.addItem(f"{path or 'any module'}: {expr}{origin}")
        self.remove_button.setEnabled(bool(self.view_state.conditions))

    def add(self) -> bool:
        """Add the typed condition; say what is wrong with a bad one."""
        expr = self.condition.text().strip()
        if not expr:
            self.error.setText("Type a condition, e.g. grad_norm > 100")
            return False
        try:
            self.view_state.add_condition(self.module.text(), expr)
        except ConditionError as exc:
            self.error.setText(f"Not a condition: {exc}")
            return False
        self.error.setText("")
        self.condition.clear()
        return True

    def remove(self) -> None:
        """Remove the selected condition (the last one when none is selected)."""
        row = self.list.currentRow()
        self.view_state.remove_condition(row if row >= 0 else len(self.view_state.conditions) - 1)
