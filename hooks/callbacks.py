"""What the capture calls back into its watch (training thread, or autograd's).

``CaptureCallbacks`` is the part of ``Watch`` the hooks talk to: observers
(a failing one is detached with a message), the step debugger's gate (only
while ``gate.armed``), module exceptions and the optimizer step hooks.
"""
from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import torch

from tensorscope.hooks import faults
from tensorscope.hooks.watch_events import exception_message

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.observer import CallRecord, Observer

# Raised by PyTorch inside module forwards to stop work early, caught by PyTorch itself:
# non-reentrant torch.utils.checkpoint stops its recomputation this way.
CONTROL_FLOW_EXCEPTIONS = frozenset({"_StopRecomputationError"})
# Capture's lists of (observer, bound method), one per callback an observer overrides.
_ns = time.perf_counter_ns   # the overhead meter's clock (hooks.meter)
OBSERVER_BUCKETS = ("observers_pre", "observers_fwd", "observers_grad", "observers_exc",
                    "observers_opt_pre", "observers_opt", "observers_end", "observers_bwd")


class CaptureCallbacks:
    """Mixin of ``Watch``: the callbacks of ``Capture``."""

    capture: Any
    gate: Any
    emitter: Any
    index: Any
    params: Any
    optimizers: list[Any]
    rank: int
    _observers: list[Any]
    _errors: set[str]

    def emit_finding(self, kind: str, severity: str, phase: str, root: int, module: str,
                     message: str, step: int | None = None) -> None:
        """Defined by ``Watch``."""
        raise NotImplementedError

    def refresh_rank(self) -> None:
        """Defined by ``Watch``."""
        raise NotImplementedError

    def notify(self, obs: Observer, method: str, *args: Any) -> None:
        """Call an observer; one that raises is detached with a message on stderr."""
        try:
            getattr(obs, method)(*args)
        except Exception as exc:
            self.observer_failed(obs, method, exc)

    def observer_failed(self, obs: Observer, method: str, exc: Exception) -> None:
        """Detach an observer that raised, and say so on stderr."""
        cap = self.capture
        self._observers = [o for o in self._observers if o is not obs]
        for name in OBSERVER_BUCKETS:
            # a new list: a loop running over the old one is not disturbed
            setattr(cap, name, [pair for pair in getattr(cap, name) if pair[0] is not obs])
        cap.dispatch.clear()
        where = f"diagnostic {type(obs).__name__}.{method}"
        if where in self._errors:
            return
        self._errors.add(where)
        self._internal_finding("step" if method == "on_step_end" else "forward", "",
                               faults.report(where, exc, f"{type(obs).__name__}.{method} "
                                             f"failed and was detached"))

    def internal_error(self, where: str, exc: BaseException, effect: str = "capture goes on",
                       *, module: str = "", phase: str = "forward") -> None:
        """A bug in TensorScope at one of its boundaries (training thread, or autograd's).

        The caller has already switched off the smallest part that failed (one
        tensor, one module call, one step's digests); this says so once per
        ``where``: on stderr with the traceback, and as an ``internal_error``
        finding naming the last frames. Capture goes on; training never notices.
        """
        if where in self._errors:
            return
        self._errors.add(where)
        self._internal_finding(phase, module, faults.report(where, exc, effect))

    def _internal_finding(self, phase: str, module: str, message: str) -> None:
        try:
            self.emitter.finding("internal_error", "error", phase, 0, module, message)
        except Exception as exc:   # the finding itself cannot be emitted: stderr has it
            print(f"tensorscope: the internal_error finding was not emitted "
                  f"({type(exc).__name__}: {exc})", file=sys.stderr)

    def step_beginning(self, index: int) -> None:
        """A step's first module call is about to run."""
        self.refresh_rank()
        try:
            self.emitter.step_begin(index)
        except Exception as exc:
            self.internal_error("step begin", exc, "StepBegin is not emitted", phase="step")
        if self.gate.armed:
            self.gate.at_step_boundary(index)

    def gate_forward_pre(self, call: CallRecord) -> None:
        """Pause point before a module's forward (gate armed)."""
        tensors = _tensors(call.inputs)
        nf = self.gate.check_non_finite and _non_finite(tensors)
        self.gate.at_module("forward_pre", step=call.step, root=call.root, path=call.path,
                            call=call.index, type=call.type, tensors=tensors, non_finite=nf,
                            module=call.module)

    def gate_forward(self, call: CallRecord) -> None:
        """Pause point after a module's forward (gate armed)."""
        outs = _tensors(call.outputs)
        tensors = {**_tensors(call.inputs), **outs}
        if self.gate.is_pinned(call.root, call.path):
            self.gate.keep_pinned(call.root, call.path, call.index, tensors)
        nf = self.gate.check_non_finite and _non_finite(outs)
        self.gate.at_module("forward", step=call.step, root=call.root, path=call.path,
                            call=call.index, type=call.type, tensors=tensors, non_finite=nf,
                            module=call.module)

    def output_grad(self, call: CallRecord, path: str, grad: torch.Tensor) -> None:
        """An output gradient of ``call`` arrived (autograd's thread)."""
        for obs, fn in self.capture.observers_grad:
            try:
                fn(call, path, grad)
            except Exception as exc:
                self.observer_failed(obs, "on_output_grad", exc)
        if self.gate.armed:
            name = "grad" + path[3:]
            nf = self.gate.check_non_finite and _non_finite({name: grad})
            self.gate.at_module("backward", step=call.step, root=call.root, path=call.path,
                                call=call.index, type=call.type, tensors={name: grad},
                                non_finite=nf, module=call.module)

    def module_raised(self, call: CallRecord, exc: BaseException, first: bool) -> None:
        """``call``'s forward raised ``exc`` (``first``: the innermost module)."""
        if type(exc).__name__ in CONTROL_FLOW_EXCEPTIONS:
            return  # PyTorch's own control flow (checkpoint recomputation), not an error
        for obs, fn in self.capture.observers_exc:
            try:
                fn(call, exc)
            except Exception as err:
                self.observer_failed(obs, "on_exception", err)
        if not first:
            return
        phase = "loss" if call.is_root and self.index.is_loss_root(call.root) else "forward"
        name = call.path or self.index.root_names[call.root]
        self.emit_finding("exception", "error", phase, call.root, call.path,
                          exception_message(call, exc, name))
        if self.gate.armed:
            self.gate.at_exception(step=call.step, root=call.root, path=call.path,
                                   call=call.index, type=call.type,
                                   tensors=_tensors(call.inputs), exc=exc)

    def optimizer_pre(self, optimizer: Any, args: Any = None, kwargs: Any = None) -> None:
        """Optimizer step pre-hook (a boundary: never raises into ``optimizer.step``)."""
        if not self.capture.active or self.capture.from_foreign_thread("optimizer steps"):
            return
        t0 = _ns()
        try:
            self._optimizer_pre(optimizer)
        except Exception as exc:
            self.internal_error("optimizer pre-hook", exc, phase="step")
        finally:
            m = self.capture.meter   # an evaluation's step may have ended here
            m.train_ns += _ns() - (t0 if t0 > m.cut else m.cut)

    def _optimizer_pre(self, optimizer: Any) -> None:
        if all(o is not optimizer for o in self.optimizers):
            self.optimizers.append(optimizer)
        self.capture.optimizers_known = True
        if self.capture.step.inference_open:  # an evaluation ran since the last forward
            self.capture.end_step("inference")
        for obs, fn in self.capture.observers_opt_pre:
            try:
                fn(optimizer)
            except Exception as exc:
                self.observer_failed(obs, "on_optimizer_step_pre", exc)
        try:
            self.params.before_optimizer_step(optimizer, self.capture.step)
        except Exception as exc:
            self.internal_error("parameter tracking", exc,
                                "that step has no parameter norms or update ratios",
                                phase="step")

    def optimizer_post(self, optimizer: Any, args: Any = None, kwargs: Any = None) -> None:
        """Optimizer step post-hook: the step ends here (a boundary, as the pre-hook)."""
        if not self.capture.active or self.capture.from_foreign_thread("optimizer steps"):
            return
        try:
            self._optimizer_post(optimizer)
        except Exception as exc:
            self.internal_error("optimizer hook", exc, phase="step")

    def _optimizer_post(self, optimizer: Any) -> None:
        t0 = _ns()
        try:
            self.capture.step.optimizer_steps += 1
            for obs, fn in self.capture.observers_opt:
                try:
                    fn(optimizer)
                except Exception as exc:
                    self.observer_failed(obs, "on_optimizer_step", exc)
        finally:
            self.capture.meter.train_ns += _ns() - t0
        self.capture.end_step("train")   # the step end counts itself (hooks.meter)


def _tensors(pairs: list[tuple[str, Any]]) -> dict[str, torch.Tensor]:
    return {p: v for p, v in pairs if isinstance(v, torch.Tensor)}


def _non_finite(tensors: dict[str, torch.Tensor]) -> bool:
    """Synchronising finite check (only while a non_finite breakpoint is set)."""
    for t in tensors.values():
        if (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all()):
            return True
    return False
