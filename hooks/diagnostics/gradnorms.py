"""``vanishing_gradient`` and ``exploding_gradient`` from gradient norms at the ends of each model.

Per root, the weight matrices (parameters with two or more dimensions that
require grad) are ordered by the first call of their module in the forward
(learned from the calls before the first optimizer step). At each optimizer
step (the first eight, then every other one) the
gradient norms of the first and of the last such weight are queued on the
device (two small norms, in the step's single transfer; read after any
clipping, since the optimizer step comes after it) and judged in
``on_step_end``. On steps whose summary carries every parameter's gradient
norm (``WatchContext.param_grad_norms``) those are read instead of queued again.

* ``vanishing_gradient``: the largest gradient norm among the input end's
  weights (the first third of the weight layers, at most ``INPUT_END`` (4):
  one layer's gradient can be small for reasons other than depth, as an
  attention query or key projection's at initialisation, whose gradient goes
  through near-uniform attention scores, while the value projection beside it
  gets the full one) is below ``VANISH_RATIO`` (1e-4, four orders of magnitude)
  times the last layer's
  for ``VANISH_STEPS`` (3) consecutive checked steps, with at least
  ``MIN_LAYERS`` (3) weight layers; the first layer is named. Exactly-zero
  gradients are dead units (``dead_activation``) or unused parameters, not
  vanishing ones.
* ``exploding_gradient``: the combined norm of those end layers' gradients is
  at least ``EXPLODE_ABS`` (1e6), or at least ``EXPLODE_MIN`` (100) and
  ``EXPLODE_JUMP`` (1000) times the median of the previous (up to ten)
  steps. Under optimizers whose steps are normalised by the gradients' own
  scale (Adam, RMSprop, Adagrad, Lion: ``scale_free_optimizer``) a large but
  steady norm moves the weights by the learning rate like any other (the
  style loss weighted by 1e10 of neural style transfer): only a jump counts,
  or a norm of ``EXPLODE_ABS_SCALE_FREE`` (1e15), near where squared gradients
  overflow float32. The finding is on the root; the message names the layer with the
  larger gradient. Clipped gradients are measured after clipping, so clipping
  scripts never match; a loss that is large early and then falls does not
  either.
"""
from __future__ import annotations

import math
import statistics
import weakref
from typing import Any

import torch

from tensorscope.hooks.diagnostics.base import Diagnostic, module_label, scale_free_optimizer
from tensorscope.hooks.observer import CallRecord, StepRecord
from tensorscope.hooks.stats import norm

VANISH_RATIO = 1e-4
VANISH_STEPS = 3
MIN_LAYERS = 3
INPUT_END = 4
EXPLODE_ABS = 1e6
# the same under optimizers whose steps do not follow the gradients' scale (Adam, RMSprop):
# where squared gradients near float32's range (1.8e19) and Adam's running average of
# them overflows
EXPLODE_ABS_SCALE_FREE = 1e15
EXPLODE_MIN = 1e2
EXPLODE_JUMP = 1e3
HISTORY = 10
SHARED = -1   # a queued "handle": the norms come with the core's parameter rows


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


class GradScaleObserver(Diagnostic):
    """Gradient norms that shrink through the depth or grow across steps."""

    def __init__(self) -> None:
        # root -> (first weight name, its module, last weight name, its module, layers)
        self._ends: dict[int, tuple[str, str, str, str, int]] = {}
        self._input_end: dict[int, tuple[str, ...]] = {}   # root -> the next weights after the first
        self._queued: dict[int, int] = {}       # root -> defer handle
        self._vanish_streak: dict[int, tuple[int, int]] = {}   # root -> (steps, first step)
        self.vanishing: set[int] = set()   # roots whose gradients vanish now (read by updates)
        self._history: list[float] = []
        self._order: dict[tuple[int, str], int] = {}
        self._learned: set[int] = set()
        self._owners: dict[str, tuple[weakref.ref, str, weakref.ref]] = {}  # name -> module, attr, root
        # root -> whether the optimizers stepping its end layers are all scale-free,
        # with the optimizers it was decided for
        self._scale_free: dict[int, tuple[tuple[int, ...], bool]] = {}

    def on_forward_pre(self, call: CallRecord) -> None:
        """Learn the forward order of a root's modules (until its ends are known)."""
        if call.root not in self._learned:
            self._order.setdefault((call.root, call.path), len(self._order))

    def on_optimizer_step_pre(self, optimizer: Any) -> None:
        """Queue the gradient norms of each root's first and last weight (every step
        for the first eight steps, then every other step)."""
        roots = self.ctx.roots
        if self._order:
            self._learn_ends(roots)
        step = self.ctx.step_index
        if step >= 8 and step % 2:
            return
        shared = getattr(self.ctx, "param_grad_norms", False)
        for rid, (first, _, last, _, _) in self._ends.items():
            if rid in self._queued or not 0 <= rid < len(roots):
                continue
            p1, p2 = self._param(roots[rid], first), self._param(roots[rid], last)
            if p1 is None or p2 is None:
                continue
            g1, g2 = p1.grad, p2.grad
            if g1 is None or g2 is None or g1.is_sparse or g2.is_sparse:
                continue
            more = [g for g in (getattr(self._param(roots[rid], n), "grad", None)
                                for n in self._input_end.get(rid, ()))
                    if g is not None and not g.is_sparse and g.device == g1.device]
            self._note_optimizers(rid, (p1, p2))
            if shared and self._named(p1, rid, first) and self._named(p2, rid, last):
                self._queued[rid] = SHARED   # read from the step summary's parameter rows
                continue
            grad_on = torch.is_grad_enabled()
            torch.set_grad_enabled(False)
            try:
                norms = {"first": norm(g1), "last": norm(g2)}
                if more:
                    norms["input_end"] = torch.stack(
                        [norm(g).to(norms["first"].dtype) for g in more]).amax()
                self._queued[rid] = self.ctx.defer(norms)
            finally:
                torch.set_grad_enabled(grad_on)

    def _note_optimizers(self, rid: int, params: tuple[Any, ...]) -> None:
        """Whether every optimizer holding ``params`` is scale-free (decided again only
        when the optimizers change)."""
        optimizers = list(getattr(self.ctx, "optimizers", []) or [])
        key = tuple(map(id, optimizers))
        hit = self._scale_free.get(rid)
        if hit is not None and hit[0] == key:
            return
        ids = {id(p) for p in params}
        holders = [o for o in optimizers
                   if any(id(q) in ids for g in o.param_groups for q in g["params"])]
        self._scale_free[rid] = (key, bool(holders) and all(map(scale_free_optimizer, holders)))

    def _param(self, root: Any, name: str) -> Any:
        """``root.get_parameter(name)``, with the owning module looked up once
        (``get_parameter`` walks the path each time); None if it is gone."""
        hit = self._owners.get(name)
        mod = hit[0]() if hit is not None and hit[2]() is root else None
        if mod is None:
            mpath, _, pname = name.rpartition(".")
            try:
                mod = root.get_submodule(mpath)
            except AttributeError:
                return None
            self._owners[name] = hit = (weakref.ref(mod), pname, weakref.ref(root))
        return mod._parameters.get(hit[1])

    def _named(self, param: Any, rid: int, name: str) -> bool:
        """Whether the summary's parameter rows list ``param`` as ``name`` of root ``rid``."""
        hit = self.ctx.param_name(param)
        return hit is not None and hit[0] == rid and hit[2] == name

    def _values(self, record: StepRecord, rid: int, handle: int,
                rows: dict[tuple[Any, str], Any] | None) -> tuple[Any, Any, Any]:
        """The first and last layers' gradient norms, and the largest of the other
        input-end layers' (None when there are none or it was not measured)."""
        if handle != SHARED:
            values = record.deferred.get(handle, {})
            return values.get("first"), values.get("last"), values.get("input_end")
        first, _, last, _, _ = self._ends[rid]
        rows = rows or {}
        got = [rows.get((rid, n)) for n in self._input_end.get(rid, ())]
        more = [float(v) for v in got if v is not None and _finite(v)]
        return rows.get((rid, first)), rows.get((rid, last)), max(more) if more else None

    def on_step_end(self, record: StepRecord) -> None:
        """Judge the queued norms; learn the layer order for the next step."""
        queued, self._queued = self._queued, {}
        if record.kind != "train":
            return
        total, top = 0.0, None
        rows = None
        if SHARED in queued.values():
            rows = {(r.get("root"), r.get("name")): r.get("grad_norm")
                    for r in record.summary.params}
        for rid, handle in queued.items():
            if rid not in self._ends:
                continue
            first, last, more = self._values(record, rid, handle, rows)
            if not (_finite(first) and _finite(last)):
                continue
            entry = max(float(first), float(more)) if _finite(more) else float(first)
            self._vanishing(rid, float(first), entry, float(last), record.step)
            total += first * first + last * last
            name = self._ends[rid][0] if first >= last else self._ends[rid][2]
            if top is None or max(first, last) > top[2]:
                top = (rid, name, max(first, last))
        if top is not None:
            hit = self._scale_free.get(top[0])
            self._exploding(math.sqrt(total), top, record.step, hit is not None and hit[1])

    def _learn_ends(self, roots: list[Any]) -> None:
        """The first and last weight matrices (forward order) of the roots seen so far."""
        order, self._order = self._order, {}
        seen = {rid for rid, _ in order}
        for rid, root in enumerate(roots):
            if rid in self._learned or rid not in seen:
                continue
            self._learned.add(rid)
            items = []
            for mpath, mod in root.named_modules():
                at = order.get((rid, mpath))
                if at is None:
                    continue
                for pname, p in mod.named_parameters(recurse=False):
                    if p.requires_grad and p.dim() >= 2:
                        items.append((at, f"{mpath}.{pname}" if mpath else pname, mpath))
            if items:
                items.sort()
                self._ends[rid] = (items[0][1], items[0][2], items[-1][1], items[-1][2],
                                   len(items))
                size = min(INPUT_END, -(-len(items) // 3))
                self._input_end[rid] = tuple(name for _, name, _ in items[1:size])

    def _vanishing(self, rid: int, first: float, entry: float, last: float, step: int) -> None:
        """``first``: the first layer's gradient norm; ``entry``: the largest at the
        input end (the first layer's included)."""
        fname, fmod, lname, _, count = self._ends[rid]
        if count < MIN_LAYERS or first <= 0.0 or last <= 0.0 or entry / last >= VANISH_RATIO:
            self._vanish_streak.pop(rid, None)
            self.vanishing.discard(rid)
            return
        streak, since = self._vanish_streak.get(rid, (0, step))
        self._vanish_streak[rid] = (streak + 1, since)
        self.vanishing.add(rid)
        if streak + 1 < VANISH_STEPS:
            return
        self.emit("vanishing_gradient", "warning", "backward", rid, fmod,
                  f"The gradient reaching {module_label(self.ctx, rid, fmod)} ({fname}, norm "
                  f"{first:.2e}) is {first / last:.1e} times the one at the output layer "
                  f"({lname}, norm {last:.2e}) for {streak + 1} steps: it vanishes through the "
                  f"depth, so the early layers barely learn. Usual causes: saturating "
                  f"activations (sigmoid/tanh) in a deep stack, poor initialisation, no "
                  f"normalisation. Fix: ReLU/GELU, residual connections, BatchNorm/LayerNorm, "
                  f"He/Xavier initialisation.", step=since)

    def _exploding(self, total: float, top: tuple[int, str, float], step: int,
                   scale_free: bool = False) -> None:
        history = self._history[-HISTORY:]
        self._history.append(total)
        median = statistics.median(history) if len(history) >= 3 else None
        jump = median is not None and median > 0 and total >= EXPLODE_MIN \
            and total >= EXPLODE_JUMP * median
        if total < (EXPLODE_ABS_SCALE_FREE if scale_free else EXPLODE_ABS) and not jump:
            return
        rid, name, value = top
        why = (f"jumped to {total:.2e} from a median of {median:.2e} over the previous "
               f"steps" if jump else f"is {total:.2e}")
        self.emit("exploding_gradient", "warning", "backward", rid, "",
                  f"The gradient norm of the first and last layers at step {step} {why}; the "
                  f"largest is {name} ({value:.2e}). Updates this large wreck the weights and "
                  f"usually end in NaN. Usual causes: learning rate too high, weights "
                  f"initialised too large, a deep/recurrent stack without normalisation, "
                  f"unnormalised targets. Fix: clip gradients "
                  f"(torch.nn.utils.clip_grad_norm_(params, 1.0)), lower the learning rate, "
                  f"normalise inputs and targets.", step=step)
