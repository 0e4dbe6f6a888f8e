"""``unnormalized_input``: raw pixel values (0..255) fed straight into a model.

A training forward of a root whose first floating input is shaped like images
(``[N, C, H, W]``, ``[N, H, W]``, ``[N, C, T, H, W]`` with sides of at least
``MIN_SIDE``, or rows of a flattened image: ``n*n`` or ``3*n*n`` values, at
least ``MIN_FLAT``) is followed to the first convolution, linear or
normalisation layer the root calls. When that layer reads the very same
values (the same memory: the input itself, or a view of it such as
``x.view(N, -1)`` or ``nn.Flatten``), a few reductions of those values join
the step's one host transfer: the exact min and max, the sum, and on a strided
sample of at most ``SAMPLE`` elements the count of non-integer values and of
distinct values. The finding: on ``HITS`` (2) consecutive looks the values are
integers with min >= 0, max in (1, 255] and at least ``MIN_DISTINCT`` distinct
values, which is what ``images.float()`` of ``uint8`` images gives.

Silent when the first layer is a normalisation layer (BatchNorm, LayerNorm,
GroupNorm, InstanceNorm: the model normalises its input itself), when the
forward transforms the input before its first layer (``x / 255`` inside
``forward``), for integer inputs (token ids into an Embedding), inputs in
[0, 1] or standardised (a negative minimum), a few distinct values (masks,
labels, counts), and tabular rows. Only the first ``LOOKS`` training forwards
of each root are looked at, so the cost is a handful of small reductions per
root for the whole run; nothing is read on the host inside a hook.
"""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from tensorscope.hooks.diagnostics.base import Diagnostic, module_label
from tensorscope.hooks.observer import CallRecord, StepRecord

LOOKS = 4          # training forwards looked at per root
HITS = 2           # consecutive looks that must show raw pixels
SAMPLE = 4096      # elements of the strided sample for the integer and distinct counts
MIN_DISTINCT = 20  # distinct values in the sample (masks, labels and counts have fewer)
MIN_SIDE = 8       # height and width of an image input
MIN_FLAT = 256     # values in a row of a flattened image (16 x 16)
PIXEL_MAX = 255.0

_NORMS = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm,
          nn.modules.instancenorm._InstanceNorm, nn.LocalResponseNorm)
_FIRST = (nn.modules.conv._ConvNd, nn.Linear) + _NORMS


def _square(n: int) -> bool:
    r = math.isqrt(n)
    return r * r == n


def image_like(shape: tuple[int, ...]) -> bool:
    """Whether a batch of this shape can be images: 3-D to 5-D with sides of at least
    ``MIN_SIDE``, or 2-D rows of a flattened square image (grey or RGB)."""
    if 3 <= len(shape) <= 5:
        return min(shape[-2:]) >= MIN_SIDE
    if len(shape) == 2:
        f = shape[1]
        return f >= MIN_FLAT and (_square(f) or (f % 3 == 0 and _square(f // 3)))
    return False


def _memory(t: torch.Tensor) -> tuple[int, int] | None:
    """``(data pointer, element count)`` of a plain dense tensor, None for any other
    (a subclass, a functorch-wrapped, sparse or meta tensor)."""
    if type(t) is not torch.Tensor or t.layout != torch.strided or t.is_meta:
        return None
    try:
        return t.data_ptr(), t.numel()
    except Exception:   # a tensor without storage (functorch, fake)
        return None


class _Look:
    """A root's input waiting for its first layer (one per root forward)."""

    __slots__ = ("root", "path", "shape", "dtype", "memory")

    def __init__(self, root: int, path: str, t: torch.Tensor, memory: tuple[int, int]) -> None:
        self.root, self.path = root, path
        self.shape, self.dtype = tuple(t.shape), str(t.dtype).replace("torch.", "")
        self.memory = memory


class InputScaleObserver(Diagnostic):
    """Image inputs that reach the first layer as raw 0..255 values."""

    def __init__(self) -> None:
        self._looks: dict[int, int] = {}   # root -> training forwards looked at
        self._hits: dict[int, list[int]] = {}   # root -> steps of consecutive raw-pixel looks
        self._done: set[int] = set()
        self._pending: _Look | None = None
        # (step, look, first layer's path and type, defer handle)
        self._queued: list[tuple[int, _Look, str, str, int]] = []

    def watches(self, module_type: type, hook: str) -> bool:
        """The first layers only (convolutions, linear and normalisation layers)."""
        return hook == "on_forward_pre" and issubclass(module_type, _FIRST)

    def on_forward_pre(self, call: CallRecord) -> None:
        """A root's training forward: note its image-shaped input; the first watched
        layer inside it: compare what it reads with that input."""
        if call.parent is None:
            self._pending = self._look(call)
            return
        look = self._pending
        if look is None or call.root != look.root:
            return
        self._pending = None
        self._first_layer(call, look)

    def _look(self, call: CallRecord) -> _Look | None:
        rid = call.root
        if rid in self._done or not (call.training and call.grad_enabled):
            return None
        n = self._looks[rid] = self._looks.get(rid, 0) + 1
        if n > LOOKS:
            self._done.add(rid)
            return None
        for path, v in call.inputs:
            if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex()):
                memory = _memory(v) if v.is_floating_point() else None
                if memory is None or not image_like(tuple(v.shape)):
                    return None
                return _Look(rid, path, v, memory)
        return None

    def _first_layer(self, call: CallRecord, look: _Look) -> None:
        t = next((v for _, v in call.inputs if isinstance(v, torch.Tensor)), None)
        if t is None or _memory(t) != look.memory:
            return   # the forward transformed the input first (``x / 255`` in forward)
        if isinstance(call.module, _NORMS):
            self._done.add(look.root)   # the model normalises its own input
            return
        with torch.no_grad():
            flat = t.detach().reshape(-1)
            sample = flat[::max(1, flat.numel() // SAMPLE)][:SAMPLE].float()
            ordered = torch.sort(sample).values
            values = {
                "min": flat.amin(), "max": flat.amax(), "sum": flat.sum(dtype=torch.float32),
                "fraction": torch.count_nonzero(sample != torch.round(sample)),
                "distinct": torch.count_nonzero(ordered[1:] != ordered[:-1]) + 1,
            }
        self._queued.append((call.step, look, call.path, call.type, self.ctx.defer(values)))

    def on_step_end(self, record: StepRecord) -> None:
        """Judge the values queued this step."""
        queued, self._queued, self._pending = self._queued, [], None
        for step, look, layer, ltype, handle in queued:
            v = record.deferred.get(handle) or {}
            if look.root in self._done or len(v) < 5:
                continue
            hits = self._hits.setdefault(look.root, [])
            if not _raw_pixels(v):
                hits.clear()
                continue
            hits.append(step)
            if len(hits) >= HITS:
                self._done.add(look.root)
                self._report(record, look, layer, ltype, v, hits)

    def _report(self, record: StepRecord, look: _Look, layer: str, ltype: str,
                v: dict[str, Any], steps: list[int]) -> None:
        numel = math.prod(look.shape) or 1
        name = module_label(self.ctx, look.root, "")
        shape = "[" + ", ".join(map(str, look.shape)) + "]"
        self.emit("unnormalized_input", "warning", "input", look.root, "",
                  f"{name} is trained on raw pixel values: its input {look.path} (shape {shape}, "
                  f"{look.dtype}) holds whole numbers from {v['min']:g} to {v['max']:g} (mean "
                  f"{v['sum'] / numel:.1f}) at steps {', '.join(map(str, steps))}, and reaches "
                  f"its first layer \"{layer}\" ({ltype}) unchanged: uint8 images cast with "
                  f".float() but never scaled. Inputs 100x larger than the 0..1 or standardised "
                  f"range the default initialisation expects make the first activations and "
                  f"gradients huge: training is slow or unstable, and the learning rate has to "
                  f"be far smaller than usual. Fix: divide by 255 (x = images.float() / 255, or "
                  f"torchvision's ToTensor()/ToDtype(torch.float32, scale=True)), then "
                  f"standardise with the dataset's mean and std (Normalize).", step=record.step)


def _raw_pixels(v: dict[str, Any]) -> bool:
    """Whole numbers in [0, 255], some above 1, with many distinct values."""
    mn, mx = v["min"], v["max"]
    return (math.isfinite(mn) and math.isfinite(mx) and mn >= 0 and 1 < mx <= PIXEL_MAX
            and v["fraction"] == 0 and v["distinct"] >= MIN_DISTINCT)
