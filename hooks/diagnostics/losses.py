"""``double_activation`` and ``loss_broadcast``: loss modules fed the wrong thing.

Both run in the loss module's forward pre-hook and read metadata only.

* ``double_activation``: the prediction given to ``CrossEntropyLoss`` was
  produced by a softmax, log-softmax or sigmoid, or the one given to
  ``BCEWithLogitsLoss`` by a sigmoid (or softmax). The producer is read from
  the tensor's ``grad_fn`` (``SoftmaxBackward0``, ``LogSoftmaxBackward0``,
  ``SigmoidBackward0``), skipping views, reshapes and dtype casts, so
  ``nn.Softmax`` modules and ``torch.sigmoid`` calls inside ``forward`` are
  both seen (a ReLU's output there too: logits clipped at zero). The finding
  names the module whose forward applied the
  activation (remembered in ``on_forward`` for outputs whose ``grad_fn`` is an
  activation), or the loss when the activation ran outside any module. Only
  visible when the prediction requires grad (a training forward).
  ``LogSoftmax`` followed by ``NLLLoss`` and ``Sigmoid`` followed by
  ``BCELoss`` are correct and never looked at.
* ``loss_broadcast``: an element-wise regression loss (``MSELoss``,
  ``L1Loss``, ``SmoothL1Loss``, ``HuberLoss``, ``KLDivLoss``,
  ``PoissonNLLLoss``) gets input and target of different shapes, which
  PyTorch silently broadcasts (``[N, 1]`` vs ``[N]`` gives ``[N, N]``). It does
  not depend on PyTorch's warning, so filtered warnings do not hide it. A KL
  divergence whose target broadcasts to the input's own shape (one prior or
  uniform distribution ``[C]`` for every sample ``[N, C]``) is meant.

Functional losses are seen two ways. While a watch is attached, the loss
functions of ``torch.nn.functional`` (``mse_loss``, ``l1_loss``,
``smooth_l1_loss``, ``huber_loss``, ``kl_div``, ``binary_cross_entropy``,
``binary_cross_entropy_with_logits``, ``cross_entropy``) are wrapped (put back
on detach; a wrapper a script still holds then only forwards): a call made
outside a loss module's forward has its input and target shapes compared, and
the ``grad_fn`` that produced its input read, as for the modules. A loss
imported before the watch attached is seen from its autograd graph when
``backward()`` is called (``Observer.on_backward``): ``NllLossBackward0`` fed by
the loss's own ``LogSoftmaxBackward0`` fed by a softmax or log-softmax, or
``BinaryCrossEntropyWithLogitsBackward0`` fed by a sigmoid, is a double
activation; an ``ExpandBackward0`` right under
``MseLossBackward0``/``SmoothL1LossBackward0``/``HuberLossBackward0`` is a
broadcast. Steps that called a loss module or a wrapped function skip the graph
check. Functional findings are reported on the module that produced the
activation, else the module whose forward computes the loss, else the last
root forward.
"""
from __future__ import annotations

import re
import sys
from typing import Any, Callable

import torch
from torch import nn

from tensorscope.hooks.compiled import is_compiling as _is_compiling
from tensorscope.hooks.diagnostics.base import PASS_THROUGH_FNS, Diagnostic, \
    FunctionalPatches, fn_name, functional_wrapper, is_loss_module, is_loss_type, \
    iter_tensors, module_label, producing_fn, saved_value
from tensorscope.hooks.observer import CallRecord, StepRecord
from tensorscope.hooks.tensor_kinds import has_subclass

ACTIVATION_FNS = {"SoftmaxBackward0": "softmax", "LogSoftmaxBackward0": "log-softmax",
                  "SigmoidBackward0": "sigmoid"}
_EXPECTS_LOGITS: dict[type, tuple[str, ...]] = {
    nn.CrossEntropyLoss: ("softmax", "log-softmax", "sigmoid"),
    nn.BCEWithLogitsLoss: ("sigmoid", "softmax"),
}
MAX_REMEMBERED = 256
# Layers whose output is never a softmax/log-softmax/sigmoid result (their own last
# op is a convolution, matmul, normalisation, pooling, ReLU-like clamp, dropout
# mask or view): their calls need no activation check. Identity and containers
# may pass one through, so they are not here.
_NOT_ACTIVATION_OUTPUT = (
    nn.modules.conv._ConvNd, nn.Linear, nn.Bilinear, nn.modules.batchnorm._NormBase,
    nn.LayerNorm, nn.GroupNorm, nn.ReLU, nn.LeakyReLU, nn.ReLU6, nn.GELU, nn.ELU,
    nn.modules.dropout._DropoutNd, nn.modules.pooling._MaxPoolNd,
    nn.modules.pooling._AvgPoolNd, nn.modules.pooling._AdaptiveAvgPoolNd,
    nn.modules.pooling._AdaptiveMaxPoolNd, nn.Embedding, nn.Flatten, nn.Unflatten)
_ELEMENTWISE = (nn.MSELoss, nn.L1Loss, nn.SmoothL1Loss, nn.HuberLoss, nn.KLDivLoss,
                nn.PoissonNLLLoss, nn.BCELoss, nn.BCEWithLogitsLoss)   # (the binary ones
# raise on such shapes: the finding says why, beside the exception)
_GRAPH_SEARCH = 24          # nodes looked at under the loss in the functional check
MANUAL_CHECKS = 16          # backwards whose hand-written loss is checked for a broadcast
# The functional losses wrapped while attached, and what their inputs are checked for.
_FUNCTIONAL = {"mse_loss": "broadcast", "l1_loss": "broadcast", "smooth_l1_loss": "broadcast",
               "huber_loss": "broadcast", "binary_cross_entropy": "broadcast",
               "binary_cross_entropy_with_logits": "binary_logits",
               "cross_entropy": "logits", "kl_div": "broadcast",
               # nothing to check before the call (log-probabilities against class
               # indices): wrapped for its value (an evaluation loop's loss, pytorch/examples'
               # MNIST test) and its exception (a class index out of range)
               "nll_loss": "value"}
_REFUSES = re.compile(r"binary_cross_entropy|BCE")   # losses that raise on other shapes
_BROADCAST_LOSSES = {"MseLossBackward0": "F.mse_loss", "SmoothL1LossBackward0":
                     "F.smooth_l1_loss", "HuberLossBackward0": "F.huber_loss"}


class LossInputObserver(Diagnostic):
    """Looks at what each loss (module or functional) receives."""

    def __init__(self, functional: bool = True, targets: Any = None) -> None:
        # id(grad_fn) -> (grad_fn, call) for outputs produced by an activation this step
        self._acts: dict[int, tuple[Any, CallRecord]] = {}
        self._last_root: tuple[int, str, int] | None = None
        self._functional = functional
        self._targets = targets         # a TargetGradObserver told of each functional call
        self._patches = FunctionalPatches()
        self._active = False
        self._module_loss_called = False
        self._in_loss_module = 0        # inside a hooked loss module's forward
        self._functional_step = -1      # the last step a wrapped functional loss ran in
        self._manual_checks = 0         # backwards checked for a hand-written broadcast
        # logits made by a ReLU this step: (its node, loss, root, path, step)
        self._relus: list[tuple[Any, str, int, str, int]] = []
        # (node that made the prediction, its shape, the difference's shape, step)
        self._manual: list[tuple[Any, list[int], list[int], int]] = []
        self._findings = 0              # findings reported so far
        self._call_findings = 0         # ... when the running functional loss was checked

    # ---------------------------------------------------------------- attach
    def on_attach(self, ctx: Any) -> None:
        """Wrap the functional losses of ``torch.nn.functional`` (restored on detach)."""
        super().on_attach(ctx)
        if not self._functional:
            return
        self._patches.install(_FUNCTIONAL, lambda orig, name: self._wrap(
            orig, name, _FUNCTIONAL[name]))
        self._active = True

    def _wrap(self, orig: Callable[..., Any], name: str, check: str) -> Callable[..., Any]:
        observer, ts_orig, ts_name, ts_check = self, orig, name, check
        ts_compiling, ts_subclassed = _is_compiling, has_subclass

        def loss(*args: Any, **kwargs: Any) -> Any:
            if observer._active and not observer._in_loss_module and not ts_compiling():
                if ts_subclassed(args) or ts_subclassed(kwargs.values()):
                    return observer._quietly(ts_orig, ts_name, ts_check, args, kwargs)
                observer._functional_call(ts_name, ts_check, args, kwargs)
                try:
                    value = ts_orig(*args, **kwargs)
                except Exception as exc:
                    observer._functional_raised(ts_name, args, kwargs, exc)
                    raise
                observer._functional_value(value)
                return value
            return ts_orig(*args, **kwargs)

        return functional_wrapper(loss, orig)

    def _quietly(self, orig: Callable[..., Any], name: str, check: str, args: tuple,
                 kwargs: dict) -> Any:
        """A functional loss on tensor subclasses: the checks read with subclass torch
        functions off (the loss itself runs as the user called it)."""
        with torch._C.DisableTorchFunctionSubclass():
            self._functional_call(name, check, args, kwargs)
        try:
            value = orig(*args, **kwargs)
        except Exception as exc:
            with torch._C.DisableTorchFunctionSubclass():
                self._functional_raised(name, args, kwargs, exc)
            raise
        with torch._C.DisableTorchFunctionSubclass():
            self._functional_value(value)
        return value

    def on_detach(self) -> None:
        """Put the original functions back (a wrapper still held by a script only
        forwards from now on)."""
        self._active = False
        self._patches.restore()
        self._acts.clear()

    def _functional_call(self, name: str, check: str, args: tuple, kwargs: dict) -> None:
        """A functional loss is called (outside a loss module): check its inputs
        (metadata reads; where to report is looked up only for a finding)."""
        self._call_findings = self._findings
        try:
            pred = args[0] if args else kwargs.get("input")
            target = args[1] if len(args) > 1 else kwargs.get("target")
            if not isinstance(pred, torch.Tensor) or check == "value":
                return   # (the backward's look at the graph still checks a "value" loss)
            self._functional_step = self.ctx.step_index
            loss = f"F.{name}"
            if self._targets is not None:
                self._targets.loss_called(loss, pred, target)
            if check != "logits" and isinstance(target, torch.Tensor) \
                    and pred.shape != target.shape:
                self._broadcast(loss, pred, target, *self._where())
            if name == "kl_div":
                self._probabilities_into_kl(loss, pred, *self._where())
            if check in ("logits", "binary_logits") and pred.grad_fn is not None:
                expects = ("softmax", "log-softmax", "sigmoid") if check == "logits" else \
                    ("sigmoid", "softmax")
                fn = fn_name(producing_fn(pred))
                act = ACTIVATION_FNS.get(fn)
                if act is not None and act in expects or fn == "ReluBackward0":
                    self._double_activation(loss, pred, expects, *self._where())
        except Exception as exc:  # never break the user's loss
            self._active = False
            print(f"tensorscope: the functional loss check failed ({type(exc).__name__}: "
                  f"{exc}); it is off for the rest of the run", file=sys.stderr)

    def _functional_raised(self, name: str, args: tuple, kwargs: dict,
                           exc: Exception) -> None:
        """A functional loss raised (a target out of range, shapes that do not
        match): an ``exception`` finding, as a loss module's exception gets, at the
        module whose forward called it, else the last root forward; none when the
        check of its inputs reported what is wrong already (``loss_broadcast``)."""
        if self._findings != self._call_findings:
            return
        try:
            inputs = [(label, v) for label, v in (
                ("input", args[0] if args else kwargs.get("input")),
                ("target", args[1] if len(args) > 1 else kwargs.get("target")))
                if v is not None]
            current = getattr(self.ctx, "current_call", None)
            inside = current() if current is not None else None
            root, path, _ = self._where()
            label = module_label(self.ctx, root, path)
            where = (f"called in the forward of {label}" if inside is not None else
                     f"called after the forward of {label}" if self._last_root is not None
                     else "called outside any module")
            self.ctx.function_raised(f"F.{name}", where, inputs, exc, root, path)
        except Exception as err:  # the user's exception goes on unchanged
            print(f"tensorscope: the functional loss check failed ({type(err).__name__}: "
                  f"{err}) while reporting its exception", file=sys.stderr)

    def _functional_value(self, value: Any) -> None:
        """An evaluation loss computed outside the model (gradients off, no module
        running: a validation step's ``F.cross_entropy``) is the step's loss."""
        try:
            if not torch.is_grad_enabled() and isinstance(value, torch.Tensor):
                current = getattr(self.ctx, "current_call", None)
                if current is None or current() is None:
                    note = getattr(self.ctx, "note_eval_loss", None)
                    if note is not None:
                        note(value)
        except Exception as exc:  # never break the user's loss
            self._active = False
            print(f"tensorscope: the functional loss check failed ({type(exc).__name__}: "
                  f"{exc}); it is off for the rest of the run", file=sys.stderr)

    def _where(self) -> tuple[int, str, int]:
        """Where a functional loss is reported by default: the module whose forward
        computes it, else the last root forward."""
        current = getattr(self.ctx, "current_call", None)
        call = current() if current is not None else None
        step = self.ctx.step_index
        if call is not None:
            return call.root, call.path, step
        if self._last_root is not None:
            return self._last_root[0], self._last_root[1], step
        return 0, "", step

    def on_backward(self, loss: torch.Tensor) -> None:
        """Read the top of the loss's graph: a functional loss imported before the
        watch attached (so not wrapped) is still seen there; so is a hand-written one
        whose difference broadcasts (the first backwards only)."""
        if not self._active:
            return
        if self._manual_checks < MANUAL_CHECKS and isinstance(loss, torch.Tensor) \
                and loss.grad_fn is not None:
            self._manual_checks += 1
            self._manual_broadcast(loss)
        if self._functional_step == self.ctx.step_index:
            return   # the wrapped functional losses checked this step's losses already
        self._functional_loss(loss)

    def _functional_loss(self, loss: torch.Tensor) -> None:
        if self._module_loss_called or self._last_root is None or loss.grad_fn is None:
            return
        root, path, step = self._last_root
        for node in top_nodes(loss.grad_fn):
            name = fn_name(node)
            if name in ("NllLossBackward0", "NllLoss2DBackward0"):
                inner = producing_fn_of(node)
                if fn_name(inner) == "LogSoftmaxBackward0":
                    self._activation_under(inner, "F.cross_entropy",
                                           ("softmax", "log-softmax", "sigmoid"), root, path,
                                           step)
            elif name == "BinaryCrossEntropyWithLogitsBackward0":
                self._activation_under(node, "F.binary_cross_entropy_with_logits",
                                       ("sigmoid", "softmax"), root, path, step)
            elif name in _BROADCAST_LOSSES:
                self._expanded(node, _BROADCAST_LOSSES[name], root, path, step)

    def _manual_broadcast(self, loss: torch.Tensor) -> None:
        """``pred - target`` with pred ``[N, 1]`` and target ``[N]``, under the loss: the
        difference node's one graph input (the prediction) is ``[N, 1]`` and its result
        ``[N, N]`` (shapes from the nodes' input metadata). Named at step end."""
        for node in top_nodes(loss.grad_fn):
            if fn_name(node) not in ("SubBackward0", "RsubBackward0"):
                continue
            edges = [e for e in node.next_functions if e[0] is not None]
            if len(edges) != 1 or len(node.next_functions) != 2:
                continue   # both sides in the graph (pairwise differences), or a constant
            pred = node_output_shape(*edges[0])
            out = node_output_shape(node, 0)
            # [N, 1] against a target [N], or [N] against a target [N, 1]: [N, N]
            if pred is not None and out is not None and pred and pred[0] > 1 and (
                    pred == [pred[0], 1] or pred == [pred[0]]) and out == [pred[0], pred[0]]:
                self._manual.append((edges[0][0], pred, out, self.ctx.step_index))

    def _report_manual(self, calls: list[CallRecord]) -> None:
        manual, self._manual = self._manual, []
        for made, pred, out, step in manual:
            nodes = [made]   # the prediction's node, and through views (a .squeeze(1)) under it
            while len(nodes) < 6 and fn_name(nodes[-1]) in PASS_THROUGH_FNS \
                    and nodes[-1].next_functions and nodes[-1].next_functions[0][0] is not None:
                nodes.append(nodes[-1].next_functions[0][0])
            call = next((c for n in nodes for c in calls for e in c.out_entries
                         if e.made_fn is n and e.producer is c), None)
            root, path = (call.root, call.path) if call is not None else \
                (self._last_root or (0, "", step))[:2]
            self._report_broadcast("the hand-written loss (pred - target)", pred, None, out,
                                   root, path, step)

    def _activation_under(self, node: Any, loss: str, expects: tuple[str, ...], root: int,
                          path: str, step: int) -> None:
        act_fn = producing_fn_of(node)
        act = ACTIVATION_FNS.get(fn_name(act_fn))
        if act is not None and act in expects:
            self._report_double(loss, act, act_fn, root, path, step)
        elif fn_name(act_fn) == "ReluBackward0":
            self._relu_logits(act_fn, loss, root, path, step)

    def _expanded(self, node: Any, loss: str, root: int, path: str, step: int) -> None:
        first = node.next_functions[0][0] if node.next_functions else None
        if fn_name(first) != "ExpandBackward0":
            return
        before = list(saved_value(first, "self_sym_sizes", ()) or ())
        saved = saved_value(node, "self", None)
        after = list(saved.shape) if isinstance(saved, torch.Tensor) else None
        if after is None or before == after:
            return
        self._report_broadcast(loss, before, None, after, root, path, step)

    # ------------------------------------------------------------- tracking
    def on_forward(self, call: CallRecord) -> None:
        """Remember calls whose output comes straight from an activation."""
        if self._in_loss_module and is_loss_module(call.module):
            self._in_loss_module -= 1
        if call.parent is None and not is_loss_module(call.module):
            self._last_root = (call.root, "", call.step)
        if not call.grad_enabled:
            return
        fn = call.output_grad_fn()
        if fn is not None and type(fn).__name__ in ACTIVATION_FNS and id(fn) not in self._acts:
            if len(self._acts) >= MAX_REMEMBERED:   # a long loop without step ends
                self._acts.clear()
            self._acts[id(fn)] = (fn, call)   # innermost first: children finish first

    def watches(self, module_type: type, hook: str) -> bool:
        """Inputs of loss modules only; outputs of loss modules and of every module
        that may return an activation's output (not of layers whose own last op is
        known to be none)."""
        if hook == "on_forward_pre":
            return is_loss_type(module_type)
        return is_loss_type(module_type) or not issubclass(module_type, _NOT_ACTIVATION_OUTPUT)

    def on_forward_pre(self, call: CallRecord) -> None:
        """Check the inputs of loss modules."""
        module = call.module
        if not is_loss_module(module):
            return
        self._module_loss_called = True
        self._in_loss_module += 1
        expects = next((acts for cls, acts in _EXPECTS_LOGITS.items()
                        if isinstance(module, cls)), None)
        tensors = [v for _, v in iter_tensors(call.inputs)]
        if expects is not None and tensors:
            self._double_activation(call.type, tensors[0], expects, call.root, call.path,
                                    call.step)
        if isinstance(module, _ELEMENTWISE) and len(tensors) >= 2:
            self._broadcast(call.type, tensors[0], tensors[1], call.root, call.path, call.step)
        if isinstance(module, nn.KLDivLoss) and tensors:
            self._probabilities_into_kl(call.type, tensors[0], call.root, call.path, call.step)

    def emit(self, kind: str, severity: str, phase: str, root: int, module: str,
             message: str, step: int | None = None) -> None:
        """``Diagnostic.emit``, counted."""
        self._findings += 1
        super().emit(kind, severity, phase, root, module, message, step)

    def on_step_end(self, record: StepRecord) -> None:
        """Forget this step's activation outputs (and their graph nodes)."""
        if self._manual:
            self._report_manual(record.calls)
        if self._relus:
            self._report_relus(record.calls)
        self._acts.clear()
        self._module_loss_called = False
        self._in_loss_module = 0

    # --------------------------------------------------------------- checks
    def _double_activation(self, loss: str, pred: torch.Tensor, expects: tuple[str, ...],
                           root: int, path: str, step: int) -> None:
        if pred.grad_fn is None:
            return
        fn = producing_fn(pred)
        act = ACTIVATION_FNS.get(fn_name(fn))
        if act is not None and act in expects:
            self._report_double(loss, act, fn, root, path, step)
        elif fn_name(fn) == "ReluBackward0":
            self._relu_logits(fn, loss, root, path, step)

    def _probabilities_into_kl(self, loss: str, pred: torch.Tensor, root: int, path: str,
                               step: int) -> None:
        """A KL divergence's input must be log-probabilities; a softmax's output there
        (``kl_div(F.softmax(student), F.softmax(teacher))``) gives a wrong loss, negative
        at times, whose gradient does not match the students to the teachers."""
        if pred.grad_fn is None:
            return
        fn = producing_fn(pred)
        if fn_name(fn) != "SoftmaxBackward0":
            return
        hit = self._acts.get(id(fn))
        if hit is not None and hit[0] is fn:
            root, path = hit[1].root, hit[1].path
            origin = f"the output of {module_label(self.ctx, root, path)} ({hit[1].type})"
        else:
            origin = "a softmax applied outside any module"
        self.emit("double_activation", "warning", "loss", root, path,
                  f"{loss} received {origin}, which is probabilities, as its input: the KL "
                  f"divergence expects log-probabilities there (it computes target * "
                  f"(log(target) - input)), so the loss is wrong (it can go negative) and "
                  f"does not pull the distributions together. Fix: F.log_softmax(x, dim=-1) "
                  f"as the input (the target stays probabilities, or log-probabilities with "
                  f"log_target=True).", step=step)

    def _relu_logits(self, fn: Any, loss: str, root: int, path: str, step: int) -> None:
        """Logits out of a ReLU: named at step end (the module whose output it made)."""
        if len(self._relus) < 4:
            self._relus.append((fn, loss, root, path, step))

    def _report_relus(self, calls: list[CallRecord]) -> None:
        relus, self._relus = self._relus, []
        for fn, loss, root, path, step in relus:
            call = next((c for c in calls for e in c.out_entries
                         if e.made_fn is fn and e.producer is c), None)
            if call is not None:
                root, path = call.root, call.path
            self.emit("double_activation", "warning", "loss", root, path,
                      f"{loss} received the output of a ReLU (in "
                      f"{module_label(self.ctx, root, path)}) as its logits: every negative "
                      f"score is clipped to 0 and gets no gradient, so a class's score can "
                      f"be raised but never pushed below zero, and training stalls. Fix: "
                      f"remove the final ReLU and give {loss} the raw output of the last "
                      f"layer.", step=step)

    def _report_double(self, loss: str, act: str, fn: Any, root: int, path: str,
                       step: int) -> None:
        hit = self._acts.get(id(fn))
        if hit is not None and hit[0] is fn:
            root, path = hit[1].root, hit[1].path
            origin = f"the output of {module_label(self.ctx, root, path)} ({hit[1].type})"
        else:
            origin = f"a {act} applied outside any module"
        ce = "binary" not in loss.lower() and ("cross_entropy" in loss or "CrossEntropy" in loss)
        applies = "log-softmax" if ce else "sigmoid"
        fix = (f"remove the {act} and give {loss} the raw logits" if ce else
               "return raw logits (apply torch.sigmoid only for predictions), or keep the "
               "sigmoid and use nn.BCELoss")
        twice = (f"{loss} applies {applies} itself, so the activation is applied twice" if
                 not (ce and act == "sigmoid") else
                 f"{loss} applies log-softmax to scores squashed into [0, 1], so the classes "
                 f"can barely be told apart")
        self.emit("double_activation", "warning", "loss", root, path,
                  f"{loss} received {origin}, which is already a {act}; {twice}: gradients "
                  f"shrink and training stalls. Fix: {fix}.", step=step)

    def _broadcast(self, loss: str, a: torch.Tensor, b: torch.Tensor, root: int, path: str,
                   step: int) -> None:
        if a.shape == b.shape or a.numel() == 1 or b.numel() == 1:
            return
        try:
            out = torch.broadcast_shapes(a.shape, b.shape)
        except RuntimeError:
            return  # PyTorch raises on its own
        if "kl" in loss.lower() and out == a.shape:
            return  # a KL to one distribution for every sample (a prior, a uniform)
        self._report_broadcast(loss, list(a.shape), list(b.shape), list(out), root, path, step)

    def _report_broadcast(self, loss: str, a: list[int], b: list[int] | None, out: list[int],
                          root: int, path: str, step: int) -> None:
        target = f"target {b}" if b is not None else "a target of another shape"
        # the binary cross-entropies refuse a target of another size (ValueError); the
        # element-wise losses broadcast it with a warning
        what = (f"they would broadcast to {out}, every prediction against every target, so "
                f"PyTorch refuses shapes that differ" if _REFUSES.search(loss) else
                f"PyTorch broadcasts them to {out} and averages every pair, so the loss is "
                f"not what you meant (the model barely learns)")
        self.emit("loss_broadcast", "warning", "loss", root, path,
                  f"{loss} got input {a} and {target}: {what}. Fix: make the shapes equal, "
                  f"e.g. pred.squeeze(-1) or target.unsqueeze(-1) / target.view_as(pred).",
                  step=step)


def node_output_shape(node: Any, index: int) -> list[int] | None:
    """The shape of output ``index`` of a graph node (its gradient's metadata), or None
    where this PyTorch does not expose it."""
    try:
        return list(node._input_metadata[index].shape)
    except (AttributeError, IndexError, TypeError, RuntimeError):
        return None


def producing_fn_of(node: Any) -> Any:
    """The node that produced ``node``'s first input, skipping views and casts."""
    nxt = node.next_functions
    if not nxt or nxt[0][0] is None:
        return None
    fn = nxt[0][0]
    for _ in range(6):
        if fn_name(fn) not in PASS_THROUGH_FNS:
            return fn
        inner = [f for f, _ in fn.next_functions if f is not None]
        if len(inner) != 1:
            return fn
        fn = inner[0]
    return fn


def top_nodes(root: Any, limit: int = _GRAPH_SEARCH) -> list[Any]:
    """The first ``limit`` nodes under a loss, breadth first (leaves skipped)."""
    out, queue, seen = [], [root], set()
    while queue and len(out) < limit:
        node = queue.pop(0)
        if node is None or id(node) in seen or fn_name(node) == "AccumulateGrad":
            continue
        seen.add(id(node))
        out.append(node)
        queue.extend(f for f, _ in node.next_functions)
    return out
