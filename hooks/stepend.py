"""Finishing a step: the one host transfer, then digests and the summary.

Runs on the training thread when a step ends (optimizer step, ``Watch.step``
or an automatic boundary). Everything queued during the step, activation
statistics, finite probes, gradient norms, parameter norms, the loss and the
observers' deferred values, comes over in one ``ScalarBuffer.flush``.
"""
from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from tensorscope.common.events import CallDigest, StepSummary
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


def digest(call: CallRecord, values: list[float], rank: int) -> CallDigest:
    """The complete digest of one call, from the flushed values."""
    gn = _grad_norm(call, values)
    return CallDigest(
        step=call.step, rank=rank, index=call.index, root=call.root, path=call.path,
        type=call.type, inputs=call.in_meta, outputs=call.out_meta,
        stats=stats_from(call.stats, values) if call.stats is not None else None,
        grad_norm=gn,
        finite=_finite(values, call.out_entries),
        inputs_finite=_finite(values, call.in_entries),
        grad_finite=gn is None or math.isfinite(gn),
        mem_delta=call.mem_delta, training=call.training, grad_enabled=call.grad_enabled)


def _digests_skipping(calls: list[CallRecord], values: list[float],
                      rank: int) -> list[CallDigest]:
    """The digests that build (after one failed): the others are left out."""
    out = []
    for call in calls:
        try:
            out.append(digest(call, values, rank))
        except Exception:
            continue
    return out


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
    return step.buf.add(loss.reshape(()))


def finish(step: "StepBuffer", kind: str, params: ParamTracker | None, rank: int,
           memory: int | None, meter: OverheadMeter | None = None, paused_ns: int = 0,
           rates: dict[str, Any] | None = None,
           errors: list[tuple[str, Exception]] | None = None) -> StepRecord:
    """Flush the step's values and build its digests, summary and record.

    With a ``meter``, the summary carries the step's ``overhead`` (the
    meter's window closes here) and the ``rates`` the budget chose. A digest
    or the parameter rows that fail to build are left out, and the error is
    appended to ``errors`` (``(where, exception)``) for the caller to report;
    without ``errors`` they raise.
    """
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
        digests = [digest(call, values, rank) for call in step.calls]
    except Exception as exc:
        if errors is None:
            raise
        errors.append(("call digest", exc))
        digests = _digests_skipping(step.calls, values, rank)
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
        params=rows, memory=memory, time=time.time(), overhead=overhead, rates=rates)
    deferred: dict[int, dict[str, Any]] = {
        handle: {k: values[i] for k, i in names.items()} for handle, names in step.deferred}
    return StepRecord(step.index, kind, digests, summary, step.calls, deferred, values)
