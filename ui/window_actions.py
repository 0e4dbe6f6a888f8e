"""Toolbar and menu actions of the main window, with the debugger keys."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QComboBox, QLabel, QLineEdit, QMainWindow, QMenu, QToolBar,
                               QWidget)

from tensorscope.ui.model.session_model import METRICS


@dataclass
class WindowActions:
    """Every action, so that tests and the window can trigger them by name."""

    cont: QAction
    pause: QAction
    step_batch: QAction
    step_module: QAction
    run_to: QAction
    toggle_break: QAction
    break_non_finite: QAction
    break_exception: QAction
    break_finding: QAction
    conditions: QAction
    pin: QAction
    fit: QAction
    zoom_in: QAction
    zoom_out: QAction
    find: QAction
    expand_all: QAction
    collapse_default: QAction
    fold_runs: QAction
    export_png: QAction
    export_svg: QAction
    show_module: QAction
    show_autograd: QAction
    metric: QComboBox
    search: QLineEdit
    search_status: QLabel = None  # type: ignore[assignment]  # "3 of 12" / "no match"

    def debugger(self) -> list[QAction]:
        """Actions that need a live connection."""
        return [self.cont, self.pause, self.step_batch, self.step_module, self.run_to,
                self.toggle_break, self.break_non_finite, self.break_exception,
                self.break_finding, self.pin]


def _action(win: QMainWindow, text: str, key: str | None = None, tip: str = "",
            checkable: bool = False) -> QAction:
    act = QAction(text, win)
    if key:
        act.setShortcut(QKeySequence(key))
        act.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)
    act.setToolTip(f"{tip or text} ({key})" if key else (tip or text))
    act.setCheckable(checkable)
    return act


def build_actions(win: QMainWindow, parent: QWidget) -> WindowActions:
    """Create actions, the toolbar and the menus of ``win``."""
    a = WindowActions(
        cont=_action(win, "Continue", "F5", "Continue training"),
        pause=_action(win, "Pause", "F6", "Pause at the next module or step"),
        step_batch=_action(win, "Step batch", "F10", "Run to the next step boundary"),
        step_module=_action(win, "Step module", "F11", "Run to the next module call or gradient"),
        run_to=_action(win, "Run to step…", "Ctrl+G"),
        toggle_break=_action(win, "Breakpoint", "F9", "Toggle a breakpoint on the selected module"),
        break_non_finite=_action(win, "Break on non-finite", checkable=True),
        break_exception=_action(win, "Break on exception", checkable=True),
        break_finding=_action(win, "Break on finding", checkable=True),
        conditions=_action(win, "Condition breakpoints…", "Ctrl+B",
                           "Break when a module's statistics meet a condition "
                           "(grad_norm > 100)"),
        pin=_action(win, "Pin tensors", "Ctrl+P", "Keep the selected module's tensors for inspection"),
        fit=_action(win, "Fit", "Ctrl+0", "Fit the graph to the window"),
        zoom_in=_action(win, "Zoom in", "Ctrl++"),
        zoom_out=_action(win, "Zoom out", "Ctrl+-"),
        find=_action(win, "Find module…", "Ctrl+F", "Search the modules by path or class"),
        expand_all=_action(win, "Expand all", "Ctrl+E"),
        collapse_default=_action(win, "Collapse to default", "Ctrl+Shift+E"),
        fold_runs=_action(win, "Fold repeated blocks", "Ctrl+R",
                          "Show a run of identical blocks as one card (h.0–11 ×12)",
                          checkable=True),
        export_png=_action(win, "Export graph as PNG…"),
        export_svg=_action(win, "Export graph as SVG…"),
        show_module=_action(win, "Module graph", "Ctrl+1", checkable=True),
        show_autograd=_action(win, "Autograd graph", "Ctrl+2", checkable=True),
        metric=QComboBox(parent), search=QLineEdit(parent))
    # Ctrl+= too: the unshifted key most keyboards zoom in with (Ctrl++ needs Shift)
    a.zoom_in.setShortcuts([QKeySequence("Ctrl++"), QKeySequence("Ctrl+=")])
    a.show_module.setChecked(True)
    for key, label in METRICS.items():
        a.metric.addItem(label, key)
    a.metric.setCurrentIndex(list(METRICS).index("grad_norm"))
    a.metric.setToolTip("Colour graph nodes by this metric")
    a.search.setPlaceholderText("Find module (path or class)…")
    a.search.setToolTip("Enter: next match · Shift+Enter: previous match")
    a.search_status = QLabel("", parent)
    a.search_status.setObjectName("search_status")
    a.search_status.setMinimumWidth(70)
    a.search.setClearButtonEnabled(True)
    a.search.setMaximumWidth(260)
    _toolbar(win, a)
    _menus(win, a)
    return a


def _toolbar(win: QMainWindow, a: WindowActions) -> None:
    bar = QToolBar("Debugger", win)
    bar.setObjectName("toolbar_debugger")
    bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
    for act in (a.cont, a.pause, a.step_batch, a.step_module, a.toggle_break, a.pin):
        bar.addAction(act)
    bar.addSeparator()
    bar.addAction(a.show_module)
    bar.addAction(a.show_autograd)
    bar.addSeparator()
    bar.addWidget(a.metric)
    bar.addAction(a.fit)
    bar.addSeparator()
    bar.addWidget(a.search)
    bar.addWidget(a.search_status)
    win.addToolBar(bar)


def _menus(win: QMainWindow, a: WindowActions) -> None:
    menu = win.menuBar()
    file_menu: QMenu = menu.addMenu("&File")
    file_menu.addAction(a.export_png)
    file_menu.addAction(a.export_svg)
    file_menu.addSeparator()
    quit_action = file_menu.addAction("Quit")
    quit_action.setShortcut(QKeySequence.StandardKey.Quit)
    quit_action.triggered.connect(win.close)
    debug = menu.addMenu("&Debug")
    for act in (a.cont, a.pause, a.step_batch, a.step_module, a.run_to):
        debug.addAction(act)
    debug.addSeparator()
    for act in (a.toggle_break, a.break_non_finite, a.break_exception, a.break_finding,
                a.conditions, a.pin):
        debug.addAction(act)
    view = menu.addMenu("&View")
    for act in (a.show_module, a.show_autograd):
        view.addAction(act)
    view.addSeparator()
    for act in (a.fit, a.zoom_in, a.zoom_out, a.expand_all, a.collapse_default, a.fold_runs,
                a.find):
        view.addAction(act)
    win.view_menu = view


class PanelsMenu:
    """View → Panels: a toggle per dock (a closed dock stays closed across runs, as
    the window's layout is kept), and *Reset layout*, back to the first layout."""

    def __init__(self, win: QMainWindow, view_menu: QMenu) -> None:
        self.win = win
        self.menu = view_menu.addMenu("Panels")
        self.reset = QAction("Reset layout", win)
        self.reset.setToolTip("Show every panel where it was at first")
        self.reset.triggered.connect(self.reset_layout)
        self.menu.addAction(self.reset)
        self.menu.addSeparator()
        self.docks: list = []
        self.default_state = win.saveState()

    def add(self, dock, shown_by_default: "bool | Callable[[], bool]" = True) -> None:
        """Offer ``dock``'s toggle; *Reset layout* shows it if ``shown_by_default``
        (or what that callable answers then)."""
        self.docks.append((dock, shown_by_default))
        self.menu.addAction(dock.toggleViewAction())

    def remember_default(self) -> None:
        """The window's layout now is the one *Reset layout* restores."""
        self.default_state = self.win.saveState()

    def reset_layout(self) -> None:
        """Every panel back where it was at first, each default one shown, docked."""
        self.win.restoreState(self.default_state)
        for dock, shown in self.docks:
            dock.setFloating(False)
            if shown() if callable(shown) else shown:
                dock.show()
