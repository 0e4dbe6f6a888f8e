"""``ddp_bypassed``: a training forward through ``ddp.module``, around DistributedDataParallel.

DDP averages the gradients over the ranks from hooks it sets up in its own
``forward`` (``prepare_for_backward``). A forward through the inner module,
``model.module(x)``, skips them: the backward leaves each rank's own gradient in
place, every rank applies a different update, and the replicas drift apart with no
error. ``model.module`` is meant for evaluation under ``no_grad`` and for
``state_dict()``.

While attached, every ``DistributedDataParallel`` built is noted
(``hooks.registry.track_ddp``). A root call of a noted wrapper's inner module
(the wrapper's own forward would have made it a call inside the wrapper) in
training mode with gradients on, in a step that then reaches an optimizer step,
is the finding, once per module. Never a finding: an evaluation through
``model.module`` under ``no_grad`` or in eval mode, a wrapper whose process group
has one rank. The parameters of a noted wrapper are marked ``replicated`` too, so
``rank_divergence`` compares them.
"""
from __future__ import annotations

from typing import Any

from tensorscope.hooks.diagnostics.base import Diagnostic, module_label
from tensorscope.hooks.observer import CallRecord, StepRecord
from tensorscope.hooks.registry import any_ddp_built, built_ddp_wrappers, track_ddp, \
    untrack_ddp


def _world(wrapper: Any) -> int:
    group = getattr(wrapper, "process_group", None)
    try:
        return int(group.size()) if group is not None else 1
    except Exception:
        return 1


class DdpBypassObserver(Diagnostic):
    """Finds training forwards that go around a DDP wrapper."""

    roots_only = frozenset({"on_forward_pre"})

    def __init__(self) -> None:
        self._pending: dict[int, tuple[int, str]] = {}   # root -> (step, wrapper class)
        self._done: set[int] = set()

    def on_attach(self, ctx: Any) -> None:
        """Start noting DDP wrappers (until detach)."""
        super().on_attach(ctx)
        track_ddp()

    def on_detach(self) -> None:
        """Stop noting them."""
        untrack_ddp()

    def on_forward_pre(self, call: CallRecord) -> None:
        """A root call: the inner module of a noted wrapper, training with gradients?"""
        if call.parent is not None or not call.grad_enabled or call.root in self._done \
                or not any_ddp_built():
            return
        module = call.module
        if module is None or not getattr(module, "training", False):
            return
        for wrapper in built_ddp_wrappers():
            if getattr(wrapper, "module", None) is module and _world(wrapper) > 1:
                self._pending.setdefault(call.root, (call.step, type(wrapper).__name__))
                return

    def on_optimizer_step_pre(self, optimizer: Any) -> None:
        """The step trains: each bypassing root of it is a finding."""
        pending, self._pending = self._pending, {}
        for rid, (step, cls) in pending.items():
            self._done.add(rid)
            name = module_label(self.ctx, rid, "")
            self.emit("ddp_bypassed", "error", "forward", rid, "",
                      f"{name} was called directly (model.module(x)) in a training step, "
                      f"not through its {cls} wrapper: DDP averages the gradients over the "
                      f"ranks from hooks its own forward sets up, so this backward kept each "
                      f"rank's own gradient, every rank applied a different update and the "
                      f"replicas drift apart with no error. Fix: call the wrapper itself "
                      f"(model(x)); use model.module only for evaluation under "
                      f"torch.no_grad() and for state_dict().", step=step)

    def on_step_end(self, record: StepRecord) -> None:
        """A step without an optimizer step (an evaluation with gradients on) forgets."""
        self._pending = {}
