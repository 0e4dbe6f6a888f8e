"""Row: 3 unauthenticated connections each declaring 250 MiB frames, dribbling 1 byte
every 4 s. Before: training RSS 308 -> 1,058 MiB (the handshake read up to the 256 MiB
frame cap, its timeout was per recv, and every connection got a thread).

Now at most 64 KiB is read before the handshake succeeds, one deadline covers the
whole handshake, and at most 16 handshakes run at once on either side.
"""
from __future__ import annotations

import socket
import threading
import time

import pytest

from tensorscope.common import transport
from tensorscope.viewer.client import GuiServer
from tensorscope.hooks.gate import Gate
from tensorscope.training.sinks import SinkConfig, build_sinks
from tensorscope.common.protocol import HEADER
from tensorscope.training.session import Session
from tensorscope.common.transport import (HANDSHAKE_LIMIT, MAX_UNAUTHENTICATED, HandshakeError,
                                   connect, new_token, server_handshake)

REFUSALS = (HandshakeError, OSError, transport.ProtocolError)


class _CountingSocket:
    """A real socket that counts what the handshake reads from it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.read = 0

    def recv(self, n: int) -> bytes:
        data = self.sock.recv(n)
        self.read += len(data)
        return data

    def __getattr__(self, name):
        return getattr(self.sock, name)


def _flood(sock: socket.socket, data: bytes) -> threading.Thread:
    def send() -> None:
        try:
            sock.sendall(data)
        except OSError:
            pass  # the server closed on us: expected

    t = threading.Thread(target=send, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("declared", [250 << 20, HANDSHAKE_LIMIT])
def test_at_most_64_kib_is_read_before_authentication(declared):
    a, b = socket.socketpair()
    counted = _CountingSocket(a)
    flood = _flood(b, HEADER.pack(declared) + b"\x00" * (1 << 20))
    with pytest.raises(REFUSALS):
        server_handshake(counted, new_token(), timeout=10)
    a.close()
    b.close()
    flood.join(10)
    assert counted.read <= HANDSHAKE_LIMIT


def test_one_deadline_covers_the_whole_handshake():
    a, b = socket.socketpair()
    stop = threading.Event()

    def dribble() -> None:  # a valid-looking header, then a byte every 50 ms
        try:
            b.sendall(HEADER.pack(200))
            while not stop.wait(0.05):
                b.sendall(b"\x00")
        except OSError:
            pass

    threading.Thread(target=dribble, daemon=True).start()
    box: list[BaseException] = []

    def handshake() -> None:
        try:
            server_handshake(a, new_token(), timeout=1.0)
        except BaseException as exc:  # the outcome under test
            box.append(exc)

    t = threading.Thread(target=handshake, daemon=True)
    t.start()
    t.join(15)  # a per-recv timeout would never fire: the dribble outlasts this wait
    stop.set()
    a.close()
    b.close()
    t.join(5)
    assert box, "the dribbling peer kept the handshake open"
    assert isinstance(box[0], HandshakeError) and "did not complete within" in str(box[0])


def _serve(side: str):
    if side == "training":
        s = Session()
        gate = Gate(s)
        links = build_sinks(s, gate, SinkConfig(listen="127.0.0.1:0", connect=False))
        return links.address, links.token, lambda: (links.close(), gate.close())
    server = GuiServer(lambda conn: conn.close(), discovery=False)
    server.start()
    return server.address, server.token, server.close


def _silent_peer(address) -> socket.socket:
    sock = socket.create_connection(address, timeout=10)
    head = sock.recv(HEADER.size)  # the challenge: this connection holds a handshake slot
    assert len(head) == HEADER.size
    return sock


@pytest.mark.parametrize("side", ["training", "gui"])
def test_unauthenticated_connections_are_capped(side, monkeypatch):
    monkeypatch.setattr(transport, "HANDSHAKE_TIMEOUT", 60.0)  # they would all wait
    address, token, close = _serve(side)
    silent = []
    try:
        silent = [_silent_peer(address) for _ in range(MAX_UNAUTHENTICATED)]
        extra = socket.create_connection(address, timeout=10)
        try:
            assert extra.recv(64) == b"", "a connection beyond the cap got a handshake"
        except ConnectionResetError:
            pass  # closed before anything was read: refused too
        finally:
            extra.close()
        for sock in silent:
            sock.close()
        silent = []
        deadline = time.monotonic() + 30
        while True:  # the slots free up as the server notices the peers left
            try:
                connect(*address, token, timeout=5).close()
                break
            except REFUSALS:
                assert time.monotonic() < deadline, "slots were not released"
                time.sleep(0.1)
    finally:
        for sock in silent:
            sock.close()
        close()
