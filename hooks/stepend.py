"""Finishing a step: the one host transfer, then the call batch and the summary.

Runs on the training thread when a step ends (optimizer step, ``Watch.step``
or an automatic boundary). Everything queued during the step, activation
statistics, finite probes, gradient norms, parameter norms, the loss and the
observers' deferred values, comes over in one ``ScalarBuffer.flush``.
"""
from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from tensorscope.common import step_calls
from tensorscope.common.events import StepCalls, StepSummary
from tensorscope.common.step_calls import CallRow, Signature
from tensorscope.hooks.call_signatures import SignatureRegistry
from tensorscope.hooks.meter import OverheadMeter, share
from tensorscope.hooks.observer import CallRecord, StepRecord
from tensorscope.hooks.params import ParamTracker
from tensorscope.hooks.stats import stats_from

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.capture import StepBuffer

_ns = time.perf_counter_ns


def _finite(values: list[float], entries: list) -> bool:
    """Whether every probed tensor among ``entries`` (FlowEntry) was finite."""
    for e in entries:
        h = e.finite
        if h is not None and not math.isfinite(values[h]):
            return False
    return True


def _grad_norm(call: CallRecord, values: list[float]) -> float | None:
    grads = call.grads
    if not grads:
        return None
    if len(grads) == 1:   # the common case: one output tensor
        h = grads[0].norm
        return None if h is None else _root(values[h])
    total, seen = 0.0, False
    done: set[int] = set()
    for g in grads:
        if g.norm is None or id(g) in done:
            continue
        done.add(id(g))
        total += values[g.norm]   # squared norms (stats.grad_norm)
        seen = True
    return _root(total) if seen else None


def _root(total: float) -> float:
    """The norm from a squared norm (NaN stays NaN, inf stays inf)."""
    return math.sqrt(total) if total >= 0.0 else math.nan


def digest(call: CallRecord, values: list[float]) -> tuple[int, float | None,
                                                         dict[str, Any] | None]:
    """One call's numbers from the flushed values: its flags (``step_calls.FINITE``
    ...), gradient norm and statistics."""
    gn = _grad_norm(call, values)
    flags = _TRAINING if call.training else 0
    if call.grad_enabled:
        flags |= _GRAD_ENABLED
    if _finite(values, call.out_entries):
        flags |= _FINITE
    if _finite(values, call.in_entries):
        flags |= _INPUTS_FINITE
    if gn is None:
        flags |= _GRAD_FINITE
    else:
        flags |= _HAS_GRAD | (_GRAD_FINITE if math.isfinite(gn) else 0)
    if call.mem_delta is not None:
        flags |= _HAS_MEM
    return flags, gn, stats_from(call.stats, values) if call.stats is not None else None


class CallBatch:
    """A step's calls as columns, before packing (training thread): what its
    ``StepCalls`` holds, and what observers read (``StepRecord.digests`` gives
    rows of it)."""

    __slots__ = ("step", "rank", "index", "sigs", "flags", "grad_norm", "stats", "mem_delta",
                 "dense", "any_flags", "all_flags", "any_stats")

    def __init__(self, step: int, rank: int) -> None:
        self.step = step
        self.rank = rank
        self.index: list[int] = []
        self.sigs: list[Signature] = []
        self.flags: list[int] = []
        self.grad_norm: list[float] = []
        self.stats: list[dict[str, Any] | None] = []
        self.mem_delta: list[int] = []
        self.dense = True   # index is 0, 1, 2... (no call left out)
        self.any_flags = 0   # the flags of every row, or'ed
        self.all_flags = _ALL   # and'ed (every bit set when there is no row)
        self.any_stats = False

    def add(self, call: CallRecord, sig: Signature, flags: int, gn: float | None,
            stats: dict[str, Any] | None) -> None:
        """One call's row."""
        if call.index != len(self.index):
            self.dense = False
        self.index.append(call.index)
        self.sigs.append(sig)
        self.flags.append(flags)
        self.any_flags |= flags
        self.all_flags &= flags
        self.grad_norm.append(0.0 if gn is None else gn)
        self.stats.append(stats)
        if stats is not None:
            self.any_stats = True
        self.mem_delta.append(0 if call.mem_delta is None else call.mem_delta)

    def rows(self) -> list[CallRow]:
        """One ``CallRow`` per call (the per-call view)."""
        step, rank = self.step, self.rank
        return [CallRow(step, rank, i, sig, f, gn if f & _HAS_GRAD else None, st,
                        mem if f & _HAS_MEM else None)
                for i, sig, f, gn, st, mem in zip(self.index, self.sigs, self.flags,
                                                   self.grad_norm, self.stats, self.mem_delta)]

    def message(self) -> StepCalls:
        """The packed ``StepCalls``."""
        flags, any_flags = self.flags, self.any_flags
        columns = step_calls.pack(
            [s.id for s in self.sigs], flags, index=None if self.dense else self.index,
            grad_norm=self.grad_norm if any_flags & _HAS_GRAD else None,
            mem_delta=self.mem_delta if any_flags & _HAS_MEM else None,
            stats=self.stats if self.any_stats else None)
        return StepCalls(step=self.step, rank=self.rank, calls=len(flags), columns=columns)


_FINITE, _INPUTS_FINITE, _GRAD_FINITE = (step_calls.FINITE, step_calls.INPUTS_FINITE,
                                         step_calls.GRAD_FINITE)
_TRAINING, _GRAD_ENABLED = step_calls.TRAINING, step_calls.GRAD_ENABLED
_HAS_GRAD, _HAS_MEM = step_calls.HAS_GRAD, step_calls.HAS_MEM
_ALL = 0xFF   # every flag (the column is uint8)


def _batch(calls: list[CallRecord], values: list[float], rank: int, step: int,
           signatures: SignatureRegistry, skip_failed: bool) -> CallBatch:
    """The step's rows; with ``skip_failed``, a call whose row fails is left out.

    ``digest`` and ``CallBatch.add`` of each call, inlined for the common call
    (one output gradient or none): this runs for every call of every step
    (``_batch_by_digest`` is the plain form it is held to).
    """
    batch = CallBatch(step, rank)
    sig_of = signatures.of
    index, sigs, flag_col = batch.index, batch.sigs, batch.flags
    gn_col, stats_col, mem_col = batch.grad_norm, batch.stats, batch.mem_delta
    isfinite, sqrt = math.isfinite, math.sqrt
    any_flags, all_flags, any_stats, dense = 0, _ALL, False, True
    for call in calls:
        try:
            sig = sig_of(call)
            grads = call.grads
            if not grads:
                gn = None
            elif len(grads) == 1:
                h = grads[0].norm
                if h is None:
                    gn = None
                else:
                    sq = values[h]
                    gn = sqrt(sq) if sq >= 0.0 else math.nan
            else:
                gn = _grad_norm(call, values)
            flags = _TRAINING if call.training else 0
            if call.grad_enabled:
                flags |= _GRAD_ENABLED
            for e in call.out_entries:
                h = e.finite
                if h is not None and not isfinite(values[h]):
                    break
            else:
                flags |= _FINITE
            for e in call.in_entries:
                h = e.finite
                if h is not None and not isfinite(values[h]):
                    break
            else:
                flags |= _INPUTS_FINITE
            if gn is None:
                flags |= _GRAD_FINITE
            else:
                flags |= _HAS_GRAD | (_GRAD_FINITE if isfinite(gn) else 0)
            mem = call.mem_delta
            if mem is not None:
                flags |= _HAS_MEM
            st = call.stats
            stats = stats_from(st, values) if st is not None else None
        except Exception:
            if not skip_failed:
                raise
            continue
        if call.index != len(index):
            dense = False
        index.append(call.index)
        sigs.append(sig)
        flag_col.append(flags)
        any_flags |= flags
        all_flags &= flags
        gn_col.append(0.0 if gn is None else gn)
        stats_col.append(stats)
        if stats is not None:
            any_stats = True
        mem_col.append(0 if mem is None else mem)
    batch.any_flags, batch.all_flags = any_flags, all_flags
    batch.any_stats, batch.dense = any_stats, dense
    return batch


def _batch_by_digest(calls: list[CallRecord], values: list[float], rank: int, step: int,
                     signatures: SignatureRegistry, skip_failed: bool) -> CallBatch:
    """``_batch`` through ``digest`` and ``CallBatch.add``, call by call: the plain
    form of the inlined loop, which the tests hold it to."""
    batch = CallBatch(step, rank)
    sig_of = signatures.of
    for call in calls:
        if skip_failed:
            try:
                batch.add(call, sig_of(call), *digest(call, values))
            except Exception:
                continue
        else:
            batch.add(call, sig_of(call), *digest(call, values))
    return batch


def queue_loss(step: "StepBuffer") -> int | None:
    """Queue the step's loss: what a framework said it backpropagated
    (``Watch.note_loss``), else what ``backward()`` was last called on (the
    loss, whatever computed it), else the last loss-module output, else the
    last scalar root output that backward ran through, else a loss an
    evaluation forward returned."""
    loss = step.noted_loss if step.noted_loss is not None else step.backward_loss
    if loss is None:
        loss = step.loss
    if loss is None:
        for entry, value in reversed(step.loss_candidates):
            if entry.arrived:
                loss = value
                break
    if loss is None:
        loss = step.output_loss
    if loss is None:
        return None
    return step.buf.add(loss if loss.dim() == 0 else loss.reshape(()))


def _data_sum(calls: list[Any], values: list[float]) -> float | None:
    """The sum of the first floating tensor input of the step's first root call (the
    batch), as its finite check took it (``same_data_on_ranks``); None without one."""
    try:   # a number of the summary: never worth failing the step's end for
        root = next((c for c in calls if c.parent is None), None)
        ent = next((e for e in root.in_entries if e.producer is None and e.finite is not None),
                   None) if root is not None else None
        v = values[ent.finite] if ent is not None else None
    except Exception:
        return None
    return v if isinstance(v, float) else None


def finish(step: "StepBuffer", kind: str, params: ParamTracker | None, rank: int,
           memory: int | None, meter: OverheadMeter | None = None, paused_ns: int = 0,
           rates: dict[str, Any] | None = None,
           errors: list[tuple[str, Exception]] | None = None,
           signatures: SignatureRegistry | None = None, updates: int | None = None) -> StepRecord:
    """Flush the step's values and build its call batch, summary and record.

    The batch names each call's signature in ``signatures`` (the watch's
    registry; the record carries the new ones). With a ``meter``, the
    summary carries the step's ``overhead`` (the meter's window closes here)
    and the ``rates`` the budget chose; ``updates`` is the summary's count of
    training steps. A call's row or the parameter rows
    that fail to build are left out, and the error is appended to ``errors``
    (``(where, exception)``) for the caller to report; without ``errors``
    they raise.
    """
    if signatures is None:
        signatures = SignatureRegistry()
    if params is not None:
        try:
            params.queue(step)
        except Exception as exc:
            if errors is None:
                raise
            errors.append(("parameter tracking", exc))
            step.param_work = None
    loss_at = queue_loss(step)
    values = step.buf.flush()
    try:
        batch = _batch(step.calls, values, rank, step.index, signatures, False)
    except Exception as exc:
        if errors is None:
            raise
        errors.append(("call digest", exc))
        batch = _batch(step.calls, values, rank, step.index, signatures, True)
    try:
        rows = ParamTracker.finish(step.param_work, values)
    except Exception as exc:
        if errors is None:
            raise
        errors.append(("parameter tracking", exc))
        rows = []
    grads = [r["grad_norm"] for r in rows if r["grad_norm"] is not None]
    overhead = None
    if meter is not None:
        step.overhead_ns, step.wall_ns = meter.close_window(step.end_started or _ns(), paused_ns)
        overhead = share(step.overhead_ns, step.wall_ns)
    summary = StepSummary(
        step=step.index, rank=rank, kind=kind, loop=step.loop,
        loss=values[loss_at] if loss_at is not None else None,
        duration=time.perf_counter() - step.started, calls=len(step.calls),
        grad_norm=math.sqrt(sum(g * g for g in grads)) if grads else None,
        params=rows, memory=memory, time=time.time(), overhead=overhead, rates=rates,
        updates=updates, data_sum=_data_sum(step.calls, values))
    deferred: dict[int, dict[str, Any]] = {
        handle: {k: values[i] for k, i in names.items()} for handle, names in step.deferred}
    return StepRecord(step.index, kind, batch, summary, step.calls, deferred, values,
                      signatures.take_new(rank, step.index))
