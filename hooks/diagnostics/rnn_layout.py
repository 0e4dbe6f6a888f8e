"""``rnn_batch_first``: batch-major input to a sequence-major recurrent layer, and the
mirror: time-major input to a ``batch_first=True`` one.

``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` take ``[T, N, F]`` (time first) unless
built with ``batch_first=True``. Given ``[N, T, F]`` batches (what a
``DataLoader`` and an ``nn.Embedding`` over ``[N, T]`` token ids give), the
layer runs its recurrence across the samples of the batch and treats the T
positions as independent sequences. Nothing raises when the per-sample output
is taken as ``out[:, -1]`` (it is then ``[N, H]``, as the targets expect): the
model mixes samples and learns little.

Each training call of a recurrent layer with ``batch_first=False`` and a 3-d
input ``[A, B, F]`` (A != B, B >= 2) is noted for the step. At ``backward()``,
the loss's per-sample target is read from its node (``NllLossBackward0``, the
element-wise regression and binary losses: metadata only): when its first
dimension is A, one value (or row) per sample of the layer's first dimension,
and not B, the layer got the batch first. ``HITS`` (2) training steps in a row
make the finding. Per-position targets tell nothing; then a first dimension that stays
one size (one last short batch aside) in ``STEADY_STEPS`` training steps while the second
takes ``LENGTHS`` sizes (padded batches) makes it. Sequence-first data (``[T, N, F]``, targets ``[N]``), packed
sequences, a batch of one sequence (``[T, 1, F]``) and per-position targets
(``[T, N]``, or flattened ``[T * N]``) never match. The mirror, a layer built with
``batch_first=True`` given time-major ``[T, N, F]`` data (a seq2seq tutorial's
layout), matches when the per-sample target's first dimension is its input's
second (N) and not its first; per-position targets say nothing there. A layer given an initial state
``[layers, B, H]`` or whose loss has one target per each of the B takes the batch second:
its shapes (a fixed length, batches of varying size) make no finding.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tensorscope.hooks.diagnostics.base import Diagnostic, fn_name, saved_value
from tensorscope.hooks.diagnostics.losses import top_nodes
from tensorscope.hooks.observer import CallRecord, StepRecord

HITS = 2
LENGTHS = 3   # distinct second dimensions under a steady first one: padded lengths
STEADY_STEPS = 4
_SEARCH = 24
_TARGET_NODES = ("NllLossBackward0", "MseLossBackward0", "L1LossBackward0",
                 "SmoothL1LossBackward0", "HuberLossBackward0",
                 "BinaryCrossEntropyWithLogitsBackward0", "BinaryCrossEntropyBackward0")


class RnnLayoutObserver(Diagnostic):
    """Recurrent layers without ``batch_first`` fed batch-major sequences."""

    def __init__(self) -> None:
        # root, path, type, A, B, batch_first
        self._calls: list[tuple[int, str, str, int, int, bool]] = []
        self._matched: tuple[int, str, str, int, int, bool] | None = None
        self._hits: list[int] = []
        self._done = False
        # per layer (root, path, type): {first dimension: calls}, second dimensions, steps
        self._dims: dict[tuple[int, str, str], tuple[dict[int, int], set[int], list[int]]] = {}
        # layers shown to take the batch second: an initial state [layers, B, H], or a
        # loss with one target per each of the B
        self._batch_second: set[tuple[int, str, str]] = set()

    def watches(self, module_type: type, hook: str) -> bool:
        """The forward pre-hook of recurrent layers (and roots)."""
        return hook == "on_forward_pre" and issubclass(module_type, nn.RNNBase)

    def on_forward_pre(self, call: CallRecord) -> None:
        """Note a training call of a recurrent layer with a 3-d input."""
        module = call.module
        if self._done or not isinstance(module, nn.RNNBase) \
                or not call.grad_enabled or len(self._calls) >= 8:
            return
        inputs = call.inputs
        x = inputs[0][1] if inputs else None
        if not isinstance(x, torch.Tensor) or x.dim() != 3:
            return   # a PackedSequence, or an unbatched sequence
        a, b = int(x.shape[0]), int(x.shape[1])
        first = bool(module.batch_first)
        if a != b and (b if not first else a) >= 2:
            self._calls.append((call.root, call.path, call.type, a, b, first))
            if not first and any(isinstance(h, torch.Tensor) and h.dim() == 3 and int(h.shape[1]) == b
                   for _, h in inputs[1:4]):   # h_0 (LSTM: h_0, c_0) of the B sequences
                self._batch_second.add((call.root, call.path, call.type))

    def on_backward(self, tensor: Any) -> None:
        """Compare the loss's per-sample target with the layers' first dimension."""
        if self._done or not self._calls or not isinstance(tensor, torch.Tensor) \
                or tensor.grad_fn is None:
            return
        for node in top_nodes(tensor.grad_fn, _SEARCH):
            if fn_name(node) not in _TARGET_NODES:
                continue
            target = saved_value(node, "target", None)
            if not isinstance(target, torch.Tensor) or not 1 <= target.dim() <= 2:
                continue
            n = int(target.shape[0])
            for c in self._calls:
                a, b = c[3], c[4]
                if c[5]:   # batch_first=True: one target per each of the second dimension
                    if n == b and n != a and (target.dim() == 1 or target.shape[1] != a):
                        self._matched = c
                        return
                    continue
                if n == a and n != b and (target.dim() == 1 or target.shape[1] != b):
                    self._matched = c
                    return
                if n == b and n != a and (target.dim() == 1 or target.shape[1] != a):
                    self._batch_second.add(c[:3])   # one target per each of the B

    def _steady_batch(self, calls: list[tuple[int, str, str, int, int, bool]],
                      step: int) -> bool:
        """Per-position targets (a tagger, a language model) say nothing about the layout;
        the shapes do: batches padded to their longest sequence keep the batch size and
        change the length. A layer whose first dimension stays one size (but for one last
        short batch) while its second takes LENGTHS sizes got the batch first. Sequence-first
        data varies the first (bucketed or random-length BPTT windows); fixed-length
        sequence-first windows in batches of varying size vary the second, and a layer
        shown to take the batch second (``_batch_second``) is never judged by its shapes."""
        for rid, path, kind, a, b, first in calls:
            if first or len(self._dims) >= 16 and (rid, path, kind) not in self._dims \
                    or (rid, path, kind) in self._batch_second:
                continue
            firsts, seconds, steps = self._dims.setdefault((rid, path, kind), ({}, set(), []))
            firsts[a] = firsts.get(a, 0) + 1
            if len(seconds) < 64:
                seconds.add(b)
            if not steps or steps[-1] != step:
                steps.append(step)
            top = max(firsts.values())
            if len(seconds) < LENGTHS or len(steps) < STEADY_STEPS \
                    or sum(firsts.values()) - top > 1:
                continue
            batch = max(firsts, key=firsts.__getitem__)
            self._done = True
            lengths = ", ".join(map(str, sorted(seconds)[:6]))
            self.emit("rnn_batch_first", "warning", "forward", rid, path,
                      f"{path or kind} ({kind}, batch_first=False) takes its input as "
                      f"[time, batch, features], but in {len(steps)} training steps its "
                      f"first dimension stayed {batch} while the second changed from batch "
                      f"to batch ({lengths}): the batch came first, and the positions "
                      f"(padded to each batch's longest sequence) second. The recurrence "
                      f"runs across the samples and treats each position as a separate "
                      f"sequence, so the model mixes samples and learns little. Fix: build "
                      f"it with batch_first=True (or pass x.transpose(0, 1)).", step=step)
            return True
        return False

    def on_step_end(self, record: StepRecord) -> None:
        """Count the training steps whose target matched a layer's first dimension."""
        calls, self._calls = self._calls, []
        matched, self._matched = self._matched, None
        if self._done or record.kind != "train" or not calls:
            return
        if matched is None and self._steady_batch(calls, record.step):
            return
        if matched is None:
            self._hits = []
            return
        self._hits.append(record.step)
        if len(self._hits) < HITS:
            return
        self._done = True
        rid, path, kind, a, b, first = matched
        if first:
            self._report_time_first(rid, path, kind, a, b, record.step)
            return
        self.emit("rnn_batch_first", "warning", "forward", rid, path,
                  f"{path or kind} ({kind}, batch_first=False) takes its input as "
                  f"[time, batch, features], but at steps "
                  f"{', '.join(map(str, self._hits))} it got [{a}, {b}, ...] where the "
                  f"{a} of the first dimension are the samples of the batch (the loss has "
                  f"one target per each of them) and the {b} of the second are the "
                  f"positions: the recurrence runs across the samples and treats each "
                  f"position as a separate sequence, so the model mixes samples and "
                  f"learns little. Fix: build it with batch_first=True (or pass "
                  f"x.transpose(0, 1) and take the outputs' time steps from dimension "
                  f"0).", step=record.step)

    def _report_time_first(self, rid: int, path: str, kind: str, a: int, b: int,
                           step: int) -> None:
        self.emit("rnn_batch_first", "warning", "forward", rid, path,
                  f"{path or kind} ({kind}, batch_first=True) takes its input as "
                  f"[batch, time, features], but at steps "
                  f"{', '.join(map(str, self._hits))} it got [{a}, {b}, ...] where the "
                  f"{b} of the second dimension are the samples of the batch (the loss has "
                  f"one target per each of them) and the {a} of the first are the time "
                  f"steps: the recurrence runs across the samples and treats each position "
                  f"as a separate sequence, so the model mixes samples and learns little. "
                  f"Fix: build it with batch_first=False for time-major data (and take the "
                  f"last step as out[-1]), or pass x.transpose(0, 1).", step=step)
