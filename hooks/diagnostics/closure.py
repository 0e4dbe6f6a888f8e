"""``grad_accumulation`` inside ``optimizer.step(closure)`` of an optimizer that
re-evaluates its closure (L-BFGS).

L-BFGS calls the closure several times within one ``step()`` (``max_iter``, 20
by default, plus its line search): each call must return the loss and the
gradient at the current weights, so it must clear the gradients before its
backward. A closure without ``zero_grad()`` hands L-BFGS the sum of every
evaluation's gradients, so its direction and curvature estimates are wrong
from the first step; the check across optimizer steps
(``GradAccumulationObserver``) sees it only several steps later, usually after
an exploding gradient. Found when a second backward runs within one such
``step()`` with no ``zero_grad()`` (of any optimizer or module) since that step
began, while the optimizer's gradients are set. A closure that clears them and
then calls backward twice (two losses, or sub-batches) is no mistake: its
``zero_grad()`` is seen. No device work: a check of a few Python objects per
backward, only while such a step is open.
"""
from __future__ import annotations

from typing import Any

from tensorscope.hooks.diagnostics.base import ZeroGradListener, module_label


def re_evaluates_closure(optimizer: Any) -> bool:
    """Whether ``optimizer.step(closure)`` calls the closure more than once (L-BFGS)."""
    return "lbfgs" in type(optimizer).__name__.lower()


class _OpenStep:
    __slots__ = ("optimizer", "backwards", "zeroed")

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer
        self.backwards = 0
        self.zeroed = False


class ClosureAccumulationObserver(ZeroGradListener):
    """A closure re-evaluated by its optimizer that never clears the gradients."""

    def __init__(self) -> None:
        self._open: list[_OpenStep] = []
        self._reported: set[int] = set()   # id of the optimizers found already

    def on_optimizer_step_pre(self, optimizer: Any) -> None:
        """An L-BFGS step begins: its closure's backwards are counted until it ends."""
        if re_evaluates_closure(optimizer) and id(optimizer) not in self._reported:
            self._open.append(_OpenStep(optimizer))

    def on_optimizer_step(self, optimizer: Any) -> None:
        """The step ended."""
        self._open = [s for s in self._open if s.optimizer is not optimizer]

    def _zero_grad_called(self, obj: Any, set_to_none: bool) -> None:
        for step in self._open:
            step.zeroed = True

    def on_backward(self, tensor: Any) -> None:
        """A backward inside the open step: the second one with no ``zero_grad()``
        since the step began adds into the first one's gradients."""
        for step in self._open:
            step.backwards += 1
            if step.backwards >= 2 and not step.zeroed:
                self._report(step)
        self._open = [s for s in self._open if id(s.optimizer) not in self._reported]

    def _report(self, step: _OpenStep) -> None:
        opt = step.optimizer
        params = [p for g in opt.param_groups for p in g["params"]
                  if p.requires_grad and p.grad is not None]
        if not params:
            return   # nothing left over to add into (gradients set to None by hand)
        self._reported.add(id(opt))
        hit = next((h for h in map(self.ctx.param_name, params) if h is not None), None)
        rid = hit[0] if hit is not None else 0
        name = module_label(self.ctx, rid, "") if hit is not None else "the model"
        kind = type(opt).__name__
        self.emit("grad_accumulation", "warning", "backward", rid, "",
                  f"{kind} calls its closure several times within one step(), and the "
                  f"closure does not clear the gradients: its backward at step "
                  f"{self.ctx.step_index} added into the gradients of {name} from the "
                  f"closure's previous call, so {kind} gets the sum of every evaluation's "
                  f"gradients and its search direction is wrong from the first step. Fix: "
                  f"call optimizer.zero_grad() at the start of the closure, before the "
                  f"forward.", step=self.ctx.step_index)
