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
  the step's module inputs and outputs (by the node that made it and the
  versions recorded): the module that returned it changed (``nn.ReLU(inplace=True)``,
  ``x += ...; return x``) is named, else the forward enclosing the module
  that made it;
* a custom ``autograd.Function`` whose ``backward`` raised: its ``ctx`` (the
  node) is in the traceback's frames; a node named by the error ("Function
  XBackward returned an invalid gradient"), found by a walk from the loss;
* a module's full backward hook that raised: the module, from the frame of
  PyTorch's ``BackwardHook``;
* a graph freed by an earlier backward ("Trying to backward through the graph
  a second time"): the module given a tensor that carries an older step's
  graph (an undetached LSTM state, a GAN's fake), else the module whose part
  of the graph was freed;
* a loss with no graph, or not a scalar: the model's root, with why.

The graph reading is ``failed_graph``. A backward error the script caught and
went on from (a root forward or a backward started after it) is reported as
``info``, as a caught forward exception is; one that ended the script is an
``error``. A tensor hook or an error not tied to a node names the loss's
model, with the innermost frame of the user's code. Costs nothing until a
backward raises; graph walks are bounded.
"""
from __future__ import annotations

import re
import sys
from typing import Any

from tensorscope.common.distributed import lost_peer
from tensorscope.hooks.diagnostics.hints import PEER_LOST_HINT
from tensorscope.hooks.diagnostics.base import Diagnostic, fn_name, is_loss_module, \
    module_label, params_frozen
from tensorscope.hooks.diagnostics.failed_graph import Failure, call_of_node, find_node, \
    inplace_changer, old_graph_input, tensor_list
from tensorscope.hooks.observer import CallRecord, StepRecord
from tensorscope.hooks.watch_events import CAUGHT_NOTE

_NO_GRAPH = re.compile(r"does not require grad and does not have a grad_fn")
_NOT_SCALAR = re.compile(r"grad can be implicitly created only for (?:real )?scalar outputs")


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
            roots = [t.grad_fn for t in tensor_list(tensors) if t.grad_fn is not None]
            find_node(failure, exc, roots)
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
        if lost_peer(failure.exc_type, failure.text):   # no module of this rank made it
            rid, _, _ = self._fallback(calls)
            return rid, "", "Hint: " + PEER_LOST_HINT
        named = self._place_named(failure)
        if named is not None:
            return named
        if _NO_GRAPH.search(failure.text):
            return self._place_no_graph(calls)
        if _NOT_SCALAR.search(failure.text):
            rid, path, _ = self._fallback(calls)
            return rid, path, (
                "Hint: backward() was called on a tensor with more than one element: a loss "
                "built with reduction='none' (or a per-sample loss) was not reduced. Fix: "
                "loss.mean() (or .sum()) before backward(), or pass the weights: "
                "loss.backward(torch.ones_like(loss)).")
        old = old_graph_input(calls) if failure.second else None
        if old is not None:
            label = module_label(self.ctx, old.root, old.path)
            return old.root, old.path, (
                f"Hint: {label} ({old.type}) got an input that still carries the graph "
                f"of an earlier step, whose saved values an earlier backward freed: a "
                f"recurrent state kept across batches, or a generator's output that the "
                f"discriminator's step backpropagated through. Fix: detach it where it "
                f"is reused (h = h.detach() between batches, for an LSTM both h and c; "
                f"netD(fake.detach()) in the discriminator's step), or pass "
                f"retain_graph=True to the first backward.")
        call = call_of_node(failure.node, calls) if failure.node is not None else None
        if failure.inplace is not None:
            return self._place_inplace(failure, call, calls)
        if call is not None:
            return call.root, call.path, self._node_hint(failure, call)
        if failure.second:   # a node of no call this step: a tensor kept from earlier
            rid, path, _ = self._fallback(calls)
            return rid, path, (
                "Hint: the loss uses a tensor kept from an earlier iteration that still "
                "carries that iteration's graph, which its backward freed: a stored "
                "log-probability or old prediction (PPO's old_log_prob, REINFORCE's "
                "saved_log_probs list never cleared), or a running total. Fix: store it "
                "detached (old = log_prob.detach()), clear such lists after each update, "
                "or compute it afresh in this iteration.")
        return self._fallback(calls)

    def _place_named(self, failure: Failure) -> tuple[int, str, str] | None:
        """A failure the error itself ties to a parameter or a module's backward hook."""
        ctx = self.ctx
        hit = ctx.param_name(failure.param) if failure.param is not None else None
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
        where = ctx.module_path(failure.module) if failure.module is not None else None
        if where is not None:
            rid, mod = where
            return rid, mod, (
                f"Hint: a backward hook of {module_label(ctx, rid, mod)} "
                f"(register_full_backward_hook) raised. Fix: the hook's code; it gets "
                f"(module, grad_input, grad_output) and returns None or new grad_input.")
        return None

    def _node_hint(self, failure: Failure, call: CallRecord) -> str:
        """The hint for a failing node placed in ``call``."""
        label = module_label(self.ctx, call.root, call.path)
        name = fn_name(failure.node)
        if failure.second:
            return (f"Hint: the graph through {label} ({call.type}) was already "
                    f"backpropagated and freed: two backward() calls share it (two losses "
                    f"over one forward, or the same loss twice). Fix: add the losses and "
                    f"call backward() once, or pass retain_graph=True to every backward but "
                    f"the last.")
        if name.endswith("Backward") and not name.endswith("Backward0"):
            return (f"Hint: the backward of the custom autograd.Function {name} applied in "
                    f"the forward of {label} ({call.type}) failed. Fix: its backward must "
                    f"return one gradient per forward input (None for non-tensors), each "
                    f"shaped like that input.")
        return (f"Hint: the failing node {name} was made in the forward of {label} "
                f"({call.type}). Fix: the operation there, or its custom backward.")

    def _place_inplace(self, failure: Failure, consumer: CallRecord | None,
                       calls: list[CallRecord]) -> tuple[int, str, str]:
        m = failure.inplace
        assert m is not None
        changer, producer = inplace_changer(m, failure.node, calls)
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
