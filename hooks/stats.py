"""On-device statistics, brought to the host once per step.

Hooks never read a device value. They queue reductions on the tensor's own
device and put the 0-dim results in a ``ScalarBuffer``; at step end
``ScalarBuffer.flush`` stacks them (per device) and calls ``tolist()`` once
(CPU values, which need no transfer, are read as they are queued).
The host then turns raw sums into statistics (``stats_from``).

What is computed for a floating tensor:

* every step, every output: the sum (in float32 for half types). It is
  non-finite exactly when the tensor holds NaN/Inf (or its sum overflows,
  which float32 accumulation makes practically impossible), and gives the
  exact mean;
* when statistics are taken ("stats steps"): the exact min and max (one
  ``aminmax``, or ``amin`` and ``amax`` where that is cheaper: ``_extrema``),
  and on a strided sample of at most ``SAMPLE`` elements the sum of squares,
  the count of non-zeros, NaNs and Infs; ``exact=True`` (mode ``full``) takes
  the sum of squares (so the norm and std) over the whole tensor instead, and
  counts the sample's non-zeros on its strided view (no gather first).

The zero fraction and the NaN/Inf counts always come from the sample (a
count is raised to at least 1 when the exact min/max show such a value);
``"sample"`` in the result says how many elements that was. min, max and
mean are always exact. What each key means (NaN and Inf propagate) is in
``tensorscope.common.statistics``; a sampled ``std`` or ``norm`` is made NaN
or Inf on the host when the exact min/max show a value the sample missed.
"""
from __future__ import annotations

import math
from typing import Any

import torch

SAMPLE = 16384
_LOW = (torch.float16, torch.bfloat16)
_F32 = torch.float32


class NoValues(ValueError):
    """A reduction of a tensor without data (meta device) was queued."""


class VectorRef:
    """Where a queued vector's values start in the flushed list (set by ``flush``).

    ``tensor`` is the device vector still to transfer; a CPU vector is read at
    once into ``values`` (``tensor`` is then None).
    """

    __slots__ = ("tensor", "values", "start")

    def __init__(self, tensor: torch.Tensor) -> None:
        if tensor.is_cpu:
            self.tensor, self.values = None, tensor.tolist()
        else:
            self.tensor, self.values = tensor, None
        self.start = -1

    def __len__(self) -> int:
        return len(self.values) if self.tensor is None else self.tensor.numel()


class ScalarBuffer:
    """Device values of one step; ``flush`` brings them over in one transfer per device.

    ``add`` queues a 0-dim tensor and returns its index in the list ``flush``
    returns; ``add_vector`` queues a 1-dim tensor and returns a ``VectorRef``
    whose ``start`` is valid after the flush. A CPU value is read at once
    (there is no device to wait for, and reading it while it is in cache is
    several times cheaper than at the step's end); accelerator values stay
    tensors until the one transfer.
    """

    __slots__ = ("items", "vectors", "on_device")

    def __init__(self) -> None:
        self.items: list[Any] = []   # Python numbers (CPU values) or device tensors
        self.vectors: list[VectorRef] = []
        self.on_device = False

    def add(self, t: torch.Tensor) -> int:
        """Queue a 0-dim tensor; returns its index."""
        items = self.items
        if t.is_cpu:
            items.append(t.item())
        else:
            if t.is_meta:  # no value to bring over: the capture takes metadata only
                raise NoValues("a meta-device tensor has no values")
            items.append(t)
            self.on_device = True
        return len(items) - 1

    def add_vector(self, t: torch.Tensor) -> VectorRef:
        """Queue a 1-dim tensor."""
        ref = VectorRef(t)
        self.vectors.append(ref)
        if ref.tensor is not None:
            self.on_device = True
        return ref

    def value(self, handle: int) -> float | None:
        """A queued value already on the host (a CPU one), else None (never syncs)."""
        v = self.items[handle]
        return None if isinstance(v, torch.Tensor) else v

    def __len__(self) -> int:
        return len(self.items) + sum(len(v) for v in self.vectors)

    def flush(self) -> list[float]:
        """All queued values as Python numbers (scalars first), then forget the tensors."""
        items, vectors, on_device = self.items, self.vectors, self.on_device
        self.items, self.vectors, self.on_device = [], [], False
        pos = len(items)
        if on_device:
            values = _transfer(items, vectors)
        else:
            values = items
            for v in vectors:
                values += v.values
        for v in vectors:
            v.start = pos
            pos += len(v)
        return values


def _transfer(items: list[Any], vectors: list[VectorRef]) -> list[float]:
    """The device values of ``items`` and ``vectors`` in one transfer (one per
    device if they are on several), merged with the values read already."""
    at = [i for i, x in enumerate(items) if isinstance(x, torch.Tensor)]
    tensors = [items[i] for i in at]
    device_vectors = [v for v in vectors if v.tensor is not None]
    with torch.no_grad():
        parts = [torch.stack(tensors)] if tensors else []
        parts += [v.tensor for v in device_vectors]
        try:
            joined = torch.cat(parts) if len(parts) > 1 else parts[0]
            flat = joined.tolist()  # the one host transfer
        except RuntimeError:  # values on several devices: one transfer per device
            flat = _flush_by_device(tensors, [v.tensor for v in device_vectors])
    values = list(items)
    for k, i in enumerate(at):
        values[i] = flat[k]
    pos = len(at)
    for v in vectors:
        if v.tensor is None:
            values += v.values
        else:
            n = v.tensor.numel()
            values += flat[pos:pos + n]
            pos += n
    return values


def _flush_by_device(items: list[torch.Tensor], vectors: list[torch.Tensor]) -> list[float]:
    flat = [(t.reshape(1), i) for i, t in enumerate(items)]
    offset = len(items)
    for v in vectors:
        flat.append((v.reshape(-1), offset))
        offset += v.numel()
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

    numel: int
    n_sample: int
    exact: bool
    integer: bool
    sum: int
    ssq: int
    nnz: int
    min: int
    max: int

    def __init__(self) -> None:
        self.sum_s: int | None = None
        self.nan: int | None = None
        self.nonfinite: int | None = None


def _sample(flat: torch.Tensor) -> torch.Tensor:
    """A strided view of at most ``SAMPLE`` elements of a 1-dim tensor (itself if small)."""
    n = flat.numel()
    return flat if n <= SAMPLE else flat[:: -(-n // SAMPLE)]


# On the CPU, ``aminmax`` is a slower kernel than ``amin`` and ``amax`` one after
# the other on float32/float64 of this size and up, and on any tensor that is
# not contiguous; both give the same values (NaN propagates, -0.0 == 0.0).
_SPLIT_TYPES = (torch.float32, torch.float64)
_SPLIT_MIN = 32768


def _extrema(flat: torch.Tensor, buf: ScalarBuffer) -> tuple[int, int]:
    """Queue the exact min and max of a 1-dim tensor."""
    if flat.is_cpu and (not flat.is_contiguous() or (
            flat.dtype in _SPLIT_TYPES and flat.numel() >= _SPLIT_MIN)):
        return buf.add(flat.amin()), buf.add(flat.amax())
    mn, mx = torch.aminmax(flat)
    return buf.add(mn), buf.add(mx)


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
    flat = t.reshape(-1)   # a view, or one copy of a tensor that has none
    slots.min, slots.max = _extrema(flat, buf)
    work = flat.double() if slots.integer else flat
    if sum_handle is None:
        sum_handle = buf.add(work.sum(dtype=_F32) if t.dtype in _LOW else work.sum())
    slots.sum = sum_handle
    # counting non-zeros costs several sums: the zero count is a sample's
    s = _sample(work)
    slots.n_sample = s.numel()
    if exact:
        # the count is the only reduction of the sample: taken on the strided view
        # (``bool`` gathers it into bytes), not on a gathered copy
        slots.nnz = _nonzero_count(s, buf)
        slots.ssq = buf.add(sq_norm(work))
    else:
        if s is not work:
            # one gather: each reduction below is several times cheaper on contiguous memory
            s = s.contiguous()
        slots.nnz = _nonzero_count(s, buf)
        _sample_moments(s, s is work, buf, slots)
    if not slots.integer and not _known_finite(buf, sum_handle):
        # NaN count, and NaN+Inf count (x - x is NaN exactly where x is not finite):
        # count_nonzero is several times cheaper than isnan/isinf + sum on the CPU
        slots.nan = buf.add(torch.count_nonzero(s != s))
        slots.nonfinite = buf.add(torch.count_nonzero(s - s))
    return slots


def _nonzero_count(s: torch.Tensor, buf: ScalarBuffer) -> int:
    """Queue the count of non-zero values (NaN is not zero) of a sample.

    ``torch.count_nonzero`` of a float tensor branches on every value: on a
    ReLU's output, half zeros in no order, it is ten times slower than this
    branch-free count of the ``bool`` bytes (a sample's count fits int32).
    """
    return buf.add(s.bool().sum(dtype=torch.int32))


def _known_finite(buf: ScalarBuffer, sum_handle: int) -> bool:
    """Whether the queued sum is a finite number already on the host side: a CPU
    value is read without any device sync, and a finite sum means no NaN or Inf,
    so both counts are exactly 0 and need no reduction. Accelerator values are
    never read here (``stats_from`` then reads the counts when min/max say so)."""
    total = buf.value(sum_handle)
    return total is not None and math.isfinite(total)


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
    if _dot_takes(t):
        flat = t.view(-1)
        return torch.dot(flat, flat)
    norm = torch.linalg.vector_norm(t, dtype=_F32 if t.dtype in _LOW else None)
    return norm * norm


def _dot_takes(t: torch.Tensor) -> bool:
    """Whether ``sq_norm`` takes ``t``'s dot product with itself (a contiguous
    float32/64 CPU tensor within BLAS's index range)."""
    return t.is_cpu and t.dtype in _DOT_TYPES and t.is_contiguous() and t.numel() <= _DOT_MAX


_NORM_DOT_MIN = 4096   # below this, one vector_norm beats a dot product and a root


def norm(t: torch.Tensor) -> torch.Tensor:
    """``vector_norm(t)`` in ``t``'s dtype; the root of ``sq_norm``'s dot product where
    it takes one on a tensor of ``_NORM_DOT_MIN`` elements or more (less than half
    the time on a large tensor on the CPU, and it overflows where ``vector_norm``'s
    own accumulation does; on a small one the second kernel costs more than it
    saves)."""
    if t.numel() >= _NORM_DOT_MIN and _dot_takes(t):
        return sq_norm(t).sqrt_()
    return torch.linalg.vector_norm(t)


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
    if slots.integer:   # integer and bool: the catalogue's keys for them
        return _with_sample({"min": mn, "max": mx, "mean": mean, "zero_fraction": zero},
                            slots.n_sample < n, slots)
    std = math.sqrt(max(var, 0.0)) if math.isfinite(var) else math.nan
    out = {"min": mn, "max": mx, "mean": mean, "std": std, "norm": norm,
           "nan": 0, "inf": 0, "zero_fraction": zero}
    sampled = slots.n_sample < n
    if not (math.isfinite(mn) and math.isfinite(mx)):
        # the exact min/max show a NaN (aminmax propagates it) or an infinity, which a
        # sample may have missed: std and norm as the catalogue defines them
        has_nan = math.isnan(mn) or math.isnan(mx)
        out["std"], out["norm"] = math.nan, math.nan if has_nan else math.inf
        if slots.nan is not None:
            out["nan"], out["inf"] = _counts(slots, v, mn, mx)
            sampled = True
    return _with_sample(out, sampled, slots)


def _with_sample(out: dict[str, float], sampled: bool, slots: StatSlots) -> dict[str, float]:
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
