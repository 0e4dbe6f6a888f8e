"""The thread bridge: order, batching, backpressure, GUI-thread delivery."""
from __future__ import annotations

import threading

from PySide6.QtCore import QCoreApplication, QThread

from tensorscope.common.events import Response, StepBegin
from tensorscope.ui.bridge import Bridge


def test_messages_arrive_in_order_on_the_gui_thread(qtbot):
    bridge = Bridge(max_backlog=10)
    got, threads = [], set()

    def arrived(conn_id, msgs):
        threads.add(QThread.currentThread() is bridge.thread())
        got.extend((conn_id, m.step) for m in msgs)
    bridge.messages_arrived.connect(arrived)
    responses = []
    bridge.response_arrived.connect(lambda handler, resp: handler(resp))

    def reader():   # plays a connection's reader thread
        for i in range(50):
            bridge.post_message(1, StepBegin(step=i))
        bridge.post_response(responses.append, Response(request_seq=7))
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    qtbot.waitUntil(lambda: len(got) == 50 and bool(responses), timeout=5000)
    t.join(5)
    assert got == [(1, i) for i in range(50)]
    assert threads == {True}
    assert bridge.max_queue <= 11           # the reader waited instead of queueing 50
    assert responses[0].request_seq == 7


def test_closed_and_layout_results_are_delivered(qtbot):
    bridge = Bridge()
    with qtbot.waitSignal(bridge.connection_closed) as closed:
        threading.Thread(target=bridge.post_closed, args=(3, "bye"), daemon=True).start()
    assert closed.args == [3, "bye"]
    with qtbot.waitSignal(bridge.layout_finished) as done:
        bridge.post_layout(9, "result")
    assert done.args == [9, "result"]


def test_a_flood_drains_in_slices_that_let_timers_run(qapp, monkeypatch):
    """Past its time budget the drain yields; a due timer fires before the next slice.

    Runs a real ``QEventLoop.exec()`` (as the window does): there Qt delivers
    events posted meanwhile ahead of timers, so a drain that re-posted itself
    would keep a timer waiting for several slices.
    """
    import time

    import tensorscope.ui.bridge as bridge_mod
    from PySide6.QtCore import QEventLoop, QTimer
    monkeypatch.setattr(bridge_mod, "DRAIN_BUDGET_S", 0.0)   # one batch per slice
    bridge = Bridge()
    slices, total = 20, 128 * 20
    trace: list[str] = []
    loop = QEventLoop()

    def arrived(_conn: int, msgs: list) -> None:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.003:   # the batch's work: longer than the timer's interval
            pass
        trace.append("B")
        if len(trace) - trace.count("t") == slices:
            loop.quit()
    bridge.messages_arrived.connect(arrived)
    probe = QTimer()
    probe.setInterval(1)
    probe.timeout.connect(lambda: trace.append("t"))
    t = threading.Thread(target=lambda: [bridge.post_message(1, StepBegin(step=i))
                                         for i in range(total)], daemon=True)
    t.start()
    t.join(5)
    probe.start()
    QTimer.singleShot(5000, loop.quit)   # a safety net, not a wait
    loop.exec()
    probe.stop()
    run = "".join(trace)
    assert run.count("B") == slices and bridge.pending() == 0, run
    first, last = run.index("B"), run.rindex("B")
    assert max(len(r) for r in run[first:last + 1].split("t")) == 1, run   # a tick after each slice


def test_a_closed_bridge_drops_posts_and_frees_a_waiting_reader(qtbot):
    bridge = Bridge(max_backlog=3)
    got = []
    bridge.messages_arrived.connect(lambda _c, msgs: got.extend(msgs))
    results: list[bool] = []
    waiting = threading.Event()

    def reader() -> None:   # fills the backlog, then waits for room the GUI never makes
        for i in range(3):
            results.append(bridge.post_message(1, StepBegin(step=i)))
        waiting.set()
        results.append(bridge.post_message(1, StepBegin(step=3)))
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    assert waiting.wait(30)
    bridge.close()             # the window closes without draining
    t.join(30)
    assert not t.is_alive() and results == [True, True, True, False]
    assert bridge.closed and bridge.pending() == 0
    assert not bridge.post_response(lambda _r: None, Response(request_seq=1))
    assert not bridge.post_error("late")
    QCoreApplication.processEvents()
    assert got == []           # what was queued before the close is dropped too


def test_posting_to_a_destroyed_bridge_raises_nothing(qtbot):
    from shiboken6 import Shiboken
    bridge = Bridge()
    bridge.post_error("queued before")   # a wake-up is pending when it dies
    Shiboken.delete(bridge)              # as a window's child goes with the window
    assert not Shiboken.isValid(bridge)
    outcomes, errors = [], []

    def late_worker() -> None:
        try:
            outcomes.append(bridge.post_message(1, StepBegin(step=0)))
            outcomes.append(bridge.post_layout(1, "result"))
            outcomes.append(bridge.post_closed(1, "bye"))
        except Exception as exc:   # noqa: BLE001 (the test reports any)
            errors.append(exc)
    t = threading.Thread(target=late_worker, daemon=True)
    t.start()
    t.join(30)
    assert errors == [] and outcomes == [False, False, False]
    assert bridge.closed
