"""``tiny_updates`` and ``huge_updates``: updates far too small or far too large.

Reads the update-to-weight ratios ``||p_after - p_before|| / ||p_after||`` that
the parameter tracker already measures on statistics steps (every
``stats_every`` steps, in every mode but ``shapes``): no device work of its
own. A check is a step whose summary carries ratios. Only trainable
parameters with a non-zero, finite gradient and a non-zero norm count (a
check where fewer than a tenth of the elements count judges nothing: with
every weight initialised to zero only a bias moves, and that is
``symmetric_init``); "most" is weighted by element count, so biases and norms initialised at zero
(whose ratio is large on purpose) do not decide. Parameters of a group whose
learning rate is exactly 0 do not count while another group trains (a part
frozen on purpose).

* ``tiny_updates``: on ``TINY_CHECKS`` (3) consecutive checks, most counted
  parameters moved by less than ``TINY_RATIO`` (1e-7) of their norm, while
  their gradients were non-zero (healthy training is usually between 1e-4
  and 1e-2). A check where a group's learning rate grew since the last one
  (a warmup) restarts the count. The message names the models whose weights
  moved (the roots holding most of the elements judged; a parameter no called
  module holds, by its optimizer) and the optimizer groups with their learning
  rates, and a scheduler that decayed a group's rate to ``DECAYED`` (1e-6) of
  its ``initial_lr`` or less (an epoch scheduler stepped every batch). Causes:
  a learning rate far too low (1e-9 typed for 1e-3), ``lr=0`` in every group, a
  scheduler decayed to zero, a GradScaler skipping every step.
* ``huge_updates``: on ``HUGE_CHECKS`` (2) consecutive checks most counted
  parameters moved by more than ``HUGE_RATIO`` (0.1) of their norm, or on
  one check by more than ``HUGE_ONCE`` (1.0, the weights rewritten
  entirely) or by more than ``HUGE_REWRITE`` (0.9: moved by about twice their norm)
  without being zero before the step (a ratio of 1 to rounding, ``ZERO_START``: LoRA's
  zero-initialised ``B``, a zero-init head, which any first step rewrites). A one-check
  rewrite is reported at the next check, unless the loss has fallen to
  ``LOSS_PROGRESS`` (half) of its value by then, or when the run ends first. A run
  of consecutive large checks over which the loss halved starts again from its
  last check. Large updates that halve the loss are training, not wrecking the
  weights: plain SGD on a small regression whose weights start far from the
  solution moves them by about their norm for its first steps while the loss
  drops a hundredfold. Two checks, because Adam's first step moves every weight
  by about the learning rate whatever the gradient: the weights are rewritten
  every step, usually before the loss diverges. Causes: a learning rate far too
  high, a missing ``zero_grad``
  combined with a large rate, a warmup that is missing.

  Two optimizers take large steps at first by design, and the consecutive
  checks judge them by the step they settle at (the one-check rules see the
  raw ratio): RMSprop's running average of squared gradients starts at zero
  with no bias correction, so its t-th step is about ``1 / sqrt(1 - alpha**t)``
  times its steady step (10x at the first, 3x at the tenth, at PyTorch's
  default ``lr=0.01``): the ratio is scaled by ``sqrt(1 - alpha**t)``.
  Adagrad's step shrinks like ``1 / sqrt(t)`` as its sum of squared gradients
  grows, so no large step lasts: its parameters count for the one-check rules
  only.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Any

import torch

from tensorscope.hooks.diagnostics.base import Diagnostic, module_label
from tensorscope.hooks.diagnostics.schedulers import decay_cause
from tensorscope.hooks.observer import StepRecord

_HALF_TYPES = (torch.float16, torch.bfloat16)

TINY_RATIO = 1e-7
# float16/bfloat16 weights keep about three significant digits: an update of a
# thousandth of a weight is about one step of their precision, and healthy
# half-precision updates move the norm by 1e-4 or more (an update below 1e-5 rounds
# away for most elements)
TINY_HALF = 1e-5
TINY_CHECKS = 3
HUGE_RATIO = 0.1
HUGE_CHECKS = 2
HUGE_ONCE = 1.0
# ||p_after - p_before|| / ||p_after|| above this: the step moved the weights by about
# twice their norm or more (Adam at lr=1 on weights of 0.1); at ZERO_START and above
# (exactly 1 to rounding) the weights were zero before the step (LoRA's B, a zero-init
# head), which any first step rewrites entirely
HUGE_REWRITE = 0.9
ZERO_START = 1 - 1e-3
MOST = 0.5   # fraction of the counted elements
COUNTED = 0.1   # a check needs this fraction of the optimized elements to be counted
DECAYED = 1e-6   # a scheduled rate at this fraction of its start or less: decayed away
LOSS_PROGRESS = 0.5   # large updates that bring the loss to half or less are productive


def _count(step: Any) -> int:
    """An optimizer state's step count as a number; 0 when unknown or on a
    device (reading it there would be a host sync)."""
    if isinstance(step, (int, float)):
        return int(step)
    try:
        if step.device.type == "cpu" and step.numel() == 1:
            return int(step.item())
    except Exception:
        pass
    return 0


def _numel(shape: Any) -> int:
    n = 1
    for s in shape or ():
        n *= int(s)
    return n


class UpdateRatioObserver(Diagnostic):
    """Update-to-weight ratios that stay far too small or far too large."""

    def __init__(self, scales: Any = None) -> None:
        # a GradScaleObserver: tiny updates of a root whose gradients vanish are that
        # finding's (its cause named), not a learning rate's
        self._scales = scales
        self._halves: dict[tuple[Any, Any], bool] = {}   # (root, name) -> float16/bfloat16
        self._tiny: list[int] = []     # steps of the current run of tiny checks
        self._huge: list[int] = []
        self._lrs: dict[tuple[int, int], float] = {}
        # a check that rewrote the weights once, waiting for the next check to confirm it:
        # (step, median ratio, loss, elements that moved too much by root)
        self._once: tuple[int, float, float | None, Counter[int | str]] | None = None
        self._huge_loss: float | None = None   # the loss at the first check of self._huge

    def on_step_end(self, record: StepRecord) -> None:
        """Judge the ratios of a statistics step."""
        rows = [r for r in record.summary.params if r.get("update_ratio") is not None]
        if not rows:
            return
        groups = self._groups()
        warming = self._warming(groups)
        zero_lr = {pid for (_, _, lr, ids) in groups if lr == 0 for pid in ids}
        training = any(lr for (_, _, lr, _) in groups)
        settle = self._settling(groups)
        pids = self._param_ids() if (zero_lr and training) or settle else {}
        total = huge = once = 0
        ratios: list[tuple[float, int]] = []
        # root -> elements of its parameters that moved too little / too much
        tiny_at: Counter[int | str] = Counter()
        huge_at: Counter[int | str] = Counter()
        every = sum(_numel(r.get("shape")) for r in record.summary.params
                    if r.get("requires_grad") and r.get("in_optimizer"))
        for r in rows:
            g, p, ratio = r.get("grad_norm"), r.get("norm"), r["update_ratio"]
            # an infinite gradient counts as non-zero (a GradScaler skipping the step)
            if not (isinstance(g, (int, float)) and not math.isnan(g) and g > 0 and p
                    and math.isfinite(p) and math.isfinite(ratio)):
                continue
            pid = pids.get(r.get("name")) if pids else None
            if pid in zero_lr:
                continue   # a group frozen with lr=0 while others train
            n = _numel(r.get("shape"))
            total += n
            ratios.append((ratio, n))
            # a parameter no called module holds is named by the optimizer holding it
            root = r.get("root")
            if root is None:
                root = str(r.get("name", "")).partition(".")[0] or "an optimizer"
            if ratio < TINY_RATIO or (ratio < TINY_HALF and self._half_weight(r)):
                tiny_at[root] += n
            scale = settle.get(pid, 1.0) if settle and pid is not None else 1.0
            big = ratio * scale > HUGE_RATIO
            rewritten = ratio > HUGE_ONCE or HUGE_REWRITE < ratio < ZERO_START
            huge += n if big else 0
            once += n if rewritten else 0
            if big or rewritten:
                huge_at[root] += n
        if not total or total < COUNTED * every:
            return   # too few parameters to judge (all-zero weights: only a bias moves)
        tiny = sum(tiny_at.values())
        self._tiny = self._tiny + [record.step] if tiny > MOST * total and not warming else []
        loss = _loss(record)
        if huge > MOST * total:
            if not self._huge:
                self._huge_loss = loss
            self._huge.append(record.step)
        else:
            self._huge = []
        median = _weighted_median(ratios)
        if len(self._tiny) >= TINY_CHECKS:
            self._report_tiny(record, median, groups, tiny_at)
            self._tiny = []
        pending, self._once = self._once, None
        if pending is not None and _progress(pending[2], loss):
            pending = None   # the large steps brought the loss down: they were productive
        if len(self._huge) >= HUGE_CHECKS and _progress(self._huge_loss, loss):
            self._huge, self._huge_loss = [record.step], loss
        if len(self._huge) >= HUGE_CHECKS or pending is not None:
            steps = sorted({*self._huge, *([pending[0]] if pending else []), record.step})
            self._report_huge(record.step, steps, median, groups,
                              huge_at + pending[3] if pending else huge_at)
            self._huge = []
        elif once > MOST * total:
            # one step that rewrote the weights: a rate far too high, unless the loss has
            # halved by the next check (a first step from weights far from the solution)
            self._once = (record.step, median, loss, huge_at)

    def on_detach(self) -> None:
        """A rewrite the run ended before a second check could confirm."""
        if self._once is not None:
            step, median, _, at = self._once
            self._once = None
            self._report_huge(step, [step], median, self._groups(), at)

    # -------------------------------------------------------------- groups
    def _groups(self) -> list[tuple[int, int, float, set[int]]]:
        """``(optimizer, group, lr, parameter ids)`` of every optimizer group."""
        out = []
        for k, opt in enumerate(getattr(self.ctx, "optimizers", []) or []):
            for g, group in enumerate(getattr(opt, "param_groups", [])):
                lr = group.get("lr")
                try:
                    lr = float(lr)
                except (TypeError, ValueError):
                    lr = math.nan
                out.append((k, g, lr, {id(p) for p in group.get("params", [])}))
        return out

    def _warming(self, groups: list[tuple[int, int, float, set[int]]]) -> bool:
        """Whether a group's learning rate grew since the last check (a warmup)."""
        grew = False
        for k, g, lr, _ in groups:
            before = self._lrs.get((k, g))
            if before is not None and lr > before:
                grew = True
            self._lrs[(k, g)] = lr
        return grew

    def _settling(self, groups: list[tuple[int, int, float, set[int]]]) -> dict[int, float]:
        """Parameter id -> the factor that brings its last update to the step its
        optimizer settles at, for RMSprop (``sqrt(1 - alpha**t)``) and Adagrad (0:
        its steps only shrink); empty when no such optimizer is in use."""
        out: dict[int, float] = {}
        for opt in getattr(self.ctx, "optimizers", []) or []:
            kind = type(opt).__name__
            if kind not in ("RMSprop", "Adagrad"):
                continue
            state = getattr(opt, "state", {})
            for group in getattr(opt, "param_groups", []):
                params = group.get("params", [])
                if kind == "Adagrad":
                    out.update((id(p), 0.0) for p in params)
                    continue
                # the group's parameters step together: one step count for all of them
                alpha = group.get("alpha", 0.99)
                t = _count(next((state[p].get("step") for p in params if p in state), None))
                if t and isinstance(alpha, float) and 0.0 < alpha < 1.0:
                    out.update((id(p), math.sqrt(1.0 - alpha ** t)) for p in params)
        return out

    def _param_ids(self) -> dict[str, int]:
        """Parameter name (as in the summary rows) -> id (the rare path only)."""
        out = {}
        for root in self.ctx.roots:
            for name, p in root.named_parameters():
                out.setdefault(name, id(p))
        return out

    def _describe_groups(self, groups: list[tuple[int, int, float, set[int]]]) -> str:
        if not groups:
            return "no optimizer known (a manual update)"
        parts = [f"optimizer{k} group{g} lr={lr:g}" + (" (lr=0)" if lr == 0 else "")
                 for k, g, lr, _ in groups[:6]]
        return ", ".join(parts) + (" ..." if len(groups) > 6 else "")

    # ------------------------------------------------------------- reports
    def _models(self, at: Counter[int | str]) -> tuple[int, str]:
        """The root holding most of the parameters judged, and the models named: a
        script's roots are whatever it calls (a loss, a ReLU called on its own), so
        the name is that of the roots whose weights moved, not of the first root."""
        ranked = [key for key, n in at.most_common() if n]
        names = [module_label(self.ctx, key, "") if isinstance(key, int)
                 else f"the parameters {key} holds" for key in ranked[:3]]
        more = " ..." if len(ranked) > 3 else ""
        rid = next((key for key in ranked if isinstance(key, int)), 0)
        return rid, (" and ".join(names) if len(names) <= 2 else ", ".join(names)) + more

    def _half_weight(self, row: dict[str, Any]) -> bool:
        """Whether the row's parameter is stored in float16/bfloat16 (looked up once per
        parameter name, by the roots' ``named_parameters``)."""
        key = (row.get("root"), row.get("name"))
        hit = self._halves.get(key)
        if hit is None:
            rid = key[0]
            roots = self.ctx.roots
            if isinstance(rid, int) and 0 <= rid < len(roots):
                for name, p in roots[rid].named_parameters():
                    self._halves[(rid, name)] = p.dtype in _HALF_TYPES
            hit = self._halves.setdefault(key, False)
        return hit

    def _report_tiny(self, record: StepRecord, median: float,
                     groups: list[tuple[int, int, float, set[int]]], at: Counter[int | str]) -> None:
        steps = self._tiny
        rid, models = self._models(at)
        if self._scales is not None and rid in self._scales.vanishing:
            return   # vanishing_gradient names the cause
        half = self._half_cause(at)
        self.emit("tiny_updates", "warning", "optimizer", rid, "",
                  f"The optimizer barely changes the weights of {models}: "
                  f"at steps {', '.join(map(str, steps))} most trainable parameters moved by "
                  f"less than {TINY_HALF if half else TINY_RATIO:g} of their norm (median "
                  f"update/weight ratio "
                  f"{median:.1e}; healthy training is usually 1e-4 to 1e-2), while their "
                  f"gradients were non-zero. Groups: {self._describe_groups(groups)}. The model "
                  f"is not learning. " + (self._decayed() or half or
                  "Usual causes: a learning rate far too low (1e-9 typed "
                  "for 1e-3), lr=0 in a group, a scheduler decayed to zero, a GradScaler "
                  "skipping every step. Fix: check the learning rate the optimizer really "
                  "uses (optimizer.param_groups[i]['lr']) and the scheduler."), step=record.step)

    def _half_cause(self, at: Counter[int | str]) -> str:
        """The cause and fix when the weights that barely moved are stored in float16 or
        bfloat16 (``model.half()`` trained as it is); "" otherwise."""
        roots = self.ctx.roots
        if not any(p.dtype in _HALF_TYPES for rid in at if isinstance(rid, int)
                   and 0 <= rid < len(roots) for p in roots[rid].parameters() if p.requires_grad):
            return ""
        return ("The weights are stored in float16/bfloat16 (model.half() or .bfloat16() "
                "trained as it is): an update smaller than about a thousandth of a weight "
                "rounds away, so most updates are lost. Fix: keep the weights in float32 "
                "and run the forward under torch.autocast (with a GradScaler for float16), "
                "which keeps float32 master weights.")

    def _decayed(self) -> str:
        """The cause and fix when a scheduler brought a group's learning rate down to
        ``DECAYED`` of the rate it started from (``initial_lr``, which every scheduler
        sets on its groups) or less; "" when none did."""
        for k, opt in enumerate(getattr(self.ctx, "optimizers", []) or []):
            for g, group in enumerate(getattr(opt, "param_groups", [])):
                start, lr = group.get("initial_lr"), group.get("lr")
                if not (isinstance(start, (int, float)) and isinstance(lr, (int, float))
                        and start > 0 and lr <= DECAYED * start):
                    continue
                return decay_cause(k, g, start, lr)
        return ""

    def _report_huge(self, step: int, steps: list[int], median: float,
                     groups: list[tuple[int, int, float, set[int]]], at: Counter[int | str]) -> None:
        rid, models = self._models(at)
        self.emit("huge_updates", "warning", "optimizer", rid, "",
                  f"Each optimizer step rewrites the weights of {models}: at steps "
                  f"{', '.join(map(str, steps))} most "
                  f"trainable parameters moved by more than {HUGE_RATIO:g} of their norm "
                  f"(median update/weight ratio {median:.2g}; healthy training is usually 1e-4 "
                  f"to 1e-2). Groups: {self._describe_groups(groups)}. The loss will "
                  f"oscillate or diverge. Fix: lower the learning rate (by 10-100x), add a "
                  f"warmup, or clip gradients (torch.nn.utils.clip_grad_norm_).",
                  step=step)


def _loss(record: StepRecord) -> float | None:
    """The step's loss as a finite number, or None."""
    loss = getattr(record.summary, "loss", None)
    return float(loss) if isinstance(loss, (int, float)) and math.isfinite(loss) else None


def _progress(before: float | None, now: float | None) -> bool:
    """Whether the loss fell to ``LOSS_PROGRESS`` of what it was or less: large updates that
    train (a regression's first steps from weights far from the solution)."""
    return before is not None and now is not None and before > 0 and now <= LOSS_PROGRESS * before


def _weighted_median(ratios: list[tuple[float, int]]) -> float:
    ratios = sorted(ratios)
    half = sum(n for _, n in ratios) / 2
    acc = 0
    for r, n in ratios:
        acc += n
        if acc >= half:
            return r
    return ratios[-1][0] if ratios else math.nan
