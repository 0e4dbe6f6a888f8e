"""``non_finite``: never a silent NaN/Inf, and where it came from.

The invariant: if a loss, an activation, a gradient norm or a parameter norm
that TensorScope saw in a step is NaN/Inf, one ``non_finite`` finding of
severity ``error`` names the incident (the one exception is below). The
hooks already probe every call's inputs and outputs on the device each step
(one sum per tensor, NaN/Inf exactly when the tensor holds NaN/Inf), the
output gradients' norms, and the parameter norms on statistics steps; this
observer reads those host values in ``on_step_end``. Once per root, before
its first forward, it also queues one sum per parameter into that step's
transfer, so weights that were non-finite before training are told apart
from an update that diverged.

Provenance, first match wins:

* ``forward``, weights: a parameter was NaN/Inf before the first forward
  (loaded from a checkpoint, set by hand): the module owning it, naming it;
* ``input``: a root call received non-finite data (an input whose name says
  it is a mask, or whose finite values are all zero, is an additive mask, not
  data), even when the forward stayed finite and the first NaN appears in the
  backward or after the update;
* ``loss``: the loss is non-finite while every module output was finite (a
  functional or hand-written loss);
* ``forward``/``loss``: the innermost call whose output is non-finite
  although its inputs were finite (a loss module's call is phase ``loss``).
  When that module's own weights are non-finite: either they were so before
  this step's forward (no update since they were last seen finite) or the
  last update made them so (phase ``optimizer``, at that step);
* ``backward``: the module whose output gradient was finite while the
  gradient it passed back to an input (the output of the module that
  produced it) was not; for code inline in a forward, the nearest enclosing
  call whose output gradient was finite; a parameter's gradient that is
  non-finite while every output gradient is finite is named itself;
* ``optimizer``: parameters finite before the update and non-finite after,
  with finite gradients;
* ``loss``: nothing else explains it (``shapes`` mode probes nothing on the
  device; the message then says to rerun in ``default`` mode).

Not a finding: a step whose only non-finite values are ``-inf``/``+inf``
(never NaN) model outputs while the loss, the gradients, the parameters and
the data stay finite, e.g. ``-inf`` logits of masked actions or classes,
which softmax turns into zeros.

One incident is reported once: after a finding, later steps stay silent
until a step is entirely finite again (a NaN spreads to everything after it).
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import torch
from torch.nn.parameter import is_lazy

from tensorscope.common.distributed import current_rank, in_process_group
from tensorscope.common.step_calls import FINITE, GRAD_FINITE, AnyCall
from tensorscope.hooks.diagnostics.base import Diagnostic, is_loss_module, maximal_modules, \
    module_label, root_module
from tensorscope.hooks.diagnostics.scaler import grad_scaler_in_use
from tensorscope.hooks.observer import CallRecord, StepRecord
from tensorscope.hooks.registry import synced_wrapper


# Root inputs whose name marks an additive mask or bias (``-inf`` on purpose).
MASK_NAMES = ("mask", "bias")
OVERFLOW_CHECKS = 8   # steps whose NaN/Inf gradient norms are checked against the gradients
UNBOUNDED_LOSS = -1e6   # a loss this far below zero has no minimum (a term with the wrong sign)


# layers whose backward only multiplies by their weights (no infinite derivative)
_LINEAR_MAPS = (torch.nn.Linear, torch.nn.Bilinear, torch.nn.modules.conv._ConvNd)


def _by_owner(params: Iterable[tuple[int, str, str]]) -> dict[tuple[int, str], list[str]]:
    """Parameter names by the ``(root, path)`` of the module owning them."""
    out: dict[tuple[int, str], list[str]] = {}
    for root, path, name in params:
        out.setdefault((root, path), []).append(name)
    return out


def _listed(names: list[str]) -> str:
    """The first four names, and ``...`` when there are more."""
    return ", ".join(names[:4]) + (" ..." if len(names) > 4 else "")


def _finite(x: Any) -> bool:
    return x is None or (isinstance(x, (int, float)) and math.isfinite(x))


def _synced(wrapper: str, world: int, step: int) -> str:
    """Why a replica's parameters or their gradients can turn NaN/Inf with no cause on
    its own rank (the gradient all-reduce), and where to look."""
    return (f"The model is {wrapper}: its parameter gradients are averaged over the {world} "
            f"ranks, so a NaN/Inf on any rank reaches every rank. Look at the other ranks' "
            f"non_finite findings of step {step}: the cause is there.")


def _by_hand(world: int, step: int) -> str:
    """The same, for a rank of a job with no such wrapper: the script may average the
    gradients itself (``dist.all_reduce`` of each ``p.grad``)."""
    return (f" This rank is one of the {world} ranks of a torch.distributed job: if the "
            f"script averages gradients over the ranks itself (dist.all_reduce), a NaN/Inf "
            f"on any rank reaches every rank, so look first at the other ranks' non_finite "
            f"findings of step {step}.")


def _value(values: list[float], handle: int | None) -> float | None:
    return values[handle] if handle is not None and 0 <= handle < len(values) else None


class NonFiniteObserver(Diagnostic):
    """Finds the producer of the first NaN/Inf of an incident."""

    roots_only = frozenset({"on_forward_pre"})

    def __init__(self) -> None:
        self._broken = False
        self._overflow_checks = 0   # steps whose non-finite gradient norms were checked
        # (step, defer handle, (root, module, name) per sum) of the weights' first sums
        self._initial: list[tuple[int, int, list[tuple[int, str, str]]]] = []
        self._checked_roots: set[int] = set()
        self._roots: list[CallRecord] = []   # this step's root calls
        self._last_update: int | None = None        # last clean training step (an update)
        self._params_seen_finite: int | None = None  # last step whose parameter norms were finite
        self._masks: dict[tuple[int, str], bool] = {}   # (root, input path) -> an additive mask
        self._plain_rows: Any = None   # parameter rows found with no number (a list)

    # ----------------------------------------------------- weights, once
    def watches(self, module_type: type, hook: str) -> bool:
        """Root calls only (``roots_only``)."""
        return False

    def on_forward_pre(self, call: CallRecord) -> None:
        """Note the step's root calls; at a root's first call, queue one sum per
        parameter of that root (once a root)."""
        if call.parent is not None:
            return
        self._roots.append(call)
        if call.root in self._checked_roots:
            return
        self._checked_roots.add(call.root)
        roots = self.ctx.roots
        root = roots[call.root] if 0 <= call.root < len(roots) else None
        if root is None:
            return
        sums: dict[str, torch.Tensor] = {}
        names: list[tuple[int, str, str]] = []
        with torch.no_grad():
            for mpath, mod in root.named_modules():
                for pname, p in mod.named_parameters(recurse=False):
                    if is_lazy(p) or p.is_meta or p.is_sparse or not (p.is_floating_point() or p.is_complex()):
                        continue
                    t = p.detach()
                    sums[str(len(names))] = torch.view_as_real(t).sum() if t.is_complex() \
                        else t.sum(dtype=torch.float32)
                    names.append((call.root, mpath, f"{mpath}.{pname}" if mpath else pname))
        if sums:
            self._initial.append((call.step, self.ctx.defer(sums), names))

    def _really_non_finite(self, record: StepRecord, rows: list[dict[str, Any]],
                           grads: bool) -> list[dict[str, Any]]:
        """Of the parameters whose norm (``grads``: gradient norm) is NaN/Inf, those whose
        values hold a NaN/Inf (read on the host: this runs only when a norm is not
        finite, at most ``OVERFLOW_CHECKS`` steps). A float32 norm overflows at about
        1.8e19 while every element is finite: gradients that large explode (reported
        here), they are not NaN (yet); weights that large are not NaN either."""
        bad: list[dict[str, Any]] = []
        huge: list[dict[str, Any]] = []
        for r in rows:
            rid = r["root"] if isinstance(r.get("root"), int) else 0
            root = root_module(self.ctx, rid)
            try:
                p = root.get_parameter(r["name"]) if root is not None else None
                t = p.grad if grads and p is not None else p
                finite = t is not None and bool(torch.isfinite(t).all())
            except (AttributeError, RuntimeError):
                finite = False
            (huge if finite else bad).append(r)
        if huge and grads:
            self._report_overflowed(record, huge)
        return bad

    def _report_overflowed(self, record: StepRecord, rows: list[dict[str, Any]]) -> None:
        """One finding per root, on the root as ``exploding_gradient``'s norm check reports
        it (the gradients grow through the whole stack or recurrence); the message names
        the parameters and their modules."""
        by_root: dict[int, list[tuple[str, str]]] = {}
        for r in rows:
            by_root.setdefault(r["root"] if isinstance(r.get("root"), int) else 0, []).append(
                (r.get("module", ""), r["name"]))
        for rid, params in by_root.items():
            names = [name for _, name in params]
            owners = list(dict.fromkeys(module_label(self.ctx, rid, m) for m, _ in params))
            self.emit("exploding_gradient", "warning", "backward", rid, "",
                      f"The gradients of {_listed(names)} (in {_listed(owners)}) at step "
                      f"{record.step} are finite but so large that their norm overflows "
                      f"float32 (above about 1e19): the gradients explode (a recurrence or a "
                      f"deep stack that multiplies them, huge activations, a learning rate "
                      f"far too high), and the update that follows throws the weights to "
                      f"NaN/Inf. Fix: clip them (torch.nn.utils.clip_grad_norm_), lower the "
                      f"learning rate, or rescale the initialisation or the inputs.",
                      step=record.step)

    def _initially_bad(self, record: StepRecord) -> list[tuple[int, str, str]]:
        """The parameters found non-finite by this step's initial sums (if any)."""
        bad, keep = [], []
        for step, handle, names in self._initial:
            if step != record.step:
                if step > record.step:
                    keep.append((step, handle, names))
                continue
            got = record.deferred.get(handle, {})
            bad += [names[int(k)] for k, v in got.items() if not _finite(v)]
        self._initial = keep
        return bad

    # ----------------------------------------------------------- step end
    def on_step_end(self, record: StepRecord) -> None:
        """Read the step's finite flags and name the producer."""
        roots, self._roots = self._roots, []
        initial = self._initially_bad(record) if self._initial else []
        calls, values = record.calls, record.values
        rows = record.summary.params
        huge_weights = False   # weights finite but their norm overflowed
        if rows is self._plain_rows:   # the rows of a step without numbers, seen already
            bad_params = bad_pgrads = []
        else:
            bad_params = [r for r in rows if not _finite(r.get("norm"))]
            bad_pgrads = [r for r in rows if not _finite(r.get("grad_norm"))]
            huge_weights = bool(bad_params)
            if (bad_pgrads or bad_params) and self._overflow_checks < OVERFLOW_CHECKS:
                self._overflow_checks += 1
                bad_pgrads = self._really_non_finite(record, bad_pgrads, grads=True)
                bad_params = self._really_non_finite(record, bad_params, grads=False)
                huge_weights = huge_weights and not bad_params
        # the rows are read only when some flag is down (all_flags: the and of them)
        all_flags = record.batch.all_flags
        bad_grad = not all_flags & GRAD_FINITE
        bad_loss = not _finite(record.summary.loss)
        bad_roots = [] if all_flags & FINITE else [
            (calls[d.index], d) for d in record.digests
            if not d.finite and d.index < len(calls) and calls[d.index].parent is None]
        bad_inputs = self._bad_root_inputs(record, roots)
        if not (initial or bad_params or bad_pgrads or bad_grad or bad_loss or bad_roots
                or bad_inputs):
            self._broken = False
            if record.kind == "train":
                self._last_update = record.step
            if rows is self._plain_rows:
                return
            if any(r.get("norm") is not None for r in rows) and not huge_weights:
                # (weights whose norm overflows are finite, but not seen to be usable)
                self._params_seen_finite = record.step
            elif all(r.get("grad_norm") is None and r.get("update_ratio") is None
                     for r in rows):
                # the parameter tracker shares one list between the steps that take
                # no numbers (never changed once emitted): judged once
                self._plain_rows = rows
            return
        if not (initial or bad_params or bad_pgrads or bad_grad or bad_loss or bad_inputs) \
                and _absorbed(bad_roots, values):
            return   # e.g. -inf logits masked on purpose: nothing else is non-finite
        if not (initial or bad_params or bad_loss or bad_inputs or bad_roots) \
                and grad_scaler_in_use():
            return   # AMP: the GradScaler skips a step whose gradients overflowed
        if self._broken:
            return
        self._broken = True
        if initial:
            self._weights_before(record, initial)
        elif bad_inputs:
            self._data(record, *bad_inputs[0])
        elif bad_loss and not bad_roots:
            self._loss(record)   # every module output was finite: the loss code made it
        elif not (bad_roots and self._forward(record)) \
                and not (bad_grad and self._backward(record)) \
                and not (bad_pgrads and self._param_grads(record, bad_pgrads)) \
                and not (bad_params and self._optimizer(record, bad_params)):
            self._loss(record)

    # -------------------------------------------------------------- inputs
    def _bad_root_inputs(self, record: StepRecord,
                         roots: list[CallRecord]) -> list[tuple[CallRecord, list[str]]]:
        """Root calls whose data inputs held NaN/Inf, with those inputs' paths.

        Data is a tensor no call produced and no autograd graph computed (a
        model's prediction handed to a custom criterion is not data), entering a
        root before any root's output was non-finite. From the step's probes;
        ``shapes`` mode checks the live inputs on the host instead (``_loss``)."""
        out = []
        values = record.values
        for call in roots:
            if call.step != record.step:
                continue
            if call.in_entries and not is_loss_module(call.module):
                metas = [m for m in call.in_meta if m.get("kind") == "tensor"]
                paths = []
                for m, ent in zip(metas, call.in_entries):
                    v = _value(values, ent.finite)
                    if v is None or math.isfinite(v) or ent.producer is not None \
                            or ent.fn is not None or self._mask(call.root, m.get("path", ""), ent):
                        continue
                    paths.append(m.get("path", ""))
                if paths:
                    out.append((call, paths))
            if not all(_value(values, e.finite) is None or math.isfinite(_value(values, e.finite))
                       for e in call.out_entries):
                break   # a root's output is non-finite: later roots receive its consequences
        return out

    def _mask(self, root: int, path: str, ent: Any) -> bool:
        """Whether a root input is an additive mask (decided once per input path:
        the host check runs at most once for a mask passed every step)."""
        key = (root, path)
        hit = self._masks.get(key)
        if hit is None:
            hit = _mask_like(path, ent)
            if hit or len(self._masks) < 256:
                self._masks[key] = hit
        return hit

    def _data(self, record: StepRecord, call: CallRecord, paths: list[str]) -> None:
        name = module_label(self.ctx, call.root, call.path)
        where = f" (input {', '.join(paths[:3])})" if paths else ""
        self.emit("non_finite", "error", "input", call.root, "",
                  f"NaN/Inf already in the data entering {name} at step {record.step}"
                  f"{where}: it comes from the data pipeline or from code that runs before "
                  f"the model (a missing value, a division by zero, log(0) in "
                  f"preprocessing). Even where the forward stays finite, the backward or "
                  f"the update turns it into NaN. Fix: clean the data (torch.nan_to_num, "
                  f"torch.isfinite filtering, log(x + eps)).", step=record.step)

    # ------------------------------------------------------------- weights
    def _weights_before(self, record: StepRecord, bad: list[tuple[int, str, str]],
                        step: int | None = None) -> None:
        """Parameters already non-finite before step ``step``'s forward."""
        n = record.step if step is None else step
        for (rid, mpath), names in _by_owner(bad).items():
            listed = _listed(names)
            self.emit("non_finite", "error", "forward", rid, mpath,
                      f"The weights of {module_label(self.ctx, rid, mpath)} ({listed}) were "
                      f"already NaN/Inf before step {n}'s forward: they were loaded from a "
                      f"checkpoint or set by hand that way, not made so by an update. "
                      f"Everything computed from them is NaN. Fix: check the checkpoint "
                      f"(torch.isfinite(p).all() for each parameter after loading) and the code "
                      f"that initialises or edits {listed}.", step=record.step)

    def _own_bad_params(self, call: CallRecord) -> list[tuple[int, str, str]]:
        """Non-finite parameters of a call's own module (host check: only on the
        rare path where a producer was found)."""
        module = call.module
        if module is None:
            return []
        with torch.no_grad():
            return [(call.root, call.path, f"{call.path}.{n}" if call.path else n)
                    for n, p in module.named_parameters(recurse=False)
                    if (p.is_floating_point() or p.is_complex()) and not p.is_meta
                    and not bool(torch.isfinite(p).all())]

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
                if not d.inputs_finite:
                    self._data(record, call, [])
                    return True
                producer, d = call, d
            else:
                d = by_index[producer.index]
            self._report_producer(record, producer, d)
            return True
        return False

    def _report_producer(self, record: StepRecord, call: CallRecord, d: AnyCall) -> None:
        if _is_half(d):
            return  # float16 overflow: fp16_overflow names it, with the fp16-specific fix
        weights = self._own_bad_params(call)
        if weights:
            updated = self._last_update
            if updated is None or (self._params_seen_finite is not None
                                   and self._params_seen_finite >= updated):
                self._weights_before(record, weights)
            else:
                self._diverged(record, call, weights, updated)
            return
        loss = is_loss_module(call.module) if call.module is not None else False
        name = module_label(self.ctx, call.root, call.path)
        what = "the loss " if loss else ""
        self.emit("non_finite", "error", "loss" if loss else "forward", call.root, call.path,
                  f"NaN/Inf first appears in the output of {what}{name} ({call.type}) at step "
                  f"{record.step}, although its inputs and weights were finite. Typical causes: "
                  f"log or sqrt of zero/negative values, a division by a value that can be "
                  f"zero, exp overflow, or values grown too large (learning rate too high). "
                  f"Fix: add an epsilon or clamp inside {name}, use the numerically stable op "
                  f"(log_softmax, logsumexp), or lower the learning rate.", step=record.step)

    def _diverged(self, record: StepRecord, call: CallRecord, weights: list[tuple[int, str, str]],
                  updated: int) -> None:
        """Weights finite at step ``updated``'s forward and gradients finite, but
        non-finite at the next forward: that update made them so, or (gradients
        averaged over ranks) another rank's NaN/Inf reached them."""
        names = [n for _, _, n in weights]
        listed = _listed(names)
        name = module_label(self.ctx, call.root, call.path)
        synced = self._synchronized(call.root)
        if synced is not None:
            wrapper, world = synced
            self.emit("non_finite", "error", "optimizer", call.root, call.path,
                      f"After the optimizer update of step {updated}, parameters of {name} "
                      f"({listed}) are NaN/Inf, although this rank's forward and activation "
                      f"gradients of that step were finite. {_synced(wrapper, world, updated)} "
                      f"If no rank has one, the update itself diverged: lower the learning "
                      f"rate or clip gradients (torch.nn.utils.clip_grad_norm_).", step=updated)
            return
        self.emit("non_finite", "error", "optimizer", call.root, call.path,
                  f"After the optimizer update of step {updated}, parameters of "
                  f"{name} ({listed}) are NaN/Inf, "
                  f"although that step's forward and gradients were finite: the update "
                  f"diverged (step {record.step}'s forward is the first to use them). Fix: "
                  f"lower the learning rate, clip gradients (torch.nn.utils.clip_grad_norm_), "
                  f"or check optimizer settings (eps=0, weight decay).{self._job(updated)}",
                  step=updated)

    @staticmethod
    def _job(step: int) -> str:
        """``_by_hand`` for a rank of a job of several (no synchronising wrapper), else ""."""
        world = current_rank().world_size
        return _by_hand(world, step) if world > 1 and in_process_group() else ""

    def _synchronized(self, rid: int) -> tuple[str, int] | None:
        """``(wrapper class, world size)`` when root ``rid`` averages its gradients
        over the ranks of a job of more than one (DDP, FSDP), else None. Read only
        on the rare path of a finding."""
        roots = self.ctx.roots
        root = roots[rid] if 0 <= rid < len(roots) else None
        world = current_rank().world_size
        if root is None or world < 2:
            return None
        wrapper = synced_wrapper(root)
        return None if wrapper is None else (wrapper, world)

    # --------------------------------------------------------------- backward
    def _backward(self, record: StepRecord) -> bool:
        calls, digests = record.calls, record.digests
        by_index = {d.index: d for d in digests}
        bad = sorted((d for d in digests if not d.grad_finite and d.index < len(calls)),
                     key=lambda x: -x.index)
        if not bad:
            return False
        if _is_half(bad[0]):
            # with a GradScaler this is normal AMP (the step is skipped and the scale
            # lowered); without one, fp16_overflow names it
            return True
        for d in bad:
            call = calls[d.index]
            culprit = _finite_consumer(call, calls, by_index)
            via = "input"
            if culprit is None:
                culprit, via = _finite_ancestor(call, by_index), "inside"
            if culprit is None:
                continue
            self._report_backward(record, culprit, call, via)
            return True
        d = bad[0]
        call = calls[d.index]
        name = module_label(self.ctx, call.root, call.path)
        self.emit("non_finite", "error", "backward", call.root, call.path,
                  f"The gradient arriving at the output of {name} ({call.type}) at step "
                  f"{record.step} is NaN/Inf while the forward was finite: the backward of the "
                  f"code after it (the loss computation) has an infinite derivative there, "
                  f"e.g. sqrt(0), x**0.5, the norm of a zero vector, log near 0, or exp() of a "
                  f"value past 88 (float32 overflows). " + (_unbounded(record) or "Fix: add an "
                  "epsilon (sqrt(x + 1e-12)), clamp, or use a stable op."), step=record.step)
        return True

    def _report_backward(self, record: StepRecord, culprit: CallRecord, fed: CallRecord,
                         via: str) -> None:
        name = module_label(self.ctx, culprit.root, culprit.path)
        fed_name = module_label(self.ctx, fed.root, fed.path)
        where = (f"the gradient it passed back to its input (the output of {fed_name}, "
                 f"{fed.type})" if via == "input" else
                 f"a gradient computed inside it (the one flowing into {fed_name}, {fed.type})")
        if via == "input" and isinstance(culprit.module, _LINEAR_MAPS):
            # a matrix product's derivative is its weights: finite; its gradient overflowed
            self.emit("non_finite", "error", "backward", culprit.root, culprit.path,
                      f"The backward of {name} ({culprit.type}) produced the first Inf "
                      f"gradient at step {record.step}: the gradient at its output was "
                      f"finite, but {where} is not, while the forward was finite. A linear "
                      f"map's backward multiplies the gradient by its weights, so the "
                      f"gradient overflowed float32 (above about 3e38): the gradients explode "
                      f"(a deep stack or a recurrence that multiplies them, weights "
                      f"initialised too large, a learning rate far too high). Fix: the "
                      f"default initialisation, normalisation layers, clip the gradients "
                      f"(torch.nn.utils.clip_grad_norm_), a lower learning rate.",
                      step=record.step)
            return
        self.emit("non_finite", "error", "backward", culprit.root, culprit.path,
                  f"The backward of {name} ({culprit.type}) produced the first NaN/Inf gradient "
                  f"at step {record.step}: the gradient at its output was finite, but {where} "
                  f"is not, while the forward was finite. An operation in {name} has an "
                  f"infinite derivative at these values, e.g. sqrt(0), x**0.5, the norm of a "
                  f"zero vector (x / x.norm()), or log near 0. Fix: add an epsilon inside the "
                  f"root or the division (sqrt(x + 1e-12)), clamp, or use a stable op "
                  f"(F.normalize).", step=record.step)

    def _param_grads(self, record: StepRecord, bad: list[dict[str, Any]]) -> bool:
        """Parameter gradients non-finite while every output gradient was finite."""
        by_owner = _by_owner((r["root"] if isinstance(r.get("root"), int) else 0,
                              r.get("module", ""), r["name"]) for r in bad)
        for (rid, mpath), names in by_owner.items():
            listed = _listed(names)
            synced = self._synchronized(rid)
            if synced is not None:
                wrapper, world = synced
                self.emit("non_finite", "error", "backward", rid, mpath,
                          f"The gradient of {listed} is NaN/Inf at step {record.step} although "
                          f"this rank's forward and activation gradients were finite. "
                          f"{_synced(wrapper, world, record.step)}", step=record.step)
                continue
            self.emit("non_finite", "error", "backward", rid, mpath,
                      f"The gradient of {listed} is NaN/Inf at step {record.step} although the "
                      f"forward and the gradients of the activations were finite: an "
                      f"operation on the weight itself (sqrt, log, division, a norm) has an "
                      f"infinite derivative. Fix: add an epsilon or clamp where "
                      f"{module_label(self.ctx, rid, mpath)} transforms its weight."
                      f"{self._job(record.step)}", step=record.step)
        return bool(by_owner)

    # -------------------------------------------------------------- optimizer
    def _optimizer(self, record: StepRecord, bad_params: list[dict[str, Any]]) -> bool:
        by_root: dict[Any, dict[str, str]] = {}
        for r in record.summary.params:
            if r.get("norm") is not None:
                by_root.setdefault(r.get("root"), {})[r["name"]] = r.get("module", "")
        flagged = {r["name"] for r in bad_params}
        done = False
        for root, owners in by_root.items():
            names = sorted(n for n in owners if n in flagged)
            if not names:
                continue
            for mod in maximal_modules(owners, flagged):
                rid = root if isinstance(root, int) else 0
                listed = [n for n in names if n.startswith(mod)] if mod else names
                done = True
                self.emit("non_finite", "error", "optimizer", rid, mod,
                          f"After optimizer step {record.step}, parameters of "
                          f"{module_label(self.ctx, rid, mod)} became NaN/Inf "
                          f"({', '.join(listed[:4])}{' ...' if len(listed) > 4 else ''}) "
                          f"although they, the forward and the gradients were finite: the "
                          f"update diverged. Fix: lower the learning rate, clip gradients "
                          f"(torch.nn.utils.clip_grad_norm_), or check optimizer settings "
                          f"(eps=0, weight decay).", step=record.step)
        return done

    # ------------------------------------------------------------------- loss
    def _loss(self, record: StepRecord) -> None:
        """The loss is non-finite while every module output was (a functional loss),
        or nothing the probes saw explains it (``shapes`` mode, where the live root
        inputs are checked on the host first, for this incident only)."""
        calls = record.calls
        shapes = self.ctx.mode == "shapes"
        if shapes:
            for call in calls:
                if call.parent is None and not is_loss_module(call.module):
                    paths = _host_bad_inputs(call)
                    if paths:
                        self._data(record, call, paths)
                        return
        loss_calls = [c for c in calls if c.parent is None and is_loss_module(c.module)]
        models = [c for c in calls if c.parent is None and not is_loss_module(c.module)]
        at = loss_calls[-1] if loss_calls else (models[-1] if models else None)
        rid, path = (at.root, at.path) if at is not None else (0, "")
        loss = record.summary.loss
        what = (f"The loss of step {record.step} is {loss}" if not _finite(loss) else
                f"A value TensorScope checked at step {record.step} is NaN/Inf")
        hint = (" (shapes mode probes nothing on the device: run with --mode default to "
                "find the module that produced it)" if shapes else
                ", although every module output TensorScope checked was finite: it was "
                "produced by the code that computes the loss outside the modules")
        self.emit("non_finite", "error", "loss", rid, path,
                  f"{what}{hint}. Typical causes: log of zero or of a negative value, a "
                  f"division by zero, sqrt of a negative value. Fix: add an epsilon or clamp "
                  f"in the loss, or use the stable functional form (F.cross_entropy on "
                  f"logits, F.binary_cross_entropy_with_logits).", step=record.step)


def _mask_like(path: str, ent: Any) -> bool:
    """An input that is an additive mask: named so, or (checked on the host, on
    this rare path) holding only zeros besides its infinities."""
    low = path.lower()
    if any(n in low for n in MASK_NAMES):
        return True
    t = ent.ref() if ent is not None else None
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        return False
    with torch.no_grad():
        if bool(torch.isnan(t).any()):
            return False
        fin = t[torch.isfinite(t)]
        return fin.numel() > 0 and not bool(fin.any())


def _host_bad_inputs(call: CallRecord) -> list[str]:
    """``shapes`` mode: the root's data inputs still alive that hold NaN/Inf."""
    metas = [m for m in call.in_meta if m.get("kind") == "tensor"]
    out = []
    with torch.no_grad():
        for m, ent in zip(metas, call.in_entries):
            t = ent.ref()
            if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()) \
                    and not bool(torch.isfinite(t).all()) and not _mask_like(m.get("path", ""), ent):
                out.append(m.get("path", ""))
    return out


def _absorbed(bad_roots: list[tuple[CallRecord, AnyCall]], values: list[float]) -> bool:
    """Only model outputs are non-finite, and only as infinities (``-inf`` masked
    logits), never NaN, and no loss module's output."""
    for call, _ in bad_roots:
        if is_loss_module(call.module):
            return False
        for ent in call.out_entries:
            v = _value(values, ent.finite)
            if v is not None and math.isnan(v):
                return False
    return True


def _root_of(call: CallRecord) -> CallRecord:
    while call.parent is not None:
        call = call.parent
    return call


def _grad_ok(d: AnyCall | None) -> bool:
    return d is not None and d.grad_norm is not None and d.grad_finite


def _finite_consumer(call: CallRecord, calls: list[CallRecord],
                     by_index: dict[int, AnyCall]) -> CallRecord | None:
    """The innermost call that took one of ``call``'s outputs as input and whose own
    output gradient was finite."""
    outs = {id(e) for e in call.out_entries}
    if not outs:
        return None
    found = [c for c in calls if c.index > call.index and not _encloses(c, call)
             and any(id(e) in outs for e in c.in_entries)]
    ok = [c for c in found if _grad_ok(by_index.get(c.index))]
    inner = [c for c in ok if not any(_encloses(c, o) for o in ok if o is not c)]
    return min(inner, key=lambda c: c.index) if inner else None


def _finite_ancestor(call: CallRecord, by_index: dict[int, AnyCall]) -> CallRecord | None:
    p = call.parent
    while p is not None:
        if _grad_ok(by_index.get(p.index)):
            return p
        p = p.parent
    return None


def _innermost_producer(inside: list[CallRecord],
                        by_index: dict[int, AnyCall]) -> CallRecord | None:
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


def _is_half(d: AnyCall) -> bool:
    return any(m.get("dtype") == "float16" for m in d.outputs)


def _unbounded(record: StepRecord) -> str:
    """A sentence when the step's loss has run off far below zero (a term with the wrong
    sign, which the optimizer drives without bound until something overflows); "" else."""
    loss = getattr(record.summary, "loss", None)
    if not isinstance(loss, (int, float)) or not loss < UNBOUNDED_LOSS:
        return ""
    return (f"The loss itself is {loss:.3g}: it falls without bound, so a term of it has "
            f"the wrong sign (a KL divergence written without its minus, a reward added where "
            f"it should be subtracted) and the optimizer drives some value up until it "
            f"overflows. Fix: check the sign of each term of the loss (a VAE's KL is "
            f"-0.5 * sum(1 + logvar - mu**2 - logvar.exp())).")
