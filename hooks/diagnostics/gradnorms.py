"""``vanishing_gradient`` and ``exploding_gradient`` from the per-parameter gradient norms.

The hooks take every parameter's gradient norm each training step (one
fused ``_foreach_norm``, in the step's single transfer, after clipping since
it is read at the optimizer step). This observer only reads those numbers
in ``on_step_end``: no device work.

* ``vanishing_gradient``: per root, the weight matrices (parameters with two
  or more dimensions) that got a non-zero gradient are ordered by the first
  call of their module in the forward. When the first layer's gradient norm
  is below ``VANISH_RATIO`` (1e-4, four orders of magnitude) times the last
  layer's for ``VANISH_STEPS`` (3) consecutive training steps, the first
  layer is named. Exactly-zero gradients are dead units (``dead_activation``)
  or unused parameters, not vanishing ones.
* ``exploding_gradient``: the step's total gradient norm is at least
  ``EXPLODE_ABS`` (1e6), or at least ``EXPLODE_MIN`` (100) and
  ``EXPLODE_JUMP`` (1000) times the median of the previous (up to ten)
  steps. The finding is on the root and names the layer with the largest
  gradient. Clipped gradients are measured after clipping, so clipping
  scripts never match; a loss that is large early and falls does not either.
"""
from __future__ import annotations

import math
import statistics
from typing import Any

from tensorscope.hooks.diagnostics.base import Diagnostic, module_label
from tensorscope.hooks.observer import StepRecord

VANISH_RATIO = 1e-4
VANISH_STEPS = 3
MIN_LAYERS = 3
EXPLODE_ABS = 1e6
EXPLODE_MIN = 1e2
EXPLODE_JUMP = 1e3
HISTORY = 10


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


class GradScaleObserver(Diagnostic):
    """Gradient norms that shrink through the depth or grow across steps."""

    def __init__(self) -> None:
        self._vanish_streak: dict[int, int] = {}
        self._history: list[float] = []

    def on_step_end(self, record: StepRecord) -> None:
        """Check the depth profile and the step-to-step growth of gradient norms."""
        if record.kind != "train":
            return
        rows = [r for r in record.summary.params if isinstance(r.get("root"), int)
                and _finite(r.get("grad_norm")) and len(r.get("shape") or ()) >= 2]
        if not rows:
            return
        first_call: dict[tuple[int, str], int] = {}
        for c in record.calls:
            first_call.setdefault((c.root, c.path), c.index)
        by_root: dict[int, list[tuple[int, dict[str, Any]]]] = {}
        for r in rows:
            at = first_call.get((r["root"], r.get("module", "")))
            if at is not None:
                by_root.setdefault(r["root"], []).append((at, r))
        for rid, layers in by_root.items():
            self._vanishing(rid, sorted(layers, key=lambda x: x[0]), record.step)
        self._exploding(record, rows)

    def _vanishing(self, rid: int, layers: list[tuple[int, dict[str, Any]]], step: int) -> None:
        nonzero = [r for _, r in layers if r["grad_norm"] > 0.0]
        if len(nonzero) < MIN_LAYERS:
            self._vanish_streak[rid] = 0
            return
        first, last = nonzero[0], nonzero[-1]
        ratio = first["grad_norm"] / last["grad_norm"]
        if ratio >= VANISH_RATIO:
            self._vanish_streak[rid] = 0
            return
        self._vanish_streak[rid] = streak = self._vanish_streak.get(rid, 0) + 1
        if streak < VANISH_STEPS:
            return
        mod = first.get("module", "")
        self.emit("vanishing_gradient", "warning", "backward", rid, mod,
                  f"The gradient reaching {module_label(self.ctx, rid, mod)} "
                  f"({first['name']}, norm {first['grad_norm']:.2e}) is {ratio:.1e} times "
                  f"the one at the output layer ({last['name']}, norm "
                  f"{last['grad_norm']:.2e}) for {streak} steps: it vanishes through the "
                  f"depth, so the early layers barely learn. Usual causes: saturating "
                  f"activations (sigmoid/tanh) in a deep stack, poor initialisation, no "
                  f"normalisation. Fix: ReLU/GELU, residual connections, BatchNorm/LayerNorm, "
                  f"He/Xavier initialisation.", step=step - streak + 1)

    def _exploding(self, record: StepRecord, rows: list[dict[str, Any]]) -> None:
        total = record.summary.grad_norm
        if not _finite(total):
            return
        history = self._history[-HISTORY:]
        self._history.append(float(total))
        median = statistics.median(history) if len(history) >= 3 else None
        jump = median is not None and median > 0 and total >= EXPLODE_MIN \
            and total >= EXPLODE_JUMP * median
        if total < EXPLODE_ABS and not jump:
            return
        top = max(rows, key=lambda r: r["grad_norm"])
        rid = top["root"]
        why = (f"jumped to {total:.2e} from a median of {median:.2e} over the previous "
               f"steps" if jump else f"is {total:.2e}")
        self.emit("exploding_gradient", "warning", "backward", rid, "",
                  f"The total gradient norm at step {record.step} {why}; the largest is "
                  f"{top['name']} ({top['grad_norm']:.2e}). Updates this large wreck the "
                  f"weights and usually end in NaN. Usual causes: learning rate too high, "
                  f"weights initialised too large, a deep/recurrent stack without "
                  f"normalisation, unnormalised targets. Fix: clip gradients "
                  f"(torch.nn.utils.clip_grad_norm_(params, 1.0)), lower the learning rate, "
                  f"normalise inputs and targets.", step=record.step)
