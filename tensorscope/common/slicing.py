"""Tensor slices on the wire: a safe numpy-slice parser and the slice decoder.

``parse_slice`` turns ``"0, :, 3:10"`` or ``"..., -1"`` into an index tuple
without ``eval``. ``tensorscope.training.slice_encode.encode_slice`` (training
side) builds a ``GetTensor`` response body; ``decode_slice`` (GUI side) turns
that body into a numpy array.
"""
from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

_INT = re.compile(r"^[+-]?\d+$")
MAX_SLICE_TEXT = 1000

#: transport dtypes a body may declare (numpy names)
TRANSPORT_DTYPES = frozenset({
    "float16", "float32", "float64", "complex64", "complex128", "bool",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
})


class SliceError(ValueError):
    """A slice text or a slice body is invalid (the message says why)."""


def _int(text: str, part: str) -> int:
    if not _INT.match(text):
        raise SliceError(f"{part!r}: {text!r} is not an integer")
    return int(text)


def _parse_part(part: str) -> Any:
    if part == "...":
        return Ellipsis
    if ":" in part:
        bits = [b.strip() for b in part.split(":")]
        if len(bits) > 3:
            raise SliceError(f"{part!r}: a slice has at most start:stop:step")
        start, stop, step = (bits + [""] * 3)[:3]
        step_v = _int(step, part) if step else None
        if step_v is not None and step_v <= 0:
            raise SliceError(f"{part!r}: the step must be positive")
        return slice(_int(start, part) if start else None,
                     _int(stop, part) if stop else None, step_v)
    if not part:
        raise SliceError("empty index between commas")
    return _int(part, part)


def parse_slice(text: str, ndim: int) -> tuple:
    """Parse numpy index syntax for a tensor of ``ndim`` dimensions.

    Accepts integers, ``start:stop:step`` (positive steps) and one ``...``.
    An empty text selects everything. Raises ``SliceError``.
    """
    if len(text) > MAX_SLICE_TEXT:
        raise SliceError("slice text too long")
    text = text.strip().strip("[]()").strip()
    if not text:
        return ()
    parts = [p.strip() for p in text.split(",")]
    if parts and parts[-1] == "" and len(parts) > 1:
        parts.pop()  # a trailing comma, as in "0,"
    index = tuple(_parse_part(p) for p in parts)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise SliceError("at most one '...' is allowed")
    dims = sum(1 for i in index if i is not Ellipsis)
    if dims > ndim:
        raise SliceError(f"{dims} indices given for a tensor with {ndim} dimensions")
    return index


def decode_slice(body: dict[str, Any]) -> np.ndarray:
    """A GetTensor response body → numpy array (complex stays complex)."""
    dtype = body.get("dtype")
    if dtype not in TRANSPORT_DTYPES:
        raise SliceError(f"unsupported transport dtype {dtype!r}")
    shape = body.get("shape")
    data = body.get("data")
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise SliceError(f"bad slice shape {shape!r}")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SliceError("slice data is not bytes")
    dt = np.dtype(dtype).newbyteorder("<")
    if len(data) != math.prod(shape) * dt.itemsize:
        raise SliceError(f"slice data has {len(data)} bytes; shape {shape} of {dtype} "
                         f"needs {math.prod(shape) * dt.itemsize}")
    return np.frombuffer(bytes(data), dtype=dt).reshape(shape).astype(dt.newbyteorder("="))
