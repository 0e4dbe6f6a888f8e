"""``unnormalized_input``: raw pixel values (0..255) or unscaled features fed straight into a model.

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
integers with min >= 0, max in (1, 255], at least ``MIN_DISTINCT`` distinct
values and a mean of ``PIXEL_MEAN`` (8) or more, which is what ``images.float()``
of ``uint8`` images gives (term counts of a bag of words, mostly zeros, are not);
or values
past 255 with a mean of ``IMAGE_MEAN`` (50) or more, which is what
``Normalize(mean, std)`` of ``uint8`` images cast without dividing by 255
gives (0..255 becomes about -0.4..830), as do raw readings in the thousands.

Feature inputs (2-D ``[N, F]`` rows or 3-D ``[N, T, F]`` sequences that are
not image-shaped) are followed the same way to a first linear, recurrent or
convolution layer; the look takes each feature's root mean square (over the
layer's feature axis: the last one, a convolution's channels) and the finding
is ``HITS`` consecutive looks whose largest feature RMS is at least
``FEATURE_SCALE`` (1000; ``RNN_FEATURE_SCALE``, 100, into a recurrent layer,
whose gates saturate): house sizes, years, prices or raw sensor readings in
the thousands (counts in the hundreds into an LSTM), where the default
initialisation expects values of about one (standardised features have an
RMS of about 1; heavy tails rarely reach 30). A root that is itself its first
layer (an ``nn.LSTM`` trained alone) is looked at too.

Silent when the first layer is a normalisation layer (BatchNorm, LayerNorm,
GroupNorm, InstanceNorm: the model normalises its input itself), when the
forward transforms the input before its first layer (``x / 255`` inside
``forward``), for integer inputs (token ids into an Embedding), inputs in
[0, 1] or standardised (a negative minimum), a few distinct values (masks,
labels, counts). Only the first ``LOOKS`` training forwards
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
IMAGE_MEAN = 50.0  # the mean of image inputs past 0..255 from which they are unscaled
PIXEL_MEAN = 8.0   # the least mean of raw 0..255 images (MNIST's is 33, CIFAR's 120)
# a feature's root mean square from which it is unscaled: into a linear or convolution
# layer (a count, an age or an income in thousands of about 100 is left alone), and into a
# recurrent layer, whose sigmoid and tanh gates saturate at far smaller inputs
FEATURE_SCALE = 1000.0
RNN_FEATURE_SCALE = 100.0

_NORMS = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm,
          nn.modules.instancenorm._InstanceNorm, nn.LocalResponseNorm)
_FIRST = (nn.modules.conv._ConvNd, nn.Linear, nn.RNNBase) + _NORMS


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


def feature_like(shape: tuple[int, ...]) -> bool:
    """Whether a batch of this shape is feature rows ``[N, F]`` or sequences of feature
    vectors ``[N, T, F]`` (not an image)."""
    return len(shape) in (2, 3) and min(shape) > 0 and not image_like(shape)


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

    __slots__ = ("root", "path", "shape", "dtype", "memory", "features")

    def __init__(self, root: int, path: str, t: torch.Tensor, memory: tuple[int, int]) -> None:
        self.root, self.path = root, path
        self.shape, self.dtype = tuple(t.shape), str(t.dtype).replace("torch.", "")
        self.memory = memory
        self.features = feature_like(self.shape)   # else image-shaped


class InputScaleObserver(Diagnostic):
    """Image inputs that reach the first layer as raw 0..255 values, feature inputs
    that reach it unscaled."""

    def __init__(self) -> None:
        self._looks: dict[int, int] = {}   # root -> training forwards looked at
        self._hits: dict[int, list[int]] = {}   # root -> steps of consecutive raw-pixel looks
        self._done: set[int] = set()
        self._pending: _Look | None = None
        # (step, look, first layer's path and type, feature axis name, defer handle)
        self._queued: list[tuple[int, _Look, str, str, tuple[str, float], int]] = []

    def watches(self, module_type: type, hook: str) -> bool:
        """The first layers only (convolutions, linear, recurrent and normalisation layers)."""
        return hook == "on_forward_pre" and issubclass(module_type, _FIRST)

    def on_forward_pre(self, call: CallRecord) -> None:
        """A root's training forward: note its image-shaped input; the first watched
        layer inside it: compare what it reads with that input."""
        if call.parent is None:
            self._pending = look = self._look(call)
            if look is not None and isinstance(call.module, _FIRST):
                self._pending = None   # the root is the layer (an nn.LSTM trained alone)
                self._first_layer(call, look)
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
                shape = tuple(v.shape)
                if memory is None or not (image_like(shape) or feature_like(shape)):
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
        rnn = isinstance(call.module, nn.RNNBase)
        conv = isinstance(call.module, nn.modules.conv._ConvNd)
        # sequences of feature vectors [N, T, F] can be image-shaped: both looks then
        # (a view of the input, such as a flattened image, is judged as pixels only)
        features = tuple(t.shape) == look.shape and (look.features or (
            len(look.shape) == 3 and (rnn or conv or isinstance(call.module, nn.Linear))))
        values = self._pixel_values(t) if not (look.features or rnn) else {}
        scale = (("channel" if conv else "feature"),
                 RNN_FEATURE_SCALE if rnn else FEATURE_SCALE)
        if features:
            scales = _feature_values(t, 1 if conv else -1, scale[1])
            if scales is not None:
                values.update(scales)
        if values:
            self._queued.append((call.step, look, call.path, call.type, scale,
                                 self.ctx.defer(values)))

    @staticmethod
    def _pixel_values(t: torch.Tensor) -> dict[str, torch.Tensor]:
        """Exact min, max and sum; non-integer and distinct counts on a strided sample."""
        with torch.no_grad():
            flat = t.detach().reshape(-1)
            sample = flat[::max(1, flat.numel() // SAMPLE)][:SAMPLE].float()
            ordered = torch.sort(sample).values
            return {
                "min": flat.amin(), "max": flat.amax(), "sum": flat.sum(dtype=torch.float32),
                "fraction": torch.count_nonzero(sample != torch.round(sample)),
                "distinct": torch.count_nonzero(ordered[1:] != ordered[:-1]) + 1,
            }

    def on_step_end(self, record: StepRecord) -> None:
        """Judge the values queued this step."""
        queued, self._queued, self._pending = self._queued, [], None
        for step, look, layer, ltype, scale, handle in queued:
            v = record.deferred.get(handle) or {}
            if look.root in self._done or not v:
                continue
            hits = self._hits.setdefault(look.root, [])
            numel = math.prod(look.shape)
            pixels = "fraction" in v and (_raw_pixels(v, numel) or _big_image(v, numel))
            unscaled = not pixels and "col_max" in v and _unscaled_features(v, scale[1])
            if not (unscaled or pixels):
                hits.clear()
                continue
            hits.append(step)
            if len(hits) >= HITS:
                self._done.add(look.root)
                if unscaled:
                    self._report_features(record, look, layer, ltype, scale, v, hits)
                else:
                    self._report(record, look, layer, ltype, v, hits)

    def _report(self, record: StepRecord, look: _Look, layer: str, ltype: str,
                v: dict[str, Any], steps: list[int]) -> None:
        numel = math.prod(look.shape) or 1
        name = module_label(self.ctx, look.root, "")
        shape = "[" + ", ".join(map(str, look.shape)) + "]"
        raw = _raw_pixels(v, numel)
        what = (f"holds whole numbers from {v['min']:g} to {v['max']:g}" if raw else
                f"holds values from {v['min']:.4g} to {v['max']:.4g}")
        how = ("uint8 images cast with .float() but never scaled" if raw else
               "images standardised (Normalize) without being divided by 255 first, or "
               "raw values in the hundreds")
        self.emit("unnormalized_input", "warning", "input", look.root, "",
                  f"{name} is trained on raw pixel values: its input {look.path} (shape {shape}, "
                  f"{look.dtype}) {what} (mean "
                  f"{v['sum'] / numel:.1f}) at steps {', '.join(map(str, steps))}, and reaches "
                  f"its first layer \"{layer}\" ({ltype}) unchanged: {how}. Inputs 100x "
                  f"larger than the 0..1 or standardised "
                  f"range the default initialisation expects make the first activations and "
                  f"gradients huge: training is slow or unstable, and the learning rate has to "
                  f"be far smaller than usual. Fix: divide by 255 (x = images.float() / 255, or "
                  f"torchvision's ToTensor()/ToDtype(torch.float32, scale=True)), then "
                  f"standardise with the dataset's mean and std (Normalize).", step=record.step)

    def _report_features(self, record: StepRecord, look: _Look, layer: str, ltype: str,
                         scale: tuple[str, float], v: dict[str, Any], steps: list[int]) -> None:
        axis, limit = scale
        name = module_label(self.ctx, look.root, "")
        shape = "[" + ", ".join(map(str, look.shape)) + "]"
        n = look.shape[1] if axis == "channel" else look.shape[-1]
        big, top, arg = int(v["col_big"]), f"{v['col_max']:.3g}", int(v["col_arg"])
        if big > 1:
            which = (f"{big} of its {n} {axis}s have a typical magnitude (root mean square) of "
                     f"{limit:g} or more, up to {top} ({axis} {arg})")
        else:
            which = (f"its one {axis}" if n == 1 else f"{axis} {arg}") + (
                f" has a typical magnitude (root mean square) of {top}")
        self.emit("unnormalized_input", "warning", "input", look.root, "",
                  f"{name} is trained on unscaled {axis}s: in its input {look.path} (shape "
                  f"{shape}, {look.dtype}, values from {v['min']:.4g} to {v['max']:.4g}) {which}"
                  f" at steps {', '.join(map(str, steps))}, and the input reaches the first layer "
                  f"\"{layer}\" ({ltype}) unchanged. The default initialisation expects inputs "
                  f"of about unit scale: {axis}s in the hundreds or thousands make the first "
                  f"activations and gradients huge (and saturate tanh and sigmoid gates), so "
                  f"training is slow or unstable and the small-valued {axis}s are drowned out. "
                  f"Fix: standardise each {axis} with the training split's mean and std "
                  f"(x = (x - mean) / std, or sklearn's StandardScaler fitted on the training "
                  f"data), log-scale heavy-tailed values first (torch.log1p), or start the model "
                  f"with a normalisation layer (nn.BatchNorm1d / nn.LayerNorm).",
                  step=record.step)


def _raw_pixels(v: dict[str, Any], numel: int) -> bool:
    """Whole numbers in [0, 255], some above 1, with many distinct values and a mean
    of ``PIXEL_MEAN`` or more (term counts of a bag of words, mostly zeros, are not
    images even when 1024 of them make a square)."""
    mn, mx = v["min"], v["max"]
    return (math.isfinite(mn) and math.isfinite(mx) and mn >= 0 and 1 < mx <= PIXEL_MAX
            and v["fraction"] == 0 and v["distinct"] >= MIN_DISTINCT
            and numel > 0 and v["sum"] >= PIXEL_MEAN * numel)


def _big_image(v: dict[str, Any], numel: int) -> bool:
    """Values past the 0..255 range with a mean of ``IMAGE_MEAN`` or more: images
    standardised with a [0, 1] mean and std but never divided by 255 (0..255 becomes
    about -0.4..830), or raw readings in the hundreds or thousands. Standardised
    images have a mean near 0, [0, 1] images near 0.5, raw 0..255 pixels are
    ``_raw_pixels``."""
    mn, mx, total = v["min"], v["max"], v["sum"]
    return (math.isfinite(mn) and math.isfinite(mx) and math.isfinite(total) and numel > 0
            and mx > PIXEL_MAX and total / numel >= IMAGE_MEAN)


def _feature_values(t: torch.Tensor, axis: int,
                    limit: float) -> dict[str, torch.Tensor] | None:
    """Each feature's root mean square over ``axis`` (the largest, which one, how many at
    ``limit`` or more) and the exact min and max; None for an unbatched convolution input."""
    if axis == 1 and t.dim() != 3:
        return None
    with torch.no_grad():
        x = t.detach().movedim(axis, -1).reshape(-1, t.shape[axis]).float()
        rms = x.pow(2).mean(0).sqrt()
        return {"min": x.amin(), "max": x.amax(), "col_max": rms.amax(), "col_arg": rms.argmax(),
                "col_big": torch.count_nonzero(rms >= limit)}


def _unscaled_features(v: dict[str, Any], limit: float) -> bool:
    """A feature whose root mean square is ``limit`` or more (finite values)."""
    return math.isfinite(v["min"]) and math.isfinite(v["max"]) and v["col_max"] >= limit
