"""Closing the window of ``tensorscope run``: keep training by default, never a stale
question, and the command returns the script's own exit code when it ends."""
from __future__ import annotations

import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QMessageBox, QWidget

from tensorscope.ui.app import _ask_stop, wait_for_child
from tensorscope.ui.child_script import ChildScript


_keep: list = []


def _child(qtbot, code: str) -> ChildScript:
    child = ChildScript([sys.executable, "-c", code], {})
    _keep.append(child)   # no Qt parent: kept alive for the test
    child.start()
    return child


def test_keep_training_is_the_default_and_the_command_returns_the_child_code(qtbot):
    child = _child(qtbot, "import time, sys; time.sleep(1.5); sys.exit(7)")
    window = QWidget()
    qtbot.addWidget(window)
    seen = {}

    def answer() -> None:   # the user presses Enter: the default button
        box = window._stop_question
        seen["default"] = box.defaultButton().text()
        box.defaultButton().click()
    QTimer.singleShot(100, answer)
    _ask_stop(window, child, "train.py")
    assert seen["default"] == "Keep training"
    assert child.running          # not stopped
    assert wait_for_child(child, "train.py") == 7


def test_the_question_goes_away_when_the_script_ends_meanwhile(qtbot):
    child = _child(qtbot, "import time; time.sleep(0.8)")
    window = QWidget()
    qtbot.addWidget(window)
    _ask_stop(window, child, "train.py")     # nobody answers: the script's end closes it
    assert not window._stop_question.isVisible()
    assert window._stop_question.clickedButton() is None
    assert child.returncode == 0


def test_stop_training_terminates_the_script(qtbot):
    child = _child(qtbot, "import time; time.sleep(60)")
    window = QWidget()
    qtbot.addWidget(window)

    def answer() -> None:
        box: QMessageBox = window._stop_question
        next(b for b in box.buttons() if b.text() == "Stop training").click()
    QTimer.singleShot(100, answer)
    _ask_stop(window, child, "train.py")
    assert not child.running
