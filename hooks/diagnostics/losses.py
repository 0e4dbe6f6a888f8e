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

The functional forms (``F.cross_entropy``, ``F.binary_cross_entropy_with_logits``,
``F.mse_loss``, ``F.l1_loss``, ``F.smooth_l1_loss``, ``F.huber_loss``) are
checked too: while a watch is attached, these attributes of
``torch.nn.functional`` are replaced by thin wrappers that run the same
checks and call the original; the originals are put back on detach. Calls
made by the loss modules themselves are not checked twice. Functional
findings are reported on the module that produced the prediction (the
activation's module, else the last root forward).
"""
from __future__ import annotations

import functools
import sys
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from tensorscope.hooks.diagnostics.base import Diagnostic, fn_name, is_loss_module, \
    iter_tensors, module_label, producing_fn
from tensorscope.hooks.observer import CallRecord, StepRecord

ACTIVATION_FNS = {"SoftmaxBackward0": "softmax", "LogSoftmaxBackward0": "log-softmax",
                  "SigmoidBackward0": "sigmoid"}
_EXPECTS_LOGITS: dict[type, tuple[str, ...]] = {
    nn.CrossEntropyLoss: ("softmax", "log-softmax"),
    nn.BCEWithLogitsLoss: ("sigmoid", "softmax"),
}
MAX_REMEMBERED = 256
_ELEMENTWISE = (nn.MSELoss, nn.L1Loss, nn.SmoothL1Loss, nn.HuberLoss, nn.KLDivLoss,
                nn.PoissonNLLLoss)
# functional loss -> (display name, activations it applies itself or None for element-wise)
_FUNCTIONAL: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "cross_entropy": ("F.cross_entropy", ("softmax", "log-softmax")),
    "binary_cross_entropy_with_logits": ("F.binary_cross_entropy_with_logits",
                                         ("sigmoid", "softmax")),
    "mse_loss": ("F.mse_loss", None), "l1_loss": ("F.l1_loss", None),
    "smooth_l1_loss": ("F.smooth_l1_loss", None), "huber_loss": ("F.huber_loss", None),
}


class LossInputObserver(Diagnostic):
    """Looks at what each loss (module or functional) receives."""

    def __init__(self, functional: bool = True) -> None:
        # id(grad_fn) -> (grad_fn, call) for outputs produced by an activation this step
        self._acts: dict[int, tuple[Any, CallRecord]] = {}
        self._in_loss = 0
        self._last_root: tuple[int, str, int] | None = None
        self._functional = functional
        self._patched: dict[str, Callable[..., Any]] = {}
        self._active = False

    # ---------------------------------------------------------------- attach
    def on_attach(self, ctx: Any) -> None:
        """Wrap the functional losses (restored on detach)."""
        super().on_attach(ctx)
        if not self._functional:
            return
        for name, (label, expects) in _FUNCTIONAL.items():
            orig = getattr(F, name, None)
            if orig is None or getattr(orig, "__tensorscope_wrapped__", False):
                continue
            wrapper = self._wrap(orig, label, expects)
            setattr(F, name, wrapper)
            self._patched[name] = orig
        self._active = bool(self._patched)

    def on_detach(self) -> None:
        """Put the original functional losses back."""
        self._active = False
        for name, orig in self._patched.items():
            current = getattr(F, name, None)
            if getattr(current, "__wrapped__", None) is orig:
                setattr(F, name, orig)
        self._patched.clear()
        self._acts.clear()

    def _wrap(self, orig: Callable[..., Any], label: str,
              expects: tuple[str, ...] | None) -> Callable[..., Any]:
        @functools.wraps(orig)
        def loss(*args: Any, **kwargs: Any) -> Any:
            if self._active and self._in_loss == 0:
                self._functional_call(label, expects, args, kwargs)
            return orig(*args, **kwargs)
        loss.__tensorscope_wrapped__ = True  # type: ignore[attr-defined]
        return loss

    def _functional_call(self, label: str, expects: tuple[str, ...] | None,
                         args: tuple, kwargs: dict) -> None:
        try:
            pred = args[0] if args else kwargs.get("input")
            target = args[1] if len(args) > 1 else kwargs.get("target")
            if not isinstance(pred, torch.Tensor) or self._last_root is None:
                return
            root, path, step = self._last_root
            if expects is not None:
                self._double_activation(label, pred, expects, root, path, step)
            elif isinstance(target, torch.Tensor):
                self._broadcast(label, pred, target, root, path, step)
        except Exception as exc:  # never break the user's loss call
            self._active = False
            print(f"tensorscope: functional loss check failed ({type(exc).__name__}: "
                  f"{exc}); it is skipped from now on", file=sys.stderr)

    # ------------------------------------------------------------- tracking
    def on_forward(self, call: CallRecord) -> None:
        """Remember calls whose output comes straight from an activation."""
        if is_loss_module(call.module):
            self._in_loss = max(0, self._in_loss - 1)
        elif call.parent is None:
            self._last_root = (call.root, "", call.step)
        if not call.grad_enabled or not call.outputs:
            return
        v = call.outputs[0][1]
        if not isinstance(v, torch.Tensor):
            return
        fn = v.grad_fn
        if fn is not None and type(fn).__name__ in ACTIVATION_FNS and id(fn) not in self._acts:
            if len(self._acts) >= MAX_REMEMBERED:   # a long loop without step ends
                self._acts.clear()
            self._acts[id(fn)] = (fn, call)   # innermost first: children finish first

    def on_exception(self, call: CallRecord, exc: BaseException) -> None:
        """A loss module raised: it is no longer running."""
        if is_loss_module(call.module):
            self._in_loss = max(0, self._in_loss - 1)

    def on_forward_pre(self, call: CallRecord) -> None:
        """Check the inputs of loss modules."""
        module = call.module
        if is_loss_module(module):
            self._in_loss += 1
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

    # --------------------------------------------------------------- checks
    def _double_activation(self, loss: str, pred: torch.Tensor, expects: tuple[str, ...],
                           root: int, path: str, step: int) -> None:
        if pred.grad_fn is None:
            return
        fn = producing_fn(pred)
        act = ACTIVATION_FNS.get(fn_name(fn))
        if act is None or act not in expects:
            return
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
        self.emit("loss_broadcast", "warning", "loss", root, path,
                  f"{loss} got input {list(a.shape)} and target {list(b.shape)}: PyTorch "
                  f"broadcasts them to {list(out)} and averages every pair, so the loss is not "
                  f"what you meant (the model barely learns). Fix: make the shapes equal, e.g. "
                  f"pred.squeeze(-1) or target.unsqueeze(-1) / target.view_as(pred).",
                  step=step)
