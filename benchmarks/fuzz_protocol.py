"""Long fuzz of the frame decoder (>= 10,000 hypothesis cases per property).

Run: ``.venv/bin/python benchmarks/fuzz_protocol.py [--cases N]``. Every input
must either decode or raise ``ProtocolError``; anything else is a bug.
"""
from __future__ import annotations

import argparse
import logging
import struct
import time

import msgpack
from hypothesis import HealthCheck, given, settings, strategies as st

from tensorscope.common.events import MESSAGE_TYPES
from tensorscope.common.protocol import FrameDecoder, ProtocolError, encode_frame

JUNK = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats()
    | st.text(max_size=16) | st.binary(max_size=16),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(
        st.text(max_size=8) | st.integers(-2**63, 2**63 - 1), c, max_size=4),
    max_leaves=12)


def _feed(data: bytes, chunk: int) -> None:
    dec = FrameDecoder(max_frame=1 << 16)
    try:
        for off in range(0, len(data), chunk):
            dec.feed(data[off:off + chunk])
    except ProtocolError:
        pass


def run(cases: int) -> None:
    """Run the three properties with ``cases`` examples each."""
    opts = settings(max_examples=cases, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))

    @opts
    @given(st.binary(max_size=512), st.integers(1, 64))
    def random_bytes(data: bytes, chunk: int) -> None:
        _feed(data, chunk)

    @opts
    @given(JUNK, st.integers(1, 64))
    def framed_junk(obj, chunk: int) -> None:
        payload = msgpack.packb(obj, use_bin_type=True)
        _feed(struct.pack(">I", len(payload)) + payload, chunk)

    @opts
    @given(st.sampled_from(sorted(MESSAGE_TYPES) + ["nope", "_auth"]),
           st.integers(-5, 2**40), st.dictionaries(st.text(max_size=12), JUNK, max_size=6),
           st.integers(1, 64))
    def typed_junk(type_: str, seq: int, body: dict, chunk: int) -> None:
        _feed(encode_frame(type_, seq, body), chunk)

    for prop in (random_bytes, framed_junk, typed_junk):
        t0 = time.perf_counter()
        prop()
        print(f"{prop.__name__}: {cases} cases OK in {time.perf_counter() - t0:.1f}s")


def main() -> None:
    logging.getLogger("tensorscope.protocol").setLevel(logging.ERROR)  # unknown types are expected
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    run(parser.parse_args().cases)


if __name__ == "__main__":
    main()
