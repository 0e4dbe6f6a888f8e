"""Gradient bookkeeping: ``grad_accumulation``, ``unused_parameter``, ``param_not_in_optimizer``.

None of these reads a device value.

* ``grad_accumulation`` (forgotten ``zero_grad()``): after each optimizer
  step, remember for each of its parameters the identity and version counter
  of ``p.grad``. At the start of the next backward (the graph observer's hook
  on the node of a root call's output, which runs before any parameter
  gradient of that root is accumulated) a gradient that is
  still the very same tensor at the very same version was neither set to
  None (``zero_grad()``) nor zeroed in place (``zero_grad(set_to_none=False)``
  bumps the version): this backward adds into it. The mark holds through
  later backwards that only add into that gradient (its version one higher
  at the next backward's start: a GAN's generator backward through a
  discriminator whose ``zero_grad()`` was forgotten) until a ``zero_grad()``
  covering it or its optimizer's step. If the optimizer then
  steps with such a gradient, that is the finding. Deliberate accumulation
  (several backwards, then ``step()``, then ``zero_grad()``) never matches,
  because the check looks at the first backward after a step only.
* ``zero_grad_before_step`` (``zero_grad()`` between ``backward()`` and
  ``step()``): a backward ran since the last optimizer step (the same node
  hooks), and the optimizer then steps with its gradients cleared, at two of
  its steps in a row: ``zero_grad()`` (either ``set_to_none``) of this
  optimizer, or of a module owning some of its trainable parameters, was
  called after the last backward (``zeroing`` reports the calls), or every
  trainable parameter it holds has ``p.grad is None`` (and they belong to a
  model that was called). A closure optimizer (LBFGS, Lightning) runs its
  zero_grad and backward inside ``step()``, after this check, so it never
  matches; zeroing another model, or before a further backward, is not it.
  The same kind names gradient accumulation that zeroes every micro-batch
  (``zero_grad()`` at the top of each micro-step, ``step()`` every K): a
  ``zero_grad()`` covering the optimizer ran between two of the backwards since
  its last step, with no optimizer stepping in between, at two of its steps in
  a row, so each step uses only the last micro-batch's gradients. A discarded
  backward taken for an input's gradient (adversarial examples, saliency: a
  root input from outside the models is a leaf that requires grad), or a second
  pass over the same batch (SAM: the same data reaches two root calls) is not it;
  neither is a GAN zeroing its discriminator's gradients from the generator's
  backward (the generator's optimizer stepped in between).
* ``tiny_updates`` (``step()`` forgotten): an optimizer whose ``zero_grad()`` is
  called with backwards between the calls, and that never stepped in the whole
  run (judged on detach): the gradients are thrown away, the weights never
  change.
* ``double_step``: an optimizer steps again with no backward since its last
  step and its gradients untouched since (a sampled gradient is the same tensor
  at the same version, and no ``zero_grad()`` was called), at two of its steps:
  the same gradients are applied twice (``step()`` called in the loop and again
  in a helper or callback). A closure optimizer runs its backward inside
  ``step()``, before the check at the step's end, so it never matches.
* ``unused_parameter``: when an optimizer steps, a trainable parameter of a
  root that took part in the backward has no gradient (``p.grad is None``,
  read on the host); after
  three such checked steps (the first eight, then every eighth) without it
  ever getting one, the largest module whose
  trainable parameters all never got a gradient is named.
* ``param_not_in_optimizer``: a trainable parameter got a gradient but is in
  no parameter group of any optimizer seen so far, at two training steps. A
  module called in a root's forward but not registered in it (kept in a plain
  list: the capture names its call ``parent~Type``) whose parameters got
  gradients outside every optimizer is named by the attribute holding it.
  When all such parameters come before every optimized one (a backbone
  "frozen" by leaving it out of the optimizer) the finding is only ``info``, unless
  they were seen with ``requires_grad=False`` at an earlier step (frozen, the
  optimizer built from the trainable ones, unfrozen later: the fine-tuning does
  nothing), a warning. A
  module reported by ``target_requires_grad`` (a target network or teacher whose
  gradients came through a loss's target) is not reported again here.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import torch

from tensorscope.hooks.diagnostics.base import ZeroGradListener, is_ancestor_path, \
    maximal_modules, module_label, root_module
from tensorscope.hooks.observer import CallRecord, StepRecord

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.diagnostics.memory import GraphObserver

UNUSED_STEPS = 3
CLEARED_STEPS = 2
NEVER_STEPPED = 3   # zero_grad() calls with a backward between them and no step()
NOT_IN_OPTIMIZER_STEPS = 2


class GradAccumulationObserver(ZeroGradListener):
    """Detects backwards that add into gradients left over from before ``step()``."""

    def __init__(self, graphs: "GraphObserver") -> None:
        self._graphs = graphs   # its graph-node hooks tell when a backward starts
        self._checked = -1      # the graphs' forward generation last checked
        self._after_step: dict[int, list[tuple[weakref.ref, int, int]]] = {}
        # id(p) -> 1 + the version of p.grad found stale at a backward's start (0: not
        # stale); a mark holds through later backwards that only add into it (a GAN's
        # generator backward through the discriminator) until its optimizer steps
        self._stale: dict[int, int] = {}
        self._closed = False
        self._backward_ran = False              # since the last optimizer step
        self._cleared: dict[int, int] = {}      # id(optimizer) -> steps in a row
        # zero_grad() calls since the last backward began: (optimizer or module, set_to_none)
        self._zeroed: list[tuple[weakref.ref, bool]] = []
        self._zeroed_before: dict[int, bool] = {}   # id(optimizer): zeroed before its step
        # the zero_grad() calls found between two backwards since the last optimizer step
        # (each list: the calls that emptied one backward's gradients)
        self._discards: list[list[tuple[weakref.ref, bool]]] = []
        self._discarding: dict[int, int] = {}       # id(optimizer) -> steps in a row
        # _key(opt) -> (backwards seen, a gradient's ref, id, version) at its last step's end
        self._last_step: dict[int, tuple[int, weakref.ref, int, int]] = {}
        self._repeats: dict[int, int] = {}           # _key(opt) -> steps on stale gradients
        self._reported_not_reached: set[int] = set()  # roots no backward reached
        self._backwards = 0                         # backwards seen (graph generations)
        self._stepped: set[int] = set()             # _key of the optimizers that stepped
        # _key(opt): (zero_grads with a backward before them and no step, backwards
        # seen at the last one, (root, optimizer class) once they are enough)
        self._idle: dict[int, tuple[int, int, tuple[int, str] | None]] = {}

    def on_optimizer_step(self, optimizer: Any) -> None:
        """Remember each gradient's identity and version right after the step (not
        when they were zeroed in place before it: the next backward adds into zeros,
        which is no leftover; that mistake is zero_grad_before_step)."""
        key = id(optimizer)
        entries = []
        if not self._zeroed_before.pop(key, False):
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is not None:
                        entries.append((weakref.ref(p), id(g), g._version))
        self._after_step[key] = entries
        self._backward_ran = False
        self._zeroed.clear()
        self._discards.clear()
        self._check_repeated(optimizer, entries)

    def _check_repeated(self, optimizer: Any, entries: list) -> None:
        """A step with no backward since the last one, on the very same gradients."""
        key = _key(optimizer)
        last = self._last_step.get(key)
        if not entries:   # zeroed in place before the step: read one gradient here
            g = next((p.grad for group in optimizer.param_groups for p in group["params"]
                      if p.grad is not None), None)
            sample = None if g is None else (weakref.ref(g), id(g), g._version)
        else:
            ref, gid, version = entries[0]
            p = ref()
            g = p.grad if p is not None else None
            sample = None if g is None else (weakref.ref(g), gid, version)
        if sample is None:
            self._last_step.pop(key, None)
            return
        self._last_step[key] = (self._backwards, *sample)
        if last is None or last[0] != self._backwards:
            return
        g_then = last[1]()
        if g_then is None or id(g_then) != last[2] or g_then._version != last[3] \
                or g_then is not g:
            return
        count = self._repeats[key] = self._repeats.get(key, 0) + 1
        if count != CLEARED_STEPS:
            return
        hit = next((h for group in optimizer.param_groups for h in map(
            self.ctx.param_name, group["params"]) if h is not None), None)
        if hit is None:
            return
        name = type(optimizer).__name__
        step = self.ctx.step_index
        self.emit("double_step", "warning", "optimizer", hit[0], "",
                  f"{name}.step() ran again at step {step} with no backward since its "
                  f"previous step and the very same gradients: each gradient is applied "
                  f"twice (or more), so the effective learning rate is doubled and "
                  f"momentum/Adam statistics count each batch twice. Usually step() is "
                  f"called both in the training loop and in a helper (a train_step "
                  f"function, a callback). Fix: call optimizer.step() once per backward.",
                  step=step)

    def on_attach(self, ctx: Any) -> None:
        """Listen to the graph observer's node hooks and to ``zero_grad()``."""
        super().on_attach(ctx)
        self._graphs.add_backward_listener(self._backward_starts)

    def on_detach(self) -> None:
        """Stop checking (hooks left on the user's live graphs become no-ops)."""
        self._closed = True
        self._after_step.clear()
        self._zeroed.clear()
        super().on_detach()
        self._report_never_stepped()
        self._idle.clear()

    def _zero_grad_called(self, obj: Any, set_to_none: bool) -> None:
        """``obj.zero_grad(set_to_none)`` ran: noted only between a backward and the
        next optimizer step (the place where it empties the step)."""
        if self._backward_ran and not self._closed and len(self._zeroed) < 64:
            self._zeroed.append((weakref.ref(obj), set_to_none))
        if isinstance(obj, torch.optim.Optimizer):
            self._last_step.pop(_key(obj), None)
            if _key(obj) not in self._stepped:
                self._never_stepped(obj)
        elif self._last_step:
            self._last_step.clear()
        if self._after_step:
            self._unmark(obj)

    def _unmark(self, obj: Any) -> None:
        """``obj`` zeroed its gradients: they are stale no more, and what was remembered
        of them after the last step is dropped (a new gradient may reuse a freed one's
        id)."""
        if isinstance(obj, torch.optim.Optimizer):
            entries = self._after_step.pop(id(obj), ())
            for ref, _, _ in entries:
                self._stale.pop(id(ref()), None)
            return
        if not isinstance(obj, torch.nn.Module):
            return
        ids = {id(p) for p in obj.parameters()}
        for key, entries in list(self._after_step.items()):
            self._after_step[key] = [e for e in entries if id(e[0]()) not in ids]
        for pid in ids:
            self._stale.pop(pid, None)

    def _never_stepped(self, optimizer: Any) -> None:
        """``zero_grad()`` of an optimizer that has not stepped, with a backward since its
        last one: counted (judged on detach: ``step()`` may be forgotten). What the
        finding needs is kept, not the optimizer (it may be gone by then)."""
        key = _key(optimizer)
        count, seen, where = self._idle.get(key, (0, self._backwards, None))
        if self._backwards > seen:
            count += 1
        if where is None and count >= NEVER_STEPPED:
            trainable = [p for g in optimizer.param_groups for p in g["params"]
                         if p.requires_grad]
            hit = next((h for h in map(self.ctx.param_name, trainable) if h is not None),
                       None)
            if hit is not None:
                where = (hit[0], type(optimizer).__name__)
        self._idle[key] = (count, self._backwards, where)

    def _report_never_stepped(self) -> None:
        """Optimizers zeroed with backwards in between that never stepped in the run:
        the gradients were thrown away, the weights never changed."""
        for key, (count, _, where) in self._idle.items():
            if where is None or key in self._stepped:
                continue
            rid, name = where
            self.emit("tiny_updates", "warning", "optimizer", rid, "",
                      f"{name}.zero_grad() and a backward ran {count + 1} times, but "
                      f"{name}.step() was never called: the gradients were computed and "
                      f"thrown away, and the weights never changed. Fix: call "
                      f"optimizer.step() after loss.backward().")

    def _backward_starts(self, *grad_outputs: Any) -> None:
        """Before the first parameter gradient of a backward is accumulated:
        which gradients are still the stale ones? (autograd's thread)"""
        generation = self._graphs.generation
        if not self._closed:
            self._backward_ran = True
        if self._zeroed:
            # a backward ran since the last optimizer step, and these calls emptied it
            if generation != self._checked and len(self._discards) < 64:
                self._discards.append(list(self._zeroed))
            self._zeroed.clear()   # gradients zeroed before this backward are its own
        if generation == self._checked or self._closed:
            return None   # this backward was checked already (at its first tagged node)
        self._checked = generation
        self._backwards += 1
        stale = self._stale
        for entries in self._after_step.values():
            for ref, gid, version in entries:
                p = ref()
                if p is None:
                    continue
                g = p.grad
                if g is None or id(g) != gid:
                    stale[id(p)] = 0
                    continue
                v = g._version
                # untouched since the step (v == version), or since the last mark but for
                # one backward's accumulation (v <= marked + 1: zeroing in place bumps it
                # once more); marks are stored as version + 1, 0 for not stale
                marked = stale.get(id(p), 0)
                stale[id(p)] = v + 1 if v == version or 0 < marked and v <= marked else 0
        return None

    def on_optimizer_step_pre(self, optimizer: Any) -> None:
        """The optimizer steps: did its last backward add into stale gradients?"""
        self._stepped.add(_key(optimizer))   # before a closure's zero_grad() calls (LBFGS)
        self._idle.pop(_key(optimizer), None)
        params = [p for group in optimizer.param_groups for p in group["params"]]
        stale = [p for p in params if _added_into(p, self._stale.pop(id(p), 0))]
        if stale:
            self._report(params, stale)
        self._check_cleared(optimizer, params)

    def _check_cleared(self, optimizer: Any, params: list[torch.Tensor]) -> None:
        """A backward ran, yet the optimizer's gradients were cleared before its step:
        by a zero_grad() after the backward, or all set to None."""
        trainable = [p for p in params if p.requires_grad]
        key = id(optimizer)
        hit, how = None, ""
        if self._backward_ran and trainable:
            zeroed = self._zeroed_by(optimizer, trainable)
            if zeroed is not None:
                how = zeroed
                self._zeroed_before[key] = True
            elif all(p.grad is None for p in trainable):
                how = "zero_grad()"
            if how:
                # parameters of no model TensorScope saw called are not this mistake (an
                # optimizer left on a model replaced since: param_not_in_optimizer)
                hit = next((h for h in map(self.ctx.param_name, trainable) if h is not None),
                           None)
        if hit is None:
            self._cleared.pop(key, None)
            self._check_discarded(optimizer, trainable)
            return
        self._discarding.pop(key, None)
        count = self._cleared[key] = self._cleared.get(key, 0) + 1
        if count < CLEARED_STEPS:
            return
        rid = hit[0]
        step = self.ctx.step_index
        if how == "zero_grad()" and self._graphs.reached(rid) is False:
            if _twin(optimizer, self.ctx.optimizers) is None:
                # an optimizer over another's parameters (optD = Adam(G.parameters())) steps
                # on what the other one trains: the model left out is param_not_in_optimizer
                self._not_reached(optimizer, trainable, rid, step - count + 1, step)
            return
        effect = ("every gradient is zero, so each update changes the weights only "
                  "through momentum or weight decay" if "False" in how else
                  "none of its parameters has a gradient, so every update is empty")
        self.emit("zero_grad_before_step", "warning", "optimizer", rid, "",
                  f"{type(optimizer).__name__}.step() ran at steps {step - count + 1}-{step} "
                  f"right after a backward, but {how} was called between loss.backward() "
                  f"and optimizer.step(): {effect} ({len(trainable)} trainable parameters), "
                  f"and nothing is learned. Fix: call optimizer.zero_grad() before the "
                  f"forward (or right after step()).", step=step - count + 1)

    def _not_reached(self, optimizer: Any, trainable: list[torch.Tensor], rid: int,
                     first: int, step: int) -> None:
        """Every gradient of the optimizer is None after a backward that never reached
        the model its parameters belong to (whose forward ran): the loss does not
        depend on it."""
        if not self._first_not_reached(rid):
            return
        where = module_label(self.ctx, rid, "")
        self.emit("unused_parameter", "warning", "backward", rid, "",
                  f"{type(optimizer).__name__}.step() ran at steps {first}-{step} after a "
                  f"backward, but none of its {len(trainable)} trainable parameters (of "
                  f"{where}) had a gradient: {where}'s forward ran, yet the backward never "
                  f"reached it, so the loss does not depend on it and it never learns. "
                  f"Usually a .detach() (or torch.no_grad()) on the path from its output to "
                  f"the loss, e.g. a GAN's generator loss computed on fake.detach(). Fix: "
                  f"detach only where the other network trains (the discriminator's "
                  f"loss), not in this model's own loss.", step=first)

    def _first_not_reached(self, rid: int) -> bool:
        seen = self._reported_not_reached
        if rid in seen:
            return False
        seen.add(rid)
        return True

    def _check_discarded(self, optimizer: Any, trainable: list[torch.Tensor]) -> None:
        """Backwards of this step whose gradients a zero_grad() of this optimizer's
        parameters threw away before the next backward: accumulation that zeroes each
        micro-batch."""
        key = id(optimizer)
        discards, self._discards = self._discards, []
        lost = 0
        how = ""
        for zeroed in discards if trainable else ():
            found = self._zeroed_by(optimizer, trainable, zeroed)
            if found is not None:
                lost += 1
                how = found
        if not lost or self._input_gradients() or self._per_sample():
            self._discarding.pop(key, None)
            return
        count = self._discarding[key] = self._discarding.get(key, 0) + 1
        hit = next((h for h in map(self.ctx.param_name, trainable) if h is not None), None)
        if count < CLEARED_STEPS or hit is None:
            return
        step = self.ctx.step_index
        name = type(optimizer).__name__
        self.emit("zero_grad_before_step", "warning", "optimizer", hit[0], "",
                  f"{name}.step() at step {step} used only the last of {lost + 1} "
                  f"backwards since its previous step: {how} was called between them "
                  f"(every micro-step of a gradient accumulation loop), so the gradients "
                  f"of the other {lost} micro-batches were thrown away and each update is "
                  f"one micro-batch's, scaled down by the accumulation factor. Fix: call "
                  f"optimizer.zero_grad() only right after optimizer.step() (once per "
                  f"accumulation cycle).", step=step)

    def _per_sample(self) -> bool:
        """Whether every training root call of this step took a batch of one sample: a
        gradient per sample, each zeroed after the script read it (DP-SGD's per-sample
        clipping, per-sample gradient norms, influence functions), not micro-batches."""
        calls = getattr(self.ctx, "step_calls", None)
        seen = 0
        for call in calls() if calls is not None else ():
            if not call.is_root or not call.grad_enabled:
                continue
            meta = next((m for m in call.in_meta if m.get("kind") == "tensor"), None)
            shape = meta.get("shape") if meta is not None else None
            if not shape or shape[0] != 1:
                return False
            seen += 1
        return seen >= 2

    def _input_gradients(self) -> bool:
        """Whether this step's root calls took a batch twice (the same data reached two
        root calls: a second pass on one batch, as SAM does) or took an input from
        outside the models that is a leaf requiring grad (a backward for the input's
        gradient: FGSM, saliency): passes over one batch, not micro-batches."""
        calls = getattr(self.ctx, "step_calls", None)
        seen: set[int] = set()
        for call in calls() if calls is not None else ():
            if not call.is_root:
                continue
            here: set[int] = set()
            for ent in call.in_entries:
                t = ent.ref() if ent.producer is None else None
                if t is None:
                    continue
                if ent.fn is None and t.requires_grad:
                    return True
                try:
                    here.add(t.untyped_storage().data_ptr())
                except Exception:   # a tensor without storage
                    continue
            if here & seen:
                return True
            seen |= here
        return False

    def _zeroed_by(self, optimizer: Any, trainable: list[torch.Tensor],
                   zeroed: list[tuple[weakref.ref, bool]] | None = None) -> str | None:
        """How the gradients of ``optimizer`` were zeroed since the last backward began
        (``"opt.zero_grad(set_to_none=False)"``...), or None; ``zeroed``: other calls
        than those."""
        ids: set[int] | None = None
        for ref, set_to_none in self._zeroed if zeroed is None else zeroed:
            obj = ref()
            if obj is None:
                continue
            if _key(obj) != _key(optimizer):
                if not isinstance(obj, torch.nn.Module):
                    continue
                if ids is None:
                    ids = {id(p) for p in trainable}
                if not any(id(p) in ids for p in obj.parameters()):
                    continue   # another model's gradients (a GAN's other network)
            what = "model" if isinstance(obj, torch.nn.Module) else "optimizer"
            return f"{what}.zero_grad(set_to_none={set_to_none})"
        return None

    def _report(self, params: list[torch.Tensor], stale: list[torch.Tensor]) -> None:
        owners: dict[int, dict[str, str]] = {}
        for p in params:
            hit = self.ctx.param_name(p)
            if hit is not None and p.grad is not None:
                owners.setdefault(hit[0], {})[hit[2]] = hit[1]
        flagged = set()
        for p in stale:
            hit = self.ctx.param_name(p)
            if hit is not None:
                flagged.add(hit[2])
        step = self.ctx.step_index
        for rid, names in owners.items():
            for mod in maximal_modules(names, flagged):
                where = module_label(self.ctx, rid, mod)
                self.emit("grad_accumulation", "warning", "backward", rid, mod,
                          f"The backward of step {step} added into the gradients of {where} "
                          f"that were left over from before the previous optimizer.step(): "
                          f"zero_grad() was not called in between, so every update uses the "
                          f"sum of all past gradients. Fix: call optimizer.zero_grad() once per "
                          f"step (for deliberate accumulation, after each step()).", step=step)


class ParamCoverageObserver(ZeroGradListener):
    """Parameters that never get a gradient, or get one but are never updated."""

    def __init__(self, targets: Any = None) -> None:
        # a TargetGradObserver: a module whose output a loss's target carried got its
        # gradients through the target (that mistake is target_requires_grad)
        self._targets = targets
        self._was_frozen: set[tuple[int, str]] = set()   # seen with requires_grad=False
        # modules called inside a root but not registered in it, with trainable parameters:
        # (module, root, parent path, step), checked at the next optimizer step
        self._unregistered: dict[int, tuple[weakref.ref, int, str, int]] = {}
        self._unregistered_seen: set[int] = set()
        self._has_grad: dict[tuple[int, str], bool] = {}
        self._no_grad: dict[tuple[int, str], int] = {}
        self._grad_off: set[int] = set()   # roots counted there for forwards run with grad off
        self._stepped: set[tuple[int, str]] = set()   # held by an optimizer stepped this step
        # (step, roots) of the last inference record: forwards without gradients split off
        # the training step that follows (a model run under inference_mode, then cloned)
        self._inference: tuple[int, set[int]] = (-1, set())
        self._got_grad: set[tuple[int, str]] = set()
        self._outside: dict[tuple[int, str], int] = {}
        self._reported: set[tuple[str, int, str]] = set()
        # parameters of optimizers seen only through zero_grad() (never stepped: the
        # hooks do not know them; that mistake is tiny_updates, not this one)
        self._zeroed_opts: dict[int, int] = {}   # _key(opt): lookups tried (8: done)
        self._zeroed_params: set[tuple[int, str]] = set()
        # unused_parameter warnings that a later gradient may revise (a freeze phase):
        # (root, module) -> (its parameters by weak reference, step of the finding);
        # _trained: those whose parameters got a gradient since, with that step
        self._unused_warned: dict[tuple[int, str], tuple[list[weakref.ref], int]] = {}
        self._trained: dict[tuple[int, str], tuple[int, int]] = {}

    def _zero_grad_called(self, obj: Any, set_to_none: bool) -> None:
        """An optimizer's zero_grad(): its parameters are in an optimizer (once per one)."""
        if not isinstance(obj, torch.optim.Optimizer):
            return
        key = _key(obj)
        tries = self._zeroed_opts.get(key, 0)
        if tries >= 8:   # resolved, or parameters of no model seen (tried enough)
            return
        missing = False
        for g in obj.param_groups:
            for p in g["params"]:
                hit = self.ctx.param_name(p)
                if hit is not None:
                    self._zeroed_params.add((hit[0], hit[2]))
                else:
                    missing = True   # its model was not called yet: try again next time
        self._zeroed_opts[key] = tries + 1 if missing else 8

    def on_optimizer_step_pre(self, optimizer: Any) -> None:
        """Which parameters hold a gradient as the optimizer steps (metadata only;
        the first eight steps, then every eighth)."""
        step = self.ctx.step_index
        if self._unregistered:
            self._check_unregistered()
        if self._unused_warned:   # every step: an auxiliary head used every tenth step
            self._note_trained(step)
        if step >= 8 and step % 8:
            return
        stepped = {id(p) for g in optimizer.param_groups for p in g["params"]}
        self._has_grad = {}
        for rid, root in enumerate(self.ctx.roots):
            for name, p in root.named_parameters():
                self._has_grad[(rid, name)] = p.grad is not None
                if id(p) in stepped:
                    self._stepped.add((rid, name))

    def on_step_end(self, record: StepRecord) -> None:
        """Update the per-parameter counters from the step's parameter rows."""
        if self._trained:
            self._revise_trained()
        if record.step < 8 and record.kind == "train":
            self._note_unregistered(record)
        if record.kind != "train":   # an evaluation split off the training step after it
            self._inference = (record.step, {c.root for c in record.calls
                                             if c.parent is None and not c.grad_enabled})
            return   # keeps that step's gradient snapshot (taken at its optimizer step)
        has_grad, self._has_grad = self._has_grad, {}
        stepped, self._stepped = self._stepped, set()
        if not has_grad:
            return
        rows = []
        for r in record.summary.params:
            if isinstance(r.get("root"), int) and r.get("requires_grad") is False \
                    and len(self._was_frozen) < 100_000:
                self._was_frozen.add((r["root"], r["name"]))
            if isinstance(r.get("root"), int) and r.get("requires_grad"):
                got = has_grad.get((r["root"], r["name"]))
                rows.append(dict(r, has_grad=r.get("grad_norm") is not None if got is None
                                 else got))
        called = {c.root for c in record.calls if c.grad_enabled}
        backward_roots = {r["root"] for r in rows if r["has_grad"]}
        grad_off = self._grad_off_roots(record, called) if backward_roots else set()
        unused: dict[int, set[str]] = {}
        outside: dict[int, set[str]] = {}
        for r in rows:
            key = (r["root"], r["name"])
            if not r["has_grad"]:
                if r["root"] in called and r["root"] in backward_roots:
                    self._no_grad[key] = self._no_grad.get(key, 0) + 1
                elif r["root"] in grad_off and key in stepped:
                    self._no_grad[key] = self._no_grad.get(key, 0) + 1
                    self._grad_off.add(r["root"])
            else:
                self._got_grad.add(key)
                if not r.get("in_optimizer") and self.ctx.optimizers \
                        and key not in self._zeroed_params:
                    self._outside[key] = self._outside.get(key, 0) + 1
            if key not in self._got_grad and self._no_grad.get(key, 0) >= UNUSED_STEPS:
                unused.setdefault(key[0], set()).add(key[1])
            if self._outside.get(key, 0) >= NOT_IN_OPTIMIZER_STEPS:
                outside.setdefault(key[0], set()).add(key[1])
        self._report_unused(rows, unused, record)
        self._report_outside(rows, outside, record.step)

    def _note_trained(self, step: int) -> None:
        """Parameters reported unused that hold a gradient as an optimizer steps now (the
        first 8 of each module's: they get gradients together)."""
        for key, (refs, first) in list(self._unused_warned.items()):
            params = [p for p in (r() for r in refs[:8]) if p is not None]
            if not params:
                del self._unused_warned[key]
            elif any(p.grad is not None for p in params):
                del self._unused_warned[key]
                self._trained[key] = (first, step)

    def _revise_trained(self) -> None:
        """A module reported as never getting a gradient that gets them now was frozen on
        purpose for a phase (a linear probe: the backbone under no_grad, detached or left
        out of the backward for the first epochs, then fine-tuned): the warning becomes
        ``info``."""
        revise = getattr(self.ctx, "revise_finding", None)
        for (rid, mod), (first, step) in self._trained.items():
            where = module_label(self.ctx, rid, mod)
            if revise is not None:
                revise("unused_parameter", "info", rid, mod,
                       f"The trainable parameters of {where} received no gradient in the "
                       f"first training steps (reported at step {first}), then got one at "
                       f"step {step}: it is trained in some steps only (a phase with it "
                       f"frozen on purpose, such as a linear probe before fine-tuning, or "
                       f"an auxiliary loss used every few steps), not a mistake. To skip "
                       f"its gradients while it is frozen, requires_grad_(False) it.")
        self._trained.clear()

    def _grad_off_roots(self, record: StepRecord, called: set[int]) -> set[int]:
        """Roots called in this training step (or in the evaluation split off just before
        it) with gradients off only. A frozen teacher, a DQN's target network or a GAN's
        generator sampled for the discriminator's step, unless an optimizer stepped in this
        step holds its trainable parameters (checked by the caller): then it was meant to
        learn, and its training forward ran under no_grad or inference_mode."""
        roots = {c.root for c in record.calls if c.parent is None}
        step, before = self._inference
        if step == record.step - 1:
            roots |= before
        return roots - called

    def _note_unregistered(self, record: StepRecord) -> None:
        """Calls of modules that are not submodules of their root (a path with ``~``:
        the capture found no registered name for them) and have trainable parameters."""
        for call in record.calls:
            if "~" not in call.path or not call.grad_enabled or call.parent is None:
                continue
            mod = call.module
            key = id(mod)
            if key in self._unregistered_seen or key in self._unregistered:
                continue
            if any(p.requires_grad for p in mod.parameters()):
                self._unregistered[key] = (weakref.ref(mod), call.root,
                                           _holder_path(call.parent.module, call.parent.path,
                                                        mod) or call.path, call.step)

    def _check_unregistered(self) -> None:
        """Unregistered modules whose parameters got gradients no optimizer will use."""
        optimized = {id(p) for opt in self.ctx.optimizers for g in opt.param_groups
                     for p in g["params"]}
        for key, (ref, rid, path, step) in list(self._unregistered.items()):
            mod = ref()
            del self._unregistered[key]
            self._unregistered_seen.add(key)
            if mod is None:
                continue
            params = [p for p in mod.parameters() if p.requires_grad]
            if not any(p.grad is not None for p in params) or \
                    any(id(p) in optimized for p in params):
                continue
            where = module_label(self.ctx, rid, path)
            self.emit("param_not_in_optimizer", "warning", "optimizer", rid, path,
                      f"{where} ({type(mod).__name__}) is called in the forward and its "
                      f"parameters get gradients, but it is not a registered submodule (kept "
                      f"in a plain Python list, dict or attribute that nn.Module does not "
                      f"see): model.parameters() leaves it out, so no optimizer updates it, "
                      f"and state_dict() and .to(device) miss it too. Fix: nn.ModuleList / "
                      f"nn.ModuleDict (or assign each layer as an attribute).", step=step)

    def _report_unused(self, rows: list[dict[str, Any]], unused: dict[int, set[str]],
                       record: StepRecord) -> None:
        step = record.step
        for rid, names in unused.items():
            owners = {r["name"]: r.get("module", "") for r in rows if r["root"] == rid}
            for mod in maximal_modules(owners, names):
                if not self._first(("unused_parameter", rid, mod)):
                    continue
                where = module_label(self.ctx, rid, mod)
                listed = sorted(n for n in names if owners.get(n, "").startswith(mod))
                if self._sibling_trained(rid, mod, owners):
                    self.emit("unused_parameter", "info", "backward", rid, mod,
                              f"The trainable parameters of {where} ({_names(listed)}) have "
                              f"not received a gradient in {UNUSED_STEPS} training steps, "
                              f"while other members of the same ModuleList/ModuleDict did: "
                              f"computation routed to some members only (mixture-of-experts, "
                              f"per-task heads, layer drop). Fix: none if the routing is "
                              f"intended; otherwise check it (an expert that no token "
                              f"reaches never learns).", step=step)
                    continue
                if rid in self._grad_off:
                    self._watch_unused(rid, mod, listed, step)
                    self.emit("unused_parameter", "warning", "backward", rid, mod,
                              f"The trainable parameters of {where} ({_names(listed)}) are in "
                              f"an optimizer but have not received a gradient in "
                              f"{UNUSED_STEPS} training steps: every forward of {where} in "
                              f"those steps ran with gradients off (inside torch.no_grad() "
                              f"or torch.inference_mode()), so backward() never reaches it "
                              f"and it never learns. Fix: run its training forward with "
                              f"gradients on; if it is meant to stay frozen, "
                              f"requires_grad_(False) and leave it out of the optimizer.",
                              step=step)
                    continue
                self._watch_unused(rid, mod, listed, step)
                offered = _returned_by(record, rid, mod)
                if offered is not None:
                    self.emit("unused_parameter", "info", "backward", rid, mod,
                              f"The trainable parameters of {where} ({_names(listed)}) have "
                              f"not received a gradient in {UNUSED_STEPS} training steps: "
                              f"{where}'s output is one that "
                              f"{module_label(self.ctx, rid, offered.path)} ({offered.type}) "
                              f"returns, and the loss uses its other outputs (a pretrained "
                              f"model's pooler beside a head on its hidden states). Fix: none "
                              f"needed; to save its compute and keep DDP from needing "
                              f"find_unused_parameters=True, build the model without it "
                              f"(add_pooling_layer=False) or freeze it.", step=step)
                    continue
                self.emit("unused_parameter", "warning", "backward", rid, mod,
                          f"The trainable parameters of {where} ({_names(listed)}) have not "
                          f"received a gradient in {UNUSED_STEPS} training steps: forward() "
                          f"never uses {where}, or its output does not reach the loss. Fix: "
                          f"call it in forward(), delete it, or freeze it "
                          f"(requires_grad_(False)) if that is intended.", step=step)

    def _watch_unused(self, rid: int, mod: str, names: list[str], step: int) -> None:
        """Keep the parameters of a module about to be reported unused, to revise the
        finding if they get gradients later."""
        root = root_module(self.ctx, rid)
        if root is None or len(self._unused_warned) >= 1000:
            return
        wanted = set(names)
        refs = [weakref.ref(p) for n, p in root.named_parameters() if n in wanted]
        if refs:
            self._unused_warned[(rid, mod)] = (refs, step)

    def _sibling_trained(self, rid: int, mod: str, owners: dict[str, str]) -> bool:
        """Whether ``mod`` is a member of a ModuleList/ModuleDict another member of which
        got gradients (computation routed to some members: experts, per-task heads)."""
        if "." not in mod:
            return False
        parent_path, _, name = mod.rpartition(".")
        root = root_module(self.ctx, rid)
        try:
            parent = root.get_submodule(parent_path) if root is not None else None
        except AttributeError:
            return False
        if not isinstance(parent, (torch.nn.ModuleList, torch.nn.ModuleDict)):
            return False
        siblings = tuple(f"{parent_path}.{n}" for n, _ in parent.named_children() if n != name)
        return any(r == rid and any(is_ancestor_path(sib, owners.get(p, "")) for sib in siblings)
                   for r, p in self._got_grad)

    def _report_outside(self, rows: list[dict[str, Any]], outside: dict[int, set[str]],
                        step: int) -> None:
        for rid, names in outside.items():
            owners = {r["name"]: r.get("module", "") for r in rows
                      if r["root"] == rid and r["has_grad"]}
            prefix = _frozen_prefix([r for r in rows if r["root"] == rid], names)
            for mod in maximal_modules(owners, names):
                if self._targets is not None and self._targets.explains(rid, mod):
                    continue
                if not self._first(("param_not_in_optimizer", rid, mod)):
                    continue
                where = module_label(self.ctx, rid, mod)
                listed = sorted(n for n in names if owners.get(n, "").startswith(mod))
                if listed and all((rid, n) in self._was_frozen for n in listed):
                    self.emit("param_not_in_optimizer", "warning", "optimizer", rid, mod,
                              f"The parameters of {where} ({_names(listed)}) were frozen "
                              f"(requires_grad=False) when training started and have been "
                              f"unfrozen since, but no optimizer holds them (it was built "
                              f"from the trainable parameters only), so they get gradients "
                              f"and never change: the fine-tuning of {where} does nothing. "
                              f"Fix: when unfreezing, optimizer.add_param_group({{'params': "
                              f"{where}.parameters(), 'lr': ...}}), or build the optimizer "
                              f"over all parameters from the start (frozen ones get no "
                              f"gradient and are skipped).", step=step)
                    continue
                if prefix and not self._orphans_in_optimizer():
                    self.emit("param_not_in_optimizer", "info", "optimizer", rid, mod,
                              f"The parameters of {where} ({_names(listed)}) receive "
                              f"gradients but no optimizer updates them, while the layers "
                              f"after them are trained: a backbone frozen by leaving it out "
                              f"of the optimizer. If that is intended, set "
                              f"{where}.requires_grad_(False) to skip computing its "
                              f"gradients (faster, less memory). Fix otherwise: pass all "
                              f"parameters to the optimizer.", step=step)
                    continue
                twins = self._twins_note(where)
                self.emit("param_not_in_optimizer", "warning", "optimizer", rid, mod,
                          f"The parameters of {where} ({_names(listed)}) receive gradients "
                          f"but belong to no parameter group of any optimizer, so they never "
                          f"change. " + (twins or
                          "Common cause: the layer was created (or replaced) after "
                          "the optimizer. Fix: build the optimizer after the model is "
                          "complete, or optimizer.add_param_group({'params': ...})."),
                          step=step)

    def _twins_note(self, where: str) -> str:
        """The cause and fix when two optimizers hold the same parameters (a copy-pasted
        optimizer line that names the wrong model); "" when none do."""
        opts = list(self.ctx.optimizers)
        for j, opt in enumerate(opts):
            other = _twin(opt, opts)
            if other is None:
                continue
            i = next(k for k, o in enumerate(opts) if o is other)
            first = next((p for g in opt.param_groups for p in g["params"]), None)
            named = self.ctx.param_name(first) if first is not None else None
            owner = f" (those of {module_label(self.ctx, named[0], '')})" if named else ""
            a, b = sorted((i, j))
            return (f"Optimizers {a} ({type(opts[a]).__name__}) and {b} "
                    f"({type(opts[b]).__name__}) hold the same parameters{owner}: one of them "
                    f"was meant for {where} and was built from the other model's parameters "
                    f"(a copied line such as optD = Adam(G.parameters())). Fix: build that "
                    f"optimizer from {where}.parameters().")
        return ""

    def _orphans_in_optimizer(self) -> bool:
        """Whether an optimizer holds an ``nn.Parameter`` that no watched model has: the
        weights of a layer replaced after the optimizer was built (``model.conv1 =
        nn.Conv2d(1, ...)`` for grayscale input), not a backbone left out on purpose."""
        owned = {id(p) for root in self.ctx.roots for p in root.parameters()}
        return any(isinstance(p, torch.nn.Parameter) and id(p) not in owned
                   for opt in self.ctx.optimizers for g in opt.param_groups
                   for p in g["params"])

    def _first(self, key: tuple[str, int, str]) -> bool:
        if key in self._reported:
            return False
        self._reported.add(key)
        return True


def _holder_path(parent: Any, parent_path: str, module: Any) -> str:
    """The path of the plain list/tuple/dict attribute of ``parent`` holding ``module``
    (``"hidden"`` for ``self.hidden = [nn.Linear(...), ...]``), or ``""``."""
    for name, value in vars(parent).items():
        items = value.values() if isinstance(value, dict) else value \
            if isinstance(value, (list, tuple)) else ()
        if any(v is module for v in items):
            return f"{parent_path}.{name}" if parent_path else name
    return ""


def _returned_by(record: StepRecord, rid: int, path: str) -> CallRecord | None:
    """The enclosing call (the root included) that returned an output of a call of
    module ``path`` this step, as one of its own outputs; None when none did (its
    output was dropped inside a forward: ``self.fc2(x)`` not assigned)."""
    for call in record.calls:
        if call.root != rid or call.path != path or not call.out_entries:
            continue
        made = {id(e) for e in call.out_entries}
        outer = call.parent
        while outer is not None:
            if any(id(e) in made for e in outer.out_entries):
                return outer
            outer = outer.parent
    return None


def _added_into(p: torch.Tensor, mark: int) -> bool:
    """Whether a backward added into ``p``'s gradient after it was marked stale
    (``mark``: 1 + its version then; 0: not marked): its version moved on. A
    gradient untouched since the mark was not reached by that backward (another
    model's, while this optimizer's closure zeroes its own gradients inside
    ``step()``); one replaced since (accumulated out of place, or set anew) is
    judged by the finding's other checks."""
    if not mark:
        return False
    g = p.grad
    return g is None or g._version >= mark or g._version < mark - 1


def _key(optimizer: Any) -> int:
    """An optimizer's identity: its ``param_groups`` list, which wrappers share with the
    optimizer they wrap (Lightning's ``LightningOptimizer`` is another object whose
    ``zero_grad`` runs on the same groups; the hooks see the inner one step)."""
    return id(getattr(optimizer, "param_groups", optimizer))


def _frozen_prefix(rows: list[dict[str, Any]], outside: set[str]) -> bool:
    """Whether the parameters outside every optimizer all come before (in registration
    order) the optimized ones: a backbone frozen by omission, not a forgotten layer."""
    positions = [i for i, r in enumerate(rows) if r["name"] in outside]
    trained = [i for i, r in enumerate(rows) if r.get("in_optimizer") and r.get("requires_grad")]
    return bool(positions and trained and max(positions) < min(trained))


def _names(names: list[str]) -> str:
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _twin(optimizer: Any, optimizers: list[Any]) -> Any | None:
    """Another optimizer that holds every parameter ``optimizer`` holds, built on its own
    (a wrapper such as Lookahead shares its inner optimizer's ``param_groups``)."""
    mine = {id(p) for g in optimizer.param_groups for p in g["params"]}
    for other in optimizers:
        if other is optimizer or other.param_groups is optimizer.param_groups or not mine:
            continue
        if mine <= {id(p) for g in other.param_groups for p in g["params"]}:
            return other
    return None
