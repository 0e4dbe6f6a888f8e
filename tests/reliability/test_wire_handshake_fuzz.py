"""Row: a non-ASCII MAC in the handshake. Before: a `TypeError` traceback in the
handshake thread instead of a refusal. Plus a fuzz of the handshake itself (both
ends), not only of the frame decoder: every input ends in a clean refusal."""
from __future__ import annotations

import socket
import threading

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tensorscope.common.events import PROTOCOL_VERSION
from tensorscope.common.protocol import FrameDecoder, ProtocolError, encode_frame
from tensorscope.common.transport import (HandshakeError, Listener, client_handshake, new_token,
                                   server_handshake)

REFUSALS = (HandshakeError, ProtocolError, OSError)
FUZZ = settings(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture
def thread_errors(monkeypatch):
    errors: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    return errors


def _frames(sock: socket.socket):
    decoder = FrameDecoder()
    while True:
        data = sock.recv(1 << 16)
        if not data:
            return
        yield from decoder.feed_frames(data)


@pytest.mark.parametrize("mac", ["é" * 64, "\u0000" * 64, "zz" * 32, 12345, None, "ab"])
def test_a_garbage_mac_is_refused_cleanly(mac, thread_errors):
    got = threading.Event()
    lst = Listener(lambda ch: got.set())
    lst.start()
    try:
        sock = socket.create_connection(lst.address, timeout=10)
        frames = _frames(sock)
        assert next(frames).type == "_challenge"
        sock.sendall(encode_frame("_auth", 0, {"mac": mac, "nonce": "ab" * 16}))
        reply = next(frames, None)
        sock.close()
    finally:
        lst.close()
    assert reply is not None and reply.type == "_refused"
    assert not got.is_set() and thread_errors == []


def _server_against(data: bytes):
    """Run the listening side's handshake against a peer that sends ``data``."""
    a, b = socket.socketpair()
    try:
        b.sendall(data)
        b.shutdown(socket.SHUT_WR)
        try:
            server_handshake(a, new_token(), timeout=2.0)
        except REFUSALS:
            return "refused"
        return "accepted"
    finally:
        a.close()
        b.close()


@FUZZ
@given(st.binary(max_size=2048))
def test_fuzz_the_listening_side_with_raw_bytes(data):
    assert _server_against(data) == "refused"


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats() | st.text(max_size=80)
    | st.binary(max_size=80),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12)


@FUZZ
@given(st.sampled_from(["_auth", "_welcome", "_challenge", "hello", ""]),
       st.dictionaries(st.sampled_from(["mac", "nonce", "reason", "x"]), _values, max_size=3),
       st.sampled_from([PROTOCOL_VERSION, PROTOCOL_VERSION + 1, "1", None]))
def test_fuzz_the_listening_side_with_wellformed_frames(type_, body, version):
    payload = msgpack.packb([version, type_, 0, body], use_bin_type=True)
    assert _server_against(len(payload).to_bytes(4, "big") + payload) == "refused"


@FUZZ
@given(st.binary(max_size=2048), st.booleans())
def test_fuzz_the_connecting_side_with_a_hostile_server(data, challenge_first):
    a, b = socket.socketpair()
    try:
        if challenge_first:
            b.sendall(encode_frame("_challenge", 0, {"nonce": "ab" * 16}))
        b.sendall(data)
        b.shutdown(socket.SHUT_WR)
        with pytest.raises(REFUSALS):
            client_handshake(a, new_token(), timeout=2.0)
    finally:
        a.close()
        b.close()
