"""The main window: graph in the centre, tree left, inspector right, plots below.

Everything here runs on the GUI thread. Messages arrive in batches from the
bridge and go straight into the plain ``SessionModel``; a ~30 Hz timer then
refreshes only the parts whose topics changed (``SessionModel.changes``).
"""
from __future__ import annotations

import gc
import itertools
import logging
import time
from typing import Any

from PySide6.QtCore import QByteArray, QEvent, QObject, QSettings, QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import (QDockWidget, QFileDialog, QFrame, QInputDialog, QLabel,
                               QMainWindow, QScrollArea, QVBoxLayout, QWidget)

from tensorscope.common.events import Message, Response
from tensorscope.common.tensors import PARAMS_CALL, parse_tensor_ref
from tensorscope.ui.bridge import Bridge
from tensorscope.ui.controller import DebugController
from tensorscope.ui.findings import FindingsPanel
from tensorscope.ui.graph_panel import GraphPanel
from tensorscope.ui.model.changes import ChangeCursor
from tensorscope.ui.model.job import JobConnection
from tensorscope.ui.module_tree import ModuleTreePanel
from tensorscope.ui.plots import PlotsPanel
from tensorscope.ui.model.availability import Availability, availability, first_call
from tensorscope.ui.model.session_model import SessionModel
from tensorscope.ui.model.view_state import BREAK_KINDS, PausedMarker, ViewState
from tensorscope.ui.status import StatusPanel, paused_banner
from tensorscope.ui.rank_panel import RankPanel
from tensorscope.ui.theme import Theme, make_theme
from tensorscope.ui.window_actions import PanelsMenu, build_actions

log = logging.getLogger("tensorscope.ui")
REFRESH_MS = 33
#: at most this often (s) the inspector shows a live selection's newer statistics
LIVE_INSPECT_S = 0.5
_CONN_IDS = itertools.count(1)


class MainWindow(QMainWindow):
    """The TensorScope window for one live session (or a replay)."""

    refreshed = Signal()

    def __init__(self, theme: Theme | None = None, settings_key: str | None = "main") -> None:
        """``settings_key`` None: neither restore nor save geometry (screenshots)."""
        super().__init__()
        self.setWindowTitle("TensorScope")
        self.theme = theme or make_theme()
        self.bridge = Bridge(self)
        self.model = SessionModel()
        #: selection, breakpoints, pins, paused-at: widgets observe it, change it by its methods
        self.view_state = ViewState()
        self.controller = DebugController(self.view_state, self.bridge.post_response)
        self.connection: Any = None   # the JobConnection while any script is connected
        self.job = JobConnection(self.model)
        self.job.on_rank_joined = self._rank_joined
        self._connection_text = "waiting for a training script"
        self._seen = ChangeCursor()   # the pause and the ranks last shown
        self._run_to: int | None = None   # where the inspector's "Pin and run" button runs to
        self._run_hellos: set[tuple[int, int, float]] = set()   # their --break-on taken
        self._settings_key = settings_key
        self.graph = GraphPanel(self.bridge, self.model, self.view_state, self.theme, self)
        self.setCentralWidget(self.graph)
        self.tree = ModuleTreePanel(self, self.theme)
        self.plots = PlotsPanel(self, self.theme)
        self.findings = FindingsPanel(self, self.theme)
        self.inspector = _make_inspector(self)
        self._docks()
        self._rank_dock()
        for label in (self.graph.banner, self.graph.notice):
            label.installEventFilter(self)
        self.actions = build_actions(self, self)
        self.status = StatusPanel(self.statusBar(), self.theme)
        self._wire()
        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()
        self.resize(1500, 950)
        self.panels = PanelsMenu(self, self.view_menu)
        for dock in (self.tree_dock, self.inspector_dock, self.plots_dock, self.findings_dock):
            self.panels.add(dock)
        self.panels.add(self.ranks_dock, shown_by_default=lambda: len(self.model.ranks) > 1)
        self._restore_settings()
        self.refresh()
        freeze_startup_heap()

    # ------------------------------------------------------------ layout ---
    def _dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea,
              scroll: bool = False) -> QDockWidget:
        """A dock holding ``widget``; ``scroll``: inside a scroll area, so that a
        small window shrinks the dock rather than stopping at the widget's least size."""
        dock = QDockWidget(title, self)
        dock.setObjectName(f"dock_{title.lower().replace(' ', '_')}")
        dock.setWidget(scrolled(widget) if scroll else widget)
        self.addDockWidget(area, dock)
        return dock

    def _docks(self) -> None:
        self.tree_dock = self._dock("Modules", self.tree, Qt.DockWidgetArea.LeftDockWidgetArea)
        self.inspector_dock = self._dock("Tensor inspector", self.inspector,
                                         Qt.DockWidgetArea.RightDockWidgetArea, scroll=True)
        self.plots_dock = self._dock("Plots", self.plots, Qt.DockWidgetArea.BottomDockWidgetArea,
                                     scroll=True)
        findings = QWidget(self)
        box = QVBoxLayout(findings)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addWidget(self.findings, 1)
        box.addWidget(self.findings.detail_area)
        self.findings_dock = self._dock("Findings", findings,
                                        Qt.DockWidgetArea.BottomDockWidgetArea)
        self.splitDockWidget(self.plots_dock, self.findings_dock, Qt.Orientation.Horizontal)
        self.resizeDocks([self.tree_dock, self.inspector_dock], [480, 380], Qt.Orientation.Horizontal)
        self.resizeDocks([self.plots_dock], [250], Qt.Orientation.Vertical)
        self.resizeDocks([self.plots_dock, self.findings_dock], [1000, 480], Qt.Orientation.Horizontal)

    def _rank_dock(self) -> None:
        """The ranks of a distributed job, beside the findings; shown once a second
        rank is heard from."""
        self.ranks = RankPanel(self, self.theme)
        self.ranks_dock = self._dock("Ranks", self.ranks, Qt.DockWidgetArea.BottomDockWidgetArea)
        self.tabifyDockWidget(self.findings_dock, self.ranks_dock)
        self.ranks_dock.hide()
        self.ranks.rank_selected.connect(lambda rank: self.model.select_rank(rank))
        self._rank_count = 0
        self._inspected: tuple | None = None   # the selected module's steps last shown
        self._inspected_at = 0.0

    def _wire(self) -> None:
        a, c = self.actions, self.controller
        self.bridge.messages_arrived.connect(self._messages)
        self.bridge.response_arrived.connect(lambda handler, resp: handler(resp))
        self.bridge.connection_closed.connect(self._closed)
        self.bridge.connection_opened.connect(self._connection_opened)
        self.bridge.error_reported.connect(self.show_error)
        a.cont.triggered.connect(c.resume)
        a.pause.triggered.connect(c.pause)
        a.step_batch.triggered.connect(c.step_batch)
        a.step_module.triggered.connect(c.step_module)
        a.run_to.triggered.connect(self._ask_run_to)
        a.toggle_break.triggered.connect(self.toggle_breakpoint)
        a.pin.triggered.connect(self.toggle_pin)
        a.conditions.triggered.connect(self.edit_conditions)
        for act, kind in self._break_actions():
            act.toggled.connect(lambda on, k=kind: self.view_state.set_break_kind(k, on))
        self.view_state.events.breakpoints.connect(lambda _e: self._breakpoints_changed())
        self.view_state.events.selection.connect(lambda _e: self._selection_changed())
        self.view_state.events.pins.connect(lambda _e: self._pins_changed())
        a.fit.triggered.connect(lambda: self.graph.view.fit_all())
        a.zoom_in.triggered.connect(lambda: self.graph.view.zoom(1.25))
        a.zoom_out.triggered.connect(lambda: self.graph.view.zoom(0.8))
        a.find.triggered.connect(self._find)
        a.expand_all.triggered.connect(self.graph.expand_all)
        a.collapse_default.triggered.connect(self.graph.collapse_default)
        a.fold_runs.toggled.connect(self.graph.set_fold_runs)
        a.export_png.triggered.connect(lambda: self._export("png"))
        a.export_svg.triggered.connect(lambda: self._export("svg"))
        a.show_module.triggered.connect(lambda: self.show_graph("module"))
        a.show_autograd.triggered.connect(lambda: self.show_graph("autograd"))
        a.metric.currentIndexChanged.connect(
            lambda _i: self.graph.set_metric(a.metric.currentData()))
        from tensorscope.ui.search import ModuleSearch
        self.search = ModuleSearch(a.search, a.search_status, self.graph, lambda: [
            ((m.root, m.path), m.type) for m in self.model.modules.values()
            if m.rank == self.model.rank])
        self.tree.module_selected.connect(
            lambda root, path: self.view_state.select(self.model.rank, root, path))
        self.plots.point_selected.connect(self._point_selected)
        self.plots.step_selected.connect(lambda step: self.plots.mark_step(step))
        self.findings.rank_activated.connect(lambda rank: self.model.select_rank(rank))
        self.findings.count_changed.connect(   # a tab behind another says it has rows
            lambda n: self.findings_dock.setWindowTitle(f"Findings ({n})" if n else "Findings"))
        self.findings.finding_activated.connect(self._point_selected)
        pin = getattr(self.inspector, "pin_requested", None)
        if pin is not None:
            pin.connect(self._pin_from_inspector)
        signal = getattr(self.inspector, "tensor_requested", None)
        if signal is not None:
            signal.connect(self._tensor_requested)

    # -------------------------------------------------------- connection ---
    def accept_connection(self, connection: Any) -> None:
        """Start reading ``connection`` and show its session. Any thread.

        ``connection`` is a ``tensorscope.viewer.client.Connection``; its messages
        are queued behind the announcement, so none is lost or misrouted.
        """
        conn_id = next(_CONN_IDS)
        self.bridge.post_connection(conn_id, connection)
        connection.start(self.bridge.message_poster(conn_id), self.bridge.closed_poster(conn_id))

    def _connection_opened(self, conn_id: int, connection: Any) -> None:
        """A script connected: it joins the session shown if its Hello names the
        same distributed job, else it starts a new one (``JobConnection.place``)."""
        self.job.opened(conn_id, connection)
        self.connection = self.job
        self._connection_text = f"connected {getattr(connection, 'peer', '')}".strip()

    def _drop_connection(self, reason: str) -> None:
        self.connection = None
        self.controller.set_connection(None)
        self.job.close()
        self._connection_text = f"disconnected ({reason})"

    def _closed(self, conn_id: int, reason: str) -> None:
        rank = self.job.closed(conn_id)
        if rank is not None:
            self.model.rank_disconnected(rank, reason)
        if self.connection is not None and not self.job.connected and not self.job.pending:
            self.connection = None
            self.controller.set_connection(None)
            self._connection_text = f"disconnected ({reason or 'script ended'})"

    def _rank_joined(self, rank: int) -> None:
        self.controller.set_connection(self.job)  # breakpoints and pins reach the new rank
        self._connection_text = f"connected {self.job.peer}"

    def show_error(self, message: str) -> None:
        """Tell the user about a failure (status bar and connection field)."""
        log.error("%s", message)
        self._connection_text = message
        self.statusBar().showMessage(message, 15000)
        if not self.model.ranks:   # nothing to show yet: the empty graph says it, and stays
            self.graph.views["module"].set_empty_text(message)

    def reset_session(self) -> None:
        """Forget the previous session's data (a new script connected); breakpoints
        and pins stay, for the new session."""
        self.model.__init__()
        self.view_state.clear_selection()
        self.view_state.set_paused_at(None)
        self.tree.clear()
        self.graph.clear()
        self.plots.clear()
        self.findings.clear()

    def _messages(self, conn_id: int, msgs: list[Message]) -> None:
        where = self.job.place(conn_id, msgs)
        if where == "drop":
            return
        if where == "new":
            for conn in self.job.keep_only(conn_id):
                try:
                    conn.close()
                except OSError as exc:
                    log.warning("closing the connection failed: %s", exc)
            self.reset_session()
            self.controller.set_connection(self.job)
            self._connection_text = f"connected {self.job.peer}".strip()
        self.model.ingest_many(msgs)
        self.job.observe(conn_id, msgs)

    def ingest(self, msgs: list[Message]) -> None:
        """Feed events directly (replay and tests)."""
        self.model.ingest_many(msgs)

    # ----------------------------------------------------------- refresh ---
    def refresh(self) -> None:
        """Repaint what changed (the ~30 Hz timer)."""
        m = self.model
        m.note_idle()
        self.tree.refresh(m)
        sel = self.view_state.selection
        if sel is not None and sel.rank == m.rank and self.tree.selected_module() != sel.local:
            self.tree.select_module(*sel.local)   # selected before its row was made
        self.graph.refresh()
        self.plots.refresh(m)
        self.findings.refresh(m)
        if len(m.ranks) > 1:
            if self._rank_count < 2:
                self.ranks_dock.show()
                if not self.went_wrong():   # else the findings tab stays in front
                    self.ranks_dock.raise_()
            self.ranks.refresh(m)
        self._rank_count = len(m.ranks)
        sel = self.view_state.selection
        if sel is not None and sel.rank != m.rank:   # another rank shown: its same module
            self.select_module(sel.root, sel.path)
        elif sel is not None:
            self._follow_live(sel.root, sel.path)
        changed = m.changes.take(self._seen, "pause", "ranks")
        if "ranks" in changed:
            self._take_run_breakpoints()
        if "pause" in changed:
            self._paused_changed()
        live = self.connection is not None
        for act in self.actions.debugger():
            act.setEnabled(live)
        self.actions.pause.setEnabled(live and m.paused is None)
        for act in (self.actions.cont, self.actions.step_batch, self.actions.step_module):
            act.setEnabled(live and m.paused is not None)
        self.status.refresh(m, self._connection_text)
        self.refreshed.emit()

    def _take_run_breakpoints(self) -> None:
        """The breakpoints each rank's run was started with (``--break-on``, in its
        Hello) join the ``ViewState``'s set, once per Hello: shown in the actions and
        the conditions dialog, and kept in the set the controller sends."""
        for state in self.model.ranks.values():
            hello = state.hello
            if hello is None or not hello.breakpoints:
                continue
            key = (hello.rank, hello.pid, hello.started_at)
            if key in self._run_hellos:
                continue
            self._run_hellos.add(key)
            try:
                self.view_state.add_run_breakpoints(hello.breakpoints)
            except ValueError as exc:
                self.show_error(f"could not show the run's --break-on breakpoints: {exc}")

    def _paused_changed(self) -> None:
        p = self.model.paused
        self.view_state.set_paused_at(PausedMarker.of(p))
        state = self.model.module(p.root or 0, p.path) if p is not None and p.path is not None \
            else None
        self.graph.set_banner(paused_banner(p, state.type if state else "", self.model.root_names) if p else "",
                              alarm=p is not None and p.reason in ("non_finite", "exception"))
        if p is not None:
            self.plots.mark_step(p.step)
            sel = self.view_state.selection
            key = (p.root or 0, p.path) if p.path is not None else sel.local if sel else None
            if key is not None:
                self.select_module(*key)   # the inspector offers this pause's tensors

    # --------------------------------------------------------- selection ---
    def select_module(self, root: int, path: str) -> None:
        """Select a module of the rank shown everywhere: graph, tree, plots and
        inspector. Selected already, it is shown again (the user may have scrolled
        away, or training paused since: the inspector offers the new tensors)."""
        if not self.view_state.select(self.model.rank, root, path):
            self.graph.show_selection()
            self._selection_changed()

    def went_wrong(self) -> bool:
        """Whether the session raised or made an error finding (its findings tab is
        then what the window shows first)."""
        m = self.model
        return bool(m.exceptions) or any(f.severity == "error" for f in [
            *m.findings.values(), *m.job_findings])

    def _selection_changed(self) -> None:
        """The ``ViewState``'s selection moved: the tree, plots and inspector follow
        (the graph panel observes it itself)."""
        sel = self.view_state.selection
        if sel is None:
            self.plots.set_focus(None)
            return
        self.tree.select_module(*sel.local)
        self.plots.set_focus(sel.local)
        self._inspect(*sel.local)

    def _break_actions(self) -> list[tuple[Any, str]]:
        a = self.actions
        actions = {"non_finite": a.break_non_finite, "exception": a.break_exception,
                   "finding": a.break_finding}
        return [(actions[kind], kind) for kind in BREAK_KINDS]

    def _breakpoints_changed(self) -> None:
        """The break-on-kind actions show the ``ViewState``'s kinds."""
        kinds = self.view_state.break_kinds
        for act, kind in self._break_actions():
            if act.isChecked() != (kind in kinds):
                act.setChecked(kind in kinds)

    def _point_selected(self, root: int, path: str, step: int) -> None:
        self.select_module(root, path)
        self.plots.mark_step(step)

    def _follow_live(self, root: int, path: str) -> None:
        """While training runs, the inspector shows the selected module's newest
        statistics (at most twice a second): it kept those of the step it was
        selected at, saying 'of step 195, the latest before step 199' at step 623."""
        if self.connection is None or self.model.paused is not None:
            return
        state = self.model.module(root, path)
        mark = None if state is None else (state.stats_step, state.last_step, state.finite)
        now = time.monotonic()
        if mark != self._inspected and now - self._inspected_at >= LIVE_INSPECT_S:
            self._inspect(root, path)

    def _inspect(self, root: int, path: str) -> None:
        show = getattr(self.inspector, "show_tensor", None)
        if show is None:
            return
        state = self.model.module(root, path)
        self._inspected = (None if state is None else
                           (state.stats_step, state.last_step, state.finite))
        self._inspected_at = time.monotonic()
        stats, note = self._stats_shown(root, path)
        entries = paused_choices(self.model, root, path)
        if entries:   # every input, output, gradient, parameter and .grad kept at this pause
            self.inspector.show_choices(entries, stats)
            return
        name = path or self.model.root_names.get(root, "<root>")
        meta = stats_tensor_meta(state, name, stats is not None)
        if meta is None:   # said, not skipped: the module shown before stayed up under it
            show(None, {"path": name, "kind": "module", "dtype": state.type if state else ""},
                 None, unavailable=no_output_text(state, name,
                                                    getattr(self, "reader", None) is not None))
        else:
            pinned = (root, path) in self.view_state.pins
            live = self.connection is not None
            why = self._availability(root, path, stats is not None)
            self._run_to = why.run_to if live and why is not None else None
            text = why.text if why is not None else self._unavailable(root, path)
            text = f"{text}. {note}" if note else text
            action = why.action(pinned) if live and why is not None else ""
            show(None, meta, stats, unavailable=text, can_pin=live and not pinned,
                 **({"action": action} if action else {}))

    def module_stats(self, root: int, path: str) -> dict | None:
        """The statistics the inspector shows for a module (live: the latest)."""
        state = self.model.module(root, path)
        return state.stats if state is not None else None

    def stats_steps(self, root: int, path: str) -> tuple[int | None, int | None, bool]:
        """(the step ``module_stats`` were taken at, the step shown, whether the
        module's output held NaN/Inf at the step shown); live: its latest call."""
        state = self.model.module(root, path)
        if state is None or state.stats is None:
            return None, None, False
        return state.stats_step, state.last_step, not state.finite

    def _stats_shown(self, root: int, path: str) -> tuple[dict | None, str]:
        """The statistics the inspector shows for a module, and what it says of them.

        Statistics are taken every few steps. Those of an earlier step are shown
        with their step named; but not when the module's output held NaN/Inf at
        the step shown: the earlier, finite numbers (nan 0) would read as the
        current ones.
        """
        stats = self.module_stats(root, path)
        taken, shown, non_finite = self.stats_steps(root, path)
        if stats is None or taken is None or shown is None or taken == shown:
            return stats, ""
        if non_finite:
            return None, (f"Its output held NaN/Inf at step {shown}, which took no "
                          f"statistics (the latest, of step {taken}, no longer apply)")
        return stats, (f"Statistics are not taken every step: these are of step {taken}, "
                       f"the latest before step {shown}")

    def _availability(self, root: int, path: str, stats_shown: bool) -> Availability | None:
        """At a pause, what of module ``(root, path)`` can be seen and how to get the rest."""
        p = self.model.paused
        if p is None or self.connection is None:
            return None
        name = path or self.model.root_names.get(root, "<root>")
        call = first_call(self.model.graphs.get("module"), root, path)
        return availability(name, p, (root, path) in self.view_state.pins, call, path,
                            stats_shown, self.model.root_names)

    def _unavailable(self, root: int, path: str) -> str:
        """Why module ``(root, path)``'s values cannot be fetched now (what to do instead)."""
        name = path or self.model.root_names.get(root, "<root>")
        pinned = (root, path) in self.view_state.pins
        if self.connection is None:
            return (f"No values for {name}: a recording holds statistics, not tensors"
                    if getattr(self, "reader", None) is not None else
                    f"No values for {name}: no training script is connected")
        if self.model.paused is None:
            return (f"{name} is pinned: its tensors are kept every step and served at the "
                    "next pause (F6)" if pinned else
                    f"Training is running: pause (F6) to fetch {name}'s values, or pin it "
                    "(Ctrl+P) to keep its tensors for the next pause")
        why = self._availability(root, path, False)
        return why.text if why is not None else ""

    def _tensor_requested(self, ref: str, slice_text: str, max_elements: int) -> None:
        if not self.controller.get_tensor(ref, slice_text, max_elements, self._slice_response):
            self.inspector.slice_failed(self.controller.last_error)

    def _slice_response(self, resp: Response) -> None:
        if resp.ok:
            self.inspector.slice_received(resp.body)
        else:
            self.inspector.slice_failed(resp.error or "training refused the request")

    # ----------------------------------------------------------- actions ---
    def show_graph(self, kind: str) -> None:
        """Switch the centre view to the ``module`` or ``autograd`` graph."""
        self.graph.show_kind(kind)
        self.actions.show_module.setChecked(kind == "module")
        self.actions.show_autograd.setChecked(kind == "autograd")

    def _find(self) -> None:
        """Ctrl+F: into the search box, its text selected."""
        self.actions.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.actions.search.selectAll()

    def _needs_selection(self, what: str) -> None:
        self.statusBar().showMessage(f"Select a module first (in the graph or the tree) to "
                                     f"{what}", 5000)

    def toggle_breakpoint(self) -> None:
        """F9: toggle a forward breakpoint on the selected module."""
        sel = self.view_state.selection
        if sel is not None:
            self.view_state.toggle_module_break(*sel.local)
        else:   # the key did nothing, silently
            self._needs_selection("toggle its breakpoint (F9)")

    def edit_conditions(self) -> None:
        """The condition breakpoints dialog (module prefilled from the selection)."""
        from tensorscope.ui.conditions_dialog import ConditionDialog
        sel = self.view_state.selection
        self.conditions_dialog = ConditionDialog(self.view_state, sel.path if sel else "", self)
        self.conditions_dialog.show()

    def _pin_from_inspector(self) -> None:
        """The inspector's button: pin the selected module; at a pause, also run to the
        step boundary that will serve its tensors."""
        sel = self.view_state.selection
        if sel is None:
            return
        target = self._run_to if self.model.paused is not None else None
        if sel.local not in self.view_state.pins:
            self.view_state.toggle_pin(*sel.local)   # the controller sends the pins first
        if target is not None:
            self.controller.run_to_step(target)

    def _pins_changed(self) -> None:
        """The inspector says whether the selected module is pinned (and offers a pin)."""
        sel = self.view_state.selection
        if sel is not None:
            self._inspect(*sel.local)

    def toggle_pin(self) -> None:
        """Pin/unpin the selected module's tensors."""
        sel = self.view_state.selection
        if sel is not None:
            self.view_state.toggle_pin(*sel.local)
        else:
            self._needs_selection("pin its tensors (Ctrl+P)")

    def _ask_run_to(self) -> None:
        step, ok = QInputDialog.getInt(self, "Run to step", "Pause before step:",
                                       max(self.model.step + 1, 0), 0, 10**9)
        if ok:
            self.controller.run_to_step(step)

    def _export(self, fmt: str) -> None:
        path, _ = QFileDialog.getSaveFileName(self, f"Export graph as {fmt.upper()}",
                                              f"graph.{fmt}", f"{fmt.upper()} (*.{fmt})")
        if path:
            view = self.graph.view
            ok = view.export_png(path) if fmt == "png" else view.export_svg(path)
            self.statusBar().showMessage(("Saved " if ok else "Could not save ") + path, 5000)

    # ---------------------------------------------------------- settings ---
    def _restore_settings(self) -> None:
        if self._settings_key is None:
            return
        s = QSettings("TensorScope", "TensorScope")
        geometry = s.value(f"{self._settings_key}/geometry")
        state = s.value(f"{self._settings_key}/state")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        if isinstance(state, QByteArray):
            self.restoreState(state)

    #: the least share of the window's width the graph keeps when the window narrows
    GRAPH_SHARE = 0.4
    #: the least share of the window's height the graph's canvas keeps (below any
    #: banner) when the window gets shorter or a banner shows, while panels below
    #: it can give way
    GRAPH_HEIGHT_SHARE = 0.55

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt API)
        """A narrower or shorter window: the side and bottom panels give way before
        the graph becomes a strip (Qt shrinks only the central widget: at 1024 px it
        was 150 px wide, and at 700 px high, with a banner, 200 px tall)."""
        super().resizeEvent(event)
        old, new = event.oldSize(), event.size()
        self._schedule_graph_room(width=old.width() != new.width(),
                                  height=old.height() != new.height())

    def _schedule_graph_room(self, width: bool = False, height: bool = False) -> None:
        """Check the graph's room across (``width``) or down (``height``) once the
        layout settled (GUI thread)."""
        if not (width or height):
            return
        if getattr(self, "_room_timer", None) is None:   # a child: it dies with the window
            self._room_timer = QTimer(self)
            self._room_timer.setSingleShot(True)
            self._room_timer.setInterval(0)
            self._room_timer.timeout.connect(self._keep_graph_room)
            self._room_axes = [False, False]
        self._room_axes = [self._room_axes[0] or width, self._room_axes[1] or height]
        self._room_timer.start()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt API)
        """A banner or notice above the graph shown or hidden: its height came off the
        canvas, which may want room from the panels below."""
        if watched in (self.graph.banner, self.graph.notice) \
                and event.type() in (QEvent.Type.Show, QEvent.Type.Hide):
            self._schedule_graph_room(height=True)
        return super().eventFilter(watched, event)

    def _docked(self, *areas: Qt.DockWidgetArea) -> list[QDockWidget]:
        """The docks shown in ``areas`` (not floating, not a tab behind another)."""
        inside = self.rect()
        return [d for d in self.findChildren(QDockWidget)
                if d.isVisible() and not d.isFloating() and self.dockWidgetArea(d) in areas
                and inside.contains(d.geometry())]

    def _keep_graph_room(self) -> None:
        width, height = self._room_axes
        self._room_axes = [False, False]
        for widget in (self, self.graph):   # measure the geometry of now, not a stale one
            widget.layout().activate()
        if width:
            self._keep_graph_width()
        if height:
            self._keep_graph_height()

    def _keep_graph_width(self) -> None:
        width = self.width()
        graph = self.graph.width()
        sides = self._docked(Qt.DockWidgetArea.LeftDockWidgetArea,
                             Qt.DockWidgetArea.RightDockWidgetArea)
        want = int(width * self.GRAPH_SHARE)
        taken = sum(d.width() for d in sides)
        if graph >= want or not sides or taken <= 0:
            return
        room = max(0, taken - (want - graph))
        self.resizeDocks(sides, [max(1, d.width() * room // taken) for d in sides],
                         Qt.Orientation.Horizontal)

    def _keep_graph_height(self) -> None:
        """Shrink the panels below (or above) the graph until its canvas has its
        share of the height; grow them back to the height they had when the
        window has room again."""
        rows = self._docked(Qt.DockWidgetArea.BottomDockWidgetArea,
                            Qt.DockWidgetArea.TopDockWidgetArea)
        # the docks side by side in an area share one height: resize one per area
        by_area: dict[Qt.DockWidgetArea, QDockWidget] = {}
        for d in rows:
            by_area.setdefault(self.dockWidgetArea(d), d)
        docks = list(by_area.values())
        if not docks:
            return
        canvas = self.graph.stack.height()
        want = int(self.height() * self.GRAPH_HEIGHT_SHARE)
        taken = sum(d.height() for d in docks)
        # (the height they had, the least and most we may have left them): a height
        # outside that range is the user's, from the splitter
        given = getattr(self, "_rows_given", None)
        if given is not None and not given[1] - 4 <= taken <= given[2] + 4:
            given = None
        if canvas < want and taken > 0:
            room = max(0, taken - (want - canvas))
            self._resize_rows(docks, taken, room)
            self._rows_given = (given[0] if given else taken, room, taken)
        elif given is not None and canvas > want and taken < given[0]:
            room = min(given[0], taken + canvas - want)
            self._resize_rows(docks, taken, room)
            self._rows_given = None if room >= given[0] else (given[0], taken, room)
        else:
            self._rows_given = given

    def _resize_rows(self, docks: list[QDockWidget], taken: int, room: int) -> None:
        self.resizeDocks(docks, [max(1, d.height() * room // taken) for d in docks],
                         Qt.Orientation.Vertical)

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt API)
        if self._settings_key is not None:
            s = QSettings("TensorScope", "TensorScope")
            s.setValue(f"{self._settings_key}/geometry", self.saveGeometry())
            s.setValue(f"{self._settings_key}/state", self.saveState())
        hook = getattr(self, "closing_hook", None)
        if hook is not None:
            hook()
        self.timer.stop()
        self.bridge.close()   # nothing posted from now on reaches this window
        self.graph.close_layouts()
        if self.connection is not None:
            self._drop_connection("window closed")
        super().closeEvent(event)


_heap_frozen = False


def freeze_startup_heap() -> None:
    """Take what is alive now out of the cyclic collector's walks (once per process).

    Modules, Qt wrappers and the first window's plot and graph items (~90k
    objects) live as long as the process. Left in place, every full
    collection walks them again: 50-90 ms on a 2-core machine, a GUI stall
    while events stream in. ``gc.freeze`` moves them to the permanent
    generation after a collection; reference counting still frees them.
    """
    global _heap_frozen
    if not _heap_frozen:
        _heap_frozen = True
        gc.collect()
        gc.freeze()


class VerticalScroll(QScrollArea):
    """A frameless scroll area that gives its widget its whole width and all the
    height it has, and a vertical scroll bar below the widget's least height (never a
    horizontal one: it is at least as wide as the widget needs).

    It sizes the widget itself: Qt's resizable scroll area takes a widget that wraps
    text to be as wide as it would like to be, and cut the inspector off at the right.
    """

    MIN_HEIGHT = 80

    def __init__(self, widget: QWidget) -> None:
        super().__init__()
        self.setWidget(widget)
        self.setWidgetResizable(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        widget.installEventFilter(self)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        """The widget's least width (and room for the scroll bar), a little height."""
        inner = self.widget().minimumSizeHint()
        bar = self.verticalScrollBar().sizeHint().width()
        return QSize(inner.width() + bar, min(self.MIN_HEIGHT, inner.height()))

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        """What the widget would like."""
        return self.widget().sizeHint()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt API)
        super().resizeEvent(event)
        self._fit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt API)
        """The widget's layout changed (a view shown, a label rewrapped): refit it."""
        if watched is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            self.updateGeometry()   # its least width may have changed: the dock follows
            self._fit()
        return super().eventFilter(watched, event)

    def _fit(self) -> None:
        widget = self.widget()
        width = self.viewport().width()
        least = widget.minimumSizeHint().height()
        if widget.hasHeightForWidth():
            least = max(least, widget.heightForWidth(width))
        size = QSize(width, max(self.viewport().height(), least))
        if widget.size() != size:
            widget.resize(size)


def scrolled(widget: QWidget) -> VerticalScroll:
    """``widget`` in a ``VerticalScroll``."""
    return VerticalScroll(widget)


def stats_tensor_meta(state: Any, name: str, with_stats: bool) -> dict | None:
    """The TensorMeta the inspector names for module ``name`` shown without values:
    with statistics, the output they describe (``out["values"]`` of a module
    returning a mask first), else its first output."""
    from tensorscope.common.tensors import tensor_meta
    if state is None:
        return None
    shown = state.stats_meta if with_stats else None
    if shown is not None:
        return tensor_meta(f"{name}/{shown.get('path') or 'out'}", shape=list(shown["shape"]),
                           dtype=str(shown.get("dtype", "")),
                           device=str(shown.get("device", "")))
    if state.shape is None:
        return None
    return tensor_meta(f"{name}/out", shape=list(state.shape), dtype=state.dtype,
                       device=state.device)


def no_output_text(state: Any, name: str, recorded: bool) -> str:
    """Why module ``name`` has no output to show: it was never called (an attention
    layer's dropout read only for its rate), runs unseen inside a compiled graph, or
    returned no tensor."""
    if state is not None and state.last_step >= 0:
        return (f"{name} returned no tensor: its last call (step {state.last_step}) "
                "had no tensor output to show")
    if state is not None and state.inside_compiled is not None:
        return f"{name} runs inside a compiled graph: its calls are not observed"
    seen = "in the recorded steps" if recorded else "so far"
    return (f"{name} was not called {seen}: no forward ran it, so it has no inputs "
            "or outputs to show")


def paused_choices(model: SessionModel, root: int, path: str) -> list[dict]:
    """The tensors of a module's newest call kept at the current pause (its inputs,
    outputs, gradients, parameters and their ``.grad``): TensorMeta dicts with ``ref``.
    A module with no call kept offers its parameters (served at any pause)."""
    p = model.paused
    if p is None:
        return []
    calls: dict[int, list[dict]] = {}
    for entry in [*p.tensors, *(getattr(p, "params", None) or ())]:
        ref = str(entry.get("ref", ""))
        try:
            _rank, r_root, r_path, call, _name = parse_tensor_ref(ref)
        except ValueError:
            continue
        if (r_root, r_path) == (root, path):
            calls.setdefault(call, []).append({**entry.get("meta", entry), "ref": ref})
    params = calls.pop(PARAMS_CALL, [])
    newest = calls[max(calls)] if calls else []
    have = {e["ref"].rsplit("/", 1)[-1] for e in newest}
    return newest + [e for e in params if e["ref"].rsplit("/", 1)[-1] not in have]


def paused_tensor(model: SessionModel, root: int, path: str) -> tuple[str | None, dict | None]:
    """The ref and meta of a module's main tensor at the current pause (output first)."""
    def order(e: dict) -> int:
        name = e["ref"].rsplit("/", 1)[-1]
        return 0 if name.startswith("out") else 1 if name.startswith("grad") else 2
    entries = sorted(paused_choices(model, root, path), key=order)
    return (entries[0]["ref"], entries[0]) if entries else (None, None)


def _make_inspector(parent: QWidget) -> QWidget:
    try:
        from tensorscope.ui.inspector import TensorInspector
    except ImportError as exc:
        log.error("the tensor inspector is unavailable: %s", exc)
        label = QLabel(f"Tensor inspector unavailable:\n{exc}", parent)
        label.setWordWrap(True)
        return label
    return TensorInspector(parent)
