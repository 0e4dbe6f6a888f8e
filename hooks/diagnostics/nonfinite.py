"""``non_finite``: where NaN/Inf first appears, with provenance.

The hooks already probe every call's inputs, outputs and output gradients
for NaN/Inf on the device each step (one fused reduction per tensor, brought
over in the step's single transfer), and the parameter norms after each
optimizer step. This observer only reads those host flags in
``on_step_end``: it costs nothing on the device.

Provenance, in the order things happen in a step:

* ``input``: the first root call (forward order) whose output is non-finite
  received non-finite tensors and nothing inside it produced them;
* ``forward``/``loss``: inside that root, the innermost call whose output is
  non-finite although its inputs were finite (a loss module's call is phase
  ``loss``); a root whose output stays finite is ignored, so ``-inf``
  attention masks built or consumed inside a model are not findings;
* ``backward``: the forward was finite but an output gradient was not: the
  call whose output gradient arrived first (the latest in forward order);
* ``optimizer``: everything was finite but parameters are NaN/Inf after the
  update: the modules owning them.

In a training step whose loss, gradients and parameters all stay finite, a
non-finite model output was absorbed on purpose (``-inf`` logits of masked
actions or classes, which softmax turns into zeros): not a finding.

One incident is reported once: after a finding, later steps stay silent
until a step is entirely finite again (a NaN spreads to everything after it).
"""
from __future__ import annotations

import math
from typing import Any

import torch

from tensorscope.common.events import CallDigest
from tensorscope.hooks.diagnostics.base import Diagnostic, is_loss_module, maximal_modules, \
    module_label
from tensorscope.hooks.observer import CallRecord, StepRecord


def _finite(x: Any) -> bool:
    return x is None or (isinstance(x, (int, float)) and math.isfinite(x))


class NonFiniteObserver(Diagnostic):
    """Finds the producer of the first NaN/Inf of an incident."""

    def __init__(self) -> None:
        self._broken = False

    def on_step_end(self, record: StepRecord) -> None:
        """Read the step's finite flags and name the producer."""
        digests = record.digests
        calls = record.calls
        bad_params = [r for r in record.summary.params if not _finite(r.get("norm"))]
        bad_fwd = any(not d.finite for d in digests if d.index < len(calls)
                      and calls[d.index].parent is None)
        bad_grad = any(not d.grad_finite for d in digests)
        if not (bad_fwd or bad_grad or bad_params):
            self._broken = False
            return
        if not (bad_grad or bad_params) and _absorbed(record):
            return   # e.g. -inf logits masked on purpose: the loss and gradients stay finite
        if self._broken:
            return
        self._broken = (self._forward(record) or self._backward(record)
                        or self._optimizer(record, bad_params))

    # ---------------------------------------------------------------- forward
    def _forward(self, record: StepRecord) -> bool:
        digests, calls = record.digests, record.calls
        by_index = {d.index: d for d in digests}
        for d in digests:
            call = calls[d.index] if d.index < len(calls) else None
            if call is None or call.parent is not None or d.finite:
                continue
            inside = [c for c in calls if c.index > call.index and _root_of(c) is call]
            producer = _innermost_producer(inside, by_index)
            if producer is None:
                return self._root_itself(record, call, d)
            self._report_producer(record, producer, by_index[producer.index])
            return True
        return False

    def _root_itself(self, record: StepRecord, call: CallRecord, d: CallDigest) -> bool:
        name = module_label(self.ctx, call.root, call.path)
        if not d.inputs_finite:
            where = _nonfinite_inputs(d)
            self.emit("non_finite", "error", "input", call.root, "",
                      f"NaN/Inf already in the data entering {name} at step {record.step}"
                      f"{where}: it comes from the data pipeline or from code that runs before "
                      f"the model (a missing value, a division by zero, log(0) in "
                      f"preprocessing). Fix the data, or drop/clean the batch "
                      f"(torch.nan_to_num, torch.isfinite filtering).", step=record.step)
            return True
        self._report_producer(record, call, d)
        return True

    def _report_producer(self, record: StepRecord, call: CallRecord, d: CallDigest) -> None:
        if _is_half(d):
            return  # float16 overflow: fp16_overflow names it, with the fp16-specific fix
        if call.module is not None and _params_nonfinite(call.module):
            self._optimizer_from_module(record, call)
            return
        loss = is_loss_module(call.module) if call.module is not None else False
        name = module_label(self.ctx, call.root, call.path)
        what = "the loss " if loss else ""
        self.emit("non_finite", "error", "loss" if loss else "forward", call.root, call.path,
                  f"NaN/Inf first appears in the output of {what}{name} ({call.type}) at step "
                  f"{record.step}, although its inputs were finite. Typical causes: log or sqrt "
                  f"of zero/negative values, a division by a value that can be zero, exp "
                  f"overflow, or values grown too large (learning rate too high). Fix: add an "
                  f"epsilon or clamp inside {name}, use the numerically stable op "
                  f"(log_softmax, logsumexp), or lower the learning rate.", step=record.step)

    def _optimizer_from_module(self, record: StepRecord, call: CallRecord) -> None:
        """The producer's weights were already NaN/Inf: an earlier update diverged."""
        rows = []
        root = call.module
        top = _root_of(call).module
        with torch.no_grad():
            for mpath, mod in (top.named_modules() if top is not None else [(call.path, root)]):
                for pname, p in mod.named_parameters(recurse=False):
                    rows.append({"root": call.root, "module": mpath,
                                 "name": f"{mpath}.{pname}" if mpath else pname,
                                 "norm": 0.0 if bool(torch.isfinite(p).all()) else math.nan})
        bad = [r for r in rows if not _finite(r["norm"])]
        fake = StepRecord(max(0, record.step - 1), record.kind, [], _Summary(rows), [], {})
        self._optimizer(fake, bad)

    # --------------------------------------------------------------- backward
    def _backward(self, record: StepRecord) -> bool:
        bad = [d for d in record.digests if not d.grad_finite]
        if not bad:
            return False
        d = max(bad, key=lambda x: x.index)
        if _is_half(d):
            # with a GradScaler this is normal AMP (the step is skipped and the scale
            # lowered); without one, fp16_overflow names it
            return True
        name = module_label(self.ctx, d.root, d.path)
        self.emit("non_finite", "error", "backward", d.root, d.path,
                  f"The forward pass of step {record.step} was finite, but the gradient "
                  f"flowing into the output of {name} ({d.type}) is NaN/Inf: it is the first "
                  f"non-finite gradient of the backward pass. The operation that consumes this "
                  f"output (the next layer or the loss) has an infinite derivative there, e.g. "
                  f"sqrt(0), x**0.5, norm of a zero vector, or log near 0. Fix: add an epsilon "
                  f"(sqrt(x + 1e-12)), clamp, or use a stable op.", step=record.step)
        return True

    # -------------------------------------------------------------- optimizer
    def _optimizer(self, record: StepRecord, bad_params: list[dict[str, Any]]) -> bool:
        if not bad_params:
            return False
        by_root: dict[Any, dict[str, str]] = {}
        for r in record.summary.params:
            if r.get("norm") is not None:
                by_root.setdefault(r.get("root"), {})[r["name"]] = r.get("module", "")
        flagged = {r["name"] for r in bad_params}
        for root, owners in by_root.items():
            names = sorted(n for n in owners if n in flagged)
            if not names:
                continue
            for mod in maximal_modules(owners, flagged):
                rid = root if isinstance(root, int) else 0
                listed = [n for n in names if n.startswith(mod)] if mod else names
                self.emit("non_finite", "error", "optimizer", rid, mod,
                          f"After optimizer step {record.step}, parameters of "
                          f"{module_label(self.ctx, rid, mod)} became NaN/Inf "
                          f"({', '.join(listed[:4])}{' ...' if len(listed) > 4 else ''}) "
                          f"although the forward and backward were finite: the update "
                          f"diverged. Fix: lower the learning rate, clip gradients "
                          f"(torch.nn.utils.clip_grad_norm_), or check optimizer settings "
                          f"(eps, weight decay).", step=record.step)
        return True


def _params_nonfinite(module: Any) -> bool:
    """Whether a module's own parameters hold NaN/Inf (host check: only on the rare
    path where a producer was found)."""
    with torch.no_grad():
        return any(not bool(torch.isfinite(p).all()) for p in module.parameters(recurse=False))


def _absorbed(record: StepRecord) -> bool:
    """A training step whose non-finite outputs never reached the loss or a gradient."""
    if record.kind != "train" or not _finite(record.summary.loss):
        return False
    calls = record.calls
    for d in record.digests:
        call = calls[d.index] if d.index < len(calls) else None
        if call is not None and call.parent is None and not d.finite \
                and is_loss_module(call.module):
            return False
    return any(d.grad_norm is not None for d in record.digests)


class _Summary:
    """The part of a StepSummary that ``_optimizer`` reads."""

    def __init__(self, params: list[dict[str, Any]]) -> None:
        self.params = params


def _root_of(call: CallRecord) -> CallRecord:
    while call.parent is not None:
        call = call.parent
    return call


def _innermost_producer(inside: list[CallRecord],
                        by_index: dict[int, CallDigest]) -> CallRecord | None:
    """The first (forward order) innermost call with finite inputs and a non-finite output."""
    cands = [c for c in inside if c.index in by_index
             and not by_index[c.index].finite and by_index[c.index].inputs_finite]
    inner = [c for c in cands if not any(_encloses(c, o) for o in cands if o is not c)]
    return min(inner, key=lambda c: c.index) if inner else None


def _encloses(outer: CallRecord, call: CallRecord) -> bool:
    p = call.parent
    while p is not None:
        if p is outer:
            return True
        p = p.parent
    return False


def _nonfinite_inputs(d: CallDigest) -> str:
    paths = [m["path"] for m in d.inputs if m.get("kind") == "tensor"
             and str(m.get("dtype", "")).startswith(("float", "bfloat", "complex"))]
    return f" (input {paths[0]})" if len(paths) == 1 else ""


def _is_half(d: CallDigest) -> bool:
    return any(m.get("dtype") == "float16" for m in d.outputs)
