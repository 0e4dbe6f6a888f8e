"""``optimizer_recreated``: a new optimizer built before every step.

``optimizer = torch.optim.Adam(model.parameters())`` inside the training loop
makes a new optimizer each iteration: its state (Adam's moment estimates, the
momentum buffers of SGD, RMSprop's running average) starts from zero at every
step, so every step is a first step. Adam then takes sign-like steps of about
the learning rate whatever the gradient's size, momentum never builds, and a
scheduler attached to it starts over.

Each optimizer step's optimizer is compared with the ones seen before (weak
references: the identity of an optimizer, never its ``id`` alone, which a new
object may reuse). A *fresh* step is the first step of an optimizer over
parameters an earlier optimizer has already stepped. ``RUN`` (3) fresh steps in
a row make the finding. An optimizer without state (plain SGD, no momentum)
loses nothing when rebuilt and never counts; neither does a new optimizer for a
new stage of training (one fresh step, then the same optimizer steps again), or
a new optimizer over new parameters (a model built anew), or a new optimizer
after the parameters were written between the steps (an episode that restores
the weights with ``load_state_dict`` and adapts them afresh, as episodic
test-time adaptation does: the fresh state goes with the fresh weights). That is
seen from the ``_version`` counter of the parameter the last step updated first,
a Python attribute: no tensor is read.
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

from tensorscope.hooks.diagnostics.base import Diagnostic, module_label

RUN = 3
MAX_KNOWN = 64   # optimizers remembered (a script rebuilding one each step has one alive)


class OptimizerLifeObserver(Diagnostic):
    """A new stateful optimizer for each step, over parameters already stepped."""

    def __init__(self) -> None:
        self._known: dict[int, weakref.ref] = {}
        # parameters an optimizer has stepped, by id (the weak reference tells the
        # parameter from a later object that reuses a dead one's id)
        self._stepped: dict[int, weakref.ref] = {}
        self._fresh: list[int] = []       # steps of the current run of fresh optimizers
        self._done = False
        # the first parameter of the last optimizer step, and its version after the step
        self._last: tuple[weakref.ref, int] | None = None

    def on_optimizer_step_pre(self, optimizer: Any) -> None:
        """Note whether this step's optimizer is new over parameters already stepped."""
        if self._done:
            return
        if _same(self._known.get(id(optimizer)), optimizer):
            self._fresh = []
            return
        params = [p for g in getattr(optimizer, "param_groups", []) for p in g.get("params", [])
                  if isinstance(p, torch.Tensor)]
        again = [p for p in params if _same(self._stepped.get(id(p)), p)]
        if again and _has_state(optimizer) and not self._rewritten():
            self._fresh.append(self.ctx.step_index)
        else:
            self._fresh = []
        self._remember(optimizer, params)
        if len(self._fresh) >= RUN:
            self._done = True
            self._report(optimizer, again[0])

    def on_optimizer_step(self, optimizer: Any) -> None:
        """Note the version of the step's first parameter after the update."""
        if self._done:
            return
        for g in getattr(optimizer, "param_groups", []):
            for p in g.get("params", []):
                if isinstance(p, torch.Tensor):
                    self._last = (weakref.ref(p), p._version)
                    return

    def _rewritten(self) -> bool:
        """Whether the parameter the last step updated first was written since
        (weights restored for a new episode)."""
        last = self._last
        if last is None:
            return False
        p = last[0]()
        return p is not None and p._version != last[1]

    def _remember(self, optimizer: Any, params: list[Any]) -> None:
        try:
            ref = weakref.ref(optimizer)
        except TypeError:
            return
        if len(self._known) >= MAX_KNOWN:
            self._known = {k: r for k, r in self._known.items() if r() is not None}
            if len(self._known) >= MAX_KNOWN:
                return
        self._known[id(optimizer)] = ref
        for p in params:
            if not _same(self._stepped.get(id(p)), p):
                self._stepped[id(p)] = weakref.ref(p)

    def _report(self, optimizer: Any, param: Any) -> None:
        hit = self.ctx.param_name(param)
        rid = hit[0] if hit is not None else 0
        kind = type(optimizer).__name__
        steps = ", ".join(map(str, self._fresh))
        self.emit("optimizer_recreated", "warning", "optimizer", rid, "",
                  f"A new {kind} is created before each optimizer step (steps {steps}) over "
                  f"the parameters of {module_label(self.ctx, rid, '')} that an earlier "
                  f"{kind} already stepped: its state (moment estimates, momentum buffers) "
                  f"starts from zero every step, so every step is a first step: adaptive "
                  f"optimizers take sign-like steps of about the learning rate, momentum "
                  f"never builds, and a scheduler attached to it starts over. Fix: create "
                  f"the optimizer once, before the training loop.")

    def on_detach(self) -> None:
        """Forget the optimizers and parameters."""
        self._known.clear()
        self._stepped.clear()


def _same(ref: weakref.ref | None, obj: Any) -> bool:
    """Whether ``ref`` refers to ``obj`` itself."""
    return ref is not None and ref() is obj


def _has_state(optimizer: Any) -> bool:
    """Whether the optimizer keeps state between steps (plain SGD without momentum
    does not: rebuilding it loses nothing)."""
    if isinstance(optimizer, torch.optim.SGD):
        return any(g.get("momentum", 0) for g in optimizer.param_groups)
    return True
