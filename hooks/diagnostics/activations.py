"""``dead_activation`` and ``fp16_overflow``: activations out of their useful range.

* ``dead_activation``: the output of a ReLU-family activation, the
  ``nn.ReLU``/``nn.ReLU6`` module, a module whose forward ends in
  ``F.relu`` (its output's ``grad_fn`` is ``ReluBackward``), or an ``F.relu``
  between two module calls (``x = F.relu(self.fc1(x))`` in the middle of a
  forward: seen as the input of the module that consumes it, and named at the
  module whose output it was applied to), is zero for at
  least 99% of a strided sample, in training forwards, at three consecutive
  checked steps (the first eight steps, then every statistics step): the
  layer passes (almost) no gradient. Cost: in the first eight steps one
  ``count_nonzero`` over a sample of at most 4096 elements per ReLU call,
  deferred into the step's single transfer; later, nothing: the zero
  fraction of the statistics the capture takes anyway is read.
* ``fp16_overflow``: a float16 output that holds Inf while the call's inputs
  were finite (the finite flags the hooks take every step), or whose
  magnitude came within 10% of the float16 maximum (65504) on a statistics
  step (the exact min/max taken there), names the innermost such module; a
  float16 output gradient that overflowed names the module whose output
  gradient overflowed first, unless a GradScaler is in use (it skips such
  steps by design). No extra device work.
"""
from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import nn

from tensorscope.common.step_calls import AnyCall
from tensorscope.hooks.diagnostics.base import Diagnostic, module_label
from tensorscope.hooks.diagnostics.scaler import grad_scaler_in_use
from tensorscope.hooks.observer import CallRecord, StepRecord

SAMPLE = 4096
DEAD_FRACTION = 0.99
DEAD_STEPS = 3          # consecutive checked steps
MIN_ELEMENTS = 8
PRODUCER_CALLS = 64     # the step's latest calls searched for a functional ReLU's producer
MAX_CONSUMERS = 4096    # modules remembered as taking a functional ReLU's output
FP16_MAX = 65504.0
NEAR_MAX = 0.9 * FP16_MAX

_RELU_FNS = frozenset({"ReluBackward0", "ReluBackward1", "ThresholdBackward0",
                       "ThresholdBackward1"})
_RELU6_FNS = frozenset({"HardtanhBackward0", "HardtanhBackward1"})


EARLY_STEPS = 8         # steps checked with a sample of their own


def checked_step(step: int, stats: bool) -> bool:
    """Steps whose ReLU outputs are checked: the first eight, then those with
    statistics (``stats``: the call's statistics are being taken)."""
    return step < EARLY_STEPS or stats


def _is_relu_output(module: nn.Module, fn: Any) -> bool:
    name = type(fn).__name__
    return name in _RELU_FNS or (isinstance(module, nn.ReLU6) and name in _RELU6_FNS)


def _sample(v: torch.Tensor) -> torch.Tensor:
    flat = v.detach()
    flat = flat.view(-1) if flat.is_contiguous() else flat.reshape(-1)
    n = flat.numel()
    stride = max(1, n // SAMPLE)
    if stride > 1 and stride % 2 == 0:
        stride += 1   # odd stride: do not land on the same channel/position every time
    return flat[::stride]


class DeadActivationObserver(Diagnostic):
    """ReLU outputs that are all (or nearly all) zero, step after step."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, tuple[int, str, int], int, str]] = []
        self._seen: dict[int, weakref.ref] = {}
        self._occurrence: dict[tuple[int, str], int] = {}
        self._streak: dict[tuple[int, str, int], tuple[int, int]] = {}   # (checks, first step)
        # modules seen taking a functional ReLU's output in the first steps: the only
        # ones looked at later (a model's structure does not change from step to step)
        self._consumers: set[int] = set()

    def on_forward(self, call: CallRecord) -> None:
        """Queue a zero count of each ReLU output's sample (training forwards, checked steps)."""
        stats = call.stats is not None
        if not call.grad_enabled or not call.outputs or not checked_step(call.step, stats):
            return
        v = call.outputs[0][1]
        if not isinstance(v, torch.Tensor) or v.grad_fn is None:
            return
        if not _is_relu_output(call.module, v.grad_fn) or v.numel() < MIN_ELEMENTS:
            return
        seen = self._seen.get(id(v))
        if seen is not None and seen() is v:
            return    # the same tensor returned by an enclosing module
        self._seen[id(v)] = weakref.ref(v)
        where = (call.root, call.path)
        occ = self._occurrence.get(where, 0)
        self._occurrence[where] = occ + 1
        if stats:   # the capture's statistics cover this output: read their zero fraction
            self._pending.append((-1 - call.index, (call.root, call.path, occ), 0, call.type))
            return
        with torch.no_grad():
            sample = _sample(v)
            handle = self.ctx.defer({"nz": torch.count_nonzero(sample)})
        self._pending.append((handle, (call.root, call.path, occ), sample.numel(), call.type))

    def on_forward_pre(self, call: CallRecord) -> None:
        """Queue a zero count of a functional ReLU's output that this call consumes
        (training forwards, checked steps), named at the module it was applied to."""
        early = call.step < EARLY_STEPS
        if not (early or (id(call.module) in self._consumers and self.ctx.stats_step)) \
                or not call.grad_enabled or not call.inputs:
            return   # after the first steps only the modules that took a ReLU's output
        v = call.inputs[0][1]
        if not isinstance(v, torch.Tensor) or v.grad_fn is None:
            return
        fn = v.grad_fn
        if type(fn).__name__ not in _RELU_FNS or v.numel() < MIN_ELEMENTS:
            return
        if early and len(self._consumers) < MAX_CONSUMERS:
            self._consumers.add(id(call.module))
        seen = self._seen.get(id(v))
        if seen is not None and seen() is v:
            return    # a ReLU module's output, or one seen at another consumer
        self._seen[id(v)] = weakref.ref(v)
        producer = self._producer(fn)
        if producer is not None:
            where, type_ = (producer.root, producer.path), f"F.relu of {producer.type}"
        elif call.parent is not None:
            where, type_ = (call.root, call.parent.path), f"F.relu in {call.parent.type}"
        else:
            return
        occ = self._occurrence.get(where, 0)
        self._occurrence[where] = occ + 1
        with torch.no_grad():
            sample = _sample(v)
            handle = self.ctx.defer({"nz": torch.count_nonzero(sample)})
        self._pending.append((handle, (*where, occ), sample.numel(), type_))

    def _producer(self, relu_fn: Any) -> CallRecord | None:
        """The call of this step whose output the ReLU node was applied to."""
        nxt = getattr(relu_fn, "next_functions", ())
        node = nxt[0][0] if nxt else None
        if node is None:
            return None
        for c in reversed(self.ctx.step_calls()[-PRODUCER_CALLS:]):
            if c.output_grad_fn() is node:
                return c
        return None

    @staticmethod
    def _zero_fraction(record: StepRecord, handle: int, n: int) -> float | None:
        """The zero fraction of a pending check: a deferred count (``handle >= 0``),
        or the statistics of call ``-1 - handle``."""
        if handle < 0:
            index = -1 - handle
            digest = record.digests[index] if index < len(record.digests) else None
            if digest is None or digest.index != index or not digest.stats:
                return None
            return digest.stats.get("zero_fraction")
        nz = record.deferred.get(handle, {}).get("nz")
        if nz is None or n == 0:
            return None
        return 1.0 - float(nz) / n

    def on_step_end(self, record: StepRecord) -> None:
        """Update the per-activation streaks of near-total zeros."""
        pending, self._pending = self._pending, []
        self._seen.clear()
        self._occurrence.clear()
        for handle, key, n, type_ in pending:
            zero = self._zero_fraction(record, handle, n)
            if zero is None:
                continue
            if zero < DEAD_FRACTION:
                self._streak.pop(key, None)
                continue
            streak, first = self._streak.get(key, (0, record.step))
            self._streak[key] = (streak + 1, first)
            if streak + 1 >= DEAD_STEPS:
                self._report(key, type_, zero, streak + 1, first)

    def _report(self, key: tuple[int, str, int], type_: str, zero: float, streak: int,
                first: int) -> None:
        rid, path, _ = key
        where = module_label(self.ctx, rid, path)
        if type_ in ("ReLU", "ReLU6"):
            what = f"{where} ({type_})"
        elif type_.startswith("F.relu of "):
            what = f"the F.relu applied to {where}'s output ({type_[10:]})"
        elif type_.startswith("F.relu in "):
            what = f"an F.relu inside {where}'s forward ({type_[10:]})"
        else:
            what = f"the ReLU at the end of {where}'s forward ({type_})"
        self.emit("dead_activation", "warning", "forward", rid, path,
                  f"The output of {what} was zero for {zero:.1%} of its units across the "
                  f"batch at {streak} consecutive checks since step {first}: the units are "
                  f"dead and pass no "
                  f"gradient, so the layers before them stop learning. Usual causes: a large "
                  f"negative bias or bad initialisation, a learning rate too high, or "
                  f"unnormalised inputs. Fix: default/He initialisation, a lower learning "
                  f"rate, normalised inputs, or LeakyReLU/GELU.", step=first)


class Fp16OverflowObserver(Diagnostic):
    """float16 activations or gradients at or near the float16 limit."""

    def on_step_end(self, record: StepRecord) -> None:
        """Read the step's finite flags and statistics of float16 outputs."""
        if not any(sig.half for sig in record.batch.sigs):   # no row to read
            return
        halves = [d for d in record.digests if _half(d)]
        if not halves:
            return
        calls = record.calls
        over = [d for d in halves if _overflowed(d) and d.inputs_finite]
        inner = [d for d in over if not any(
            o is not d and _encloses(calls, d.index, o.index) for o in over)]
        if inner:
            d = min(inner, key=lambda x: x.index)
            self._report(d, "forward", "activations", record.step)
        grads = [d for d in halves if not d.grad_finite]
        if grads and not inner and not grad_scaler_in_use():
            self._report(max(grads, key=lambda x: x.index), "backward", "gradients",
                         record.step)

    def _report(self, d: AnyCall, phase: str, what: str, step: int) -> None:
        where = module_label(self.ctx, d.root, d.path)
        level = "overflowed to Inf" if phase == "backward" or not d.finite else \
            f"came within 10% of the float16 maximum ({FP16_MAX:.0f})"
        self.emit("fp16_overflow", "warning", phase, d.root, d.path,
                  f"float16 {what} of {where} ({d.type}) {level} at step {step}. float16 "
                  f"holds at most ±65504. Fix: use bfloat16 (same range as float32), "
                  f"autocast with a GradScaler instead of a model-wide .half(), or normalise "
                  f"the inputs/scale down the values entering {where}.", step=step)


def _half(d: AnyCall) -> bool:
    for m in d.outputs:
        if m.get("dtype") == "float16":
            return True
    return False


def _overflowed(d: AnyCall) -> bool:
    if not d.finite:
        return True
    s = d.stats
    if not s:
        return False
    lo, hi = s.get("min"), s.get("max")
    return any(isinstance(x, (int, float)) and abs(x) >= NEAR_MAX for x in (lo, hi))


def _encloses(calls: list[CallRecord], outer: int, inner: int) -> bool:
    if inner >= len(calls) or outer >= len(calls):
        return False
    p = calls[inner].parent
    while p is not None:
        if p is calls[outer]:
            return True
        p = p.parent
    return False
