"""build_sinks in-process: replay on attach, successive attaches, release, recording."""
from __future__ import annotations

import threading

import pytest

from tensorscope.viewer.client import GuiServer, attach
from tensorscope.common.events import (Finding, GraphStructure, Hello, ModuleTree, Pause, PausedAt,
                                StepSummary)
from tensorscope.hooks.gate import Gate
from tensorscope.training.sinks import SinkConfig, build_sinks
from tensorscope.viewer.reader import SessionReader
from tensorscope.training.session import Session


class Inbox:
    def __init__(self):
        self.msgs, self.cond = [], threading.Condition()

    def add(self, m):
        with self.cond:
            self.msgs.append(m)
            self.cond.notify_all()

    def wait(self, pred, timeout=10):
        with self.cond:
            assert self.cond.wait_for(lambda: pred(self.msgs), timeout), \
                [m.TYPE for m in self.msgs]


@pytest.fixture
def served():
    s = Session()
    g = Gate(s)
    links = build_sinks(s, g, SinkConfig(listen="127.0.0.1:0", connect=False))
    yield s, g, links
    links.close()
    g.close()


def _attach(links):
    conn = attach("%s:%d" % links.address, links.token)
    inbox = Inbox()
    conn.start(inbox.add, lambda r: None)
    return conn, inbox


def test_attach_replays_then_streams(capsys, served):
    s, g, links = served
    err = capsys.readouterr().err
    assert "listening on 127.0.0.1:%d" % links.address[1] in err
    assert links.token not in err and str(links.token_file) in err
    s.emit(Hello(script="t"))
    s.emit(ModuleTree(roots=[{"root": 0}]))
    s.emit(GraphStructure(kind="module", hash="a"))
    s.emit(GraphStructure(kind="module", hash="b"))
    s.emit(GraphStructure(kind="autograd", hash="c"))
    for i in range(300):
        s.emit(StepSummary(step=i))
    s.emit(Finding(kind="k", module="m", count=1))
    s.emit(Finding(kind="k", module="m", count=5))
    conn, inbox = _attach(links)
    inbox.wait(lambda ms: any(isinstance(m, Finding) for m in ms))
    types = [type(m) for m in inbox.msgs]
    assert types[:4] == [Hello, ModuleTree, GraphStructure, GraphStructure]
    assert [m.hash for m in inbox.msgs[2:4]] == ["b", "c"]
    steps = [m.step for m in inbox.msgs if isinstance(m, StepSummary)]
    assert steps == list(range(44, 300))  # the ring buffer
    assert [m.count for m in inbox.msgs if isinstance(m, Finding)] == [5]
    s.emit(StepSummary(step=300))
    inbox.wait(lambda ms: ms[-1].TYPE == "step_summary" and ms[-1].step == 300)
    conn.close()


def test_successive_attaches_and_release_on_last_detach(served):
    s, g, links = served
    for _ in range(3):
        conn, inbox = _attach(links)
        assert conn.call(Pause()).ok
        assert g.armed
        conn.close()
        for _ in range(100):
            if not g._pause_requested:
                break
            threading.Event().wait(0.02)
        assert not g._pause_requested  # released when the GUI left
    assert g.interactive  # listen mode: a GUI may come back


def test_paused_state_is_replayed(served):
    s, g, links = served
    conn, inbox = _attach(links)
    conn.call(Pause())
    t = threading.Thread(target=g.at_step_boundary, args=(2,), daemon=True)
    t.start()
    inbox.wait(lambda ms: any(isinstance(m, PausedAt) for m in ms))
    conn2, inbox2 = _attach(links)
    inbox2.wait(lambda ms: any(isinstance(m, PausedAt) for m in ms))
    conn.close()  # one GUI left, the other remains: still paused
    assert t.is_alive() and g.paused is not None
    conn2.close()
    t.join(5)
    assert not t.is_alive()


def test_record_and_connect_via_environment(tmp_path, monkeypatch):
    inbox = Inbox()
    conns = []
    server = GuiServer(lambda c: (conns.append(c), c.start(inbox.add, lambda r: None)),
                       discovery=False)
    server.start()
    for k, v in server.child_env().items():
        monkeypatch.setenv(k, v)
    s = Session()
    g = Gate(s)
    links = build_sinks(s, g, SinkConfig(record=str(tmp_path / "r.tscope"), connect=True))
    s.emit(Hello(script="x"))
    s.emit(StepSummary(step=0, loss=2.0))
    inbox.wait(lambda ms: len(ms) == 2)
    assert g.interactive
    links.close()
    with SessionReader(str(tmp_path / "r.tscope")) as r:
        assert r.steps == [0] and r.hello.script == "x"
    for c in conns:
        c.close()
    server.close()


def test_no_gui_found_is_said_once(monkeypatch, capsys):
    monkeypatch.delenv("TENSORSCOPE_CONNECT", raising=False)
    monkeypatch.setenv("TENSORSCOPE_NO_DISCOVERY", "1")
    from tensorscope.training import live

    monkeypatch.setitem(live._said, "no_gui", False)
    for _ in range(3):   # a watch per epoch or per stage: said once per process
        s = Session()
        links = build_sinks(s, Gate(s), SinkConfig(connect=True))
        links.close()
    assert capsys.readouterr().err.count("no TensorScope GUI found") == 1


def test_unreachable_gui_is_reported_and_training_goes_on(monkeypatch, capsys):
    monkeypatch.setenv("TENSORSCOPE_TOKEN", "ab" * 32)
    s = Session()
    links = build_sinks(s, Gate(s), SinkConfig(connect="127.0.0.1:1"))
    assert "could not connect to the TensorScope GUI at 127.0.0.1:1" in capsys.readouterr().err
    s.emit(StepSummary(step=0))
    links.close()


def test_remote_bind_needs_allow_remote():
    s = Session()
    with pytest.raises(PermissionError):
        build_sinks(s, Gate(s), SinkConfig(listen="0.0.0.0:0", connect=False))
    links = build_sinks(s, Gate(s), SinkConfig(listen="0.0.0.0:0", allow_remote=True, connect=False))
    links.close()


def test_logged_scalars_are_replayed_to_a_gui_that_attaches_late():
    from tensorscope.common.events import Scalars
    from tensorscope.training.live import LiveHub

    hub = LiveHub(Gate(Session()))
    hub.handle(Hello(script="t.py"))
    for step in range(3):
        hub.handle(Scalars(step=step, source="transformers", values={"loss": 1.0 / (step + 1)}))
    replayed = [m for m in hub.replay() if isinstance(m, Scalars)]
    assert [m.step for m in replayed] == [0, 1, 2] and replayed[0].values == {"loss": 1.0}
