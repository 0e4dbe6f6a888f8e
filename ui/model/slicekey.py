"""Slice keys: parsed, normalised and formatted slice strings for a known shape.

A *key* is a tuple with one entry per dimension: an ``int`` (a fixed index,
never negative) or a ``slice`` (a dimension that is kept). Keys round-trip
through text: ``format_key(parse_key(text, shape))`` is the canonical text.
"""
from __future__ import annotations

import math
from typing import Sequence, Union

import numpy as np

from tensorscope.common.slicing import SliceError, parse_slice

Entry = Union[int, slice]
Key = tuple

FULL = slice(None)

__all__ = ["SliceError", "Key", "parse_key", "normalize_key", "format_key", "kept_dims",
           "entry_indices", "fit_stride", "FULL"]


def _normalize_int(value: int, dim: int, size: int) -> int:
    index = value + size if value < 0 else value
    if not 0 <= index < size:
        raise SliceError(f"index {value} is out of range for dim {dim} of size {size}")
    return index


def normalize_key(parsed: Sequence, shape: Sequence[int]) -> Key:
    """Expand ``...``, pad with ``:`` and bound-check ``parsed`` for ``shape``."""
    entries = list(parsed)
    if any(e is None for e in entries):
        raise SliceError("new axes (None) are not supported in the inspector")
    if Ellipsis in entries:
        at = entries.index(Ellipsis)
        fill = len(shape) - (len(entries) - 1)
        entries[at:at + 1] = [FULL] * max(fill, 0)
    if len(entries) > len(shape):
        raise SliceError(f"too many indices: the tensor has {len(shape)} dimension(s)")
    entries += [FULL] * (len(shape) - len(entries))
    key: list[Entry] = []
    for dim, (entry, size) in enumerate(zip(entries, shape)):
        if isinstance(entry, slice):
            if entry.step == 0:
                raise SliceError(f"dim {dim}: a slice step cannot be zero")
            key.append(entry)
        elif isinstance(entry, (int, np.integer)) and not isinstance(entry, bool):
            key.append(_normalize_int(int(entry), dim, int(size)))
        else:
            raise SliceError(f"dim {dim}: unsupported index {entry!r}")
    return tuple(key)


def parse_key(text: str, shape: Sequence[int]) -> Key:
    """Parse slice text for a tensor of ``shape``; ``SliceError`` if it is bad."""
    return normalize_key(parse_slice(text, len(shape)), shape)


def _format_entry(entry: Entry) -> str:
    if not isinstance(entry, slice):
        return str(entry)
    parts = ["" if entry.start is None else str(entry.start),
             "" if entry.stop is None else str(entry.stop)]
    if entry.step not in (None, 1):
        parts.append(str(entry.step))
    return ":".join(parts)


def format_key(key: Key) -> str:
    """Canonical numpy text for ``key`` (``"0, :, 3:10"``; ``""`` for a 0-d tensor)."""
    return ", ".join(_format_entry(e) for e in key)


def kept_dims(key: Key) -> tuple[int, ...]:
    """The dimensions a key keeps (its slice entries), in order."""
    return tuple(d for d, e in enumerate(key) if isinstance(e, slice))


def entry_indices(entry: Entry, size: int) -> np.ndarray:
    """The tensor indices an entry selects along a dimension of ``size``."""
    if isinstance(entry, slice):
        return np.arange(*entry.indices(size))
    return np.array([entry])


def fit_stride(sizes: Sequence[int], budget: int) -> int:
    """The smallest step ``s`` so that taking every ``s``-th element of each size fits ``budget``."""
    total = math.prod(sizes)
    if total <= budget or not sizes:
        return 1
    stride = max(1, int(math.floor((total / max(budget, 1)) ** (1.0 / len(sizes)))))
    while math.prod(math.ceil(n / stride) for n in sizes) > budget:
        stride += 1
    return stride
