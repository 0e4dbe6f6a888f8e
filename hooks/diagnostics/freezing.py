"""Module attributes that do not do what they look like: ``ineffective_freeze``
(``module.requires_grad = False`` freezes nothing) and ``param_not_in_optimizer``
for a trainable tensor kept as a plain attribute (not an ``nn.Parameter``).

``nn.Module`` has no ``requires_grad`` attribute: assigning one sets a plain
Python attribute on the module object, and its parameters keep their own
``requires_grad`` flags, so a backbone "frozen" that way is trained (and an
optimizer built from ``filter(lambda p: p.requires_grad, ...)`` takes it too).
The reverse, ``module.requires_grad = True`` to unfreeze parameters frozen
before, leaves them frozen. ``requires_grad_(flag)`` is the method meant.

Detection: when an optimizer steps, each root not yet looked at (every root
at a new optimizer's first step) is walked (``named_modules()``, metadata
only) for a boolean ``requires_grad`` in a module's ``__dict__`` that disagrees
with its parameters: ``False`` while some of them are trainable, ``True``
while none is; and for a plain ``torch.Tensor`` attribute (not a Parameter)
that is a leaf requiring grad, holds a gradient, and is in no optimizer
(``self.log_temp = torch.zeros(1, requires_grad=True)``). Otherwise a set
lookup and a length comparison per step.
"""
from __future__ import annotations

from typing import Any

import torch

from tensorscope.hooks.diagnostics.base import Diagnostic, is_ancestor_path, \
    maximal_modules, module_label
from tensorscope.hooks.observer import StepRecord


class FreezeObserver(Diagnostic):
    """Finds ``module.requires_grad = flag`` assignments that change no parameter."""

    def __init__(self) -> None:
        self._checked = 0   # roots walked so far (ctx.roots only grows)
        self._optimizers: set[int] = set()   # id of each optimizer seen stepping
        self._moved: set[tuple[int, str]] = set()   # frozen modules reported as updated
        self._rows_seen: Any = None   # the last step's parameter rows (a list)

    def on_optimizer_step_pre(self, optimizer: Any) -> None:
        """Walk the roots not walked yet, or all of them at a new optimizer's first step
        (a second phase of fine-tuning unfreezes with a new optimizer)."""
        roots = self.ctx.roots
        if id(optimizer) in self._optimizers and self._checked >= len(roots):
            return
        start = self._checked
        if id(optimizer) not in self._optimizers:
            self._optimizers.add(id(optimizer))
            start = 0
        self._checked = len(roots)
        optimized: set[int] | None = None
        for rid in range(start, len(roots)):
            for path, module in roots[rid].named_modules():
                flag = module.__dict__.get("requires_grad")
                if isinstance(flag, bool):
                    self._judge(rid, path, module, flag)
                for name, value in module.__dict__.items():
                    if type(value) is torch.Tensor and value.requires_grad and value.is_leaf \
                            and value.grad is not None:
                        if optimized is None:
                            optimized = {id(p) for opt in self.ctx.optimizers
                                         for g in opt.param_groups for p in g["params"]}
                        if id(value) not in optimized:
                            self._plain_tensor(rid, path, name, value)

    def on_step_end(self, record: StepRecord) -> None:
        """A frozen parameter (``requires_grad=False``) that the last update moved while its
        gradient was zero: a stale zero gradient (``zero_grad(set_to_none=False)``, or
        frozen after training began) keeps it in the optimizer's step, whose weight decay
        and momentum (Adam's moments) go on changing it."""
        params = record.summary.params
        if params is self._rows_seen:   # steps without numbers share one list of rows
            return
        self._rows_seen = params
        moved: dict[int, list[dict[str, Any]]] = {}
        for r in params:   # one dictionary read for a trainable parameter
            if r.get("requires_grad") is False and r.get("update_ratio") \
                    and r.get("grad_norm") == 0 and isinstance(r.get("root"), int):
                moved.setdefault(r["root"], []).append(r)
        if not moved:
            return
        owners: dict[int, dict[str, str]] = {}
        for r in params:
            if isinstance(r.get("root"), int):
                owners.setdefault(r["root"], {})[r["name"]] = r.get("module", "")
        for rid, rows in moved.items():
            names = {r["name"] for r in rows}
            for path in maximal_modules(owners[rid], names):
                if (rid, path) in self._moved:
                    continue
                self._moved.add((rid, path))
                self._frozen_moved(rid, path, [r for r in rows if is_ancestor_path(
                    path, r.get("module", ""))], record.step)

    def _frozen_moved(self, rid: int, path: str, rows: list[dict[str, Any]], step: int) -> None:
        where = module_label(self.ctx, rid, path)
        names = ", ".join(r["name"] for r in rows[:4]) + (" ..." if len(rows) > 4 else "")
        groups = [g for opt in self.ctx.optimizers for g in opt.param_groups]
        decay = any(g.get("weight_decay") for g in groups)
        why = "its weight decay" if decay else "its momentum (the moments of past gradients)"
        self.emit("ineffective_freeze", "warning", "optimizer", rid, path,
                  f"{where} is frozen (requires_grad=False: {names}), but the optimizer step "
                  f"of step {step} still changed it: its gradients are zero tensors, not None "
                  f"(zero_grad(set_to_none=False), or frozen after training began), so the "
                  f"optimizer keeps it in its update and {why} moves the frozen weights "
                  f"every step. Fix: set p.grad = None for the frozen parameters (or "
                  f"optimizer.zero_grad(set_to_none=True)), or build the optimizer over the "
                  f"trainable parameters only (filter(lambda p: p.requires_grad, "
                  f"model.parameters())).", step=step)

    def _plain_tensor(self, rid: int, path: str, name: str, value: torch.Tensor) -> None:
        """A trainable tensor kept as a plain attribute: it got a gradient, but it is
        not a parameter, so no optimizer built from ``parameters()`` holds it."""
        full = f"{path}.{name}" if path else name
        self.emit("param_not_in_optimizer", "warning", "optimizer", rid, path,
                  f"`{full}` (a tensor {list(value.shape)} with requires_grad=True) is a "
                  f"plain attribute of {module_label(self.ctx, rid, path)}, not an "
                  f"nn.Parameter: it gets gradients, but it is not in model.parameters(), "
                  f"so the optimizer never updates it (nor moves it with .to(), nor saves it "
                  f"in state_dict()). Fix: self.{name} = nn.Parameter(...) in __init__.",
                  step=self.ctx.step_index)

    def _judge(self, rid: int, path: str, module: Any, flag: bool) -> None:
        params = list(module.parameters())
        trainable = sum(p.requires_grad for p in params)
        if not params or (trainable == 0) == (not flag):
            return
        where = module_label(self.ctx, rid, path)
        name = path or "model"
        if not flag:
            effect = (f"{trainable} of its {len(params)} parameters still require grad, so "
                      f"the optimizer trains what was meant to be frozen")
        else:
            effect = (f"all {len(params)} of its parameters are still frozen, so it is not "
                      f"trained")
        self.emit("ineffective_freeze", "warning", "optimizer", rid, path,
                  f"`{name}.requires_grad = {flag}` set a plain Python attribute on "
                  f"{where}, not the flag of its parameters (nn.Module has no requires_grad "
                  f"attribute): {effect}. Fix: {name}.requires_grad_({flag}) (or set "
                  f"p.requires_grad on each of its parameters) before building the "
                  f"optimizer.", step=self.ctx.step_index)
