"""What the capture calls back into (training thread, or autograd's).

``CaptureHost`` is the narrow protocol ``Capture`` talks to: internal errors,
naming a module the index does not know, a step's start, the step debugger's
pause points, output gradients and module exceptions. ``CaptureCallbacks``
implements it for a watch, from the parts it is given (the gate, the
observers, the step emitter, the module index, the parameter tracker), and
holds the optimizer step hooks. Observers are called through their
``ObserverSet``; one that raises is detached there.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

import torch

from tensorscope.hooks.watch_events import exception_message, function_message

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

    from tensorscope.hooks.capture import Capture
    from tensorscope.hooks.faults import FaultReporter
    from tensorscope.hooks.gate import Gate
    from tensorscope.hooks.observer import CallRecord
    from tensorscope.hooks.observers import ObserverSet
    from tensorscope.hooks.params import ParamTracker
    from tensorscope.hooks.registry import ModelIndex
    from tensorscope.hooks.watch_events import StepEmitter

# Raised by PyTorch inside module forwards to stop work early, caught by PyTorch itself:
# non-reentrant torch.utils.checkpoint stops its recomputation this way.
CONTROL_FLOW_EXCEPTIONS = frozenset({"_StopRecomputationError"})
_ns = time.perf_counter_ns   # the overhead meter's clock (hooks.meter)


class CaptureHost(Protocol):
    """What ``Capture`` calls outside itself (training thread, or autograd's)."""

    def internal_error(self, where: str, exc: BaseException, effect: str = ...,
                       *, module: str = ..., phase: str = ...) -> None:
        """A TensorScope bug at a boundary; the caller switched off what failed."""

    def resolve_module(self, module: "nn.Module",
                       parent: CallRecord | None) -> tuple[int, str] | None:
        """``(root, path)`` of a module the index does not know, or None to skip it."""

    def step_beginning(self, index: int) -> None:
        """A step's first module call is about to run."""

    def gate_forward_pre(self, call: CallRecord) -> None:
        """Pause point before a module's forward (only while the gate is armed)."""

    def gate_forward(self, call: CallRecord) -> None:
        """Pause point after a module's forward (only while the gate is armed)."""

    def output_grad(self, call: CallRecord, path: str, grad: torch.Tensor) -> None:
        """An output gradient of ``call`` arrived (observers or gate want it)."""

    def module_raised(self, call: CallRecord, exc: BaseException, first: bool) -> None:
        """``call``'s forward raised ``exc`` (``first``: the innermost module)."""

    def exception_caught(self) -> None:
        """The script went on after the module exceptions reported since the last
        call of this: it caught them (a root call returned or began, an optimizer
        stepped)."""

    def stepping(self) -> bool:
        """Whether an optimizer's step is running (its closure calls backward)."""


class CaptureCallbacks:
    """A watch's ``CaptureHost``, and its optimizer step hooks.

    ``capture`` is set by the watch right after it builds the ``Capture``
    (each needs the other). ``refresh_rank`` and ``resolve_module`` are the
    watch's own.
    """

    capture: Capture

    def __init__(self, *, gate: Gate, observers: ObserverSet, faults: FaultReporter,
                 emitter: StepEmitter, index: ModelIndex, params: ParamTracker,
                 optimizers: list[Any], refresh_rank: Callable[[], None],
                 resolve_module: Callable[..., tuple[int, str] | None]) -> None:
        self.gate = gate
        self.observers = observers
        self.faults = faults
        self.emitter = emitter
        self.index = index
        self.params = params
        self.optimizers = optimizers   # the watch's list: optimizers seen stepping join it
        self.trailing: set[int] = set()   # id() of optimizers that step right after another
        self._ended_with_calls = False    # the last step an optimizer ended had module calls
        # the optimizers whose step is running, outermost first: one that steps inside
        # another's step (ZeroRedundancyOptimizer's local optimizer, a Lookahead-style
        # wrapper's inner one) is part of the outer step, which alone is the step
        self._stepping: list[Any] = []
        self.refresh_rank = refresh_rank
        self._resolve = resolve_module

    def internal_error(self, where: str, exc: BaseException, effect: str = "capture goes on",
                       *, module: str = "", phase: str = "forward") -> None:
        """Said once per ``where`` (``FaultReporter.internal_error``)."""
        self.faults.internal_error(where, exc, effect, module=module, phase=phase)

    def resolve_module(self, module: "nn.Module",
                       parent: CallRecord | None) -> tuple[int, str] | None:
        """The watch's ``resolve_module``."""
        return self._resolve(module, parent)

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
        if self.observers.grad:
            self.observers.call(self.observers.grad, "on_output_grad", call, path, grad)
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
        if self.observers.exc:
            self.observers.call(self.observers.exc, "on_exception", call, exc)
        if not first:
            return
        phase = "loss" if call.is_root and self.index.is_loss_root(call.root) else "forward"
        name = call.path or self.index.root_names[call.root]
        self.emitter.exception(phase, call.root, call.path, exception_message(call, exc, name))
        if self.gate.armed:
            self.gate.at_exception(step=call.step, root=call.root, path=call.path,
                                   call=call.index, type=call.type,
                                   tensors=_tensors(call.inputs), exc=exc)

    def function_raised(self, name: str, where: str, inputs: list[tuple[str, Any]],
                        exc: BaseException, root: int, path: str) -> None:
        """A function the diagnostics wrap (a functional loss) raised ``exc``: the
        finding a module's exception gets, at the module given. A module whose
        forward called the function sees the same exception next and adds none."""
        if type(exc).__name__ in CONTROL_FLOW_EXCEPTIONS or not self.capture.raised_first(
                exc, root, path):
            return
        self.emitter.exception("loss", root, path, function_message(name, where, inputs, exc))

    def exception_caught(self) -> None:
        """The script went on after module exceptions: they were caught (``info``)."""
        self.capture.raised_open = False
        self.emitter.exceptions_caught()

    def optimizer_pre(self, optimizer: Any, args: Any = None, kwargs: Any = None) -> None:
        """Optimizer step pre-hook (a boundary: never raises into ``optimizer.step``)."""
        if not self.capture.active or self.capture.from_foreign_thread("optimizer steps"):
            return
        if self._nested_pre(optimizer):
            return
        t0 = _ns()
        try:
            self._optimizer_pre(optimizer, _has_closure(optimizer, args, kwargs))
        except Exception as exc:
            self.internal_error("optimizer pre-hook", exc, phase="step")
        finally:
            m = self.capture.meter   # an evaluation's step may have ended here
            m.train_ns += _ns() - (t0 if t0 > m.cut else m.cut)

    def stepping(self) -> bool:
        """Whether an optimizer's step is running (its closure calls backward)."""
        return bool(self._stepping)

    def _nested_pre(self, optimizer: Any) -> bool:
        """Note ``optimizer``'s step starting; whether it runs inside another's. An
        optimizer found on the stack already raised out of its last step (its
        post-hook never ran): the stack is cut back to before it."""
        self._unwind(optimizer)
        self._stepping.append(optimizer)
        return len(self._stepping) > 1

    def _nested_post(self, optimizer: Any) -> bool:
        """Note ``optimizer``'s step ending; whether it ran inside another's."""
        self._unwind(optimizer)
        return bool(self._stepping)

    def _unwind(self, optimizer: Any) -> None:
        """Take ``optimizer`` and the steps begun inside it off the stack (each
        optimizer is on it once at most)."""
        stack = self._stepping
        for i, o in enumerate(stack):
            if o is optimizer:
                del stack[i:]
                return

    def _optimizer_pre(self, optimizer: Any, closure: bool = False) -> None:
        if self.capture.raised_open:
            self.exception_caught()
        if all(o is not optimizer for o in self.optimizers):
            self.optimizers.append(optimizer)
        self.capture.optimizers_known = True
        if self.capture.step.inference_open:  # an evaluation ran since the last forward
            self.capture.end_step("inference")
        self.capture.update_starting()
        if self.observers.opt_pre:
            self.observers.call(self.observers.opt_pre, "on_optimizer_step_pre", optimizer)
        try:
            self.params.before_optimizer_step(optimizer, self.capture.step, closure)
        except Exception as exc:
            self.internal_error("parameter tracking", exc,
                                "that step has no parameter norms or update ratios",
                                phase="step")

    def optimizer_post(self, optimizer: Any, args: Any = None, kwargs: Any = None) -> None:
        """Optimizer step post-hook: the step ends here (a boundary, as the pre-hook)."""
        if not self.capture.active or self.capture.from_foreign_thread("optimizer steps"):
            return
        if self._nested_post(optimizer):
            return
        try:
            self._optimizer_post(optimizer)
        except Exception as exc:
            self.internal_error("optimizer hook", exc, phase="step")

    def _optimizer_post(self, optimizer: Any) -> None:
        t0 = _ns()
        cap = self.capture
        try:
            cap.step.optimizer_steps += 1
            if self.observers.opt:
                self.observers.call(self.observers.opt, "on_optimizer_step", optimizer)
        finally:
            cap.meter.train_ns += _ns() - t0
        if cap.batch_steps or self._ends_later(optimizer):
            return
        cap.end_pending = False
        cap.end_step("train")   # the step end counts itself (hooks.meter)

    def _ends_later(self, optimizer: Any) -> bool:
        """Whether the step goes on after this optimizer's step: another optimizer
        steps right after it with no module call in between (an encoder's and a
        decoder's, an actor's and a critic's). Such an optimizer is learned the
        first time it steps in a step of no module call after one with calls
        (that step goes on into the next iteration's); from then on the step ends
        with it, or at the next root call if it does not step."""
        cap = self.capture
        if cap.explicit_steps:
            return False
        key = id(optimizer)
        if key not in self.trailing:
            if not cap.step.calls and self._ended_with_calls:
                self.trailing.add(key)
                return True
            if self.trailing:
                cap.end_pending = True
                return True
        self._ended_with_calls = bool(cap.step.calls)
        return False


def _has_closure(optimizer: Any, args: Any, kwargs: Any) -> bool:
    """Whether ``optimizer.step`` was given a closure (positional or ``closure=``);
    torch passes the step's ``args`` with the optimizer first."""
    if kwargs and callable(kwargs.get("closure")):
        return True
    args = tuple(args or ())
    if args and args[0] is optimizer:
        args = args[1:]
    return bool(args) and callable(args[0])


def _tensors(pairs: Sequence[tuple[str, Any]]) -> dict[str, torch.Tensor]:
    return {p: v for p, v in pairs if isinstance(v, torch.Tensor)}


def _non_finite(tensors: dict[str, torch.Tensor]) -> bool:
    """Synchronising finite check (only while a non_finite breakpoint is set)."""
    for t in tensors.values():
        if (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all()):
            return True
    return False
