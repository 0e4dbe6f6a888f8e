"""``single_class_batches``, ``softmax_dim``, ``target_out_of_range`` (and
``double_activation`` for what an NLL loss is given): what a classification loss is given.

All read the negative log-likelihood node at the top of the graph that
``backward()`` is called on (``Observer.on_backward``; ``CrossEntropyLoss``,
``F.cross_entropy``, ``NLLLoss`` and ``F.nll_loss`` all end in
``NllLossBackward0``, which saves its log-probabilities and its target), on
the first ``CHECKED_STEPS`` training steps only. Modules, functional losses,
label smoothing and a ``GradScaler``'s scaled loss are all seen the same way.

* ``single_class_batches``: every class-index target ``[N]`` (N >= 8) of
  ``RUN`` consecutive checked steps holds one class only. Its minimum and
  maximum (ignoring ``ignore_index``) are deferred into the step's one host
  transfer. Batches of different single classes mean a dataset sorted by
  class that the loader does not shuffle; one class throughout (with three
  classes or more, at least ``CONSTANT_TARGETS`` targets, and scores straight
  from a layer) means labels built wrongly (all zeros); contrastive logits put
  together by hand (InfoNCE: positive first, target always 0) are not it, nor are
  the scores of a pointwise scorer (one output per candidate, viewed as ``[B, G]``:
  a listwise reranker whose positive is always first). An
  imbalanced binary task, whose small batches are often all negative, is
  neither.
* ``softmax_dim``: the log-probabilities given to the NLL loss come from a
  ``log_softmax`` over another dimension than the classes (dimension 1 of an
  ``[N, C, ...]`` input): ``F.log_softmax(x, dim=0)`` normalises over the
  batch (an implicit ``dim`` picks 0 for 3-d inputs). Metadata only (the
  node's saved ``dim``). The module named, at step end, is the one whose
  output the log-softmax made (the step's recorded outputs), else the model.
* ``softmax_dim`` also names a softmax or log-softmax over dimension 0 anywhere
  in the first ``BATCH_CHECKS`` training steps' loss graphs (``BATCH_SEARCH``
  nodes, breadth first): a hand-written cross-entropy on ``F.softmax(logits,
  dim=0)``, attention weights normalised over the batch. Only when dimension 0
  is the batch: its size is the first dimension of a 2-d or larger input that a
  root call took from outside the models this step, the tensor is no column
  (``[N, 1]``: attention pooling over a bag of instances) and not square (a
  similarity matrix normalised both ways, CLIP); a root with a sequence-first
  RNN or attention layer (``batch_first=False``, where dimension 0 is time) is
  left alone. The module named is the one whose forward applied the softmax
  (the caller of the first module output under it).
* ``softmax_dim`` also names a cross-entropy over dimension 1 of ``[N, T, C]``
  logits that a linear map made with its features (the classes) last: the
  log-softmax over dimension 1 under an NLL node (or multiplied by a constant
  probability target), its input reshaped only (no transpose) from a linear
  layer's output (silent in PyTorch when T == C or with probability targets); and
  probability targets of such a log-softmax that sum to 1 over their last
  dimension, not dimension 1 (``F.one_hot(y, C)`` against ``[N, C, T]``
  convolution logits; two sums deferred into the step's transfer).
* ``softmax_dim`` also names an NLL loss over one class (``[N, 1]`` scores into a
  cross-entropy, a binary classifier's single output): the log-softmax over a
  dimension of size 1 is 0, so the loss is 0 and no gradient flows. Metadata
  only. (With targets of 1, PyTorch raises instead: an ``exception``.)
* ``target_out_of_range``: the target of a ``BinaryCrossEntropyWithLogitsBackward0``
  node (``BCEWithLogitsLoss``, ``F.binary_cross_entropy_with_logits``) leaves [0, 1]
  (its minimum and maximum deferred into the step's transfer): masks of 0/255,
  labels of -1/+1. ``BCELoss`` raises on such targets itself.
* ``target_out_of_range`` also names multi-hot targets given to a
  cross-entropy: probability targets (a product of the loss's log-softmax with
  a constant of the logits' shape) that hold only 0 and 1 and mark two labels
  or more in some sample, on ``HOT_STEPS`` checked steps (the values and the
  largest and smallest sums per sample deferred into the step's transfer). A
  cross-entropy takes one distribution per sample; several labels at once are
  a multi-label task, which needs ``BCEWithLogitsLoss``. Label smoothing,
  mixup and distillation targets sum to 1 and are not it.
* ``padding_in_loss``: the class-index targets of the NLL loss hold the
  ``padding_idx`` of an ``nn.Embedding`` of the model whose vocabulary is the
  loss's classes (a language model or a decoder: logits over the same tokens
  the embedding reads), and ``ignore_index`` is not that index. The count of
  such targets is deferred into the step's transfer; when at least
  ``PAD_SHARE`` of the targets are padding on ``PAD_STEPS`` checked steps, the
  padded positions are counted in the loss: the model learns to predict
  padding and the loss is averaged over them. A classifier over an embedding
  (a label 0 beside a padding index 0) is no match: its classes are not the
  vocabulary. For an embedding of the vocabulary without a ``padding_idx``, the
  padding is read from ``[N, T]`` targets (``_edge_padding``; flattened copies are
  put back in the shape the logits had): the value most rows end (right padding) or
  begin (left padding) with, when it only appears in edge runs of differing lengths
  (before a last column of ignored targets: labels shifted inside the loss).
* ``target_out_of_range`` also names regression targets that the prediction
  cannot reach: the input of an ``MSELoss``/``SmoothL1Loss``/``HuberLoss`` node
  comes straight (through views) from a sigmoid (outputs in (0, 1)) or a tanh
  ((-1, 1)), and the targets' minimum and maximum, deferred on
  ``BOUNDED_STEPS`` checked steps, leave that range by more than ``MARGIN``
  (images of 0..255 against a sigmoid decoder, unscaled regression values).
  The loss can never reach zero and the output layer saturates.
* ``double_activation``: a softmax right under the NLL node (through views):
  probabilities given to ``NLLLoss``/``F.nll_loss``, which expects
  log-probabilities; or a layer's own output there (a linear map, a
  convolution): raw scores that no log-softmax normalised, whose loss falls
  without bound. ``log(probs)``, ``x - logsumexp(x)`` and CrossEntropyLoss's
  own log-softmax are log-probabilities and never match.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tensorscope.hooks.diagnostics.base import PASS_THROUGH_FNS, Diagnostic, fn_name, \
    module_label, saved_value
from tensorscope.hooks.diagnostics.losses import node_output_shape, top_nodes
from tensorscope.hooks.observer import CallRecord, StepRecord

CHECKED_STEPS = 16     # training steps looked at (the mistake shows from the start)
RUN = 4                # consecutive single-class steps that make a finding
CONSTANT_TARGETS = 128
_NLL = ("NllLossBackward0", "NllLoss2DBackward0")
_BINARY = ("BinaryCrossEntropyWithLogitsBackward0", "BinaryCrossEntropyBackward0")
_SEARCH = 24           # graph nodes looked at under the loss
BATCH_CHECKS = 4       # training steps whose loss graphs are searched for a softmax over dim 0
BATCH_SEARCH = 512     # graph nodes looked at in that search
_SOFTMAX_FNS = ("SoftmaxBackward0", "LogSoftmaxBackward0")
_INDEX_DTYPES = (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8)
BOUNDED_STEPS = 2      # checked steps with regression targets out of the output's range
MARGIN = 0.1           # how far beyond the activation's range a target may lie
_BOUNDED = {"SigmoidBackward0": ("sigmoid", 0.0, 1.0), "TanhBackward0": ("tanh", -1.0, 1.0)}
_REGRESSION = ("MseLossBackward0", "SmoothL1LossBackward0", "HuberLossBackward0")
HOT_STEPS = 2          # checked steps with multi-hot targets into a cross-entropy
PAD_SHARE = 0.05       # targets that are the padding index, of all counted ones
PAD_STEPS = 2          # checked steps with that share that make a finding
RUN_SHARE = 4          # an inferred padding: at most 1 in RUN_SHARE other neighbours equal
SOFTMAX, RAW_SCORES = -1, -2   # in place of a log-softmax's dim: what the NLL got instead
# a layer's own output (a linear map, a convolution): scores that no log-softmax normalised
_RAW_SCORE_FNS = frozenset({"AddmmBackward0", "MmBackward0", "ConvolutionBackward0",
                            "LinearBackward0", "BmmBackward0"})
_LAYER_FNS = frozenset({"AddmmBackward0", "MmBackward0", "ConvolutionBackward0",
                        "LinearBackward0", "AddBackward0", "BmmBackward0"})


class TargetObserver(Diagnostic):
    """Reads the targets and log-probabilities of classification losses."""

    def __init__(self) -> None:
        self._train_steps = 0
        # (defer handle, classes, logits straight from a layer, targets counted on the host
        # or None) per loss this step
        self._handles: list[tuple[int, int, bool, int | None]] = []
        self._run: list[tuple[float, int, int, bool]] = []  # (class, n, classes, from a layer)
        self._done = False
        # (node, dim, shape, class dim, step) of each wrong (log-)softmax this step
        self._dims: list[tuple[Any, int, list[int], int, int]] = []
        self._dim_seen: set[tuple[str, int, str]] = set()
        # (node, shape, step) of each softmax over the batch dimension this step
        self._over_batch: list[tuple[Any, list[int], int]] = []
        self._seq_first: dict[int, bool] = {}   # id(root module) -> has a seq-first layer
        # (defer handle, node that made the logits, step) per BCE-with-logits loss
        # (defer handle, the node that made the logits, step, arguments swapped)
        self._binary_handles: list[tuple[int, Any, int, bool]] = []
        # (log-softmax node and the reshapes under it, logits shape, step): a cross-entropy
        # over dimension 1 of [N, T, C] logits whose classes are last
        # (and for probability targets, the defer handle of their sums over dims 1 and -1)
        self._class_last: list[tuple[list[Any], list[int], int | None, int]] = []
        # vocabulary size -> (padding index, root, embedding path), for the roots seen so far
        self._pads: dict[int, tuple[int, int, str]] = {}
        self._pad_roots = 0
        # handle, pad (-1: read from the targets), root, path, classes, ignore_index
        self._pad_handles: list[tuple[int, int, int, str, int, int]] = []
        self._pad_run = _Streak(PAD_STEPS)   # its values: the share of padding targets
        self._hot_handles: list[tuple[int, Any, int]] = []   # handle, logits' node, step
        self._hot_run = _Streak(HOT_STEPS)
        self._bounded_handles: list[tuple[int, Any, str, float, float, int]] = []
        self._bounded_run = _Streak(BOUNDED_STEPS)
        # (node that made the scores, their shape, step) of an NLL loss over one class
        self._one_class: tuple[Any, list[int], int] | None = None
        self._one_class_said = False

    def on_backward(self, loss: torch.Tensor) -> None:
        """Look at the NLL nodes under the loss (first checked steps only)."""
        if self._done or not isinstance(loss, torch.Tensor) or loss.grad_fn is None:
            return
        for node in top_nodes(loss.grad_fn, _SEARCH):
            name = fn_name(node)
            if name in _NLL:
                self._nll(node)
            elif name in _BINARY:
                self._binary(node, logits=name == _BINARY[0])
            if name in _NLL or name == "MulBackward0":
                self._classes_last(node)
            if name == "MulBackward0" and not self._hot_run.done:
                self._multi_hot(node)
            elif name in _REGRESSION and not self._bounded_run.done:
                self._bounded(node)
        if self._train_steps < BATCH_CHECKS and len(self._over_batch) < 4:
            self._softmax_over_batch(loss.grad_fn)

    def _classes_last(self, node: Any) -> None:
        """The log-softmax over dimension 1 that a cross-entropy applies (an NLL node, or
        for probability targets a product with a constant target) to ``[N, T, C]`` logits
        that a linear layer made with its features, the classes, last: the loss
        normalises over T. Silent in PyTorch when T == C (class indices) or whenever the
        targets are probabilities of the same shape."""
        edges = [f for f, _ in node.next_functions]
        target = None
        if fn_name(node) == "MulBackward0":
            if len(edges) != 2 or sum(f is not None for f in edges) != 1:
                return   # a soft cross-entropy multiplies by a constant target
            target = saved_value(node, "other" if edges[0] is not None else "self")
            edges = [f for f in edges if f is not None]
        logsm = _skip_reshapes(edges[0] if edges else None)
        if fn_name(logsm) != "LogSoftmaxBackward0" or len(self._class_last) >= 4 \
                or any(logsm is c[0][0] for c in self._class_last):
            return
        result = saved_value(logsm, "result", None)
        if not isinstance(result, torch.Tensor) or result.dim() < 3 or result.is_meta \
                or _dim_of(logsm, result.dim()) != 1:
            return
        chain, fn = [logsm], _first_input(logsm)
        for _ in range(6):   # reshapes only down to the layer: no transpose, no permute
            chain.append(fn)
            if fn_name(fn) not in _RESHAPES:
                break
            fn = _first_input(fn)
        shape = list(result.shape)
        logp = saved_value(node, "self", None) if target is None else None
        if isinstance(logp, torch.Tensor) and list(logp.shape[:2]) != shape[:2]:
            return   # reshaped to [N * T, C] after a log-softmax of the script's own: the
            # loss takes the classes last (that softmax's dimension is _nll's to judge)
        # a linear map's features are its last dimension; a convolution's channels (the
        # classes) are dimension 1, and a batched product (bmm, einsum) may put them anywhere
        made = node_output_shape(fn, 0) if _layer_output(fn) and not _under(
            fn, ("ConvolutionBackward0", "BmmBackward0")) else None
        if made is not None and len(made) >= 2 and made[-1] == shape[-1] \
                and _prod(made[:-1]) == _prod(shape[:-1]):
            self._class_last.append((chain, shape, None, self.ctx.step_index))
        elif isinstance(target, torch.Tensor) and target.is_floating_point() \
                and list(target.shape) == shape and not target.is_meta:
            # probabilities whose classes are last (F.one_hot(y, C) for [N, C, T] logits)
            with torch.no_grad():
                sums = {"d1": (target.sum(1) - 1).abs().amax(),
                        "last": (target.sum(-1) - 1).abs().amax()}
            self._class_last.append((chain, shape, self.ctx.defer(sums), self.ctx.step_index))

    def _report_class_last(self, record: StepRecord) -> None:
        """Name the layer whose output were the logits of each cross-entropy over the
        wrong dimension."""
        found, self._class_last = self._class_last, []
        for chain, shape, handle, step in found:
            sums = record.deferred.get(handle) if handle is not None else None
            if handle is not None and not (sums and float(sums["d1"]) > 1e-2
                                           and float(sums["last"]) <= 1e-3):
                continue
            nodes = {id(n) for n in chain[1:]}
            calls = record.calls
            rid, path = _made_by(calls, nodes)
            if ("softmax_dim", rid, path) in self._dim_seen:
                continue
            self._dim_seen.add(("softmax_dim", rid, path))
            c = shape[-1]
            if handle is not None:
                self.emit("softmax_dim", "warning", "loss", rid, path,
                          f"The probability targets of the cross-entropy at step {step} "
                          f"have the classes last: they sum to 1 over dimension "
                          f"{len(shape) - 1}, not over dimension 1, where the loss takes "
                          f"the classes of the {shape} logits of "
                          f"{module_label(self.ctx, rid, path)} (N x C x d1 ...), so every "
                          f"class is scored against the wrong target (F.one_hot(y, C) puts "
                          f"the classes last). Fix: target.movedim(-1, 1), or class indices "
                          f"(y itself) as the target.", step=step)
                continue
            self.emit("softmax_dim", "warning", "loss", rid, path,
                      f"The cross-entropy at step {step} got {shape} logits from "
                      f"{module_label(self.ctx, rid, path)} (a linear map) whose "
                      f"{c} output features, the classes, are the last dimension, but the "
                      f"loss takes the classes from dimension 1 (input N x C x d1 ...): its "
                      f"log-softmax normalises over the {shape[1]} positions of dimension 1 "
                      f"instead of over the classes, so it trains the wrong thing (PyTorch "
                      f"raises only when the sizes disagree). Fix: "
                      f"loss(logits.transpose(1, 2), target), or loss(logits.reshape(-1, "
                      f"{c}), target.reshape(-1)).", step=step)

    def _softmax_over_batch(self, top: Any) -> None:
        """Softmax nodes under the loss that normalise over dimension 0 when that is the
        batch (see the module docstring)."""
        nodes = [n for n in top_nodes(top, BATCH_SEARCH) if fn_name(n) in _SOFTMAX_FNS]
        if not nodes:
            return
        batches = self._batch_sizes()
        if not batches:
            return
        for node in nodes:
            out = saved_value(node, "result", None)
            if not isinstance(out, torch.Tensor) or out.dim() < 2 or out.is_meta:
                continue
            shape = list(out.shape)
            if _dim_of(node, out.dim()) != 0 or shape[0] < 2 or shape[0] not in batches \
                    or shape[0] == shape[1] or out.numel() == shape[0]:
                continue
            if any(n is node for n, _, _ in self._over_batch) or any(
                    d[0] is node for d in self._dims):
                continue
            self._over_batch.append((node, shape, self.ctx.step_index))

    def _batch_sizes(self) -> set[int]:
        """The first dimension of the 2-d or larger inputs that root calls of this step
        took from outside the models (none for a root with a sequence-first layer)."""
        calls = getattr(self.ctx, "step_calls", None)
        sizes: set[int] = set()
        for call in calls() if calls is not None else ():
            if not call.is_root or self._is_seq_first(call.module):
                continue
            for ent in call.in_entries:
                t = ent.ref() if ent.producer is None else None
                if t is not None and t.dim() >= 2:
                    sizes.add(int(t.shape[0]))
        return sizes

    def _is_seq_first(self, module: Any) -> bool:
        hit = self._seq_first.get(id(module))
        if hit is None:
            hit = self._seq_first[id(module)] = any(
                isinstance(m, (nn.RNNBase, nn.MultiheadAttention))
                and not getattr(m, "batch_first", False) for m in module.modules())
        return hit

    def _report_over_batch(self, calls: list[CallRecord]) -> None:
        """Name the module whose forward applied each softmax over the batch."""
        found, self._over_batch = self._over_batch, []
        made: dict[int, CallRecord] = {}
        for c in calls:
            for e in c.out_entries:
                if e.producer is c and e.made_fn is not None:
                    made.setdefault(id(e.made_fn), c)
        for node, shape, step in found:
            call = made.get(id(node))
            if call is None:   # applied in a forward: the caller of the output under it
                under = next((made[id(n)] for n in top_nodes(node, 64)[1:]
                              if id(n) in made), None)
                call = under.parent if under is not None and under.parent is not None \
                    else under
            if call is None:
                call = next((c for c in reversed(calls) if c.is_root and c.grad_enabled),
                            None)
            rid, path = (call.root, call.path) if call is not None else (0, "")
            if ("softmax_dim", rid, path) in self._dim_seen:
                continue
            self._dim_seen.add(("softmax_dim", rid, path))
            what = "log-softmax" if fn_name(node) == "LogSoftmaxBackward0" else "softmax"
            self.emit("softmax_dim", "warning", "forward", rid, path,
                      f"A {what} in {module_label(self.ctx, rid, path)} normalises a "
                      f"{shape} tensor over dimension 0, the batch, at step {step}: each "
                      f"column sums to 1 across the samples, so every sample's "
                      f"probabilities (or attention weights) depend on the other samples "
                      f"in the batch and do not sum to 1 over its own classes (or "
                      f"positions). Fix: {what.replace('-', '_')}(x, dim=-1) (the classes, "
                      f"or the keys of the attention), or raw logits into "
                      f"nn.CrossEntropyLoss.", step=step)

    def _binary(self, node: Any, logits: bool) -> None:
        """Defer the range of a binary cross-entropy's target: for the logits form it
        must lie in [0, 1] (``BCELoss`` checks that itself); one label per sample also
        joins the run of single-class steps."""
        target = saved_value(node, "target", None)
        if not isinstance(target, torch.Tensor) or not target.is_floating_point() \
                or target.dim() == 0 or target.numel() == 0 or target.is_meta \
                or len(self._binary_handles) >= 4:
            return
        with torch.no_grad():
            lo, hi = target.amin(), target.amax()
        handle = self.ctx.defer({"lo": lo, "hi": hi})
        if logits:
            made = _skip_views(_first_input(node))
            # criterion(labels, logits): the input has no graph, the target has one
            nxt: Any = getattr(node, "next_functions", ())
            swapped = made is None and len(nxt) > 1 and nxt[1][0] is not None
            if swapped:
                made = _skip_views(nxt[1][0])
            self._binary_handles.append((handle, made, self.ctx.step_index, swapped))
        if target.shape[0] >= 8 and target.numel() == target.shape[0] and target.dim() <= 2 \
                and len(self._handles) < 4:
            self._handles.append((handle, 2, False, target.numel()))   # one label per sample

    def _multi_hot(self, node: Any) -> None:
        """Defer what the constant target of a soft cross-entropy holds: whether only
        0 and 1, and its largest and smallest sums per sample."""
        edges = [f for f, _ in node.next_functions]
        if len(edges) != 2 or sum(f is not None for f in edges) != 1 \
                or len(self._hot_handles) >= 2:
            return
        target = saved_value(node, "other" if edges[0] is not None else "self", None)
        logsm = _skip_reshapes(next(f for f in edges if f is not None))
        if fn_name(logsm) != "LogSoftmaxBackward0":
            return
        result = saved_value(logsm, "result", None)
        if not isinstance(target, torch.Tensor) or not isinstance(result, torch.Tensor) \
                or not target.is_floating_point() or target.dim() < 2 or target.is_meta \
                or target.shape != result.shape or _dim_of(logsm, result.dim()) != 1:
            return
        with torch.no_grad():
            sums = target.sum(1)
            vals = {"hot": ((target == 0) | (target == 1)).all().to(torch.float32),
                    "most": sums.amax(), "least": sums.amin()}
            if target.dim() >= 3:   # one-hot over the last dimension is softmax_dim's
                vals["last"] = (target.sum(-1) - 1).abs().amax()
        self._hot_handles.append((self.ctx.defer(vals), _first_input(logsm),
                                  self.ctx.step_index))

    def _bounded(self, node: Any) -> None:
        """Defer the range of a regression loss's target when its prediction comes
        straight from a sigmoid or a tanh."""
        edges = [f for f, _ in node.next_functions]
        act = _skip_views(edges[0]) if edges and edges[0] is not None else None
        bounds = _BOUNDED.get(fn_name(act)) if act is not None else None
        target = saved_value(node, "target", None)
        if bounds is None or not isinstance(target, torch.Tensor) or target.is_meta \
                or not target.is_floating_point() or target.numel() == 0 \
                or len(self._bounded_handles) >= 2:
            return
        with torch.no_grad():
            vals = {"lo": target.amin(), "hi": target.amax()}
        self._bounded_handles.append((self.ctx.defer(vals), (act, _first_input(act)),
                                      *bounds, self.ctx.step_index))

    def _report_bounded(self, record: StepRecord) -> None:
        """Regression targets outside the range of the sigmoid or tanh before the loss,
        named at the module that applied it (else the one whose output it took)."""
        handles, self._bounded_handles = self._bounded_handles, []
        if record.kind != "train":
            return
        for handle, made, act, low, high, step in handles:
            vals = record.deferred.get(handle)
            if not vals:
                continue
            lo, hi = float(vals["lo"]), float(vals["hi"])
            # NaN: no verdict
            if not self._bounded_run.see(step, lo < low - MARGIN or hi > high + MARGIN):
                return
            # the module that applied the activation, else the one whose output it took
            rid, path = _made_by(record.calls, {id(made[0])}, None) \
                or _made_by(record.calls, {id(made[1])})
            self.emit("target_out_of_range", "warning", "loss", rid, path,
                      f"The regression targets at steps "
                      f"{self._bounded_run.listed()} range from {lo:g} to "
                      f"{hi:g}, but the prediction they are compared with comes out of a "
                      f"{act} ({module_label(self.ctx, rid, path)}), whose values lie "
                      f"in ({low:g}, {high:g}): the model can never reach them, the loss "
                      f"cannot fall to zero and the {act} saturates. Usually images of "
                      f"0..255 against a sigmoid decoder, or unscaled regression values. "
                      f"Fix: scale the targets into ({low:g}, {high:g}) (x / 255), or drop "
                      f"the {act} from the output layer.", step=step)
            return

    def _report_one_class(self, record: StepRecord) -> None:
        """A cross-entropy (or NLL) over a single class: its loss is always 0."""
        assert self._one_class is not None
        made, shape, step = self._one_class
        self._one_class_said = True
        rid, path = _made_by(record.calls, {id(made)} if made is not None else set())
        self.emit("softmax_dim", "warning", "loss", rid, path,
                  f"The cross-entropy at step {step} gets {shape} scores from "
                  f"{module_label(self.ctx, rid, path)}: one class. The log-softmax of a "
                  f"single score is always 0, so the loss is 0 whatever the model outputs "
                  f"and no gradient reaches the model: nothing is learned. Fix: for a "
                  f"binary task with one output, nn.BCEWithLogitsLoss() with float targets "
                  f"of the same shape; with CrossEntropyLoss, give the last layer one "
                  f"output per class (2 for a binary task).", step=step)

    def _report_multi_hot(self, record: StepRecord) -> None:
        handles, self._hot_handles = self._hot_handles, []
        if record.kind != "train":
            return
        for handle, made, step in handles:
            vals = record.deferred.get(handle)
            if not vals:
                continue
            hot = float(vals["hot"]) == 1.0 and float(vals["most"]) >= 2.0 \
                and float(vals.get("last", 1.0)) > 1e-3
            if not self._hot_run.see(step, hot):
                return
            rid, path = _made_by(record.calls, {id(made)})
            most, least = int(float(vals["most"])), int(float(vals["least"]))
            self.emit("target_out_of_range", "warning", "loss", rid, path,
                      f"The targets of the cross-entropy at steps "
                      f"{self._hot_run.listed()} (on the logits of "
                      f"{module_label(self.ctx, rid, path)}) are multi-hot: 0/1 vectors "
                      f"marking {least} to {most} labels per sample, but a cross-entropy "
                      f"takes one probability distribution per sample (its softmax makes "
                      f"the classes compete, so two true labels pull against each other, "
                      f"and a target summing to {most} scales the loss). This is a "
                      f"multi-label task. Fix: nn.BCEWithLogitsLoss() on the same logits "
                      f"and targets (one independent sigmoid per label).", step=step)
            return

    def _report_binary(self, record: StepRecord) -> None:
        """A BCE-with-logits target outside [0, 1] (masks of 0/255, labels of -1/1)."""
        handles, self._binary_handles = self._binary_handles, []
        for handle, made, step, swapped in handles:
            vals = record.deferred.get(handle)
            if not vals:
                continue
            lo, hi = float(vals["lo"]), float(vals["hi"])
            if 0.0 <= lo and hi <= 1.0 or lo != lo or hi != hi:
                continue
            rid, path = _made_by(record.calls, {id(made)})
            if swapped:
                self._report_swapped(rid, path, lo, hi, step)
                continue
            self.emit("target_out_of_range", "warning", "loss", rid, path,
                      f"The targets of the binary cross-entropy at step {step} (on the "
                      f"logits of {module_label(self.ctx, rid, path)}) range from {lo:g} to "
                      f"{hi:g}, but they must be probabilities in [0, 1]: BCEWithLogitsLoss "
                      f"does not check, and the loss has no minimum (it falls without bound "
                      f"as the logits grow). Usually masks loaded as 0/255 or labels coded "
                      f"-1/+1. Fix: scale the targets (mask / 255, (y + 1) / 2) into [0, 1].",
                      step=step)

    def _report_swapped(self, rid: int, path: str, lo: float, hi: float, step: int) -> None:
        where = module_label(self.ctx, rid, path)
        self.emit("target_out_of_range", "warning", "loss", rid, path,
                  f"The arguments of the binary cross-entropy at step {step} are swapped: "
                  f"its target is the output of {where} (it requires grad, values from "
                  f"{lo:g} to {hi:g}, not probabilities in [0, 1]) and its input, the logits, "
                  f"is a tensor without gradient (the labels): criterion(labels, logits) "
                  f"instead of criterion(logits, labels). The loss then differentiates "
                  f"through the target term only and has no minimum: it falls without bound "
                  f"as the outputs grow, whatever the labels. Fix: "
                  f"nn.BCEWithLogitsLoss()(logits, labels) (input first, target second).",
                  step=step)

    def _nll(self, node: Any) -> None:
        logp = saved_value(node, "self", None)
        target = saved_value(node, "target", None)
        if not isinstance(logp, torch.Tensor) or not isinstance(target, torch.Tensor):
            return
        self._check_dim(node, logp)
        if logp.dim() >= 2 and logp.shape[1] == 1 and self._one_class is None:
            inner = node.next_functions[0][0] if node.next_functions else None
            self._one_class = (_first_input(inner) if fn_name(inner) == "LogSoftmaxBackward0"
                               else inner, list(logp.shape), self.ctx.step_index)
        if not self._pad_run.done and logp.dim() >= 2 and target.dtype in _INDEX_DTYPES \
                and not target.is_meta and len(self._pad_handles) < 4:
            self._padding(node, logp.shape[1], target)
        if target.dim() != 1 or target.numel() < 8 or target.dtype not in _INDEX_DTYPES \
                or logp.dim() != 2 or len(self._handles) >= 4 or target.is_meta:
            return
        ignore = _signed(saved_value(node, "ignore_index", -100))
        with torch.no_grad():
            valid = target != ignore
            big = torch.iinfo(target.dtype).max
            lo = torch.where(valid, target, torch.full_like(target, big)).amin()
            hi = torch.where(valid, target, torch.full_like(target, -1)).amax()
            n = valid.sum()
        self._handles.append((self.ctx.defer({"lo": lo, "hi": hi, "n": n}), logp.shape[1],
                              _from_layer(node), None))

    def _padding(self, node: Any, classes: int, target: torch.Tensor) -> None:
        """Queue the count of padding targets, when the classes are an embedding's
        vocabulary with a padding index that the loss does not ignore."""
        roots = self.ctx.roots
        if len(roots) != self._pad_roots:   # learn the embeddings of new roots
            for rid in range(self._pad_roots, len(roots)):
                for path, mod in roots[rid].named_modules():
                    pad = getattr(mod, "padding_idx", None) if isinstance(mod, nn.Embedding) \
                        else None
                    if isinstance(pad, int) and pad >= 0:
                        self._pads[int(mod.num_embeddings)] = (pad, rid, path)
                    elif isinstance(mod, nn.Embedding):   # no padding_idx (GPT-2's wte)
                        self._pads.setdefault(int(mod.num_embeddings), (-1, rid, path))
            self._pad_roots = len(roots)
        hit = self._pads.get(int(classes))
        if hit is None:
            return
        pad, rid, path = hit
        ignore = _signed(saved_value(node, "ignore_index", -100))
        if ignore == pad:
            return
        if pad < 0:
            counts = _edge_padding(target, node)
            if counts is None:
                return
        else:
            with torch.no_grad():
                counts = {"pad": (target == pad).sum(), "n": (target >= 0).sum()}
        self._pad_handles.append((self.ctx.defer(counts), pad, rid, path, int(classes),
                                  ignore))

    def _report_padding(self, record: StepRecord) -> None:
        handles, self._pad_handles = self._pad_handles, []
        if record.kind != "train":
            return
        share, seen, inferred = None, None, False
        for handle, *where in handles:
            vals = record.deferred.get(handle)
            if not vals or not vals.get("n"):
                continue
            share, seen = float(vals["pad"]) / float(vals["n"]), where
            inferred = "value" in vals
            if inferred:   # no padding_idx: the value every row ends with a run of
                seen = [int(vals["value"]), *where[1:]]
                if not (int(vals["suffix"]) and int(vals["vary"])) or seen[0] == where[4]:
                    share = 0.0
            if share < PAD_SHARE:
                self._pad_run.see(record.step, False)
                return
        if share is None or seen is None or not self._pad_run.see(record.step, True, share):
            return
        pad, rid, path, classes, _ = seen
        pct = 100 * max(self._pad_run.values)
        where = module_label(self.ctx, rid, path)
        what = (f"the padding index {pad} (the padding_idx of {where}, whose {classes} "
                f"tokens are the loss's classes)" if not inferred else
                f"the padding token {pad} (every sequence of targets ends, or every one "
                f"begins, in a run of it, "
                f"of lengths that differ from row to row; the {classes} tokens of {where} "
                f"are the loss's classes)")
        self.emit("padding_in_loss", "warning", "loss", rid, "",
                  f"Up to {pct:.0f}% of the targets of the cross-entropy at steps "
                  f"{self._pad_run.listed()} are {what}, and the loss does not ignore it: "
                  f"the padded positions count in the loss, so the model learns to predict "
                  f"padding and every real token's share of the gradient shrinks. Fix: "
                  f"cross_entropy(..., ignore_index={pad}) (nn.CrossEntropyLoss("
                  f"ignore_index={pad})), or set the padded targets to -100.", step=record.step)

    def _check_dim(self, node: Any, logp: torch.Tensor) -> None:
        """A log-softmax over the wrong dimension right under the NLL node, or (through
        views) a softmax (probabilities) or a layer (raw scores, no log-softmax)."""
        inner = node.next_functions[0][0] if node.next_functions else None
        name = fn_name(inner)
        made = _skip_views(inner)
        shape, classes = list(logp.shape), 1
        if fn_name(made) == "SoftmaxBackward0":
            inner, dim = made, SOFTMAX     # probabilities where log-probabilities belong
        elif _layer_output(made):
            inner, dim = made, RAW_SCORES  # a layer's scores, never normalised
        elif name == "LogSoftmaxBackward0" and logp.dim() >= 2:
            dim = _dim_of(inner, logp.dim())
            if dim == 1:
                return
            shape, classes = list(logp.shape), 1
        elif fn_name(made) == "LogBackward0" and logp.dim() >= 2 \
                and _softmax_under_log(made) is not None:
            # torch.log(F.softmax(x, dim)), the same shape as the NLL's input
            inner = _softmax_under_log(made)
            result = saved_value(inner, "result", None)
            if not isinstance(result, torch.Tensor) or list(result.shape) != shape:
                return
            dim = _dim_of(inner, logp.dim())
            if dim == 1:
                return
        elif fn_name(made) == "LogSoftmaxBackward0" and logp.dim() >= 3 \
                and _reshapes_only(inner, made):
            # [N, C, d1] log-probabilities viewed to [N, C, 1, d1] by the loss: classes at 1
            result = saved_value(made, "result", None)
            if not isinstance(result, torch.Tensor) or result.dim() < 3 \
                    or list(result.shape[:2]) != shape[:2] or result.numel() != logp.numel():
                return
            dim = _dim_of(made, result.dim())
            if dim == 1:
                return
            inner, shape = made, list(result.shape)
        elif fn_name(made) == "LogSoftmaxBackward0" and logp.dim() == 2 \
                and _reshapes_only(inner, made):
            # [B, T, C] log-probabilities flattened to [B*T, C]: the classes are the last dim
            result = saved_value(made, "result", None)
            if not isinstance(result, torch.Tensor) or result.dim() < 2 \
                    or result.shape[-1] != logp.shape[1] or result.numel() != logp.numel():
                return
            dim = _dim_of(made, result.dim())
            if dim == result.dim() - 1:
                return
            inner, shape, classes = made, list(result.shape), result.dim() - 1
        else:
            return
        if len(self._dims) < 4:
            self._dims.append((inner, dim, shape, classes, self.ctx.step_index))

    def _report_dims(self, calls: list[CallRecord]) -> None:
        """Name the module whose forward applied each wrong (log-)softmax."""
        dims, self._dims = self._dims, []
        for inner, dim, shape, classes, step in dims:
            made = [c for c in calls for e in c.out_entries
                    if e.made_fn is inner and e.producer is c]
            call = made[0] if made else next((c for c in reversed(calls)
                                              if c.is_root and c.grad_enabled), None)
            rid, path = (call.root, call.path) if call is not None else (0, "")
            kind = "double_activation" if dim < 0 else "softmax_dim"
            if (kind, rid, path) in self._dim_seen:
                continue
            self._dim_seen.add((kind, rid, path))
            where = module_label(self.ctx, rid, path)
            if dim == RAW_SCORES:
                self.emit(kind, "warning", "loss", rid, path,
                          f"The NLL loss at step {step} received raw scores straight from a "
                          f"layer (in {where}), where it expects log-probabilities: without a "
                          f"log_softmax it minimises -score[target], which falls without bound "
                          f"as the scores grow, and the classes never compete. Fix: "
                          f"F.log_softmax(x, dim=1) (nn.LogSoftmax) before NLLLoss, or the raw "
                          f"logits into nn.CrossEntropyLoss.", step=step)
                continue
            if dim < 0:
                self.emit(kind, "warning", "loss", rid, path,
                          f"The NLL loss at step {step} received the output of a softmax (in "
                          f"{where}): probabilities, where it expects log-probabilities, so "
                          f"it minimises -p[target] instead of -log p[target] and learns "
                          f"slowly or not at all. Fix: F.log_softmax(x, dim=1) (nn.LogSoftmax) "
                          f"before NLLLoss, or raw logits into nn.CrossEntropyLoss.", step=step)
                continue
            if classes == 1 and len(shape) >= 3 and dim == len(shape) - 1:
                self.emit(kind, "warning", "loss", rid, path,
                          f"The log-probabilities given to the NLL loss at step {step} are a "
                          f"{shape} tensor (from {where}) normalised over its last dimension, "
                          f"the classes of per-position scores [N, T, C], but the loss takes "
                          f"the classes from dimension 1 (N x C x d1 ...): it reads the "
                          f"positions as classes and trains the wrong thing (PyTorch raises "
                          f"only when the sizes disagree). Fix: loss(logp.transpose(1, 2), "
                          f"target), or loss(logp.reshape(-1, {shape[-1]}), "
                          f"target.reshape(-1)); if the classes are dimension 1 (a "
                          f"convolution's channels), log_softmax(x, dim=1).", step=step)
                continue
            self.emit(kind, "warning", "loss", rid, path,
                      f"The log-probabilities given to the NLL loss at step {step} come from "
                      f"a (log-)softmax over dimension {dim} of a {shape} input (in {where}), "
                      f"but the classes are dimension {classes}: each column is normalised "
                      f"over the batch (or positions) instead of each sample over its "
                      f"classes, so the loss trains the wrong thing. Fix: "
                      f"{'log_softmax(x, dim=1) (dim=-1 for [N, C])' if classes == 1 else 'log_softmax(x, dim=-1)'}"
                      f", or give the raw logits to nn.CrossEntropyLoss.", step=step)

    def on_step_end(self, record: StepRecord) -> None:
        """Fold this step's target ranges into the run of single-class steps."""
        handles, self._handles = self._handles, []
        if self._dims:
            self._report_dims(record.calls)
        if self._over_batch:
            self._report_over_batch(record.calls)
        if self._class_last:
            self._report_class_last(record)
        if self._binary_handles:
            self._report_binary(record)
        if self._pad_handles:
            self._report_padding(record)
        if self._hot_handles:
            self._report_multi_hot(record)
        if self._bounded_handles:
            self._report_bounded(record)
        if self._one_class is not None and not self._one_class_said:
            self._report_one_class(record)
        if self._done or record.kind != "train":
            return
        self._train_steps += 1
        if self._train_steps > CHECKED_STEPS:
            self._done = True
            return
        step_class: tuple[float, int, int, bool] | None = None
        for handle, classes, layer, count in handles:
            vals = record.deferred.get(handle)
            if not vals:
                continue
            lo, hi = float(vals["lo"]), float(vals["hi"])
            n = int(vals["n"]) if count is None else count
            if n < 8 or lo != hi or step_class is not None and step_class[0] != lo:
                self._run.clear()   # mixed targets (a GAN's real and fake batches too)
                return
            step_class = (lo, n + (step_class[1] if step_class else 0), classes, layer)
        if step_class is not None:
            self._run.append(step_class)
        self._judge(record.step)

    def _judge(self, step: int) -> None:
        run = self._run
        if len(run) < RUN:
            return
        classes = sorted({int(r[0]) if r[0] == int(r[0]) else r[0] for r in run})
        total = sum(r[1] for r in run)
        if len(classes) >= 2:
            why = (f"the batches hold one class each, a different one as training goes on "
                   f"(classes {', '.join(map(str, classes[:6]))}): the dataset is sorted by "
                   f"class and the DataLoader does not shuffle it, so each step pulls the "
                   f"model towards one class. Fix: DataLoader(..., shuffle=True) (or a "
                   f"random sampler)")
        elif run[-1][2] >= 3 and total >= CONSTANT_TARGETS and all(r[3] for r in run):
            why = (f"all {total} targets are class {classes[0]} out of {run[-1][2]}: the "
                   f"labels are constant (built wrongly, or the wrong column), so the model "
                   f"only learns to predict that class. Fix: check how the labels are made "
                   f"and loaded")
        else:
            return
        self._done = True
        self.emit("single_class_batches", "warning", "input", 0, "",
                  f"In each of the last {len(run)} training steps (up to step {step}) every "
                  f"class-index target of the loss is the same class: {why}.", step=step)


def _edge_padding(target: torch.Tensor, node: Any = None) -> dict[str, torch.Tensor] | None:
    """For ``[N, T]`` class-index targets (or a flattened view or copy of them): a
    padding value ``v`` and how it sits in the rows. Right padding: the value most rows
    end with; left padding (decoders batched for generation): the value most rows begin
    with. The side whose value only appears in one edge run per row (``suffix``), runs
    that differ in length (``vary``: sequences padded to the longest), is the one told
    (the right one when both are), with the count of ``v`` and of non-negative targets
    (device scalars)."""
    rows = _target_rows(target, node)
    if rows is None or rows.shape[0] < 2 or rows.shape[1] < 4:
        return None
    with torch.no_grad():
        right = _edge_run(rows)
        # a last column of ignored targets (< 0) on every row: labels shifted for a causal
        # LM inside the loss (transformers pads them with ignore_index), whose padding
        # run ends one place before the row's end (chosen on the device: no host read)
        inner = _edge_run(rows[:, :-1])
        shifted = (rows[:, -1] < 0).all()
        right = {k: torch.where(shifted, inner[k], right[k]) for k in right}
        left = _edge_run(rows.flip(1))
        take = right["suffix"] & right["vary"] | ~(left["suffix"] & left["vary"])
        return {k: torch.where(take, right[k], left[k]) for k in right}


def _edge_run(rows: torch.Tensor) -> dict[str, torch.Tensor]:
    """The value most rows end with, whether it only occurs in a trailing run of each
    row (and is the only value that runs: in sorted or run-length data every value
    does, and one at the end is no padding), whether those runs differ in length, its
    count and that of targets >= 0."""
    value = rows[:, -1].mode().values
    is_pad = rows == value
    trail = is_pad.flip(1).int().cumprod(1).flip(1)
    lengths = trail.sum(1)
    real = ~is_pad[:, 1:] & ~is_pad[:, :-1]
    repeats = (rows[:, 1:] == rows[:, :-1]) & real
    only_run = repeats.sum() * RUN_SHARE <= real.sum()
    # a run of one at most (one row's first or last token that no other row has there:
    # random tokens in a batch of two) is no padding
    return {"value": value, "suffix": (trail == is_pad.int()).all() & only_run,
            "vary": (lengths.amax() > lengths.amin()) & (lengths.amax() > 1),
            "pad": is_pad.sum(),
            "n": (rows >= 0).sum()}


def _target_rows(target: torch.Tensor, node: Any) -> torch.Tensor | None:
    """``target`` as ``[N, T]`` rows: itself, the 2-d tensor it is a flat view of, or
    (a flattened copy, as ``y[:, 1:].reshape(-1)`` makes) its values in the shape the
    loss's logits had before they were flattened (``[N, T, classes]``, read from the
    view under the NLL node and its log-softmax). None when no such shape is known."""
    if target.dim() == 2:
        return target
    if target.dim() != 1:
        return None
    base = target._base
    if isinstance(base, torch.Tensor) and base.dim() == 2 and base.numel() == target.numel():
        return base
    fn = _first_input(node)
    if fn_name(fn) == "LogSoftmaxBackward0":
        fn = _first_input(fn)
    if fn_name(fn) not in ("ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0"):
        return None
    sizes = saved_value(fn, "self_sym_sizes", None)
    if not isinstance(sizes, (tuple, list)) or len(sizes) != 3:
        return None
    n, t = int(sizes[0]), int(sizes[1])
    if n * t != target.numel():
        return None
    return target.reshape(n, t)


class _Streak:
    """The consecutive checked steps that showed one pattern; ``done`` once ``need``
    of them came in a row (a step without it starts over)."""

    __slots__ = ("need", "steps", "values", "done")

    def __init__(self, need: int) -> None:
        self.need = need
        self.steps: list[int] = []
        self.values: list[float] = []
        self.done = False

    def see(self, step: int, hit: bool, value: float = 0.0) -> bool:
        """Count ``step``; True when this one completes the run."""
        if not hit:
            self.steps, self.values = [], []
            return False
        self.steps.append(step)
        self.values.append(value)
        self.done = len(self.steps) >= self.need
        return self.done

    def listed(self) -> str:
        """The steps of the run, for a message."""
        return ", ".join(map(str, self.steps))


def _made_by(calls: list[CallRecord], nodes: set[int], default: Any = (0, "")) -> Any:
    """``(root, path)`` of the module call whose own output was made by one of the
    graph nodes of ids ``nodes``, else of the step's last training root call, else
    ``default`` (with ``default=None``: None when no module's output matches)."""
    call = next((c for c in calls for e in c.out_entries
                 if e.producer is c and e.made_fn is not None and id(e.made_fn) in nodes), None)
    if call is None and default is None:
        return None
    if call is None:
        call = next((c for c in reversed(calls) if c.is_root and c.grad_enabled), None)
    return (call.root, call.path) if call is not None else default


def _from_layer(node: Any) -> bool:
    """Whether the NLL node's logits come straight (through views and the loss's own
    log-softmax) from a layer (a linear map or a convolution): a classifier's scores,
    not logits put together by hand (InfoNCE's [positive, negatives], whose target is
    always class 0)."""
    fn = _first_input(node)
    if fn_name(fn) == "LogSoftmaxBackward0":
        fn = _first_input(fn)
    fn, above = _under_views(fn)
    if fn_name(fn) not in _LAYER_FNS:
        return False
    # a layer with one output per row (a pointwise scorer: [B * G, 1] or [B, G, 1]) whose
    # scores were viewed as [B, G]: a reranker's candidates, not a classifier's classes
    sizes = getattr(above, "_saved_self_sym_sizes", None) if above is not None else None
    return not (isinstance(sizes, tuple) and sizes and sizes[-1] == 1)


def _layer_output(fn: Any) -> bool:
    """Whether ``fn`` made a layer's own output: a linear map or a convolution, or the
    bias added to a matrix product (``nn.Linear`` on a non-contiguous 3-d input)."""
    name = fn_name(fn)
    if name in _RAW_SCORE_FNS:
        return True
    return name == "AddBackward0" and any(
        fn_name(_skip_views(f)) in _RAW_SCORE_FNS for f, _ in fn.next_functions)


# between a softmax and the log of it: an epsilon added, a clamp
_LOG_GUARDS = frozenset({"AddBackward1", "ClampMinBackward0", "ClampBackward1"})


def _softmax_under_log(log_node: Any) -> Any:
    """The softmax node whose output ``log_node`` takes the log of (through an added
    epsilon or a clamp), or None."""
    fn = _first_input(log_node)
    if fn_name(fn) in _LOG_GUARDS or fn_name(fn) == "AddBackward0" and sum(
            f is not None for f, _ in fn.next_functions) == 1:
        fn = _first_input(fn)
    return fn if fn_name(fn) == "SoftmaxBackward0" else None


def _dim_of(node: Any, ndim: int) -> int:
    """A (log-)softmax node's saved ``dim``, counted from 0 for an ``ndim``-d input."""
    dim = _signed(saved_value(node, "dim", 1))
    return dim + ndim if dim < 0 else dim


_RESHAPES = frozenset({"ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0"})


def _reshapes_only(fn: Any, until: Any) -> bool:
    """Whether the nodes from ``fn`` down to ``until`` only reshape (no transpose)."""
    for _ in range(6):
        if fn is until:
            return True
        if fn_name(fn) not in _RESHAPES:
            return False
        fn = _first_input(fn)
    return False


def _under(fn: Any, names: tuple[str, ...]) -> bool:
    """Whether ``fn`` is one of ``names``, or the bias added to one (``AddBackward0``)."""
    if fn_name(fn) in names:
        return True
    return fn_name(fn) == "AddBackward0" and any(
        fn_name(_skip_views(f)) in names for f, _ in fn.next_functions)


def _skip_reshapes(fn: Any) -> Any:
    """The first node at or under ``fn`` that is not a reshape (a transpose stops)."""
    for _ in range(6):
        if fn_name(fn) not in _RESHAPES:
            break
        fn = _first_input(fn)
    return fn


def _prod(dims: list[int]) -> int:
    out = 1
    for d in dims:
        out *= int(d)
    return out


def _skip_views(fn: Any) -> Any:
    """The first node at or under ``fn`` that is not a view, reshape or cast."""
    return _under_views(fn)[0]


def _under_views(fn: Any) -> tuple[Any, Any]:
    """``_skip_views(fn)``, and the view node right above it (None when ``fn`` is no
    view): its saved input sizes are the shape of the node's output."""
    above = None
    for _ in range(6):
        if fn_name(fn) not in PASS_THROUGH_FNS:
            break
        above, fn = fn, _first_input(fn)
    return fn, above


def _first_input(node: Any) -> Any:
    """The node of ``node``'s first input (None at a leaf)."""
    nxt = getattr(node, "next_functions", None)
    return nxt[0][0] if nxt else None


def _signed(value: Any) -> int:
    """A saved integer argument of a graph node (read back as unsigned 64-bit)."""
    n = int(value)
    return n - 2 ** 64 if n >= 2 ** 63 else n
