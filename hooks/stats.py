"""On-device statistics, brought to the host once per step.

Hooks never read a device value. They queue reductions on the tensor's own
device and put the 0-dim results in a ``ScalarBuffer``; at step end
``ScalarBuffer.flush`` stacks them (per device) and calls ``tolist()`` once.
The host then turns raw sums into statistics (``stats_from``).

What is computed for a floating tensor:

* every step, every output: the sum (in float32 for half types). It is
  non-finite exactly when the tensor holds NaN/Inf (or its sum overflows,
  which float32 accumulation makes practically impossible), and gives the
  exact mean;
* when statistics are taken ("stats steps"): an exact ``aminmax``, and on a
  strided sample of at most ``SAMPLE`` elements the sum of squares, the count
  of non-zeros, NaNs and Infs; ``exact=True`` (mode ``full``) takes the sum
  of squares (so the norm and std) over the whole tensor instead.

The zero fraction and the NaN/Inf counts always come from the sample (a
count is raised to at least 1 when the exact min/max show such a value);
``"sample"`` in the result says how many elements that was. min, max and
mean are always exact.
"""
from __future__ import annotations

import math
from typing import Any

import torch

SAMPLE = 16384
_LOW = (torch.float16, torch.bfloat16)
_F32 = torch.float32


class VectorRef:
    """Where a queued vector's values start in the flushed list (set by ``flush``)."""

    __slots__ = ("tensor", "start")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor
        self.start = -1


class ScalarBuffer:
    """Device values of one step; ``flush`` brings them over in one transfer per device.

    ``add`` queues a 0-dim tensor and returns its index in the list ``flush``
    returns; ``add_vector`` queues a 1-dim tensor and returns a ``VectorRef``
    whose ``start`` is valid after the flush.
    """

    __slots__ = ("items", "vectors")

    def __init__(self) -> None:
        self.items: list[torch.Tensor] = []
        self.vectors: list[VectorRef] = []

    def add(self, t: torch.Tensor) -> int:
        """Queue a 0-dim tensor; returns its index."""
        items = self.items
        items.append(t)
        return len(items) - 1

    def add_vector(self, t: torch.Tensor) -> VectorRef:
        """Queue a 1-dim tensor."""
        ref = VectorRef(t)
        self.vectors.append(ref)
        return ref

    def __len__(self) -> int:
        return len(self.items) + sum(v.tensor.numel() for v in self.vectors)

    def flush(self) -> list[float]:
        """All queued values as Python floats (scalars first), then forget the tensors."""
        items, vectors = self.items, self.vectors
        self.items, self.vectors = [], []
        if not items and not vectors:
            return []
        if _all_cpu(items, vectors):
            # Nothing to transfer: reading each value costs less than stacking them.
            values = [t.item() for t in items]
            for v in vectors:
                values += v.tensor.tolist()
        else:
            with torch.no_grad():
                parts = [torch.stack(items)] if items else []
                parts += [v.tensor for v in vectors]
                try:
                    joined = torch.cat(parts) if len(parts) > 1 else parts[0]
                    values = joined.tolist()  # the one host transfer
                except RuntimeError:  # values on several devices: one transfer per device
                    values = _flush_by_device(items, vectors)
        pos = len(items)
        for v in vectors:
            v.start = pos
            pos += v.tensor.numel()
        return values


def _all_cpu(items: list[torch.Tensor], vectors: list[VectorRef]) -> bool:
    for t in items:
        if not t.is_cpu:
            return False
    return all(v.tensor.is_cpu for v in vectors)


def _flush_by_device(items: list[torch.Tensor], vectors: list[VectorRef]) -> list[float]:
    flat = [(t.reshape(1), i) for i, t in enumerate(items)]
    offset = len(items)
    for v in vectors:
        flat.append((v.tensor.reshape(-1), offset))
        offset += v.tensor.numel()
    out = [math.nan] * offset
    by_device: dict[Any, list[tuple[torch.Tensor, int]]] = {}
    for t, at in flat:
        by_device.setdefault(t.device, []).append((t, at))
    for group in by_device.values():
        values = torch.cat([t.to(torch.float64) for t, _ in group]).tolist()
        pos = 0
        for t, at in group:
            n = t.numel()
            out[at:at + n] = values[pos:pos + n]
            pos += n
    return out


def is_float(t: torch.Tensor) -> bool:
    """Floating (real) dtype."""
    return t.is_floating_point()


def finite_probe(t: torch.Tensor, buf: ScalarBuffer) -> int | None:
    """Queue the sum of a floating/complex tensor (None for integer/bool: always finite)."""
    if t.is_floating_point():
        s = t.sum(dtype=_F32) if t.dtype in _LOW else t.sum()
    elif t.is_complex():
        s = torch.view_as_real(t).sum()
    else:
        return None
    return buf.add(s)


class StatSlots:
    """Handles of one tensor's queued statistics."""

    __slots__ = ("numel", "n_sample", "exact", "integer", "sum", "sum_s", "ssq",
                 "nnz", "nan", "nonfinite", "min", "max")

    def __init__(self) -> None:
        self.sum_s: int | None = None
        self.nan: int | None = None
        self.nonfinite: int | None = None


def _sample(flat: torch.Tensor) -> torch.Tensor:
    n = flat.numel()
    return flat if n <= SAMPLE else flat[:: -(-n // SAMPLE)]


def activation_stats(t: torch.Tensor, buf: ScalarBuffer, exact: bool,
                     sum_handle: int | None) -> StatSlots | None:
    """Queue the statistics of ``t`` (caller holds ``torch.no_grad``)."""
    if t.is_complex():
        t, sum_handle = t.abs(), None
    if t.dtype == torch.bool:
        t = t.view(torch.uint8)
    n = t.numel()
    if n == 0:
        return None
    slots = StatSlots()
    slots.numel, slots.exact = n, exact
    slots.integer = not t.is_floating_point()
    mn, mx = torch.aminmax(t)
    slots.min, slots.max = buf.add(mn), buf.add(mx)
    flat = t.reshape(-1)
    work = flat.double() if slots.integer else flat
    if sum_handle is None:
        sum_handle = buf.add(work.sum(dtype=_F32) if t.dtype in _LOW else work.sum())
    slots.sum = sum_handle
    s = _sample(work)  # count_nonzero over a whole tensor costs ten reductions: sample it
    slots.n_sample = s.numel()
    slots.nnz = buf.add(torch.count_nonzero(s))
    if exact:
        slots.ssq = buf.add(sq_norm(work))
    else:
        _sample_moments(s, s is work, buf, slots)
    if not slots.integer:
        # NaN count, and NaN+Inf count (x - x is NaN exactly where x is not finite):
        # count_nonzero is several times cheaper than isnan/isinf + sum on the CPU
        slots.nan = buf.add(torch.count_nonzero(s != s))
        slots.nonfinite = buf.add(torch.count_nonzero(s - s))
    return slots


def _sample_moments(s: torch.Tensor, whole: bool, buf: ScalarBuffer, slots: StatSlots) -> None:
    """Sum and sum of squares of the sample (``whole``: the sample is the tensor, whose
    sum is queued already, unless it is a half type summed in float32)."""
    if s.dtype in _LOW:
        s, whole = s.float(), False
    slots.sum_s = slots.sum if whole else buf.add(s.sum())
    slots.ssq = buf.add(torch.dot(s, s))


_DOT_TYPES = (torch.float32, torch.float64)
_DOT_MAX = 2**31 - 1   # BLAS index range


def sq_norm(t: torch.Tensor) -> torch.Tensor:
    """The sum of squares of a real tensor, on its device (grad mode off).

    On the CPU, a dot product of the flat tensor with itself where it can be
    had without a copy (a quarter cheaper than ``vector_norm`` on large
    tensors, and it overflows exactly where ``vector_norm``'s own float32
    accumulation does); ``vector_norm`` squared otherwise (float32
    accumulation for half types; on accelerators a plain reduction kernel).
    """
    if t.is_cpu and t.dtype in _DOT_TYPES and t.is_contiguous() and t.numel() <= _DOT_MAX:
        flat = t.view(-1)
        return torch.dot(flat, flat)
    norm = torch.linalg.vector_norm(t, dtype=_F32 if t.dtype in _LOW else None)
    return norm * norm


def grad_norm(g: torch.Tensor, buf: ScalarBuffer) -> int:
    """Queue the squared L2 norm of a gradient (``sq_norm``; grad mode is off)."""
    if g.is_complex():
        g = torch.view_as_real(g)
    return buf.add(sq_norm(g))


def stats_from(slots: StatSlots, v: list[float]) -> dict[str, float]:
    """Turn the flushed values of ``slots`` into a statistics dict."""
    n = slots.numel
    total, mn, mx = v[slots.sum], v[slots.min], v[slots.max]
    mean = total / n
    if slots.exact:
        ssq = v[slots.ssq]
        norm = math.sqrt(ssq) if ssq >= 0.0 else math.nan   # NaN stays NaN, inf stays inf
        var = (ssq - n * mean * mean) / max(n - 1, 1)
        zero = (slots.n_sample - v[slots.nnz]) / slots.n_sample
    else:
        ns = slots.n_sample
        ssq_s, mean_s = v[slots.ssq], v[slots.sum_s] / ns
        var = (ssq_s - ns * mean_s * mean_s) / max(ns - 1, 1)
        norm = math.sqrt(max(ssq_s, 0.0) * n / ns) if math.isfinite(ssq_s) else ssq_s
        zero = (ns - v[slots.nnz]) / ns
    std = math.sqrt(max(var, 0.0)) if math.isfinite(var) else math.nan
    out = {"min": mn, "max": mx, "mean": mean, "std": std, "norm": norm,
           "nan": 0, "inf": 0, "zero_fraction": zero}
    sampled = slots.n_sample < n
    if slots.nan is not None and not (math.isfinite(mn) and math.isfinite(mx)):
        out["nan"], out["inf"] = _counts(slots, v, mn, mx)
        sampled = True
    if sampled:
        out["sample"] = slots.n_sample
    return out


def _counts(slots: StatSlots, v: list[float], mn: float, mx: float) -> tuple[int, int]:
    """NaN/Inf counts scaled from the sample, at least 1 when min/max show one."""
    scale = slots.numel / slots.n_sample
    nan = round(v[slots.nan] * scale)
    inf = round((v[slots.nonfinite] - v[slots.nan]) * scale)
    if nan == 0 and (math.isnan(mn) or math.isnan(mx)):
        nan = 1
    if inf == 0 and (math.isinf(mn) or math.isinf(mx)):
        inf = 1
    return nan, inf
