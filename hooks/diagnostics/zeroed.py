"""``zeroed_gradients``: backward computes gradients, the optimizer steps on zeros.

Between ``backward()`` and ``optimizer.step()`` something sets every gradient
to zero: ``clip_grad_norm_(params, max_norm=0)`` or ``clip_grad_value_(params,
0)`` (a threshold of 0 typed for 1.0), ``p.grad.zero_()`` or ``mul_(0)`` in a
loop, a gradient hook that returns zeros. The optimizer then steps on zero
gradients and nothing learns, while the loss and the backward look normal.

Reads what the step summary already carries: on the steps whose parameter rows
hold gradient norms (statistics steps), every parameter of an optimizer that
has a gradient has a norm of exactly 0, while the gradient at the output of
some module other than a loss in the same step was finite and non-zero (the
backward itself produced gradients). ``HITS`` (2) such steps in a row make the finding. A
``zero_grad()`` between the backward and the step is ``zero_grad_before_step``
and does not count here. No device work of its own.
"""
from __future__ import annotations

import math
from typing import Any

from tensorscope.common.step_calls import HAS_GRAD
from tensorscope.hooks.diagnostics.base import ZeroGradListener, is_loss_module, module_label
from tensorscope.hooks.observer import StepRecord

HITS = 2


class ZeroedGradObserver(ZeroGradListener):
    """Parameter gradients that are all exactly zero at the step, after a real backward."""

    def __init__(self) -> None:
        self._hits: list[int] = []
        self._cleared = False   # zero_grad() since the last backward
        self._done = False

    def _zero_grad_called(self, obj: Any, set_to_none: bool) -> None:
        self._cleared = True

    def on_backward(self, tensor: Any) -> None:
        """A backward: the gradients are fresh again."""
        self._cleared = False

    def on_step_end(self, record: StepRecord) -> None:
        """Judge a training step whose parameter rows carry gradient norms."""
        if self._done or record.kind != "train":
            return
        total = record.summary.grad_norm   # over every parameter row with a gradient norm
        if total is None:
            return   # no gradient norms this step (not a statistics step)
        if total != 0.0:
            self._hits = []
            self._cleared = False
            return
        rows = [r for r in record.summary.params
                if r.get("in_optimizer") and r.get("requires_grad")
                and r.get("grad_norm") is not None]
        if not rows:
            return   # no gradient norms this step (not a statistics step)
        cleared, self._cleared = self._cleared, False
        zero = all(r["grad_norm"] == 0.0 for r in rows)
        if not zero or cleared or not _output_grads(record):
            self._hits = []
            return
        self._hits.append(record.step)
        if len(self._hits) < HITS:
            return
        self._done = True
        rid = rows[0].get("root") or 0
        rid = rid if isinstance(rid, int) else 0
        self.emit("zeroed_gradients", "warning", "optimizer", rid, "",
                  f"At steps {', '.join(map(str, self._hits))} every gradient of the "
                  f"parameters of {module_label(self.ctx, rid, '')} is exactly zero when the "
                  f"optimizer steps, although backward() produced non-zero gradients at the "
                  f"modules' outputs: something between backward() and step() sets them to "
                  f"zero, so nothing learns. Usual causes: clip_grad_norm_(params, "
                  f"max_norm=0) or clip_grad_value_(params, 0) (a threshold of 0), "
                  f"p.grad.zero_() or p.grad.mul_(0) in a loop, a gradient hook returning "
                  f"zeros. Fix: check what runs between loss.backward() and "
                  f"optimizer.step().", step=record.step)


def _output_grads(record: StepRecord) -> bool:
    """Whether the output of some module other than a loss had a finite, non-zero
    gradient this step (a loss module's own output always has 1)."""
    batch, calls = record.batch, record.calls
    for i, f, gn in zip(batch.index, batch.flags, batch.grad_norm):
        if f & HAS_GRAD and gn > 0.0 and math.isfinite(gn) and i < len(calls) \
                and not is_loss_module(calls[i].module):
            return True
    return False
