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
  of non-zeros, NaNs and Infs; ``exact=True`` (mode ``full``) takes the norm
  and non-zero count over the whole tensor instead.

NaN/Inf counts always come from the sample; a count is raised to at least 1
when the exact min/max show that the tensor holds such a value.
"""
from __future__ import annotations

import math
from typing import Any

import torch

SAMPLE = 16384
_LOW = (torch.float16, torch.bfloat16)
_F32 = torch.float32


class ScalarBuffer:
    """Device values of one step; ``flush`` brings them over in one transfer per device.

    ``add`` takes a 0-dim tensor or a 1-dim vector and returns the offset of
    its first value in the list ``flush`` returns.
    """

    __slots__ = ("items", "size")

    def __init__(self) -> None:
        self.items: list[tuple[int, torch.Tensor]] = []
        self.size = 0

    def add(self, t: torch.Tensor) -> int:
        """Queue a 0-dim tensor (or a vector); returns its offset."""
        at = self.size
        self.items.append((at, t))
        self.size = at + (1 if t.dim() == 0 else t.numel())
        return at

    def __len__(self) -> int:
        return self.size

    def flush(self) -> list[float]:
        """All queued values as Python floats, then forget the tensors."""
        items, size = self.items, self.size
        self.items, self.size = [], 0
        if not items:
            return []
        groups: dict[tuple[Any, Any], list[tuple[int, torch.Tensor]]] = {}
        for at, t in items:
            groups.setdefault((t.device, t.dtype), []).append((at, t))
        per_device: dict[Any, list[tuple[list[tuple[int, int]], torch.Tensor]]] = {}
        with torch.no_grad():
            for (device, _), group in groups.items():
                flat = torch.cat([t.reshape(-1) for _, t in group]).to(torch.float64)
                spans = [(at, 1 if t.dim() == 0 else t.numel()) for at, t in group]
                per_device.setdefault(device, []).append((spans, flat))
            out = [math.nan] * size
            for parts in per_device.values():
                joined = torch.cat([p for _, p in parts]) if len(parts) > 1 else parts[0][1]
                values = joined.tolist()  # the one host transfer for this device
                pos = 0
                for spans, _ in parts:
                    for at, n in spans:
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
                 "nnz", "nan", "inf", "min", "max")

    def __init__(self) -> None:
        self.sum_s: int | None = None
        self.nan: int | None = None
        self.inf: int | None = None


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
    if exact:
        _exact_moments(work, buf, slots)
    else:
        _sample_moments(work, buf, slots)
    if not slots.integer:
        s = _sample(work)
        slots.nan = buf.add(torch.isnan(s).sum())
        slots.inf = buf.add(torch.isinf(s).sum())
        slots.n_sample = s.numel()
    return slots


def _exact_moments(work: torch.Tensor, buf: ScalarBuffer, slots: StatSlots) -> None:
    norm = torch.linalg.vector_norm(work, dtype=_F32 if work.dtype in _LOW else None)
    slots.ssq = buf.add(norm)  # the norm itself; squared on the host
    slots.nnz = buf.add(torch.count_nonzero(work))
    slots.n_sample = slots.numel


def _sample_moments(work: torch.Tensor, buf: ScalarBuffer, slots: StatSlots) -> None:
    s = _sample(work)
    if s.dtype in _LOW:
        s = s.float()
    slots.n_sample = s.numel()
    slots.sum_s = buf.add(s.sum())
    slots.ssq = buf.add(torch.dot(s, s))
    slots.nnz = buf.add(torch.count_nonzero(s))


def grad_norm(g: torch.Tensor, buf: ScalarBuffer) -> int:
    """Queue the L2 norm of a gradient (float32 accumulation for half types)."""
    if g.is_complex():
        g = torch.view_as_real(g)
    norm = torch.linalg.vector_norm(g.detach(), dtype=_F32 if g.dtype in _LOW else None)
    return buf.add(norm)


def stats_from(slots: StatSlots, v: list[float]) -> dict[str, float]:
    """Turn the flushed values of ``slots`` into a statistics dict."""
    n = slots.numel
    total, mn, mx = v[slots.sum], v[slots.min], v[slots.max]
    mean = total / n
    if slots.exact:
        norm = v[slots.ssq]
        var = (norm * norm - n * mean * mean) / max(n - 1, 1)
        zero = (n - v[slots.nnz]) / n
    else:
        ns = slots.n_sample
        ssq_s, mean_s = v[slots.ssq], v[slots.sum_s] / ns
        var = (ssq_s - ns * mean_s * mean_s) / max(ns - 1, 1)
        norm = math.sqrt(max(ssq_s, 0.0) * n / ns) if math.isfinite(ssq_s) else ssq_s
        zero = (n - v[slots.nnz]) / ns
    std = math.sqrt(max(var, 0.0)) if math.isfinite(var) else math.nan
    out = {"min": mn, "max": mx, "mean": mean, "std": std, "norm": norm,
           "nan": 0, "inf": 0, "zero_fraction": zero}
    sampled = not slots.exact and slots.n_sample < n
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
    inf = round(v[slots.inf] * scale)
    if nan == 0 and (math.isnan(mn) or math.isnan(mx)):
        nan = 1
    if inf == 0 and (math.isinf(mn) or math.isinf(mx)):
        inf = 1
    return nan, inf
