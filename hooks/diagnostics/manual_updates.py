"""``grad_accumulation`` for hand-written updates: ``p -= lr * p.grad`` without
zeroing ``p.grad``.

The tutorial form of training updates the weights in place under ``no_grad``
and must clear the gradients itself (``p.grad = None`` or ``p.grad.zero_()``);
forgetting it makes every update use the sum of all past gradients. No
optimizer steps these parameters, so ``GradAccumulationObserver`` (which
judges at optimizer steps) never sees them.

At each outermost ``backward()`` (``on_backward``, before the engine runs),
the first trainable parameter of each root that no optimizer holds is looked
at: its gradient tensor and that tensor's ``_version``, and the parameter's
own ``_version``. A backward that finds the very gradient of the previous
backward one version later (only that backward's accumulation: never zeroed
in place, never replaced) while the parameter was written in place since
(an update) is one more in a run; ``RUN`` (3) in a row make the finding.
Deliberate accumulation (several backwards, an update, a ``zero_grad()``)
clears the gradient at each update and never runs long; an update through
``p.data`` does not move the parameter's version and is not seen. Python
attributes only: no tensor is read.
"""
from __future__ import annotations

import weakref
from typing import Any

from tensorscope.hooks.diagnostics.base import Diagnostic, first_trainable, module_label

RUN = 3            # consecutive backwards adding into gradients a manual update used
MAX_ROOTS = 8      # roots looked at


class ManualUpdateObserver(Diagnostic):
    """Hand-written parameter updates that never clear the gradients."""

    def __init__(self) -> None:
        # root -> (the parameter, its gradient then, the gradient's version, the
        # parameter's version) at the previous backward, and the run so far
        self._last: dict[int, tuple[weakref.ref, weakref.ref | None, int, int]] = {}
        self._runs: dict[int, list[int]] = {}
        self._done: set[int] = set()

    def on_backward(self, tensor: Any) -> None:
        """Compare each root's watched gradient with the previous backward's."""
        roots = self.ctx.roots
        n = min(len(roots), MAX_ROOTS)
        if len(self._done) >= n:
            return   # every root judged by an optimizer's checks, or nothing to train
        optimized = None
        for rid in range(n):
            if rid in self._done:
                continue
            last = self._last.get(rid)
            p = last[0]() if last is not None else None
            if p is None:
                p = first_trainable(roots[rid])
                if p is None:
                    self._done.add(rid)   # nothing trainable (a loss module called alone)
                    continue
            if optimized is None:
                optimized = {id(q) for opt in self.ctx.optimizers for g in opt.param_groups
                             for q in g["params"]}
            if id(p) in optimized:
                self._done.add(rid)   # an optimizer's: GradAccumulationObserver judges it
                continue
            g = p.grad
            gv: int = g._version if g is not None else -1
            run = self._runs.setdefault(rid, [])
            if (last is not None and g is not None and last[1] is not None
                    and last[1]() is g and gv == last[2] + 1 and p._version != last[3]):
                run.append(self.ctx.step_index)
                if len(run) >= RUN:
                    self._done.add(rid)
                    self._report(rid, p, run)
            else:
                run.clear()
            self._last[rid] = (weakref.ref(p), weakref.ref(g) if g is not None else None,
                               gv, p._version)

    def _report(self, rid: int, p: Any, steps: list[int]) -> None:
        hit = self.ctx.param_name(p)
        name = hit[2] if hit is not None else "a parameter"
        where = module_label(self.ctx, rid, "")
        self.emit("grad_accumulation", "warning", "optimizer", rid, "",
                  f"The weights of {where} are updated by hand between backwards "
                  f"({name} written in place), but its gradients are never cleared: at "
                  f"steps {', '.join(map(str, steps))} each backward added into the gradient "
                  f"the previous update had used, so every update uses the sum of all past "
                  f"gradients. Fix: clear them after each update (p.grad = None, or "
                  f"model.zero_grad()), or use a torch.optim optimizer and call "
                  f"optimizer.zero_grad() each step.", step=steps[0])
