"""Handshake, discovery files, the sender's drop policy, the GUI client."""
from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading

import pytest

from tensorscope.viewer.client import Connection, GuiServer, attach
from tensorscope.common.events import CallDigest, Dropped, Finding, Hello, StepSummary
from tensorscope.common.protocol import FrameDecoder
from tensorscope.training.sender import Sender
from tensorscope.common.transport import (Channel, HandshakeError, Listener, check_bind_host, connect,
                                   find_gui, new_token, parse_address, write_discovery)


@pytest.fixture
def listener():
    got: list[Channel] = []
    ready = threading.Event()

    def on_channel(ch):
        got.append(ch)
        ready.set()

    lst = Listener(on_channel)
    lst.start()
    yield lst, got, ready
    lst.close()
    for ch in got:
        ch.close()


def test_token_is_32_random_bytes_hex():
    a, b = new_token(), new_token()
    assert len(bytes.fromhex(a)) == 32 and a != b


def test_handshake_with_the_right_token(listener):
    lst, got, ready = listener
    ch = connect(*lst.address, lst.token)
    assert ready.wait(5)
    ch.send(Hello(seq=1, script="s"))
    data = got[0].sock.recv(1 << 16)
    assert got[0].decoder.feed(data)[0].script == "s"
    ch.close()


def test_a_peer_sending_unknown_types_is_said_once_per_type_and_counted_at_the_end(
        listener, caplog):
    from tensorscope.common.protocol import encode_frame
    lst, got, ready = listener
    ch = connect(*lst.address, lst.token)
    assert ready.wait(5)
    seen: list = []
    with caplog.at_level("WARNING"):
        ch.send_bytes(b"".join(encode_frame("from_the_future", i, {}) for i in range(40))
                      + encode_frame("step_summary", 41, {"step": 3}))
        ch.close()
        why = got[0].read_loop(seen.append)
    assert why == "the peer closed the connection"
    assert [m.step for m in seen] == [3]
    lines = [r.getMessage() for r in caplog.records if "from_the_future" in r.getMessage()]
    assert len(lines) == 2, lines
    assert "40 messages of unknown types skipped: 40 'from_the_future'" in lines[-1]


@pytest.mark.parametrize("token", ["00" * 32, "", "zz"])
def test_wrong_or_missing_token_is_refused_and_logged(listener, token, capsys):
    lst, got, ready = listener
    with pytest.raises(HandshakeError):
        connect(*lst.address, token)
    if token == "00" * 32:
        lst._thread.join(0.2)
        for _ in range(50):
            if "refused a connection" in capsys.readouterr().err:
                break
            threading.Event().wait(0.05)
        else:
            pytest.fail("refusal not logged")
    assert not got


def test_silent_client_is_refused_after_timeout(listener, monkeypatch):
    import tensorscope.common.transport as tr

    monkeypatch.setattr(tr, "HANDSHAKE_TIMEOUT", 0.2)
    lst, got, _ = listener
    sock = socket.create_connection(lst.address)
    sock.settimeout(5)
    data = b""
    while True:  # the server sends its challenge, then hangs up on us
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    assert b"_challenge" in data and not got
    sock.close()


def test_client_checks_that_the_server_knows_the_token():
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]

    def fake_server():
        from tensorscope.common.protocol import encode_frame
        conn, _ = srv.accept()
        conn.sendall(encode_frame("_challenge", 0, {"nonce": "ab"}))
        conn.recv(4096)
        conn.sendall(encode_frame("_welcome", 0, {"mac": "00" * 32}))
        conn.close()

    t = threading.Thread(target=fake_server, daemon=True)
    t.start()
    with pytest.raises(HandshakeError, match="could not prove"):
        connect("127.0.0.1", port, new_token())
    t.join(5)
    srv.close()


def test_non_loopback_needs_allow_remote():
    with pytest.raises(PermissionError, match="allow-remote"):
        check_bind_host("0.0.0.0", allow_remote=False)
    check_bind_host("0.0.0.0", allow_remote=True)
    check_bind_host("127.0.0.1", allow_remote=False)
    check_bind_host("::1", allow_remote=False)


def test_parse_address():
    assert parse_address("7007") == ("127.0.0.1", 7007)
    assert parse_address(0) == ("127.0.0.1", 0)
    assert parse_address("10.0.0.1:5") == ("10.0.0.1", 5)
    assert parse_address("[::1]:5") == ("::1", 5)
    with pytest.raises(ValueError):
        parse_address("host:port")


def test_discovery_file_is_private_and_found(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORSCOPE_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("TENSORSCOPE_NO_DISCOVERY", raising=False)
    server = GuiServer(lambda c: None)
    server.start()
    try:
        path = server.discovery_path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        info = find_gui()
        assert info["port"] == server.address[1] and info["token"] == server.token
        assert info["pid"] == os.getpid()
        monkeypatch.setenv("TENSORSCOPE_NO_DISCOVERY", "1")
        assert find_gui() is None
    finally:
        server.close()
    assert not path.exists()


def test_stale_and_foreign_discovery_files_are_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORSCOPE_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("TENSORSCOPE_NO_DISCOVERY", raising=False)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    (tmp_path / f"gui-{dead}.json").write_text(
        f'{{"host": "127.0.0.1", "port": 1, "token": "00", "pid": {dead}}}')
    os.chmod(tmp_path / f"gui-{dead}.json", 0o600)
    path = write_discovery("127.0.0.1", 2, "11")
    os.chmod(path, 0o644)  # readable by others: not trusted
    assert find_gui() is None
    assert not (tmp_path / f"gui-{dead}.json").exists()  # stale file cleaned up


def test_gui_server_and_connection_requests(tmp_path):
    conns: list[Connection] = []
    ready = threading.Event()

    def on_connection(c):
        conns.append(c)
        ready.set()

    server = GuiServer(on_connection, discovery=False)
    server.start()
    env = server.child_env()
    assert env["TENSORSCOPE_TOKEN"] == server.token
    host, port = env["TENSORSCOPE_CONNECT"].split(":")
    training = connect(host, int(port), server.token)  # the script's side
    assert ready.wait(5)
    gui = conns[0]
    got, closed = [], threading.Event()
    gui.start(got.append, lambda why: closed.set())
    training.send(StepSummary(seq=5, step=2))
    from tensorscope.common.events import Pause, Response
    seq = gui.request(Pause())
    dec = FrameDecoder()
    req = []
    while not req:
        req = dec.feed(training.sock.recv(4096))
    assert req[0].TYPE == "pause" and req[0].seq == seq
    answered = threading.Event()
    gui.request(Pause(), lambda r: answered.set())
    training.send(Response(request_seq=seq + 1))
    assert answered.wait(5)
    training.close()
    assert closed.wait(5)
    assert got and got[0].step == 2
    gui.close()
    server.close()


class _SlowChannel:
    """A channel whose peer reads slowly (blocks until released)."""

    def __init__(self):
        self.peer = "slow"
        self.gate = threading.Event()
        self.frames = bytearray()

    def send_bytes(self, data):
        self.gate.wait(10)
        self.frames += data

    def close(self):
        pass


def test_sender_drops_digests_never_essentials_and_reports_the_count():
    ch = _SlowChannel()
    sender = Sender(ch, max_digests=10)
    sender.start()
    summary = StepSummary(seq=2, step=0)
    sender.put(Hello(seq=1))
    for i in range(100):
        sender.put(CallDigest(seq=10 + i, index=i))
    sender.put(Finding(seq=200, kind="k"))
    sender.put(summary)
    assert summary.dropped == 0  # the shared object is untouched
    ch.gate.set()
    assert sender.flush(5)
    sender.close()
    msgs = FrameDecoder().feed(bytes(ch.frames))
    digests = [m for m in msgs if isinstance(m, CallDigest)]
    dropped = [m for m in msgs if isinstance(m, Dropped)]
    summaries = [m for m in msgs if isinstance(m, StepSummary)]
    assert 0 < len(digests) <= 11
    assert dropped and dropped[0].count == 100 - len(digests)
    assert summaries[0].dropped == dropped[0].count
    assert any(isinstance(m, Finding) for m in msgs) and isinstance(msgs[0], Hello)
    assert sender.dropped_total == dropped[0].count


def test_sender_survives_a_dead_peer():
    a, b = socket.socketpair()
    sender = Sender(Channel(a, "dead"))
    sender.start()
    b.close()
    for i in range(2000):  # training goes on; nothing raises
        sender.put(StepSummary(step=i, params=[{"name": "x" * 100}]))
    sender.close(timeout=2)
    assert sender.stopped_reason is not None


def test_attach_refuses_a_bad_address():
    with pytest.raises(OSError):
        attach("127.0.0.1:1", new_token(), timeout=1)


def test_sender_disconnects_a_gui_that_stopped_reading():
    ch = _SlowChannel()  # never released: the GUI is frozen
    closed = threading.Event()
    ch.close = closed.set
    sender = Sender(ch, max_other=5)
    sender.start()
    for i in range(20):  # messages no ring or coalescing bounds pile up to max_other
        sender.put(Hello(script=str(i)))  # returns at once every time
    assert closed.is_set() and "stopped reading" in sender.stopped_reason
    ch.gate.set()
    sender.close(timeout=2)
