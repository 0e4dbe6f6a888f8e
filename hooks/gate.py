"""The step debugger on the training side: pause points, stepping, breakpoints.

The hooks call the ``at_*`` methods only while ``armed`` is True, so a gate
with nothing to do costs one attribute read per hook. When a pause point
matches, the training thread emits ``PausedAt`` and blocks on a
``threading.Condition`` (short timed waits, so Ctrl-C still stops the
script) until a request resumes it. While paused it serves the ``GetTensor``
jobs that ``handle_request`` (transport thread) hands it, so tensors are only
ever touched by the thread that owns them.

Breakpoints set with ``set_breakpoints`` (from ``--break-on``) are the base
set; a GUI's ``SetBreakpoints`` replaces the set, and ``release`` (the last
GUI went away) restores the base set, forgets stepping and resumes.
"""
from __future__ import annotations

import collections
import logging
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from tensorscope.common.conditions import ConditionError, digest_values
from tensorscope.common.events import (CallDigest, Continue, Finding, GetTensor, JobFinding,
                                Pause, PausedAt, PinModules, Request, Response, Resumed,
                                RunToStep, SetBreakpoints, StepBatch, StepModule, StepSummary)
from tensorscope.common.names import module_name
from tensorscope.common.protocol import PROTOCOL_VERSION, Frame, to_message
from tensorscope.common.tensors import param_ref
from tensorscope.hooks.gate_state import (Breakpoints, BreakpointError, Job, nbytes,
                                          describe_tensors, tensor_ref)

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from tensorscope.common.step_calls import CallRow
    from tensorscope.training.session import Session

log = logging.getLogger("tensorscope.gate")

PIN_BUDGET = 256 * 1024 * 1024
#: at most this many parameter tensors (and grads) are listed at a pause
PARAMS_LISTED = 8192
JOB_TIMEOUT = 60.0  # seconds a GetTensor waits for the paused training thread


class Gate:
    """Pause points, stepping and breakpoints for one training process."""

    def __init__(self, session: "Session", rank: int = 0, *, pin_budget: int = PIN_BUDGET) -> None:
        self.session = session
        #: this process's rank; the watch refreshes it with its own (``Watch.refresh_rank``)
        self.rank = rank
        self.armed = False
        self.check_non_finite = False
        #: True while someone can resume a pause (a GUI is attached or may attach).
        self.interactive = False
        self.pin_budget = pin_budget
        self._cond = threading.Condition()
        self._pause_requested = False
        self._mode = "run"  # "run" | "step_batch" | "step_module" | "run_to_step"
        self._target: int | None = None
        self._waiting = False
        self._base = Breakpoints()
        self._bps = Breakpoints()
        self._pending: tuple[str, str] | None = None
        self._pins: set[tuple[int, str]] = set()
        self._pinned_prev: dict[str, Any] = {}
        self._pinned_cur: dict[str, Any] = {}
        self._pinned_bytes = 0
        self._pin_warned = False
        self._paused: PausedAt | None = None
        self._tensors: dict[str, Any] = {}
        self._jobs: collections.deque[Job] = collections.deque()
        self._post_mortem: BaseException | None = None
        self._closed = False
        # the non-finite breakpoint fires once per module (and once per step: what
        # follows the first NaN only carries it on) until it is armed again
        self._nf_fired: set[tuple[int, str]] = set()
        self._nf_step: int | None = None
        #: ``emit_finding(kind, severity, phase, root, module, message)``: a non-finite
        #: stop is reported as a finding at once, not at the step's end (set by the Watch)
        self.finding_sink: Callable[..., None] | None = None
        #: nanoseconds spent paused so far (the overhead meter leaves them out)
        self.paused_ns = 0
        #: the watched root modules by root id (the Watch shares its index's list): a
        #: pause serves every module's parameters, read on the training thread
        self.roots: Sequence[Any] = ()
        self.root_names: Sequence[str] = ()   # the index's display names, by root id

    # ------------------------------------------------------------ state ---
    def _update_armed(self) -> None:
        """Recompute ``armed`` (call with the lock held)."""
        can_stop = (self._pause_requested or self._mode != "run" or self._waiting
                    or bool(self._bps) or bool(self._pins) or self._pending is not None)
        self.armed = bool(can_stop and self.interactive and not self._closed)
        self.check_non_finite = self.armed and self._bps.non_finite

    def set_interactive(self, value: bool) -> None:
        """Say whether a GUI can resume pauses (set by the live links)."""
        with self._cond:
            self.interactive = value
            self._update_armed()

    def wait_for_client(self) -> None:
        """Pause before the first step until a GUI resumes (``--wait``)."""
        with self._cond:
            self._waiting = True
            self._update_armed()

    @property
    def paused(self) -> PausedAt | None:
        """The current pause, or None while running."""
        return self._paused

    def set_breakpoints(self, breakpoints: list[dict]) -> None:
        """Set the base breakpoints (``--break-on``); raises ``BreakpointError``."""
        bps = Breakpoints.parse(breakpoints)
        with self._cond:
            self._base = bps
            self._bps = bps
            self._update_armed()

    # -------------------------------------------- training thread (armed) ---
    def _step_reason(self, step: int) -> str | None:
        if self._pending is not None:
            return self._pending[0]
        if self._waiting:
            return "wait"
        if self._pause_requested:
            return "pause"
        if self._mode in ("step_batch", "step_module"):
            return self._mode
        if self._mode == "run_to_step" and self._target is not None and step >= self._target:
            return "run_to_step"
        return None

    def at_step_boundary(self, step: int) -> None:
        """Before step ``step``'s first forward (training thread)."""
        with self._cond:
            self._pinned_prev, self._pinned_cur = self._pinned_cur, {}
            reason = self._step_reason(step)
            detail = self._pending[1] if self._pending else ""
            tensors = dict(self._pinned_prev)
        if reason is not None:
            self._pause(PausedAt(step=step, rank=self.rank, where="step", reason=reason,
                                 detail=detail, tensors=describe_tensors(tensors)), tensors)
        with self._cond:
            self._post_mortem = None
            self._pinned_prev = {}  # pinned tensors live until the next step starts
            self._pinned_bytes = sum(nbytes(t) for t in self._pinned_cur.values())

    def at_module(self, where: str, *, step: int, root: int, path: str, call: int, type: str,
                  tensors: dict[str, "torch.Tensor"], non_finite: bool = False,
                  module: Any = None) -> None:
        """At a module boundary: ``forward_pre``, ``forward`` or ``backward``.

        ``module``: the ``nn.Module``; a pause also serves its own parameters
        (``param.weight``) and their gradients (``param.weight.grad``)."""
        with self._cond:
            reason = self._module_reason(where, root, path, non_finite, step)
            detail = self._pending[1] if self._pending and reason == self._pending[0] else ""
            if reason == "non_finite":
                self._nf_fired.add((root, path))
                self._nf_step = step
        if reason is None:
            return
        if reason == "non_finite":
            detail = self._non_finite_stop(where, step, root, path, type, tensors)
        refs = {tensor_ref(self.rank, root, path, call, k): v
                for k, v in {**tensors, **module_parameters(module)}.items()}
        with self._cond:
            refs.update(self._pinned_cur)
        self._pause(PausedAt(step=step, rank=self.rank, where=where, reason=reason, root=root,
                             path=path, call=call, detail=detail,
                             tensors=describe_tensors(refs)), refs)

    def _module_reason(self, where: str, root: int, path: str, non_finite: bool,
                       step: int = -1) -> str | None:
        if self._pending is not None:
            return self._pending[0]
        if self._pause_requested:
            return "pause"
        if self._mode == "step_module":
            return "step_module"
        if self._bps.hits_module(root, path, where):
            return "breakpoint"
        if (non_finite and self._bps.non_finite and (root, path) not in self._nf_fired
                and self._nf_step != step):
            return "non_finite"
        return None

    def _non_finite_stop(self, where: str, step: int, root: int, path: str, type: str,
                         tensors: dict[str, "torch.Tensor"]) -> str:
        """The stop's detail (``non-finite output in `norm` (LayerNorm), step 1, forward:
        32 NaN``), reported as a finding at once (training thread, about to pause)."""
        what, prefix = {"forward_pre": ("input", "in"), "backward": ("gradient", "grad")}.get(
            where, ("output", "out"))
        nan, inf = count_non_finite(t for k, t in tensors.items() if k.startswith(prefix))
        counts = ", ".join(f"{n} {label}" for n, label in ((nan, "NaN"), (inf, "Inf")) if n)
        name = self._name(root, path)
        detail = f"non-finite {what} in `{name}` ({type}), step {step}, {where}: {counts or 'NaN/Inf'}"
        if self.finding_sink is not None:
            try:
                self.finding_sink("non_finite", "error",
                                  "backward" if where == "backward" else "forward", root, path,
                                  f"{type} {name}: non-finite {what} ({counts or 'NaN/Inf'}), "
                                  f"stopped at the non-finite breakpoint")
            except Exception:  # the pause goes ahead; the step end reports it again
                log.warning("reporting the non-finite stop failed", exc_info=True)
        return detail

    def at_exception(self, *, step: int, root: int, path: str, call: int, type: str,
                     tensors: dict[str, "torch.Tensor"], exc: BaseException) -> None:
        """Post-mortem: an exception is leaving module ``path``; pause if asked to."""
        if not self._bps.exception or isinstance(exc, KeyboardInterrupt):
            return
        if exc is self._post_mortem:
            return  # already inspected at the innermost module; enclosing ones rethrow it
        self._post_mortem = exc
        refs = {tensor_ref(self.rank, root, path, call, k): v for k, v in tensors.items()}
        self._pause(PausedAt(step=step, rank=self.rank, where="exception", reason="exception",
                             root=root, path=path, call=call,
                             detail=f"{_exc_name(exc)} in {self._name(root, path)} ({type}): "
                                    f"{exc}",
                             tensors=describe_tensors(refs)), refs)

    def _name(self, root: int, path: str) -> str:
        """The module as the GUI's lists name it (``Sequential.1``, not ``1``; a root by
        its name), ``<root>`` for a root without one."""
        name = module_name(self.root_names, root, path)
        return "<root>" if name == "(root)" else name

    def on_finding(self, finding: Finding) -> None:
        """A finding was first emitted: with a finding breakpoint, pause at the next point."""
        with self._cond:
            if self._bps.finding and self._pending is None:
                self._pending = ("finding", f"{finding.kind} at {finding.module or '<root>'}: "
                                            f"{finding.message}")
                self._update_armed()

    def on_step_end(self, step: int, digests: Sequence[CallDigest | CallRow],
                    summary: StepSummary) -> None:
        """Evaluate condition breakpoints on this step's calls (``StepRecord.digests``:
        the rows of its ``StepCalls``)."""
        with self._cond:
            conditions = list(self._bps.conditions)
        for root, path, cond in conditions:
            for d in digests:
                if (root is None or d.root == root) and (path is None or d.path == path):
                    if cond.evaluate(digest_values(d)):
                        with self._cond:
                            self._pending = ("condition", f"{d.path or '<root>'}: {cond.text} "
                                                          f"held at step {step}")
                            self._update_armed()
                        return

    # --------------------------------------------------------------- pins ---
    def is_pinned(self, root: int, path: str) -> bool:
        """True if the GUI asked to keep this module's tensors."""
        return (root, path) in self._pins

    def keep_pinned(self, root: int, path: str, call: int,
                    tensors: dict[str, "torch.Tensor"]) -> None:
        """Keep copies of a pinned call's tensors until the next step (within the budget)."""
        for name, t in tensors.items():
            size = nbytes(t)
            with self._cond:
                if self._pinned_bytes + size > self.pin_budget:
                    if not self._pin_warned:
                        self._pin_warned = True
                        print(f"tensorscope: pinned tensors exceed the {self.pin_budget >> 20} MiB "
                              f"budget; some are not kept", file=sys.stderr)
                    continue
                self._pinned_bytes += size
            copy = t.detach().clone()
            with self._cond:
                self._pinned_cur[tensor_ref(self.rank, root, path, call, name)] = copy

    # ---------------------------------------------------------------- pause ---
    def _pause(self, info: PausedAt, tensors: dict[str, Any]) -> None:
        with self._cond:
            if self._closed or not self.interactive:
                return
        params = self._parameters()   # training thread: nothing else touches them now
        info.params = describe_tensors(params)
        with self._cond:
            if self._closed or not self.interactive:
                return
            self._paused = info
            self._tensors = {**params, **tensors}
            self._pause_requested = False
            self._waiting = False
            self._pending = None
            self._mode, self._target = "run", None
            self._update_armed()
        t0 = time.perf_counter_ns()
        self.session.emit(info)
        try:
            self._serve_while_paused()
        finally:
            self.paused_ns += time.perf_counter_ns() - t0
            with self._cond:
                self._paused = None
                self._tensors = {}
                while self._jobs:
                    self._jobs.popleft().fail("training resumed")
            self.session.emit(Resumed(step=info.step, rank=self.rank))

    def _parameters(self) -> dict[str, Any]:
        """Every watched module's own parameters and their ``.grad``, by ``param_ref``
        (training thread, at a pause; at most ``PARAMS_LISTED``)."""
        out: dict[str, Any] = {}
        try:
            for rid, root in enumerate(list(self.roots)):
                for path, mod in root.named_modules():
                    for name, t in module_parameters(mod).items():
                        if len(out) >= PARAMS_LISTED:
                            log.info("a pause lists the first %d parameter tensors only",
                                     PARAMS_LISTED)
                            return out
                        out[param_ref(self.rank, rid, path, name[len("param."):])] = t
        except Exception:   # an odd model must not break the pause: its params go unlisted
            log.warning("listing the model's parameters at a pause failed", exc_info=True)
        return out

    def _serve_while_paused(self) -> None:
        while True:
            with self._cond:
                if self._paused is None or self._closed:
                    return
                if not self._jobs:
                    self._cond.wait(0.1)  # short waits: Ctrl-C stays deliverable
                job = self._jobs.popleft() if self._jobs else None
            if job is not None:
                job.run()

    def _resume_locked(self) -> None:
        self._paused = None
        self._update_armed()
        self._cond.notify_all()

    # ---------------------------------------------------- requests (any thread) ---
    def handle_request(self, req: Request,
                       reply: Callable[[Response], None] | None = None) -> Response | None:
        """Serve one request from a GUI (transport thread); never raises.

        Without ``reply`` the answer is returned (a ``GetTensor`` waits for the
        training thread). With ``reply`` the caller never waits: a request that
        needs the training thread returns None and its job calls ``reply`` with
        the answer when done (debugpy style), so a slow slice cannot hold up a
        ``Pause`` or ``Continue`` read after it.
        """
        handler = getattr(self, f"{req.TYPE}_request", None)
        try:
            if handler is None:
                resp = Response(ok=False, error=f"unsupported request {req.TYPE!r}")
            elif reply is not None and handler == self.get_tensor_request:
                resp = self.get_tensor_request(req, reply)
                if resp is None:
                    return None
            else:
                resp = handler(req)
        except (BreakpointError, ConditionError, ValueError) as exc:
            resp = Response(ok=False, error=str(exc))
        except Exception as exc:  # a malformed request must never break training
            log.warning("request %s failed", req.TYPE, exc_info=True)
            resp = Response(ok=False, error=f"{req.TYPE} failed: {type(exc).__name__}: {exc}")
        resp.request_seq = req.seq
        return resp

    def job_finding_request(self, req: JobFinding) -> Response:
        """A finding of the job (made where the ranks meet): taken as this rank's own."""
        finding = to_message(Frame(PROTOCOL_VERSION, Finding.TYPE, 0, req.finding))
        if not isinstance(finding, Finding):   # to_message raises on a malformed body
            return Response(ok=False, error="job_finding carries no finding")
        self.on_finding(finding)
        return Response()

    def pause_request(self, req: Pause) -> Response:
        """Pause at the next pause point."""
        with self._cond:
            self._pause_requested = True
            self._update_armed()
        return Response()

    def _go(self, mode: str, target: int | None = None) -> Response:
        with self._cond:
            self._mode, self._target = mode, target
            self._pause_requested = False
            self._waiting = False
            self._resume_locked()
        return Response()

    def continue_request(self, req: Continue) -> Response:
        """Run freely."""
        return self._go("run")

    def step_batch_request(self, req: StepBatch) -> Response:
        """Run to the next step boundary."""
        return self._go("step_batch")

    def step_module_request(self, req: StepModule) -> Response:
        """Run to the next module boundary."""
        return self._go("step_module")

    def run_to_step_request(self, req: RunToStep) -> Response:
        """Run to the boundary before step ``req.step``."""
        return self._go("run_to_step", int(req.step))

    def set_breakpoints_request(self, req: SetBreakpoints) -> Response:
        """Replace the breakpoint set (all or nothing)."""
        bps = Breakpoints.parse(req.breakpoints)
        with self._cond:
            if bps.non_finite and not self._bps.non_finite:   # armed again
                self._nf_fired, self._nf_step = set(), None
            self._bps = bps
            self._update_armed()
        return Response(body={"count": len(req.breakpoints)})

    def pin_modules_request(self, req: PinModules) -> Response:
        """Keep these modules' tensors from now on (replaces the pinned set)."""
        pins = set()
        for m in req.modules:
            if not isinstance(m, dict) or not isinstance(m.get("path"), str):
                raise ValueError(f"bad module {m!r}: expected {{'root': int, 'path': str}}")
            pins.add((int(m.get("root", 0)), m["path"]))
        with self._cond:
            if not pins:
                self._drop_pins_locked()
            self._pins = pins
            self._update_armed()
        return Response(body={"count": len(pins)})

    def _drop_pins_locked(self) -> None:
        self._pins = set()
        self._pinned_cur = {}
        self._pinned_bytes = 0

    def get_tensor_request(self, req: GetTensor,
                           reply: Callable[[Response], None] | None = None) -> Response | None:
        """Slice a tensor of the current pause (done on the training thread).

        With ``reply``, returns None at once and the job posts its own answer.
        """
        with self._cond:
            if self._paused is None:
                return Response(ok=False, error="training is not paused: tensor values are "
                                                "available only at a pause")
            if req.ref not in self._tensors:
                return Response(ok=False, error=f"no tensor {req.ref!r} at this pause")
            on_done = None if reply is None else (lambda r: reply(_answering(r, req)))
            job = Job(lambda: self._slice(req), on_done)
            self._jobs.append(job)
            self._cond.notify_all()
        if reply is not None:
            return None
        if not job.done.wait(JOB_TIMEOUT):
            return Response(ok=False, error="timed out waiting for the training thread")
        assert job.result is not None
        return job.result

    def _slice(self, req: GetTensor) -> Response:
        from tensorscope.common.slicing import SliceError
        from tensorscope.training.slice_encode import encode_slice

        try:
            body = encode_slice(self._tensors[req.ref], req.slice, ref=req.ref,
                                max_elements=req.max_elements)
        except (SliceError, IndexError) as exc:
            return Response(ok=False, error=f"bad slice {req.slice!r}: {exc}")
        return Response(body=body)

    # ------------------------------------------------------------ lifecycle ---
    def release(self) -> None:
        """The GUI went away: resume, forget stepping, pins and its breakpoints."""
        with self._cond:
            self._pause_requested = False
            self._waiting = False
            self._pending = None
            self._mode, self._target = "run", None
            self._bps = self._base
            self._nf_fired, self._nf_step = set(), None
            self._drop_pins_locked()
            self._resume_locked()

    def close(self) -> None:
        """Resume for good; nothing pauses any more."""
        with self._cond:
            self._closed = True
            self._pinned_cur = {}
            self._pinned_prev = {}
            self._resume_locked()


def _answering(resp: Response, req: Request) -> Response:
    resp.request_seq = req.seq
    return resp


def module_parameters(module: Any) -> dict[str, Any]:
    """A module's own parameters and their ``.grad`` by inspector name (at a pause)."""
    out: dict[str, Any] = {}
    if module is None:
        return out
    try:
        for name, p in module.named_parameters(recurse=False):
            out[f"param.{name}"] = p
            if p.grad is not None:
                out[f"param.{name}.grad"] = p.grad
    except Exception:   # an odd module must not break the pause
        log.debug("listing parameters failed", exc_info=True)
    return out


def count_non_finite(tensors: Any) -> tuple[int, int]:
    """NaN and Inf counts over floating tensors (syncs: only at a pause)."""
    import torch
    nan = inf = 0
    with torch.no_grad():
        for t in tensors:
            if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()):
                nan += int(torch.isnan(t).sum().item())
                inf += int(torch.isinf(t).sum().item())
    return nan, inf


def _exc_name(exc: BaseException) -> str:
    return type(exc).__name__


__all__ = ["Gate", "tensor_ref", "BreakpointError"]
