"""Row: a non-UTF-8 script argument (`data_\\xe9t\\xe9.csv`).

Before: the recording kept 0 messages (`UnicodeEncodeError ... surrogates not
allowed`) and the sender thread died while it still reported itself alive, so an
attached GUI received nothing. Now such a message is encoded lossily with a note,
and neither the writer nor the sender dies.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys

from tensorscope.common.events import CallDigest, Hello, StepSummary
from tensorscope.hooks.gate import Gate
from tensorscope.training.live import LiveHub
from tensorscope.common.protocol import FrameDecoder
from tensorscope.training.recording import Recorder
from tensorscope.viewer.reader import SessionReader
from tensorscope.training.sender import Sender
from tensorscope.training.session import Session
from tensorscope.common.transport import Channel

ARG = os.fsdecode(b"data_\xe9t\xe9.csv")  # what sys.argv holds for that byte string


def _emit_run(s: Session) -> None:
    s.emit(Hello(script="train.py", argv=[ARG]))
    for step in range(3):
        s.emit(CallDigest(step=step, path=ARG))
        s.emit(StepSummary(step=step, loss=1.0))


def test_recording_and_streaming_survive_an_undecodable_argument(tmp_path, capsys):
    path = tmp_path / "run.tscope"
    a, b = socket.socketpair()
    s = Session()
    gate = Gate(s)
    hub = LiveHub(gate)
    s.add_sink(Recorder(str(path)))
    s.add_sink(hub)
    hub.attach(Channel(a, "gui"))
    _emit_run(s)
    sender = hub._peers[0].sender
    assert sender.flush(10) and sender.alive
    s.close()
    b.settimeout(10)
    decoder, got = FrameDecoder(), []
    while len([m for m in got if isinstance(m, StepSummary)]) < 3:
        data = b.recv(1 << 16)
        assert data, f"the stream ended early: {[m.TYPE for m in got]}"
        got += decoder.feed(data)
    b.close()
    gate.close()
    hello = got[0]
    assert isinstance(hello, Hello) and hello.argv == ["data_\\xe9t\\xe9.csv"]
    with SessionReader(str(path)) as r:
        assert r.steps == [0, 1, 2] and r.hello.argv == ["data_\\xe9t\\xe9.csv"]
    assert "encoded lossily" in capsys.readouterr().err


class _BrokenChannel:
    """A channel whose writes fail with something other than OSError (a bug)."""

    peer = "broken"

    def __init__(self) -> None:
        self.closed = False

    def send_bytes(self, data: bytes) -> None:
        raise RuntimeError("boom")

    def close(self) -> None:
        self.closed = True


def test_a_sender_that_fails_closes_its_connection_and_says_so(capsys):
    ch = _BrokenChannel()
    sender = Sender(ch)
    sender.start()
    sender.put(Hello(script="x"))
    sender.close(timeout=5)
    assert ch.closed and not sender.alive
    assert "sending thread failed" in sender.stopped_reason
    assert "stopped streaming" in capsys.readouterr().err
    sender.put(StepSummary(step=1))  # still returns at once, queues nothing
    assert sender.queued == 0


def test_a_run_with_an_undecodable_argument_records_every_step(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, torch\n"
        "m = torch.nn.Linear(2, 1); opt = torch.optim.SGD(m.parameters(), 0.1)\n"
        "for _ in range(3):\n"
        "    opt.zero_grad(); m(torch.ones(4, 2)).sum().backward(); opt.step()\n"
        "print(len(sys.argv))\n")
    path = tmp_path / "run.tscope"
    env = dict(os.environ, TENSORSCOPE_NO_DISCOVERY="1")
    out = subprocess.run([sys.executable, "-m", "tensorscope", "run", "--headless", "--record",
                          str(path), str(script), b"data_\xe9t\xe9.csv"], capture_output=True,
                         env=env, timeout=240, cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    with SessionReader(str(path)) as r:
        assert len(r.steps) == 3 and r.hello.argv == ["data_\\xe9t\\xe9.csv"]
