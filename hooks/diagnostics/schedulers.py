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

``tiny_updates`` from the learning rate itself (``LrCollapseObserver``): every
trained group of an optimizer has run at ``COLLAPSED`` (1e-4) of the highest rate
it ran at, or less, for the last ``COLLAPSED_STEPS`` (8) optimizer steps and at
least ``COLLAPSED_SHARE`` (a quarter) of its steps so far. That is an epoch
scheduler stepped every batch (``StepLR(step_size=5)`` per batch is at 1e-5 after
20 batches), or a schedule shorter than the run, caught from the first batches
rather than from the update ratios of three statistics steps. The peak is a rate
the optimizer really stepped at, so a warmup from 0 never counts as a fall, and a
schedule that anneals to zero at the run's end (cosine, linear, one-cycle) spends
far less than a quarter of the run below 1e-4 of its peak. The rates are Python
numbers already (a rate held in a CPU tensor is read; one on an accelerator is
not).
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

from tensorscope.hooks.diagnostics.base import Diagnostic, MethodListeners, module_label
from tensorscope.hooks.diagnostics.scaler import grad_scaler_in_use

_BASE: Any = getattr(torch.optim.lr_scheduler, "LRScheduler", None)
COLLAPSED = 1e-4          # a rate at this fraction of its peak or less: decayed away
COLLAPSED_STEPS = 8       # consecutive optimizer steps at such a rate
COLLAPSED_SHARE = 0.25    # ... and at least this share of the optimizer's steps
_STEPS = MethodListeners(_BASE, "step", "lr_scheduler.step()")


def decay_cause(opt_index: int, group: int, start: float, lr: float) -> str:
    """The cause and fix of a learning rate a schedule brought from ``start`` down
    to ``lr`` (the one wording of ``tiny_updates``' scheduler cause)."""
    return (f"Its scheduler decayed optimizer{opt_index} group{group}'s learning rate from "
            f"{start:g} to {lr:g}: a schedule that runs far faster than meant, "
            f"usually an epoch scheduler (StepLR, MultiStepLR, ExponentialLR) "
            f"stepped every batch, or step_size / T_max / milestones counted in "
            f"epochs while scheduler.step() runs per batch. Fix: call "
            f"scheduler.step() once per epoch (after the epoch's batches), or give "
            f"the schedule its lengths in batches.")


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


class SchedulerListener(Diagnostic):
    """A diagnostic that hears every ``LRScheduler.step()`` while attached:
    ``_scheduler_step(scheduler)`` runs before each (``LRScheduler.step`` is wrapped
    on the base class, and put back once no watch listens)."""

    def on_attach(self, ctx: Any) -> None:
        """Keep the context; listen to the schedulers."""
        super().on_attach(ctx)
        _STEPS.listen(self._scheduler_step)

    def on_detach(self) -> None:
        """Stop listening."""
        _STEPS.unlisten(self._scheduler_step)

    def _scheduler_step(self, sched: Any) -> None:
        """A scheduler's ``step()`` is about to run (training thread)."""


class SchedulerOrderObserver(SchedulerListener):
    """Finds a scheduler stepped before its optimizer's first step."""

    def __init__(self) -> None:
        # id(optimizer) -> (scheduler, step index of the early call)
        self._early: dict[int, tuple[weakref.ref, int]] = {}
        self._done: set[int] = set()
        self._backward_seen = False

    def on_detach(self) -> None:
        """Stop listening; forget the early calls."""
        super().on_detach()
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


def _rate(lr: Any) -> float | None:
    """A group's learning rate as a number: None for a rate on an accelerator (no
    host read here) or of another kind."""
    if isinstance(lr, (int, float)):
        return float(lr)
    if isinstance(lr, torch.Tensor) and lr.device.type == "cpu" and lr.numel() == 1:
        return float(lr.item())
    return None


class _RateTrack:
    """One optimizer's rates: the steps it took, and per group the highest rate it
    stepped at and how many of its latest steps ran at ``COLLAPSED`` of it or less."""

    __slots__ = ("ref", "steps", "peak", "low", "sched_steps", "done")

    def __init__(self, optimizer: Any) -> None:
        self.ref = weakref.ref(optimizer)
        self.steps = 0
        self.peak: list[float] = []
        self.low: list[int] = []
        self.sched_steps = 0   # its schedulers' step() calls
        self.done = False


class LrCollapseObserver(SchedulerListener):
    """Finds an optimizer whose learning rate a schedule (or the script) brought down
    to ``COLLAPSED`` of its peak for good: the model has stopped learning."""

    def __init__(self) -> None:
        self._tracks: dict[int, _RateTrack] = {}

    def on_detach(self) -> None:
        """Stop counting."""
        super().on_detach()
        self._tracks.clear()

    def _track(self, optimizer: Any) -> _RateTrack:
        track = self._tracks.get(id(optimizer))
        if track is None or track.ref() is not optimizer:
            track = self._tracks[id(optimizer)] = _RateTrack(optimizer)
        return track

    def _scheduler_step(self, sched: Any) -> None:
        opt = getattr(sched, "optimizer", None)
        if opt is not None:
            self._track(opt).sched_steps += 1

    def on_optimizer_step(self, optimizer: Any) -> None:
        """Note the rates this step ran at; the finding once every trained group has
        run collapsed long enough."""
        track = self._track(optimizer)
        if track.done:
            return
        track.steps += 1
        groups = getattr(optimizer, "param_groups", None) or []
        peak, low = track.peak, track.low
        if len(peak) != len(groups):   # groups added: their history starts now
            peak.extend([0.0] * (len(groups) - len(peak)))
            low.extend([0] * (len(groups) - len(low)))
            del peak[len(groups):], low[len(groups):]
        least = -1   # the fewest collapsed steps of a trained group (-1: none trained)
        for g, group in enumerate(groups):
            lr = group.get("lr")
            if type(lr) is not float:
                lr = _rate(lr)
                if lr is None:
                    return
            if lr != lr:   # NaN
                return
            top = peak[g]
            if lr > top:
                top = peak[g] = lr
            if top <= 0:
                continue   # never trained (frozen with lr=0 from the start)
            # a rate at 1e-4 of its peak to rounding (0.1 * 0.1**4 is 1.0000000000000003e-05)
            n = low[g] = low[g] + 1 if lr <= COLLAPSED * top * (1 + 1e-9) else 0
            if least < 0 or n < least:
                least = n
        if least >= COLLAPSED_STEPS and least >= COLLAPSED_SHARE * track.steps:
            track.done = True
            self._report(optimizer, track, least)

    def _report(self, optimizer: Any, track: _RateTrack, least: int) -> None:
        groups = optimizer.param_groups
        g = next(i for i, p in enumerate(track.peak) if p > 0)
        k = next((i for i, o in enumerate(getattr(self.ctx, "optimizers", []) or [])
                  if o is optimizer), 0)
        hit = next((self.ctx.param_name(p) for group in groups for p in group["params"]), None)
        rid = hit[0] if hit is not None else 0
        lr = _rate(groups[g].get("lr")) or 0.0
        start = track.peak[g]
        per_batch = track.sched_steps >= track.steps - 1
        cause = (decay_cause(k, g, start, lr) if per_batch else
                 "Usual causes: a schedule shorter than the run (its lengths counted in "
                 "epochs, or a total step count too small), or a rate decayed by hand. "
                 "Fix: check optimizer.param_groups[i]['lr'] over the run.")
        self.emit("tiny_updates", "warning", "optimizer", rid, "",
                  f"The learning rate has collapsed for {module_label(self.ctx, rid, '')}: "
                  f"optimizer{k}'s rate has been at {COLLAPSED:g} of its peak or less for the "
                  f"last {least} of its {track.steps} steps (group{g}: {start:g} -> {lr:g}), so "
                  f"each step barely changes the weights and the model has stopped learning. "
                  + cause)
