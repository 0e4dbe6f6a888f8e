"""Save a PNG of the window once training reached a step (``demo --screenshot``)."""
from __future__ import annotations

import logging
import time

from PySide6.QtCore import QObject, QTimer, Signal

from tensorscope.ui.main_window import MainWindow

log = logging.getLogger("tensorscope.ui")


class _WindowScreenshot(QObject):
    """Saves a PNG of ``window`` to ``path`` once a subclass says it is ready.

    Emits ``saved(path)`` or ``failed(message)``; the caller quits the app.
    """

    saved = Signal(str)
    failed = Signal(str)

    #: seconds a screenshot waits at most for the plots to draw everything
    PLOTS_WAIT = 10.0

    def __init__(self, window: MainWindow, path: str, timeout: float) -> None:
        super().__init__(window)
        self.window, self.path = window, path
        self.deadline = time.monotonic() + timeout
        self._settle = 0
        self._plots_since: float | None = None

    def _plots_drawn(self) -> bool:
        """The plots drew every curve (they add a few per refresh), or waited long
        enough: a run still streaming may never let them settle."""
        now = time.monotonic()
        if self._plots_since is None:
            self._plots_since = now
        return (self.window.plots.settled(self.window.model)
                or now - self._plots_since > self.PLOTS_WAIT)

    def _grab(self) -> None:
        if self.window.grab().save(self.path, "PNG"):
            self.saved.emit(self.path)
        else:
            self.failed.emit(f"could not write {self.path}")


class StepScreenshot(_WindowScreenshot):
    """Waits for ``steps`` steps (or the script's end) and a finished layout, then grabs."""

    def __init__(self, window: MainWindow, steps: int, path: str, timeout: float = 180.0,
                 select: tuple[int, str] | None = (0, "network.2")) -> None:
        super().__init__(window, path, timeout)
        self.steps, self.select = steps, select
        self._done = False
        self._asked = False   # training was asked to pause before step ``steps``
        if select is not None:   # its tensors are kept for the pause (the inspector shows them)
            window.view_state.toggle_pin(*select)
        window.refreshed.connect(self._check)

    def _ask_to_pause(self) -> None:
        """Once connected: run to the boundary before step ``steps`` and pause there, so
        the picture shows ``steps`` steps (training went on while the colours and plots
        settled: ``--steps 200`` saved a window at step 256)."""
        if not self._asked and self.window.controller.connected:
            self._asked = self.window.controller.run_to_step(self.steps)

    def _ready(self) -> bool:
        m, g = self.window.model, self.window.graph
        reached = (m.ended is not None or m.paused is not None
                   or (not self._asked and m.steps_seen >= self.steps))
        return reached and g.pending_layouts() == 0 and bool(g.views["module"].nodes.cards)

    def _check(self) -> None:
        if self._done:
            return
        if time.monotonic() > self.deadline:
            self._done = True
            self.failed.emit(f"no {self.steps} training steps arrived in time "
                             f"(saw {self.window.model.steps_seen})")
            return
        self._ask_to_pause()
        if not self._ready():
            return
        if self._settle == 0 and self.select and self.window.model.module(*self.select):
            self.window.select_module(*self.select)
        self._settle += 1
        if self._settle >= 4 and self._plots_drawn():   # colours and plots settled
            self._done = True
            QTimer.singleShot(0, self._grab)


class ReplayScreenshot(_WindowScreenshot):
    """Renders a recording's window in a chosen state, then grabs it (``open --screenshot``).

    Once the file is loaded: show ``step`` (default: the last), the ``graph``
    kind, fold per ``expand`` (``default``, ``all`` or ``none``: every container
    folded), select ``select`` (a module path, root 0 unless ``"root:path"``),
    wait for the layout and a few refresh ticks, and save.
    """

    def __init__(self, window, path: str, step: int | None = None, graph: str = "module",
                 expand: str = "default", select: str | None = None,
                 timeout: float = 180.0) -> None:
        super().__init__(window, path, timeout)
        self.step = step
        self.graph, self.expand, self.select = graph, expand, select
        self._stage = "loading"
        window.loaded.connect(self._loaded)
        window.refreshed.connect(self._check)

    def _loaded(self) -> None:
        steps = self.window.replay.steps
        if self.step is not None and steps:
            if self.step not in steps:
                self._fail(f"step {self.step} is not in the recording "
                           f"(steps {steps[0]}–{steps[-1]})")
                return
            self.window.replay.slider.setValue(steps.index(self.step))
        self._stage = "structure"

    def _fail(self, message: str) -> None:
        if self._stage != "done":
            self._stage = "done"
            self.failed.emit(message)

    def _check(self) -> None:
        if self._stage in ("done", "loading"):
            if self._stage == "loading" and time.monotonic() > self.deadline:
                self._fail("the recording did not load in time")
            return
        if time.monotonic() > self.deadline:
            self._fail("the graph was not laid out in time")
            return
        g = self.window.graph
        if g.pending_layouts() or not g.views[self.graph].nodes.cards:
            if self._stage == "structure" and self.window.model.graphs.get(self.graph) is None \
                    and g.pending_layouts() == 0 and self._settle > 20:
                # the window says why (a recording cut off before its first graph): that
                # is the picture, with what else was recovered (tree, losses, findings)
                log.warning("the recording has no %s graph", self.graph)
                self._stage = "done"
                self.window.show_graph(self.graph)
                QTimer.singleShot(0, self._grab)
            self._settle += 1
            return
        if self._stage == "structure":
            self._stage = "arranged"
            self.window.show_graph(self.graph)
            if self.expand == "all":
                g.expand_all()
            elif self.expand == "none":
                g.collapse_all()
            self._settle = 0
            return
        if self._stage == "arranged":
            self._stage = "selected"
            if self.select:
                root, _, path = self.select.rpartition(":")
                key = (int(root) if root.isdigit() else 0, path)
                if self.window.model.module(*key) is None:
                    self._fail(f"no module {path!r} in the recording")
                    return
                self.window.select_module(*key)
                g.reveal_module(*key)   # containers folding it open, as a search does
            self._settle = 0
            return
        self._settle += 1
        if self._settle >= 4 and self._plots_drawn():   # colours, plots, inspector settle
            self._stage = "done"
            QTimer.singleShot(0, self._grab)
