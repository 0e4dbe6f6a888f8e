"""``target_out_of_range`` for the losses whose target is a sign: 0/1 labels given
to a loss that takes +1/-1.

``MarginRankingLoss``, ``CosineEmbeddingLoss``, ``HingeEmbeddingLoss`` and
``SoftMarginLoss`` read their target ``y`` as +1 ("first ranks higher",
"similar") or -1. Labels coded 0/1, as every classification loss takes them,
make the pairs labelled 0 fall out of training: a margin ranking loss gives them
the constant ``margin``, a cosine embedding loss nothing, a soft margin loss the
constant ``log 2``, all without a gradient (a hinge embedding loss gives them both
of its terms at once, which pull against each other), so only the pairs labelled 1
train and the model never learns the other side.

Detection: a loss module of these types called in a training forward (grad
enabled, its input requiring grad) has its floating target's minimum and maximum
and its count of zeros deferred into the step's one host transfer, on the first
``LOOKS`` such calls per module type. The finding: a target whose values all lie in
[0, 1] with at least one 0 and one 1, on ``HITS`` (2) looks. Targets of +1/-1 (or
of -1 only, or +1 only) are never it. Metadata and three reductions per look; the
module's pre-hook only.
"""
from __future__ import annotations

import torch
from torch import nn

from tensorscope.hooks.diagnostics.base import Diagnostic, iter_tensors, module_label
from tensorscope.hooks.observer import CallRecord, StepRecord

LOOKS = 4   # calls looked at per loss type
HITS = 2    # looks with 0/1 targets before the finding

# loss type -> (index of the target among the call's tensors, what a 0 target does)
_SIGNED: dict[type, tuple[int, str]] = {
    nn.MarginRankingLoss: (2, "a constant loss (the margin) without gradient"),
    nn.CosineEmbeddingLoss: (2, "no loss and no gradient"),
    nn.HingeEmbeddingLoss: (1, "both of its terms at once, which pull against each other"),
    nn.SoftMarginLoss: (1, "a constant loss (log 2) without gradient"),
}


class SignedTargetObserver(Diagnostic):
    """0/1 labels given to a loss whose target is +1/-1."""

    def __init__(self) -> None:
        self._looks: dict[type, int] = {}
        self._hits: dict[type, list[int]] = {}   # loss type -> steps of 0/1 looks
        self._done: set[type] = set()
        # (loss type, root, path, step, defer handle)
        self._queued: list[tuple[type, int, str, int, int]] = []

    def watches(self, module_type: type, hook: str) -> bool:
        """The pre-hooks of the four losses only."""
        return hook == "on_forward_pre" and issubclass(module_type, tuple(_SIGNED))

    def on_forward_pre(self, call: CallRecord) -> None:
        """Defer the target's range of one of the first calls of each loss type."""
        kind = next((t for t in _SIGNED if isinstance(call.module, t)), None)
        if kind is None or kind in self._done or not call.grad_enabled:
            return
        tensors = [v for _, v in iter_tensors(call.inputs)]
        index = _SIGNED[kind][0]
        if len(tensors) <= index or not any(t.requires_grad for t in tensors[:index]):
            return
        target = tensors[index]
        if not target.is_floating_point() and target.dtype not in (torch.long, torch.int):
            return
        if target.numel() == 0 or target.is_meta:
            return
        n = self._looks[kind] = self._looks.get(kind, 0) + 1
        if n > LOOKS:
            self._done.add(kind)
            return
        with torch.no_grad():
            y = target.detach()
            values = {"lo": y.amin().float(), "hi": y.amax().float(),
                      "zeros": torch.count_nonzero(y == 0)}
        self._queued.append((kind, call.root, call.path, call.step, self.ctx.defer(values)))

    def on_step_end(self, record: StepRecord) -> None:
        """Judge the ranges deferred this step."""
        queued, self._queued = self._queued, []
        for kind, root, path, step, handle in queued:
            v = record.deferred.get(handle)
            if not v or kind in self._done:
                continue
            lo, hi, zeros = float(v["lo"]), float(v["hi"]), int(v["zeros"])
            if not (lo == 0.0 and hi == 1.0 and zeros > 0):
                continue
            hits = self._hits.setdefault(kind, [])
            hits.append(step)
            if len(hits) >= HITS:
                self._done.add(kind)
                self._report(kind, root, path, hits)

    def _report(self, kind: type, root: int, path: str, steps: list[int]) -> None:
        name, effect = kind.__name__, _SIGNED[kind][1]
        where = module_label(self.ctx, root, path)
        where = name if where == name else f"{where} ({name})"
        self.emit("target_out_of_range", "warning", "loss", root, path,
                  f"The targets of {where} are 0/1 labels (at steps "
                  f"{', '.join(map(str, sorted(set(steps))))}), but {name} takes +1/-1: y = 1 for the "
                  f"positive side of a pair, y = -1 for the negative one. A target of 0 gives "
                  f"{effect}, so the pairs labelled 0 never train and the model learns one side "
                  f"only. Fix: pass y * 2 - 1 (labels in {{0, 1}} to {{-1, +1}}).", step=steps[0])

