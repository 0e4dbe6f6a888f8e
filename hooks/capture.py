"""The hook functions (training thread).

``Capture`` owns the call stack and the current ``StepBuffer``. Its
``forward_pre``/``forward`` methods are the module hooks (per module in
``watch`` mode, global in ``tensorscope run``); ``on_grad`` is the
``Tensor.register_hook`` callback on module outputs. Each hook checks one
flag, records metadata and queues on-device reductions into the step's
``ScalarBuffer``, and returns; ``tensorscope.hooks.stepend`` finishes a step
with one host transfer.

Tensors are tracked by identity within a step (``step_records.FlowEntry``):
this gives the module dataflow graph, and lets a call reuse the finite check
its producer already queued.
"""
from __future__ import annotations

import sys
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable

import torch
from torch.nn.utils.parametrize import ParametrizationList

from tensorscope.hooks import copies
from tensorscope.hooks.backward_calls import backward_loss, in_backward
from tensorscope.hooks.compiled import COMPILING_CHECKS
from tensorscope.hooks.flatten import flatten, flatten_args, meta, shared_metas
from tensorscope.hooks.lead_in import LeadIn
from tensorscope.hooks.meter import OverheadMeter
from tensorscope.hooks.observer import CallRecord
from tensorscope.hooks.registry import is_loss_module, is_stand_in
from tensorscope.hooks import tensor_kinds
from tensorscope.hooks.stats import activation_stats, finite_probe, grad_norm
from tensorscope.hooks.step_records import (  # noqa: F401 (StepBuffer re-exported)
    FlowEntry, GradEntry, StepBuffer, inside, node_name, split_joined, tensor_version)

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.callbacks import CaptureHost
    from tensorscope.hooks.gate import Gate
    from tensorscope.hooks.observers import ObserverSet
    from tensorscope.hooks.registry import ModelIndex

_Tensor = torch.Tensor
_grad_enabled = torch.is_grad_enabled
_exc_info = sys.exc_info
_ns = time.perf_counter_ns   # the overhead meter's clock (hooks.meter)
_get_ident = threading.get_ident
_no_torch_function = torch._C.DisableTorchFunctionSubclass
_dynamo, _functorch_level = COMPILING_CHECKS   # compiled.is_compiling, inlined in the hooks
# What ``torch.no_grad`` does on entry and exit, without the context manager's
# cost (a few microseconds per hook): the on-device reductions must not build graph.
_set_grad_enabled = getattr(torch._C, "_set_grad_enabled", torch.set_grad_enabled)


# Modules that cannot turn finite values into NaN/Inf and pass NaN on: on steps
# without statistics their output takes its input's finite probe instead of a
# reduction of its own (the ReLU after each BatchNorm of a ResNet is a third of
# its calls). Clamping ones may map an infinity to a finite value; the module
# that produced the infinity is still the one named. The elementwise activations
# here have no parameters and are bounded by their input's magnitude (a NaN
# weight of a PReLU, or an output twice the input's, could not be seen through
# the input's probe: those take a reduction of their own).
FINITE_PASSING = (torch.nn.ReLU, torch.nn.LeakyReLU, torch.nn.Identity, torch.nn.Flatten,
                  torch.nn.Unflatten, torch.nn.modules.dropout._DropoutNd,
                  torch.nn.MaxPool1d, torch.nn.MaxPool2d, torch.nn.MaxPool3d,
                  torch.nn.Tanh, torch.nn.Sigmoid, torch.nn.GELU, torch.nn.SiLU, torch.nn.Mish,
                  torch.nn.Hardtanh, torch.nn.Hardsigmoid, torch.nn.Softsign,
                  torch.nn.LogSigmoid, torch.nn.ELU, torch.nn.CELU)


# A step that never ends (``Watch.step()`` called once, or an evaluation loop
# with gradients on between two optimizer steps) is cut at the next root call
# past this many module calls, so its records stay bounded (~1-2 KB a call).
MAX_STEP_CALLS = 50_000


def _job_of_several() -> bool:
    """Whether this process is a rank of a ``torch.distributed`` job of two or more."""
    from tensorscope.common.distributed import current_rank, in_process_group

    return in_process_group() and current_rank().world_size > 1


def _joining(waiter: int, ident: int) -> bool:
    """Whether thread ``waiter`` is blocked in ``Thread.join()`` of thread ``ident``
    (the innermost frames of ``waiter`` are ``threading``'s join, whose ``self`` is
    the thread joined). Reads one frame snapshot; never raises."""
    try:
        frame = sys._current_frames().get(waiter)
        while frame is not None and frame.f_code.co_filename == threading.__file__:
            if frame.f_code.co_name in ("join", "_wait_for_tstate_lock"):
                joined = frame.f_locals.get("self")
                return isinstance(joined, threading.Thread) and joined.ident == ident
            frame = frame.f_back
    except Exception:   # a frame that cannot be read: not known to be joining
        return False
    return False


_CALL_IMPL = torch.nn.Module._call_impl.__code__


def _outermost_call() -> bool:
    """Whether the module call whose hook runs now is inside no other module's forward
    on this thread (one ``Module._call_impl`` frame on the stack: its own)."""
    frame: Any = sys._getframe(1)
    calls = 0
    while frame is not None:
        if frame.f_code is _CALL_IMPL:
            calls += 1
            if calls > 1:
                return False
        frame = frame.f_back
    return True


def _param_state(module: torch.nn.Module) -> tuple[weakref.ref, int] | None:
    """A weak reference to the first parameter of ``module`` and its version (None
    while a ``functional_call`` stands another tensor in for it)."""
    try:
        p = next(module.parameters(), None)
        return None if p is None or is_stand_in(p) else (weakref.ref(p), p._version)
    except Exception:   # an odd parameter (no version counter, no weak reference)
        return None


def _inside_called(locs: set[tuple[int, str]], loc: tuple[int, str]) -> bool:
    """Whether the module at ``loc`` lies inside one called at ``locs`` (its root's
    path ``""`` or a dotted prefix of its path)."""
    rid, path = loc
    if not path:
        return False
    if (rid, "") in locs:
        return True
    parts = path.split(".")
    return any((rid, ".".join(parts[:n])) in locs for n in range(1, len(parts)))


class Capture:
    """The hooks and the step state of one watch.

    It calls out only to its ``host`` (``callbacks.CaptureHost``) and to its
    ``observers`` (``observers.ObserverSet``). A copy or pickle of it (made
    with a deep copy or ``torch.save`` of a watched model) is ``copies.INERT``.
    """

    def __deepcopy__(self, memo: dict) -> Any:
        return copies.INERT

    def __reduce__(self) -> tuple[Any, tuple]:
        return copies.inert, ()

    def __init__(self, host: "CaptureHost", observers: "ObserverSet", index: "ModelIndex",
                 gate: "Gate", *, mode: str, stats_every: int, global_hooks: bool,
                 optimizers_known: bool) -> None:
        self.host = host
        self.observers = observers
        # module type -> the forward observers (``ObserverSet.for_type``; one dict for good)
        self.dispatch = observers.dispatch
        self.index = index
        self.mode = mode
        # the rates: statistics, parameter numbers, metadata refresh (hooks.budget sets them)
        self.stats_every = 1 if self.mode == "full" else max(1, stats_every)
        self.params_every = max(1, stats_every)
        self.meta_every = 1
        self.updates = 0   # training steps finished (``StepSummary.updates``)
        self.lead_in = LeadIn()   # the forwards with gradients off that begin an iteration
        self.prev_calls: list[CallRecord] = []   # the last step's calls (metadata reuse)
        self.global_mode = global_hooks
        self.gate = gate
        self.active = True
        self.stack: list[CallRecord] = []
        self.step = self._new_step(0)
        self.explicit_steps = False      # Watch.step() was called: no automatic boundaries
        # a framework ends each training batch's step itself (Lightning's manual
        # optimization steps several optimizers a batch): optimizer steps end none
        self.batch_steps = False
        self.optimizers_known = optimizers_known
        # the watch's optimizers (the same list; ones seen stepping join it)
        self.optimizers: list[Any] = []
        self._optimized: tuple[tuple, frozenset[int]] = ((), frozenset())
        self.join_repeats = True   # a repeated root may join its step (_builds_graph)
        self.end_pending = False   # an optimizer stepped, another follows (callbacks._ends_later)
        # before an optimizer is known: the step's first root's first parameter and
        # its version when the step began (_accumulates)
        self._first_param: tuple[weakref.ref, int] | None = None
        self.probe = self.mode != "shapes"
        self.meter = OverheadMeter()
        self.passes_finite: dict[type, bool] = {}   # module type -> in FINITE_PASSING
        self._last_exc_id = 0
        self.last_module_error: tuple[int, str, str] | None = None
        # a module exception was reported and the script has not yet shown it caught it
        # (a root call returning or beginning, an optimizer step: ``host.exception_caught``)
        self.raised_open = False
        # a parametrized weight read outside any forward (``_pre``): its ParametrizationList
        self.aside: torch.nn.Module | None = None
        self.on_step_end: Callable[[StepBuffer, str], None] = lambda step, kind: None
        # The training thread: the one whose forwards make up the steps (the thread that
        # built the watch, until another claims it: ``_foreign_thread``, ``claim_thread``).
        self.thread = _get_ident()
        self.thread_active = False   # the training thread has run a captured forward
        self._foreign_noted: set[str] = set()
        # a tensor subclass with its own __torch_function__ was seen: from then on the
        # hooks and the step end run with subclass torch functions off, so that the
        # subclass never sees what TensorScope reads (a subclass that logs or counts
        # its calls sees the user's calls only)
        self.subclasses = False

    def set_rates(self, stats_every: int, params_every: int, meta_every: int) -> None:
        """Statistics every ``stats_every`` steps (1 in ``full``), parameter norms
        and update ratios every ``params_every``, metadata read afresh every
        ``meta_every`` (from the next step on; ``hooks.budget`` calls this)."""
        self.stats_every = max(1, int(stats_every))
        self.params_every = max(1, int(params_every))
        self.meta_every = max(1, int(meta_every))

    def _new_step(self, index: int) -> StepBuffer:
        """The step's rates: statistics, parameter numbers, metadata (``set_rates``)."""
        on = self.mode != "shapes"
        return StepBuffer(index, on and index % self.stats_every == 0,
                          on and index % self.params_every == 0, index % self.meta_every == 0)

    # ------------------------------------------------------------ forward pre
    def forward_pre(self, module: torch.nn.Module, args: tuple, kwargs: dict | None = None) -> None:
        """Module forward pre-hook (returns None: inputs unchanged)."""
        if not self.active or _dynamo() or _functorch_level() is not None:
            return None
        if _get_ident() != self.thread and self._foreign_thread():
            return None
        t0 = _ns()
        try:
            if self.subclasses:
                with _no_torch_function():
                    self._pre(module, args, kwargs)
            else:
                self._pre(module, args, kwargs)
        except Exception as exc:
            self._pre_failed(module, exc)
        m = self.meter   # a root call may have ended a step: count only after its end
        m.train_ns += _ns() - (t0 if t0 > m.cut else m.cut)
        return None

    def _foreign_thread(self) -> bool:
        """A forward on a thread other than the training thread. Inside a backward
        (checkpoint recomputation on autograd's threads, while the training thread
        waits) it is part of the step. With ``watch()`` built on a thread that never
        ran a forward, this thread becomes the training thread; so does it, between
        steps, once the training thread has ended (a script that trained in a
        worker thread, joined it, and trains on). Otherwise it is
        skipped (its own root and stack would be needed; the step's records stay
        right), said once per thread on stderr. In global mode (``tensorscope run``)
        a thread claims a training thread that has not trained only while that one
        waits in ``join()`` for it (a script that trains in a worker thread), and at
        its outermost module call (a worker that started before the main thread
        reached ``join()`` is claimed at its next root call, not halfway through a
        forward): a thread that prefetches with a module while the main thread waits
        on a queue does not. Returns True to skip."""
        if in_backward():
            return False
        if not self.step.calls and not self.stack and (
                (not self.thread_active and (not self.global_mode or (
                    _joining(self.thread, _get_ident()) and _outermost_call())))
                or not any(t.ident == self.thread for t in threading.enumerate())):
            self.claim_thread()
            return False
        self._note_foreign("module forwards")
        return True

    def claim_thread(self) -> None:
        """Make the calling thread the training thread (between steps)."""
        self.thread = _get_ident()
        self.thread_active = True

    def _note_foreign(self, what: str) -> None:
        if what in self._foreign_noted:   # once per run, not once per thread
            return
        self._foreign_noted.add(what)
        name = threading.current_thread().name
        print(f"tensorscope: note: {what} on threads other than the training thread "
              f"(here {name!r}) are not captured; they run unchanged", file=sys.stderr)

    def from_foreign_thread(self, what: str) -> bool:
        """For the optimizer hooks: whether to ignore this call because it comes from a
        thread other than the training thread while that one has a step open (between
        steps, the calling thread becomes the training thread)."""
        if _get_ident() == self.thread:
            return False
        if not self.step.calls and not self.stack:
            self.claim_thread()
            return False
        self._note_foreign(what)
        return True

    def _pre_failed(self, module: torch.nn.Module, exc: Exception) -> None:
        """The pre-hook failed: this call is not captured (its forward hook finds no
        call of its own on the stack); reported once."""
        stack, calls = self.stack, self.step.calls
        if stack and calls and stack[-1] is calls[-1] and stack[-1].module is module:
            stack.pop()   # failed after the push: the post-hook must not pair with it
        self.host.internal_error("forward pre-hook", exc, "this module call is not captured",
                                  module=self._path_of(module))

    def _path_of(self, module: torch.nn.Module) -> str:
        try:
            loc = self.index.lookup(module)
        except Exception:
            return ""
        return loc[1] if loc is not None else ""

    def _pre(self, module: torch.nn.Module, args: tuple, kwargs: dict | None) -> None:
        guarded = self.subclasses
        stack = self.stack
        parent = stack[-1] if stack else None
        if parent is None and (self.aside is not None or type(module) is ParametrizationList):
            # a parametrized weight (weight_norm, spectral_norm) read outside any forward,
            # by a model's init or a log line: neither a root nor a step, nor its modules
            if self.aside is None:
                self.aside = module
            return
        loc = self.index.lookup(module)
        if loc is None:
            loc = self.host.resolve_module(module, parent)
            if loc is None:
                return
        if parent is None:
            if in_backward():
                # a recomputation during backward (torch.utils.checkpoint, transformers'
                # gradient checkpointing): part of the call being differentiated, not a
                # call, a root or a step of its own
                return
            self.thread_active = True
            self._root_starting(loc, module, args, kwargs)
        step = self.step
        calls = step.calls
        grad_on = _grad_enabled()
        call = CallRecord(step.index, len(calls), loc[0], loc[1], module, parent, grad_on)
        calls.append(call)
        if grad_on:
            step.any_grad = True
        call.pre_exc = _exc_info()[1]
        call.inputs = inputs = flatten_args(args, kwargs)   # one tensor: no walk
        self._track_inputs(call, inputs, step, not step.meta_step)
        stack.append(call)
        if self.subclasses and not guarded:   # the first subclass tensor: this call's inputs
            with _no_torch_function():
                self._observe_pre(call, module, parent)
        else:
            self._observe_pre(call, module, parent)

    def _observe_pre(self, call: CallRecord, module: torch.nn.Module,
                     parent: CallRecord | None) -> None:
        mtype = type(module)
        for obs, fn in (self.dispatch.get(mtype) or self.observers.for_type(mtype))[
                0 if parent is not None else 2]:
            try:
                fn(call)
            except Exception as exc:
                self.observers.failed(obs, "on_forward_pre", exc)
        if self.gate.armed:
            self.host.gate_forward_pre(call)

    def _track_inputs(self, call: CallRecord, inputs: list, step: StepBuffer,
                      reuse: bool = False) -> None:
        """Metadata, producers and finite probes of the inputs (most inputs are
        outputs seen already: only new or modified ones are probed). ``reuse``:
        take the metadata of the same call last step, if it is there."""
        prev = self._previous(call, len(inputs), True) if reuse else None
        if prev is not None:
            call.in_meta = prev.in_meta   # read-only, shared (see hooks.budget)
        metas = None if prev is not None else call.in_meta
        for path, v in inputs:
            if type(v) is not _Tensor:   # not a tensor, or a subclass (Parameter, ...)
                if isinstance(v, _Tensor):
                    self._odd_input(call, path, v, step, None, metas)
                elif metas is not None:
                    metas.append(meta(path, v))
                continue
            try:
                if metas is not None:
                    metas.append(meta(path, v))
                self._track_input(call, v, step)
            except Exception as exc:   # a tensor the fast path cannot take
                self._odd_input(call, path, v, step, exc, metas)
        if metas is not None:
            call.in_meta = shared_metas(metas)

    def _previous(self, call: CallRecord, n: int, inputs: bool) -> CallRecord | None:
        """The same call (same index, same module) of the last step, if it had
        ``n`` inputs (or outputs): its metadata stands in between two refreshes."""
        prev = self.prev_calls
        i = call.index
        if i < len(prev):
            p = prev[i]
            if p.module is call.module and len(p.in_meta if inputs else p.out_meta) == n:
                return p
        return None

    def _track_input(self, call: CallRecord, v: _Tensor, step: StepBuffer) -> None:
        """The producer and finite probe of one tensor input."""
        ent = step.flow.get(id(v))
        if ent is None or ent.ref() is not v:
            ent = self._new_input(v, step)
        elif ent.version != tensor_version(v):
            ent.refresh(v, self._probe(v, step) if self.probe else None)
        ent.consumed = True
        call.in_entries.append(ent)
        if call.mem_before is None and v.is_cuda:
            call.mem_before = torch.cuda.memory_allocated(v.device)

    @staticmethod
    def _probe(v: _Tensor, step: StepBuffer) -> int | None:
        """``finite_probe`` with grad mode off (the reduction must not join the graph)."""
        if not _grad_enabled():
            return finite_probe(v, step.buf)
        _set_grad_enabled(False)
        try:
            return finite_probe(v, step.buf)
        finally:
            _set_grad_enabled(True)

    def _new_input(self, v: _Tensor, step: StepBuffer) -> FlowEntry:
        probe = self._probe(v, step) if self.probe else None
        ent = FlowEntry(v, None, f"in{step.n_inputs}", probe)
        step.n_inputs += 1
        step.flow[id(v)] = ent
        return ent

    def _root_starting(self, loc: tuple[int, str], module: torch.nn.Module, args: tuple = (),
                       kwargs: dict | None = None) -> None:
        if self.raised_open:
            self.host.exception_caught()
        step = self.step
        if self.end_pending:   # the optimizer that usually follows did not step
            self.end_pending = False
            self.end_step("train")
            step = self.step
        if step.calls and (len(step.calls) >= MAX_STEP_CALLS or (
                not self.explicit_steps
                and self._root_starts_step(step, module, loc, args, kwargs))):
            self.end_step("train" if step.saw_backward else "inference")
            step = self.step
        if self.stack:  # left behind by an interrupted forward (KeyboardInterrupt)
            self.stack.clear()
        self.lead_in.root_starting(module, _grad_enabled())
        step.roots_called.add(id(module))
        step.root_locs.add(loc)
        if not step.calls:
            self.lead_in.step_beginning(args, kwargs, _grad_enabled())
            self.host.step_beginning(step.index)
            if not self.optimizers_known:
                self._first_param = _param_state(module)

    def _root_starts_step(self, step: StepBuffer, module: torch.nn.Module,
                          loc: tuple[int, str], args: tuple = (),
                          kwargs: dict | None = None) -> bool:
        """Whether a root call starting now begins a new step.

        An inference step (roots called with gradients off) groups the model
        and its loss, and ends when a module called from outside any forward is
        called again (``model.decode(z)`` calling two children is one step; a
        frozen teacher's forward joins the student's training step after it).
        A child of a module called in the step begins a new one too (sampling with
        ``model.decode(z)`` after an evaluation batch of ``model``). A model called
        again as the last training iteration began stays in the step
        (``_begins_iteration``). With no
        optimizer known, a finished backward also ends the step, and so
        does a repeated root unless its step is building a graph for a backward
        to come (``_builds_graph``).
        """
        if step.inference_open:
            if id(module) in step.roots_called and self._begins_iteration(step, module):
                return False
            if id(module) in step.roots_called or _inside_called(step.root_locs, loc):
                return True
            if _grad_enabled():   # training may follow: cut here if it was not a teacher's
                step.frozen_at = len(step.calls)
                step.frozen_loss = (step.loss, step.output_loss)
            return False
        if self.optimizers_known:
            if not step.saw_backward and not step.optimizer_steps \
                    and step.calls[0].module is module:
                step.joins.append(len(step.calls))   # an evaluation before? (_evaluated)
            return False
        if step.saw_backward:
            self.join_repeats = True
            return not self._accumulates(module)
        return id(module) in step.roots_called and not (
            self._takes_graph(args, kwargs) or self._builds_graph(step, module))

    def _begins_iteration(self, step: StepBuffer, module: torch.nn.Module) -> bool:
        """Whether a root called again in an inference step belongs to the training
        step that follows, as the forwards with gradients off that began the last
        training step did (``LeadIn``): a DQN's action chosen by the policy under
        ``no_grad`` at every move, double DQN's next actions selected by it. Not
        when the model is in eval mode now or was in this step, the step computed a
        loss, or its first call took the batch the last training step took (an
        evaluation of that batch after the update): those are evaluations."""
        if not getattr(module, "training", False) or self.lead_in.batch_again \
                or step.loss is not None or step.output_loss is not None:
            return False
        if not all(c.training for c in step.calls if c.parent is None and c.module is module):
            return False
        return self.lead_in.repeats(module, _grad_enabled())

    @staticmethod
    def _evaluated(step: StepBuffer) -> int:
        """How many of a training step's parts (cut at ``joins``) before the first
        that backward reached were evaluation forwards: a loop run in eval mode
        with gradients on (a forgotten ``no_grad``) after an optimizer step, whose
        forwards joined the next training step. A part counts when its first call
        ran in eval mode and none of its root outputs' gradients arrived (with no
        gradient entry there is nothing to tell: it stays in the step)."""
        bounds = step.joins + [len(step.calls)]
        graded: dict[int, bool] = {}
        for call, ent in step.root_outputs:
            if ent.grad is not None:
                graded[id(call)] = graded.get(id(call), False) or ent.grad.arrived
        n, start = 0, 0
        for end in bounds[:-1]:
            first = step.calls[start]
            got = [v for c in step.calls[start:end] if (v := graded.get(id(c))) is not None]
            if first.training or not got or any(got):
                break
            n, start = n + 1, end
        return n

    def _evaluation_before(self, step: StepBuffer) -> bool:
        """Whether the forwards without gradients that began a training step (up to
        ``frozen_at``) were an evaluation of their own, not a frozen teacher's part
        of the step: no root call after them took one of their outputs, and they
        ran a model an optimizer trains (an evaluation batch, a GAN's samples,
        before another model's training step). A teacher no optimizer holds, or
        one whose output the student or the loss module takes, stays in the step."""
        cut = step.frozen_at
        calls = step.calls
        ours = {id(ent) for call, ent in step.root_outputs if call.index < cut}
        if any(id(ent) in ours for c in calls[cut:] if c.parent is None
               for ent in c.in_entries):
            return False
        optimized = self._optimized_params()
        return any(id(p) in optimized for c in calls[:cut] if c.parent is None
                   for p in c.module.parameters())

    def _optimized_params(self) -> frozenset[int]:
        """``id()`` of every parameter the known optimizers hold (kept while their
        parameter groups keep their sizes)."""
        key = tuple((id(g["params"]), len(g["params"])) for o in self.optimizers
                    for g in getattr(o, "param_groups", ()))
        if key != self._optimized[0]:
            ids = frozenset(id(p) for o in self.optimizers
                            for g in getattr(o, "param_groups", ()) for p in g["params"])
            self._optimized = (key, ids)
        return self._optimized[1]

    def _accumulates(self, module: torch.nn.Module) -> bool:
        """Whether a root called after a backward, before any optimizer step names
        the optimizer, is the next micro-batch of gradient accumulation (or the
        next phase of a GAN's step): the module is in training mode with
        gradients on, and the first parameter of the step's first root has its
        gradient, unchanged in place since the step began (a manual update, or
        ``zero_grad()``, begins the next step)."""
        state = self._first_param
        if state is None or not (_grad_enabled() and getattr(module, "training", False)):
            return False
        p = state[0]()
        return p is not None and p.grad is not None and p._version == state[1]

    def _takes_graph(self, args: tuple, kwargs: dict | None) -> bool:
        """Whether a root called again takes a tensor that needs a gradient (with
        gradients on, before any optimizer step names the optimizer): it extends the
        graph of a backward to come, whatever its mode (a frozen loss network in eval
        mode, VGG features of the output and of the target, called twice a step)."""
        if not (self.join_repeats and _grad_enabled()):
            return False
        values = list(args) + (list(kwargs.values()) if kwargs else [])
        return any(isinstance(v, _Tensor) and v.requires_grad for v in values)

    def _builds_graph(self, step: StepBuffer, module: torch.nn.Module) -> bool:
        """Whether a root called again, before any optimizer step names the
        optimizer, belongs to the step's graph: a policy called at every move of
        an episode, a siamese pair, a sequence decoded token by token. It does
        when the module is in training mode, gradients are on and an output of
        the step's first root call that needs a gradient is still alive (in a
        variable, a list, or saved by the graph built on it). A forward whose output was
        dropped is inference: one step per root call, and no root joins a step
        again until a backward is seen. While that output is alive, a forward of the
        model with gradients off belongs to the step too (double DQN's next actions,
        selected by the policy under ``no_grad`` between its training forward and
        the backward)."""
        if not (self.join_repeats and getattr(module, "training", False)):
            return False
        outputs = step.root_outputs
        first = outputs[0][0] if outputs else None
        for call, ent in outputs:   # the outputs of the step's first root call
            if call is not first:
                break
            if ent.grad is not None and ent.ref() is not None:
                if call is not None and call.module is module:   # the first root again
                    step.joins.append(len(step.calls))   # a step of its own if no backward
                return True
        self.join_repeats = False
        # another root called again after a forward that joined (the loss of
        # ``out = model(x)`` rebinding ``out``): it belongs to that forward's part of
        # the step, which is cut at its joins if no backward comes (``split_joined``)
        return bool(step.joins) and first is not None and first.module is not module

    # ---------------------------------------------------------------- forward
    def forward(self, module: torch.nn.Module, args: tuple, *rest: Any) -> None:
        """Module forward hook, also called when the forward raised (``always_call``)."""
        if not self.active or _dynamo() or _functorch_level() is not None:
            return None
        if _get_ident() != self.thread and self._foreign_thread():
            return None
        t0 = _ns()
        try:
            if self.subclasses:
                with _no_torch_function():
                    self._post(module, rest[-1] if rest else None,
                               rest[0] if len(rest) == 2 else None)
            else:
                self._post(module, rest[-1] if rest else None, rest[0] if len(rest) == 2 else None)
        except Exception as exc:
            self._post_failed(module, exc)
        self.meter.train_ns += _ns() - t0
        return None

    def _post_failed(self, module: torch.nn.Module, exc: Exception) -> None:
        """The forward hook failed: close this call (and any inner ones left open) so the
        stack stays right for the calls after it; reported once."""
        stack = self.stack
        for i in range(len(stack) - 1, -1, -1):
            call = stack[i]
            if call.module is module:
                del stack[i:]
                call.finished = True
                call.inputs = call.outputs = ()
                break
        self.host.internal_error("forward hook", exc, "this module call's outputs are not "
                                  "captured", module=self._path_of(module))

    def _post(self, module: torch.nn.Module, result: Any, kwargs: dict | None) -> None:
        guarded = self.subclasses
        stack = self.stack
        if not stack:
            if module is self.aside:
                self.aside = None
            return
        call = stack[-1]
        if call.module is not module:
            call = next((c for c in reversed(stack) if c.module is module), None)
            if call is None:
                return
        if result is None:
            exc = sys.exc_info()[1]
            if exc is not None and exc is not call.pre_exc:
                self._raised(call, exc)
                return
        if stack[-1] is call:
            stack.pop()
        else:
            while stack and stack.pop() is not call:
                pass
        if kwargs and self.global_mode:  # the global pre-hook cannot see keyword inputs
            late = flatten_args((), kwargs)
            call.inputs = [*call.inputs, *late]
            call.in_meta = list(call.in_meta)   # never extend a list reused from last step
            self._track_inputs(call, late, self.step)
        call.outputs = outputs = flatten(result, "out")   # one tensor: no walk
        grad_on = _grad_enabled()
        if grad_on:
            _set_grad_enabled(False)
        try:
            self._track_outputs(call, outputs, self.step)
        finally:
            if grad_on:
                _set_grad_enabled(True)
        if call.mem_before is not None:
            call.mem_delta = self._mem_delta(call)
        call.finished = True
        if self.subclasses and not guarded:   # the first subclass tensor: this call's outputs
            with _no_torch_function():
                self._observe_post(call, module)
        else:
            self._observe_post(call, module)
        # Nothing needs them after this point: holding activations until the step
        # ends would change when memory is freed (and, on CPU, cost fresh pages).
        call.inputs = call.outputs = ()

    def _observe_post(self, call: CallRecord, module: torch.nn.Module) -> None:
        mtype = type(module)
        for obs, fn in (self.dispatch.get(mtype) or self.observers.for_type(mtype))[
                1 if call.parent is not None else 3]:
            try:
                fn(call)
            except Exception as exc:
                self.observers.failed(obs, "on_forward", exc)
        if self.gate.armed:
            self.host.gate_forward(call)
        if call.parent is None:
            self._root_finished(call)

    # ----------------------------------------------------- other tensor kinds
    def _odd_view(self, call: CallRecord, path: str, v: _Tensor,
                  exc: Exception | None) -> tuple[str, _Tensor | None]:
        """The kind of a tensor the fast path did not take, and the plain tensor its
        statistics are taken of (None: metadata only). A plain tensor that failed is
        TensorScope's own error: reported once, and that tensor gets metadata only."""
        kind = tensor_kinds.kind_of(v)
        if kind == "subclass":
            self.subclasses = True
        if kind == "plain":
            if exc is not None:
                self.host.internal_error("tensor capture", exc,
                                          "that tensor gets metadata only", module=call.path)
            return kind, None
        tensor_kinds.note(kind, f"{call.path or call.type} {path}")
        try:
            return kind, tensor_kinds.values_view(v, kind)
        except Exception:   # no view of its values to be had: metadata only
            return kind, None

    def _view_probe(self, sv: _Tensor | None, step: StepBuffer) -> int | None:
        if sv is None or not self.probe:
            return None
        try:
            return self._probe(sv, step)
        except Exception:
            return None

    def _odd_input(self, call: CallRecord, path: str, v: _Tensor, step: StepBuffer,
                   exc: Exception | None, metas: list | None) -> None:
        """An input the fast path did not take (see ``tensor_kinds``). A subclass's
        ``__torch_function__`` never sees what the capture reads. ``metas``: the
        call's metadata list, None when it reuses last step's (left untouched)."""
        with _no_torch_function():
            self._odd_input_body(call, path, v, step, exc, metas)

    def _odd_input_body(self, call: CallRecord, path: str, v: _Tensor, step: StepBuffer,
                        exc: Exception | None, metas: list | None) -> None:
        kind, sv = self._odd_view(call, path, v, exc)
        if metas is not None:
            if metas and metas[-1]["path"] == path:
                metas.pop()   # appended before the fast path failed
            metas.append(tensor_kinds.describe(path, v, kind))
        ent = step.flow.get(id(v))
        if ent is None or ent.ref() is not v:
            ent = FlowEntry(v, None, f"in{step.n_inputs}", self._view_probe(sv, step))
            step.n_inputs += 1
            step.flow[id(v)] = ent
        ent.consumed = True
        call.in_entries.append(ent)

    def _odd_output(self, call: CallRecord, path: str, v: _Tensor, step: StepBuffer,
                    exc: Exception | None, metas: list | None) -> None:
        """An output the fast path did not take: metadata, dataflow identity, the
        statistics of its values where it has any, its gradient (``tensor_kinds``)."""
        with _no_torch_function():
            self._odd_output_body(call, path, v, step, exc, metas)

    def _odd_output_body(self, call: CallRecord, path: str, v: _Tensor, step: StepBuffer,
                         exc: Exception | None, metas: list | None) -> None:
        flow = step.flow
        if metas and metas[-1]["path"] == path:
            metas.pop()   # appended before the fast path failed
        ent = flow.get(id(v))
        if ent is not None and ent.producer is call:
            del flow[id(v)]   # made by the attempt that failed
            ent = None
        kind, sv = self._odd_view(call, path, v, exc)
        if metas is not None:
            metas.append(tensor_kinds.describe(path, v, kind))
        if ent is None or ent.ref() is not v or not inside(ent.producer, call):
            ent = flow[id(v)] = FlowEntry(v, call, node_name(call.index),
                                          self._view_probe(sv, step))
        if (sv is not None and step.stats_step and call.stats is None
                and (sv.is_floating_point() or sv.is_complex())):
            if ent.stats is None:
                try:
                    ent.stats = activation_stats(sv, step.buf, self.mode == "full", ent.finite)
                except Exception:
                    ent.stats = None
            call.stats = ent.stats
        if call.grad_enabled and (self.probe or call.parent is None) and v.requires_grad:
            self._watch_grad(call, path, v, ent, step)
        call.out_entries.append(ent)

    def _mem_delta(self, call: CallRecord) -> int | None:
        for _, v in call.inputs:
            if isinstance(v, _Tensor) and v.is_cuda:
                return torch.cuda.memory_allocated(v.device) - call.mem_before
        return None

    def _track_outputs(self, call: CallRecord, outputs: list, step: StepBuffer) -> None:
        """Metadata, producers, finite probes, statistics, gradient hooks (grad mode off)."""
        entries = call.out_entries
        flow = step.flow
        want_stats = step.stats_step
        grads = call.grad_enabled and (self.probe or call.parent is None)
        prev = None if step.meta_step else self._previous(call, len(outputs), False)
        if prev is not None:
            call.out_meta = prev.out_meta   # read-only, shared (see hooks.budget)
        metas = None if prev is not None else call.out_meta
        for path, v in outputs:
            if type(v) is not _Tensor:   # not a tensor, or a subclass
                if isinstance(v, _Tensor):
                    self._odd_output(call, path, v, step, None, metas)
                elif metas is not None:
                    metas.append(meta(path, v))
                continue
            try:
                if metas is not None:
                    metas.append(meta(path, v))
                ent = flow.get(id(v))
                if ent is None or ent.ref() is not v or not inside(ent.producer, call):
                    ent = flow[id(v)] = FlowEntry(v, call, node_name(call.index),
                                                  self._output_probe(call, v, step))
                elif ent.version != tensor_version(v):  # modified in place since
                    ent.refresh(v, finite_probe(v, step.buf) if self.probe else None)
                if want_stats and call.stats is None and (v.is_floating_point()
                                                          or v.is_complex()):
                    # a container returning its child's output reuses the child's statistics
                    if ent.stats is None:
                        ent.stats = activation_stats(v, step.buf, self.mode == "full",
                                                     ent.finite)
                    call.stats = ent.stats
                if grads and v.requires_grad:
                    self._watch_grad(call, path, v, ent, step)
                entries.append(ent)
            except Exception as exc:   # a tensor the fast path cannot take
                self._odd_output(call, path, v, step, exc, metas)
        if metas is not None:
            call.out_meta = shared_metas(metas)

    def _output_probe(self, call: CallRecord, v: _Tensor, step: StepBuffer) -> int | None:
        """The finite probe of a new output: its input's, for a single-input module
        of ``FINITE_PASSING`` on a step without statistics; else a reduction."""
        if not self.probe:
            return None
        mtype = type(call.module)
        passes = self.passes_finite.get(mtype)
        if passes is None:
            passes = self.passes_finite[mtype] = issubclass(mtype, FINITE_PASSING)
        if passes and not step.stats_step and len(call.in_entries) == 1:
            src = call.in_entries[0].finite
            if src is not None:
                return src
        return finite_probe(v, step.buf)

    def _watch_grad(self, call: CallRecord, path: str, v: _Tensor, ent: FlowEntry,
                    step: StepBuffer) -> None:
        g = ent.grad
        version = v._version
        if g is None or g.version != version:
            g = ent.grad = GradEntry(self, step.index, version, call, path)
            step.grad_handles.append(v.register_hook(g))
        else:
            g.add_target(call, path)
        if call.grads is None:
            call.grads = [g]
        else:
            call.grads.append(g)

    # --------------------------------------------------------------- backward
    def on_grad(self, entry: GradEntry, grad: _Tensor) -> None:
        """``Tensor.register_hook`` callback (autograd's thread; never changes the gradient).
        ``grad`` is None where autograd passes an undefined gradient (an output of a
        multi-output node that the loss does not use, e.g. behind DDP's output sink):
        no gradient arrived there."""
        step = self.step
        if not self.active or entry.step != step.index or grad is None:
            return None
        t0 = _ns()
        try:
            if self.probe:
                grad_on = _grad_enabled()  # only under backward(create_graph=True)
                if grad_on:
                    _set_grad_enabled(False)
                try:
                    entry.norm = grad_norm(grad, step.buf)
                except Exception as exc:   # a gradient the fast path cannot take
                    entry.norm = self._odd_grad_norm(entry, grad, step, exc)
                finally:
                    if grad_on:
                        _set_grad_enabled(True)
            entry.arrived = step.saw_backward = True
            if self.observers.grad or self.gate.armed:
                for call, path in entry.targets():
                    self.host.output_grad(call, path, grad)
        except Exception as exc:
            self.host.internal_error("gradient hook", exc, "that gradient is not captured")
        self.meter.grad_ns += _ns() - t0
        return None

    def backward_called(self, tensors: Any) -> None:
        """``torch.autograd.backward`` was called outside any backward: the first
        scalar it was given is the step's loss (no host read), and the observers
        see the tensors."""
        t0 = _ns()
        try:
            first = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
            loss = backward_loss(first)
            if loss is not None:
                self._note_backward_loss(self.step, loss)
            if self.observers.bwd:
                self.observers.call(self.observers.bwd, "on_backward", first)
        except Exception as exc:
            self.host.internal_error("backward wrapper", exc, "that backward is not noted")
        self.meter.train_ns += _ns() - t0

    def _note_backward_loss(self, step: StepBuffer, loss: _Tensor) -> None:
        """The step's loss is that of the gradients its optimizer step uses: the sum
        of the losses backpropagated since the gradients were last cleared
        (gradient accumulation: ``(loss / k).backward()`` on k micro-batches is the
        loss of the whole batch; a GAN's ``errD_real.backward(); errD_fake.backward()``
        is ``errD``). A ``zero_grad()`` or an optimizer step in between, or a
        backward inside an optimizer's step (a closure's evaluations), starts
        afresh: the last loss is the step's. On the device: no host read."""
        prev = step.backward_loss
        if (prev is not None and not step.grads_cleared
                and step.loss_updates == step.optimizer_steps and not self.host.stepping()
                and prev.device == loss.device and prev.dtype == loss.dtype):
            loss = prev + loss
        step.backward_loss = loss
        step.grads_cleared = False
        step.loss_updates = step.optimizer_steps

    def grads_cleared(self, obj: Any, set_to_none: bool) -> None:
        """A ``zero_grad()`` ran (a ``zeroing`` listener): the losses backpropagated
        before it no longer count toward the step's loss."""
        self.step.grads_cleared = True

    def _odd_grad_norm(self, entry: GradEntry, grad: _Tensor, step: StepBuffer,
                       exc: Exception) -> int | None:
        """The squared norm of a gradient of another kind (sparse, float8, ...), of its
        values (``tensor_kinds``); None when it has none."""
        call, path = entry.call, entry.path
        with _no_torch_function():
            kind, sv = self._odd_view(call, "grad" + path[3:], grad, exc)
            if sv is None:
                return None
            try:
                return grad_norm(sv, step.buf)
            except Exception:
                return None

    # ------------------------------------------------------------- root calls
    def _root_finished(self, call: CallRecord) -> None:
        if self.raised_open:   # a module inside raised, and the root returned all the same
            self.host.exception_caught()
        step = self.step
        for ent in call.out_entries:
            ent.consumed = False
            step.root_outputs.append((call, ent))
        self._note_loss(call, step)
        if (not self.explicit_steps and not call.grad_enabled and not step.any_grad
                and not step.saw_backward):
            step.inference_open = True  # ended by the next step's first root call, or close()
        elif step.inference_open and call.grads:   # training follows a frozen model's forward
            step.inference_open = False

    def _note_loss(self, call: CallRecord, step: StepBuffer) -> None:
        scalars = [(p, v) for p, v in call.outputs
                   if isinstance(v, _Tensor) and v.numel() == 1 and v.is_floating_point()]
        if not scalars:
            return
        if is_loss_module(call.module):
            step.loss = scalars[0][1].detach()
            return
        for _path, v in scalars:
            ent = step.flow.get(id(v))
            if ent is not None and ent.grad is not None:
                step.loss_candidates.append((ent.grad, v.detach()))
        if not call.grad_enabled:   # an evaluation forward that returns its loss
            named = [v for p, v in scalars if "loss" in p.lower()]
            if named or len(scalars) == 1:
                step.output_loss = (named or [scalars[0][1]])[0].detach()

    # ------------------------------------------------------------- exceptions
    def _raised(self, call: CallRecord, exc: BaseException) -> None:
        stack = self.stack
        while stack and stack.pop() is not call:
            pass
        call.finished = call.raised = True
        if not self.step.meta_step:   # the message names the inputs as they are now
            call.in_meta = [meta(p, v) for p, v in call.inputs]
        first = self.raised_first(exc, call.root, call.path)
        self.host.module_raised(call, exc, first)
        call.inputs = call.outputs = ()

    def raised_first(self, exc: BaseException, root: int, path: str) -> bool:
        """Whether ``exc`` (raised in a module's forward, or by a function the
        diagnostics wrap) is new: then it is the step's error at ``root``/``path``
        from now on (the modules it passes through next report no finding of
        their own)."""
        if id(exc) == self._last_exc_id:
            return False
        self._last_exc_id = id(exc)
        self.last_module_error = (root, path, type(exc).__name__)
        self.raised_open = True
        return True

    # ------------------------------------------------------------------ steps
    def update_starting(self) -> None:
        """The first optimizer step of the current step is about to run: it is a
        training step, whose parameter numbers are taken every ``params_every``
        updates (counted in training steps, not step indices: the ranks of a job
        sample the same updates even when one of them also runs evaluations)."""
        step = self.step
        if not step.optimizer_steps:
            u = self.updates
            step.param_step = self.mode != "shapes" and u % self.params_every == 0
            # the ranks of a job compare their replicas' parameter norms (rank_divergence):
            # before the first interval is over, at updates 1, 2, 4, 8... too (norms only),
            # so a short job, or a divergence that starts at its second update, is compared
            step.norm_step = (not step.param_step and self.mode != "shapes"
                              and 0 < u < self.params_every and not u & (u - 1)
                              and _job_of_several())

    def mark_explicit(self) -> None:
        """``Watch.step()`` was called: boundaries come from the user from now on."""
        self.explicit_steps = True

    def end_step(self, kind: str) -> None:
        """Finish the current step (if anything happened in it) and start the next."""
        step = self.step
        if not step.calls and not step.optimizer_steps:
            return
        step.end_started = _ns()   # the meter counts the step end from here
        if kind == "train":
            self.updates += 1
        if self.stack:
            self.stack.clear()
        parts, kinds = [step], [kind]
        if step.joins and kind == "inference" and not step.saw_backward \
                and not step.optimizer_steps:
            parts = split_joined(step, step.joins)   # joined for a backward that never came
            kinds = [kind] * len(parts)
        elif kind == "train" and (step.joins or step.frozen_at):
            cuts = step.joins[:self._evaluated(step)] if step.joins else []
            if step.frozen_at and self._evaluation_before(step):
                cuts = sorted({step.frozen_at, *cuts})
            if cuts:
                parts = split_joined(step, cuts)
                kinds = ["inference"] * (len(parts) - 1) + [kind]
                if step.frozen_at in cuts:   # the evaluation's loss, as it was at the cut
                    part = parts[cuts.index(step.frozen_at)]
                    part.loss, part.output_loss = step.frozen_loss
        self.step = self._new_step(parts[-1].index + 1)
        self.prev_calls = parts[-1].calls if self.meta_every > 1 else []
        self._last_exc_id = 0
        if kinds[-1] == "train":
            first = parts[-1].calls[:1]
            self.lead_in.training_step_ended(
                [t for c in first for e in c.in_entries if (t := e.ref()) is not None])
        try:
            if self.subclasses:
                with _no_torch_function():
                    self._end_parts(parts, kinds)
            else:
                self._end_parts(parts, kinds)
        except Exception as exc:   # the boundary of the step end: the next step goes on
            self.host.internal_error("step end", exc, "that step's digests are lost",
                                      phase="step")
        finally:
            for h in step.grad_handles:
                h.remove()
            for call in step.calls:
                call.drop_tensors()
            self.meter.step_end_returned()

    def _end_parts(self, parts: list[StepBuffer], kinds: list[str]) -> None:
        for n, part in enumerate(parts):
            if n:
                self.host.step_beginning(part.index)
            self.on_step_end(part, kinds[n])

    def close(self) -> None:
        """Stop capturing (handles are removed by the watch)."""
        self.active = False
        self.stack.clear()
        self.prev_calls = []

