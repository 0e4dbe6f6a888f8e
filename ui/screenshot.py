"""Save a PNG of the window once training reached a step (``demo --screenshot``)."""
from __future__ import annotations

import logging
import time

from PySide6.QtCore import QObject, QTimer, Signal

from tensorscope.ui.main_window import MainWindow

log = logging.getLogger("tensorscope.ui")


class StepScreenshot(QObject):
    """Waits for ``steps`` steps (or the script's end) and a finished layout, then grabs.

    Emits ``saved(path)`` or ``failed(message)``; the caller quits the app.
    """

    saved = Signal(str)
    failed = Signal(str)

    def __init__(self, window: MainWindow, steps: int, path: str, timeout: float = 180.0,
                 select: tuple[int, str] | None = (0, "network.2")) -> None:
        super().__init__(window)
        self.window, self.steps, self.path = window, steps, path
        self.select = select
        self.deadline = time.monotonic() + timeout
        self._settle = 0
        self._done = False
        window.refreshed.connect(self._check)

    def _ready(self) -> bool:
        m, g = self.window.model, self.window.graph
        reached = m.steps_seen >= self.steps or m.ended is not None
        return reached and g.pending_layouts() == 0 and bool(g.views["module"].nodes.cards)

    def _check(self) -> None:
        if self._done:
            return
        if time.monotonic() > self.deadline:
            self._done = True
            self.failed.emit(f"no {self.steps} training steps arrived in time "
                             f"(saw {self.window.model.steps_seen})")
            return
        if not self._ready():
            return
        if self._settle == 0 and self.select and self.window.model.module(*self.select):
            self.window.select_module(*self.select)
        self._settle += 1
        if self._settle >= 4:  # a few refresh ticks: plots and colours settle
            self._done = True
            QTimer.singleShot(0, self._grab)

    def _grab(self) -> None:
        if self.window.grab().save(self.path, "PNG"):
            self.saved.emit(self.path)
        else:
            self.failed.emit(f"could not write {self.path}")
