"""Frames: round trips, the incremental decoder, and every kind of bad frame."""
from __future__ import annotations

import logging
import struct

import msgpack
import pytest
from hypothesis import given, settings, strategies as st

from tensorscope.common.events import (MESSAGE_TYPES, CallDigest, GetTensor, Hello, Response,
                                StepSummary)
from tensorscope.common.protocol import (FrameDecoder, ProtocolError, VersionMismatch, decode, encode,
                                  encode_frame)


def _raw(obj) -> bytes:
    payload = msgpack.packb(obj, use_bin_type=True)
    return struct.pack(">I", len(payload)) + payload


@pytest.mark.parametrize("cls", sorted(MESSAGE_TYPES.values(), key=lambda c: c.TYPE))
def test_every_message_type_round_trips(cls):
    msg = cls()
    msg.seq = 42
    out = decode(encode(msg))
    assert type(out) is cls and out == msg and out.seq == 42


def test_fields_survive_including_bytes_and_nested():
    resp = Response(seq=3, request_seq=9, body={"data": b"\x00\x01\xff", "shape": [1, 3],
                                                 "stats": {"min": -1.5}})
    assert decode(encode(resp)) == resp
    digest = CallDigest(step=7, path="features.6", stats={"nan": 0.0}, grad_norm=None)
    assert decode(encode(digest)) == digest


def test_decoder_is_incremental_byte_by_byte():
    msgs = [Hello(seq=1, script="train.py", argv=["a"]), StepSummary(seq=2, step=1, loss=0.5),
            GetTensor(seq=3, ref="0:fc#1/out", slice="0, :")]
    data = b"".join(encode(m) for m in msgs)
    dec = FrameDecoder()
    got = []
    for i in range(len(data)):
        got += dec.feed(data[i:i + 1])
    assert got == msgs and dec.pending == 0


def test_unknown_type_is_logged_and_skipped(caplog):
    data = encode_frame("from_the_future", 5, {"x": 1}) + encode(StepSummary(seq=6, step=2))
    with caplog.at_level(logging.WARNING, logger="tensorscope.protocol"):
        got = FrameDecoder().feed(data)
    assert got == [StepSummary(seq=6, step=2)]
    assert "from_the_future" in caplog.text


def test_a_stream_of_unknown_types_is_logged_once_per_type_and_counted(caplog):
    data = b"".join(encode_frame(t, i, {"x": 1}) for i, t in enumerate(
        ["from_the_future"] * 50 + ["other_future"] * 3))
    dec = FrameDecoder()
    with caplog.at_level(logging.WARNING, logger="tensorscope.protocol"):
        assert dec.feed(data) == []
    assert len(caplog.records) == 2
    assert dec.skipped == {"from_the_future": 50, "other_future": 3}
    assert dec.skipped_summary() == ("53 messages of unknown types skipped: "
                                     "50 'from_the_future', 3 'other_future'")
    assert FrameDecoder().skipped_summary() is None


def test_unknown_fields_are_ignored():
    msgs = FrameDecoder().feed(encode_frame("step_summary", 1, {"step": 4, "new_field": [1]}))
    assert msgs[0].step == 4
    (msg,) = FrameDecoder().feed(_raw([1, "step_summary", 2, {1: 2, "seq": 9, "step": 5}]))
    assert (msg.step, msg.seq) == (5, 2)


def test_frames_left_unread_stay_buffered():
    dec = FrameDecoder()
    frames = dec.feed_frames(encode(Hello(seq=1)) + encode(Hello(seq=2)))
    assert next(frames).seq == 1
    assert [m.seq for m in dec.feed(b"")] == [2]


def test_version_mismatch_names_both_versions():
    with pytest.raises(VersionMismatch, match=r"version 99.*version 1"):
        FrameDecoder().feed(_raw([99, "hello", 1, {}]))


def test_oversized_frame_is_refused_before_buffering():
    dec = FrameDecoder(max_frame=1000)
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        dec.feed(struct.pack(">I", 10**6) + b"x")


@pytest.mark.parametrize("bad", [
    b"\xc1",                        # never-used msgpack byte
    msgpack.packb({"a": 1}),        # not an array
    msgpack.packb([1, "hello", 1]),  # too short
    msgpack.packb([1, 5, 1, {}]),    # type not a string
    msgpack.packb([1, "hello", "1", {}]),  # seq not an int
    msgpack.packb([1, "hello", 1, [1, 2]]),  # body not a map
])
def test_malformed_frames_raise_protocol_error(bad):
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(struct.pack(">I", len(bad)) + bad)


@pytest.mark.parametrize("body", [{"step": "three"}, {"loss": "x"}, {"params": {}},
                                  {"dropped": None}, {"kind": 3}])
def test_field_values_of_the_wrong_type_raise_protocol_error(body):
    with pytest.raises(ProtocolError, match="field"):
        FrameDecoder().feed(encode_frame("step_summary", 1, body))


def test_optional_fields_accept_none_and_ints_for_floats():
    (msg,) = FrameDecoder().feed(encode_frame("step_summary", 1, {"loss": None, "duration": 2}))
    assert msg.loss is None and msg.duration == 2


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_random_bytes_never_escape_as_other_errors(data):
    dec = FrameDecoder(max_frame=4096)
    try:
        dec.feed(data)
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(sorted(MESSAGE_TYPES)), max_size=5),
       st.recursive(st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.text(max_size=8)
                    | st.binary(max_size=8),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c,
                                                                       max_size=3),
                    max_leaves=8))
def test_fuzz_wellformed_frames_with_junk_bodies(types, junk):
    data = b"".join(encode_frame(t, i, {"step": junk, "path": junk}) for i, t in enumerate(types))
    try:
        FrameDecoder().feed(data)
    except ProtocolError:
        pass
