"""The torch side of a slice request: memory in proportion to the slice, not the tensor.

Imported lazily by ``slice_encode.encode_slice``. What a
request may cost, beyond the response itself:

* the slice, once on the tensor's device and once on the host (converted to
  a transport dtype: float32 for bfloat16/float8, the dequantized values of a
  quantized tensor);
* the whole-tensor statistics, computed in chunks of at most ``CHUNK``
  elements (a few temporaries of one chunk each, in float64 at most), so a
  1,000-element slice of a 100M-element tensor never allocates a
  whole-tensor mask or copy;
* a sparse tensor is never made dense: its stored entries (``nnz`` of them)
  are filtered by the slice's bounds and scattered into a dense slice, so
  the cost is the slice plus O(nnz) indices, whatever the dense size.

Training side; torch is imported inside the functions (the session layer loads
no torch until a tensor is sliced).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: elements per chunk of the whole-tensor statistics
CHUNK = 1 << 22


def plain_values(t: torch.Tensor) -> torch.Tensor:
    """``t`` as a tensor that slicing can read: a subclass without
    ``__torch_dispatch__`` as the plain tensor under it."""
    import torch

    cls = type(t)
    if cls is torch.Tensor or cls is torch.nn.Parameter:
        return t.detach()
    if getattr(cls, "__torch_dispatch__", None) is torch.Tensor.__torch_dispatch__:
        with torch._C.DisableTorchFunctionSubclass():
            return t.detach().as_subclass(torch.Tensor)
    return t.detach()


def sparse_slice(t: torch.Tensor, index: tuple) -> torch.Tensor:
    """The dense values of ``t[index]`` for a sparse tensor (no whole ``to_dense``).

    ``index`` has one int or slice (positive step) per dimension.
    """
    import torch

    if t.layout != torch.sparse_coo:
        t = t.to_sparse_coo()   # O(nnz)
    if t.dense_dim() != 0:
        from tensorscope.common.slicing import SliceError

        raise SliceError("hybrid sparse tensors (with dense dimensions) cannot be sliced")
    t = t.coalesce()
    idx, vals = t._indices(), t._values()
    keep = torch.ones(vals.shape[0], dtype=torch.bool, device=vals.device)
    out_shape: list[int] = []
    coords: list[torch.Tensor] = []
    for dim, (item, size) in enumerate(zip(index, t.shape)):
        row = idx[dim]
        if isinstance(item, int):
            keep &= row == (item % size)
            continue
        start, stop, step = item.indices(size)
        n = len(range(start, stop, step))
        keep &= (row >= start) & (row < stop) & ((row - start) % step == 0)
        coords.append((row - start) // step)
        out_shape.append(n)
    out = torch.zeros(out_shape, dtype=vals.dtype, device=vals.device)
    if coords:
        out.index_put_(tuple(c[keep] for c in coords), vals[keep], accumulate=True)
    elif bool(keep.any()):
        out.fill_(vals[keep].sum())
    return out


def _chunks(t: torch.Tensor):
    """Flat pieces of ``t`` of at most ~``CHUNK`` elements (views where contiguous)."""
    n = t.numel()
    if n <= CHUNK or t.dim() == 0:
        yield t.reshape(-1)
        return
    if t.is_contiguous():
        flat = t.view(-1)
        for i in range(0, n, CHUNK):
            yield flat[i:i + CHUNK]
        return
    if t.shape[0] == 1:
        yield from _chunks(t[0])
        return
    rows = max(1, CHUNK // max(1, n // t.shape[0]))
    for i in range(0, t.shape[0], rows):
        part = t[i:i + rows]
        if part.numel() <= CHUNK or part.dim() == 1:
            yield part.reshape(-1)
        else:
            yield from _chunks(part)


def _upcast(c: torch.Tensor) -> torch.Tensor:
    import torch

    if c.is_quantized:
        return c.dequantize()
    if c.is_complex():
        return c.abs()
    if c.dtype == torch.bool:
        return c.to(torch.uint8)
    if c.is_floating_point() and c.dtype not in (torch.float32, torch.float64):
        return c.to(torch.float32)   # half types and float8: read in float32
    return c


def chunked_stats(t: torch.Tensor) -> dict[str, float]:
    """Whole-tensor statistics in chunks, as the catalogue defines them
    (``tensorscope.common.statistics``: ``keys_for`` the tensor's dtype kind),
    with memory bounded by one chunk. Empty tensors have none."""
    import torch

    n = t.numel()
    if n == 0:
        return {}
    floating = t.is_floating_point() or t.is_complex() or t.is_quantized
    acc = _Moments()
    nan = pos = neg = zeros = 0
    for raw in _chunks(t):
        c = _upcast(raw)
        zeros += int((c == 0).sum())
        if floating:
            finite = torch.isfinite(c)
            k = int(finite.sum())
            if k < c.numel():
                nan += int(torch.isnan(c).sum())
                pos += int((c == math.inf).sum())
                neg += int((c == -math.inf).sum())
                c = c[finite]
            if k == 0:
                continue
        acc.add(c)
    if not floating:   # integer and bool: no NaN, no Inf
        return {"min": acc.min, "max": acc.max, "mean": acc.mean, "zero_fraction": zeros / n}
    fin = acc.finite_stats()
    return {**_propagated(fin, nan, pos, neg), "nan": float(nan), "inf": float(pos + neg),
            "zero_fraction": zeros / n,
            **{f"finite_{k}": fin[k] for k in ("min", "max", "mean", "std")}}


class _Moments:
    """min, max, mean and sums of squares of finite values, merged chunk by chunk
    (float64; Chan et al. for the mean and the squared deviations)."""

    def __init__(self) -> None:
        self.count = 0
        self.min, self.max = math.inf, -math.inf
        self.mean = self.m2 = self.ssq = 0.0

    def add(self, c: torch.Tensor) -> None:
        import torch

        c64 = c.to(torch.float64)
        k = c64.numel()
        cmn, cmx = torch.aminmax(c64)
        cvar_sum = ((c64 - c64.mean()) ** 2).sum() if k > 1 else torch.zeros((), dtype=c64.dtype)
        vals = torch.stack([cmn, cmx, c64.mean(), cvar_sum, (c64 * c64).sum()]).tolist()
        self.min, self.max = min(self.min, vals[0]), max(self.max, vals[1])
        total = self.count + k
        delta = vals[2] - self.mean
        self.mean += delta * k / total
        self.m2 += vals[3] + delta * delta * self.count * k / total
        self.ssq += vals[4]
        self.count = total

    def finite_stats(self) -> dict[str, float]:
        """min, max, mean, std, norm of the values added; NaN when there were none."""
        if self.count == 0:
            return dict.fromkeys(("min", "max", "mean", "std", "norm"), math.nan)
        std = math.sqrt(self.m2 / (self.count - 1)) if self.count > 1 else 0.0
        return {"min": self.min, "max": self.max, "mean": self.mean, "std": std,
                "norm": math.sqrt(self.ssq)}


def _propagated(fin: dict[str, float], nan: int, pos: int, neg: int) -> dict[str, float]:
    """min, max, mean, std, norm of all the values, from those of the finite ones and
    the NaN, +Inf and -Inf counts (IEEE arithmetic, as the catalogue defines them)."""
    if nan:
        return dict.fromkeys(("min", "max", "mean", "std", "norm"), math.nan)
    if not pos and not neg:
        return dict(fin)
    mn = -math.inf if neg else (fin["min"] if not math.isnan(fin["min"]) else math.inf)
    mx = math.inf if pos else (fin["max"] if not math.isnan(fin["max"]) else -math.inf)
    mean = math.nan if pos and neg else (math.inf if pos else -math.inf)
    return {"min": mn, "max": mx, "mean": mean, "std": math.nan, "norm": math.inf}
