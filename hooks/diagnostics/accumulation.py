"""``unscaled_accumulation``: gradient accumulation that sums micro-batch means.

Gradient accumulation runs ``backward()`` on k micro-batches before each
``optimizer.step()``; each backward adds into ``.grad``, so a mean-reduced loss
must be divided by k (``(loss / k).backward()``) for the step to see the mean
over the k micro-batches. Without it the gradient is k times that: the
learning rate of SGD is multiplied by k, clipping thresholds and weight decay
see k-fold gradients.

Each backward outside an optimizer step (a closure's backward runs inside
``step()`` and does not count) is noted with: the loss node the tensor given to
``backward()`` comes from, the user's source line that called it (the first
frame outside torch and TensorScope), the count of training forwards of a
root and of ``zero_grad()`` calls so far. When an optimizer steps, the
backwards since the previous step form the interval. It matches when it holds
k >= 2 backwards, all from the same source line, each on a fresh training
forward (a new root forward between any two), with no ``zero_grad()`` between
them, each on a tensor that *is* a mean-reduced loss: a functional loss's node
with ``reduction='mean'`` (``NllLossBackward0``, ``MseLossBackward0``, ... whose
saved reduction is ``Mean``), or the output of a loss module whose
``reduction`` is ``"mean"``, or a sum of loss terms one of which is such a loss
undivided (``ce + 0.5 * mse``, reached through additions only), possibly
multiplied by a ``GradScaler``'s scale.
``loss / k``, ``loss * (1 / k)``, a sum of losses divided once, a
``reduction='sum'`` loss, Lightning's and Accelerate's own accumulation
(they divide the loss) are other nodes and never match; neither do a GAN's or a
multi-loss step's backwards (different source lines, or no new forward
between them: several losses of one forward), nor an interval whose gradients the
script divided itself before the step (``grad_rescale``). The finding: ``HITS`` (2)
consecutive optimizer steps match with the same k. Nothing is read on a device.
"""
from __future__ import annotations

import os
import sys
from types import FrameType
from typing import Any

import torch

import tensorscope as _session_package
import tensorscope.hooks as _hooks_package
from tensorscope.hooks.diagnostics.base import ZeroGradListener, fn_name, is_loss_module, \
    module_label, root_module
from tensorscope.hooks.diagnostics.grad_rescale import GradRescaleWatch
from tensorscope.hooks.diagnostics.scaler import grad_scaler_in_use
from tensorscope.hooks.observer import CallRecord
from tensorscope.hooks.registry import is_stand_in

HITS = 2
MEAN = 1            # torch's Reduction.Mean, as the loss nodes save it
LOSS_CALLS = 64     # the step's latest calls searched for the loss module of a node
SUM_NODES = 8       # addition nodes walked for a sum of loss terms
_SUMS = frozenset({"AddBackward0", "SubBackward0"})
# frames of these packages are not the user's line (the hooks may live outside the session
# package: an editable install maps ``tensorscope.hooks`` to a folder of its own)
_SKIP = tuple(os.path.dirname(p) + os.sep for p in (torch.__file__, _hooks_package.__file__,
                                                     _session_package.__file__))


class _Backward:
    """What one backward was called on, and where."""

    __slots__ = ("loss", "where", "forwards", "zeros", "root")

    def __init__(self, loss: str, where: tuple[str, int], forwards: int, zeros: int,
                 root: int) -> None:
        self.loss, self.where, self.forwards, self.zeros, self.root = \
            loss, where, forwards, zeros, root


def user_line() -> tuple[str, int] | None:
    """``(file, line)`` of the innermost frame outside torch and TensorScope."""
    f: FrameType | None = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if not name.startswith(_SKIP):
            return name, f.f_lineno
        f = f.f_back
    return None


class UnscaledAccumulationObserver(ZeroGradListener):
    """Several backwards of an undivided mean loss before each optimizer step."""

    roots_only = frozenset({"on_forward_pre"})

    def __init__(self) -> None:
        self._forwards = 0    # training forwards of a root so far
        self._zeros = 0       # zero_grad() calls so far
        self._root = 0        # the root of the latest training forward
        self._stepping = 0    # optimizer steps running now (a closure's backwards inside)
        self._interval: list[_Backward] = []
        self._hits: list[int] = []   # the steps of the consecutive matching intervals
        self._k = 0
        self._reported = False
        self._meta = False   # a forward of this interval ran on stand-in parameters
        self._rescale = GradRescaleWatch()   # the gradients divided instead of the loss
        self._rescaled = False

    def _zero_grad_called(self, obj: Any, set_to_none: bool) -> None:
        self._zeros += 1

    def watches(self, module_type: type, hook: str) -> bool:
        """Root calls only."""
        return False

    def on_forward_pre(self, call: CallRecord) -> None:
        """Count the training forwards of the roots (not of a loss module called alone)."""
        if call.parent is None and call.grad_enabled and not is_loss_module(call.module):
            self._forwards += 1
            self._root = call.root
            if not self._meta:
                first = next(call.module.parameters(), None)
                # ``functional_call`` on fast weights: a meta-learning outer loop, whose
                # objective is the sum of the tasks' losses (MAML), not micro-batches
                self._meta = first is not None and is_stand_in(first)

    def on_backward(self, tensor: Any) -> None:
        """Note what this backward runs on and where it was called."""
        if self._reported or self._stepping:
            return
        loss = self._mean_loss(tensor)
        where = user_line() if loss is not None else None
        if loss is None or where is None:
            self._interval.append(_Backward("", ("", 0), self._forwards, self._zeros, self._root))
            return
        self._interval.append(_Backward(loss, where, self._forwards, self._zeros, self._root))
        model = root_module(self.ctx, self._root)
        if model is not None:
            self._rescale.watch(model)

    def on_optimizer_step_pre(self, optimizer: Any) -> None:
        """A closure's backwards run from here to the step's end; whether the script
        divided the accumulated gradients itself."""
        self._stepping += 1
        if len(self._interval) >= 2 and not self._reported:
            self._rescaled = self._rescale.rescaled(optimizer)

    def on_detach(self) -> None:
        """Stop listening; remove the gradient hook."""
        super().on_detach()
        self._rescale.close()

    def on_optimizer_step(self, optimizer: Any) -> None:
        """Judge the backwards since the previous optimizer step."""
        self._stepping = max(0, self._stepping - 1)
        interval, self._interval = self._interval, []
        meta, self._meta = self._meta, False
        rescaled, self._rescaled = self._rescaled, False
        if self._reported or not interval:
            return   # a second optimizer stepping on the same backwards: no verdict
        k = len(interval) if _accumulated(interval) and not (meta or rescaled) else 0
        if k < 2 or (self._hits and k != self._k):
            self._hits = []
        if k >= 2:
            self._k = k
            self._hits.append(self.ctx.step_index)
            if len(self._hits) >= HITS:
                self._reported = True
                self._report(interval, k)

    # ------------------------------------------------------------ the loss
    def _mean_loss(self, t: Any) -> str | None:
        """A label of the mean-reduced loss ``t`` is the output of, else None."""
        if not isinstance(t, torch.Tensor) or t.numel() != 1 or t.grad_fn is None:
            return None
        fn = t.grad_fn
        if fn_name(fn) == "MulBackward0" and grad_scaler_in_use():
            nxt = [f for f, _ in fn.next_functions]
            if len(nxt) == 2 and nxt[1] is None and nxt[0] is not None:
                fn = nxt[0]   # GradScaler.scale(loss): the loss times the scale
        found = self._bare_mean(fn)
        if found is None and fn_name(fn) in _SUMS:
            found = self._in_sum(fn)
        return found or None

    def _bare_mean(self, fn: Any) -> str | None:
        """A label of the mean-reduced loss whose node ``fn`` is (a loss module's
        output, or a functional loss saved with ``reduction='mean'``), else None;
        "" for a loss of another reduction."""
        call = self._loss_call(fn)
        if call is not None:
            return call.type if getattr(call.module, "reduction", None) == "mean" else ""
        reduction = getattr(fn, "_saved_reduction", None)   # a functional loss
        if isinstance(reduction, int) and reduction == MEAN:
            return fn_name(fn).replace("Backward0", "")
        return None

    def _in_sum(self, fn: Any) -> str | None:
        """A sum of loss terms (``ce + 0.5 * mse``, a VAE's ``recon + kl``) with at least
        one undivided mean-reduced loss among its terms: the label of the first such
        term. Terms are reached through additions and subtractions only (a term
        multiplied or divided is weighted, not found); at most ``SUM_NODES`` nodes."""
        todo, seen = [fn], 0
        while todo and seen < SUM_NODES:
            node = todo.pop(0)
            seen += 1
            for nxt, _ in getattr(node, "next_functions", ()):
                if nxt is None:
                    continue
                if fn_name(nxt) in _SUMS:
                    todo.append(nxt)
                    continue
                label = self._bare_mean(nxt)
                if label:
                    return f"{label} in a sum of losses"
        return None

    def _loss_call(self, fn: Any) -> CallRecord | None:
        """The loss-module call of this step whose output's node is ``fn``."""
        calls = self.ctx.step_calls()
        for call in reversed(calls[-LOSS_CALLS:]):
            if call.output_grad_fn() is fn:
                return call if is_loss_module(call.module) else None
        return None

    # ------------------------------------------------------------ the report
    def _report(self, interval: list[_Backward], k: int) -> None:
        b = interval[-1]
        path, line = b.where
        rid = b.root
        self.emit("unscaled_accumulation", "warning", "loss", rid, "",
                  f"Gradient accumulation without dividing the loss: at steps "
                  f"{', '.join(map(str, self._hits))} each optimizer step follows {k} "
                  f"backward() calls on {k} micro-batches of {module_label(self.ctx, rid, '')}, "
                  f"called at {os.path.basename(path)}:{line} on the mean-reduced loss itself "
                  f"({b.loss}), not on loss / {k}. The gradients add up to {k}x the gradient of "
                  f"the mean over the effective batch: with SGD the learning rate is in effect "
                  f"{k}x larger, and gradient clipping and weight decay see {k}x gradients "
                  f"(Adam's normalisation hides most of the scale). Fix: (loss / {k}).backward() "
                  f"with {k} the number of micro-batches per step, or let the framework do it "
                  f"(Lightning's accumulate_grad_batches, accelerator.accumulate).")


def _accumulated(interval: list[_Backward]) -> bool:
    """Whether the backwards are one undivided mean loss over fresh micro-batches: the
    same source line and loss, a new forward before each, no zero_grad() between."""
    first = interval[0]
    if not first.loss:
        return False
    for prev, b in zip(interval, interval[1:]):
        if (b.loss != first.loss or b.where != first.where or b.root != first.root
                or b.forwards <= prev.forwards or b.zeros != prev.zeros):
            return False
    return True
