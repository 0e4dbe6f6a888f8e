"""Tensor slices on demand: a safe numpy-slice parser and the slice codec.

``parse_slice`` turns ``"0, :, 3:10"`` or ``"..., -1"`` into an index tuple
without ``eval``. ``encode_slice`` (training side; imports torch lazily)
slices a tensor on its own device, converts the dtype only as transport
needs, and returns a ``GetTensor`` response body with the whole tensor's
statistics. ``decode_slice`` (GUI side) turns that body into a numpy array.
"""
from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

_INT = re.compile(r"^[+-]?\d+$")
MAX_SLICE_TEXT = 1000
#: Hard ceiling on the elements one response may carry, whatever is asked.
MAX_ELEMENTS = 16_000_000

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


def tensor_stats(t: Any) -> dict[str, float]:
    """Whole-tensor statistics, computed on its device, one host transfer."""
    import torch

    t = t.detach()
    n = t.numel()
    if n == 0:
        return {}
    if t.dtype == torch.bool:
        zero = (~t).sum() / n
        return {"zero_fraction": float(zero), "min": float(t.min()), "max": float(t.max())}
    v = t.abs() if t.is_complex() else t
    if not v.is_floating_point():
        v64 = v.to(torch.float64)
        vals = torch.stack([v64.min(), v64.max(), v64.mean(), (v64 == 0).sum() / n])
        mn, mx, mean, zero = vals.tolist()
        return {"min": mn, "max": mx, "mean": mean, "zero_fraction": zero}
    v = v.to(torch.float32) if v.dtype in (torch.float16, torch.bfloat16) else v
    if bool(torch.isfinite(v).all()):  # the common case: fewer passes over the data
        mn, mx = torch.aminmax(v)
        std, mean = torch.std_mean(v) if n > 1 else (torch.zeros((), dtype=v.dtype), v.mean())
        vals = torch.stack([mn, mx, mean, std.to(v.device), v.norm(), (v == 0).sum() / n])
        mn_, mx_, mean_, std_, norm_, zero_ = vals.tolist()
        return {"min": mn_, "max": mx_, "mean": mean_, "std": std_, "norm": norm_,
                "nan": 0.0, "inf": 0.0, "zero_fraction": zero_}
    finite = torch.isfinite(v)
    nan = torch.isnan(v).sum()
    inf = torch.isinf(v).sum()
    fv = torch.where(finite, v, torch.zeros((), dtype=v.dtype, device=v.device))
    cnt = finite.sum().clamp(min=1)
    mean = fv.sum() / cnt
    big = torch.finfo(v.dtype).max
    mn = torch.where(finite, v, torch.full((), big, dtype=v.dtype, device=v.device)).min()
    mx = torch.where(finite, v, torch.full((), -big, dtype=v.dtype, device=v.device)).max()
    var = (torch.where(finite, v - mean, torch.zeros((), dtype=v.dtype, device=v.device)) ** 2
           ).sum() / (cnt - 1).clamp(min=1)  # unbiased, as torch.std
    vals = torch.stack([mn, mx, mean, var.sqrt(), fv.norm(), nan.to(v.dtype),
                        inf.to(v.dtype), (v == 0).sum().to(v.dtype) / n, finite.sum().to(v.dtype)
                        ]).tolist()
    out = dict(zip(("min", "max", "mean", "std", "norm", "nan", "inf", "zero_fraction"), vals))
    if vals[-1] == 0:   # nothing finite: no finite statistic exists (not ±finfo.max)
        out.update(min=math.nan, max=math.nan, mean=math.nan, std=math.nan, norm=math.nan)
    return out


def encode_slice(tensor: Any, slice_text: str, *, ref: str = "",
                 max_elements: int = 1_000_000) -> dict[str, Any]:
    """Slice ``tensor`` on its device and build a GetTensor response body."""
    import torch

    t = tensor.detach()
    if t.is_sparse:
        t = t.to_dense()
    if t.is_quantized:
        t = t.dequantize()
    if t.device.type == "meta":
        raise SliceError("the tensor is on the meta device: it has no values")
    index = _normalise(parse_slice(slice_text, t.dim()), tuple(t.shape))
    limit = max(1, min(int(max_elements), MAX_ELEMENTS))
    index, truncated = _budget(index, tuple(t.shape), limit)
    part = t[index] if index else t
    host = _transport(part).contiguous().cpu()
    arr = host.numpy() if host.dtype != torch.bool else host.numpy().astype(np.bool_)
    arr = np.ascontiguousarray(arr)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return {
        "ref": ref, "slice": slice_text, "dtype": arr.dtype.name,
        "original_dtype": str(t.dtype).replace("torch.", ""),
        "shape": list(arr.shape), "full_shape": list(t.shape),
        "data": arr.tobytes(), "stats": tensor_stats(t), "truncated": truncated,
    }


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
