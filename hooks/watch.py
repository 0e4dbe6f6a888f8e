"""``Watch``: attach TensorScope to models and optimizers, detach cleanly.

    with tensorscope.watch(model, optimizer, mode="default") as w:
        train()

A watch owns every hook handle it registers (per module, or global ones for
``tensorscope run``), a ``Session`` that fans events out to sinks (the JSON
report, the recording, the live GUI link), the step debugger's ``Gate`` and
the diagnostics observers. ``close()`` flushes the last step and removes
every handle: the modules' hook dicts are as they were before.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
import time
import traceback
from typing import Any, Sequence

import torch
from torch import nn

from tensorscope.common.distributed import (RankInfo, current_rank, in_process_group, job_id,
                                            lost_peer, own_failure_message, rank_probe)
from tensorscope.common.events import Bye, ExceptionRaised, Hello, ModuleTree, SetBreakpoints
from tensorscope.hooks import faults, processes, tracing
from tensorscope.hooks.backward_calls import BackwardWrapper
from tensorscope.hooks.budget import Budget, parse_max_overhead
from tensorscope.hooks.callbacks import CaptureCallbacks
from tensorscope.hooks.capture import Capture, StepBuffer
from tensorscope.hooks.compiled import CompiledModules, compiled_inner
from tensorscope.hooks.diagnostics.zeroing import ZeroGradListening
from tensorscope.hooks.framework_steps import FrameworkSteps
from tensorscope.hooks.gate import Gate
from tensorscope.hooks.observer import CallRecord, Observer
from tensorscope.hooks.observers import ObserverSet
from tensorscope.hooks.params import ParamTracker
from tensorscope.hooks.registry import ModelIndex, is_loss_module
from tensorscope.hooks.signals import SignalClose
from tensorscope.hooks.stats import NoValues
from tensorscope.hooks.watch_events import StepEmitter
from tensorscope.training.session import Session

# frames of TensorScope's own code (tensorscope run's runner) are not where a script raised
_OWN_DIRS = tuple(os.path.dirname(os.path.abspath(f)) + os.sep
                  for f in (__file__, sys.modules["tensorscope"].__file__ or __file__))

MODES = ("shapes", "default", "full")


# ``Watch.refresh_rank`` reads the environment's rank at least this often (in steps).
RANK_REREAD_STEPS = 32


def _as_list(obj: Any) -> list[Any]:
    if obj is None:
        return []
    return list(obj) if isinstance(obj, (list, tuple)) else [obj]


BREAK_KINDS = SetBreakpoints.FLAG_KINDS


def _breakpoint_kinds(break_on: Sequence[str] | str) -> list[dict[str, Any]]:
    """``"non_finite, encoder.0: grad_norm > 100"`` or a list -> breakpoint dicts.

    Items are a kind (``non_finite``, ``exception``, ``finding``) or a condition,
    ``[MODULE:] EXPR`` (any module when no module is named); ValueError otherwise.
    """
    from tensorscope.common.conditions import ConditionError, parse_condition
    items = break_on.split(",") if isinstance(break_on, str) else list(break_on)
    out: list[dict[str, Any]] = []
    for item in (k.strip() for k in items if k.strip()):
        if item in BREAK_KINDS:
            out.append({"kind": item})
            continue
        module, sep, expr = item.rpartition(":") if ":" in item else ("", "", item)
        try:
            parse_condition(expr.strip())
        except ConditionError as exc:
            if not sep and not any(op in item for op in "<>=!"):
                raise ValueError(f"unknown --break-on kind {item!r}; use "
                                 f"{', '.join(BREAK_KINDS)} or a condition such as "
                                 f"'encoder.0: grad_norm > 100'") from None
            raise ValueError(f"bad --break-on condition {item!r}: {exc}") from None
        bp: dict[str, Any] = {"kind": "condition", "expr": expr.strip()}
        if module.strip():
            bp.update(root=0, path=module.strip())
        out.append(bp)
    return out


class Watch(FrameworkSteps):
    # The watch of ``tensorscope run`` (global hooks) while it is open: framework
    # callbacks drive it instead of attaching a second one.
    process_watch: "Watch | None" = None

    """Instruments ``model`` (a module or a list) and ``optimizer`` (one or a list).

    ``mode``: ``"shapes"`` (metadata and graphs), ``"default"`` (plus finite
    checks and gradient norms every step, statistics every ``stats_every``
    steps on a bounded sample) or ``"full"`` (exact statistics on every
    activation every step). ``report`` writes the JSON report on close;
    ``record``/``listen``/``connect`` start the live links (``record`` refuses an
    existing file unless ``overwrite``). ``global_hooks``
    instruments every module and optimizer of the process (``tensorscope run``).
    Otherwise an optimizer not given that steps a watched parameter is found
    at its first ``step()`` (process-wide optimizer step hooks): from then on
    its steps end the watch's steps, as a given optimizer's do.
    Otherwise a loss module called outside the watched models
    (``nn.CrossEntropyLoss()`` built in the training loop) is found through a
    process-wide hook unless ``discover_losses=False``, which instruments only
    the modules passed (and leaves every other module of the process on
    PyTorch's hook-free fast path; that process-wide hook also finds a model
    compiled with ``torch.compile`` after ``watch``). ``compile_eager_steps``
    runs the first N steps of every compiled module on its original eager
    module, with full capture inside (``tensorscope.hooks.compiled``).
    ``max_overhead`` (a percentage) makes the capture keep the share of step
    time the live meter measures under it, by choosing its own statistics,
    parameter and metadata rates (``tensorscope.hooks.budget``); every step's
    finite checks always stay.
    """

    def __init__(self, model: Any, optimizer: Any = None, *, mode: str = "default",
                 stats_every: int = 10, record: str | None = None, overwrite: bool = False,
                 listen: str | int | None = None, wait: bool = False,
                 allow_remote: bool = False, connect: bool | str = True,
                 report: str | None = None, break_on: Sequence[str] | str = (),
                 name: str | None = None, global_hooks: bool = False,
                 discover_losses: bool = True, compile_eager_steps: int = 0,
                 max_overhead: float | None = None,
                 script: str | None = None, argv: Sequence[str] | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        faults.arm_from_env()   # the fault-injection test switch (no-op when unset)
        budget_pct = parse_max_overhead(max_overhead)
        self.mode = mode
        self.stats_every = max(1, int(stats_every))
        self.global_hooks = global_hooks
        self.discover_losses = discover_losses
        self.optimizers: list[Any] = _as_list(optimizer)
        self.index = ModelIndex()
        self.rank_info: RankInfo = current_rank()
        self.rank = self.rank_info.rank
        self._rank_seen = rank_probe()   # refresh_rank reads the rank again when it changes
        self._rank_checks = 0
        self.session = Session(on_sink_failed=self._sink_failed)
        self.gate = Gate(self.session, self.rank)
        self.gate.roots = self.index.roots   # the same list: roots added later are served
        self.gate.root_names = self.index.root_names   # (the same list, likewise)
        self.gate.finding_sink = self.emit_provisional_finding
        self._hello_msg: Hello | None = None
        self.emitter = StepEmitter(self)
        self.faults = faults.FaultReporter(self._internal_finding)
        self.observers = ObserverSet(self.faults)
        self.params = ParamTracker(self.index, self.optimizers, mode)
        self.callbacks = CaptureCallbacks(
            gate=self.gate, observers=self.observers, faults=self.faults, emitter=self.emitter,
            index=self.index, params=self.params, optimizers=self.optimizers,
            refresh_rank=self.refresh_rank, resolve_module=self.resolve_module)
        self.capture = Capture(self.callbacks, self.observers, self.index, self.gate,
                               mode=mode, stats_every=self.stats_every,
                               global_hooks=global_hooks, optimizers_known=bool(self.optimizers))
        self.callbacks.capture = self.capture
        self.capture.optimizers = self.optimizers
        # the optimizer step hooks (registered on each optimizer, or process-wide)
        self.optimizer_pre = self.callbacks.optimizer_pre
        self.optimizer_post = self.callbacks.optimizer_post
        self.compiled = CompiledModules(self, compile_eager_steps)
        self.capture.on_step_end = self._step_ended
        self.budget: Budget | None = None
        if budget_pct is not None:
            self.budget = Budget(budget_pct, mode, self.stats_every, self.capture.set_rates,
                                 self._budget_exceeded)
        self._handles: list[Any] = []
        self._hooked: set[int] = set()
        self.optimizer_hooked: set[int] = set()   # ids of optimizers with hooks of their own
        self._refreshed: dict[int, int] = {}
        self.sinks: Any = None   # training.sinks.RunSinks
        self.closed = False
        self.forked = False   # set in a forked child, where this watch is inert (processes)
        self.interrupted = ""  # the signal that ended the run (signals.SignalClose)
        self.signals = SignalClose(self)
        kinds = _breakpoint_kinds(break_on)
        from tensorscope.training.sinks import SinkConfig, build_sinks

        self.sinks = build_sinks(self.session, self.gate, SinkConfig(
            report=report, record=record, overwrite=overwrite, listen=listen, wait=wait,
            allow_remote=allow_remote, connect=connect),
            rank=self.rank, world_size=self.rank_info.world_size)
        try:
            self._hello(name, script, argv, kinds)
            self._attach(model)
            if kinds:
                self.gate.set_breakpoints(kinds)
            self._install_diagnostics()
            if global_hooks:
                Watch.process_watch = self
            processes.track(self)
            tracing.install()
            self.signals.install(needed=self.sinks.report is not None
                                 or self.sinks.recorder is not None)
        except BaseException:
            self.closed = True
            self._detach(None)  # no half-attached watch: hooks removed, links closed
            raise

    # ------------------------------------------------------------- attach
    def _install_diagnostics(self) -> None:
        spec = importlib.util.find_spec("tensorscope.hooks.diagnostics")
        if spec is None or spec.origin in (None, "namespace"):  # not written yet
            return
        try:
            from tensorscope.hooks.diagnostics import default_observers

            observers = list(default_observers(self.mode))
        except Exception as exc:  # a broken diagnostic must not stop training
            print(f"tensorscope: diagnostics unavailable ({type(exc).__name__}: {exc}); "
                  f"capture continues without them", file=sys.stderr)
            return
        for obs in observers:
            self.add_observer(obs)

    def _hello(self, name: str | None, script: str | None, argv: Sequence[str] | None,
               breakpoints: list[dict[str, Any]]) -> None:
        devices = ["cpu"]
        if torch.cuda.is_available():
            devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        script = script or name or os.path.basename(sys.argv[0] or "python")
        info = self.rank_info
        self._hello_msg = Hello(script=script, argv=list(argv if argv is not None else sys.argv[1:]),
                                pid=os.getpid(), torch=torch.__version__, devices=devices,
                                rank=info.rank, mode=self.mode, started_at=time.time(),
                                world_size=info.world_size, local_rank=info.local_rank,
                                job=job_id(), breakpoints=breakpoints,
                                replicated=in_process_group())
        self.session.emit(self._hello_msg)

    def refresh_rank(self) -> None:
        """Read the rank again (training thread, at each step's start).

        ``torch.distributed`` is often initialised after TensorScope attached
        (``tensorscope run``, a ``mp.spawn`` child): when the rank or world
        size changed, the watch, its gate and its events take the new one, and
        a new ``Hello`` and ``ModuleTree`` say so. The rank is read again when
        the default group changed (``rank_probe``, cheap), at the first step,
        and every ``RANK_REREAD_STEPS`` steps after it (the environment alone
        can change it: a launcher's variables set by the script itself).
        """
        probe = rank_probe()
        checks = self._rank_checks
        self._rank_checks = checks + 1
        if probe == self._rank_seen and checks % RANK_REREAD_STEPS:
            return
        self._rank_seen = probe
        info = current_rank()
        replicated = in_process_group()
        hello = self._hello_msg
        moved = info != self.rank_info
        if not moved and (hello is None or hello.replicated == replicated):
            return
        self.rank_info = info
        self.rank = self.gate.rank = info.rank
        if hello is not None:   # a group made later (a spawn child's) says so: replicated
            self._hello_msg = dataclasses.replace(hello, rank=info.rank,
                                                  world_size=info.world_size,
                                                  local_rank=info.local_rank,
                                                  replicated=replicated)
            self.session.emit(dataclasses.replace(self._hello_msg))
        if moved and self.index.roots:
            self.session.emit(ModuleTree(roots=self.index.tree(), rank=self.rank))

    def _attach(self, model: Any) -> None:
        cap = self.capture
        for root in _as_list(model):
            if not isinstance(root, nn.Module):
                raise TypeError(f"watch() takes nn.Module objects, not {type(root).__name__}")
            self._add_root(root)
            for _, mod in root.named_modules():
                if id(mod) in self._hooked:
                    continue
                self._hooked.add(id(mod))
                self._handles.append(mod.register_forward_pre_hook(cap.forward_pre, with_kwargs=True))
                self._handles.append(mod.register_forward_hook(cap.forward, with_kwargs=True,
                                                               always_call=True))
        self._handles.append(BackwardWrapper(cap))   # the loss: what backward() is called on
        self._handles.append(ZeroGradListening(cap.grads_cleared))   # ... since zero_grad()
        for opt in self.optimizers:
            self._handles.append(opt.register_step_pre_hook(self.optimizer_pre))
            self._handles.append(opt.register_step_post_hook(self.optimizer_post))
            self.optimizer_hooked.add(id(opt))
        if self.global_hooks:
            from tensorscope.hooks.global_hooks import install

            self._handles += install(cap, self.optimizer_pre, self.optimizer_post)
            return
        from tensorscope.hooks.global_hooks import install_optimizer_discovery

        self._handles += install_optimizer_discovery(
            lambda p: self.index.param_name(p) is not None, self.optimizer_hooked,
            self.optimizer_pre, self.optimizer_post)
        if self.discover_losses:
            from tensorscope.hooks.global_hooks import install_loss_hooks

            self._handles += install_loss_hooks(cap, self._hooked, self.compiled.eager_ids)

    def _add_root(self, module: nn.Module) -> int:
        rid = self.index.add_root(module)
        self.session.emit(ModuleTree(roots=self.index.tree(), rank=self.rank))
        if compiled_inner(module) is not None:   # met in its call unless given to watch
            self.compiled.seen(module, rid, "", "_orig_mod", calling=self.global_hooks)
        return rid

    def _step_ended(self, step: StepBuffer, kind: str) -> None:
        self.emitter.step_ended(step, kind)
        self.compiled.step_ended(step.index)

    def resolve_module(self, module: nn.Module, parent: CallRecord | None) -> tuple[int, str] | None:
        """Name a module the index does not know (training thread).

        Called inside an instrumented forward: re-read that root (a submodule
        added late), else name it ``<parent path>~<Type>``. Called at top
        level (``tensorscope run``): a new root, or an alias of an equal
        parameterless root (a loss module created every step).
        """
        inner = compiled_inner(module)
        if inner is not None:   # compiled after watch: named as the module it wraps
            loc = self.index.lookup(inner)
            if loc is not None:
                self.index.alias(module, *loc)
                self.compiled.seen(module, loc[0], loc[1], loc[1], calling=True)
                return loc
        if parent is not None:
            if self._refreshed.get(parent.root) != self.step_index:  # at most once a step
                self._refreshed[parent.root] = self.step_index
                self.index.refresh(parent.root)
                loc = self.index.lookup(module)
                if loc is not None:   # the tree changed: say how it looks now
                    self.session.emit(ModuleTree(roots=self.index.tree(), rank=self.rank))
                    return loc
            prefix = f"{parent.path}~" if parent.path else "~"
            return parent.root, prefix + type(module).__name__
        if not self.global_hooks and not is_loss_module(module):
            return None
        alias = self.index.find_equal_root(module)
        if alias is not None:
            self.index.alias(module, alias)
            return alias, ""
        return self._add_root(module), ""

    def add_observer(self, obs: Observer) -> None:
        """Attach a diagnostics observer (it sees calls from now on)."""
        self.observers.add(obs, self)

    def internal_error(self, where: str, exc: BaseException, effect: str = "capture goes on",
                       *, module: str = "", phase: str = "forward") -> None:
        """A bug in TensorScope at one of its boundaries, said once per ``where``
        (``faults.FaultReporter``); the caller switched off what failed."""
        self.faults.internal_error(where, exc, effect, module=module, phase=phase)

    def _sink_failed(self, sink: Any, exc: Exception) -> None:
        """A sink raised: the session switched it off; said once, as any internal error."""
        self.internal_error(f"{type(sink).__name__} sink", exc, "it is switched off, the "
                            "other sinks go on", phase="step")

    def _internal_finding(self, phase: str, module: str, message: str) -> None:
        self.emitter.finding("internal_error", "error", phase, 0, module, message)

    # ------------------------------------------------- WatchContext (observers)
    @property
    def roots(self) -> list[nn.Module]:
        """The root modules, in the order first seen."""
        return self.index.roots

    @property
    def root_names(self) -> list[str]:
        """Display names of the roots (type name, ``#2`` when repeated)."""
        return self.index.root_names

    @property
    def param_grad_norms(self) -> bool:
        """Whether the current step's summary will carry every parameter's gradient
        norm (``full`` mode, and every ``stats_every`` steps in ``default``)."""
        return self.mode == "full" or (self.mode != "shapes" and self.capture.step.param_step)

    @property
    def step_index(self) -> int:
        """The index of the current (unfinished) step."""
        return self.capture.step.index

    @property
    def stats_step(self) -> bool:
        """Whether the current step takes activation statistics."""
        return self.capture.step.stats_step

    def function_raised(self, name: str, where: str, inputs: list[tuple[str, Any]],
                        exc: BaseException, root: int, module: str) -> None:
        """A wrapped function (a functional loss) raised: see ``WatchContext``."""
        self.callbacks.function_raised(name, where, inputs, exc, root, module)

    def note_eval_loss(self, value: torch.Tensor) -> None:
        """A loss computed with gradients off outside the models (a validation step's
        functional loss): the inference step's loss unless a forward returned one."""
        step = self.capture.step
        if step.output_loss is None and value.numel() == 1 and value.is_floating_point():
            step.output_loss = value.detach().reshape(())

    def current_call(self) -> CallRecord | None:
        """The innermost module call running now (None outside every forward)."""
        stack = self.capture.stack
        return stack[-1] if stack else None

    def step_calls(self) -> list[CallRecord]:
        """The module calls of the running step so far (read-only)."""
        return self.capture.step.calls

    def module_path(self, module: nn.Module) -> tuple[int, str] | None:
        """``(root, path)`` of a module, or None."""
        return self.index.lookup(module)

    def param_name(self, param: Any) -> tuple[int, str, str] | None:
        """``(root, module path, parameter name)``, or None."""
        return self.index.param_name(param)

    def defer(self, tensors: dict[str, torch.Tensor]) -> int:
        """Queue device scalars for this step's one host transfer; returns a handle."""
        step = self.capture.step
        handle = len(step.deferred)
        try:
            names = {k: step.buf.add(v.detach()) for k, v in tensors.items()}
        except NoValues:   # a meta-device tensor: nothing comes over, the handle's dict is empty
            names = {}
        step.deferred.append((handle, names))
        return handle

    def emit_finding(self, kind: str, severity: str, phase: str, root: int, module: str,
                     message: str, step: int | None = None) -> None:
        """Emit a finding the first time per (kind, root, module); count it after.

        ``step`` is the step the problem was seen in (default: the current
        step; diagnostics that decide at step end pass the finished step).
        """
        self.emitter.finding(kind, severity, phase, root, module, message, step=step)

    def revise_finding(self, kind: str, severity: str, root: int, module: str,
                       message: str) -> bool:
        """Change the severity and message of a finding emitted before; False if none."""
        return self.emitter.revise(kind, root, module, severity, message)

    def emit_provisional_finding(self, kind: str, severity: str, phase: str, root: int,
                                 module: str, message: str) -> None:
        """A finding a breakpoint says at once, before it pauses; the step end's own
        finding of the same key and step replaces it instead of counting again."""
        self.emitter.finding(kind, severity, phase, root, module, message, provisional=True)

    # ------------------------------------------------------------- budget
    def budget_rates(self) -> dict[str, Any] | None:
        """The rates ``max_overhead`` chose (``StepSummary.rates``), or None."""
        return self.budget.rates() if self.budget is not None else None

    def budget_step(self, step: StepBuffer) -> None:
        """Give the budget a finished step's meter reading (training thread)."""
        if self.budget is None:
            return
        try:
            self.budget.step_finished(step)
        except Exception as exc:   # the budget is off, the capture goes on at its last rates
            self.budget = None
            print(f"tensorscope: the overhead budget failed and is off: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)

    def _budget_exceeded(self, text: str) -> None:
        print(f"tensorscope: {text}", file=sys.stderr)
        self.emit_finding("overhead_budget", "warning", "forward", 0, "", text)

    def hand_over(self) -> None:
        """The script started ``torch.multiprocessing.spawn`` children that train under
        watches of their own: a watch that saw no step yet writes no report (the
        children's merged report takes its place)."""
        if self.sinks is not None and self.capture.step.index == 0 and not self.capture.step.calls:
            self.sinks.drop_report()

    # ------------------------------------------------------------ public API
    def step(self) -> None:
        """Mark a batch boundary explicitly (loops without an optimizer)."""
        self.capture.mark_explicit()
        self.capture.end_step("train")

    def close(self, exit_code: int | None = None) -> None:
        """Flush the last step, remove every handle, close the sinks (idempotent)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.end_open_step()
        except Exception as exc:   # a boundary: closing never raises into the script
            self.internal_error("close", exc, "the last step is lost", phase="step")
        finally:
            self._detach(exit_code)

    def _detach(self, exit_code: int | None) -> None:
        """Remove every handle and close every sink; each part runs even when one
        before it failed (reported once each, never raised)."""
        if Watch.process_watch is self:
            Watch.process_watch = None
        for where, part in (("signal handlers", self.signals.uninstall),
                            ("compiled modules restore", self.compiled.restore),
                            ("detach", self._remove_handles),
                            ("diagnostics' detach", self.observers.detach_all),
                            ("findings flush", self.emitter.flush_findings),
                            ("bye", lambda: self.session.emit(Bye(
                                exit_code=exit_code or 0, steps=self.capture.step.index,
                                rank=self.rank))),
                            ("sinks close", self._close_sinks),
                            ("step debugger close", self.gate.close),
                            ("session close", self.session.close),
                            ("detach", self._forget)):
            try:
                part()
            except Exception as exc:
                self.internal_error(where, exc, "closing goes on", phase="step")

    def _remove_handles(self) -> None:
        self.capture.close()
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._hooked.clear()

    def _close_sinks(self) -> None:
        if self.sinks is not None:
            self.sinks.close()

    def _forget(self) -> None:
        self.index.clear()
        self.params.clear()
        self.optimizers.clear()
        self.capture.step = StepBuffer(self.capture.step.index, False)

    def exception_raised(self, exc: BaseException, traceback_text: str | None = None) -> None:
        """Report an exception that escaped the script or the ``with`` block."""
        err = self.capture.last_module_error
        root = path = None
        if err is not None and err[2] == type(exc).__name__:
            root, path = err[0], err[1]
            self.capture.raised_open = False
            self.emitter.exception_escaped(root, path)
        elif not self._script_exception(exc) and self.rank_info.world_size > 1:
            self._rank_failed(exc)
        self.session.emit(ExceptionRaised(
            step=self.step_index, rank=self.rank, root=root, module=path,
            type=type(exc).__name__, message=str(exc),
            traceback=traceback_text if traceback_text is not None else
            "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))))

    def _script_exception(self, exc: BaseException) -> bool:
        """An exception raised by the script's own code (no module, no backward): an
        ``exception`` finding at the model's root when it is a PyTorch training error
        with a known fix (a parameter changed in place outside ``no_grad``).
        Returns whether it was."""
        from tensorscope.hooks.diagnostics.hints import script_exception_hint
        found = script_exception_hint(exc)
        if found is None:
            return False
        phase, hint = found
        names = self.index.root_names
        name = names[0] if names else "the model"
        first = str(exc).splitlines()[0].rstrip(".") if str(exc) else type(exc).__name__
        self.emitter.finding("exception", "error", phase, 0, "",
                             f"{type(exc).__name__} in the script's own code at step "
                             f"{self.step_index} (training {name}): {first}. Hint: {hint}")
        return True

    def _rank_failed(self, exc: BaseException) -> None:
        """A rank of a job ends with its own exception raised outside any module: a
        finding, so the job's report and GUI name the rank that failed and why
        (its peers' lost collectives are findings of theirs)."""
        name = type(exc).__name__
        if not isinstance(exc, Exception) or lost_peer(name, str(exc)):
            return
        frames = traceback.extract_tb(exc.__traceback__)
        own = [f for f in frames if "site-packages" not in f.filename
               and not f.filename.startswith(_OWN_DIRS)]
        last = (own or frames)[-1:]
        where = f"{os.path.basename(last[0].filename)}:{last[0].lineno}" if last else ""
        self.emitter.finding("exception", "error", "step", 0, "", own_failure_message(
            name, str(exc), self.rank, self.step_index, where))

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        """Close; an exception leaving the block is reported, and the report's exit
        code is the one it ends the script with (as under ``tensorscope run``)."""
        code = None
        if isinstance(exc, SystemExit):   # sys.exit(n): an exit, not an error
            code = exit_status(exc.code)
        elif exc is not None:
            code = 130 if isinstance(exc, KeyboardInterrupt) else 1
            try:   # the user's exception goes on unchanged, whatever happens here
                self.exception_raised(exc)
            except Exception as err:
                self.internal_error("exception report", err, "the exception is not recorded")
        self.close(exit_code=code)


def exit_status(code: Any) -> int:
    """The exit status ``sys.exit(code)`` gives: None is 0, an int itself, else 1."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1
