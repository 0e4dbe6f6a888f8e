"""The thread bridge: order, batching, backpressure, GUI-thread delivery."""
from __future__ import annotations

import threading

from PySide6.QtCore import QThread

from tensorscope.events import Response, StepBegin
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
