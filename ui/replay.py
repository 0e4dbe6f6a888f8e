"""Replay of a ``.tscope`` recording: step timeline and two-step comparison.

``ReplayWindow`` is the live window fed from a ``SessionReader`` instead of a
socket. The file is read on a worker thread (the GUI thread never waits on
a file); batches and step look-ups come back through the bridge.

Closing the window stops the readers' work: the bridge takes no more posts
(a worker waiting for room in it returns), the loading loop stops at its next
message, no new look-up starts, and the files are closed by whoever holds the
readers' lock last (the GUI thread only if no worker has it: closing never
waits on a file).
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QDockWidget, QHBoxLayout, QLabel, QPushButton, QSlider, QSpinBox,
                               QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget)

from tensorscope.common.events import GraphStructure
from tensorscope.common.step_calls import is_call
from tensorscope.viewer.reader import SessionReader, job_recording, recording_files
from tensorscope.ui.graph_panel import relative_change
from tensorscope.ui.legend import format_number
from tensorscope.ui.main_window import MainWindow, scrolled
from tensorscope.ui.model.names import module_name
from tensorscope.ui.model.session_model import METRICS, module_metrics

log = logging.getLogger("tensorscope.ui")


class ReplayPanel(QWidget):
    """Timeline slider, compare-two-steps controls and the side-by-side table."""

    step_chosen = Signal(int)
    compare_requested = Signal(int, int)
    compare_cleared = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.steps: list[int] = []
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.setEnabled(False)
        self.step_label = QLabel("no steps", self)
        self.step_a, self.step_b = QSpinBox(self), QSpinBox(self)
        self.compare_button = QPushButton("Compare", self)
        self.clear_button = QPushButton("Clear", self)
        self.table = QTreeWidget(self)
        self.table.setHeaderLabels(["Module", "Step A", "Step B", "Change"])
        self.table.setRootIsDecorated(False)
        self.table.setSortingEnabled(True)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)   # both ends of a path
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(80)
        self._debounce.timeout.connect(lambda: self.step_chosen.emit(self.current_step()))
        self.slider.valueChanged.connect(self._slid)
        self.compare_button.clicked.connect(
            lambda: self.compare_requested.emit(self.step_a.value(), self.step_b.value()))
        self.clear_button.clicked.connect(self._clear)
        top = QHBoxLayout()
        top.addWidget(QLabel("Step", self))
        top.addWidget(self.slider, 1)
        top.addWidget(self.step_label)
        cmp = QHBoxLayout()
        cmp.addWidget(QLabel("Compare step A", self))
        cmp.addWidget(self.step_a)
        cmp.addWidget(QLabel("with B", self))
        cmp.addWidget(self.step_b)
        cmp.addStretch(1)
        # the buttons on a row of their own: on one row the panel needed 430 px, and a
        # window could not be made narrower than the plots and it together (913 px)
        buttons = QHBoxLayout()
        buttons.addWidget(self.compare_button)
        buttons.addWidget(self.clear_button)
        buttons.addStretch(1)
        box = QVBoxLayout(self)
        box.addLayout(top)
        box.addLayout(cmp)
        box.addLayout(buttons)
        box.addWidget(self.table, 1)

    def set_steps(self, steps: list[int]) -> None:
        """The recorded steps (the slider walks through them)."""
        self.steps = list(steps)
        self.slider.setEnabled(bool(steps))
        self.slider.setRange(0, max(0, len(steps) - 1))
        for spin in (self.step_a, self.step_b):
            spin.setRange(steps[0] if steps else 0, steps[-1] if steps else 0)
        if steps:
            self.step_a.setValue(steps[0])
            self.step_b.setValue(steps[-1])
            self.slider.setValue(len(steps) - 1)
        self._slid(self.slider.value())

    def current_step(self) -> int:
        """The step under the slider (-1 without steps)."""
        return self.steps[self.slider.value()] if self.steps else -1

    def _slid(self, _value: int) -> None:
        step = self.current_step()
        # "step 4 of 4" read as a count (5 steps were recorded), "step 0 of 0" as none
        self.step_label.setText(f"step {step} ({self.steps[0]}–{self.steps[-1]})"
                                if len(self.steps) > 1 else
                                f"step {step} (the only one)" if self.steps else "no steps")
        self._debounce.start()

    def _clear(self) -> None:
        self.table.clear()
        self.compare_cleared.emit()

    def show_comparison(self, rows: list[tuple[str, float | None, float | None, float | None]]
                        ) -> None:
        """Fill the side-by-side table: module, value at A, at B, relative change."""
        self.table.clear()
        for name, a, b, change in rows:
            cells = [name, "—" if a is None else format_number(a),
                     "—" if b is None else format_number(b),
                     "—" if change is None else f"{change * 100:+.1f}%"]
            self.table.addTopLevelItem(QTreeWidgetItem(cells))
        for col in range(4):
            self.table.resizeColumnToContents(col)
        self.table.setColumnWidth(0, min(self.table.columnWidth(0), 360))


#: how many steps back the replay looks for a module's statistics when the step
#: shown did not take them (the capture takes them every ``stats_every`` steps)
STATS_LOOKBACK = 256
#: earlier steps' statistics kept per recording while the timeline is scrubbed
STATS_CACHE = 4096


def step_statistics(reader: SessionReader, step: int, msgs: list,
                    taken: dict[int, dict] | None = None
                    ) -> dict[tuple[int, str], tuple[int, dict]]:
    """``(root, path) → (step taken, statistics)`` for the calls of ``step`` (its
    messages ``msgs``, rows read): a call without statistics at ``step`` gets the
    latest earlier step's, up to ``STATS_LOOKBACK`` steps back (worker thread).
    ``taken`` caches each earlier step's statistics per module (one reader's), so
    scrubbing the timeline reads a step once."""
    out = {(m.root, m.path): (step, m.stats) for m in msgs if is_call(m) and m.stats}
    missing = {(m.root, m.path) for m in msgs if is_call(m)} - out.keys()
    earlier = [s for s in reader.steps if s < step][-STATS_LOOKBACK:]
    taken = {} if taken is None else taken
    for s in reversed(earlier):
        if not missing:
            break
        stats = taken.get(s)
        if stats is None:
            if len(taken) >= STATS_CACHE:
                taken.clear()
            stats = taken[s] = {(m.root, m.path): m.stats
                                for m in reader.calls(reader.step_messages(s))
                                if is_call(m) and m.stats}
        for key in missing & stats.keys():
            out[key] = (s, stats[key])
        missing -= stats.keys()
    return out


class ReplayWindow(MainWindow):
    """The main window showing a recording, with the replay dock."""

    loaded = Signal()

    def __init__(self, path: str, settings_key: str | None = "replay") -> None:
        super().__init__(settings_key=settings_key)
        self.path = path
        # one reader per rank of a distributed job (one file each); opening checks headers
        self.readers = [SessionReader(p) for p in recording_files(path)]
        self.reader = self.readers[0]
        self.shown_step: int | None = None
        self._step_stats: dict | None = None   # the shown step's statistics per module
        self._non_finite_out: set = set()   # modules whose output held NaN/Inf at that step
        self._shown_rank = 0   # the rank whose values colour the graph
        self._taken: dict[str, dict[int, dict]] = {}   # file → step → statistics taken
        #: look-ups asked for, per kind ("step", "compare"): each runs on its own thread,
        #: and threads take the readers' lock in no set order, so only the latest asked
        #: for is read and shown (a slider dragged 3, 4, 5 ended on step 4's values)
        self._asked: dict[str, int] = {"step": 0, "compare": 0}
        #: (rank, kind) → every structure recorded, in order: a step shows the one it
        #: ran (a crashed step's partial graph is not the steps' before it)
        self._structures: dict[tuple[int, str], list[GraphStructure]] = {}
        self.setWindowTitle(f"TensorScope — {path}")
        self._lock = threading.Lock()    # the readers: one thread at a time
        self._closing = threading.Event()   # the window closed: workers stop
        self._connection_text = f"replay of {path}"
        job = job_recording(path)
        if job is not None:   # one rank of a job: say how to see them all
            self._connection_text += f" (one rank: open {job} for every rank)"
        self.status.recorded = self.ranks.recorded = True
        self.plots.steps.LOOKAHEAD_S = 0.0   # every step is there: no room for new ones
        self.replay = ReplayPanel(self)
        dock = QDockWidget("Replay", self)
        dock.setObjectName("dock_replay")
        dock.setWidget(scrolled(self.replay))
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock)
        self.tabifyDockWidget(self.findings_dock, dock)
        dock.raise_()
        self.panels.add(dock)
        self.replay.step_chosen.connect(self.show_step)
        self.replay.compare_requested.connect(self.compare_steps)
        self.replay.compare_cleared.connect(lambda: self.graph.set_comparison(None))
        self.bridge.messages_arrived.connect(self._replayed)
        self.graph.views["module"].set_empty_text(f"Reading {path}…")
        self.reload_action = QAction("Reload recording", self)
        self.reload_action.setShortcut(QKeySequence("Ctrl+Shift+R"))
        self.reload_action.setToolTip("Read the recording again: one still being written "
                                      "has more steps now (Ctrl+Shift+R)")
        self.reload_action.triggered.connect(self.reload)
        file_menu = self.menuBar().actions()[0].menu()
        file_menu.insertAction(file_menu.actions()[0], self.reload_action)
        self._in_background(self._load_all)

    def reload(self) -> None:
        """Read the recording again from its files (GUI thread): a recording still
        being written shows the steps committed since it was opened. The module
        selected stays selected, and the step shown stays shown (the newest one
        shown follows to the newest one read)."""
        steps = self.replay.steps
        at = self.replay.current_step()
        for kind in self._asked:   # look-ups of the files read before are not shown
            self._ticket(kind)
        self._kept = (self.view_state.selection,
                      None if not steps or at == steps[-1] else at)
        self.reset_session()
        self.shown_step, self._step_stats, self._non_finite_out = None, None, set()
        self._structures.clear()
        self.graph.set_notice("")
        self.graph.views["module"].set_empty_text(f"Reading {self.path}…")

        def work() -> None:   # under the readers' lock
            self._close_readers()
            self._taken.clear()
            self.readers = [SessionReader(p) for p in recording_files(self.path)]
            self.reader = self.readers[0]
            self._load_all()
        self._in_background(work)

    def _ticket(self, kind: str) -> int:
        """A new look-up of ``kind`` (GUI thread): the earlier ones are stale now."""
        self._asked[kind] += 1
        return self._asked[kind]

    def _latest(self, kind: str, ticket: int) -> bool:
        """Whether ``ticket`` is still the latest look-up of ``kind`` (any thread)."""
        return self._asked[kind] == ticket

    def _in_background(self, work: Callable[[], None]) -> None:
        if self._closing.is_set():
            return

        def run() -> None:
            with self._lock:  # the reader is used by one thread at a time
                try:
                    if not self._closing.is_set():
                        work()
                except Exception as exc:  # shown to the user, never lost
                    if not self._closing.is_set():
                        self.bridge.post_error(f"Reading {self.reader.path} failed: {exc}")
            if self._closing.is_set():   # the window found the lock taken: close them here
                with self._lock:
                    self._close_readers()
        threading.Thread(target=run, name="tensorscope-replay", daemon=True).start()

    def _close_readers(self) -> None:
        """Close every file (``_lock`` held; any thread)."""
        for reader in self.readers:
            reader.close()

    def _load_all(self) -> None:  # worker thread
        for reader in self.readers:
            for msg in reader.messages():
                if self._closing.is_set() or not self.bridge.post_message(-1, msg):
                    return
        steps = sorted({s for r in self.readers for s in r.steps})
        # every warning (opening's too: a status message shown before the window was
        # drew over the state pill), each prefixed with its file in a job of several
        found = [w if len(self.readers) == 1 else f"{os.path.basename(r.path)}: {w}"
                 for r in self.readers for w in r.warnings]
        found += [f"in all, {summary}" if len(self.readers) == 1 else f"{r.path}: {summary}"
                  for r in self.readers if (summary := r.skipped_summary())]
        self.bridge.post_response(lambda got: self._loaded(*got), (steps, found))

    def _select_first_error(self) -> None:
        """With nothing selected, select the module of the first error finding (a
        NaN's origin first): the graph, tree and inspector show where it went wrong."""
        if self.view_state.selection is not None:
            return
        errors = sorted((f for f in self.model.findings.values() if f.severity == "error"),
                        key=lambda f: (f.kind != "non_finite", f.step, f.rank))
        for f in errors:
            if f.rank in self.model.ranks:
                self.model.select_rank(f.rank)
            if self.model.module(f.root, f.module) is not None:
                self.select_module(f.root, f.module)
                return

    def _restore_kept(self, steps: list[int]) -> None:
        """After a reload: the step and the module shown before it, where they still are."""
        kept, self._kept = getattr(self, "_kept", None), None
        if kept is None:
            return
        selection, step = kept
        if step is not None and step in steps:
            self.replay.slider.setValue(steps.index(step))
        if selection is not None and selection.rank in self.model.ranks:
            self.model.select_rank(selection.rank)
            if self.model.module(selection.root, selection.path):
                self.select_module(selection.root, selection.path)

    def _replayed(self, conn_id: int, msgs: list) -> None:
        if conn_id == -1:
            for msg in msgs:
                if isinstance(msg, GraphStructure):
                    self._structures.setdefault((msg.rank, msg.kind), []).append(msg)
            self.model.ingest_many(msgs)

    def _show_structures(self, step: int, rank: int) -> None:
        """Give the model the graphs ``step`` ran: the latest recorded at or before it
        (the first, for a step before any). The graph panel lays out one that differs
        from the one shown (GUI thread)."""
        graphs = self.model.rank_state(rank).graphs
        for (r, kind), recorded in self._structures.items():
            if r != rank or not recorded:
                continue
            ran = next((gs for gs in reversed(recorded) if gs.step <= step), recorded[0])
            if graphs.get(kind) is not ran:
                graphs[kind] = ran
                self.model.changes.mark("structure")

    def _loaded(self, steps: list[int], warnings: list[str] | None = None) -> None:
        self.model.paused = None
        self.replay.set_steps(steps)
        self._restore_kept(steps)
        self.status.set_state("replay")
        if "module" not in self.model.graphs:
            told = [w for r in self.readers for w in r.warnings][:1]
            self.graph.views["module"].set_empty_text(
                "This recording holds no module graph"
                + (": the file is cut off before it" if any(r.cut for r in self.readers) else
                   f" ({told[0]})" if told else
                   ": the script stopped before its first forward pass ended" if not steps
                   else ""))
        if warnings:   # what reading the file found (a corrupt message, a cut-off end)
            more = f" (and {len(warnings) - 1} more; see the log)" if len(warnings) > 1 else ""
            for warning in warnings:
                log.warning("%s: %s", self.reader.path, warning)
            self.statusBar().showMessage(f"{self.reader.path}: {warnings[0]}{more}", 30000)
        damaged = [r for r in self.readers
                   if r.cut is not None or r.damaged or r.meta.get("complete") != "1"]
        self.plots.lost = ("The recording is damaged: these steps' module values were "
                           "lost with it" if any(r.cut is not None or r.damaged
                                                 for r in self.readers) else "")
        if damaged:   # stays above the graph: a status message is gone in 30 s
            told = [r.warnings[0] for r in damaged if r.warnings]
            # a recording still being written is news, not damage: no warning colour
            writing = all(r.writing and r.cut is None and not r.damaged for r in damaged)
            self.graph.set_notice(
                ("" if writing else "⚠ ") + (told[0] if told else f"{damaged[0].path} is damaged")
                + (f" (and {len(told) - 1} more files)" if len(told) > 1 else "")
                + (" · hover for details" if len(warnings or ()) > 1 else ""),
                "\n".join(warnings or ()), warning=not writing)
        if self.went_wrong():
            self.findings_dock.raise_()   # a run that went wrong opens on what went wrong
            self._select_first_error()
        self.loaded.emit()

    def refresh(self) -> None:
        """As live, but the debugger actions stay off and the state reads REPLAY; another
        rank shown colours the graph with its own values of the step shown."""
        super().refresh()
        shown = getattr(self, "shown_step", None)   # None too while the window is built
        if shown is not None and self.model.rank != self._shown_rank:
            self.show_step(shown)
        for act in self.actions.debugger():
            act.setEnabled(False)
        self.status.set_state("replay")

    def show_step(self, step: int) -> None:
        """Colour the graph with the values recorded at ``step``."""
        if step < 0:
            return
        self.plots.mark_step(step)

        self._shown_rank = self.model.rank   # asked for (not again each refresh)
        rank = self.model.rank
        ticket = self._ticket("step")

        def shown(got: tuple) -> None:
            if self._latest("step", ticket):   # else a later step was asked for
                self._show_metrics(step, *got)

        def work() -> None:
            if not self._latest("step", ticket):
                return
            reader = next((r for r in self.readers if r.rank == rank), self.reader)
            msgs = reader.calls(reader.step_messages(step))
            bad = {(m.root, m.path) for m in msgs if is_call(m) and not m.finite}
            self.bridge.post_response(shown,
                                      (module_metrics(msgs), step_statistics(
                                          reader, step, msgs, self._taken.setdefault(
                                              reader.path, {})), bad, rank))
        self._in_background(work)

    def _show_metrics(self, step: int, metrics: dict, stats: dict | None = None,
                      non_finite: set | None = None, rank: int | None = None) -> None:
        if rank is not None and rank != self.model.rank:
            return   # another rank was chosen meanwhile: its own values follow
        self._shown_rank = self.model.rank
        self._show_structures(step, self.model.rank)
        self.graph.shown_step = step
        self.graph.set_snapshot(metrics)
        self.shown_step, self._step_stats = step, stats or {}
        self.status.shown_step = step
        self._non_finite_out = non_finite or set()
        sel = self.view_state.selection
        if sel is not None:   # the inspector follows the timeline
            self._inspect(*sel.local)
        self.statusBar().showMessage(f"showing recorded step {step}", 4000)

    def module_stats(self, root: int, path: str) -> dict | None:
        """The statistics recorded for the module at the step the timeline shows (or
        the latest step before it that took them)."""
        if self._step_stats is None:
            return super().module_stats(root, path)
        got = self._step_stats.get((root, path))
        return got[1] if got is not None else None

    def stats_steps(self, root: int, path: str) -> tuple[int | None, int | None, bool]:
        """As live, of the step the timeline shows."""
        if self._step_stats is None:
            return super().stats_steps(root, path)
        got = self._step_stats.get((root, path))
        return (None if got is None else got[0], self.shown_step,
                (root, path) in self._non_finite_out)

    def display_name(self, root: int, path: str) -> str:
        """A module's name in the compare table: its path, with the root's name in
        front when the path alone is a bare index (``Sequential.7``, not ``7``)."""
        return module_name(self.model.root_names, root, path)

    def _shown_reader(self) -> SessionReader:
        """The recording of the rank shown (worker thread reads it under the lock)."""
        return next((r for r in self.readers if r.rank == self.model.rank), self.reader)

    def compare_steps(self, a: int, b: int) -> None:
        """Per-module statistics of steps a and b side by side; Δ coloured on the graph."""
        ticket = self._ticket("compare")

        def shown(pair: tuple) -> None:
            if self._latest("compare", ticket):   # else a later pair was asked for
                self._show_comparison(*pair)

        def work() -> None:
            if not self._latest("compare", ticket):
                return
            reader = self._shown_reader()
            ma = module_metrics(reader.calls(reader.step_messages(a)))
            mb = module_metrics(reader.calls(reader.step_messages(b)))
            self.bridge.post_response(shown, (ma, mb))
        self._in_background(work)

    def _show_comparison(self, ma: dict, mb: dict) -> None:
        metric = self.graph.colour_metric
        diffs, rows = {}, []
        for key in sorted(set(ma) | set(mb)):
            va, vb = ma.get(key, {}).get(metric), mb.get(key, {}).get(metric)
            change = relative_change(va, vb)
            diffs[key] = change
            rows.append((self.display_name(*key), va, vb, change))
        self.graph.set_comparison(diffs)
        self.replay.show_comparison(rows)
        self.replay.table.setHeaderLabels(
            ["Module", f"{METRICS.get(metric, metric)} A", "B", "Change"])

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt API)
        self._closing.set()
        super().closeEvent(event)   # closes the bridge: a worker waiting in it returns
        if self._lock.acquire(blocking=False):   # else the worker closes them, on its way out
            try:
                self._close_readers()
            finally:
                self._lock.release()
