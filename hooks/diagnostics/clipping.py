"""``ineffective_clipping``: gradient clipping called where it clips nothing.

``torch.nn.utils.clip_grad_norm_`` and ``clip_grad_value_`` are wrapped while
attached (on ``torch.nn.utils`` and ``torch.nn.utils.clip_grad``; put back on
detach, a wrapper a script still holds only forwards). The first
``CHECKED_CALLS`` calls look at the parameters given (metadata only, no tensor
value):

* every one of them has ``p.grad is None``: clipping runs before the backward
  (right after ``zero_grad()``), so the gradients the optimizer uses are never
  clipped;
* the first one with a gradient belongs to an optimizer whose last step left
  that very gradient (same tensor, same version: no backward since): clipping
  runs after ``optimizer.step()``, on gradients already used;
* there are none at all while an optimizer holds parameters of a watched model:
  an exhausted generator (``params = model.parameters()`` given to the optimizer,
  then to the clip), so nothing is ever clipped.

* with an enabled ``GradScaler``, the call runs between the backward and the
  step but before ``scaler.unscale_(optimizer)``: the gradients are still
  multiplied by the loss scale (65536 at first), so ``clip_grad_norm_`` measures
  the true norm times the scale and clips every step, and after the scaler
  unscales them the update is ``max_norm / scale`` at most: the model barely
  learns (``clip_grad_value_`` clips at a value divided by the scale). It is
  counted when the optimizer then steps through that scaler (``scaler.step``
  unscales on its way in); an optimizer stepped directly is not.

A ``max_norm`` of infinity only measures the norm and is not looked at. Two such
calls make the finding, named at the root of the parameters. A call
between the backward and the step (the only place clipping works) never
matches. Cost: one wrapper call per clip, one gradient read per optimizer step
between the first clip and the ``CHECKED_CALLS``-th (none in a script that never
clips).
"""
from __future__ import annotations

import functools
import sys
import weakref
from typing import Any, Callable

import torch
import torch.nn.utils as nn_utils
import torch.nn.utils.clip_grad as clip_grad

from tensorscope.hooks.compiled import is_compiling
from tensorscope.hooks.diagnostics.base import Diagnostic
from tensorscope.hooks.diagnostics.scaler import live_scalers, unscaled_for

CHECKED_CALLS = 16
INEFFECTIVE_CALLS = 2
_NAMES = ("clip_grad_norm_", "clip_grad_value_")
_OWNERS = (nn_utils, clip_grad)
# in-place writes each function makes to every gradient (``_version`` bumps: a scale for
# the norm, a clamp from each side for the value), counted for ``grad_rescale``
_WRITES = {"clip_grad_norm_": 1, "clip_grad_value_": 2}
_written = [0]


def clip_writes() -> int:
    """In-place writes the wrapped clipping functions made to each gradient so far."""
    return _written[0]


class ClipObserver(Diagnostic):
    """Checks where ``clip_grad_norm_``/``clip_grad_value_`` are called (training thread)."""

    def __init__(self) -> None:
        self._patched: list[tuple[Any, str, Callable[..., Any], Callable[..., Any]]] = []
        self._calls = 0          # clip calls checked so far
        self._on = False
        # _key(optimizer) -> (weak references to a parameter and its gradient, and the
        # gradient's version)
        # right after the optimizer's last step
        self._after_step: dict[int, tuple[weakref.ref, weakref.ref, int]] = {}
        self._hits: list[tuple[str, str, int, int]] = []   # (how, name, root, step)
        self._reported = False
        # id(optimizer) -> (clip name, root, step, scalers that had not unscaled it) of
        # a clip between backward and step, while a GradScaler is enabled
        self._scaled: dict[int, tuple[str, int, int, list[weakref.ref]]] = {}

    def on_attach(self, ctx: Any) -> None:
        """Wrap the clipping functions (restored on detach)."""
        super().on_attach(ctx)
        self._on = True
        for name in _NAMES:
            found = getattr(clip_grad, name, None)
            if found is None or getattr(found, "__tensorscope_wrapped__", False):
                continue
            orig: Callable[..., Any] = found
            wrapper = self._wrap(orig, name)
            for owner in _OWNERS:
                if vars(owner).get(name) is found:
                    setattr(owner, name, wrapper)
                    self._patched.append((owner, name, orig, wrapper))

    def on_detach(self) -> None:
        """Put the original functions back."""
        self._on = False
        for owner, name, orig, wrapper in self._patched:
            if getattr(owner, name, None) is wrapper:
                setattr(owner, name, orig)
        self._patched.clear()
        self._after_step.clear()

    def _wrap(self, orig: Callable[..., Any], name: str) -> Callable[..., Any]:
        observer = self
        writes = _WRITES[name]

        @functools.wraps(orig)
        def clip(parameters: Any, *args: Any, **kwargs: Any) -> Any:
            _written[0] += writes
            if observer._on and observer._calls < CHECKED_CALLS and not is_compiling() \
                    and not _measures(args, kwargs):
                if not isinstance(parameters, torch.Tensor):
                    parameters = list(parameters)
                observer._check(name, parameters)
            return orig(parameters, *args, **kwargs)

        clip.__tensorscope_wrapped__ = True  # type: ignore[attr-defined]
        return clip

    def _check(self, name: str, parameters: Any) -> None:
        """One clip call: clipping nothing (no gradient yet) or used gradients."""
        try:
            self._calls += 1
            params = [parameters] if isinstance(parameters, torch.Tensor) else [
                p for p in parameters if isinstance(p, torch.Tensor)]
            if not params and not self._reported:
                hit = self._optimized_param()
                if hit is not None:   # an exhausted generator: model.parameters() reused
                    self._hits.append(("empty", name, hit[0], self.ctx.step_index))
                    if len(self._hits) >= INEFFECTIVE_CALLS:
                        self._report()
                return
            hit = next((h for h in map(self.ctx.param_name, params) if h is not None), None)
            if hit is None or self._reported:
                return
            with_grad = next((p for p in params if p.grad is not None), None)
            if with_grad is None:
                how = "before"
            elif self._used(with_grad):
                how = "after"
            else:
                self._note_scaled(name, with_grad, hit[0])
                if self._hits and self._hits[-1][0] == "scaled":
                    return   # judged when the optimizer steps
                self._hits.clear()   # clipped where it works: a one-off is no pattern
                return
            self._hits.append((how, name, hit[0], self.ctx.step_index))
            if len(self._hits) >= INEFFECTIVE_CALLS:
                self._report()
        except Exception as exc:  # never break the user's clipping
            self._on = False
            print(f"tensorscope: the gradient clipping check failed ({type(exc).__name__}: "
                  f"{exc}); it is off for the rest of the run", file=sys.stderr)

    def _note_scaled(self, name: str, param: torch.Tensor, root: int) -> None:
        """With an enabled GradScaler that has not unscaled the gradients of the
        optimizer holding ``param``, note the clip for that optimizer's step."""
        scalers = live_scalers()
        if not scalers:
            return
        opt = next((o for o in self.ctx.optimizers for g in getattr(o, "param_groups", ())
                    if any(p is param for p in g["params"])), None)
        if opt is None:
            return
        pending = [weakref.ref(s) for s in scalers if not unscaled_for(s, opt)]
        if pending:
            self._scaled[id(opt)] = (name, root, self.ctx.step_index, pending)

    def on_optimizer_step_pre(self, optimizer: Any) -> None:
        """A clip noted on scaled gradients counts when a scaler steps this optimizer."""
        if not self._scaled:
            return
        noted = self._scaled.pop(id(optimizer), None)
        if noted is None or self._reported:
            return
        name, root, step, pending = noted
        if any(s is not None and unscaled_for(s, optimizer) for s in (r() for r in pending)):
            if self._hits and self._hits[-1][0] != "scaled":
                self._hits.clear()
            self._hits.append(("scaled", name, root, step))
            if len(self._hits) >= INEFFECTIVE_CALLS:
                self._report()
        elif self._hits and self._hits[-1][0] == "scaled":
            self._hits.clear()

    def _optimized_param(self) -> tuple[int, str, str] | None:
        """``(root, module, name)`` of the first parameter of a watched model that an
        optimizer holds (None if none)."""
        for opt in self.ctx.optimizers:
            for group in getattr(opt, "param_groups", ()):
                for p in group["params"]:
                    hit = self.ctx.param_name(p)
                    if hit is not None:
                        return hit
        return None

    def _used(self, p: torch.Tensor) -> bool:
        """Whether ``p.grad`` is still the gradient an optimizer stepped with."""
        g = p.grad
        for ref, grad, version in self._after_step.values():
            if ref() is p:
                return g is not None and g._version == version and grad() is g
        return False

    def _report(self) -> None:
        how, name, rid, step = self._hits[-1]
        self._reported = True
        if how == "empty":
            where = ("with no parameters at all: the iterable it got was empty, usually a "
                     "generator already consumed (params = model.parameters() handed to the "
                     "optimizer, then to the clip; a generator runs once), so nothing is "
                     "ever clipped")
        elif how == "before":
            where = ("before loss.backward(): no parameter has a gradient yet (zero_grad() "
                     "set them to None), so nothing is clipped and the gradients the "
                     "optimizer uses are never clipped")
        elif how == "scaled":
            where = ("on the GradScaler's scaled gradients, before "
                     "scaler.unscale_(optimizer): they are the true gradients times the loss "
                     "scale (65536 at first), so the clip measures a norm that large and "
                     "clips every step, and once the scaler unscales them the update is at "
                     "most max_norm / scale: the model barely learns")
        else:
            where = ("after optimizer.step(): it clips gradients that were already used, "
                     "and the next zero_grad() throws them away, so the steps are never "
                     "clipped")
        fix = ("pass model.parameters() afresh to each call, or keep a list (params = "
               "list(model.parameters()))" if how == "empty" else
               "call scaler.unscale_(optimizer) right before clipping (then "
               "scaler.step(optimizer) and scaler.update() as before)" if how == "scaled" else
               "call it between loss.backward() and optimizer.step() (after "
               "scaler.unscale_(optimizer) with a GradScaler)")
        self.emit("ineffective_clipping", "warning", "optimizer", rid, "",
                  f"torch.nn.utils.{name} was called {where} (steps "
                  f"{', '.join(str(h[3]) for h in self._hits[-INEFFECTIVE_CALLS:])}). Fix: "
                  f"{fix}.", step=step)

    def on_optimizer_step(self, optimizer: Any) -> None:
        """Remember one gradient of the optimizer as its step left it (while checking)."""
        if not 0 < self._calls < CHECKED_CALLS or self._reported or not self._on:
            return   # nothing clipped yet (a script that never clips pays nothing)
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is not None:
                    # the gradient by weak reference, not id: a gradient set by hand
                    # and freed by zero_grad() leaves its id to the next backward's
                    self._after_step[id(getattr(optimizer, "param_groups", optimizer))] = (
                        weakref.ref(p), weakref.ref(g), g._version)
                    return


def _measures(args: tuple, kwargs: dict) -> bool:
    """``clip_grad_norm_(params, float("inf"))``: the norm is measured, nothing clipped."""
    limit: Any = args[0] if args else kwargs.get("max_norm", kwargs.get("clip_value"))
    try:
        return float(limit) == float("inf")
    except (TypeError, ValueError):
        return False
