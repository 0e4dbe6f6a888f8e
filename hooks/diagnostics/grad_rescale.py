"""Whether a script rescaled its gradients between the last backward and the step.

Gradient accumulation may divide the gradients instead of the loss:
``for p in model.parameters(): p.grad /= k`` (or ``p.grad = p.grad / k``)
after the k backwards. ``unscaled_accumulation`` must not call that an
undivided accumulation. A post-accumulate-grad hook on one parameter of the
model notes its gradient tensor and that tensor's ``_version`` counter after
each backward; at the optimizer step the gradient is another tensor (it was
replaced), or its counter moved on by more than the writes the known
rescalers made in between (``clip_grad_norm_`` one, ``clip_grad_value_`` two,
counted by their wrappers in ``clipping``; a ``GradScaler``'s unscale one):
the script wrote the gradients itself. Python attributes only: no tensor is
read, nothing is synchronised.
"""
from __future__ import annotations

import sys
import weakref
from typing import Any

import torch

from tensorscope.hooks.diagnostics.base import first_trainable
from tensorscope.hooks.diagnostics.clipping import clip_writes
from tensorscope.hooks.diagnostics.scaler import grad_scaler_in_use, live_scalers, unscaled_for


class GradRescaleWatch:
    """Watches one parameter's gradient of a model (training thread; the hook runs on
    autograd's thread, which is the training thread on the CPU)."""

    def __init__(self) -> None:
        self._model: weakref.ref | None = None
        self._param: weakref.ref | None = None
        self._handle: Any = None
        # (the gradient tensor, its version, clip writes so far) after the last backward
        self._after: tuple[weakref.ref, int, int] | None = None
        self._failed = False

    def watch(self, model: Any) -> None:
        """Follow the first trainable parameter of ``model`` (once per model)."""
        if self._failed or (self._model is not None and self._model() is model):
            return
        self.close()
        param = first_trainable(model)
        register = getattr(param, "register_post_accumulate_grad_hook", None)
        if register is None:
            return
        self._model, self._param = weakref.ref(model), weakref.ref(param)
        self._handle = register(self._accumulated)

    def _accumulated(self, param: torch.Tensor) -> None:
        try:
            grad = param.grad
            self._after = (weakref.ref(grad), grad._version, clip_writes()) \
                if grad is not None else None
        except Exception as exc:   # never into autograd: this check goes off alone
            self._failed = True
            self._after = None
            print(f"tensorscope: the gradient-rescale check failed ({type(exc).__name__}: "
                  f"{exc}); it is off for the rest of the run", file=sys.stderr)

    def rescaled(self, optimizer: Any) -> bool:
        """Whether the script wrote the watched gradient since the last backward."""
        after = self._after
        param = self._param() if self._param is not None else None
        if after is None or param is None:
            return False
        grad = param.grad
        if grad is None:
            return False
        version: int = grad._version
        if grad is not after[0]():
            return True   # replaced: p.grad = p.grad / k
        known = clip_writes() - after[2]
        if grad_scaler_in_use() and any(unscaled_for(s, optimizer) for s in live_scalers()):
            known += 1
        return version - after[1] > known

    def close(self) -> None:
        """Remove the hook."""
        if self._handle is not None:
            self._handle.remove()
        self._handle = self._model = self._param = self._after = None
