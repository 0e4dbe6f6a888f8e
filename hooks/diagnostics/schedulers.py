"""``scheduler_before_step``: ``lr_scheduler.step()`` called before ``optimizer.step()``.

Since PyTorch 1.1 a scheduler is stepped after the optimizer: its constructor
already set the first learning rate, so a ``scheduler.step()`` before the
optimizer's first step skips the first value of the schedule (the first epoch
trains at the second rate, a warmup starts one notch up, a ``StepLR(step_size=1)``
never uses the initial rate). PyTorch warns once, a warning scripts often filter.

``LRScheduler.step`` is wrapped on the base class while attached (subclasses that
do not override it go through the wrapper; put back on detach). A call that finds
the scheduler's count at 1 (only the constructor's own step so far) while its
optimizer has never stepped (``optimizer._opt_called``, set by the scheduler's own
wrapper of ``optimizer.step``, unset) is remembered; a second such call before the
optimizer's first step forgets it (fast-forwarding a resumed schedule,
``for _ in range(start_epoch): scheduler.step()``). When the optimizer then steps,
that is the finding. With a ``GradScaler`` a skipped first step (an overflow) also
leaves ``_opt_called`` unset, so there only a call before the first backward counts.
Nothing here reads a tensor.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import torch

from tensorscope.hooks.diagnostics.base import Diagnostic, module_label, unwrap_methods, \
    wrap_method
from tensorscope.hooks.diagnostics.scaler import grad_scaler_in_use

_BASE: Any = getattr(torch.optim.lr_scheduler, "LRScheduler", None)
_listeners: list[Callable[[Any], None]] = []
_original: list[tuple[Any, str, Any, Any]] = []   # what wrap_method wrapped


def _install() -> None:
    wrap_method(_BASE, "step", _listeners, "lr_scheduler.step()", _original)


def _stepped(opt: Any) -> bool:
    """Whether ``opt`` has stepped, as its scheduler's own wrapper of ``opt.step`` tells
    (``_opt_called``; ``_step_count`` in PyTorch before 2.0); True (nothing to say)
    where no such wrapper is there to tell (``opt.step`` replaced since)."""
    step = getattr(opt, "step", None)
    if hasattr(step, "_wrapped_by_lr_sched"):
        return bool(getattr(opt, "_opt_called", False))
    if hasattr(step, "_with_counter"):
        return int(getattr(opt, "_step_count", 1)) >= 1
    return True


class SchedulerOrderObserver(Diagnostic):
    """Finds a scheduler stepped before its optimizer's first step."""

    def __init__(self) -> None:
        # id(optimizer) -> (scheduler, step index of the early call)
        self._early: dict[int, tuple[weakref.ref, int]] = {}
        self._done: set[int] = set()
        self._backward_seen = False

    def on_attach(self, ctx: Any) -> None:
        """Wrap ``LRScheduler.step`` (restored on detach)."""
        super().on_attach(ctx)
        if self._scheduler_step not in _listeners:
            _listeners.append(self._scheduler_step)
        _install()

    def on_detach(self) -> None:
        """Put ``LRScheduler.step`` back once no watch listens."""
        if self._scheduler_step in _listeners:
            _listeners.remove(self._scheduler_step)
        if not _listeners:
            unwrap_methods(_original)
        self._early.clear()

    def on_backward(self, tensor: torch.Tensor) -> None:
        """A backward ran (with a GradScaler, a later early call is a skipped step)."""
        self._backward_seen = True

    def _scheduler_step(self, sched: Any) -> None:
        """A scheduler's ``step()`` is about to run (training thread)."""
        opt = getattr(sched, "optimizer", None)
        if opt is None or id(opt) in self._done or _stepped(opt):
            return
        count = getattr(sched, "_step_count", None)
        if count == 1 and not (self._backward_seen and grad_scaler_in_use()):
            self._early[id(opt)] = (weakref.ref(sched), self.ctx.step_index)
        elif isinstance(count, int) and count > 1:
            self._early.pop(id(opt), None)   # fast-forwarding a resumed schedule
            self._done.add(id(opt))

    def on_optimizer_step_pre(self, optimizer: Any) -> None:
        """The optimizer's first step after an early scheduler step: the finding."""
        key = id(optimizer)
        hit = self._early.pop(key, None)
        self._done.add(key)
        sched = hit[0]() if hit is not None else None
        if sched is None or getattr(sched, "_step_count", None) != 2:
            return
        hit_param = next((self.ctx.param_name(p) for g in optimizer.param_groups
                          for p in g["params"]), None)
        rid = hit_param[0] if hit_param is not None else 0
        name, opt_name = type(sched).__name__, type(optimizer).__name__
        lrs = ", ".join(f"{lr:g}" for lr in getattr(sched, "base_lrs", [])[:3])
        self.emit("scheduler_before_step", "warning", "optimizer", rid, "",
                  f"{name}.step() was called before the first {opt_name}.step() (at step "
                  f"{hit[1] if hit else 0}): the scheduler's constructor already set the "
                  f"first learning rate ({lrs}), so this call skips it and the whole "
                  f"schedule runs one step ahead (the first epoch or warmup step trains at "
                  f"the second rate). Fix: call scheduler.step() after optimizer.step() "
                  f"(at the end of the iteration or epoch) for "
                  f"{module_label(self.ctx, rid, '')}.", step=hit[1] if hit else 0)
