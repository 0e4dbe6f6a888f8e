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
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tensorscope.hooks.diagnostics.base import Diagnostic, fn_name, iter_tensors, \
    module_label, producing_fn
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


class LossInputObserver(Diagnostic):
    """Looks at what each loss module receives."""

    def __init__(self) -> None:
        # id(grad_fn) -> (grad_fn, call) for outputs produced by an activation this step
        self._acts: dict[int, tuple[Any, CallRecord]] = {}

    def on_forward(self, call: CallRecord) -> None:
        """Remember calls whose output comes straight from an activation."""
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

    def on_forward_pre(self, call: CallRecord) -> None:
        """Check the inputs of loss modules."""
        module = call.module
        expects = None
        for cls, acts in _EXPECTS_LOGITS.items():
            if isinstance(module, cls):
                expects = acts
        if expects is not None:
            self._double_activation(call, expects)
        elif isinstance(module, _ELEMENTWISE):
            self._broadcast(call)

    def _double_activation(self, call: CallRecord, expects: tuple[str, ...]) -> None:
        pred = next((v for _, v in iter_tensors(call.inputs)), None)
        if pred is None or pred.grad_fn is None:
            return
        fn = producing_fn(pred)
        act = ACTIVATION_FNS.get(fn_name(fn))
        if act is None or act not in expects:
            return
        hit = self._acts.get(id(fn))
        if hit is not None and hit[0] is fn:
            root, path, where = hit[1].root, hit[1].path, module_label(self.ctx, hit[1].root,
                                                                        hit[1].path)
            origin = f"the output of {where} ({hit[1].type})"
        else:
            root, path = call.root, call.path
            origin = f"a {act} applied outside any module"
        loss = call.type
        applies = "log-softmax" if loss == "CrossEntropyLoss" else "sigmoid"
        fix = ("remove the softmax and give CrossEntropyLoss the raw logits"
               if loss == "CrossEntropyLoss" else
               "return raw logits (apply torch.sigmoid only for predictions), or keep the "
               "sigmoid and use nn.BCELoss")
        self.emit("double_activation", "warning", "loss", root, path,
                  f"{loss} received {origin}, which is already a {act}; {loss} applies "
                  f"{applies} itself, so the activation is applied twice: gradients shrink and "
                  f"training stalls. Fix: {fix}.", step=call.step)

    def _broadcast(self, call: CallRecord) -> None:
        tensors = [v for _, v in iter_tensors(call.inputs)]
        if len(tensors) < 2:
            return
        a, b = tensors[0], tensors[1]
        if a.shape == b.shape or a.numel() == 1 or b.numel() == 1:
            return
        try:
            out = torch.broadcast_shapes(a.shape, b.shape)
        except RuntimeError:
            return  # PyTorch raises on its own
        self.emit("loss_broadcast", "warning", "loss", call.root, call.path,
                  f"{call.type} got input {list(a.shape)} and target {list(b.shape)}: PyTorch "
                  f"broadcasts them to {list(out)} and averages every pair, so the loss is not "
                  f"what you meant (the model barely learns). Fix: make the shapes equal, e.g. "
                  f"pred.squeeze(-1) or target.unsqueeze(-1) / target.view_as(pred).",
                  step=call.step)

    def on_step_end(self, record: StepRecord) -> None:
        """Forget this step's activation outputs (and their graph nodes)."""
        self._acts.clear()
