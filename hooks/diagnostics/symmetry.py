"""``symmetric_init``: a layer whose units all start, and stay, identical.

A ``Linear`` or convolution whose output units (rows of its weight, or
filters) start with equal weights, a constant or zero initialisation over a
layer whose next layer is initialised alike, computes the same value in every
unit and gives every unit the same gradient: the units never become different
and the layer works as one unit, whatever its width. Random initialisation
breaks the symmetry; so does the gradient of a last layer (each output has its
own error), so a zero-initialised head or LoRA's zero ``B`` moves apart at the
first step and is not reported.

After the ``FIRST`` and ``SECOND`` optimizer steps, the spread across units of
each trainable ``Linear``/``Conv`` weight with at least two units and a
gradient is queued, ``max over inputs of (max over units - min over units)``,
with the weight's largest magnitude (column reductions: no copy of the
weight). A layer whose spread is at most ``TOLERANCE`` of that magnitude at both
checks is reported: one warning per model, naming its first such layer and
the others. Cost: two reductions per weight, twice per run, in the step's one
host transfer.
"""
from __future__ import annotations

from typing import Any

import torch

from tensorscope.hooks.diagnostics.base import Diagnostic, module_label
from tensorscope.hooks.observer import StepRecord

FIRST, SECOND = 1, 5       # the optimizer steps after which the units are compared
TOLERANCE = 1e-6           # spread across units, relative to the weight's largest value
MAX_LAYERS = 256           # weights looked at per model
_LAYERS = (torch.nn.Linear, torch.nn.modules.conv._ConvNd)


class SymmetryObserver(Diagnostic):
    """Layers whose units have identical weights after several updates."""

    def __init__(self) -> None:
        self._updates = 0
        self._queued: dict[int, list[tuple[str, int]]] = {}   # handle -> [(path, root)]
        self._types: dict[tuple[int, str], str] = {}          # (root, path) -> layer type
        self._identical: dict[tuple[int, str], int] = {}      # (root, path) -> checks identical
        self._done = False

    def on_optimizer_step(self, optimizer: Any) -> None:
        """After the ``FIRST`` and ``SECOND`` updates, queue each layer's spread."""
        if self._done:
            return
        self._updates += 1
        if self._updates not in (FIRST, SECOND):
            return
        tensors: dict[str, torch.Tensor] = {}
        layers: list[tuple[str, int]] = []
        with torch.no_grad():
            for rid, root in enumerate(self.ctx.roots):
                n = 0
                for path, mod in root.named_modules():
                    if n >= MAX_LAYERS:
                        break
                    if not isinstance(mod, _LAYERS):
                        continue
                    w = mod._parameters.get("weight")
                    if (w is None or not w.requires_grad or w.grad is None or w.dim() < 2
                            or w.shape[0] < 2 or not w.is_floating_point() or w.is_sparse
                            or w.numel() == 0):
                        continue
                    n += 1
                    flat = w.detach().reshape(w.shape[0], -1)
                    k = len(layers)
                    tensors[f"s{k}"] = (flat.amax(0) - flat.amin(0)).amax()
                    tensors[f"m{k}"] = flat.abs().amax()
                    layers.append((path, rid))
                    self._types[(rid, path)] = type(mod).__name__
        if layers:
            self._queued[self.ctx.defer(tensors)] = layers

    def on_step_end(self, record: StepRecord) -> None:
        """Count the layers whose units are identical; report after both checks."""
        if not self._queued:
            return
        queued, self._queued = self._queued, {}
        for handle, layers in queued.items():
            values = record.deferred.get(handle) or {}
            for k, (path, rid) in enumerate(layers):
                spread, top = values.get(f"s{k}"), values.get(f"m{k}")
                if not isinstance(spread, float) or not isinstance(top, float):
                    continue
                if spread <= TOLERANCE * top:   # NaN compares False: never identical
                    key = (rid, path)
                    self._identical[key] = self._identical.get(key, 0) + 1
        if self._updates >= SECOND:
            self._done = True
            self._report(record.step)

    def _report(self, step: int) -> None:
        by_root: dict[int, list[str]] = {}
        for (rid, path), n in self._identical.items():
            if n >= 2:
                by_root.setdefault(rid, []).append(path)
        for rid, paths in by_root.items():
            first = paths[0]
            others = f", and of {', '.join(paths[1:6])}{' ...' if len(paths) > 6 else ''}," \
                if len(paths) > 1 else ""
            where = f"{module_label(self.ctx, rid, first)} ({self._types.get((rid, first))})"
            self.emit("symmetric_init", "warning", "optimizer", rid, first,
                      f"Every unit of {where}{others} has the same weights after {SECOND} "
                      f"optimizer steps: the layer was initialised with equal weights in "
                      f"every unit (a constant or zero init, nn.init.constant_ / zeros_), so "
                      f"each unit computes the same value and receives the same gradient, "
                      f"and the units never become different: the layer works as a single "
                      f"unit. Fix: keep PyTorch's default initialisation or use a random "
                      f"one (nn.init.kaiming_uniform_, xavier_uniform_, normal_); only "
                      f"biases, or a last layer, may start at zero.", step=step)
