"""Layout workers and window lifetimes, without the settling fixture's help.

The GUI once deadlocked when the GUI thread destroyed an old window (holding
the GIL, waiting on a Qt lock) while a layout worker that made Qt objects
waited for the GIL. Workers now make no Qt objects, and closing a window or
destroying its graph panel stops and waits for its layout jobs. The tests
here override ``settle_workers_and_deletions`` so that windows die while
jobs run, as a user's do. A deadlock fails the test (pytest-timeout's thread
method dumps every stack and exits) instead of hanging the run.
"""
from __future__ import annotations

import gc
import sys
import threading

import pytest
from PySide6.QtCore import QCoreApplication, QEvent
from shiboken6 import Shiboken

from sample_events import mlp_session, transformer_session
from tensorscope.ui.bridge import Bridge
from tensorscope.ui.graph_items import text_widths
from tensorscope.ui.graph_panel import ModuleLabels
from tensorscope.ui.layout_runner import LayoutCancelled, LayoutRunner, checkpoint, prepare
from tensorscope.ui.main_window import MainWindow
from tensorscope.ui.model.graph_model import GraphModel
from tensorscope.ui.theme import make_theme

pytestmark = pytest.mark.timeout(300, method="thread")


@pytest.fixture(autouse=True)
def settle_workers_and_deletions():
    """Replaces the GUI tests' settling fixture: these tests must cope without it."""
    yield


def _layout_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "tensorscope-layout"]


def _destroy_pending() -> None:
    gc.collect()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    QCoreApplication.processEvents()


def test_windows_closed_destroyed_and_graphs_swapped_while_layouts_run(qtbot):
    kept = []
    for i in range(16):
        w = MainWindow(make_theme(False), settings_key=None)
        w.show()
        w.ingest(transformer_session(16 + i))
        w.refresh()                      # the first layouts start
        for _ in range(i % 4):           # the graph swapped under running jobs
            QCoreApplication.processEvents()
            w.ingest(mlp_session(1) if _ % 2 == 0 else transformer_session(8 + i))
            w.graph.refresh()
        if i % 3 == 0:
            kept.append(w)               # left for a later collection, as the suite did
        elif i % 3 == 1:
            w.close()                    # closed, then deleted
            w.deleteLater()
        else:
            w.deleteLater()              # destroyed without a close
        del w
        if kept and i % 4 == 3:
            kept.pop(0).deleteLater()
        _destroy_pending()
    for w in kept:
        w.close()
        w.deleteLater()
    kept.clear()
    _destroy_pending()
    qtbot.waitUntil(lambda: not _layout_threads(), timeout=60_000)


def test_a_closed_window_has_no_layout_running_and_gets_no_result(qtbot):
    w = MainWindow(make_theme(False), settings_key=None)
    qtbot.addWidget(w)
    w.show()
    w.ingest(transformer_session(40))
    w.refresh()
    assert w.graph.pending_layouts() > 0
    w.close()
    assert not any(r.busy() for r in w.graph.runners.values())
    assert w.graph.pending_layouts() == 0
    QCoreApplication.processEvents()   # a result posted before the close is ignored
    assert not w.graph.views["module"].nodes.cards


def test_every_job_is_answered_once_and_a_newer_one_stops_the_running_one(qtbot):
    bridge = Bridge()
    runner = LayoutRunner(bridge)
    started, answers = threading.Event(), {}
    bridge.layout_finished.connect(lambda token, result: answers.setdefault(token, result))

    def spin() -> str:   # runs until a newer job makes checkpoint() raise
        started.set()
        while True:
            checkpoint()
            threading.Event().wait(0.001)

    first = runner.submit(spin)
    assert started.wait(30)
    second = runner.submit(lambda: "skipped")   # waits; replaced by the third
    third = runner.submit(lambda: "done")
    qtbot.waitUntil(lambda: len(answers) == 3, timeout=30_000)
    assert isinstance(answers[first], LayoutCancelled)
    assert isinstance(answers[second], LayoutCancelled)
    assert answers[third] == "done"
    assert runner.close()
    qtbot.waitUntil(lambda: not _layout_threads(), timeout=30_000)


def test_close_stops_the_running_job_and_nothing_is_posted_after(qtbot):
    bridge = Bridge()
    runner = LayoutRunner(bridge)
    started, stopped, answers = threading.Event(), threading.Event(), []
    bridge.layout_finished.connect(lambda token, result: answers.append(token))

    def spin() -> None:
        started.set()
        try:
            while True:
                checkpoint()
                threading.Event().wait(0.001)
        finally:
            stopped.set()

    runner.submit(spin)
    assert started.wait(30)
    assert runner.close()   # waits for the job, which stops at its checkpoint
    assert stopped.is_set() and not runner.busy()
    runner.submit(lambda: "after close")   # a closed runner starts nothing
    assert not runner.busy()
    QCoreApplication.processEvents()
    assert answers == []


def _owner_module(fn) -> str:
    owner = getattr(fn, "__self__", None)
    owner = owner if isinstance(owner, type) else type(owner)
    return getattr(owner, "__module__", "") or ""


def test_prepare_calls_no_qt_and_leaves_no_qt_object(qtbot):
    """The worker's whole job, on a thread of its own, under a profiler that
    records every call into PySide6/shiboken6."""
    gs = next(m for m in transformer_session(6) if type(m).__name__ == "GraphStructure")
    labels, widths = ModuleLabels(), text_widths()
    qt_calls: list = []
    result: list = []

    def profile(frame, event, arg) -> None:
        if event == "c_call" and _owner_module(arg).startswith(("PySide6", "shiboken6")):
            qt_calls.append(arg)

    def job() -> None:
        sys.setprofile(profile)
        try:
            model = GraphModel("module", type_of=labels.type_of)
            model.set_structure(gs, budget=None)
            model.collapse_to_budget()
            result.append(prepare(model, labels.describe, widths))
        finally:
            sys.setprofile(None)

    before = len(Shiboken.getAllValidWrappers())
    worker = threading.Thread(target=job)
    worker.start()
    worker.join(120)
    assert result and result[0].texts and set(result[0].sizes) == set(result[0].texts)
    assert qt_calls == []
    assert len(Shiboken.getAllValidWrappers()) == before


def _hold_crossing_reduction(monkeypatch, runner: LayoutRunner, until, outcome: list,
                             entered: threading.Event, workers: list) -> None:
    """Make the layout's crossing reduction wait (on the runner's lock, no polling)
    until ``until()`` holds, then run for real; ``outcome`` says how it ended."""
    from tensorscope.ui.model import layout_order
    original = layout_order.reduce_crossings

    def held(*args, **kwargs):
        workers.append(threading.current_thread())
        entered.set()
        with runner._cond:   # close() and submit() notify it
            assert runner._cond.wait_for(until, 60)
        try:
            result = original(*args, **kwargs)
        except LayoutCancelled:
            outcome.append("cancelled")
            raise
        outcome.append("finished")
        return result

    monkeypatch.setattr(layout_order, "reduce_crossings", held)


def test_closing_the_window_stops_a_layout_inside_its_crossing_reduction(qtbot, monkeypatch):
    w = MainWindow(make_theme(False), settings_key=None)
    qtbot.addWidget(w)
    w.show()
    runner = w.graph.runners["module"]
    entered, outcome, workers = threading.Event(), [], []
    _hold_crossing_reduction(monkeypatch, runner, lambda: runner.closed, outcome, entered,
                             workers)
    w.ingest(transformer_session(48))
    w.refresh()
    assert entered.wait(60)          # the job is inside layered_layout
    w.close()                        # the layout goes on only once the close began
    assert outcome == ["cancelled"]  # it stopped at a checkpoint of the layout itself
    assert runner.stopped == 1 and not runner.busy()
    assert not workers[0].is_alive()   # close() joined the worker
    QCoreApplication.processEvents()
    assert not w.graph.views["module"].nodes.cards


def test_a_newer_layout_stops_the_running_one_inside_the_layout(qtbot, monkeypatch):
    gs = next(m for m in transformer_session(24) if type(m).__name__ == "GraphStructure")
    labels, widths = ModuleLabels(), text_widths()
    model = GraphModel("module", type_of=labels.type_of)
    model.set_structure(gs, budget=None)
    model.expand_all()
    bridge = Bridge()
    runner = LayoutRunner(bridge)
    entered, outcome, workers = threading.Event(), [], []
    first_token: list[int] = []
    _hold_crossing_reduction(monkeypatch, runner, lambda: runner.latest > first_token[0],
                             outcome, entered, workers)
    answers: dict[int, object] = {}
    bridge.layout_finished.connect(lambda token, result: answers.setdefault(token, result))
    first_token.append(runner.submit(lambda: prepare(model, labels.describe, widths)))
    assert entered.wait(60)
    with qtbot.waitSignal(bridge.layout_finished, timeout=60_000,
                          check_params_cb=lambda token, _r: token == first_token[0]) as first:
        second = runner.submit(lambda: "newer")
    assert isinstance(first.args[1], LayoutCancelled) and outcome == ["cancelled"]
    assert runner.stopped == 1
    qtbot.waitUntil(lambda: second in answers, timeout=60_000)
    assert answers[second] == "newer"
    assert runner.close() and not workers[0].is_alive()
