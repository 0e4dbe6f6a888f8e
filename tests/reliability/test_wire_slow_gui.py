"""Row: a GUI that stops reading for 30 s. Before: disconnected after ~26 s and
everything queued was discarded, step summaries included; in connect mode there was
no reconnect for the rest of the run.

Now what piles up is bounded by kind: digests are dropped, step summaries kept in a
ring, findings and pause state coalesce; a GUI that accepts nothing at all for the
stall limit is given up on with a line on stderr, and in connect mode the training
side looks for a GUI again with backoff.
"""
from __future__ import annotations

import socket
import threading

from tensorscope.viewer.client import GuiServer
from tensorscope.common.events import (STREAM_RING as RING, CallDigest, Finding, Hello, PausedAt,
                                       Resumed, StepSummary)
from tensorscope.hooks.gate import Gate
from tensorscope.training.sinks import SinkConfig, build_sinks
from tensorscope.common.protocol import FrameDecoder
from tensorscope.training.sender import Sender
from tensorscope.training.session import Session
from tensorscope.common.transport import Channel

STEPS = 120_000  # more essential messages than the old cap (100,000) allowed


def _read_all(sock: socket.socket) -> list:
    sock.settimeout(30)
    decoder, msgs = FrameDecoder(), []
    while True:
        data = sock.recv(1 << 20)
        if not data:
            return msgs
        msgs += decoder.feed(data)


def test_a_stalled_gui_loses_only_digests_and_old_summaries():
    a, b = socket.socketpair()
    sender = Sender(Channel(a, "gui"))
    sender.start()
    sender.put(Hello(script="t.py"))
    for step in range(STEPS):  # the GUI reads nothing meanwhile
        sender.put(CallDigest(step=step))
        sender.put(CallDigest(step=step, index=1))
        if step % 100 == 0:
            sender.put(Finding(kind="dead_relu", step=step, module=f"m{step % 7}",
                               count=step))
            sender.put(PausedAt(step=step))
            sender.put(Resumed(step=step))
        sender.put(StepSummary(step=step))
    assert sender.alive, sender.stopped_reason
    assert sender.queued < RING + 4096 + 2000  # bounded, however long the stall
    sender.put(PausedAt(step=STEPS, reason="pause"))
    reader = threading.Thread(target=lambda: box.extend(_read_all(b)), daemon=True)
    box: list = []
    reader.start()  # the GUI reads again
    assert sender.flush(60)
    sender.close()
    a.shutdown(socket.SHUT_WR)  # end of stream for the reader
    reader.join(60)
    a.close()
    b.close()
    summaries = [m.step for m in box if isinstance(m, StepSummary)]
    assert isinstance(box[0], Hello)
    assert summaries[-RING:] == list(range(STEPS - RING, STEPS))
    latest = {}
    for m in box:
        if isinstance(m, Finding):
            latest[m.module] = m.count
    assert sorted(latest) == [f"m{i}" for i in range(7)]  # every finding, at its latest
    assert all(count >= STEPS - 100 * 7 for count in latest.values())
    pauses = [m for m in box if isinstance(m, (PausedAt, Resumed))]
    assert isinstance(pauses[-1], PausedAt) and pauses[-1].step == STEPS
    assert sum(m.dropped for m in box if isinstance(m, StepSummary)) > 0


def test_a_gui_that_accepts_nothing_is_given_up_on_and_told(capsys):
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    stopped = threading.Event()
    sender = Sender(Channel(a, "frozen"), stall_timeout=0.5,
                    on_stopped=lambda reason: stopped.set())
    sender.start()
    for step in range(200):
        sender.put(StepSummary(step=step, params=[{"name": "x" * 1000}]))
    assert stopped.wait(30)
    assert "accepted nothing" in sender.stopped_reason
    assert "stopped streaming to the GUI at frozen" in capsys.readouterr().err
    b.close()


def test_connect_mode_looks_for_the_gui_again(monkeypatch, capsys):
    arrived: list = []
    cond = threading.Condition()

    def on_connection(conn):
        with cond:
            arrived.append(conn)
            cond.notify_all()

    server = GuiServer(on_connection, discovery=False)
    server.start()
    monkeypatch.setenv("TENSORSCOPE_TOKEN", server.token)
    s = Session()
    gate = Gate(s)
    links = build_sinks(s, gate, SinkConfig(connect="%s:%d" % server.address))
    try:
        with cond:
            assert cond.wait_for(lambda: len(arrived) == 1, 30)
        arrived[0].close()  # the GUI drops the connection (crash, stall, tunnel gone)
        with cond:
            assert cond.wait_for(lambda: len(arrived) == 2, 60), "no reconnect"
        assert "looks for a GUI again" in capsys.readouterr().err
    finally:
        links.close()
        gate.close()
        for conn in arrived:
            conn.close()
        server.close()
