"""The training side of tensor slices: slice a tensor on its device, encode the body.

``encode_slice`` (imports torch lazily) slices a tensor on its own device,
converts the dtype only as transport needs, and returns a ``GetTensor``
response body with the whole tensor's statistics. The body's format and its
decoder are in ``tensorscope.common.slicing``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tensorscope.common.slicing import SliceError, parse_slice
from tensorscope.common.tensors import dtype_name

#: Hard ceiling on the elements one response may carry, whatever is asked.
MAX_ELEMENTS = 16_000_000


def _normalise(index: tuple, shape: tuple[int, ...]) -> tuple:
    """Expand ``...``, check integer bounds, return one entry per dimension."""
    if Ellipsis in index:
        at = index.index(Ellipsis)
        fill = len(shape) - (len(index) - 1)
        index = index[:at] + (slice(None),) * fill + index[at + 1:]
    index = index + (slice(None),) * (len(shape) - len(index))
    for i, (item, size) in enumerate(zip(index, shape)):
        if isinstance(item, int) and not -size <= item < size:
            raise SliceError(f"index {item} is out of range for dimension {i} of size {size}")
    return index


def _budget(index: tuple, shape: tuple[int, ...], max_elements: int) -> tuple[tuple, bool]:
    """Trim leading sliced dimensions so the result holds at most ``max_elements``."""
    sizes = [len(range(*it.indices(n))) if isinstance(it, slice) else None
             for it, n in zip(index, shape)]
    total = math.prod(s for s in sizes if s is not None)
    if total <= max_elements:
        return index, False
    out = list(index)
    for i, size in enumerate(sizes):
        if size is None:
            continue
        rest = math.prod(s for s in sizes[i + 1:] if s is not None)
        keep = max(1, min(size, max_elements // max(rest, 1)))
        start, stop, step = index[i].indices(shape[i])
        out[i] = slice(start, start + keep * step, step)
        sizes[i] = keep
        if math.prod(s for s in sizes if s is not None) <= max_elements:
            break
    return tuple(out), True


def _transport(t: Any) -> Any:
    """Convert a (CPU) torch tensor to a dtype numpy can carry."""
    import torch

    if t.is_complex():
        return t.to(torch.complex64) if t.dtype == torch.complex32 else t
    if t.dtype in (torch.float16, torch.float32, torch.float64, torch.bool, torch.uint8,
                   torch.int8, torch.int16, torch.int32, torch.int64):
        return t
    if t.is_floating_point():
        return t.to(torch.float32)  # bfloat16, float8 variants
    return t.to(torch.int64)  # uint16/32/64 and other integer kinds


def encode_slice(tensor: Any, slice_text: str, *, ref: str = "",
                 max_elements: int = 1_000_000) -> dict[str, Any]:
    """Slice ``tensor`` on its device and build a GetTensor response body."""
    import torch

    from tensorscope.training import slice_torch

    t = slice_torch.plain_values(tensor)
    if t.is_nested:
        raise SliceError("a nested tensor has no single shape to slice: "
                         "its components are listed in its metadata")
    if t.device.type == "meta":
        raise SliceError("the tensor is on the meta device: it has no values")
    index = _normalise(parse_slice(slice_text, t.dim()), tuple(t.shape))
    limit = max(1, min(int(max_elements), MAX_ELEMENTS))
    index, truncated = _budget(index, tuple(t.shape), limit)
    # memory in proportion to the slice (slice_torch): never the whole tensor densified
    if t.layout != torch.strided:
        part = slice_torch.sparse_slice(t, index)
    else:
        part = t[index] if index else t
        if part.is_quantized:
            part = part.dequantize()
    host = _transport(part).contiguous().cpu()
    arr = host.numpy() if host.dtype != torch.bool else host.numpy().astype(np.bool_)
    arr = np.ascontiguousarray(arr)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return {
        "ref": ref, "slice": slice_text, "dtype": arr.dtype.name,
        "original_dtype": dtype_name(t.dtype),
        "shape": list(arr.shape), "full_shape": list(t.shape),
        "data": arr.tobytes(), "truncated": truncated,
        "stats": slice_torch.chunked_stats(t if t.layout == torch.strided
                                           else _stored_values(t)),
    }


def _stored_values(t: Any) -> Any:
    """The stored values of a sparse tensor (their statistics stand for its own)."""
    return t._values() if t.is_sparse else t.values()
