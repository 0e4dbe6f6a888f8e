"""An actor-critic's advantage left attached to the critic (for ``target_requires_grad``).

A policy-gradient loss weights the log-probabilities of the actions taken by
an advantage (``-(log_prob * (R - value)).mean()``), which must be a constant
for the policy's gradient: ``advantage.detach()``, ``value.item()``, or the
advantage computed under ``torch.no_grad()``. Left attached, the backward
also differentiates the policy term through ``value`` into the critic, whose
update then follows the policy loss (it moves ``value`` to make
``-log_prob * (R - value)`` smaller) on top of its own regression.

Found in the loss's graph at ``backward()``, metadata only, on the first
``CHECKS`` backwards whose graph holds a candidate (among the first ``FIRST``
backwards, then one in ``EVERY``): a product node computed
outside every module (the walk from the loss stops at module outputs) whose one
factor is a log-probability (a log, log-softmax or logsumexp node within
``SIDE`` nodes of it, down to and including the first module output) and whose
other factor, with no log in it, is a difference (``R - value``) with the output
of a module call with trainable parameters that is value-like (one number per sample: ``[N, 1]``,
``[N]`` beside ``[N, A]`` logits, a scalar). Reported only when the same
backward also trains that output through another term (a value loss on it, the
usual single ``(policy_loss + value_loss).backward()``): an actor loss
backpropagated on its own may be followed by a ``zero_grad()`` of the critic
before the critic's own backward, which makes the leak harmless. Left alone: an
entropy ``probs * log_probs`` (both factors from one output), PPO's ratio times
stored advantages (no graph under them), SAC's ``alpha * log_pi`` (alpha is no
module's output), a Q-network's ``[N, A]`` outputs, a learned loss attenuation
``exp(-s) * cross_entropy + s`` (a weight, not a difference).
"""
from __future__ import annotations

from typing import Any, Iterator

from tensorscope.hooks.diagnostics.base import fn_name
from tensorscope.hooks.observer import CallRecord

CHECKS = 4        # backwards with a candidate product looked at
FIRST = 16        # backwards looked at from the start; then one in EVERY (a pretraining
EVERY = 64        # phase before the actor-critic one)
GRAPH = 2048      # nodes of the loss's graph walked (outside module calls)
SIDE = 24         # nodes under a factor looked at for a log / a module output
PRODUCTS = 8      # two-factor products looked at per backward
_LOGS = frozenset({"LogBackward0", "LogSoftmaxBackward0", "LogsumexpBackward0",
                   "LogSigmoidBackward0", "Log1pBackward0"})
_PRODUCTS = frozenset({"MulBackward0"})
# an advantage is a difference with the value (``R - value``, ``r + gamma * v2 - v``)
_DIFFS = frozenset({"SubBackward0", "RsubBackward0", "RsubBackward1"})

#: id(node) -> (node, innermost call that made it, outermost call that returned it)
Made = dict[int, tuple[Any, CallRecord, CallRecord]]


def _is_made(node: Any, made: Made) -> bool:
    hit = made.get(id(node))
    return hit is not None and hit[0] is node


def _walk(root: Any, made: Made, limit: int, skip: Any = None) -> Iterator[Any]:
    """The graph under ``root`` breadth first, at most ``limit`` nodes: module outputs
    are given and not walked under, leaves skipped; ``skip``: a node left out with
    what is under it unless reached another way."""
    queue, seen, n = [root], {id(root)}, 0
    while queue and n < limit:
        node = queue.pop(0)
        if node is skip:
            continue
        n += 1
        yield node
        if _is_made(node, made):
            continue
        for child, _ in getattr(node, "next_functions", ()):
            if child is not None and id(child) not in seen and fn_name(child) != "AccumulateGrad":
                seen.add(id(child))
                queue.append(child)


def _side(node: Any, made: Made) -> tuple[bool, bool, Any]:
    """Whether a log lies under ``node`` (down to and including the first module
    outputs), whether a difference does (an advantage ``R - value``), and the
    nearest module output under it (None if none within ``SIDE``)."""
    log, diff, first = False, False, None
    for cur in _walk(node, made, SIDE):
        name = fn_name(cur)
        if name in _LOGS:
            log = True
        elif name in _DIFFS and first is None:
            diff = True
        if first is None and _is_made(cur, made):
            first = cur
    return log, diff, first


def _shape(call: CallRecord, node: Any) -> list[int] | None:
    """The shape of the output of ``call`` whose node is ``node``."""
    for ent, meta in zip(call.out_entries, [m for m in call.out_meta
                                            if m.get("kind") == "tensor"]):
        if ent.made_fn is node:
            shape = meta.get("shape")
            return list(shape) if isinstance(shape, (list, tuple)) else None
    return None


def _value_like(value: list[int] | None, logits: list[int] | None) -> bool:
    """One number per sample: ``[N, 1]``, a scalar, or ``[N]`` beside ``[N, A]`` logits."""
    if value is None:
        return False
    if not value or value[-1] == 1:
        return True
    return (len(value) == 1 and logits is not None and len(logits) >= 2
            and logits[0] == value[0])


def attached_advantages(loss_fn: Any, made: Made) -> tuple[list[CallRecord], bool]:
    """The critic's call: one whose value-like output weights a log-probability in
    the loss's graph while another term of the loss trains it too (see the module
    docstring; the first found), and whether the graph held a product of a
    log-probability and a module's output at all (a candidate). The call named is
    the value head of a model whose other head is the actor, else the root call
    that returned the values."""
    candidate = False
    examined = 0
    for node in _walk(loss_fn, made, GRAPH):
        if fn_name(node) not in _PRODUCTS or _is_made(node, made):
            continue
        edges = [f for f, _ in node.next_functions]
        if len(edges) != 2 or edges[0] is None or edges[1] is None:
            continue
        sides = [_side(edges[0], made), _side(edges[1], made)]
        for (log_p, _, src_p), (log_w, diff_w, src_w) in (sides, sides[::-1]):
            if not log_p or log_w or not diff_w or src_w is None or src_w is src_p:
                continue
            candidate = True
            _, inner, outer = made[id(src_w)]
            logits = _shape(made[id(src_p)][1], src_p) if src_p is not None else None
            if not _value_like(_shape(inner, src_w), logits):
                continue
            if not any(n is src_w for n in _walk(loss_fn, made, GRAPH, skip=node)):
                continue   # only the policy term reaches it in this backward
            # the critic: the value head of a model whose other head is the actor, else
            # the model that returned the values (one: every time step's term is alike)
            shared = src_p is not None and made[id(src_p)][2].module is outer.module
            return [inner if shared else outer], True
        examined += 1
        if examined >= PRODUCTS:
            break
    return [], candidate
