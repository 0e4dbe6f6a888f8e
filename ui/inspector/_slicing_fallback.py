"""Stand-in for ``tensorscope.slicing`` (interfaces §7) until it lands.

Same contract: ``parse_slice(text, ndim) -> tuple`` (no eval; ``SliceError``
on bad input) and ``decode_slice(body) -> numpy.ndarray``. Delete this module
and import from ``tensorscope.slicing`` once that exists.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np


class SliceError(ValueError):
    """A slice string that cannot be parsed, with a message for the user."""


_INT = r"[+-]?\d+"
_SLICE_RE = re.compile(rf"^\s*({_INT})?\s*:\s*({_INT})?\s*(?::\s*({_INT})?\s*)?$")


def _parse_entry(entry: str, position: int) -> Any:
    text = entry.strip()
    if text == "...":
        return Ellipsis
    if re.fullmatch(_INT, text):
        return int(text)
    match = _SLICE_RE.match(text)
    if not match:
        raise SliceError(f"entry {position + 1} ({text!r}) is not an index, "
                         f"a start:stop:step slice or '...'")
    start, stop, step = (int(g) if g is not None else None for g in match.groups())
    if step == 0:
        raise SliceError(f"entry {position + 1} ({text!r}) has a zero step")
    return slice(start, stop, step)


def parse_slice(text: str, ndim: int) -> tuple:
    """Parse numpy slice syntax (``"0, :, 3:10"``) for an ``ndim``-d tensor."""
    if not text.strip():
        return ()
    entries = [_parse_entry(e, i) for i, e in enumerate(text.split(","))]
    if sum(e is Ellipsis for e in entries) > 1:
        raise SliceError("only one '...' is allowed")
    if sum(e is not Ellipsis for e in entries) > ndim:
        raise SliceError(f"too many indices: the tensor has {ndim} dimension(s)")
    return tuple(entries)


def decode_slice(body: dict[str, Any]) -> np.ndarray:
    """A GetTensor response body's slice as a numpy array."""
    try:
        dtype = np.dtype(str(body["dtype"])).newbyteorder("<")
        shape = tuple(int(n) for n in body["shape"])
        data = bytes(body["data"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SliceError(f"malformed tensor slice: {exc}") from exc
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        raise SliceError(f"tensor slice holds {len(data)} bytes, shape {list(shape)} "
                         f"of {dtype.name} needs {expected}")
    return np.frombuffer(data, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))
