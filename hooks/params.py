"""Per-parameter numbers of a training step: gradient norm, norm, update ratio.

Norms are taken with ``torch._foreach_norm`` on accelerators (one fused call
per list) and from dot products on the CPU (``_norms``), and queued in the
step's ``ScalarBuffer`` as vectors. The update-to-weight ratio
``||p_after - p_before|| / ||p_after||`` needs a copy of the parameters
before the optimizer steps, so it is taken on statistics steps only, and for
a large parameter on a strided sample of at most ``UPDATE_SAMPLE`` elements:
the sampled update norm, scaled by ``sqrt(numel / sample)``, estimates the
whole one without copying the whole parameter (a full copy of a ResNet-18
cost ~40 ms a statistics step).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
from torch.nn.parameter import is_lazy

from tensorscope.hooks.registry import synced_parameters
from tensorscope.hooks.stats import VectorRef, sq_norm
from tensorscope.hooks.tensor_kinds import kind_of, values_view

if TYPE_CHECKING:  # pragma: no cover
    from tensorscope.hooks.capture import StepBuffer
    from tensorscope.hooks.registry import ModelIndex

_foreach_norm = getattr(torch, "_foreach_norm", None)
UPDATE_SAMPLE = 16384


def local_shard(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a sharded parameter (an FSDP2 ``DTensor``), else ``t``.

    Every norm is taken on the local shard: an operation on the ``DTensor``
    itself would start a collective on the user's process group (and a rank
    that does it alone hangs the job).
    """
    to_local = getattr(t, "to_local", None)
    return to_local() if to_local is not None else t


def _update_view(p: torch.Tensor) -> tuple[torch.Tensor, float]:
    """A strided view of at most ``UPDATE_SAMPLE`` elements of ``p``, and the
    factor that scales the view's norm to an estimate of the whole tensor's."""
    flat = local_shard(p).detach().reshape(-1)
    n = flat.numel()
    if n <= UPDATE_SAMPLE:
        return flat, 1.0
    view = flat[::-(-n // UPDATE_SAMPLE)]
    return view, math.sqrt(n / view.numel())


def _strided(t: torch.Tensor) -> torch.Tensor:
    """``t``, or for a sparse tensor (an ``nn.Embedding(sparse=True)`` gradient) its
    stored values (``tensor_kinds.values_view``): norm kernels take strided tensors only."""
    if t.layout == torch.strided:
        return t
    kind = kind_of(t)
    view = values_view(t, kind) if kind.startswith("sparse_") else None
    return t if view is None else view


def _norms(tensors: list[torch.Tensor]) -> torch.Tensor | None:
    """Norms of ``tensors`` as one vector on the first tensor's device (float32).

    On the CPU, where ``_foreach_norm`` is a loop of ``vector_norm`` calls,
    the square roots of ``sq_norm`` (a dot product, a quarter cheaper on large
    tensors) are taken instead; on accelerators ``_foreach_norm`` is one fused
    kernel.
    """
    if not tensors:
        return None
    tensors = [_strided(local_shard(t)) for t in tensors]
    if all(t.is_cpu and not t.is_sparse for t in tensors):
        squares = [sq_norm(t.detach()) for t in tensors]
        try:
            return torch.stack(squares).sqrt_()
        except RuntimeError:   # mixed dtypes: float32 throughout
            return torch.stack([q.to(torch.float32) for q in squares]).sqrt_()
    if _foreach_norm is not None:
        try:
            norms = _foreach_norm(tensors)
        except RuntimeError:  # mixed devices/dtypes on an old torch: one by one
            norms = [torch.linalg.vector_norm(t) for t in tensors]
    else:
        norms = [torch.linalg.vector_norm(t) for t in tensors]
    try:
        return torch.stack(norms)
    except RuntimeError:  # norms on several devices
        device = tensors[0].device
        return torch.stack([n.to(device=device, dtype=torch.float32) for n in norms])


class ParamWork:
    """The queued parameter numbers of one step."""

    __slots__ = ("rows", "norm_at", "grad_at", "grad_index", "update_at", "update_index",
                 "update_scale", "snapshots")

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.norm_at: VectorRef | None = None
        self.grad_at: VectorRef | None = None
        self.grad_index: list[int] = []      # rows with a gradient, in queue order
        self.update_at: VectorRef | None = None
        self.update_index: list[int] = []
        self.update_scale: list[float] = []
        self.snapshots: dict[int, tuple[torch.Tensor, torch.Tensor, float]] = {}


class ParamTracker:
    """Collects parameter numbers for the watch's roots and optimizers."""

    def __init__(self, index: "ModelIndex", optimizers: list[Any], mode: str = "default") -> None:
        self.index = index
        self.optimizers = optimizers
        self.mode = mode
        self._layout_key: tuple | None = None   # compared with ==
        self._layout: tuple[list[dict[str, Any]], list[torch.Tensor]] = ([], [])
        # the rows of a step that queues no number: (layout, requires_grad flags, rows),
        # the same list for every such step while neither changes (read-only)
        self._plain: tuple[Any, tuple[bool, ...], list[dict[str, Any]]] | None = None
        # lazy modules' parameters not yet materialised, left out of the rows until
        # their first forward gives them a shape (the same objects, then Parameters)
        self._lazy: list[torch.Tensor] = []

    def clear(self) -> None:
        """Forget every parameter (on detach)."""
        self._layout_key, self._layout = None, ([], [])
        self._plain = None
        self._lazy = []

    def _work(self, step: "StepBuffer") -> ParamWork:
        if step.param_work is None:
            step.param_work = ParamWork()
        return step.param_work

    def before_optimizer_step(self, optimizer: Any, step: "StepBuffer",
                              closure: bool = False) -> None:
        """Copy the optimizer's parameters (statistics steps only): those with a
        gradient, or with ``closure`` (``optimizer.step(closure)``: Lightning's
        automatic optimization, LBFGS), every one that takes gradients, since the
        closure computes them inside the step."""
        if not step.param_step:
            return
        work = self._work(step)
        params = [p for g in optimizer.param_groups for p in g["params"]
                  if (p.grad is not None or closure and p.requires_grad)
                  and id(p) not in work.snapshots]
        if not params:
            return
        views = [_update_view(p) for p in params]
        with torch.no_grad():
            copies = [v.clone() for v, _ in views]
        for p, c, (_, scale) in zip(params, copies, views):
            work.snapshots[id(p)] = (p, c, scale)

    def queue(self, step: "StepBuffer") -> None:
        """Queue the numbers of every known parameter.

        ``shapes`` mode: names and shapes only. ``default``: gradient norms,
        norms and update ratios every ``stats_every`` steps. ``full``:
        gradient norms every step, the rest every ``stats_every`` steps.
        """
        work = self._work(step)
        layout = self._rows()
        templates, tensors = layout
        flags = tuple([t.requires_grad for t in tensors])
        if self.mode == "shapes" or not (step.param_step or step.norm_step
                                         or self.mode == "full"):
            # no number is queued, so ``finish`` leaves the rows as they are: the
            # steps like this one share one list (nothing changes a row once emitted)
            plain = self._plain
            if plain is None or plain[0] is not layout or plain[1] != flags:
                plain = self._plain = (layout, flags, _filled(templates, flags))
            work.rows = plain[2]
            return
        work.rows = _filled(templates, flags)
        with torch.no_grad():
            if step.param_step or step.norm_step:
                norms = _norms(tensors)
                if norms is not None:
                    work.norm_at = step.buf.add_vector(norms)
            with_grad = [i for i, t in enumerate(tensors) if t.grad is not None]
            grads = _norms([tensors[i].grad for i in with_grad])
            if grads is not None:
                work.grad_at, work.grad_index = step.buf.add_vector(grads), with_grad
            self._queue_updates(work, tensors, step)

    def _queue_updates(self, work: ParamWork, tensors: list[torch.Tensor], step: "StepBuffer") -> None:
        """``||p_after - p_before||``: subtract in place from the copies, then one norm call."""
        if not work.snapshots:
            return
        index, params, copies, scales = [], [], [], []
        for i, t in enumerate(tensors):
            snap = work.snapshots.get(id(t))
            if snap is not None and snap[0] is t:
                index.append(i)
                params.append(_update_view(t)[0])
                copies.append(snap[1])
                scales.append(snap[2])
        work.snapshots = {}
        if not copies:
            return
        if hasattr(torch, "_foreach_sub_"):
            torch._foreach_sub_(copies, params)
        else:
            for c, p in zip(copies, params):
                c.sub_(p)
        norms = _norms(copies)
        if norms is not None:
            work.update_at, work.update_index = step.buf.add_vector(norms), index
            work.update_scale = scales

    def _rows(self) -> tuple[list[dict[str, Any]], list[torch.Tensor]]:
        """Row templates and tensors, rebuilt only when roots or optimizers change."""
        key = (self.index.version, [(id(o), [len(g["params"]) for g in o.param_groups])
                                    for o in self.optimizers])
        if key != self._layout_key or self.index.stale or (
                self._lazy and not all(map(is_lazy, self._lazy))):
            self._layout_key, self._layout = key, self._build_rows()
        return self._layout

    def _build_rows(self) -> tuple[list[dict[str, Any]], list[torch.Tensor]]:
        self.index.reread_parameters()   # rare: roots or optimizers changed
        in_opt: dict[int, str] = {}
        for k, opt in enumerate(self.optimizers):
            for g, group in enumerate(opt.param_groups):
                for i, p in enumerate(group["params"]):
                    in_opt.setdefault(id(p), f"optimizer{k}.group{g}.param{i}")
        rows, tensors, seen = [], [], set()
        self._lazy = []
        synced = synced_parameters(self.index.roots)
        for rid, mpath, name, p in self.index.parameters():
            seen.add(id(p))
            if is_lazy(p):
                self._lazy.append(p)
                continue
            if p.is_meta:   # no values to take numbers of (a model still on the meta device)
                continue
            rows.append(_row(name, rid, mpath, p, id(p) in in_opt, id(p) in synced))
            tensors.append(p)
        for opt in self.optimizers:
            for group in opt.param_groups:
                for p in group["params"]:
                    if id(p) not in seen:
                        seen.add(id(p))
                        if is_lazy(p):
                            self._lazy.append(p)
                            continue
                        if p.is_meta:
                            continue
                        rows.append(_row(in_opt[id(p)], None, "", p, True, id(p) in synced))
                        tensors.append(p)
        return rows, tensors

    @staticmethod
    def finish(work: ParamWork | None, values: list[float]) -> list[dict[str, Any]]:
        """Fill the rows with the flushed values."""
        if work is None:
            return []
        rows = work.rows
        if work.norm_at is not None:
            for i, row in enumerate(rows):
                row["norm"] = values[work.norm_at.start + i]
        if work.grad_at is not None:
            for j, i in enumerate(work.grad_index):
                rows[i]["grad_norm"] = values[work.grad_at.start + j]
        if work.update_at is not None:
            for j, i in enumerate(work.update_index):
                norm = rows[i]["norm"]
                d = values[work.update_at.start + j] * work.update_scale[j]
                rows[i]["update_ratio"] = d / norm if norm and math.isfinite(norm) else None
        return rows


def _filled(templates: list[dict[str, Any]], flags: tuple[bool, ...]) -> list[dict[str, Any]]:
    """Fresh rows from the templates, with each parameter's current ``requires_grad``."""
    rows = [dict(t) for t in templates]
    for row, rg in zip(rows, flags):
        row["requires_grad"] = rg
    return rows


def _row(name: str, root: int | None, module: str, p: torch.Tensor, in_opt: bool,
         replicated: bool = False) -> dict[str, Any]:
    row = {"name": name, "root": root, "module": module, "shape": list(p.shape),
           "grad_norm": None, "norm": None, "update_ratio": None,
           "in_optimizer": in_opt, "requires_grad": p.requires_grad}
    if replicated:   # under DDP: the same on every rank after each update (rank_divergence)
        row["replicated"] = True
    local = local_shard(p)
    if local is not p:  # FSDP: the shard this rank holds; its norms are the shard's
        row.update(sharded=True, shape=list(local.shape), full_shape=list(p.shape))
    return row
