"""``exception`` in the backward: an error raised inside ``backward()``, named at the
module responsible, with a hint.

The capture's wrapper of ``torch.autograd.backward`` (``hooks.backward_calls``)
shows an exception out of an outermost backward to ``on_backward_error``
(a callback of this observer's own, bucketed by ``ObserverSet``) on the
training thread, while the graph it failed in is still alive, then re-raises
it unchanged. Nothing runs on a backward that succeeds.

What failed (the graph node), read from what the error leaves:

* an in-place change of a tensor the backward needs ("one of the variables
  needed for gradient computation has been modified by an inplace
  operation"): the graph is walked from the loss and each node's saved
  tensors are unpacked; the node whose unpacking raises that error saved it.
  A parameter (or a view of one) among its inputs whose shape the message
  names was changed by an optimizer step (or a manual update) after the
  forward: a GAN's ``step()`` of the discriminator before the generator's
  backward through it. Otherwise, at step end, the tensor is looked up among
  the step's module inputs and outputs (by the node that made it, its shape
  and version): the module that returned it changed (``nn.ReLU(inplace=True)``,
  ``x += ...; return x``) is named, else the forward enclosing the module
  that made it;
* a custom ``autograd.Function`` whose ``backward`` raised: its ``ctx`` (the
  node) is in the traceback's frames; a node named by the error ("Function
  XBackward returned an invalid gradient"), found by a walk from the loss;
* a module's full backward hook that raised: the module, from the frame of
  PyTorch's ``BackwardHook``.

A backward error the script caught and went on from (a root forward or a
backward started after it) is reported as ``info``, as a caught forward
exception is. At step end the node is placed in the innermost module call whose subgraph
(from its outputs' nodes back to its inputs' nodes) contains it. A tensor
hook or an error not tied to a node names the loss's model, with the
innermost frame of the user's code. Costs nothing until a backward raises;
graph walks are bounded.
"""
from __future__ import annotations

import re
import sys
import traceback
from typing import Any, Iterable

import torch

from tensorscope.hooks.diagnostics.base import Diagnostic, fn_name, is_loss_module, \
    module_label, params_frozen
from tensorscope.hooks.observer import CallRecord, StepRecord
from tensorscope.hooks.watch_events import CAUGHT_NOTE

#: nodes looked at in one walk of a failed graph (an error path, never a step's cost)
WALK_LIMIT = 200_000
_INPLACE = re.compile(r"modified by an inplace operation: \[([\w.]+) \[([\d, ]*)\]\]"
                      r"(?:, which is output (\d+) of (\w+),)? is at version (\d+); "
                      r"expected version (\d+)")
_FUNCTION = re.compile(r"Function (\w+) returned an invalid gradient")
_SECOND = re.compile(r"Trying to backward through the graph a second time")
_NO_GRAPH = re.compile(r"does not require grad and does not have a grad_fn")
_NOT_SCALAR = re.compile(r"grad can be implicitly created only for (?:real )?scalar outputs")
_VIEW_FNS = ("TBackward0", "AsStridedBackward0", "ViewBackward0", "TransposeBackward0",
             "PermuteBackward0", "ExpandBackward0", "SelectBackward0", "SliceBackward0",
             "UnsqueezeBackward0", "SqueezeBackward0", "AliasBackward0")


class Failure:
    """What one failed backward left: the error, the node, where to look."""

    __slots__ = ("exc_type", "text", "step", "node", "module", "param", "inplace", "frame",
                 "second", "no_graph")

    def __init__(self, exc: BaseException, step: int) -> None:
        self.exc_type = type(exc).__name__
        text = str(exc).split("\n")[0]
        cut = text.find(" Hint: enable anomaly detection")   # PyTorch's own advice, below
        text = text[:cut] if cut > 0 else text
        first = re.search(r"\. [A-Z]", text)   # the first sentence says what failed
        self.text = (text[:first.start()] if first and len(text) > 160 else text)[:400]
        self.text = self.text.rstrip(".")
        self.step = step
        self.node: Any = None            # the graph node that failed (kept until step end)
        self.module: Any = None          # a module named by the error itself (backward hook)
        self.param: torch.Tensor | None = None   # a parameter changed in place
        self.inplace: re.Match | None = _INPLACE.search(str(exc))
        self.second = bool(_SECOND.search(self.text))      # a freed graph reused
        self.no_graph = bool(_NO_GRAPH.search(self.text))  # the loss has no graph
        self.frame = _user_frame(exc)


class BackwardErrorObserver(Diagnostic):
    """Names the module responsible for an exception raised inside ``backward()``."""

    roots_only = frozenset({"on_forward_pre"})

    def __init__(self) -> None:
        self._failures: list[Failure] = []
        # placed at step end, reported at the next forward or backward (the script caught
        # it: info) or on detach (it ended the script: error)
        self._placed: list[tuple[Failure, int, str, str]] = []

    def on_forward_pre(self, call: CallRecord) -> None:
        """A root forward starts: a failure placed before was caught."""
        if self._placed:
            self._report(caught=True)

    def on_backward(self, tensor: Any) -> None:
        """A backward starts: a failure placed before was caught."""
        if self._placed:
            self._report(caught=True)

    def on_detach(self) -> None:
        """Report what is still pending: it ended the script."""
        for failure in self._failures:
            self._placed.append((failure, *self._place(failure, [])))
        self._failures.clear()
        self._report(caught=False)

    # --------------------------------------------------------- the error path
    def on_backward_error(self, tensors: Any, exc: Exception) -> None:
        """An outermost backward raised ``exc``: find the node while its graph is
        alive (the user's exception goes on unchanged whatever happens here)."""
        try:
            if len(self._failures) >= 4:
                return
            failure = Failure(exc, self.ctx.step_index)
            roots = [t.grad_fn for t in _tensor_list(tensors) if t.grad_fn is not None]
            _find_node(failure, exc, roots)
            self._failures.append(failure)
        except Exception as err:
            print(f"tensorscope: looking at the backward's {type(exc).__name__} failed "
                  f"({type(err).__name__}: {err})", file=sys.stderr)

    def on_step_end(self, record: StepRecord) -> None:
        """Place each failure of this step in its module (its calls' entries are alive)."""
        if not self._failures:
            return
        failures, self._failures = self._failures, []
        for failure in failures:
            self._placed.append((failure, *self._place(failure, record.calls)))
            failure.node = failure.module = failure.param = None

    def _report(self, caught: bool) -> None:
        placed, self._placed = self._placed, []
        for failure, rid, path, what in placed:
            where = f" (raised at {failure.frame})" if failure.frame else ""
            self.emit("exception", "info" if caught else "error", "backward", rid, path,
                      f"The backward of step {failure.step} raised {failure.exc_type}: "
                      f"{failure.text}{where}. {what}{CAUGHT_NOTE if caught else ''}",
                      step=failure.step)

    def _place(self, failure: Failure, calls: list[CallRecord]) -> tuple[int, str, str]:
        """``(root, module path, explanation with the fix)`` of a failure."""
        ctx = self.ctx
        if failure.param is not None:
            hit = ctx.param_name(failure.param)
            if hit is not None:
                rid, mod, name = hit
                return rid, mod, (
                    f"Hint: the parameter {name} of {module_label(ctx, rid, mod)} was changed "
                    f"in place (an optimizer.step() or a manual update) after the forward "
                    f"whose graph this backward goes through, and that graph needs its old "
                    f"value. Fix: call every backward through that forward before "
                    f"step() (a GAN: step the discriminator after the generator's backward, "
                    f"or recompute its output after its step), or detach what the other "
                    f"network's loss must not reach.")
        if failure.module is not None:
            hit = ctx.module_path(failure.module)
            if hit is not None:
                rid, mod = hit
                return rid, mod, (
                    f"Hint: a backward hook of {module_label(ctx, rid, mod)} "
                    f"(register_full_backward_hook) raised. Fix: the hook's code; it gets "
                    f"(module, grad_input, grad_output) and returns None or new grad_input.")
        if failure.no_graph:
            return self._place_no_graph(calls)
        if _NOT_SCALAR.search(failure.text):
            rid, path, _ = self._fallback(calls)
            return rid, path, (
                "Hint: backward() was called on a tensor with more than one element: a loss "
                "built with reduction='none' (or a per-sample loss) was not reduced. Fix: "
                "loss.mean() (or .sum()) before backward(), or pass the weights: "
                "loss.backward(torch.ones_like(loss)).")
        if failure.second:
            old = _old_graph_input(calls)
            if old is not None:
                label = module_label(ctx, old.root, old.path)
                return old.root, old.path, (
                    f"Hint: {label} ({old.type}) got an input that still carries the graph "
                    f"of an earlier step, whose saved values an earlier backward freed: a "
                    f"recurrent state kept across batches, or a generator's output that the "
                    f"discriminator's step backpropagated through. Fix: detach it where it "
                    f"is reused (h = h.detach() between batches, for an LSTM both h and c; "
                    f"netD(fake.detach()) in the discriminator's step), or pass "
                    f"retain_graph=True to the first backward.")
        call = _call_of_node(failure.node, calls) if failure.node is not None else None
        if failure.inplace is not None:
            return self._place_inplace(failure, call, calls)
        if failure.second and call is not None:
            label = module_label(ctx, call.root, call.path)
            return call.root, call.path, (
                f"Hint: the graph through {label} ({call.type}) was already backpropagated "
                f"and freed: two backward() calls share it (two losses over one forward, or "
                f"the same loss twice). Fix: add the losses and call backward() once, or "
                f"pass retain_graph=True to every backward but the last.")
        if call is not None:
            label = module_label(ctx, call.root, call.path)
            if fn_name(failure.node).endswith("Backward") and \
                    not fn_name(failure.node).endswith("Backward0"):
                return call.root, call.path, (
                    f"Hint: the backward of the custom autograd.Function {fn_name(failure.node)} "
                    f"applied in the forward of {label} ({call.type}) failed. Fix: its "
                    f"backward must return one gradient per forward input (None for "
                    f"non-tensors), each shaped like that input.")
            return call.root, call.path, (
                f"Hint: the failing node {fn_name(failure.node)} was made in the forward of "
                f"{label} ({call.type}). Fix: the operation there, or its custom backward.")
        return self._fallback(calls)

    def _place_inplace(self, failure: Failure, consumer: CallRecord | None,
                       calls: list[CallRecord]) -> tuple[int, str, str]:
        m = failure.inplace
        assert m is not None
        changer, producer = _inplace_changer(m, failure.node, calls)
        saved = (f"the output of {module_label(self.ctx, producer.root, producer.path)} "
                 f"({producer.type})" if producer is not None else
                 f"a {m.group(1).replace('torch.', '')} of shape [{m.group(2)}]")
        needs = (f", which the backward of {module_label(self.ctx, consumer.root, consumer.path)}"
                 f" ({consumer.type}) needs," if consumer is not None and consumer is not producer
                 else ", which its own backward needs," if consumer is not None else "")
        fix = ("Fix: make that operation out of place (nn.ReLU(inplace=False), y = x + z "
               "instead of x += z), or .clone() the tensor before changing it.")
        if changer is not None:
            where = module_label(self.ctx, changer.root, changer.path)
            return changer.root, changer.path, (
                f"Hint: {where} ({changer.type}) changed {saved} in place{needs} after it "
                f"was saved for the backward. {fix}")
        target = consumer or producer
        if target is not None:
            up = target.parent or target
            return up.root, up.path, (
                f"Hint: {saved} was changed in place{needs} in the forward of "
                f"{module_label(self.ctx, up.root, up.path)} after it was saved for the "
                f"backward. {fix}")
        rid, path, _ = self._fallback(calls)
        return rid, path, (f"Hint: {saved} was changed in place after it was saved for the "
                           f"backward. {fix} torch.autograd.set_detect_anomaly(True) shows "
                           f"the forward line.")

    def _place_no_graph(self, calls: list[CallRecord]) -> tuple[int, str, str]:
        """``backward()`` on a tensor with no graph: why, from the step's root calls."""
        roots = [c for c in calls if c.is_root]
        model = next((c for c in reversed(roots) if not is_loss_module(c.module)),
                     roots[-1] if roots else None)
        rid, path = (model.root, "") if model is not None else (0, "")
        label = module_label(self.ctx, rid, path)
        if model is not None and not model.grad_enabled:
            why = (f"the forward of {label} ran with gradients disabled (inside "
                   f"torch.no_grad() or inference_mode). Fix: run the training forward "
                   f"outside it.")
        elif model is not None and params_frozen(model.module):
            why = (f"every parameter of {label} has requires_grad=False. Fix: unfreeze the "
                   f"layers to train (requires_grad_(True)) or pass a model that has them.")
        else:
            why = (f"its graph was cut between {label} and the loss: .detach(), .data, "
                   f".item() or .numpy(), or a new tensor (torch.tensor(value)) made from "
                   f"the output. Fix: compute the loss from the model's output tensor "
                   f"itself.")
        return rid, path, f"Hint: the loss does not depend on any parameter: {why}"

    def _fallback(self, calls: list[CallRecord]) -> tuple[int, str, str]:
        roots = [c for c in calls if c.is_root and c.grad_enabled]
        model = next((c for c in reversed(roots) if not is_loss_module(c.module)),
                     roots[-1] if roots else None)   # the model, not its criterion
        rid = model.root if model is not None else 0
        return rid, "", ("Hint: the error is in the backward of the graph this loss was "
                         "computed by (a tensor hook, a custom backward, or an operation "
                         "whose gradient failed). Fix: the code the traceback names; "
                         "torch.autograd.set_detect_anomaly(True) shows the forward line of "
                         "the operation whose backward failed.")


# ------------------------------------------------------------------ helpers
def _tensor_list(tensors: Any) -> list[torch.Tensor]:
    if isinstance(tensors, torch.Tensor):
        return [tensors]
    if isinstance(tensors, (list, tuple)):
        return [t for t in tensors if isinstance(t, torch.Tensor)]
    return []


def _user_frame(exc: BaseException) -> str:
    """``file:line in function`` of the innermost frame outside torch, if any."""
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        name = fr.filename.replace("\\", "/")
        if "/torch/" not in name and "/tensorscope/" not in name and "/hooks/" not in name:
            return f"{name.rsplit('/', 1)[-1]}:{fr.lineno} in {fr.name}"
    return ""


def _walk(roots: Iterable[Any], limit: int = WALK_LIMIT) -> Iterable[Any]:
    """The graph nodes reachable from ``roots`` (each once, at most ``limit``)."""
    seen: set[int] = set()
    stack = [r for r in roots if r is not None]
    while stack and len(seen) < limit:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        try:
            stack.extend(f for f, _ in node.next_functions if f is not None)
        except (AttributeError, RuntimeError):
            continue


def _find_node(failure: Failure, exc: BaseException, roots: list[Any]) -> None:
    """Fill ``failure.node`` / ``module`` / ``param`` from the traceback and the graph."""
    tb = exc.__traceback__
    while tb is not None:
        local = tb.tb_frame.f_locals
        ctx = local.get("ctx")
        if isinstance(ctx, torch.autograd.function.BackwardCFunction):
            failure.node = ctx
        hook_owner = local.get("self")
        if isinstance(hook_owner, torch.utils.hooks.BackwardHook):
            failure.module = hook_owner.module
        tb = tb.tb_next
    if failure.node is not None or failure.module is not None:
        return
    named = _FUNCTION.search(failure.text)
    if named is not None:
        failure.node = next((n for n in _walk(roots) if fn_name(n) == named.group(1)), None)
        return
    if failure.inplace is not None:
        failure.node = _saved_modified(roots, failure.inplace)
        if failure.node is not None:
            failure.param = _modified_param(failure.node, failure.inplace)
    elif failure.second:
        failure.node = _saved_freed(roots)


def _saved_modified(roots: list[Any], m: re.Match) -> Any:
    """The node whose saved tensors cannot be unpacked because one was changed in place
    as the error says; of several, the one autograd runs first (the latest made)."""
    best, best_seq = None, -1
    for node in _walk(roots):
        for attr in dir(node):
            if not attr.startswith("_saved_"):
                continue
            try:
                getattr(node, attr)
            except RuntimeError as err:
                hit = _INPLACE.search(str(err))
                if hit is not None and hit.group(2, 5, 6) == m.group(2, 5, 6):
                    seq = node._sequence_nr() if hasattr(node, "_sequence_nr") else 0
                    if seq > best_seq:
                        best, best_seq = node, seq
            except Exception:
                continue
    return best


def _saved_freed(roots: list[Any]) -> Any:
    """The node autograd runs first (the latest made) whose saved tensors were freed by
    an earlier backward."""
    best, best_seq = None, -1
    for node in _walk(roots):
        for attr in dir(node):
            if attr.startswith("_saved_"):
                try:
                    getattr(node, attr)
                except RuntimeError as err:
                    if _SECOND.search(str(err)) and _seq(node) > best_seq:
                        best, best_seq = node, _seq(node)
                    break
                except Exception:
                    continue
    return best


def _modified_param(node: Any, m: re.Match) -> torch.Tensor | None:
    """A parameter among ``node``'s inputs (through views) of the shape the error names."""
    shape = [int(s) for s in m.group(2).split(",") if s.strip()]
    version = int(m.group(5))
    stack = [(f, 0) for f, _ in node.next_functions if f is not None]
    while stack:
        fn, depth = stack.pop()
        var = getattr(fn, "variable", None)
        if isinstance(var, torch.nn.Parameter):
            if sorted(var.shape) == sorted(shape) and var._version == version:
                return var
            continue
        if depth < 2 and fn_name(fn) in _VIEW_FNS:
            stack.extend((f, depth + 1) for f, _ in fn.next_functions if f is not None)
    return None


def _seq(fn: Any) -> int:
    try:
        return int(fn._sequence_nr())
    except Exception:
        return -1


def _old_graph_input(calls: list[CallRecord]) -> CallRecord | None:
    """The innermost call given a tensor whose graph is older than the step's first
    module call (no call of the step made it): a state carried over from a step
    whose backward has freed it."""
    made = [_seq(e.made_fn) for c in calls for e in c.out_entries if e.made_fn is not None]
    first = min((s for s in made if s >= 0), default=-1)
    if first < 0:
        return None
    hits = [c for c in calls for e in c.in_entries
            if e.producer is None and e.fn is not None and 0 <= _seq(e.fn) < first]
    return max(hits, key=lambda c: c.index) if hits else None


def _nodes(entries: list[Any]) -> list[Any]:
    out = []
    for e in entries:
        for fn in (e.fn, e.made_fn):
            if fn is not None:
                out.append(fn)
    return out


def _call_of_node(node: Any, calls: list[CallRecord]) -> CallRecord | None:
    """The innermost call whose subgraph (outputs' nodes back to its inputs' nodes)
    holds ``node``."""
    budget = WALK_LIMIT
    for call in sorted(calls, key=lambda c: c.index, reverse=True):
        outs = _nodes(call.out_entries)
        if not outs:
            continue
        stops = {id(fn) for fn in _nodes(call.in_entries)}
        seen: set[int] = set()
        stack = [fn for fn in outs if id(fn) not in stops]
        while stack and budget > 0:
            fn = stack.pop()
            if id(fn) in seen:
                continue
            if fn is node:
                return call
            seen.add(id(fn))
            budget -= 1
            for nxt, _ in getattr(fn, "next_functions", ()):
                if nxt is not None and id(nxt) not in stops:
                    stack.append(nxt)
        if budget <= 0:
            return None
    return None


def _inplace_changer(m: re.Match, node: Any, calls: list[CallRecord]
                     ) -> tuple[CallRecord | None, CallRecord | None]:
    """``(the call that changed the saved tensor in place, the call that made it)``,
    from the step's module inputs and outputs. Their tensors may be gone by now (the
    exception unwound the script's frames), so entries are matched by the node that
    made the tensor, their recorded versions and their weak references (one
    reference object per tensor)."""
    maker_name, expected = m.group(4) or "", int(m.group(6))
    near = {id(node)} | {id(f) for f, _ in getattr(node, "next_functions", ()) if f is not None}
    made = [(e, call) for call in calls for e in call.out_entries
            if e.producer is call and e.made_fn is not None and id(e.made_fn) in near
            and fn_name(e.made_fn).startswith(maker_name)
            and (e.version == expected or e.fn is not e.made_fn)]
    for entry, producer in made:
        for call in calls:   # a module that took it and returned it changed: ReLU(inplace=True)
            if call.index <= producer.index or not any(e is entry for e in call.in_entries):
                continue
            if any(e.producer is call and e.ref is entry.ref and e.made_fn is not entry.made_fn
                   for e in call.out_entries):
                return call, producer
        if entry.fn is not entry.made_fn:   # changed after it was made, then returned
            outer = [c for c in calls if c is not producer and any(e is entry for e in
                                                                    c.out_entries)]
            if outer:
                return max(outer, key=lambda c: c.index), producer
    return None, (made[0][1] if made else None)
