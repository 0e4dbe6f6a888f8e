"""``graph_retained`` and ``grad_tracking_in_inference``: autograd graphs that live too long or are never used.

Both follow the lifetime of each root call's autograd graph without keeping
it alive: a tiny callable *token* is registered as a hook on the ``grad_fn``
of the root call's first output that has one (the nodes of its other outputs
hold the token too, ``TokenHolder``). The node owns the hook, so
the token is freed exactly when the node (the graph) is freed; a weak
reference to the token tells whether the graph is still alive. The token is
marked *used* when the hook runs (a backward went through the node). Cost:
one hook registration per root call, one no-op call per backward.

* ``graph_retained``: at the end of each training step, count, per root, the
  graphs of training steps at least two steps old that a backward has used and
  that are still alive. Keeping the last step's loss in a variable keeps one;
  when three or more older graphs of one model are alive and their number grew
  since the last check, something accumulates them (``total_loss += loss``,
  ``losses.append(loss)``, once per step or once per epoch). A script that
  trains several models one after another, each loop leaving its last loss in a
  variable of its own, keeps one graph per model: counted per root, it stays
  below three.
* ``grad_tracking_in_inference``: a graph freed without any backward having
  used it was built for nothing. Three such graphs in a row with no backward
  in between (a prediction or validation loop without ``torch.no_grad()``)
  make a finding; the message estimates the activation memory each forward
  kept for it.
"""
from __future__ import annotations

import gc
import sys

import weakref
from typing import Any, Callable

import torch

from tensorscope.hooks.diagnostics.base import Diagnostic, format_bytes, is_loss_module, \
    module_label
from tensorscope.hooks.observer import CallRecord, StepRecord

UNUSED_GRAPHS = 3      # graphs freed unused in a row, no backward in between
REPEATED = 2           # ... of which a model's own, for its grad_tracking_in_inference
COLLECT_EVERY = 20   # training steps between two cycle collections before a report
RETAINED_GRAPHS = 3    # old-step graphs alive at once (and growing)
MAX_TRACKED = 2048     # graphs followed at once
MAX_HOLDERS = 8        # other outputs of a root call whose graphs keep its token alive


class GraphState:
    """What is known about one root call's graph (outlives the graph)."""

    __slots__ = ("root", "epoch", "used", "loss", "backwards", "modes")

    def __init__(self, root: int, epoch: int, loss: bool, backwards: int) -> None:
        # the forward's Dropout/BatchNorm in training mode (ModeObserver.train_mode_calls)
        self.modes: list[tuple[str, str, str]] | None = None
        self.root = root
        self.epoch = epoch      # training steps finished before the graph was built
        self.used = False
        self.loss = loss
        self.backwards = backwards   # backwards seen before the graph was built


class GraphToken:
    """A no-op post-hook on a graph node: runs when a backward goes through the
    node (the graph is used), and is freed with the node."""

    __slots__ = ("state", "observer", "__weakref__")

    def __init__(self, state: GraphState, observer: "GraphObserver") -> None:
        self.state = state
        self.observer = observer

    def __call__(self, *args: Any) -> None:
        self.state.used = True
        try:   # a graph hook: nothing may raise into the user's backward
            self.observer.backward_seen(self.state.root)
        except Exception as exc:
            self.observer.backward_failed(exc)
        return None


class TokenHolder:
    """A no-op post-hook on the node of another output of the same root call: it
    keeps the call's token alive while that output's graph lives (an RNN's
    ``output, hidden`` whose output is dropped and whose hidden state is used),
    and marks the graph used when a backward goes through it."""

    __slots__ = ("token",)

    def __init__(self, token: GraphToken) -> None:
        self.token = token

    def __call__(self, *args: Any) -> None:
        self.token.state.used = True
        return None


ACCUMULATE_PROBES = 256   # trainable parameters asked about per backward, at most


def accumulates(module: Any) -> bool:
    """Whether the backward running now accumulates into a trainable parameter of
    ``module`` (``p.grad``): False for ``torch.autograd.grad`` (and ``backward(inputs=)``
    of other tensors), which runs no parameter's ``AccumulateGrad`` node. True where
    it cannot be told (no trainable parameter, an older PyTorch). Call it only from a
    graph hook; stops at the first parameter that is accumulated."""
    return _accumulated_into(module) is not False


def _accumulated_into(module: Any) -> tuple[Any, str, Any] | bool:
    """``accumulates``, with the first parameter that is accumulated as ``(its
    module, its name there, its AccumulateGrad node)`` in place of True."""
    try:
        from torch.autograd.graph import get_gradient_edge
        will_run = torch._C._will_engine_execute_node
        asked = 0
        for name, p in module.named_parameters():
            if not p.requires_grad:
                continue
            node = get_gradient_edge(p).node
            if will_run(node):
                owner, _, attr = name.rpartition(".")
                return module.get_submodule(owner) if owner else module, attr, node
            asked += 1
            if asked >= ACCUMULATE_PROBES:
                break
        return asked == 0
    except Exception:   # an API this PyTorch lacks: count it, as before
        return True


def _own_parameter(module: Any, name: str) -> Any:
    """``module``'s own parameter ``name`` (None if none): ``_parameters`` is a plain
    dict, or TorchScript's own mapping (no ``get``) on a traced module."""
    params = module._parameters
    if isinstance(params, dict):
        return params.get(name)
    return dict(module.named_parameters(recurse=False)).get(name)


class AccumulationProbe:
    """``accumulates`` for the roots of a watch, each asking first the parameter that
    answered last time, through its ``AccumulateGrad`` node kept here (the node a
    parameter's graphs share while something holds it, as DDP's reducer holds them):
    one engine query a backward instead of a walk of the parameters. The entry stands
    while that parameter is still its module's, under the same name, and trainable."""

    def __init__(self) -> None:
        # root index -> (its module (weak), the parameter's module (weak), name, node)
        self._first: dict[int, tuple[weakref.ref, weakref.ref, str, Any]] = {}

    def __call__(self, rid: int, module: Any) -> bool:
        hit = self._first.get(rid)
        if hit is not None and hit[0]() is module:
            try:   # a graph hook: nothing may raise into the user's backward
                owner, node = hit[1](), hit[3]
                p = None if owner is None else _own_parameter(owner, hit[2])
                if p is not None and p is node.variable and p.requires_grad and \
                        torch._C._will_engine_execute_node(node):
                    return True
            except Exception:
                self._first.pop(rid, None)
        found = _accumulated_into(module)
        if isinstance(found, tuple):
            try:
                self._first[rid] = (weakref.ref(module), weakref.ref(found[0]), found[1],
                                    found[2])
            except TypeError:   # a module that takes no weak reference: ask afresh each time
                pass
            return True
        return found

    def clear(self) -> None:
        """Forget the nodes (the watch closes: the parameters are not held)."""
        self._first.clear()


def _hold_from_other_outputs(token: GraphToken, first: Any, more: Any) -> None:
    """Hang a ``TokenHolder`` on the nodes of up to ``MAX_HOLDERS`` more outputs."""
    seen = [first]
    for _, v in more:
        fn = v.grad_fn if isinstance(v, torch.Tensor) else None
        if fn is None or any(fn is s for s in seen):
            continue
        seen.append(fn)
        fn.register_hook(TokenHolder(token))
        if len(seen) > MAX_HOLDERS:
            return


class GraphObserver(Diagnostic):
    """Follows each root call's graph from creation to release."""

    roots_only = frozenset({"on_forward_pre", "on_forward"})

    def __init__(self, modes: Any = None) -> None:
        self._modes = modes   # a ModeObserver: told of train-mode layers of unused forwards
        self._unused_modes: dict[int, list[tuple[str, str, str]]] = {}
        self._live: dict[int, tuple[weakref.ref, GraphState]] = {}
        self._dead: list[GraphState] = []
        self._unused_run = 0          # graphs freed unused since the last backward
        self._unused_roots: dict[int, int] = {}
        self._train_steps = 0
        self._backwards = 0
        self._last_alive = 0
        self._bytes: dict[int, int] = {}
        self._listeners: list[Callable[[], None]] = []
        self.generation = 0   # root forwards started so far (a backward follows new ones)
        self._model_tagged = -1   # the last step in which a non-loss root's graph was tagged
        self._cut = 0   # backward() calls that reached no tagged graph since one did
        self._collected = -COLLECT_EVERY   # the training step of the last gc.collect()
        self._optimizer_seen = False
        self._latest: dict[int, GraphState] = {}   # root -> its latest graph (not a loss's)
        self._accumulates = AccumulationProbe()

    def add_backward_listener(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` whenever a backward runs through a tagged graph node (before
        the gradients of that root's parameters are accumulated; autograd's thread)."""
        self._listeners.append(fn)

    # -------------------------------------------------------------- tracking
    def on_forward(self, call: CallRecord) -> None:
        """Tag the graph of each root call with gradients enabled."""
        if call.parent is not None or not call.grad_enabled:
            return
        if self._modes is not None and self._modes.recalibrating(call.root):
            return   # BatchNorm statistics recalibrated on purpose (momentum=None)
        loss = call.module is not None and is_loss_module(call.module)
        if loss and self._model_tagged == call.step:
            # the loss's graph holds the model's graph tagged this step: that
            # token already tells when it is used and freed (one hook less a step)
            return
        outputs = call.outputs
        for i, (_, v) in enumerate(outputs):
            if isinstance(v, torch.Tensor) and v.grad_fn is not None:
                if v.is_meta:   # a sizing pass on the meta device stores no activations
                    return
                if not loss:
                    self._model_tagged = call.step
                state = GraphState(call.root, self._train_steps, loss, self._backwards)
                if not loss:
                    self._latest[call.root] = state
                    if self._modes is not None:
                        state.modes = self._modes.train_mode_calls(call.root)
                token = GraphToken(state, self)
                v.grad_fn.register_hook(token)
                if len(outputs) > i + 1:
                    _hold_from_other_outputs(token, v.grad_fn, outputs[i + 1:])
                ref = weakref.ref(token, self._released)
                self._live[id(ref)] = (ref, state)
                if len(self._live) > MAX_TRACKED:   # a leak we already reported: stay O(1)
                    self._live.pop(next(iter(self._live)))
                return

    def on_backward(self, tensor: torch.Tensor) -> None:
        """``backward()`` is called: counted until a tagged graph says it was reached."""
        self._cut += 1

    def on_optimizer_step(self, optimizer: Any) -> None:
        """The first optimizer step: the steps cut before it (no optimizer was known, so
        each repeated root call or backward ended one) were one training iteration, and
        their graphs count as one step's (MAML's inner loops are not retained graphs)."""
        if self._optimizer_seen:
            return
        self._optimizer_seen = True
        for _ref, state in self._live.values():
            state.epoch = self._train_steps

    def backward_seen(self, root: int) -> None:
        """A backward ran through a tagged graph of ``root`` (autograd's thread). The
        listeners hear of it only when it accumulates into the root's parameters (not a
        ``torch.autograd.grad`` taken for an input's gradient: a gradient penalty, a
        physics-informed residual, a saliency map)."""
        self._backwards += 1
        self._cut = 0
        self._unused_run = 0
        self._unused_roots.clear()
        self._unused_modes.clear()
        roots = self.ctx.roots
        if self._listeners and (not 0 <= root < len(roots)
                                or self._accumulates(root, roots[root])):
            for fn in self._listeners:
                fn()

    def backward_failed(self, exc: Exception) -> None:
        """``backward_seen`` raised (autograd's thread): its listeners are switched off,
        said once; the backward goes on."""
        self._listeners.clear()
        print(f"tensorscope: the backward-seen check failed ({type(exc).__name__}: {exc}); "
              f"gradient-accumulation checks are off for the rest of the run", file=sys.stderr)

    def reached(self, root: int) -> bool | None:
        """Whether a backward used the latest graph built by a forward of ``root`` (None:
        no graph of it was built)."""
        state = self._latest.get(root)
        return None if state is None else state.used

    def _released(self, ref: weakref.ref) -> None:
        """The token (and so the graph) was freed; may run wherever the graph died."""
        entry = self._live.pop(id(ref), None)
        if entry is not None:
            self._dead.append(entry[1])

    def on_forward_pre(self, call: CallRecord) -> None:
        """Check for unused graphs when a new root forward starts."""
        if call.parent is None:
            self.generation += 1
            self._check_unused(call.step)

    # ------------------------------------------------------------ decisions
    def on_step_end(self, record: StepRecord) -> None:
        """Estimate activation memory per root; look for retained graphs."""
        self._collect_unused()
        self._note_bytes(record)
        self._check_unused(record.step)
        if record.kind == "train":
            self._check_retained(record.step)
            self._train_steps += 1

    def _note_bytes(self, record: StepRecord) -> None:
        """Activation bytes per root forward (first steps, and while graphs go unused)."""
        if record.step >= 2 and not self._unused_run:
            return
        per_root: dict[int, int] = {}
        for d in record.digests:
            if d.grad_enabled:
                per_root[d.root] = per_root.get(d.root, 0) + sum(
                    int(m.get("bytes", 0)) for m in d.outputs if m.get("requires_grad"))
        for rid, n in per_root.items():
            calls = sum(1 for c in record.calls if c.parent is None and c.root == rid) or 1
            self._bytes[rid] = n // calls

    def on_detach(self) -> None:
        """At the end, graphs still alive that no backward used count as unused too."""
        for _ref, state in list(self._live.values()):
            if not state.used and not state.loss and state.backwards == self._backwards:
                self._dead.append(state)
        self._live.clear()
        self._accumulates.clear()
        self._check_unused(self.ctx.step_index)

    def _check_unused(self, step: int) -> None:
        self._collect_unused()
        if self._unused_run < UNUSED_GRAPHS:
            return
        for rid, n in self._unused_roots.items():
            if n <= 0 or (n < REPEATED and not self._cut):
                continue   # one forward of a model here and there (a check after training)
            per = self._bytes.get(rid)
            mem = f" (about {format_bytes(per)} of activations per forward)" if per else ""
            name = module_label(self.ctx, rid, "")
            self._unused_roots[rid] = 0
            if self._cut:   # backward() ran meanwhile, but on something else: a cut graph
                self.emit("unused_parameter", "warning", "backward", rid, "",
                          f"backward() was called {self._cut} times, but none of the last "
                          f"{n} graphs of {name}'s forwards was reached: the loss is not "
                          f"connected to the model's output (rebuilt from a Python number "
                          f"with torch.tensor(loss.item(), requires_grad=True), computed "
                          f"from .detach(), .data or .numpy() values, or through an op with "
                          f"no gradient: argmax, a comparison, round(), .long()), so no "
                          f"gradient reaches the model through its output and nothing is "
                          f"learned from the data. Fix: compute the loss from the output "
                          f"tensor itself with differentiable ops and call backward() on it.",
                          step=step)
                continue
            modes = self._unused_modes.pop(rid, None)
            if modes and self._modes is not None:
                self._modes.evaluated_with_grad(rid, modes, step)
            self.emit("grad_tracking_in_inference", "warning", "forward", rid, "",
                      f"{n} forwards of {name} ran with gradients enabled and their autograd "
                      f"graphs were freed without any backward{mem}: each forward stored "
                      f"activations for a backward that never came, wasting memory and time. "
                      f"Fix: wrap prediction/validation loops in `with torch.no_grad():` (or "
                      f"torch.inference_mode()).", step=step)

    def _collect_unused(self) -> None:
        """Count graphs freed without a backward (their token died unused)."""
        dead, self._dead = self._dead, []
        for state in dead:
            if state.used or state.loss:
                continue
            self._unused_run += 1
            self._unused_roots[state.root] = self._unused_roots.get(state.root, 0) + 1
            if state.modes:
                self._unused_modes[state.root] = state.modes

    def _retained(self) -> dict[int, set[int]]:
        """Per root, the earlier training steps whose used graphs are still alive."""
        alive: dict[int, set[int]] = {}
        for ref, state in list(self._live.values()):
            if ref() is not None and state.used and state.epoch <= self._train_steps - 2:
                alive.setdefault(state.root, set()).add(state.epoch)
        return alive

    def _check_retained(self, step: int) -> None:
        alive = self._retained()
        n = max(map(len, alive.values()), default=0)
        grew = n > self._last_alive
        self._last_alive = n
        if n < RETAINED_GRAPHS or not grew:
            return
        if self._train_steps - self._collected >= COLLECT_EVERY:
            # graphs in reference cycles (higher-order gradients: MAML's create_graph)
            # wait for the cycle collector, they are not kept: collect once, look again
            self._collected = self._train_steps
            gc.collect()
            self._collect_unused()
            alive = self._retained()
            n = self._last_alive = max(map(len, alive.values()), default=0)
            if n < RETAINED_GRAPHS:
                return
        roots = sorted(alive, key=lambda r: (-len(alive[r]), self._is_loss_root(r), r))
        rid = roots[0]
        kept = sorted(alive[rid])
        gap = max(b - a for a, b in zip(kept, kept[1:]))
        rate = "one more each step, so memory grows every step" if gap <= 1 else \
            f"one more every {gap} steps or so, so memory keeps growing"
        self.emit("graph_retained", "warning", "loss", rid, "",
                  f"At step {step} the autograd graphs of {n} earlier steps are still alive "
                  f"(graph of {module_label(self.ctx, rid, '')}), {rate}. "
                  f"Something keeps a tensor that requires grad across steps, "
                  f"usually `total_loss += loss` or `losses.append(loss)`. Fix: accumulate "
                  f"loss.item() (or loss.detach()); detach recurrent states between batches.",
                  step=step)

    def _is_loss_root(self, rid: int) -> bool:
        roots = self.ctx.roots
        return 0 <= rid < len(roots) and is_loss_module(roots[rid])
