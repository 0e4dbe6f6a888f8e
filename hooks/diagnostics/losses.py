"""``double_activation`` and ``loss_broadcast``: loss modules fed the wrong thing.

Both run in the loss module's forward pre-hook and read metadata only.

* ``double_activation``: the prediction given to ``CrossEntropyLoss`` was
  produced by a softmax or log-softmax, or the one given to
  ``BCEWithLogitsLoss`` by a sigmoid (or softmax). The producer is read from
  the tensor's ``grad_fn`` (``SoftmaxBackward0``, ``LogSoftmaxBackward0``,
  ``SigmoidBackward0``), skipping views, reshapes and dtype casts, so
  ``nn.Softmax`` modules and ``torch.sigmoid`` calls inside ``forward`` are
  both seen. The finding names the module whose forward applied the
  activation (remembered in ``on_forward`` for outputs whose ``grad_fn`` is an
  activation), or the loss when the activation ran outside any module. Only
  visible when the prediction requires grad (a training forward).
  ``LogSoftmax`` followed by ``NLLLoss`` and ``Sigmoid`` followed by
  ``BCELoss`` are correct and never looked at.
* ``loss_broadcast``: an element-wise regression loss (``MSELoss``,
  ``L1Loss``, ``SmoothL1Loss``, ``HuberLoss``, ``KLDivLoss``,
  ``PoissonNLLLoss``) gets input and target of different shapes, which
  PyTorch silently broadcasts (``[N, 1]`` vs ``[N]`` gives ``[N, N]``). It does
  not depend on PyTorch's warning, so filtered warnings do not hide it.

Functional losses (``F.cross_entropy``, ``F.binary_cross_entropy_with_logits``,
``F.mse_loss``, ``F.smooth_l1_loss``, ``F.huber_loss``) are seen from the
loss's autograd graph when ``backward()`` is called: while a watch is
attached, ``torch.Tensor.backward`` is wrapped (and put back on detach; the
wrapper only reads the top of the graph, then calls the original). Under the
loss: ``NllLossBackward0`` fed by the loss's own ``LogSoftmaxBackward0`` fed
by a softmax or log-softmax, or ``BinaryCrossEntropyWithLogitsBackward0`` fed
by a sigmoid, is a double activation; an ``ExpandBackward0`` right under
``MseLossBackward0``/``SmoothL1LossBackward0``/``HuberLossBackward0`` is a
broadcast (PyTorch only expands when the shapes differ). Steps that called a
loss module are left to the module check. Functional findings are reported on
the module that produced the prediction (the activation's module, else the
last root forward).
"""
from __future__ import annotations

import functools
import sys
from typing import Any, Callable

import torch
from torch import nn

from tensorscope.hooks.diagnostics.base import PASS_THROUGH_FNS, Diagnostic, fn_name, \
    is_loss_module, is_loss_type, iter_tensors, module_label, producing_fn
from tensorscope.hooks.observer import CallRecord, StepRecord

ACTIVATION_FNS = {"SoftmaxBackward0": "softmax", "LogSoftmaxBackward0": "log-softmax",
                  "SigmoidBackward0": "sigmoid"}
_EXPECTS_LOGITS: dict[type, tuple[str, ...]] = {
    nn.CrossEntropyLoss: ("softmax", "log-softmax"),
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
                nn.PoissonNLLLoss)
_GRAPH_SEARCH = 24          # nodes looked at under the loss in the functional check
_BROADCAST_LOSSES = {"MseLossBackward0": "F.mse_loss", "SmoothL1LossBackward0":
                     "F.smooth_l1_loss", "HuberLossBackward0": "F.huber_loss"}


class LossInputObserver(Diagnostic):
    """Looks at what each loss (module or functional) receives."""

    def __init__(self, functional: bool = True) -> None:
        # id(grad_fn) -> (grad_fn, call) for outputs produced by an activation this step
        self._acts: dict[int, tuple[Any, CallRecord]] = {}
        self._last_root: tuple[int, str, int] | None = None
        self._functional = functional
        self._patched: dict[str, Callable[..., Any]] = {}
        self._active = False
        self._module_loss_called = False

    # ---------------------------------------------------------------- attach
    def on_attach(self, ctx: Any) -> None:
        """Wrap ``torch.Tensor.backward`` to see functional losses (restored on detach)."""
        super().on_attach(ctx)
        orig = torch.Tensor.backward
        if not self._functional or getattr(orig, "__tensorscope_wrapped__", False):
            return

        @functools.wraps(orig)
        def backward(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if self._active:
                self._functional_loss(tensor)
            return orig(tensor, *args, **kwargs)

        backward.__tensorscope_wrapped__ = True  # type: ignore[attr-defined]
        torch.Tensor.backward = backward  # type: ignore[method-assign]
        self._patched["backward"] = orig
        self._active = True

    def on_detach(self) -> None:
        """Put the original ``torch.Tensor.backward`` back."""
        self._active = False
        orig = self._patched.pop("backward", None)
        if orig is not None and getattr(torch.Tensor.backward, "__wrapped__", None) is orig:
            torch.Tensor.backward = orig  # type: ignore[method-assign]
        self._acts.clear()

    def _functional_loss(self, loss: torch.Tensor) -> None:
        try:
            if self._module_loss_called or self._last_root is None or loss.grad_fn is None:
                return
            root, path, step = self._last_root
            for node in _top_nodes(loss.grad_fn):
                name = fn_name(node)
                if name in ("NllLossBackward0", "NllLoss2DBackward0"):
                    inner = producing_fn_of(node)
                    if fn_name(inner) == "LogSoftmaxBackward0":
                        self._activation_under(inner, "F.cross_entropy",
                                               ("softmax", "log-softmax"), root, path, step)
                elif name == "BinaryCrossEntropyWithLogitsBackward0":
                    self._activation_under(node, "F.binary_cross_entropy_with_logits",
                                           ("sigmoid", "softmax"), root, path, step)
                elif name in _BROADCAST_LOSSES:
                    self._expanded(node, _BROADCAST_LOSSES[name], root, path, step)
        except Exception as exc:  # never break the user's backward
            self._active = False
            print(f"tensorscope: the functional loss check failed ({type(exc).__name__}: "
                  f"{exc}); it is off for the rest of the run", file=sys.stderr)

    def _activation_under(self, node: Any, loss: str, expects: tuple[str, ...], root: int,
                          path: str, step: int) -> None:
        act_fn = producing_fn_of(node)
        act = ACTIVATION_FNS.get(fn_name(act_fn))
        if act is not None and act in expects:
            self._report_double(loss, act, act_fn, root, path, step)

    def _expanded(self, node: Any, loss: str, root: int, path: str, step: int) -> None:
        first = node.next_functions[0][0] if node.next_functions else None
        if fn_name(first) != "ExpandBackward0":
            return
        before = list(getattr(first, "_saved_self_sym_sizes", ()) or ())
        saved = getattr(node, "_saved_self", None)
        after = list(saved.shape) if isinstance(saved, torch.Tensor) else None
        if after is None or before == after:
            return
        self._report_broadcast(loss, before, None, after, root, path, step)

    # ------------------------------------------------------------- tracking
    def on_forward(self, call: CallRecord) -> None:
        """Remember calls whose output comes straight from an activation."""
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
        """Inputs of loss modules only; outputs of every module that may return an
        activation's output (not of layers whose own last op is known to be none)."""
        if hook == "on_forward_pre":
            return is_loss_type(module_type)
        return not issubclass(module_type, _NOT_ACTIVATION_OUTPUT)

    def on_forward_pre(self, call: CallRecord) -> None:
        """Check the inputs of loss modules."""
        module = call.module
        if not is_loss_module(module):
            return
        self._module_loss_called = True
        expects = next((acts for cls, acts in _EXPECTS_LOGITS.items()
                        if isinstance(module, cls)), None)
        tensors = [v for _, v in iter_tensors(call.inputs)]
        if expects is not None and tensors:
            self._double_activation(call.type, tensors[0], expects, call.root, call.path,
                                    call.step)
        elif isinstance(module, _ELEMENTWISE) and len(tensors) >= 2:
            self._broadcast(call.type, tensors[0], tensors[1], call.root, call.path, call.step)

    def on_step_end(self, record: StepRecord) -> None:
        """Forget this step's activation outputs (and their graph nodes)."""
        self._acts.clear()
        self._module_loss_called = False

    # --------------------------------------------------------------- checks
    def _double_activation(self, loss: str, pred: torch.Tensor, expects: tuple[str, ...],
                           root: int, path: str, step: int) -> None:
        if pred.grad_fn is None:
            return
        fn = producing_fn(pred)
        act = ACTIVATION_FNS.get(fn_name(fn))
        if act is not None and act in expects:
            self._report_double(loss, act, fn, root, path, step)

    def _report_double(self, loss: str, act: str, fn: Any, root: int, path: str,
                       step: int) -> None:
        hit = self._acts.get(id(fn))
        if hit is not None and hit[0] is fn:
            root, path = hit[1].root, hit[1].path
            origin = f"the output of {module_label(self.ctx, root, path)} ({hit[1].type})"
        else:
            origin = f"a {act} applied outside any module"
        ce = "cross_entropy" in loss or "CrossEntropy" in loss
        applies = "log-softmax" if ce else "sigmoid"
        fix = (f"remove the softmax and give {loss} the raw logits" if ce else
               "return raw logits (apply torch.sigmoid only for predictions), or keep the "
               "sigmoid and use nn.BCELoss")
        self.emit("double_activation", "warning", "loss", root, path,
                  f"{loss} received {origin}, which is already a {act}; {loss} applies "
                  f"{applies} itself, so the activation is applied twice: gradients shrink and "
                  f"training stalls. Fix: {fix}.", step=step)

    def _broadcast(self, loss: str, a: torch.Tensor, b: torch.Tensor, root: int, path: str,
                   step: int) -> None:
        if a.shape == b.shape or a.numel() == 1 or b.numel() == 1:
            return
        try:
            out = torch.broadcast_shapes(a.shape, b.shape)
        except RuntimeError:
            return  # PyTorch raises on its own
        self._report_broadcast(loss, list(a.shape), list(b.shape), list(out), root, path, step)

    def _report_broadcast(self, loss: str, a: list[int], b: list[int] | None, out: list[int],
                          root: int, path: str, step: int) -> None:
        target = f"target {b}" if b is not None else "a target of another shape"
        self.emit("loss_broadcast", "warning", "loss", root, path,
                  f"{loss} got input {a} and {target}: PyTorch broadcasts them to {out} and "
                  f"averages every pair, so the loss is not what you meant (the model barely "
                  f"learns). Fix: make the shapes equal, e.g. pred.squeeze(-1) or "
                  f"target.unsqueeze(-1) / target.view_as(pred).", step=step)


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


def _top_nodes(root: Any) -> list[Any]:
    """The first nodes under a loss, breadth first (bounded; leaves skipped)."""
    out, queue, seen = [], [root], set()
    while queue and len(out) < _GRAPH_SEARCH:
        node = queue.pop(0)
        if node is None or id(node) in seen or fn_name(node) == "AccumulateGrad":
            continue
        seen.add(id(node))
        out.append(node)
        queue.extend(f for f, _ in node.next_functions)
    return out
