"""Item 9: the request reader never blocks. Before: a get-tensor request held the
connection's reader until the training thread had sliced the tensor (up to 60 s), so
a Pause or Continue sent after it waited too. Now the job posts its own response."""
from __future__ import annotations

import threading

import numpy as np

from tensorscope.viewer.client import attach
from tensorscope.common.events import Continue, GetTensor, Pause, PausedAt, Response
from tensorscope.common.tensors import tensor_ref
from tensorscope.hooks.gate import Gate
from tensorscope.training.sinks import SinkConfig, build_sinks
from tensorscope.training.session import Session


def test_continue_is_answered_while_a_slice_is_being_prepared(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORSCOPE_RUNTIME_DIR", str(tmp_path / "run"))
    s = Session()
    gate = Gate(s)
    links = build_sinks(s, gate, SinkConfig(listen="127.0.0.1:0", connect=False))
    slicing, release = threading.Event(), threading.Event()

    def slow_slice(req):  # stands in for preparing a large slice on the training thread
        slicing.set()
        release.wait(60)
        return Response(body={"values": "ready"})

    monkeypatch.setattr(gate, "_slice", slow_slice)
    paused = threading.Event()
    conn = attach("%s:%d" % links.address, links.token)
    conn.start(lambda m: paused.set() if isinstance(m, PausedAt) else None, lambda r: None)
    training = threading.Thread(target=lambda: gate.at_module(
        "forward", step=0, root=0, path="fc", call=0, type="Linear",
        tensors={"out": np.zeros(3)}), daemon=True)
    try:
        assert conn.call(Pause(), timeout=20).ok
        training.start()
        assert paused.wait(20)
        got: dict[str, Response] = {}
        cond = threading.Condition()

        def answer(name):
            def store(resp):
                with cond:
                    got[name] = resp
                    cond.notify_all()
            return store

        conn.request(GetTensor(ref=tensor_ref(0, 0, "fc", 0, "out")), answer("tensor"))
        assert slicing.wait(20), got
        conn.request(Continue(), answer("continue"))
        with cond:
            assert cond.wait_for(lambda: "continue" in got, 20), "Continue waited for the slice"
            assert "tensor" not in got
        release.set()
        with cond:
            assert cond.wait_for(lambda: "tensor" in got, 20)
        assert got["continue"].ok and got["tensor"].body == {"values": "ready"}
        training.join(20)
        assert not training.is_alive()
    finally:
        release.set()
        conn.close()
        links.close()
        gate.close()
