"""Fault boundaries: report an internal error once, and the fault-injection switch.

Every entry from the user's code into TensorScope (module hooks, gradient
hooks, optimizer hooks, the step end, observers, sinks) catches what it
raises and degrades the smallest part that failed; a ``FaultReporter``
says so once per boundary. ``describe`` turns such an exception into the one line,
with its last frames, that stderr and the ``internal_error`` finding carry.

The test switch: ``TENSORSCOPE_FAULT=<stage>[,<stage>...]`` in the
environment makes each named internal stage raise ``InjectedFault`` every
time it runs. ``arm_from_env`` (called when a ``Watch`` is built) replaces
the stage's function by a raising one, so the switch costs nothing when it
is off: no check runs in any hook. ``STAGES`` lists every stage; the
fault-injection tests (``tests/reliability``) run a script once per stage
and check that its output and exit code equal a plain run's.
"""
from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import Any, Callable

ENV = "TENSORSCOPE_FAULT"

#: stage -> (module, attribute path) of the function that raises when armed
STAGES: dict[str, tuple[str, str]] = {
    "forward_pre": ("tensorscope.hooks.capture", "Capture._pre"),
    "forward": ("tensorscope.hooks.capture", "Capture._post"),
    "tensor_meta": ("tensorscope.hooks.capture", "meta"),
    "tensor_probe": ("tensorscope.hooks.capture", "finite_probe"),
    "tensor_stats": ("tensorscope.hooks.capture", "activation_stats"),
    "grad": ("tensorscope.hooks.capture", "grad_norm"),
    "attach": ("tensorscope.hooks.watch", "Watch._hello"),
    "resolve_module": ("tensorscope.hooks.watch", "Watch.resolve_module"),
    "step_begin": ("tensorscope.hooks.watch_events", "StepEmitter.step_begin"),
    "optimizer_pre": ("tensorscope.hooks.params", "ParamTracker.before_optimizer_step"),
    "step_end": ("tensorscope.hooks.watch_events", "StepEmitter.step_ended"),
    "stepend_finish": ("tensorscope.hooks.watch_events", "finish"),
    "flush": ("tensorscope.hooks.stats", "ScalarBuffer.flush"),
    "digest": ("tensorscope.hooks.call_signatures", "SignatureRegistry.of"),   # per call, in the batch
    "params_finish": ("tensorscope.hooks.params", "ParamTracker.finish"),
    "graphs": ("tensorscope.hooks.watch_events", "StepEmitter._graphs"),
    "observer": ("tensorscope.hooks.diagnostics.modes", "ModeObserver.on_forward_pre"),
    "observer_step_end": ("tensorscope.hooks.diagnostics.nonfinite",
                          "NonFiniteObserver.on_step_end"),
    "report_sink": ("tensorscope.training.report", "ReportBuilder.handle"),
    "report_write": ("tensorscope.training.report", "ReportBuilder.write"),
    "session_close": ("tensorscope.training.session", "Session.close"),
}

_armed: set[str] = set()


class InjectedFault(RuntimeError):
    """Raised by a stage armed through ``TENSORSCOPE_FAULT`` (tests only)."""


def _raiser(stage: str, original: Any) -> Callable[..., Any]:
    def injected(*args: Any, **kwargs: Any) -> Any:
        raise InjectedFault(f"fault injected into stage {stage!r}")

    injected.__wrapped__ = original  # type: ignore[attr-defined]
    return injected


def arm(stage: str) -> None:
    """Make ``stage`` raise from now on, in this process (idempotent)."""
    if stage not in STAGES:
        raise ValueError(f"unknown fault stage {stage!r}; stages: {', '.join(STAGES)}")
    if stage in _armed:
        return
    module_name, attr = STAGES[stage]
    owner: Any = importlib.import_module(module_name)
    *outer, name = attr.split(".")
    for part in outer:
        owner = getattr(owner, part)
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    if isinstance(original, staticmethod):
        setattr(owner, name, staticmethod(_raiser(stage, original)))
    else:
        setattr(owner, name, _raiser(stage, original))
    _armed.add(stage)


def arm_from_env() -> None:
    """Arm the stages named in ``TENSORSCOPE_FAULT`` (a no-op when it is unset)."""
    value = os.environ.get(ENV)
    if not value:
        return
    for stage in value.split(","):
        if stage.strip():
            arm(stage.strip())


#: how many of the innermost frames an internal-error report names
FRAMES = 3


def describe(where: str, exc: BaseException) -> str:
    """``TensorScope <where> failed: KeyError: 'x' (at capture.py:120 _pre < ...)``."""
    frames = traceback.extract_tb(exc.__traceback__)[-FRAMES:]
    at = " < ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}"
                    for f in reversed(frames))
    return f"TensorScope {where} failed: {type(exc).__name__}: {exc}" + (
        f" (at {at})" if at else "")


def report(where: str, exc: BaseException, effect: str) -> str:
    """Print the internal error with its traceback on stderr; returns ``describe``."""
    text = describe(where, exc)
    try:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        print(f"tensorscope: internal error in the {where}; {effect}; training "
              f"continues:\n{tb}", file=sys.stderr, end="")
    except Exception:  # stderr closed or replaced by something broken: nothing else to do
        pass
    return text


class FaultReporter:
    """Says each internal error once: on stderr with its traceback, and as an
    ``internal_error`` finding through ``emit(phase, module, message)``."""

    def __init__(self, emit: Callable[[str, str, str], None]) -> None:
        self._emit = emit
        self._seen: set[str] = set()

    def internal_error(self, where: str, exc: BaseException, effect: str = "capture goes on",
                       *, module: str = "", phase: str = "forward") -> None:
        """A bug in TensorScope at one of its boundaries (training thread, or autograd's).

        The caller has already switched off the smallest part that failed (one
        tensor, one module call, one step's digests, one observer); this says
        so once per ``where``. Capture goes on; training never notices.
        """
        if where in self._seen:
            return
        self._seen.add(where)
        text = report(where, exc, effect)
        try:
            self._emit(phase, module, text)
        except Exception as err:   # the finding itself cannot be emitted: stderr has it
            print(f"tensorscope: the internal_error finding was not emitted "
                  f"({type(err).__name__}: {err})", file=sys.stderr)
