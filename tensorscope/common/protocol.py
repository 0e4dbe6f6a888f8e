"""The wire protocol: length-prefixed msgpack frames.

A frame is a 4-byte big-endian unsigned length followed by that many bytes of
msgpack. The msgpack payload is an array ``[version, type, seq, body]``:

* ``version`` is ``PROTOCOL_VERSION`` of the sender;
* ``type`` is a message ``TYPE`` from ``tensorscope.common.events`` (or a handshake
  type starting with ``"_"``);
* ``seq`` is the message number;
* ``body`` is a map of the message's fields (``body_of``), ``seq`` left out.

Nothing received is ever unpickled or evaluated: msgpack decodes only plain
data, and message classes are looked up by name in a fixed registry.
See docs/protocol.md.
"""
from __future__ import annotations

import dataclasses
import logging
import struct
import sys
import types
import typing
from dataclasses import dataclass
from typing import Any, Iterator

import msgpack

from tensorscope.common.events import PROTOCOL_VERSION, Message, message_type

log = logging.getLogger("tensorscope.protocol")

HEADER = struct.Struct(">I")
#: Largest frame accepted by default (a 16M-element complex128 slice fits).
MAX_FRAME = 256 * 1024 * 1024


class ProtocolError(Exception):
    """A frame could not be decoded; the connection that sent it is closed."""


class VersionMismatch(ProtocolError):
    """The peer speaks another protocol version."""

    def __init__(self, theirs: Any, ours: int = PROTOCOL_VERSION) -> None:
        super().__init__(
            f"protocol version mismatch: the peer speaks version {theirs!r}, this "
            f"TensorScope speaks version {ours}; install the same TensorScope "
            f"version on both sides")
        self.theirs = theirs
        self.ours = ours


@dataclass
class Frame:
    """One decoded frame before it is turned into a message."""

    version: int
    type: str
    seq: int
    body: dict[str, Any]


def encode_frame(type_: str, seq: int, body: dict[str, Any]) -> bytes:
    """Encode one frame (length prefix included)."""
    payload = msgpack.packb([PROTOCOL_VERSION, type_, seq, body], use_bin_type=True)
    return HEADER.pack(len(payload)) + payload


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def body_of(msg: Message) -> dict[str, Any]:
    """The message's fields but ``seq``, as a map (values are already msgpack-native)."""
    names = _FIELD_NAMES.get(type(msg))
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(msg) if f.name != "seq")
        _FIELD_NAMES[type(msg)] = names
    return {name: getattr(msg, name) for name in names}


#: message types already reported as lossily encoded (one note per type and process)
_LOSSY_NOTED: set[str] = set()


def lossy_value(value: Any) -> Any:
    """``value`` made msgpack-safe: strings with lone surrogates (undecodable bytes
    from ``sys.argv`` or file names) escaped as ``\\xNN``, integers too large for
    msgpack as strings, anything else not plain data as its ``repr``."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            try:
                return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            except UnicodeEncodeError:
                return value.encode("utf-8", "backslashreplace").decode("ascii")
    if value is None or isinstance(value, bool):
        return None if value is None else bool(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, int):
        return int(value) if -(2**63) <= value < 2**64 else str(value)
    if isinstance(value, dict):
        return {lossy_value(k) if isinstance(k, (str, int)) else repr(k): lossy_value(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [lossy_value(v) for v in value]
    return repr(value)


def pack_body(type_: str, body: dict[str, Any]) -> bytes:
    """msgpack bytes of a message body; never raises for a body made of Python values.

    A body that msgpack refuses (a string with lone surrogates, an integer out of
    range, an object that is not plain data) is encoded lossily instead (see
    ``lossy_value``) with a ``_lossy`` field saying why; the first time per message type
    a note goes to stderr. The note field is ignored by decoders.
    """
    try:
        return msgpack.packb(body, use_bin_type=True)
    except (ValueError, TypeError, OverflowError) as exc:  # UnicodeEncodeError is a ValueError
        why = f"{type(exc).__name__}: {exc}"
        safe = lossy_value(body)
        safe["_lossy"] = lossy_value(why)
        if type_ not in _LOSSY_NOTED:
            _LOSSY_NOTED.add(type_)
            print(f"tensorscope: a {type_!r} message could not be encoded as it is ({why}); "
                  f"it was encoded lossily (undecodable characters escaped as \\xNN)",
                  file=sys.stderr)
        try:
            return msgpack.packb(safe, use_bin_type=True)
        except (ValueError, TypeError, OverflowError):  # e.g. an int key out of range
            return msgpack.packb({"_lossy": safe["_lossy"]}, use_bin_type=True)


def encode(msg: Message) -> bytes:
    """Encode a message as one frame (lossily if it must be: see ``pack_body``)."""
    try:
        return encode_frame(msg.TYPE, msg.seq, body_of(msg))
    except (ValueError, TypeError, OverflowError):
        head = b"".join(msgpack.packb(x) for x in (PROTOCOL_VERSION, str(msg.TYPE), msg.seq))
        payload = b"\x94" + head + pack_body(msg.TYPE, body_of(msg))  # [version, type, seq, body]
        return HEADER.pack(len(payload)) + payload


def _unpack(payload: bytes | bytearray) -> Frame:
    try:
        obj = msgpack.unpackb(payload, raw=False, strict_map_key=False,
                              use_list=True)
    except Exception as exc:  # msgpack raises several exception types
        raise ProtocolError(f"malformed frame: not valid msgpack ({exc})") from exc
    if not isinstance(obj, list) or len(obj) != 4:
        raise ProtocolError("malformed frame: expected [version, type, seq, body]")
    version, type_, seq, body = obj
    if version != PROTOCOL_VERSION:
        raise VersionMismatch(version)
    if not isinstance(type_, str) or not isinstance(seq, int) or isinstance(seq, bool):
        raise ProtocolError("malformed frame: type must be a string and seq an integer")
    if not isinstance(body, dict):
        raise ProtocolError(f"malformed frame: body of {type_!r} is not a map")
    return Frame(version, type_, seq, body)


#: wire value types a field's declared Python type accepts (an int is a valid float)
_WIRE_TYPES: dict[Any, tuple[type, ...]] = {
    int: (int,), float: (int, float), str: (str,), bool: (bool,), bytes: (bytes,),
    list: (list,), dict: (dict,), type(None): (type(None),),
}
_FIELD_TYPES: dict[type, dict[str, tuple[type, ...] | None]] = {}


def _wire_types(declared: Any) -> tuple[type, ...] | None:
    """The wire types of a declared field type (None: any value, e.g. ``Any``)."""
    if typing.get_origin(declared) in (typing.Union, types.UnionType):
        allowed: tuple[type, ...] = ()
        for part in typing.get_args(declared):
            part_types = _wire_types(part)
            if part_types is None:
                return None
            allowed += part_types
        return allowed
    return _WIRE_TYPES.get(typing.get_origin(declared) or declared)


def _field_types(cls: type[Message]) -> dict[str, tuple[type, ...] | None]:
    """Per field, the Python types its wire value may have (None: anything)."""
    cached = _FIELD_TYPES.get(cls)
    if cached is None:
        hints = typing.get_type_hints(cls)
        cached = {f.name: _wire_types(hints[f.name])
                  for f in dataclasses.fields(cls) if f.name != "seq"}
        _FIELD_TYPES[cls] = cached
    return cached


def to_message(frame: Frame, skipped: dict[str, int] | None = None) -> Message | None:
    """The message a frame carries; None (logged) for an unknown type.

    With ``skipped``, unknown types are counted there per type name and only the
    first of each type is logged (a stream from a newer TensorScope says so once,
    not once per message). Field values of the wrong wire type raise ``ProtocolError``.
    """
    cls = message_type(frame.type)
    if cls is None:
        if skipped is None:
            log.warning("skipping a message of unknown type %r (seq %d)", frame.type, frame.seq)
        else:
            if frame.type not in skipped:
                log.warning("skipping messages of unknown type %r (first at seq %d; from a "
                            "newer TensorScope?); further ones are counted, not logged",
                            frame.type, frame.seq)
            skipped[frame.type] = skipped.get(frame.type, 0) + 1
        return None
    types = _field_types(cls)
    fields = {}
    for name, value in frame.body.items():
        if name not in types:
            continue  # a field from a newer version (or a non-name key): ignored
        allowed = types[name]
        if allowed is not None and not isinstance(value, allowed):
            raise ProtocolError(f"malformed {frame.type!r} message: field {name!r} is "
                                f"{type(value).__name__}")
        fields[name] = value
    try:
        msg = cls(**fields)
    except Exception as exc:
        raise ProtocolError(f"malformed {frame.type!r} message: {exc}") from exc
    msg.seq = frame.seq
    return msg


def decode(data: bytes) -> Message | None:
    """Decode exactly one whole frame (prefix included)."""
    decoder = FrameDecoder()
    msgs = decoder.feed(data)
    if decoder.pending:
        raise ProtocolError("trailing or incomplete bytes after the frame")
    if decoder.frames_seen != 1:
        raise ProtocolError(f"expected one frame, got {decoder.frames_seen}")
    return msgs[0] if msgs else None


class FrameDecoder:
    """Incremental decoder: feed it bytes as they arrive, get whole frames.

    After a ``ProtocolError`` the stream is out of sync and the decoder must
    be discarded (the connection closed).
    """

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self._pos = 0  # start of the first unread frame in _buf
        self.frames_seen = 0
        #: messages of unknown types skipped so far, per type name (each logged once)
        self.skipped: dict[str, int] = {}

    def skipped_summary(self) -> str | None:
        """One line counting the messages of unknown types skipped (None: none was)."""
        if not self.skipped:
            return None
        total = sum(self.skipped.values())
        kinds = ", ".join(f"{n} {name!r}" for name, n in sorted(
            self.skipped.items(), key=lambda kv: -kv[1]))
        return f"{total} message{'s' if total != 1 else ''} of unknown types skipped: {kinds}"

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        return len(self._buf) - self._pos

    def feed_frames(self, data: bytes) -> Iterator[Frame]:
        """Add ``data`` and yield every whole frame now available.

        Frames not consumed (the caller stopped iterating) stay buffered.
        """
        self._buf += data
        while True:
            frame = self._next()
            if frame is None:
                return
            yield frame

    def _next(self) -> Frame | None:
        buf = self._buf
        if self._pos and self._pos * 2 > len(buf):  # compact now and then, not per frame
            del buf[:self._pos]
            self._pos = 0
        pos = self._pos
        if len(buf) - pos < HEADER.size:
            return None
        (length,) = HEADER.unpack_from(buf, pos)
        if length > self.max_frame:
            raise ProtocolError(f"frame of {length} bytes exceeds the limit of "
                                f"{self.max_frame} bytes")
        end = pos + HEADER.size + length
        if len(buf) < end:
            return None
        self._pos = end
        frame = _unpack(buf[pos + HEADER.size:end])
        self.frames_seen += 1
        return frame

    def feed(self, data: bytes) -> list[Message]:
        """Add ``data`` and return the messages it completes (unknown types skipped)."""
        out = []
        for frame in self.feed_frames(data):
            msg = to_message(frame, self.skipped)
            if msg is not None:
                out.append(msg)
        return out
