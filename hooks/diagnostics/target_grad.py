"""``target_requires_grad``: a loss's target carries autograd history from a model.

A TD target (``r + gamma * q(s2).max(1)[0]``) or a distillation target
(``F.softmax(teacher(x) / T)``) computed without ``torch.no_grad()`` or
``.detach()`` is a tensor that requires grad: ``backward()`` then also
differentiates the loss through the target, into the network that made it.
With the target network in an optimizer (DQN without a target network, a
teacher trained alongside), the update changes (the prediction and the target
are pulled towards each other: a residual-gradient method, a collapsing
teacher); otherwise the backward computes and keeps gradients nobody uses.

Seen two ways, metadata only:

* at the call: a loss module's forward pre-hook, and the wrapped functional
  losses of ``LossInputObserver`` (``loss_called``), give input and target;
* in the graph at ``backward()``: a loss node that saves its target
  (``MseLossBackward0``, ``SmoothL1LossBackward0``, ``HuberLossBackward0``, the
  binary cross-entropies) and whose second edge is not None (the target is in
  the graph), for losses imported before the watch attached. The graph is
  walked only in a step where no loss was seen at its call (a step with a loss
  module or a wrapped loss has its losses at hand: the walk cost about 1% of a
  small MLP's step).

Reported at step end, when the step's calls say who made what: only when both
the prediction and the target require grad (a prediction that does not is an
argument order swapped, ``mse(y, model(x))``, where the target side is the one
meant to train), and the target's graph reaches, within ``SEARCH`` nodes, an
output of a module call of this step whose module has trainable parameters
(a plain data target, or one that depends only on inputs with
``requires_grad`` as in a physics-informed loss, never matches). Left alone:

* an embedding lookup as the target (``mse(feat, centers(labels))``: a
  learnable target, center and prototype losses, trained on purpose);
* a symmetric loss between two evaluations of one module, both arguments made
  the same way (the same module and the same last op) or the target a pure
  function of the module's output (one-input ops: a softmax, a temperature):
  VICReg's invariance term ``mse(z_a, z_b)``, a Pi-model consistency
  ``mse(softmax(m(x1)), softmax(m(x2)))``, R-Drop's
  ``kl_div(log_softmax(p), softmax(q))`` between two dropout passes, which are
  meant to pull both sides. A TD target of the online network itself
  is made another way (a sum with the reward) and is reported;
* a prediction whose graph reaches an output made within the very root call that
  made the target (within ``EQUATION_SEARCH`` nodes): both sides are one evaluation
  of the model, an equation's residual (a physics-informed ``mse(d2u, -u)``), not a
  target of another pass; unless the two sides select different parts of that
  call's outputs (``q_all[:B]`` and ``q_all[B:]`` of one forward of
  ``cat([s, s2])``, ``values[:-1]`` and ``values[1:]`` of a rollout: ``_apart``).

The module named is the outermost call that returned the target's source (the
target network, the teacher).
"""
from __future__ import annotations

import sys
from typing import Any

import torch
from torch import nn

from tensorscope.hooks.diagnostics.base import Diagnostic, fn_name, is_loss_module, \
    is_ancestor_path, is_loss_type, iter_tensors, module_label, root_call, saved_value
from tensorscope.hooks.diagnostics import policy_gradient
from tensorscope.hooks.diagnostics.losses import top_nodes
from tensorscope.hooks.observer import CallRecord, StepRecord

SEARCH = 64           # graph nodes looked at under the target for a module's output
EQUATION_SEARCH = 512  # ... under the prediction for an output of the target's root call
PENDING = 4           # losses remembered per step
# loss nodes whose second edge is the target (in the graph only when it requires grad)
_TARGET_NODES = {"MseLossBackward0": "F.mse_loss", "SmoothL1LossBackward0": "F.smooth_l1_loss",
                 "HuberLossBackward0": "F.huber_loss",
                 "BinaryCrossEntropyBackward0": "F.binary_cross_entropy",
                 "BinaryCrossEntropyWithLogitsBackward0": "F.binary_cross_entropy_with_logits"}
_LOOKUPS = (nn.Embedding, nn.EmbeddingBag)


class TargetGradObserver(Diagnostic):
    """Finds loss targets that require grad because a model made them."""

    def __init__(self) -> None:
        # (loss label, prediction's node, target's node, step) this step
        self._pending: list[tuple[str, Any, Any, int]] = []
        self._seen: set[tuple[int, str]] = set()
        self._called_at = -1   # the last step in which a loss was seen at its call
        self._pg_checks = 0    # backwards with a candidate looked at for an attached advantage
        self._backwards = 0    # backward() calls seen

    def watches(self, module_type: type, hook: str) -> bool:
        """The inputs of loss modules only."""
        return hook == "on_forward_pre" and is_loss_type(module_type)

    def on_forward_pre(self, call: CallRecord) -> None:
        """A loss module is called: look at its input and target."""
        if not is_loss_module(call.module):
            return
        self._called_at = self.ctx.step_index
        tensors = [v for _, v in iter_tensors(call.inputs)]
        if len(tensors) >= 2:
            self.loss_called(call.type, tensors[0], tensors[1])

    def loss_called(self, label: str, pred: Any, target: Any) -> None:
        """A loss is given ``pred`` and ``target`` (training thread; metadata reads)."""
        self._called_at = self.ctx.step_index
        if not isinstance(pred, torch.Tensor) or not isinstance(target, torch.Tensor):
            return
        if pred.grad_fn is None or target.grad_fn is None or len(self._pending) >= PENDING:
            return
        self._remember(label, pred.grad_fn, target.grad_fn)

    def _remember(self, label: str, pred_fn: Any, target_fn: Any) -> None:
        if any(t is target_fn for _, _, t, _ in self._pending):
            return   # seen at the call already
        self._pending.append((label, pred_fn, target_fn, self.ctx.step_index))

    def on_backward(self, loss: torch.Tensor) -> None:
        """Loss nodes in the graph whose target is in the graph too (a step that saw
        no loss at its call); a policy-gradient weight left attached to the critic
        (``policy_gradient``, the first few backwards that hold a candidate)."""
        if not isinstance(loss, torch.Tensor) or loss.grad_fn is None:
            return
        self._backwards += 1
        if self._pg_checks < policy_gradient.CHECKS and (
                self._backwards <= policy_gradient.FIRST
                or self._backwards % policy_gradient.EVERY == 0):
            try:
                self._attached_advantage(loss.grad_fn)
            except Exception as exc:   # the smallest part that failed goes off, said once
                self._pg_checks = policy_gradient.CHECKS
                print(f"tensorscope: the policy-gradient advantage check failed "
                      f"({type(exc).__name__}: {exc}); it is off for the rest of the run",
                      file=sys.stderr)
        if self._called_at == self.ctx.step_index:
            return
        for node in top_nodes(loss.grad_fn):
            label = _TARGET_NODES.get(fn_name(node))
            if label is None or len(self._pending) >= PENDING:
                continue
            nxt: Any = node.next_functions
            if len(nxt) >= 2 and nxt[0][0] is not None and nxt[1][0] is not None:
                self._remember(label, nxt[0][0], nxt[1][0])

    def _attached_advantage(self, loss_fn: Any) -> None:
        calls = self.ctx.step_calls()
        made = _made_by(calls)
        found, candidate = policy_gradient.attached_advantages(loss_fn, made)
        if candidate:
            self._pg_checks += 1
        for call in found:
            key = (call.root, call.path)
            if key in self._seen or not _trainable(call.module):
                continue
            self._seen.add(key)
            self._report_advantage(call, self.ctx.step_index)

    def on_step_end(self, record: StepRecord) -> None:
        """Name the module whose output each differentiable target comes from."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        made = _made_by(record.calls)
        for label, pred_fn, target_fn, step in pending:
            source = _source(target_fn, made)
            if source is None:
                continue
            inner, outer = source
            key = (outer.root, outer.path)
            if key in self._seen or isinstance(inner.module, _LOOKUPS) \
                    or not _trainable(outer.module) \
                    or _one_evaluation(pred_fn, target_fn, outer, made):
                continue
            twin = _source(pred_fn, made)
            if twin is not None and (twin[1].root, twin[1].path) == key and (
                    fn_name(pred_fn) == fn_name(target_fn) or _pure(target_fn, made)):
                continue   # a symmetric loss between two evaluations of one module
            self._seen.add(key)
            self._report(label, outer, step)

    def explains(self, root: int, path: str) -> bool:
        """Whether the module ``path`` of ``root`` lies in a module reported here (its
        gradients came through a loss's target)."""
        return any(r == root and is_ancestor_path(p, path) for r, p in self._seen)

    def _report(self, label: str, call: CallRecord, step: int) -> None:
        where = module_label(self.ctx, call.root, call.path)
        optimized = {id(p) for opt in self.ctx.optimizers for g in opt.param_groups
                     for p in g["params"]}
        trained = any(id(p) in optimized for p in call.module.parameters())
        effect = (f"{where}'s parameters are in an optimizer, so the update changes: the "
                  f"loss also moves the target towards the prediction (a TD target chases "
                  f"itself, a teacher drifts to its student)" if trained else
                  f"the backward computes and stores gradients for {where}'s parameters "
                  f"that no optimizer uses (time and memory), and they pile up in .grad")
        self.emit("target_requires_grad", "warning", "loss", call.root, call.path,
                  f"The target given to {label} at step {step} was computed by {where} with "
                  f"gradients on, so it carries autograd history and backward() "
                  f"differentiates through it into {where}: {effect}. Fix: compute the "
                  f"target under torch.no_grad() (or pass target.detach()), or freeze "
                  f"{where} with requires_grad_(False).", step=step)

    def _report_advantage(self, call: CallRecord, step: int) -> None:
        where = module_label(self.ctx, call.root, call.path)
        self.emit("target_requires_grad", "warning", "loss", call.root, call.path,
                  f"The advantage weighting the log-probabilities of the policy loss at step "
                  f"{step} is computed from the output of {where} with gradients on (R - "
                  f"value, not detached): backward() differentiates the policy term through "
                  f"it into {where}, whose update then also follows the policy loss (it moves "
                  f"the value estimates to make -log_prob * advantage smaller) on top of its "
                  f"own value loss. Fix: weight the log-probabilities by advantage.detach() "
                  f"(or value.item(), or compute the advantage under torch.no_grad()), and "
                  f"keep the attached advantage for the value loss only.", step=step)


def _made_by(calls: list[CallRecord]) -> dict[int, tuple[Any, CallRecord, CallRecord]]:
    """id(node) -> (node, innermost call that made it, outermost call that returned it)."""
    made: dict[int, tuple[Any, CallRecord, CallRecord]] = {}
    for c in calls:
        for e in c.out_entries:
            fn = e.made_fn
            if fn is None:
                continue
            hit = made.get(id(fn))
            inner = e.producer if isinstance(e.producer, CallRecord) else c
            if hit is None or hit[0] is not fn:
                made[id(fn)] = (fn, inner, c)
            elif _depth(c) < _depth(hit[2]):
                made[id(fn)] = (fn, hit[1], c)
    return made


def _depth(call: CallRecord) -> int:
    n = 0
    while call.parent is not None:
        call, n = call.parent, n + 1
    return n


def _source(fn: Any, made: dict[int, tuple[Any, CallRecord, CallRecord]]
            ) -> tuple[CallRecord, CallRecord] | None:
    """The (innermost, outermost) call whose output is the nearest under ``fn``."""
    for node in top_nodes(fn, SEARCH):
        hit = made.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1], hit[2]
    return None


def _one_evaluation(pred_fn: Any, target_fn: Any, outer: CallRecord,
                    made: dict[int, tuple[Any, CallRecord, CallRecord]]) -> bool:
    """Whether the prediction's graph (``EQUATION_SEARCH`` nodes) reaches an output made
    within the same root call that made the target: both sides of the loss are one
    evaluation of the model (an equation's residual, ``mse(d2u, -u)``), unless the two
    sides take different parts of its outputs (``_apart``)."""
    top = root_call(outer)
    for node in top_nodes(pred_fn, EQUATION_SEARCH):
        hit = made.get(id(node))
        if hit is not None and hit[0] is node and root_call(hit[2]) is top:
            return not _apart(pred_fn, target_fn, top, made)
    return False


# ops that take some of a tensor's elements: rows of a batch, steps of a rollout
_SELECTS = frozenset({"SliceBackward0", "SelectBackward0", "SplitBackward0",
                      "SplitWithSizesBackward0", "UnbindBackward0", "IndexBackward0",
                      "IndexSelectBackward0", "NarrowBackward0"})


def _apart(pred_fn: Any, target_fn: Any, top: CallRecord,
           made: dict[int, tuple[Any, CallRecord, CallRecord]]) -> bool:
    """Whether the prediction and the target take different parts of the outputs of one
    root call (``q_all[:B]`` and ``q_all[B:]`` of ``q(torch.cat([s, s2]))``, ``values[:-1]``
    and ``values[1:]`` of a rollout): a target from other samples of one batched
    forward, not one evaluation on both sides."""
    pred = _selections(pred_fn, top, made, EQUATION_SEARCH)
    target = _selections(target_fn, top, made, SEARCH)
    return bool(pred) and bool(target) and not pred & target


_VIEWS = frozenset({"ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0",
                    "SqueezeBackward0", "SqueezeBackward1", "SqueezeBackward2",
                    "UnsqueezeBackward0"})


def _under_views(node: Any) -> Any:
    """The node under ``node``'s first input, through reshapes (``.squeeze(-1)``)."""
    fn: Any = node.next_functions[0][0] if node.next_functions else None
    for _ in range(4):
        if fn_name(fn) not in _VIEWS or not fn.next_functions:
            break
        fn = fn.next_functions[0][0]
    return fn


def _selections(fn: Any, top: CallRecord, made: dict[int, tuple[Any, CallRecord, CallRecord]],
                limit: int) -> set[tuple[int, int]]:
    """The selecting ops (node, which of its outputs) between ``fn`` and the outputs of
    ``top``'s calls that take part of such an output; the walk stops at those outputs."""
    def ours(node: Any) -> bool:
        hit = made.get(id(node))
        return hit is not None and hit[0] is node and root_call(hit[2]) is top

    found: set[tuple[int, int]] = set()
    if fn_name(fn) in _SELECTS and ours(_under_views(fn)):
        found.add((id(fn), -1))   # the loss's argument itself (which output: unknown)
    queue, seen, n = [fn], {id(fn)}, 0
    while queue and n < limit:
        node = queue.pop(0)
        n += 1
        if ours(node):
            continue
        for child, nr in getattr(node, "next_functions", ()):
            if child is None:
                continue
            if fn_name(child) in _SELECTS and ours(_under_views(child)):
                found.add((id(child), nr))
            if id(child) not in seen:
                seen.add(id(child))
                queue.append(child)
    return found


_SCALED = ("MulBackward0", "DivBackward0")
_UNREAD = object()   # a saved value that cannot be read (freed by the backward, or hooked)


def _pure(fn: Any, made: dict[int, tuple[Any, CallRecord, CallRecord]]) -> bool:
    """Whether ``fn`` is a module's output through one-input ops only (a softmax, a
    temperature, views), no data mixed in (a reward added: a TD target): down to the
    first node a call made, each node has one input in the graph and no other tensor
    (a product or quotient with a scalar counts as one-input)."""
    node = fn
    for _ in range(16):
        hit = made.get(id(node))
        if hit is not None and hit[0] is node:
            return True
        nxt = node.next_functions
        edges = [f for f, _ in nxt if f is not None]
        if len(edges) != 1:
            return False
        if len(nxt) > 1:
            if fn_name(node) not in _SCALED:
                return False
            # judged at step end, after the backward freed the saved values: a factor
            # that can no longer be read is taken for the scalar it almost always is
            other = saved_value(node, "other", _UNREAD)
            if other is not _UNREAD and (not isinstance(other, torch.Tensor)
                                         or other.numel() != 1):
                return False
        node = edges[0]
    return False


def _trainable(module: nn.Module) -> bool:
    return any(p.requires_grad for p in module.parameters())
